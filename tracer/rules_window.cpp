// Rules of the max (min) pooling's derivative (attr::SelectWindow), JAX's
// select_and_gather_add and select_and_scatter_add with the selection made
// once per window:
//
//   window_select(operand): per window of the operand (the result has
//     reduce_window's shape), the tap (row-major in the window) of its first
//     maximum (ge) or minimum (le) among the elements inside the operand
//     (padding is never selected); -1 when none equals the window's
//     extreme (a NaN window, or a window of padding only). int8: at most
//     64 taps. JAX's selection (select_prim ge_p / le_p).
//   select_and_gather_add(tangent, selection): per window, the tangent at
//     its selected element, else zero (_reduce_window_chooser_jvp_rule).
//   select_and_scatter_add(source, selection): its transpose, the operand's
//     shape: each window's source value added at its selected element.
//
// XLA's two ops recompute the selection in each; here it is a value of its
// own, made once per window and read by both (a fused loop over the input
// reading it is a load and a compare per window containing the element,
// where recomputing it was every tap of each). The selection has no
// derivative: it is piecewise constant in the operand.
//
// Dims whose window is one element, with stride 1 and no padding (the
// batch, the features) are free factors of every operand and result; the
// windowed dims are replicated. Lowered as expressions (codegen/lowering.cpp).
#include <cmath>
#include <limits>

#include "tessel/core/errors.hpp"
#include "tracer/build.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

namespace {

const char* name(Op op) {
  return op == Op::window_select ? "window_select" : op == Op::select_and_gather_add ? "select_and_gather_add" : "select_and_scatter_add";
}

// The windows' grid over the operand.
Shape windows_shape(const attr::SelectWindow& p) {
  const Shape& s = p.base;
  Shape o(s.size());
  for (std::size_t d = 0; d < s.size(); ++d) {
    const std::int64_t padded = s[d] + p.pad_lo[d] + p.pad_hi[d];
    o[d] = padded < p.window[d] ? 0 : (padded - p.window[d]) / p.strides[d] + 1;
  }
  return o;
}

std::int64_t taps_of(const attr::SelectWindow& p) {
  std::int64_t taps = 1;
  for (auto w : p.window) taps *= w;
  return taps;
}

void check_window(Op op, const attr::SelectWindow& p, const std::vector<Aval>& in) {
  const std::size_t r = p.base.size();
  if (p.window.size() != r || p.strides.size() != r || p.pad_lo.size() != r || p.pad_hi.size() != r)
    throw ValueError(cat(name(op), ": needs a window size, stride and padding per dimension of the operand (", r,
                         "), got ", avals_str(in)));
  for (std::size_t d = 0; d < r; ++d)
    if (p.window[d] < 1 || p.strides[d] < 1 || p.pad_lo[d] < 0 || p.pad_hi[d] < 0)
      throw ValueError(cat(name(op), ": window sizes and strides must be positive and padding non-negative, got window ",
                           rule_util::ints(p.window), ", strides ", rule_util::ints(p.strides), ", padding ",
                           rule_util::ints(p.pad_lo), " / ", rule_util::ints(p.pad_hi)));
  if (taps_of(p) > 64) throw ValueError(cat(name(op), ": at most 64 taps in a window, got ", rule_util::ints(p.window)));
}

void check_value(Op op, const Aval& v, const Shape& want, const std::vector<Aval>& in) {
  if (v.dtype != DType::float32 && v.dtype != DType::float64)
    throw TypeError(cat(name(op), " takes float32 or float64 values (ts::lax converts others), got ", avals_str(in)));
  if (v.shape != want)
    throw TypeError(cat(name(op), ": expected values of shape ", rule_util::ints(want), ", got ", avals_str(in)));
}

void check_selection(Op op, const attr::SelectWindow& p, const std::vector<Aval>& in) {
  if (in[1].dtype != DType::int8 || in[1].shape != windows_shape(p))
    throw TypeError(cat(name(op), ": the selection must be int8 of the windows' shape ",
                        rule_util::ints(windows_shape(p)), ", got ", avals_str(in)));
}

// Whether dim d is untouched by the window (size 1, stride 1, no padding).
bool plain(const attr::SelectWindow& p, std::size_t d) {
  return p.window[d] == 1 && p.strides[d] == 1 && p.pad_lo[d] == 0 && p.pad_hi[d] == 0;
}

// The flat index into the operand of tap t of window o, or -1 when it lies
// in the padding.
std::int64_t tap_at(const attr::SelectWindow& p, const std::vector<std::int64_t>& o, std::int64_t t) {
  const Shape& s = p.base;
  const auto st = row_major_strides(s);
  std::int64_t at = 0;
  for (std::size_t d = s.size(); d-- > 0;) {
    const std::int64_t u = t % p.window[d];
    t /= p.window[d];
    const std::int64_t q = o[d] * p.strides[d] - p.pad_lo[d] + u;
    if (q < 0 || q >= s[d]) return -1;
    at += q * st[d];
  }
  return at;
}

// The selected tap of window `o` of x, or -1.
template <class T>
std::int64_t selected(const attr::SelectWindow& p, const T* x, const std::vector<std::int64_t>& o) {
  const std::int64_t taps = taps_of(p);
  T best = p.ge ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  bool any = false;
  for (std::int64_t t = 0; t < taps; ++t) {
    const std::int64_t at = tap_at(p, o, t);
    if (at < 0) continue;
    any = true;
    const T v = x[at];
    if (std::isnan(v)) return -1;  // the extreme is NaN (propagated), which nothing equals
    if (p.ge ? v > best : v < best) best = v;
  }
  if (!any) return -1;
  for (std::int64_t t = 0; t < taps; ++t) {
    const std::int64_t at = tap_at(p, o, t);
    if (at >= 0 && x[at] == best) return t;
  }
  return -1;
}

template <class F>
void each_window(const Shape& out, F f) {
  const std::size_t r = out.size();
  std::vector<std::int64_t> o(r, 0);
  const std::int64_t n = numel(out);
  for (std::int64_t k = 0; k < n; ++k) {
    f(k, o);
    for (std::size_t d = r; d-- > 0;) {
      if (++o[d] < out[d]) break;
      o[d] = 0;
    }
  }
}

// Dims untouched by the window share a factor; windowed dims are replicated.
// Each operand and the result are on the operand's grid (`true`) or the
// windows' (`false`).
FactorRule window_factors(const Node& n, const std::vector<bool>& operands_on_base, bool result_on_base) {
  const auto& p = n.attr<attr::SelectWindow>();
  const Shape& base = p.base;
  const Shape out = windows_shape(p);
  FactorRule r;
  std::vector<std::vector<int>> in_dims, out_dims;
  for (std::size_t d = 0; d < base.size(); ++d) {
    if (plain(p, d)) {
      const int f = r.add_factor(base[d]);
      in_dims.push_back({f});
      out_dims.push_back({f});
    } else {
      in_dims.push_back({r.add_factor(base[d], false, true)});
      out_dims.push_back({r.add_factor(out[d], false, true)});
    }
  }
  for (bool b : operands_on_base) r.operands.push_back(b ? in_dims : out_dims);
  r.result = result_on_base ? in_dims : out_dims;
  return r;
}

// A leading batch dim, untouched by the window.
attr::SelectWindow with_batch(const attr::SelectWindow& a, std::int64_t size) {
  attr::SelectWindow p = a;
  p.base.insert(p.base.begin(), size);
  p.window.insert(p.window.begin(), 1);
  p.strides.insert(p.strides.begin(), 1);
  p.pad_lo.insert(p.pad_lo.begin(), 0);
  p.pad_hi.insert(p.pad_hi.begin(), 0);
  return p;
}

NodeCost window_cost(const Node& n) {
  NodeCost c = rule_util::memory_cost(n);
  const auto& p = n.attr<attr::SelectWindow>();
  // window_select: a compare per tap of each window; the others a compare per window an element lies in.
  c.flops = n.op == Op::window_select ? double(numel(n.shape())) * double(taps_of(p)) : double(numel(n.shape()));
  return c;
}

// A local form of the attributes: the windowed dims are whole on every
// device, the plain ones take the local operand's sizes.
attr::SelectWindow local_attrs(const attr::SelectWindow& a, const Shape& local_base) {
  attr::SelectWindow p = a;
  p.base = local_base;
  return p;
}

}  // namespace

