// Rules of the max (min) pooling's derivative (attr::SelectWindow), JAX's
// select_and_gather_add and select_and_scatter_add with the selection made
// once per window:
//
//   window_select(operand): per window of the operand (the result has
//     reduce_window's shape), 1 + the tap (row-major in the window) of its
//     first maximum (ge) or minimum (le) among the elements inside the
//     operand (padding is never selected); 0 when none equals the window's
//     extreme (a NaN window, or a window of padding only): zeros, which a
//     halo exchange brings past the ends, select nothing. int8: at most 64
//     taps. JAX's selection (select_prim ge_p / le_p).
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
// batch, the features) are free factors of every operand and result. A
// windowed dim may be split alike in the operand and the windows: where a
// device's rows are the stride times its windows, it takes its neighbours'
// border rows (halo exchange, as a convolution's); elsewhere the dim is
// gathered. Lowered as expressions
// (codegen/lowering.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tessel/core/errors.hpp"
#include "tracer/build.hpp"
#include "tracer/halo.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

namespace {

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
    throw ValueError(cat(op_name(op), ": needs a window size, stride and padding per dimension of the operand (", r,
                         "), got ", avals_str(in)));
  for (std::size_t d = 0; d < r; ++d)
    if (p.window[d] < 1 || p.strides[d] < 1 || p.pad_lo[d] < 0 || p.pad_hi[d] < 0)
      throw ValueError(cat(op_name(op), ": window sizes and strides must be positive and padding non-negative, got window ",
                           rule_util::ints(p.window), ", strides ", rule_util::ints(p.strides), ", padding ",
                           rule_util::ints(p.pad_lo), " / ", rule_util::ints(p.pad_hi)));
  if (taps_of(p) > 64) throw ValueError(cat(op_name(op), ": at most 64 taps in a window, got ", rule_util::ints(p.window)));
}

void check_value(Op op, const Aval& v, const Shape& want, const std::vector<Aval>& in) {
  if (v.dtype != DType::float32 && v.dtype != DType::float64)
    throw TypeError(cat(op_name(op), " takes float32 or float64 values (ts::lax converts others), got ", avals_str(in)));
  if (v.shape != want)
    throw TypeError(cat(op_name(op), ": expected values of shape ", rule_util::ints(want), ", got ", avals_str(in)));
}

// A device's window op (window_select, pooling): after the operand, one
// int32 scalar row offset per offset dim, and the global extent of every dim.
void check_offsets(Op op, const attr::SelectWindow& p, const std::vector<Aval>& in) {
  expect_arity(op, in, 1 + p.offset_dims.size());
  for (std::size_t k = 1; k < in.size(); ++k)
    if (in[k].dtype != DType::int32 || !in[k].shape.empty())
      throw TypeError(cat(op_name(op), ": row offsets are int32 scalars, got ", avals_str(in)));
  if (!p.offset_dims.empty() && p.extent.size() != p.base.size())
    throw ValueError(cat(op_name(op), ": offset dims ", rule_util::ints(p.offset_dims), " need an extent per dim"));
}

void check_selection(Op op, const attr::SelectWindow& p, const std::vector<Aval>& in) {
  if (in[1].dtype != DType::int8 || in[1].shape != windows_shape(p))
    throw TypeError(cat(op_name(op), ": the selection must be int8 of the windows' shape ",
                        rule_util::ints(windows_shape(p)), ", got ", avals_str(in)));
}

// The flat index into the operand of tap t of window o, or -1 when it lies
// in the padding. `off`: the global row of local row 0 per dim (offset
// dims only), inside below p.extent there.
std::int64_t tap_at(const attr::SelectWindow& p, const std::vector<std::int64_t>& o, std::int64_t t,
                    const std::vector<std::int64_t>& off = {}) {
  const Shape& s = p.base;
  const auto st = row_major_strides(s);
  std::int64_t at = 0;
  for (std::size_t d = s.size(); d-- > 0;) {
    const std::int64_t u = t % p.window[d];
    t /= p.window[d];
    const std::int64_t q = o[d] * p.strides[d] - p.pad_lo[d] + u;
    if (q < 0 || q >= s[d]) return -1;
    if (!off.empty() && off[d] != 0 && (q + off[d] < 0 || q + off[d] >= p.extent[d])) return -1;
    at += q * st[d];
  }
  return at;
}

