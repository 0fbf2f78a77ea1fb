// Rules of the indexing ops with an integer index array along one axis
// (attr::Indexed): gather (jnp.take, take_along_axis, integer-array
// indexing) and scatter (x.at[idx].set/add/...). A gather's transpose is a
// scatter-add; a scatter-add's is a gather.
//
// Sharding: the indexed axis of x must be whole on each device (its factor
// is replicated); every other dim of x passes through to the result; the
// index array's dims map to the result dims they stand for (take form) or
// share x's (along form). Each device then runs the same op on its tiles.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using rule_util::expect_arity;
using detail::cat;

namespace {

// The shape indexing x (shape xs) by idx (shape is) yields: a gather's
// result, a scatter's updates.
Shape indexed_shape(const Shape& xs, const Shape& is, const attr::Indexed& a) {
  if (a.along) return is;
  Shape r(xs.begin(), xs.begin() + a.axis);
  r.insert(r.end(), is.begin(), is.end());
  r.insert(r.end(), xs.begin() + a.axis + 1, xs.end());
  return r;
}

void check_indexed(const char* what, const Aval& x, const Aval& idx, const attr::Indexed& a) {
  const std::int64_t r = std::int64_t(x.shape.size());
  if (a.axis < 0 || a.axis >= r) throw ShapeError(cat(what, ": axis ", a.axis, " is out of range for ", x.str()));
  if (!is_integral(idx.dtype) || is_bool(idx.dtype))
    throw TypeError(cat(what, ": indices must be integers, got ", idx.str()));
  if (a.along) {
    bool ok = idx.shape.size() == x.shape.size();
    for (std::int64_t d = 0; ok && d < r; ++d) ok = d == a.axis || idx.shape[size_t(d)] == x.shape[size_t(d)];
    if (!ok)
      throw ShapeError(cat(what, " along axis ", a.axis, ": indices ", idx.str(), " must have the shape of ", x.str(),
                           " except along the axis"));
  }
  if (a.mode == attr::IndexMode::clip && x.shape[size_t(a.axis)] == 0 && numel(indexed_shape(x.shape, idx.shape, a)) > 0)
    throw ShapeError(cat(what, ": cannot index axis ", a.axis, " of size 0 of ", x.str(), " with clamped indices"));
}

// Walks every position of the indexed shape: fn(flat position, flat index
// position, flat x position with the axis coordinate 0, x's stride along the axis).
template <class F>
void for_each_indexed(const Shape& xs, const Shape& is, const attr::Indexed& a, F&& fn) {
  const Shape rs = indexed_shape(xs, is, a);
  const auto xst = row_major_strides(xs), ist = row_major_strides(is), rst = row_major_strides(rs);
  const std::int64_t count = numel(rs), s = std::int64_t(is.size());
  for (std::int64_t f = 0; f < count; ++f) {
    std::int64_t ip = 0, xp = 0;
    for (std::int64_t d = 0; d < std::int64_t(rs.size()); ++d) {
      const std::int64_t c = (f / rst[size_t(d)]) % rs[size_t(d)];
      if (a.along) {
        ip += c * ist[size_t(d)];
        if (d != a.axis) xp += c * xst[size_t(d)];
      } else if (d < a.axis) {
        xp += c * xst[size_t(d)];
      } else if (d < a.axis + s) {
        ip += c * ist[size_t(d - a.axis)];
      } else {
        xp += c * xst[size_t(d - s + 1)];
      }
    }
    fn(f, ip, xp, xst[size_t(a.axis)]);
  }
}

std::int64_t index_value(DType t, const void* base, std::int64_t i) {
  return visit_wide_dtype(t, [&](auto tag) -> std::int64_t {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) return std::int64_t(static_cast<const T*>(base)[i]);
    else throw InternalError("a non-integer index array");
  });
}

// The position along an axis of n that index i names: -1 when out of bounds
// and not clamped.
std::int64_t position(std::int64_t i, std::int64_t n, attr::IndexMode m) {
  const std::int64_t k = i < 0 ? i + n : i;
  if (m == attr::IndexMode::clip) return std::clamp<std::int64_t>(k, 0, n - 1);
  return k < 0 || k >= n ? -1 : k;
}

