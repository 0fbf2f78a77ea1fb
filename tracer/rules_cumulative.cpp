// Rules of the cumulative reductions (JAX's cumsum, cumprod, cummax, cummin
// and cumlogsumexp primitives) and of stop_gradient.
//
// A cumulative op scans one dimension: out[i] = x[0] (+) x[1] (+) ... (+) x[i]
// (from the end when `reverse`). Split over devices along that dimension,
// each device scans its own block, the blocks' totals are all-gathered (one
// value per device and line, never the array), and each device combines the
// totals of the blocks before it (after it, reversed) into its scan.
// Padding of an uneven split is set to the op's identity first, so the last
// real block's total is exact.
#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

namespace {

// The binary op that combines two partial scans.
Op combine_of(Op op) {
  switch (op) {
    case Op::cumsum: return Op::add;
    case Op::cumprod: return Op::mul;
    case Op::cummax: return Op::max;
    case Op::cummin: return Op::min;
    case Op::cumlogsumexp: return Op::add;  // in log space: logaddexp (combine() below)
    default: throw InternalError(cat(op_name(op), " is not a cumulative op"));
  }
}

// The reduction whose identity pads blocks and masks totals.
Op identity_op(Op op) {
  switch (op) {
    case Op::cumsum: return Op::reduce_sum;
    case Op::cumprod: return Op::reduce_prod;
    case Op::cummax:
    case Op::cumlogsumexp: return Op::reduce_max;  // -inf: exp(-inf) = 0
    case Op::cummin: return Op::reduce_min;
    default: throw InternalError(cat(op_name(op), " is not a cumulative op"));
  }
}

Aval infer_cumulative(Op op, const std::vector<Aval>& in, const attr::Cumulative& p) {
  expect_arity(op, in, 1);
  const Aval& x = in[0];
  if (p.dimension < 0 || p.dimension >= std::int64_t(x.shape.size()))
    throw ShapeError(cat(op_name(op), ": axis ", p.dimension, " is out of bounds for ", avals_str(in)));
  if (x.dtype == DType::bool_) throw TypeError(cat(op_name(op), " of a boolean array (", avals_str(in), ")"));
  if (op == Op::cumsum) check_summable(op, in);
  if ((op == Op::cummax || op == Op::cummin) && is_complex(x.dtype))
    throw TypeError(cat(op_name(op), ": complex numbers are unordered, got ", avals_str(in)));
  if (op == Op::cumlogsumexp && !is_floating(x.dtype))
    throw TypeError(cat(op_name(op), " requires a real floating-point operand, got ", avals_str(in)));
  Aval o = x;
  o.tuple = false;
  return o;
}

template <class T>
T combine(Op op, T a, T b) {
  if constexpr (is_complex_v<T>) {
    if (op == Op::cumsum) return a + b;
    return a * b;
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case Op::cumsum: return a + b;
      case Op::cumprod: return a * b;
      case Op::cummax: return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::max(a, b);
      case Op::cummin: return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::min(a, b);
      default: {  // logaddexp
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        const T m = std::max(a, b);
        if (std::isinf(m)) return m;  // -inf with -inf, or +inf with anything
        return m + std::log1p(std::exp(-std::fabs(a - b)));
      }
    }
  } else {
    // Integers wrap, as XLA's: computed unsigned.
    using U = wrap_unsigned_t<T>;
    switch (op) {
      case Op::cumsum: return T(U(a) + U(b));
      case Op::cumprod: return T(U(a) * U(b));
      case Op::cummax: return std::max(a, b);
      default: return std::min(a, b);
    }
  }
}

}  // namespace