// The selected tap of window `o` of x, or -1.
template <class T>
std::int64_t selected(const attr::SelectWindow& p, const T* x, const std::vector<std::int64_t>& o,
                      const std::vector<std::int64_t>& off) {
  const std::int64_t taps = taps_of(p);
  T best = p.ge ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  bool any = false;
  for (std::int64_t t = 0; t < taps; ++t) {
    const std::int64_t at = tap_at(p, o, t, off);
    if (at < 0) continue;
    any = true;
    const T v = x[at];
    if (std::isnan(v)) return -1;  // the extreme is NaN (propagated), which nothing equals
    if (p.ge ? v > best : v < best) best = v;
  }
  if (!any) return -1;
  for (std::int64_t t = 0; t < taps; ++t) {
    const std::int64_t at = tap_at(p, o, t, off);
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

// Whether windowed dim d's rows and windows may be split alike: the
// windows step over the rows (window >= stride). The partition rule then
// brings each device the rows its windows read from the devices holding
// them (halo::rows_at: its neighbours' border rows where a device's rows are
// the stride times its windows, as 2x2/2 pooling of 32 rows on 8 devices;
// whatever tiles hold them elsewhere, as one row a device under 2x2/2).
bool lines_up(const attr::SelectWindow& p, std::size_t d) {
  const std::int64_t out = windows_shape(p)[d];
  return !p.untouched(d) && out > 0 && p.window[d] >= p.strides[d];
}

// The row offsets of a device's window op (operands 1.., offset_dims) per
// dim (empty: none).
std::vector<std::int64_t> row_offsets(const std::vector<std::int64_t>& offset_dims, std::size_t rank,
                                      const std::vector<const HostArray*>& in) {
  std::vector<std::int64_t> off;
  if (offset_dims.empty()) return off;
  off.assign(rank, 0);
  for (std::size_t k = 0; k < offset_dims.size(); ++k)
    off[std::size_t(offset_dims[k])] = *reinterpret_cast<const std::int32_t*>(in[k + 1]->bytes.data());
  return off;
}

// f(window k, the flat index of its selected element) for each window that
// selects one (sel: 1 + the tap).
template <class F>
void each_selected(const attr::SelectWindow& p, const HostArray& sel, F f) {
  const auto* s = reinterpret_cast<const std::int8_t*>(sel.bytes.data());
  each_window(sel.shape, [&](std::int64_t k, const std::vector<std::int64_t>& o) {
    const std::int64_t at = s[k] <= 0 ? -1 : tap_at(p, o, s[k] - 1);
    if (at >= 0) f(k, at);
  });
}

// Dims untouched by the window share a factor, and so do the rows of a
// windowed dim that lines up; other windowed dims are replicated. Each
// operand and the result are on the operand's grid (`true`) or the
// windows' (`false`).
FactorRule window_factors(const Node& n, const attr::SelectWindow& p, const std::vector<bool>& operands_on_base,
                          bool result_on_base) {
  const Shape& base = p.base;
  const Shape out = windows_shape(p);
  FactorRule r;
  std::vector<std::vector<int>> in_dims, out_dims;
  for (std::size_t d = 0; d < base.size(); ++d) {
    if (p.untouched(d) || lines_up(p, d)) {
      // Sized by the rows where there are fewer windows, so that rows split
      // finer than the windows stay split (one row a device under 2x2/2:
      // half the devices hold no window).
      const int f = r.add_factor(std::max(base[d], out[d]));
      in_dims.push_back({f});
      out_dims.push_back({f});
    } else {
      in_dims.push_back({r.add_factor(base[d], false, true)});
      out_dims.push_back({r.add_factor(out[d], false, true)});
    }
  }
  for (bool b : operands_on_base) r.operands.push_back(b ? in_dims : out_dims);
  for (std::size_t k = operands_on_base.size(); k < n.in.size(); ++k) r.operands.push_back({});  // row offsets
  r.result = result_on_base ? in_dims : out_dims;
  return r;
}

// A split windowed dim of the partition rules: its mesh axes, tiles of the
// operand's rows (ti) and of the windows (to), and whether the rows and the
// windows are split alike (else the dim is gathered).
struct Split {
  std::size_t d;
  std::vector<int> axes;
  std::int64_t ti = 0, to = 0;
  bool halo = false;
};

std::vector<Split> splits_of(LocalBuilder& b, const attr::SelectWindow& p, const AxisSharding& base_sh,
                             const AxisSharding& windows_sh) {
  std::vector<Split> r;
  const Shape out = windows_shape(p);
  for (std::size_t d = 0; d < p.base.size(); ++d) {
    if (p.untouched(d)) continue;
    const auto& A = base_sh.dims[d].empty() ? windows_sh.dims[d] : base_sh.dims[d];
    if (A.empty()) continue;
    const std::int64_t T = b.tiles(A);
    Split s{d, A, (p.base[d] + T - 1) / T, (out[d] + T - 1) / T, false};
    s.halo = lines_up(p, d) && base_sh.dims[d] == A && windows_sh.dims[d] == A;
    r.push_back(s);
  }
  return r;
}

// x (global shape G, laid out as xs) with the dims of the splits that do not
// line up gathered; `sh` becomes its layout.
NodeRef gather_unaligned(LocalBuilder& b, const NodeRef& x, const Shape& G, AxisSharding& sh, const std::vector<Split>& splits) {
  AxisSharding to = sh;
  for (const Split& s : splits)
    if (!s.halo) to.dims[s.d].clear();
  if (to.dims == sh.dims) return x;
  NodeRef y = b.reshard(x, G, sh, to);
  sh = to;
  return y;
}

// The rows of split s.d that this device's windows read (window_select,
// pooling, select_and_gather_add), from x's tiles: from row
// k * to * stride - pad_lo on tile k's device, (to - 1) * stride + window
// of them.
NodeRef window_rows(LocalBuilder& b, const NodeRef& x, const attr::SelectWindow& p, const Split& s) {
  const std::int64_t st = p.strides[s.d];
  std::vector<std::int64_t> starts(std::size_t(b.tiles(s.axes)));
  for (std::size_t k = 0; k < starts.size(); ++k) starts[k] = std::int64_t(k) * s.to * st - p.pad_lo[s.d];
  return halo::rows_at(b, x, s.axes, int(s.d), starts, (s.to - 1) * st + p.window[s.d]);
}

// The result computed with some dims gathered, laid out as `natural`.
NodeRef to_natural(LocalBuilder& b, const NodeRef& y, const Shape& G, const AxisSharding& natural,
                   const std::vector<Split>& splits) {
  AxisSharding have = natural;
  for (const Split& s : splits)
    if (!s.halo) have.dims[s.d].clear();
  return have.dims == natural.dims ? y : b.reshard(y, G, have, natural);
}

// A leading batch dim, untouched by the window.
attr::SelectWindow with_batch(const attr::SelectWindow& a, std::int64_t size) {
  attr::SelectWindow p = a;
  p.base.insert(p.base.begin(), size);
  p.window.insert(p.window.begin(), 1);
  p.strides.insert(p.strides.begin(), 1);
  p.pad_lo.insert(p.pad_lo.begin(), 0);
  p.pad_hi.insert(p.pad_hi.begin(), 0);
  for (auto& d : p.offset_dims) ++d;
  if (!p.extent.empty()) p.extent.insert(p.extent.begin(), size);
  return p;
}

NodeCost window_cost(const Node& n, const attr::SelectWindow& p) {
  NodeCost c = rule_util::memory_cost(n);
  // window_select and pooling: an operation per tap of each window; the
  // others a compare per window an element lies in.
  const bool per_tap = n.op == Op::window_select || n.op == Op::reduce_window_sum || n.op == Op::reduce_window_max ||
                       n.op == Op::reduce_window_min;
  c.flops = per_tap ? double(numel(n.shape())) * double(taps_of(p)) : double(numel(n.shape()));
  return c;
}

// The operand of a window op that knows its rows' global positions
// (window_select, pooling) on this device: the rows its windows read
// (window_rows; rows outside the array, which the row offsets mark as
// such, as they do an uneven tile's padding), gathered where the dim is not
// split alike. p becomes the local attributes.
struct OffsetTile {
  NodeRef x;
  std::vector<NodeRef> offsets;
  std::vector<Split> splits;
};
OffsetTile offset_tile(LocalBuilder& b, attr::SelectWindow& p, const std::vector<NodeRef>& ops,
                       const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  NodeTable& t = b.table();
  const Shape G = p.base;
  AxisSharding xs = op_sh[0];
  OffsetTile r;
  r.splits = splits_of(b, p, xs, natural);
  r.x = gather_unaligned(b, ops[0], G, xs, r.splits);
  r.offsets.assign(ops.begin() + 1, ops.end());
  for (const Split& s : r.splits) {
    if (!s.halo) continue;
    const std::int64_t lo = p.pad_lo[s.d];
    r.x = window_rows(b, r.x, p, s);
    if (p.extent.empty()) p.extent = G;
    p.offset_dims.push_back(std::int64_t(s.d));
    r.offsets.push_back(
        build::binary(t, Op::sub, b.offset(s.axes, s.to * p.strides[s.d]), build::scalar(t, DType::int32, double(lo))));
    p.pad_lo[s.d] = p.pad_hi[s.d] = 0;
  }
  p.base = r.x->shape();
  return r;
}

}  // namespace

Aval Rule<Op::window_select>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  check_offsets(Op::window_select, p, in);
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
  const std::vector<std::int64_t> off = row_offsets(p.offset_dims, p.base.size(), in);
  visit_wide_dtype(in[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* x = reinterpret_cast<const T*>(in[0]->bytes.data());
      each_window(aval.shape, [&](std::int64_t k, const std::vector<std::int64_t>& o) {
        z[k] = std::int8_t(selected(p, x, o, off) + 1);
      });
    }
  });
}