template <class T>
T combine(Op op, T a, T b) {
  switch (op) {
    case Op::add: return static_cast<T>(a + b);
    case Op::mul: return static_cast<T>(a * b);
    case Op::max:
      if constexpr (is_complex_v<T>) throw InternalError("scatter-max of complex values");
      else {
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        return a < b ? b : a;
      }
    case Op::min:
      if constexpr (is_complex_v<T>) throw InternalError("scatter-min of complex values");
      else {
        if constexpr (std::is_floating_point_v<T>)
          if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
        return b < a ? b : a;
      }
    case Op::select: return b;
    default: throw InternalError(cat("scatter combining with ", op_name(op)));
  }
}

NodeRef zeros(NodeTable& t, DType dtype, const Shape& s) { return build::broadcast_in_dim(t, build::scalar(t, dtype, 0), s, {}); }

}  // namespace

Literal gather_fill(DType t) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (is_complex(t)) return *Literal::scalar(t, std::complex<double>(nan, nan));
  if (is_floating(t)) return *Literal::scalar(t, nan);
  if (is_bool(t) || is_unsigned_int(t)) return reduction_identity(Op::min, t);  // true, the highest unsigned
  return reduction_identity(Op::max, t);                                    // the lowest signed
}

void scatter_kernel(const attr::Indexed& a, DType dtype, const Shape& xs, DType idx_dtype, const Shape& is, const void* x,
                    const void* idx, const void* updates, void* out) {
  // out == x: the operand's block written over in place (a dead operand, a
  // loop's carry, a donated argument): only the indexed elements are touched.
  if (out != x) std::memcpy(out, x, std::size_t(numel(xs)) * dtype_size(dtype));
  const std::int64_t n = xs[size_t(a.axis)];
  visit_wide_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    const T* u = static_cast<const T*>(updates);
    for_each_indexed(xs, is, a, [&](std::int64_t f, std::int64_t ip, std::int64_t xp, std::int64_t stride) {
      const std::int64_t k = position(index_value(idx_dtype, idx, ip), n, a.mode);
      if (k < 0) return;  // dropped
      T& dst = o[xp + k * stride];
      dst = combine<T>(a.combine, dst, u[f]);
    });
  });
}

// ------------------------------------------------------------------ gather

Aval Rule<Op::gather>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::gather, in, 2);
  check_indexed("gather", in[0], in[1], p);
  return Aval{in[0].dtype, indexed_shape(in[0].shape, in[1].shape, p), in[0].weak_type};
}
void Rule<Op::gather>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  const std::size_t es = dtype_size(aval.dtype);
  const std::int64_t n = in[0]->shape[size_t(p.axis)];
  const Literal fill = p.mode == attr::IndexMode::zero ? *Literal::scalar(aval.dtype, 0) : gather_fill(aval.dtype);
  for_each_indexed(in[0]->shape, in[1]->shape, p, [&](std::int64_t f, std::int64_t ip, std::int64_t xp, std::int64_t stride) {
    const std::int64_t k = position(index_value(in[1]->dtype, in[1]->bytes.data(), ip), n, p.mode);
    const unsigned char* src = k < 0 ? fill.bytes.data() : in[0]->bytes.data() + std::size_t(xp + k * stride) * es;
    std::memcpy(out.bytes.data() + std::size_t(f) * es, src, es);
  });
}
FactorRule Rule<Op::gather>::factors(const Node& n) {
  const auto& a = attrs_of(n);
  const Shape& xs = n.in[0]->shape();
  const Shape& is = n.in[1]->shape();
  FactorRule r;
  std::vector<std::vector<int>> x(xs.size()), idx(is.size()), res(size_t(n.rank()));
  const std::int64_t s = std::int64_t(is.size());
  x[size_t(a.axis)] = {r.add_factor(xs[size_t(a.axis)], false, true)};  // whole on every device
  for (std::int64_t d = 0; d < n.rank(); ++d) {
    const int f = r.add_factor(n.shape()[size_t(d)]);
    res[size_t(d)] = {f};
    if (a.along) {
      idx[size_t(d)] = {f};
      if (d != a.axis) x[size_t(d)] = {f};
    } else if (d < a.axis) {
      x[size_t(d)] = {f};
    } else if (d < a.axis + s) {
      idx[size_t(d - a.axis)] = {f};
    } else {
      x[size_t(d - s + 1)] = {f};
    }
  }
  r.operands = {x, idx};
  r.result = res;
  return r;
}
// Linear in x: the same gather of the tangent (zero where it fills).
NodeRef Rule<Op::gather>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                              const NodeRef&) {
  if (!tx[0]) return nullptr;
  attr::Indexed a = attrs_of(n);
  if (a.mode == attr::IndexMode::fill) a.mode = attr::IndexMode::zero;
  return build::gather(t, tx[0], x[1], a);
}
// A scatter-add of the cotangent into zeros (dropped where the gather filled).
void Rule<Op::gather>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                 std::vector<NodeRef>& cts) {
  if (linear[1]) rule_util::not_linear(n);
  attr::Indexed a = attrs_of(n);
  a.combine = Op::add;
  if (a.mode == attr::IndexMode::fill) a.mode = attr::IndexMode::zero;
  cts[0] = build::scatter(t, zeros(t, ct->dtype(), n.in[0]->shape()), n.in[1], ct, a);
}
TESSEL_LOCAL_SAME_OP(gather)

