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

// X(enumerator, text, family)
#define TESSEL_OPS(X)                                            \
  X(parameter, "parameter", Leaf)                                \
  X(constant, "constant", Leaf)                                  \
  X(iota, "iota", Leaf)                                          \
  X(axis_index, "axis-index", Leaf)                              \
  X(neg, "negate", Unary)                                        \
  X(sin, "sine", Unary)                                          \
  X(cos, "cosine", Unary)                                        \
  X(tan, "tan", Unary)                                           \
  X(tanh, "tanh", Unary)                                         \
  X(exp, "exponential", Unary)                                   \
  X(expm1, "exponential-minus-one", Unary)                       \
  X(log, "log", Unary)                                           \
  X(log1p, "log-plus-one", Unary)                                \
  X(sqrt, "sqrt", Unary)                                         \
  X(rsqrt, "rsqrt", Unary)                                       \
  X(logistic, "logistic", Unary)                                 \
  X(erf_inv, "erf-inv", Unary)                                   \
  X(erf, "erf", Unary)                                           \
  X(abs, "abs", Unary)                                           \
  X(sign, "sign", Unary)                                         \
  X(floor, "floor", Unary)                                       \
  X(ceil, "ceil", Unary)                                         \
  X(round, "round-nearest-even", Unary)                          \
  X(is_finite, "is-finite", Unary)                               \
  X(not_, "not", Unary)                                          \
  X(add, "add", Binary)                                          \
  X(sub, "subtract", Binary)                                     \
  X(mul, "multiply", Binary)                                     \
  X(div, "divide", Binary)                                       \
  X(rem, "remainder", Binary)                                    \
  X(pow, "power", Binary)                                        \
  X(max, "maximum", Binary)                                      \
  X(min, "minimum", Binary)                                      \
  X(atan2, "atan2", Binary)                                      \
  X(and_, "and", Binary)                                         \
  X(or_, "or", Binary)                                           \
  X(xor_, "xor", Binary)                                         \
  X(shift_left, "shift-left", Binary)                            \
  X(shift_right_logical, "shift-right-logical", Binary)          \
  X(eq, "compare-EQ", Compare)                                   \
  X(ne, "compare-NE", Compare)                                   \
  X(lt, "compare-LT", Compare)                                   \
  X(le, "compare-LE", Compare)                                   \
  X(gt, "compare-GT", Compare)                                   \
  X(ge, "compare-GE", Compare)                                   \
  X(select, "select", Select)                                    \
  X(threefry2x32, "threefry2x32", Nary)                          \
  X(convert, "convert", Convert)                                 \
  X(bitcast_convert, "bitcast-convert", Convert)                 \
  X(broadcast_in_dim, "broadcast", Shape)                        \
  X(reshape, "reshape", Shape)                                   \
  X(transpose, "transpose", Shape)                               \
  X(rev, "reverse", Shape)                                       \
  X(slice, "slice", Shape)                                       \
  X(pad, "pad", Shape)                                           \
  X(concatenate, "concatenate", Shape)                           \
  X(dynamic_slice, "dynamic-slice", Shape)                       \
  X(dynamic_update_slice, "dynamic-update-slice", Shape)         \
  X(reduce_sum, "reduce-sum", Reduce)                            \
  X(reduce_max, "reduce-max", Reduce)                            \
  X(reduce_min, "reduce-min", Reduce)                            \
  X(reduce_prod, "reduce-prod", Reduce)                          \
  X(argmax, "argmax", Reduce)                                    \
  X(argmin, "argmin", Reduce)                                    \
  X(sort, "sort", Library)                                       \
  X(dot_general, "dot", Dot)                                     \
  X(sharding_constraint, "sharding-constraint", Annotation)      \
  X(all_gather, "all-gather", Collective)                        \
  X(all_reduce, "all-reduce", Collective)                        \
  X(reduce_scatter, "reduce-scatter", Collective)                \
  X(all_to_all, "all-to-all", Collective)                        \
  X(collective_permute, "collective-permute", Collective)

enum class Op : std::uint8_t {
#define TESSEL_X(e, text, family) e,
  TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};

inline constexpr int kNumOps = 0
#define TESSEL_X(e, text, family) +1
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
    ;

const char* op_name(Op op);
OpFamily op_family(Op op);
inline bool is_elementwise(Op op) {
  auto f = op_family(op);
  return f == OpFamily::Unary || f == OpFamily::Binary || f == OpFamily::Compare || f == OpFamily::Select ||
         f == OpFamily::Nary || f == OpFamily::Convert;
}
// add, mul, max, min, and, or, xor, eq, ne.
bool is_commutative(Op op);

}  // namespace tessel