namespace {

// One cumulative op over `s` along d, the op a constant (its combine
// inlined and its switch folded in each loop).
template <Op O, class T>
void lines(const Shape& s, std::int64_t d, bool reverse, const T* x, T* y) {
  const std::int64_t len = s[std::size_t(d)], stride = row_major_strides(s)[std::size_t(d)];
  const std::int64_t n = numel(s), block = len * stride, step = reverse ? -1 : 1;
  if (stride > 1) {
    // Along a dim that is not the last: row after row of the block, each
    // line's combines in the same order as one line at a time, but the
    // memory read in order (a line at a time read one element per line of
    // cache: a 4096^2 cumsum along dim 0 took 20x one along dim 1).
    for (std::int64_t outer = 0; outer < n; outer += block) {
      std::int64_t i = reverse ? len - 1 : 0;
      std::copy(x + outer + i * stride, x + outer + (i + 1) * stride, y + outer + i * stride);
      for (std::int64_t k = 1; k < len; ++k) {
        const T* prev = y + outer + i * stride;
        i += step;
        const T* xi = x + outer + i * stride;
        T* yi = y + outer + i * stride;
        for (std::int64_t inner = 0; inner < stride; ++inner) yi[inner] = combine(O, prev[inner], xi[inner]);
      }
    }
    return;
  }
  for (std::int64_t base = 0; base < n; base += len) {
    std::int64_t i = reverse ? len - 1 : 0;
    T acc = x[base + i];
    y[base + i] = acc;
    for (std::int64_t k = 1; k < len; ++k) {
      i += step;
      acc = combine(O, acc, x[base + i]);
      y[base + i] = acc;
    }
  }
}

}  // namespace

void cumulative_lines(Op op, DType dtype, const Shape& s, std::int64_t d, bool reverse, const void* in, void* out) {
  if (s[std::size_t(d)] == 0) return;
  visit_wide_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw InternalError("a cumulative op of booleans");
    } else {
      const T* x = static_cast<const T*>(in);
      T* y = static_cast<T*>(out);
      switch (op) {
        case Op::cumsum: return lines<Op::cumsum>(s, d, reverse, x, y);
        case Op::cumprod: return lines<Op::cumprod>(s, d, reverse, x, y);
        case Op::cummax: return lines<Op::cummax>(s, d, reverse, x, y);
        case Op::cummin: return lines<Op::cummin>(s, d, reverse, x, y);
        default: return lines<Op::cumlogsumexp>(s, d, reverse, x, y);
      }
    }
  });
}