void Rule<Op::select_and_gather_add>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                           HostArray& out) {
  rule_util::allocate(out, aval);  // zeros where nothing is selected
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* t = reinterpret_cast<const T*>(in[0]->bytes.data());
      T* z = reinterpret_cast<T*>(out.bytes.data());
      each_selected(p, *in[1], [&](std::int64_t k, std::int64_t at) { z[k] = t[at]; });
    }
  });
}

// The sums in double, rounded once.
void Rule<Op::select_and_scatter_add>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                            HostArray& out) {
  rule_util::allocate(out, aval);
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* src = reinterpret_cast<const T*>(in[0]->bytes.data());
      std::vector<double> acc(std::size_t(numel(aval.shape)), 0.0);
      each_selected(p, *in[1], [&](std::int64_t k, std::int64_t at) { acc[std::size_t(at)] += double(src[k]); });
      T* z = reinterpret_cast<T*>(out.bytes.data());
      for (std::size_t i = 0; i < acc.size(); ++i) z[i] = T(acc[i]);
    }
  });
}

FactorRule Rule<Op::window_select>::factors(const Node& n) { return window_factors(n, attrs_of(n), {true}, false); }
FactorRule Rule<Op::select_and_gather_add>::factors(const Node& n) {
  return window_factors(n, attrs_of(n), {true, false}, false);
}
FactorRule Rule<Op::select_and_scatter_add>::factors(const Node& n) {
  return window_factors(n, attrs_of(n), {false, false}, true);
}

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