// ------------------------------------------------------------------ scatter

Aval Rule<Op::scatter>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::scatter, in, 3);
  check_indexed("scatter", in[0], in[1], p);
  const Shape want = indexed_shape(in[0].shape, in[1].shape, p);
  if (in[2].shape != want || in[2].dtype != in[0].dtype)
    throw ShapeError(cat("scatter into ", in[0].str(), " at indices ", in[1].str(), " needs updates ",
                         aval_str(in[0].dtype, want), ", got ", in[2].str()));
  if (p.combine != Op::add && p.combine != Op::mul && p.combine != Op::min && p.combine != Op::max &&
      p.combine != Op::select)
    throw InternalError(cat("scatter combining with ", op_name(p.combine)));
  if (is_bool(in[0].dtype) && (p.combine == Op::add || p.combine == Op::mul))
    throw TypeError(cat("scatter-", op_name(p.combine), " into a boolean array ", in[0].str()));
  if (is_complex(in[0].dtype) && p.combine == Op::mul)
    throw NotImplementedError(cat("scatter-multiply into a complex array ", in[0].str(), " is not implemented"));
  if (is_complex(in[0].dtype) && (p.combine == Op::min || p.combine == Op::max))
    throw TypeError(cat("scatter-", op_name(p.combine), " into a complex array ", in[0].str(),
                        ": complex numbers are not ordered"));
  return in[0];
}
void Rule<Op::scatter>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  scatter_kernel(p, aval.dtype, in[0]->shape, in[1]->dtype, in[1]->shape, in[0]->bytes.data(), in[1]->bytes.data(),
                 in[2]->bytes.data(), out.bytes.data());
}
FactorRule Rule<Op::scatter>::factors(const Node& n) {
  const auto& a = attrs_of(n);
  const Shape& xs = n.shape();
  const Shape& is = n.in[1]->shape();
  const Shape& us = n.in[2]->shape();
  FactorRule r;
  std::vector<std::vector<int>> x(xs.size()), idx(is.size()), upd(us.size());
  const std::int64_t s = std::int64_t(is.size());
  for (std::int64_t d = 0; d < std::int64_t(xs.size()); ++d)
    x[size_t(d)] = {r.add_factor(xs[size_t(d)], false, d == a.axis)};  // the indexed axis whole
  if (a.along) {
    for (std::int64_t d = 0; d < std::int64_t(us.size()); ++d) {
      if (d == a.axis) {
        const int f = r.add_factor(us[size_t(d)], false, true);  // every update along the axis, with its index
        idx[size_t(d)] = upd[size_t(d)] = {f};
      } else {
        idx[size_t(d)] = upd[size_t(d)] = x[size_t(d)];
      }
    }
  } else {
    for (std::int64_t d = 0; d < s; ++d) {
      const int f = r.add_factor(is[size_t(d)], false, true);  // every index and its updates
      idx[size_t(d)] = upd[size_t(a.axis + d)] = {f};
    }
    for (std::int64_t d = 0; d < std::int64_t(xs.size()); ++d) {
      if (d < a.axis) upd[size_t(d)] = x[size_t(d)];
      else if (d > a.axis) upd[size_t(d + s - 1)] = x[size_t(d)];
    }
  }
  r.operands = {x, idx, upd};
  r.result = x;
  return r;
}
// Linear in (x, updates) when an update adds or replaces.
NodeRef Rule<Op::scatter>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                               const NodeRef&) {
  const auto& a = attrs_of(n);
  if (!tx[0] && !tx[2]) return nullptr;
  if (a.combine != Op::add && a.combine != Op::select)
    throw NotImplementedError(cat("differentiation of scatter-", op_name(a.combine), " (x.at(index array).",
                                  a.combine == Op::mul ? "multiply" : op_name(a.combine), ")"));
  NodeRef t0 = tx[0] ? tx[0] : zeros(t, x[0]->dtype(), x[0]->shape());
  NodeRef t2 = tx[2] ? tx[2] : zeros(t, x[2]->dtype(), x[2]->shape());
  return build::scatter(t, t0, x[1], t2, a);
}
// add: x's cotangent passes; each update's is the cotangent at its place.
// select: places an update overwrote pass zero to x; each update gets the
// cotangent at its place only if it is the one that stayed there (the last
// of duplicates, as the kernel writes them).
void Rule<Op::scatter>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                  std::vector<NodeRef>& cts) {
  const auto& a = attrs_of(n);
  if (linear[1] || (a.combine != Op::add && a.combine != Op::select)) rule_util::not_linear(n);
  attr::Indexed g = a;
  if (g.mode == attr::IndexMode::fill) g.mode = attr::IndexMode::zero;
  const NodeRef& idx = n.in[1];
  const Shape& us = n.in[2]->shape();
  if (a.combine == Op::add) {
    if (linear[0]) cts[0] = ct;
    if (linear[2]) cts[2] = build::gather(t, ct, idx, g);
    return;
  }
  if (linear[0]) cts[0] = build::scatter(t, ct, idx, zeros(t, ct->dtype(), us), a);
  if (linear[2]) {
    // Which update stayed at each place: their flat positions, scattered.
    NodeRef pos = build::reshape(t, build::iota(t, DType::int32, {numel(us)}, 0), us);
    NodeRef none = build::broadcast_in_dim(t, build::scalar(t, DType::int32, -1), n.shape(), {});
    NodeRef winner = build::gather(t, build::scatter(t, none, idx, pos, a), idx, g);
    NodeRef mine = build::binary(t, Op::eq, winner, pos);
    cts[2] = build::select(t, mine, build::gather(t, ct, idx, g), zeros(t, ct->dtype(), us));
  }
}
TESSEL_LOCAL_SAME_OP(scatter)


