// The closed set of primitives: the unit of the compiler (docs/architecture.md).
//
// One X-macro lists every primitive with its text name (XLA's spelling where
// XLA has one) and its family. The enum, the names and the family traits all
// derive from it; switches over Op list every case and have no default, so
// adding a primitive fails to compile until every pass handles it.
#pragma once

#include <cstdint>

namespace tessel {

enum class OpFamily : std::uint8_t {
  Leaf,        // parameter, constant, iota: no operands
  Unary,       // elementwise, one operand, same shape
  Binary,      // elementwise, two operands of one shape and dtype
  Compare,     // elementwise, two operands, bool result
  Select,      // elementwise select(pred, on_true, on_false)
  Nary,        // elementwise with several operands of one shape (threefry2x32)
  Convert,     // elementwise dtype change
  Shape,       // data movement: broadcast, reshape, transpose, slice, pad, concatenate, ...
  Reduce,      // reductions over axes
  Dot,         // dot_general
  Library,     // run by a library routine on whole arrays (sort, LAPACK's factorisations)
  Annotation,  // sharding_constraint: identity that pins a sharding
  Collective,  // made only by the partitioner and shard_map
  Tuple,       // tuple, get_tuple_element: several results as one value, and one of them
  Region,      // ops with child graphs (call; later loops, branches, shard_map)
};

// How costly an op is to recompute inside a fused loop (codegen/fusion.cpp),
// and whether cost analysis counts it as a transcendental (as XLA's does).
enum class OpCost : std::uint8_t {
  Free,            // data movement or a no-op: folded into indexing
  Cheap,           // one instruction per element
  Costly,          // division, square roots
  Transcendental,  // exp, log, sin, erf, pow, atan2, ...
  Heavy,           // threefry: tens of instructions per element
  Never,           // reductions, dots, collectives, library calls: never inlined
};

// X(enumerator, text, family, cost, attribute struct of tracer/attrs.hpp)
#define TESSEL_OPS(X)                                            \
  X(parameter, "parameter", Leaf, Free, Parameter)                              \
  X(constant, "constant", Leaf, Free, Constant)                                 \
  X(iota, "iota", Leaf, Free, Iota)                                             \
  X(axis_index, "axis-index", Leaf, Never, AxisIndex)                           \
  X(neg, "negate", Unary, Cheap, None)                                          \
  X(sin, "sine", Unary, Transcendental, None)                                   \
  X(cos, "cosine", Unary, Transcendental, None)                                 \
  X(tan, "tan", Unary, Transcendental, None)                                    \
  X(tanh, "tanh", Unary, Transcendental, None)                                  \
  X(exp, "exponential", Unary, Transcendental, None)                            \
  X(expm1, "exponential-minus-one", Unary, Transcendental, None)                \
  X(log, "log", Unary, Transcendental, None)                                    \
  X(log1p, "log-plus-one", Unary, Transcendental, None)                         \
  X(sqrt, "sqrt", Unary, Costly, None)                                          \
  X(rsqrt, "rsqrt", Unary, Costly, None)                                        \
  X(logistic, "logistic", Unary, Transcendental, None)                          \
  X(erf_inv, "erf-inv", Unary, Transcendental, None)                            \
  X(erf, "erf", Unary, Transcendental, None)                                    \
  X(abs, "abs", Unary, Cheap, None)                                             \
  X(sign, "sign", Unary, Cheap, None)                                           \
  X(floor, "floor", Unary, Cheap, None)                                         \
  X(ceil, "ceil", Unary, Cheap, None)                                           \
  X(round, "round-nearest-even", Unary, Cheap, None)                            \
  X(is_finite, "is-finite", Unary, Cheap, None)                                 \
  X(not_, "not", Unary, Cheap, None)                                            \
  X(real, "real", Unary, Free, None)                                            \
  X(imag, "imag", Unary, Free, None)                                            \
  X(conj, "conj", Unary, Cheap, None)                                           \
  X(add, "add", Binary, Cheap, None)                                            \
  X(sub, "subtract", Binary, Cheap, None)                                       \
  X(mul, "multiply", Binary, Cheap, None)                                       \
  X(div, "divide", Binary, Costly, None)                                        \
  X(rem, "remainder", Binary, Costly, None)                                     \
  X(pow, "power", Binary, Transcendental, None)                                 \
  X(max, "maximum", Binary, Cheap, None)                                        \
  X(min, "minimum", Binary, Cheap, None)                                        \
  X(atan2, "atan2", Binary, Transcendental, None)                               \
  X(and_, "and", Binary, Cheap, None)                                           \
  X(or_, "or", Binary, Cheap, None)                                             \
  X(xor_, "xor", Binary, Cheap, None)                                           \
  X(shift_left, "shift-left", Binary, Cheap, None)                              \
  X(shift_right_logical, "shift-right-logical", Binary, Cheap, None)            \
  X(complex, "complex", Binary, Free, None)                                     \
  X(eq, "compare-EQ", Compare, Cheap, None)                                     \
  X(ne, "compare-NE", Compare, Cheap, None)                                     \
  X(lt, "compare-LT", Compare, Cheap, None)                                     \
  X(le, "compare-LE", Compare, Cheap, None)                                     \
  X(gt, "compare-GT", Compare, Cheap, None)                                     \
  X(ge, "compare-GE", Compare, Cheap, None)                                     \
  X(select, "select", Select, Cheap, None)                                      \
  X(threefry2x32, "threefry2x32", Nary, Heavy, Word)                            \
  X(convert, "convert", Convert, Free, None)                                    \
  X(bitcast_convert, "bitcast-convert", Convert, Free, None)                    \
  X(broadcast_in_dim, "broadcast", Shape, Free, Dimensions)                     \
  X(reshape, "reshape", Shape, Free, None)                                      \
  X(transpose, "transpose", Shape, Free, Dimensions)                            \
  X(rev, "reverse", Shape, Free, Dimensions)                                    \
  X(slice, "slice", Shape, Free, Slice)                                         \
  X(pad, "pad", Shape, Cheap, Pad)                                              \
  X(concatenate, "concatenate", Shape, Cheap, Dimension)                        \
  X(dynamic_slice, "dynamic-slice", Shape, Cheap, DynamicSlice)                 \
  X(dynamic_update_slice, "dynamic-update-slice", Shape, Cheap, None)           \
  X(gather, "gather", Shape, Cheap, Indexed)                                    \
  X(reduce_sum, "reduce-sum", Reduce, Never, Dimensions)                        \
  X(reduce_max, "reduce-max", Reduce, Never, Dimensions)                        \
  X(reduce_min, "reduce-min", Reduce, Never, Dimensions)                        \
  X(reduce_prod, "reduce-prod", Reduce, Never, Dimensions)                      \
  X(argmax, "argmax", Reduce, Never, ArgReduce)                                 \
  X(argmin, "argmin", Reduce, Never, ArgReduce)                                 \
  X(sort, "sort", Library, Never, Dimension)                                    \
  X(cumsum, "cumsum", Library, Never, Cumulative)                               \
  X(cumprod, "cumprod", Library, Never, Cumulative)                             \
  X(cummax, "cummax", Library, Never, Cumulative)                               \
  X(cummin, "cummin", Library, Never, Cumulative)                               \
  X(cumlogsumexp, "cumlogsumexp", Library, Never, Cumulative)                   \
  X(top_k, "top-k", Library, Never, TopK)                                       \
  X(scatter, "scatter", Library, Never, Indexed)                                \
  X(cholesky, "cholesky", Library, Never, Linalg)                               \
  X(distributed_cholesky, "distributed-cholesky", Library, Never, RowBlocked)   \
  X(triangular_solve, "triangular-solve", Library, Never, Linalg)               \
  X(distributed_triangular_solve, "distributed-triangular-solve", Library, Never, RowBlocked) \
  X(lu, "lu", Library, Never, Linalg)                                           \
  X(distributed_lu, "distributed-lu", Library, Never, RowBlocked)            \
  X(qr, "qr", Library, Never, Linalg)                                           \
  X(eigh, "eigh", Library, Never, Linalg)                                       \
  X(svd, "svd", Library, Never, Linalg)                                         \
  X(eig, "eig", Library, Never, Linalg)                                         \
  X(fft, "fft", Library, Never, Fft)                                            \
  X(conv, "convolution", Library, Never, Conv)                                  \
  X(reduce_window_sum, "reduce-window-sum", Shape, Cheap, ReduceWindow)         \
  X(reduce_window_max, "reduce-window-max", Shape, Cheap, ReduceWindow)         \
  X(reduce_window_min, "reduce-window-min", Shape, Cheap, ReduceWindow)         \
  X(window_select, "window-select", Shape, Never, SelectWindow)                 \
  X(select_and_gather_add, "select-and-gather-add", Shape, Cheap, SelectWindow) \
  X(select_and_scatter_add, "select-and-scatter-add", Shape, Cheap, SelectWindow) \
  X(debug_callback, "debug-callback", Library, Never, DebugCallback)            \
  X(host_call, "custom-call", Library, Never, HostCall)                         \
  X(dot_general, "dot", Dot, Never, Dot)                                        \
  X(sharding_constraint, "sharding-constraint", Annotation, Free, Constraint)    \
  X(pvary, "pvary", Annotation, Free, AxisIndex)   \
  X(stop_gradient, "stop-gradient", Annotation, Free, None)                     \
  X(checkpoint_name, "checkpoint-name", Annotation, Free, Name)                 \
  X(remat_barrier, "remat-barrier", Annotation, Free, None)                     \
  X(all_gather, "all-gather", Collective, Never, AllGather)                     \
  X(all_reduce, "all-reduce", Collective, Never, AllReduce)                     \
  X(reduce_scatter, "reduce-scatter", Collective, Never, ReduceScatter)         \
  X(all_to_all, "all-to-all", Collective, Never, AllToAll)                      \
  X(collective_permute, "collective-permute", Collective, Never, CollectivePermute) \
  X(tuple, "tuple", Tuple, Free, None)                                          \
  X(get_tuple_element, "get-tuple-element", Tuple, Free, TupleIndex)            \
  X(call, "call", Region, Never, Call)                                          \
  X(shard_map, "shard-map", Region, Never, ShardMap)                            \
  X(cond, "conditional", Region, Never, Cond)                                   \
  X(while_, "while", Region, Never, While)                                      \
  X(scan, "scan", Region, Never, Scan)                                          \
  X(custom_jvp_call, "custom-jvp-call", Region, Never, CustomJvp)               \
  X(custom_vjp_call, "custom-vjp-call", Region, Never, CustomVjp)               \
  X(custom_lin, "custom-lin", Region, Never, CustomLin)                         \
  X(remat_call, "checkpoint", Region, Never, Remat)                             \
  X(remat_lin, "checkpoint-lin", Region, Never, RematLin)

enum class Op : std::uint8_t {
#define TESSEL_X(e, text, family, cost, attrs) e,
  TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};

inline constexpr int kNumOps = 0
#define TESSEL_X(e, text, family, cost, attrs) +1
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
    ;

const char* op_name(Op op);
OpFamily op_family(Op op);
OpCost op_cost(Op op);
inline bool is_elementwise(Op op) {
  auto f = op_family(op);
  return f == OpFamily::Unary || f == OpFamily::Binary || f == OpFamily::Compare || f == OpFamily::Select ||
         f == OpFamily::Nary || f == OpFamily::Convert;
}
// add, mul, max, min, and, or, xor, eq, ne.
bool is_commutative(Op op);
// The control-flow ops: Region ops whose regions run where they stand
// (call and shard_map are inlined before the partitioned program).
constexpr bool is_control_flow(Op op) { return op == Op::cond || op == Op::while_ || op == Op::scan; }
// Those whose body runs again and again.
inline bool is_loop(Op op) { return op == Op::while_ || op == Op::scan; }

}  // namespace tessel