// Partition rules. Plain dims are the local operands' (the base follows
// them); a windowed dim that lines up takes its neighbours' border rows;
// others are gathered.
NodeRef Rule<Op::window_select>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                       const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  attr::SelectWindow p = attrs_of(n);
  const OffsetTile x = offset_tile(b, p, ops, op_sh, natural);
  NodeRef y = build::window_select(b.table(), x.x, p, x.offsets);
  return to_natural(b, y, windows_shape(attrs_of(n)), natural, x.splits);
}
NodeRef Rule<Op::select_and_gather_add>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                               const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  attr::SelectWindow p = attrs_of(n);
  const Shape G = p.base;
  AxisSharding ts = op_sh[0], ss = op_sh[1];
  const std::vector<Split> splits = splits_of(b, p, ts, natural);
  NodeRef tan = gather_unaligned(b, ops[0], G, ts, splits);
  NodeRef sel = gather_unaligned(b, ops[1], windows_shape(p), ss, splits);
  for (const Split& s : splits) {
    if (!s.halo) continue;
    tan = window_rows(b, tan, p, s);  // never selected outside the array
    p.pad_lo[s.d] = p.pad_hi[s.d] = 0;
  }
  p.base = tan->shape();
  for (std::size_t d = 0; d < p.base.size(); ++d)
    if (p.untouched(d)) p.base[d] = sel->shape()[d];
  NodeRef y = build::select_and_gather_add(b.table(), tan, sel, p);
  return to_natural(b, y, windows_shape(attrs_of(n)), natural, splits);
}
NodeRef Rule<Op::select_and_scatter_add>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                                const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  attr::SelectWindow p = attrs_of(n);
  const Shape G = p.base, W = windows_shape(p);
  AxisSharding srcs = op_sh[0], ss = op_sh[1];
  const std::vector<Split> splits = splits_of(b, p, natural, ss);
  NodeRef src = gather_unaligned(b, ops[0], W, srcs, splits);
  NodeRef sel = gather_unaligned(b, ops[1], W, ss, splits);
  std::vector<int> uneven;
  for (const Split& s : splits)
    if (s.halo) uneven.push_back(int(s.d));
  // An uneven tile's padding windows select nothing.
  if (!uneven.empty()) sel = b.mask(sel, W, ss, uneven, *Literal::scalar(DType::int8, 0));
  Shape base = G;
  for (std::size_t d = 0; d < base.size(); ++d)
    if (p.untouched(d)) base[d] = sel->shape()[d];
  // Per split dim, this device's base rows k * ti .. + ti take the windows
  // from the first that reaches them to the last that starts in them (zeros
  // past the ends); the base the op makes starts `off` rows before them.
  std::vector<std::pair<const Split*, std::vector<std::int64_t>>> cut;  // dims whose `off` differs by device
  for (const Split& s : splits) {
    if (!s.halo) continue;
    const std::int64_t w = p.window[s.d], st = p.strides[s.d], lo = p.pad_lo[s.d], T = b.tiles(s.axes);
    std::vector<std::int64_t> first(static_cast<std::size_t>(T)), off(static_cast<std::size_t>(T));
    std::int64_t n = 0;
    for (std::int64_t k = 0; k < T; ++k) {
      first[std::size_t(k)] = -halo::floor_div(w - 1 - lo - k * s.ti, st);
      const std::int64_t last = halo::floor_div((k + 1) * s.ti - 1 + lo, st);
      n = std::max(n, last - first[std::size_t(k)] + 1);
      off[std::size_t(k)] = k * s.ti - first[std::size_t(k)] * st + lo;
    }
    src = halo::rows_at(b, src, s.axes, int(s.d), first, n);
    sel = halo::rows_at(b, sel, s.axes, int(s.d), first, n);
    const std::int64_t made = (n - 1) * st + w;
    if (std::all_of(off.begin(), off.end(), [&](std::int64_t o) { return o == off[0]; })) {
      base[s.d] = s.ti;  // the op skips the rows before and after
      p.pad_lo[s.d] = off[0];
      p.pad_hi[s.d] = made - s.ti - off[0];
    } else {
      base[s.d] = made;
      p.pad_lo[s.d] = p.pad_hi[s.d] = 0;
      cut.push_back({&s, off});
    }
  }
  p.base = base;
  NodeRef y = build::select_and_scatter_add(b.table(), src, sel, p);
  for (const auto& [s, off] : cut) y = halo::tile_rows(b, y, s->axes, int(s->d), off, s->ti);
  return to_natural(b, y, G, natural, splits);
}