// ------------------------------------------------------------------ batching
// An index array shared by the batch indexes each example alike: the axis
// shifts past the batch dimension. The along form (take_along_axis) batches
// every operand, its index array included, with the axis shifted: each
// example picks along its own axis. Per-example indices of the take form
// map over the batch.
NodeRef Rule<Op::gather>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                const std::vector<bool>& batched, const BatchInfo& b) {
  attr::Indexed how = attrs_of(n);
  if (how.along) {
    auto xs = bt::all_batched(t, x, batched, b);
    how.axis += 1;
    return build::gather(t, xs[0], xs[1], how);
  }
  if (batched[1]) return bt::by_map(t, n, x, batched, b);
  how.axis += 1;
  return build::gather(t, x[0], x[1], how);
}
NodeRef Rule<Op::scatter>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                 const std::vector<bool>& batched, const BatchInfo& b) {
  attr::Indexed how = attrs_of(n);
  if (how.along) {
    auto xs = bt::all_batched(t, x, batched, b);
    how.axis += 1;
    return build::scatter(t, xs[0], xs[1], xs[2], how);
  }
  if (batched[1]) return bt::by_map(t, n, x, batched, b);
  how.axis += 1;
  return build::scatter(t, bt::batched(t, x[0], batched[0], b), x[1], bt::batched(t, x[2], batched[2], b), how);
}

// ------------------------------------------------------------------ complex expansion, cost
// Each part gathered or scattered by the same indices.

NodeRef Rule<Op::gather>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& how = n.attr<attr::Indexed>();
  Parts x = b.unpack(ops[0]);
  return b.pack({build::gather(b.table(), x.re, ops[1], how), build::gather(b.table(), x.im, ops[1], how)});
}
NodeRef Rule<Op::scatter>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& how = n.attr<attr::Indexed>();
  if (how.combine != Op::add && how.combine != Op::select)
    throw NotImplementedError(detail::cat("scatter-", op_name(how.combine), " of complex values"));
  Parts x = b.unpack(ops[0]), u = b.unpack(ops[2]);
  return b.pack({build::scatter(b.table(), x.re, ops[1], u.re, how), build::scatter(b.table(), x.im, ops[1], u.im, how)});
}
TESSEL_COST(gather, memory_cost)
TESSEL_COST(scatter, memory_cost)

}  // namespace tessel
