// The elementwise family's autodiff rules: JVPs and transposes (its other
// rules are in tracer/rules_elementwise.cpp and rules_elementwise_complex.cpp).
#include <cmath>
#include <limits>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

// ------------------------------------------------------------------ autodiff

namespace {
using ad::scalar_like;
NodeRef un(NodeTable& t, Op op, const NodeRef& x) { return build::unary(t, op, x); }
NodeRef bin(NodeTable& t, Op op, const NodeRef& a, const NodeRef& b) { return build::binary(t, op, a, b); }
}  // namespace

// Unary ops: tangent = tx * f'(x), with f'(x) written with x and y = f(x).
#define TESSEL_UNARY_AD(OP, DERIV)                                                                           \
  NodeRef Rule<Op::OP>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x,                       \
                            const std::vector<NodeRef>& tx, const NodeRef& y) {                              \
    if (!tx[0]) return nullptr;                                                                              \
    const NodeRef& X = x[0];                                                                                 \
    (void)X;                                                                                                 \
    (void)y;                                                                                                 \
    return ad::mul(t, tx[0], DERIV);                                                                         \
  }                                                                                                          \
  void Rule<Op::OP>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,          \
                               std::vector<NodeRef>&) {                                                      \
    rule_util::not_linear(n);                                                                                \
  }
TESSEL_UNARY_AD(sin, un(t, Op::cos, X))
TESSEL_UNARY_AD(cos, un(t, Op::neg, un(t, Op::sin, X)))
TESSEL_UNARY_AD(tan, bin(t, Op::add, scalar_like(t, y, 1), bin(t, Op::mul, y, y)))
TESSEL_UNARY_AD(tanh, bin(t, Op::sub, scalar_like(t, y, 1), bin(t, Op::mul, y, y)))
TESSEL_UNARY_AD(exp, y)
TESSEL_UNARY_AD(expm1, bin(t, Op::add, y, scalar_like(t, y, 1)))
TESSEL_UNARY_AD(log, bin(t, Op::div, scalar_like(t, X, 1), X))
TESSEL_UNARY_AD(log1p, bin(t, Op::div, scalar_like(t, X, 1), bin(t, Op::add, X, scalar_like(t, X, 1))))
TESSEL_UNARY_AD(sqrt, bin(t, Op::div, scalar_like(t, y, 0.5), y))
TESSEL_UNARY_AD(rsqrt, bin(t, Op::mul, scalar_like(t, y, -0.5), bin(t, Op::div, y, X)))
TESSEL_UNARY_AD(logistic, bin(t, Op::mul, y, bin(t, Op::sub, scalar_like(t, y, 1), y)))
TESSEL_UNARY_AD(erf_inv, bin(t, Op::mul, scalar_like(t, y, 0.88622692545275801), un(t, Op::exp, bin(t, Op::mul, y, y))))
TESSEL_UNARY_AD(erf, bin(t, Op::mul, scalar_like(t, X, 1.1283791670955126), un(t, Op::exp, un(t, Op::neg, bin(t, Op::mul, X, X)))))
#undef TESSEL_UNARY_AD

// |x|' = sign(x) for real x; for complex x, d|x| = Re(conj(x) dx) / |x|, 0 at 0 (JAX's).
NodeRef Rule<Op::abs>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef& y) {
  if (!tx[0]) return nullptr;
  if (!is_complex(x[0]->dtype())) return ad::mul(t, tx[0], un(t, Op::sign, x[0]));
  NodeRef re = un(t, Op::real, ad::mul(t, tx[0], un(t, Op::conj, x[0])));
  NodeRef zero = bin(t, Op::eq, y, scalar_like(t, y, 0));
  NodeRef safe = build::select(t, zero, scalar_like(t, y, 1), y);
  return build::select(t, zero, scalar_like(t, y, 0), bin(t, Op::div, re, safe));
}
void Rule<Op::abs>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// Piecewise constant or non-float results: zero tangents.
TESSEL_NO_DERIVATIVE(sign)
TESSEL_NO_DERIVATIVE(floor)
TESSEL_NO_DERIVATIVE(ceil)
TESSEL_NO_DERIVATIVE(round)
TESSEL_NO_DERIVATIVE(is_finite)
TESSEL_NO_DERIVATIVE(not_)
TESSEL_NO_DERIVATIVE(and_)
TESSEL_NO_DERIVATIVE(or_)
TESSEL_NO_DERIVATIVE(xor_)
TESSEL_NO_DERIVATIVE(shift_left)
TESSEL_NO_DERIVATIVE(shift_right_logical)
TESSEL_NO_DERIVATIVE(eq)
TESSEL_NO_DERIVATIVE(ne)
TESSEL_NO_DERIVATIVE(lt)
TESSEL_NO_DERIVATIVE(le)
TESSEL_NO_DERIVATIVE(gt)
TESSEL_NO_DERIVATIVE(ge)
TESSEL_NO_DERIVATIVE(bitcast_convert)
TESSEL_NO_DERIVATIVE(threefry2x32)