NodeRef Rule<Op::window_select>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                       const std::vector<bool>&, const BatchInfo& b) {
  if (!attrs_of(n).offset_dims.empty()) throw InternalError("window_select with row offsets is a partitioned program's");
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

NodeCost Rule<Op::window_select>::cost(const Node& n) { return window_cost(n, attrs_of(n)); }
NodeCost Rule<Op::select_and_gather_add>::cost(const Node& n) { return window_cost(n, attrs_of(n)); }
NodeCost Rule<Op::select_and_scatter_add>::cost(const Node& n) { return window_cost(n, attrs_of(n)); }

// ------------------------------------------------------------------ pooling
//
// reduce_window_sum, _max, _min (JAX's monoid reduce_window primitives):
// each window's sum, maximum or minimum (NaN-propagating, as XLA's max and
// min), the padding holding the identity. Real float32/float64 and integer
// operands (ts::lax computes others by composition). The sum is linear (its
// transpose: JAX's, a pooling of the cotangent interior-padded by the
// strides); the max's and min's tangent is select_and_gather_add of the
// window's selection (_reduce_window_chooser_jvp_rule). Split like the
// selection: the rows of a dim that lines up, the neighbours' border rows
// exchanged, rows outside the array read as the identity.

namespace {
Op pool_reduce(Op op) { return op == Op::reduce_window_sum ? Op::add : op == Op::reduce_window_max ? Op::max : Op::min; }

Aval pool_infer(Op op, const std::vector<Aval>& in, const attr::ReduceWindow& a) {
  const attr::SelectWindow p = a.selection();
  check_offsets(op, p, in);
  check_window(op, p, in);
  const DType t = in[0].dtype;
  if (!(t == DType::float32 || t == DType::float64 || is_integral(t)))
    throw TypeError(cat(op_name(op), " takes real float32/float64 or integer operands (ts::lax composes others), got ",
                        avals_str(in)));
  if (in[0].shape != p.base) throw TypeError(cat(op_name(op), ": expected an operand of shape ", rule_util::ints(p.base), ", got ", avals_str(in)));
  return Aval{t, windows_shape(p), in[0].weak_type};
}

// As the elementwise max and min (llvm.maximum and minimum): NaN if either
// is, and -0 below +0.
template <class T>
T pool_fold(Op r, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (r == Op::add) return a + b;
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return (r == Op::max) == bool(std::signbit(a)) ? b : a;
  } else if (r == Op::add) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));  // wraps
  }
  return r == Op::max ? (b > a ? b : a) : (b < a ? b : a);
}