namespace {

void eval_cumulative(Op op, const std::vector<const HostArray*>& in, const attr::Cumulative& p, const Aval& aval,
                     HostArray& out) {
  rule_util::allocate(out, aval);
  cumulative_lines(op, aval.dtype, aval.shape, p.dimension, p.reverse, in[0]->bytes.data(), out.bytes.data());
}

// Every dim its own factor; the scanned one may be split too (local_cumulative).
FactorRule cumulative_factors(const Node& n) {
  FactorRule r;
  std::vector<std::vector<int>> dims;
  for (int d = 0; d < n.rank(); ++d) dims.push_back({r.add_factor(n.shape()[std::size_t(d)])});
  r.operands = {dims};
  r.result = dims;
  return r;
}

NodeRef identity_like(NodeTable& t, Op op, const NodeRef& like) {
  Literal id = reduction_identity(identity_op(op), like->dtype());
  return build::broadcast_in_dim(t, build::constant(t, std::make_shared<const Literal>(std::move(id))), like->shape(), {});
}

// a (+) b for the op's combine, elementwise (a and b of one shape).
NodeRef combine_nodes(NodeTable& t, Op op, const NodeRef& a, const NodeRef& b) {
  if (op != Op::cumlogsumexp) return build::binary(t, combine_of(op), a, b);
  // logaddexp(a, b) = m + log1p(exp(-|a - b|)), m = max(a, b); m when m is infinite.
  NodeRef m = build::binary(t, Op::max, a, b);
  NodeRef d = build::unary(t, Op::neg, build::unary(t, Op::abs, build::binary(t, Op::sub, a, b)));
  NodeRef r = build::binary(t, Op::add, m, build::unary(t, Op::log1p, build::unary(t, Op::exp, d)));
  NodeRef finite = build::unary(t, Op::is_finite, m);
  // NaN operands: max gives NaN and so does r; an infinite m is the answer.
  return build::select(t, finite, r, m);
}

NodeRef local_cumulative(Op op, LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                         const std::vector<AxisSharding>& op_sh) {
  NodeTable& t = b.table();
  const auto& p = n.attr<attr::Cumulative>();
  const std::int64_t d = p.dimension;
  const std::vector<int>& axes = op_sh[0].dims[std::size_t(d)];
  NodeRef x = ops[0];
  if (axes.empty() || b.tiles(axes) == 1) return build::cumulative(t, op, x, d, p.reverse);
  const Shape tile = x->shape();
  const std::int64_t len = tile[std::size_t(d)];
  const std::int64_t ntiles = b.tiles(axes);
  // Padding (global positions past the end) becomes the identity.
  x = b.mask(x, n.shape(), op_sh[0], {int(d)}, reduction_identity(identity_op(op), x->dtype()));
  NodeRef scan = build::cumulative(t, op, x, d, p.reverse);
  // This block's total: the scan's last element (its first, reversed), one per line.
  std::vector<std::int64_t> start(tile.size(), 0), limit(tile.begin(), tile.end()), strides(tile.size(), 1);
  start[std::size_t(d)] = p.reverse ? 0 : len - 1;
  limit[std::size_t(d)] = start[std::size_t(d)] + 1;
  NodeRef total = build::slice(t, scan, start, limit, strides);
  NodeRef totals = build::all_gather(t, total, b.device_mesh(), axes, d);  // [.., ntiles, ..]
  // Keep the totals of the blocks before this one (after it, reversed); the identity elsewhere.
  const Shape ts = totals->shape();
  NodeRef k = build::iota(t, DType::int32, ts, d);
  NodeRef me = build::broadcast_in_dim(t, b.offset(axes, 1), ts, {});
  NodeRef keep = build::binary(t, p.reverse ? Op::gt : Op::lt, k, me);
  NodeRef masked = build::select(t, keep, totals, identity_like(t, op, totals));
  // Combined in block order: a scan of the masked totals, its last (first) element.
  NodeRef prefix_scan = build::cumulative(t, op, masked, d, p.reverse);
  std::vector<std::int64_t> s2(ts.size(), 0), l2(ts.begin(), ts.end()), st2(ts.size(), 1);
  s2[std::size_t(d)] = p.reverse ? 0 : ntiles - 1;
  l2[std::size_t(d)] = s2[std::size_t(d)] + 1;
  NodeRef prefix = build::slice(t, prefix_scan, s2, l2, st2);  // one per line, dim d of size 1
  std::vector<std::int64_t> bdims;
  for (std::int64_t i = 0; i < std::int64_t(tile.size()); ++i) bdims.push_back(i);
  NodeRef wide = build::broadcast_in_dim(t, prefix, tile, bdims);
  return combine_nodes(t, op, wide, scan);
}

NodeRef batch_cumulative(Op op, NodeTable& t, const Node& n, const std::vector<NodeRef>& x) {
  const auto& p = n.attr<attr::Cumulative>();
  return build::cumulative(t, op, x[0], p.dimension + 1, p.reverse);
}

NodeRef cum(NodeTable& t, Op op, const NodeRef& x, const attr::Cumulative& p) {
  return build::cumulative(t, op, x, p.dimension, p.reverse);
}

}  // namespace

#define TESSEL_CUMULATIVE_RULES(OP)                                                                                 \
  Aval Rule<Op::OP>::infer(const std::vector<Aval>& in, const A& p, const Aval&) { return infer_cumulative(Op::OP, in, p); } \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {   \
    eval_cumulative(Op::OP, in, p, aval, out);                                                                      \
  }                                                                                                                 \
  FactorRule Rule<Op::OP>::factors(const Node& n) { return cumulative_factors(n); }                                 \
  NodeRef Rule<Op::OP>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,                      \
                              const std::vector<AxisSharding>& op_sh, const AxisSharding&) {                        \
    return local_cumulative(Op::OP, b, n, ops, op_sh);                                                              \
  }                                                                                                                 \
  NodeRef Rule<Op::OP>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,  \
                              const BatchInfo&) {                                                                   \
    return batch_cumulative(Op::OP, t, n, x);                                                                       \
  }
TESSEL_CUMULATIVE_RULES(cumsum)
TESSEL_CUMULATIVE_RULES(cumprod)
TESSEL_CUMULATIVE_RULES(cummax)
TESSEL_CUMULATIVE_RULES(cummin)
TESSEL_CUMULATIVE_RULES(cumlogsumexp)
#undef TESSEL_CUMULATIVE_RULES

// ------------------------------------------------------------------ autodiff

