// The closed set of primitives: the unit of the compiler (DESIGN.md).
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
  Library,     // run by a library routine on whole arrays (sort)
  Annotation,  // sharding_constraint: identity that pins a sharding
  Collective,  // made only by the partitioner and shard_map
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

// X(enumerator, text, family, cost)
#define TESSEL_OPS(X)                                            \
  X(parameter, "parameter", Leaf, Free)                        \
  X(constant, "constant", Leaf, Free)                          \
  X(iota, "iota", Leaf, Free)                                  \
  X(axis_index, "axis-index", Leaf, Never)                     \
  X(neg, "negate", Unary, Cheap)                               \
  X(sin, "sine", Unary, Transcendental)                        \
  X(cos, "cosine", Unary, Transcendental)                      \
  X(tan, "tan", Unary, Transcendental)                         \
  X(tanh, "tanh", Unary, Transcendental)                       \
  X(exp, "exponential", Unary, Transcendental)                 \
  X(expm1, "exponential-minus-one", Unary, Transcendental)     \
  X(log, "log", Unary, Transcendental)                         \
  X(log1p, "log-plus-one", Unary, Transcendental)              \
  X(sqrt, "sqrt", Unary, Costly)                               \
  X(rsqrt, "rsqrt", Unary, Costly)                             \
  X(logistic, "logistic", Unary, Transcendental)               \
  X(erf_inv, "erf-inv", Unary, Transcendental)                 \
  X(erf, "erf", Unary, Transcendental)                         \
  X(abs, "abs", Unary, Cheap)                                  \
  X(sign, "sign", Unary, Cheap)                                \
  X(floor, "floor", Unary, Cheap)                              \
  X(ceil, "ceil", Unary, Cheap)                                \
  X(round, "round-nearest-even", Unary, Cheap)                 \
  X(is_finite, "is-finite", Unary, Cheap)                      \
  X(not_, "not", Unary, Cheap)                                 \
  X(add, "add", Binary, Cheap)                                 \
  X(sub, "subtract", Binary, Cheap)                            \
  X(mul, "multiply", Binary, Cheap)                            \
  X(div, "divide", Binary, Costly)                             \
  X(rem, "remainder", Binary, Costly)                          \
  X(pow, "power", Binary, Transcendental)                      \
  X(max, "maximum", Binary, Cheap)                             \
  X(min, "minimum", Binary, Cheap)                             \
  X(atan2, "atan2", Binary, Transcendental)                    \
  X(and_, "and", Binary, Cheap)                                \
  X(or_, "or", Binary, Cheap)                                  \
  X(xor_, "xor", Binary, Cheap)                                \
  X(shift_left, "shift-left", Binary, Cheap)                   \
  X(shift_right_logical, "shift-right-logical", Binary, Cheap) \
  X(eq, "compare-EQ", Compare, Cheap)                          \
  X(ne, "compare-NE", Compare, Cheap)                          \
  X(lt, "compare-LT", Compare, Cheap)                          \
  X(le, "compare-LE", Compare, Cheap)                          \
  X(gt, "compare-GT", Compare, Cheap)                          \
  X(ge, "compare-GE", Compare, Cheap)                          \
  X(select, "select", Select, Cheap)                           \
  X(threefry2x32, "threefry2x32", Nary, Heavy)                 \
  X(convert, "convert", Convert, Free)                         \
  X(bitcast_convert, "bitcast-convert", Convert, Free)         \
  X(broadcast_in_dim, "broadcast", Shape, Free)                \
  X(reshape, "reshape", Shape, Free)                           \
  X(transpose, "transpose", Shape, Free)                       \
  X(rev, "reverse", Shape, Free)                               \
  X(slice, "slice", Shape, Free)                               \
  X(pad, "pad", Shape, Cheap)                                  \
  X(concatenate, "concatenate", Shape, Cheap)                  \
  X(dynamic_slice, "dynamic-slice", Shape, Cheap)              \
  X(dynamic_update_slice, "dynamic-update-slice", Shape, Cheap)\
  X(reduce_sum, "reduce-sum", Reduce, Never)                   \
  X(reduce_max, "reduce-max", Reduce, Never)                   \
  X(reduce_min, "reduce-min", Reduce, Never)                   \
  X(reduce_prod, "reduce-prod", Reduce, Never)                 \
  X(argmax, "argmax", Reduce, Never)                           \
  X(argmin, "argmin", Reduce, Never)                           \
  X(sort, "sort", Library, Never)                              \
  X(dot_general, "dot", Dot, Never)                            \
  X(sharding_constraint, "sharding-constraint", Annotation, Free)\
  X(all_gather, "all-gather", Collective, Never)               \
  X(all_reduce, "all-reduce", Collective, Never)               \
  X(reduce_scatter, "reduce-scatter", Collective, Never)       \
  X(all_to_all, "all-to-all", Collective, Never)               \
  X(collective_permute, "collective-permute", Collective, Never)

enum class Op : std::uint8_t {
#define TESSEL_X(e, text, family, cost) e,
  TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};

inline constexpr int kNumOps = 0
#define TESSEL_X(e, text, family, cost) +1
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

}  // namespace tessel