NodeRef Rule<Op::neg>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return ad::neg(t, tx[0]);
}
void Rule<Op::neg>::transpose(NodeTable& t, const Node&, const NodeRef& ct, const std::vector<bool>&,
                              std::vector<NodeRef>& cts) {
  cts[0] = ad::neg(t, ct);
}

NodeRef Rule<Op::add>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return ad::add(t, tx[0], tx[1]);
}
void Rule<Op::add>::transpose(NodeTable&, const Node&, const NodeRef& ct, const std::vector<bool>& linear,
                              std::vector<NodeRef>& cts) {
  for (int k = 0; k < 2; ++k)
    if (linear[k]) cts[k] = ct;
}

NodeRef Rule<Op::sub>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return ad::add(t, tx[0], ad::neg(t, tx[1]));
}
void Rule<Op::sub>::transpose(NodeTable& t, const Node&, const NodeRef& ct, const std::vector<bool>& linear,
                              std::vector<NodeRef>& cts) {
  if (linear[0]) cts[0] = ct;
  if (linear[1]) cts[1] = ad::neg(t, ct);
}

NodeRef Rule<Op::mul>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return ad::add(t, ad::mul(t, tx[0], x[1]), ad::mul(t, tx[1], x[0]));
}
void Rule<Op::mul>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                              std::vector<NodeRef>& cts) {
  if (linear[0] && linear[1]) rule_util::not_linear(n);
  if (linear[0]) cts[0] = build::binary(t, Op::mul, ct, n.in[1]);
  if (linear[1]) cts[1] = build::binary(t, Op::mul, ct, n.in[0]);
}

NodeRef Rule<Op::div>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef& y) {
  // d(a/b) = da / b - db * (a/b) / b
  return ad::add(t, ad::div(t, tx[0], x[1]), ad::neg(t, ad::div(t, ad::mul(t, tx[1], y), x[1])));
}
void Rule<Op::div>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                              std::vector<NodeRef>& cts) {
  if (linear[1]) rule_util::not_linear(n);
  cts[0] = build::binary(t, Op::div, ct, n.in[1]);
}

NodeRef Rule<Op::rem>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  // rem(a, b) = a - b * trunc(a / b): da - db * trunc(a / b)
  if (!is_floating(x[0]->dtype())) return nullptr;
  NodeRef q = bin(t, Op::div, x[0], x[1]);
  NodeRef tq = build::select(t, bin(t, Op::lt, q, scalar_like(t, q, 0)), un(t, Op::ceil, q), un(t, Op::floor, q));
  return ad::add(t, tx[0], ad::neg(t, ad::mul(t, tx[1], tq)));
}
void Rule<Op::rem>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

NodeRef Rule<Op::pow>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef& y) {
  // d(a^b) = b a^(b-1) da + log(a) a^b db (0 where a == 0)
  NodeRef da, db;
  if (tx[0]) {
    NodeRef c = bin(t, Op::mul, x[1], bin(t, Op::pow, x[0], bin(t, Op::sub, x[1], scalar_like(t, x[1], 1))));
    da = ad::mul(t, tx[0], c);
  }
  if (tx[1]) {
    NodeRef zero = bin(t, Op::eq, x[0], scalar_like(t, x[0], 0));
    NodeRef c = build::select(t, zero, scalar_like(t, y, 0), bin(t, Op::mul, un(t, Op::log, x[0]), y));
    db = ad::mul(t, tx[1], c);
  }
  return ad::add(t, da, db);
}
void Rule<Op::pow>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// max and min: the tangent of the winner; ties share it half and half (as JAX).
namespace {
NodeRef minmax_jvp(NodeTable& t, Op cmp, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx) {
  if (!tx[0] && !tx[1]) return nullptr;
  if (!is_floating(x[0]->dtype())) return nullptr;
  NodeRef ta = tx[0] ? tx[0] : ad::zeros_like(t, x[0]);
  NodeRef tb = tx[1] ? tx[1] : ad::zeros_like(t, x[1]);
  NodeRef half = bin(t, Op::mul, bin(t, Op::add, ta, tb), scalar_like(t, ta, 0.5));
  NodeRef a_wins = bin(t, cmp, x[0], x[1]), b_wins = bin(t, cmp, x[1], x[0]);
  return build::select(t, a_wins, ta, build::select(t, b_wins, tb, half));
}
}  // namespace
NodeRef Rule<Op::max>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return minmax_jvp(t, Op::gt, x, tx);
}
void Rule<Op::max>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
NodeRef Rule<Op::min>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return minmax_jvp(t, Op::lt, x, tx);
}
void Rule<Op::min>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