void pool_eval(Op op, const std::vector<const HostArray*>& in, const attr::ReduceWindow& a, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  const attr::SelectWindow p = a.selection();
  const Op r = pool_reduce(op);
  const std::vector<std::int64_t> off = row_offsets(p.offset_dims, p.base.size(), in);
  const std::int64_t taps = taps_of(p);
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* x = reinterpret_cast<const T*>(in[0]->bytes.data());
      T* z = reinterpret_cast<T*>(out.bytes.data());
      T id;
      const Literal idl = reduction_identity(r, aval.dtype);
      std::memcpy(&id, idl.bytes.data(), sizeof(T));
      each_window(aval.shape, [&](std::int64_t k, const std::vector<std::int64_t>& o) {
        if constexpr (std::is_floating_point_v<T>) {
          if (r == Op::add) {  // in double, rounded once
            double acc = 0;
            for (std::int64_t t = 0; t < taps; ++t) {
              const std::int64_t at = tap_at(p, o, t, off);
              if (at >= 0) acc += double(x[at]);
            }
            z[k] = T(acc);
            return;
          }
        }
        T acc = id;
        for (std::int64_t t = 0; t < taps; ++t) {
          const std::int64_t at = tap_at(p, o, t, off);
          if (at >= 0) acc = pool_fold(r, acc, x[at]);
        }
        z[k] = acc;
      });
    }
  });
}