// cumsum is linear; its transpose is the scan the other way.
NodeRef Rule<Op::cumsum>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                              const NodeRef&) {
  return tx[0] ? cum(t, Op::cumsum, tx[0], attrs_of(n)) : nullptr;
}
void Rule<Op::cumsum>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                 std::vector<NodeRef>& cts) {
  attr::Cumulative p = attrs_of(n);
  p.reverse = !p.reverse;
  cts[0] = cum(t, Op::cumsum, ct, p);
}

// cumprod, exact with zeros: with z the zeros of x, x' = x with ones there,
// Q = cumprod(x') and Z = cumsum(z): where no zero came yet the tangent is
// Q * cumsum(tx / x'); where exactly one did, Q * cumsum(tx at the zero);
// after two, zero.
NodeRef Rule<Op::cumprod>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                               const std::vector<NodeRef>& tx, const NodeRef&) {
  if (!tx[0]) return nullptr;
  const auto& p = attrs_of(n);
  NodeRef zero = ad::zeros_like(t, x[0]);
  NodeRef z = build::binary(t, Op::eq, x[0], zero);
  NodeRef xp = build::select(t, z, ad::scalar_like(t, x[0], 1), x[0]);
  NodeRef q = cum(t, Op::cumprod, xp, p);
  NodeRef count = cum(t, Op::cumsum, build::convert(t, z, DType::int32), p);
  auto count_is = [&](double v) {
    return build::binary(t, Op::eq, count, build::broadcast_in_dim(t, build::scalar(t, DType::int32, v), count->shape(), {}));
  };
  NodeRef none = ad::mul(t, cum(t, Op::cumsum, ad::div(t, tx[0], xp), p), q);
  NodeRef at_zero = build::select(t, z, tx[0], ad::zeros_like(t, tx[0]));
  NodeRef one = ad::mul(t, cum(t, Op::cumsum, at_zero, p), q);
  return build::select(t, count_is(0), none, build::select(t, count_is(1), one, ad::zeros_like(t, tx[0])));
}
void Rule<Op::cumprod>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                  std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// cummax, cummin: the tangent of the element each running extreme came from
// (the latest one that reached it; at ties JAX's max rule would split it).
namespace {
NodeRef extreme_jvp(NodeTable& t, Op op, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                    const NodeRef& y) {
  if (!tx[0]) return nullptr;
  const auto& p = n.attr<attr::Cumulative>();
  const Shape& s = x[0]->shape();
  const std::int64_t d = p.dimension, len = s[std::size_t(d)];
  NodeRef hit = build::binary(t, Op::eq, x[0], y);
  NodeRef pos = build::iota(t, DType::int32, s, d);
  // Forward: the largest position <= i that hit; reversed: the smallest >= i.
  NodeRef none = build::broadcast_in_dim(t, build::scalar(t, DType::int32, p.reverse ? double(len) : -1.0), s, {});
  NodeRef from = build::cumulative(t, p.reverse ? Op::cummin : Op::cummax, build::select(t, hit, pos, none), d, p.reverse);
  // A NaN never hits; clamp so the gather stays in bounds (its tangent is NaN's anyway).
  attr::Indexed how;
  how.axis = d;
  how.along = true;
  how.mode = attr::IndexMode::clip;
  (void)op;
  return build::gather(t, tx[0], from, how);
}
}  // namespace
NodeRef Rule<Op::cummax>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                              const NodeRef& y) {
  return extreme_jvp(t, Op::cummax, n, x, tx, y);
}
NodeRef Rule<Op::cummin>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                              const NodeRef& y) {
  return extreme_jvp(t, Op::cummin, n, x, tx, y);
}
void Rule<Op::cummax>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                 std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
void Rule<Op::cummin>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                 std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// cumlogsumexp: dy[i] = sum over j <= i of exp(x[j] - y[i]) tx[j], which
// is the linear recurrence dy[i] = a[i] dy[i-1] + b[i] with a[i] =
// exp(y[i-1] - y[i]) and b[i] = exp(x[i] - y[i]) tx[i], both weights in
// [0, 1] (y only grows). It runs as a parallel prefix (Hillis-Steele: log2 n
// steps, each combining every element with the one s before it: (a, b) <-
// (a' a, a b' + b)), so memory stays O(n) per line (JAX differentiates its
// associative_scan of logaddexp, the same combine).
NodeRef Rule<Op::cumlogsumexp>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                    const std::vector<NodeRef>& tx, const NodeRef& y) {
  if (!tx[0]) return nullptr;
  const auto& p = attrs_of(n);
  const Shape& s = x[0]->shape();
  const std::int64_t d = p.dimension, len = s[std::size_t(d)];
  // v[i - k] (forward; v[i + k] reversed), `fill` where that is outside.
  auto before = [&](const NodeRef& v, std::int64_t k, double fill) {
    std::vector<std::int64_t> lo(s.size(), 0), hi = s, pad_lo(s.size(), 0), pad_hi(s.size(), 0);
    (p.reverse ? lo : hi)[std::size_t(d)] = p.reverse ? k : len - k;
    (p.reverse ? pad_hi : pad_lo)[std::size_t(d)] = k;
    return build::pad(t, build::slice(t, v, lo, hi), build::scalar(t, v->dtype(), fill), pad_lo, pad_hi);
  };
  // The first element is x's own (y = x there, weight 1 even at an
  // infinity, as JAX's scan leaves it), and has no element before it.
  NodeRef first = build::binary(t, Op::eq, build::iota(t, DType::int32, s, d),
                                build::broadcast_in_dim(t, build::scalar(t, DType::int32, p.reverse ? double(len - 1) : 0.0), s, {}));
  NodeRef a = build::select(t, first, ad::zeros_like(t, y),
                            build::unary(t, Op::exp, build::binary(t, Op::sub, before(y, 1, 0), y)));
  NodeRef b = build::select(t, first, tx[0], ad::mul(t, build::unary(t, Op::exp, build::binary(t, Op::sub, x[0], y)), tx[0]));
  for (std::int64_t k = 1; k < len; k *= 2) {
    NodeRef b_new = build::binary(t, Op::add, ad::mul(t, a, before(b, k, 0)), b);
    if (2 * k < len) a = ad::mul(t, a, before(a, k, 1));
    b = b_new;
  }
  return b;
}
void Rule<Op::cumlogsumexp>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                       std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// ------------------------------------------------------------------ stop_gradient