NodeRef Rule<Op::atan2>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                             const NodeRef&) {
  // atan2(a, b): (b da - a db) / (a^2 + b^2)
  NodeRef r2 = bin(t, Op::add, bin(t, Op::mul, x[0], x[0]), bin(t, Op::mul, x[1], x[1]));
  NodeRef da = ad::mul(t, tx[0], bin(t, Op::div, x[1], r2));
  NodeRef db = ad::mul(t, tx[1], un(t, Op::neg, bin(t, Op::div, x[0], r2)));
  return ad::add(t, da, db);
}
void Rule<Op::atan2>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

NodeRef Rule<Op::select>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                              const NodeRef&) {
  if (!tx[1] && !tx[2]) return nullptr;
  return build::select(t, x[0], tx[1] ? tx[1] : ad::zeros_like(t, x[1]), tx[2] ? tx[2] : ad::zeros_like(t, x[2]));
}
void Rule<Op::select>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                 std::vector<NodeRef>& cts) {
  if (linear[0]) rule_util::not_linear(n);
  NodeRef zero = ad::zeros_like(t, ct);
  if (linear[1]) cts[1] = build::select(t, n.in[0], ct, zero);
  if (linear[2]) cts[2] = build::select(t, n.in[0], zero, ct);
}

NodeRef Rule<Op::convert>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                               const std::vector<NodeRef>& tx, const NodeRef&) {
  if (!tx[0] || !is_inexact(x[0]->dtype()) || !is_inexact(n.dtype())) return nullptr;
  return build::convert(t, tx[0], n.dtype(), n.aval.weak_type);
}
void Rule<Op::convert>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                  std::vector<NodeRef>& cts) {
  cts[0] = build::convert(t, ct, n.in[0]->dtype(), n.in[0]->aval.weak_type);
}

// Printing: elementwise ops carry no attributes but threefry's word.

// Partitioning: each device runs the op on its tiles.
TESSEL_LOCAL_SAME_OP(is_finite)
TESSEL_LOCAL_SAME_OP(select)
TESSEL_LOCAL_SAME_OP(convert)
TESSEL_LOCAL_SAME_OP(bitcast_convert)
TESSEL_LOCAL_SAME_OP(threefry2x32)


// Batching: elementwise ops apply to batched operands as they are (unbatched ones broadcast).
TESSEL_BATCH_SAME_OP(neg)
TESSEL_BATCH_SAME_OP(sin)
TESSEL_BATCH_SAME_OP(cos)
TESSEL_BATCH_SAME_OP(tan)
TESSEL_BATCH_SAME_OP(tanh)
TESSEL_BATCH_SAME_OP(exp)
TESSEL_BATCH_SAME_OP(expm1)
TESSEL_BATCH_SAME_OP(log)
TESSEL_BATCH_SAME_OP(log1p)
TESSEL_BATCH_SAME_OP(sqrt)
TESSEL_BATCH_SAME_OP(rsqrt)
TESSEL_BATCH_SAME_OP(logistic)
TESSEL_BATCH_SAME_OP(erf_inv)
TESSEL_BATCH_SAME_OP(erf)
TESSEL_BATCH_SAME_OP(abs)
TESSEL_BATCH_SAME_OP(sign)
TESSEL_BATCH_SAME_OP(floor)
TESSEL_BATCH_SAME_OP(ceil)
TESSEL_BATCH_SAME_OP(round)
TESSEL_BATCH_SAME_OP(is_finite)
TESSEL_BATCH_SAME_OP(not_)
TESSEL_BATCH_SAME_OP(add)
TESSEL_BATCH_SAME_OP(sub)
TESSEL_BATCH_SAME_OP(mul)
TESSEL_BATCH_SAME_OP(div)
TESSEL_BATCH_SAME_OP(rem)
TESSEL_BATCH_SAME_OP(pow)
TESSEL_BATCH_SAME_OP(max)
TESSEL_BATCH_SAME_OP(min)
TESSEL_BATCH_SAME_OP(atan2)
TESSEL_BATCH_SAME_OP(and_)
TESSEL_BATCH_SAME_OP(or_)
TESSEL_BATCH_SAME_OP(xor_)
TESSEL_BATCH_SAME_OP(shift_left)
TESSEL_BATCH_SAME_OP(shift_right_logical)
TESSEL_BATCH_SAME_OP(eq)
TESSEL_BATCH_SAME_OP(ne)
TESSEL_BATCH_SAME_OP(lt)
TESSEL_BATCH_SAME_OP(le)
TESSEL_BATCH_SAME_OP(gt)
TESSEL_BATCH_SAME_OP(ge)
TESSEL_BATCH_SAME_OP(select)
TESSEL_BATCH_SAME_OP(threefry2x32)
TESSEL_BATCH_SAME_OP(convert)
TESSEL_BATCH_SAME_OP(bitcast_convert)

}  // namespace tessel