Aval Rule<Op::window_select>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::window_select, in, 1);
  check_window(Op::window_select, p, in);
  check_value(Op::window_select, in[0], p.base, in);
  return Aval{DType::int8, windows_shape(p), false};
}

Aval Rule<Op::select_and_gather_add>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::select_and_gather_add, in, 2);
  check_window(Op::select_and_gather_add, p, in);
  check_value(Op::select_and_gather_add, in[0], p.base, in);
  check_selection(Op::select_and_gather_add, p, in);
  return Aval{in[0].dtype, windows_shape(p), in[0].weak_type};
}

Aval Rule<Op::select_and_scatter_add>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::select_and_scatter_add, in, 2);
  check_window(Op::select_and_scatter_add, p, in);
  check_value(Op::select_and_scatter_add, in[0], windows_shape(p), in);
  check_selection(Op::select_and_scatter_add, p, in);
  return Aval{in[0].dtype, p.base, in[0].weak_type};
}

void Rule<Op::window_select>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  auto* z = reinterpret_cast<std::int8_t*>(out.bytes.data());
  visit_wide_dtype(in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* x = reinterpret_cast<const T*>(in[0]->bytes.data());
      each_window(aval.shape, [&](std::int64_t k, const std::vector<std::int64_t>& o) {
        z[k] = std::int8_t(selected(p, x, o));
      });
    }
  });
}

void Rule<Op::select_and_gather_add>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                           HostArray& out) {
  rule_util::allocate(out, aval);
  const auto* sel = reinterpret_cast<const std::int8_t*>(in[1]->bytes.data());
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* t = reinterpret_cast<const T*>(in[0]->bytes.data());
      T* z = reinterpret_cast<T*>(out.bytes.data());
      each_window(aval.shape, [&](std::int64_t k, const std::vector<std::int64_t>& o) {
        const std::int64_t at = sel[k] < 0 ? -1 : tap_at(p, o, sel[k]);
        z[k] = at < 0 ? T(0) : t[at];
      });
    }
  });
}