// An identity whose tangent is zero (lax.stop_gradient).
Aval Rule<Op::stop_gradient>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  expect_arity(Op::stop_gradient, in, 1);
  return in[0];
}
void Rule<Op::stop_gradient>::eval(const std::vector<const HostArray*>& in, const A&, const Aval&, HostArray& out) {
  out = *in[0];
}
FactorRule Rule<Op::stop_gradient>::factors(const Node& n) { return rule_util::elementwise_factors(n); }
TESSEL_NO_DERIVATIVE(stop_gradient)
NodeRef Rule<Op::stop_gradient>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>& ops,
                                       const std::vector<AxisSharding>&, const AxisSharding&) {
  return ops[0];
}
NodeRef Rule<Op::stop_gradient>::batch(NodeTable& t, const Node&, const std::vector<NodeRef>& x,
                                       const std::vector<bool>&, const BatchInfo&) {
  return build::stop_gradient(t, x[0]);
}

// ------------------------------------------------------------------ complex expansion, cost

NodeRef Rule<Op::cumsum>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& p = n.attr<attr::Cumulative>();
  Parts x = b.unpack(ops[0]);
  return b.pack({build::cumulative(b.table(), Op::cumsum, x.re, p.dimension, p.reverse),
                 build::cumulative(b.table(), Op::cumsum, x.im, p.dimension, p.reverse)});
}
TESSEL_COMPLEX_NONE(cumprod)
TESSEL_COMPLEX_NONE(cummax)
TESSEL_COMPLEX_NONE(cummin)
TESSEL_COMPLEX_NONE(cumlogsumexp)
TESSEL_COMPLEX_IDENTITY(stop_gradient)
TESSEL_COST(cumsum, memory_cost)
TESSEL_COST(cumprod, memory_cost)
TESSEL_COST(cummax, memory_cost)
TESSEL_COST(cummin, memory_cost)
TESSEL_COST(cumlogsumexp, memory_cost)
TESSEL_COST(stop_gradient, no_cost)

}  // namespace tessel