NodeRef pool_jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx) {
  if (!tx[0]) return nullptr;
  const auto& a = n.attr<attr::ReduceWindow>();
  if (n.op == Op::reduce_window_sum) return build::reduce_window(t, Op::reduce_window_sum, tx[0], a);
  const attr::SelectWindow p = a.selection(n.op == Op::reduce_window_max);
  return build::select_and_gather_add(t, tx[0], build::window_select(t, x[0], p), p);
}

NodeRef pool_local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops, const std::vector<AxisSharding>& op_sh,
                   const AxisSharding& natural) {
  attr::SelectWindow p = n.attr<attr::ReduceWindow>().selection();
  const OffsetTile x = offset_tile(b, p, ops, op_sh, natural);
  NodeRef y = build::reduce_window(b.table(), n.op, x.x, attr::ReduceWindow::of(p), x.offsets);
  return to_natural(b, y, windows_shape(n.attr<attr::ReduceWindow>().selection()), natural, x.splits);
}
}  // namespace

#define TESSEL_POOLING(OP)                                                                                       \
  Aval Rule<Op::OP>::infer(const std::vector<Aval>& in, const A& p, const Aval&) { return pool_infer(Op::OP, in, p); } \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {   \
    pool_eval(Op::OP, in, p, aval, out);                                                                          \
  }                                                                                                              \
  FactorRule Rule<Op::OP>::factors(const Node& n) { return window_factors(n, attrs_of(n).selection(), {true}, false); } \
  NodeRef Rule<Op::OP>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,                          \
                            const std::vector<NodeRef>& tx, const NodeRef&) {                                    \
    return pool_jvp(t, n, x, tx);                                                                                \
  }                                                                                                              \
  NodeRef Rule<Op::OP>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,                  \
                              const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {             \
    return pool_local(b, n, ops, op_sh, natural);                                                                \
  }                                                                                                              \
  NodeRef Rule<Op::OP>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,                        \
                              const std::vector<bool>&, const BatchInfo& b) {                                   \
    return build::reduce_window(t, Op::OP, x[0], attr::ReduceWindow::of(with_batch(attrs_of(n).selection(), b.size))); \
  }                                                                                                              \
  TESSEL_COMPLEX_NONE(OP)                                                                                        \
  NodeCost Rule<Op::OP>::cost(const Node& n) { return window_cost(n, attrs_of(n).selection()); }
TESSEL_POOLING(reduce_window_sum)
TESSEL_POOLING(reduce_window_max)
TESSEL_POOLING(reduce_window_min)
#undef TESSEL_POOLING

// JAX's _reduce_window_sum_transpose_rule: the cotangent interior-padded by
// the strides and padded by the window less the forward's padding, pooled
// with unit strides.
void Rule<Op::reduce_window_sum>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                            std::vector<NodeRef>& cts) {
  const auto& a = attrs_of(n);
  const std::size_t r = a.base.size();
  std::vector<std::int64_t> lo(r), hi(r), interior(r);
  for (std::size_t d = 0; d < r; ++d) {
    const std::int64_t out = ct->shape()[d], out_dilated = out == 0 ? 0 : (out - 1) * a.strides[d] + 1;
    lo[d] = a.window[d] - 1 - a.pad_lo[d];
    hi[d] = a.base[d] + a.window[d] - 1 - out_dilated - lo[d];
    interior[d] = out == 0 ? 0 : a.strides[d] - 1;
  }
  NodeRef padded = build::pad(t, ct, build::scalar(t, ct->dtype(), 0), lo, hi, interior);
  attr::ReduceWindow q;
  q.base = padded->shape();
  q.window = a.window;
  q.strides.assign(r, 1);
  q.pad_lo.assign(r, 0);
  q.pad_hi.assign(r, 0);
  cts[0] = build::reduce_window(t, Op::reduce_window_sum, padded, q);
}
void Rule<Op::reduce_window_max>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                            std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
void Rule<Op::reduce_window_min>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                            std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

}  // namespace tessel