// The sums in double, rounded once.
void Rule<Op::select_and_scatter_add>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                            HostArray& out) {
  rule_util::allocate(out, aval);
  const auto* sel = reinterpret_cast<const std::int8_t*>(in[1]->bytes.data());
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* src = reinterpret_cast<const T*>(in[0]->bytes.data());
      std::vector<double> acc(std::size_t(numel(aval.shape)), 0.0);
      each_window(in[0]->shape, [&](std::int64_t k, const std::vector<std::int64_t>& o) {
        const std::int64_t at = sel[k] < 0 ? -1 : tap_at(p, o, sel[k]);
        if (at >= 0) acc[std::size_t(at)] += double(src[k]);
      });
      T* z = reinterpret_cast<T*>(out.bytes.data());
      for (std::size_t i = 0; i < acc.size(); ++i) z[i] = T(acc[i]);
    }
  });
}

FactorRule Rule<Op::window_select>::factors(const Node& n) { return window_factors(n, {true}, false); }
FactorRule Rule<Op::select_and_gather_add>::factors(const Node& n) { return window_factors(n, {true, false}, false); }
FactorRule Rule<Op::select_and_scatter_add>::factors(const Node& n) { return window_factors(n, {false, false}, true); }

TESSEL_NO_DERIVATIVE(window_select)

// Linear in the first operand; the selection is piecewise constant.
NodeRef Rule<Op::select_and_gather_add>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                             const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::select_and_gather_add(t, tx[0], x[1], attrs_of(n)) : nullptr;
}
NodeRef Rule<Op::select_and_scatter_add>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                              const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::select_and_scatter_add(t, tx[0], x[1], attrs_of(n)) : nullptr;
}
void Rule<Op::select_and_gather_add>::transpose(NodeTable& t, const Node& n, const NodeRef& ct,
                                                const std::vector<bool>& linear, std::vector<NodeRef>& cts) {
  if (linear.size() > 1 && linear[1]) throw InternalError("select_and_gather_add is not linear in its selection");
  cts[0] = build::select_and_scatter_add(t, ct, n.in[1], attrs_of(n));
}
void Rule<Op::select_and_scatter_add>::transpose(NodeTable& t, const Node& n, const NodeRef& ct,
                                                 const std::vector<bool>& linear, std::vector<NodeRef>& cts) {
  if (linear.size() > 1 && linear[1]) throw InternalError("select_and_scatter_add is not linear in its selection");
  cts[0] = build::select_and_gather_add(t, ct, n.in[1], attrs_of(n));
}

// The windowed dims are whole on every device; the plain ones are the local
// operands' (the base shape follows them).
NodeRef Rule<Op::window_select>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                       const std::vector<AxisSharding>&, const AxisSharding&) {
  return build::window_select(b.table(), ops[0], local_attrs(attrs_of(n), ops[0]->shape()));
}
NodeRef Rule<Op::select_and_gather_add>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                               const std::vector<AxisSharding>&, const AxisSharding&) {
  return build::select_and_gather_add(b.table(), ops[0], ops[1], local_attrs(attrs_of(n), ops[0]->shape()));
}
NodeRef Rule<Op::select_and_scatter_add>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                                const std::vector<AxisSharding>&, const AxisSharding&) {
  // The base's plain dims take the selection's local sizes (equal there).
  const auto& p = attrs_of(n);
  Shape base = p.base;
  for (std::size_t d = 0; d < base.size(); ++d)
    if (plain(p, d)) base[d] = ops[1]->shape()[d];
  return build::select_and_scatter_add(b.table(), ops[0], ops[1], local_attrs(p, base));
}

NodeRef Rule<Op::window_select>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                       const std::vector<bool>&, const BatchInfo& b) {
  return build::window_select(t, x[0], with_batch(attrs_of(n), b.size));
}
NodeRef Rule<Op::select_and_gather_add>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                               const std::vector<bool>& batched, const BatchInfo& b) {
  const std::vector<NodeRef> v = bt::all_batched(t, x, batched, b);
  return build::select_and_gather_add(t, v[0], v[1], with_batch(attrs_of(n), b.size));
}
NodeRef Rule<Op::select_and_scatter_add>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                                const std::vector<bool>& batched, const BatchInfo& b) {
  const std::vector<NodeRef> v = bt::all_batched(t, x, batched, b);
  return build::select_and_scatter_add(t, v[0], v[1], with_batch(attrs_of(n), b.size));
}

// Complex values have no order to select by.
TESSEL_COMPLEX_NONE(window_select)
TESSEL_COMPLEX_NONE(select_and_gather_add)
TESSEL_COMPLEX_NONE(select_and_scatter_add)

NodeCost Rule<Op::window_select>::cost(const Node& n) { return window_cost(n); }
NodeCost Rule<Op::select_and_gather_add>::cost(const Node& n) { return window_cost(n); }
NodeCost Rule<Op::select_and_scatter_add>::cost(const Node& n) { return window_cost(n); }

}  // namespace tessel
