// Rules of the conv primitive (attr::Conv): lax.conv_general_dilated, with
// StableHLO's semantics; run by oneDNN or tessel's own loops
// (codegen/conv.cpp).
//
// Reference kernel: the direct sum over input features and kernel taps, in
// double (integers wrap), from StableHLO's definition.
// Derivatives: bilinear; the transposes are JAX's (_conv_general_dilated_
// transpose_lhs/rhs): the input's cotangent is a convolution of the
// cotangent with the reversed kernel, the strides becoming input dilation;
// the kernel's is a convolution of the input with the cotangent as kernel,
// feature groups becoming batch groups.
// Sharding: the batch is a free factor of the input and the result, the
// kernel's output features one of the kernel and the result, the input
// features a reduction factor (partial sums all-reduced); a spatial dim
// whose rows line up is split alike in the input and the result, the
// border rows exchanged with the neighbours (halo exchange); other spatial
// dims and, with groups, the grouped dims are replicated.
#include <algorithm>
#include <numeric>

#include "tessel/core/errors.hpp"
#include "tracer/accumulator.hpp"
#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tracer/halo.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

namespace {

std::int64_t dilate_dim(std::int64_t d, std::int64_t k) { return d == 0 ? 0 : 1 + k * (d - 1); }

// Sizes in the canonical order: input (N, C, spatial...), kernel (O, I,
// spatial...), result (N / B, O, spatial...).
struct Geometry {
  std::int64_t N = 0, C = 0, O = 0, I = 0;
  Shape in, kernel, out;
};

Geometry geometry(const attr::Conv& p, const Shape& lhs, const Shape& rhs) {
  Geometry g;
  g.N = lhs[std::size_t(p.lhs_spec[0])];
  g.C = lhs[std::size_t(p.lhs_spec[1])];
  g.O = rhs[std::size_t(p.rhs_spec[0])];
  g.I = rhs[std::size_t(p.rhs_spec[1])];
  for (std::size_t j = 2; j < p.lhs_spec.size(); ++j) {
    g.in.push_back(lhs[std::size_t(p.lhs_spec[j])]);
    g.kernel.push_back(rhs[std::size_t(p.rhs_spec[j])]);
  }
  for (std::size_t j = 0; j < g.in.size(); ++j) {
    const std::int64_t padded = dilate_dim(g.in[j], p.lhs_dilation[j]) + p.pad_lo[j] + p.pad_hi[j];
    const std::int64_t window = dilate_dim(g.kernel[j], p.rhs_dilation[j]);
    g.out.push_back(padded < window || window == 0 ? 0 : (padded - window) / p.strides[j] + 1);
  }
  return g;
}

std::string spec_str(const std::vector<std::int64_t>& v) { return rule_util::ints(v); }

void check_attrs(const attr::Conv& p, const std::vector<Aval>& in) {
  const std::size_t rank = in[0].shape.size(), k = rank - 2;
  auto bad = [&](const std::string& why) {
    return ValueError(cat("conv_general_dilated ", why, " (operands ", avals_str(in), ")"));
  };
  for (auto* spec : {&p.lhs_spec, &p.rhs_spec, &p.out_spec}) {
    std::vector<std::int64_t> s = *spec;
    std::sort(s.begin(), s.end());
    std::vector<std::int64_t> iota(rank);
    std::iota(iota.begin(), iota.end(), 0);
    if (s != iota)
      throw bad(cat("dimension numbers ", spec_str(p.lhs_spec), ", ", spec_str(p.rhs_spec), ", ", spec_str(p.out_spec),
                    " must each be a permutation of the ", rank, " dimensions"));
  }
  for (auto* v : {&p.strides, &p.pad_lo, &p.pad_hi, &p.lhs_dilation, &p.rhs_dilation})
    if (v->size() != k) throw bad(cat("needs one stride, pad and dilation per spatial dimension (", k, ")"));
  for (std::size_t j = 0; j < k; ++j)
    if (p.strides[j] < 1 || p.lhs_dilation[j] < 1 || p.rhs_dilation[j] < 1)
      throw bad(cat("strides and dilations must be positive, got strides ", spec_str(p.strides), ", lhs_dilation ",
                    spec_str(p.lhs_dilation), ", rhs_dilation ", spec_str(p.rhs_dilation)));
}

}  // namespace

Aval Rule<Op::conv>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::conv, in, 2);
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.size() != b.size() || a.size() < 2)
    throw TypeError(cat("conv_general_dilated needs lhs and rhs of one rank (at least 2), got ", avals_str(in)));
  if (in[0].dtype != in[1].dtype)
    throw TypeError(cat("conv_general_dilated requires arguments to have the same dtypes, got ", avals_str(in)));
  if (is_bool(in[0].dtype)) throw TypeError(cat("conv_general_dilated does not accept dtype bool, got ", avals_str(in)));
  if (is_narrow_float(in[0].dtype))
    throw TypeError(cat("the convolution primitive computes 16- and 8-bit floats in float32 (ts::lax converts), got ",
                        avals_str(in)));
  check_summable(Op::conv, in);
  check_attrs(p, in);
  const Geometry g = geometry(p, a, b);
  const std::int64_t G = p.feature_group_count, B = p.batch_group_count;
  if (G < 1 || B < 1 || (G > 1 && B > 1))
    throw ValueError(cat("conv_general_dilated: feature_group_count ", G, " and batch_group_count ", B,
                         " must be positive and at most one of them > 1"));
  if (g.C % G != 0 || g.C / G != g.I || g.O % G != 0)
    throw ValueError(cat("conv_general_dilated: lhs features ", g.C, " / feature_group_count ", G,
                         " must equal the kernel's input features ", g.I, ", and its output features ", g.O,
                         " be a multiple of the groups (", avals_str(in), ")"));
  if (g.N % B != 0 || g.O % B != 0)
    throw ValueError(cat("conv_general_dilated: batch ", g.N, " and kernel output features ", g.O,
                         " must be multiples of batch_group_count ", B, " (", avals_str(in), ")"));
  for (std::size_t j = 0; j < g.in.size(); ++j)
    if (dilate_dim(g.in[j], p.lhs_dilation[j]) + p.pad_lo[j] + p.pad_hi[j] < 0)
      throw ValueError(cat("Negative padding is larger than the size of the corresponding dimension: got padding ",
                           spec_str(p.pad_lo), ", ", spec_str(p.pad_hi), " for ", avals_str(in)));
  Shape o(a.size());
  o[std::size_t(p.out_spec[0])] = g.N / B;
  o[std::size_t(p.out_spec[1])] = g.O;
  for (std::size_t j = 0; j < g.out.size(); ++j) o[std::size_t(p.out_spec[2 + j])] = g.out[j];
  return Aval{in[0].dtype, o, in[0].weak_type && in[1].weak_type};
}

void Rule<Op::conv>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  const Shape &a = in[0]->shape, &b = in[1]->shape;
  const Geometry g = geometry(p, a, b);
  const auto as = row_major_strides(a), bs = row_major_strides(b), os = row_major_strides(aval.shape);
  const std::size_t k = g.in.size();
  const std::int64_t G = p.feature_group_count, B = p.batch_group_count;
  const std::int64_t Nb = g.N / B, Og = g.O / G, Ob = g.O / B;
  const std::int64_t nout = numel(g.out), ntaps = numel(g.kernel);
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    using S = Acc<T>;  // the sum's type
    const T* x = reinterpret_cast<const T*>(in[0]->bytes.data());
    const T* w = reinterpret_cast<const T*>(in[1]->bytes.data());
    T* z = reinterpret_cast<T*>(out.bytes.data());
    std::vector<std::int64_t> y(k), t(k);
    for (std::int64_t n = 0; n < Nb; ++n)
      for (std::int64_t o = 0; o < g.O; ++o) {
        const std::int64_t fg = o / Og, bg = o / Ob;
        const std::int64_t xn = bg * Nb + n;
        for (std::int64_t f = 0; f < nout; ++f) {
          for (std::int64_t r = f, j = std::int64_t(k) - 1; j >= 0; --j) y[std::size_t(j)] = r % g.out[std::size_t(j)], r /= g.out[std::size_t(j)];
          S acc = S(0);
          for (std::int64_t c = 0; c < g.I; ++c) {
            const std::int64_t xc = fg * g.I + c;
            for (std::int64_t tap = 0; tap < ntaps; ++tap) {
              for (std::int64_t r = tap, j = std::int64_t(k) - 1; j >= 0; --j)
                t[std::size_t(j)] = r % g.kernel[std::size_t(j)], r /= g.kernel[std::size_t(j)];
              std::int64_t xo = xn * as[std::size_t(p.lhs_spec[0])] + xc * as[std::size_t(p.lhs_spec[1])];
              std::int64_t wo = o * bs[std::size_t(p.rhs_spec[0])] + c * bs[std::size_t(p.rhs_spec[1])];
              bool inside = true;
              for (std::size_t j = 0; j < k && inside; ++j) {
                // Position in the dilated, padded input; inside when it falls on an input element.
                const std::int64_t q = y[j] * p.strides[j] + t[j] * p.rhs_dilation[j] - p.pad_lo[j];
                if (q < 0 || q % p.lhs_dilation[j] != 0 || q / p.lhs_dilation[j] >= g.in[j]) inside = false;
                else xo += (q / p.lhs_dilation[j]) * as[std::size_t(p.lhs_spec[2 + j])];
                wo += t[j] * bs[std::size_t(p.rhs_spec[2 + j])];
              }
              if (!inside) continue;
              if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
                acc = S(wrap_unsigned_t<T>(acc) + wrap_unsigned_t<T>(x[xo]) * wrap_unsigned_t<T>(w[wo]));
              else
                acc += S(x[xo]) * S(w[wo]);
            }
          }
          std::int64_t zo = n * os[std::size_t(p.out_spec[0])] + o * os[std::size_t(p.out_spec[1])];
          for (std::size_t j = 0; j < k; ++j) zo += y[j] * os[std::size_t(p.out_spec[2 + j])];
          if constexpr (is_complex_v<T>) z[zo] = T(typename T::value_type(acc.real()), typename T::value_type(acc.imag()));
          else z[zo] = T(acc);
        }
      }
  });
}

namespace {
// Whether spatial dim j can be split alike in the input and the result,
// each device computing its own result rows from the input rows they read
// (its tile and its neighbours' border rows, or rows of other tiles where
// the tiles are not in step): no input dilation (or no stride: an input
// gradient's form), a non-negative low pad, and a window no larger than the
// result's rows times the stride (not a kernel gradient's form, below).
bool haloable(const attr::Conv& p, const Shape& a, const Shape& b, std::size_t j) {
  const Geometry g = geometry(p, a, b);
  return (p.lhs_dilation[j] == 1 || p.strides[j] == 1) && p.pad_lo[j] >= 0 && g.out[j] > 0 &&
         dilate_dim(g.kernel[j], p.rhs_dilation[j]) <= g.out[j] * p.strides[j];
}
// Whether spatial dim j can be split alike in the input and the kernel, as a
// sum: a kernel gradient's form, whose kernel (the cotangent) spans the
// image. Each device sums over its own kernel rows, reading the input rows
// they meet; the partial results are all-reduced. A conv the transpose made
// for the kernel's cotangent (kernel_gradient) takes it at any size (a tiny
// image's cotangent, no larger than the kernel, would otherwise be
// gathered); any other where its kernel is larger than its result and the
// rows do not line up.
bool window_summable(const attr::Conv& p, const Shape& a, const Shape& b, std::size_t j) {
  const Geometry g = geometry(p, a, b);
  if (p.lhs_dilation[j] != 1 || p.pad_lo[j] < 0 || g.out[j] <= 0) return false;
  return p.kernel_gradient || (!haloable(p, a, b, j) && g.kernel[j] > g.out[j]);
}
}  // namespace

// The batch (without batch groups), the kernel's output features and the
// input features (without groups) are factors, and a spatial dim whose
// rows line up (haloable), or, in a kernel gradient's form, a spatial dim
// of the input and the kernel as a sum (window_summable); every other dim
// is replicated.
FactorRule Rule<Op::conv>::factors(const Node& n) {
  FactorRule r;
  const auto& p = attrs_of(n);
  const Shape &a = n.in[0]->shape(), &b = n.in[1]->shape(), &o = n.shape();
  const bool grouped = p.feature_group_count > 1 || p.batch_group_count > 1;
  std::vector<std::vector<int>> lhs(a.size()), rhs(b.size()), res(o.size());
  auto own = [&](std::vector<std::vector<int>>& dims, std::int64_t d, std::int64_t size) {
    dims[std::size_t(d)] = {r.add_factor(size, false, true)};
  };
  if (p.batch_group_count == 1) {
    const int f = r.add_factor(a[std::size_t(p.lhs_spec[0])]);
    lhs[std::size_t(p.lhs_spec[0])] = {f};
    res[std::size_t(p.out_spec[0])] = {f};
  } else {
    own(lhs, p.lhs_spec[0], a[std::size_t(p.lhs_spec[0])]);
    own(res, p.out_spec[0], o[std::size_t(p.out_spec[0])]);
  }
  if (!grouped) {
    const int f = r.add_factor(b[std::size_t(p.rhs_spec[0])]);
    rhs[std::size_t(p.rhs_spec[0])] = {f};
    res[std::size_t(p.out_spec[1])] = {f};
    const int c = r.add_factor(a[std::size_t(p.lhs_spec[1])], true);
    lhs[std::size_t(p.lhs_spec[1])] = {c};
    rhs[std::size_t(p.rhs_spec[1])] = {c};
  } else {
    own(rhs, p.rhs_spec[0], b[std::size_t(p.rhs_spec[0])]);
    own(res, p.out_spec[1], o[std::size_t(p.out_spec[1])]);
    own(lhs, p.lhs_spec[1], a[std::size_t(p.lhs_spec[1])]);
    own(rhs, p.rhs_spec[1], b[std::size_t(p.rhs_spec[1])]);
  }
  for (std::size_t j = 2; j < a.size(); ++j) {
    if (window_summable(p, a, b, j - 2)) {
      const int f = r.add_factor(std::max(a[std::size_t(p.lhs_spec[j])], b[std::size_t(p.rhs_spec[j])]), true);
      lhs[std::size_t(p.lhs_spec[j])] = {f};
      rhs[std::size_t(p.rhs_spec[j])] = {f};
      own(res, p.out_spec[j], o[std::size_t(p.out_spec[j])]);
      continue;
    }
    own(rhs, p.rhs_spec[j], b[std::size_t(p.rhs_spec[j])]);
    if (haloable(p, a, b, j - 2)) {
      // An input dim and the result's split alike: the window's border rows
      // come from the neighbours (the partition rule). Sized by the input's
      // rows, so that rows split finer than the result's stay split.
      const int f = r.add_factor(std::max(a[std::size_t(p.lhs_spec[j])], o[std::size_t(p.out_spec[j])]));
      lhs[std::size_t(p.lhs_spec[j])] = {f};
      res[std::size_t(p.out_spec[j])] = {f};
    } else {
      own(lhs, p.lhs_spec[j], a[std::size_t(p.lhs_spec[j])]);
      own(res, p.out_spec[j], o[std::size_t(p.out_spec[j])]);
    }
  }
  r.operands = {lhs, rhs};
  r.result = res;
  return r;
}

NodeRef Rule<Op::conv>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                            const NodeRef&) {
  NodeRef a = tx[0] ? build::conv(t, tx[0], x[1], attrs_of(n)) : nullptr;
  NodeRef b = tx[1] ? build::conv(t, x[0], tx[1], attrs_of(n)) : nullptr;
  return ad::add(t, a, b);
}

namespace {

// JAX's _reshape_axis_into: axis src of x merged into axis dst (numbered
// with src removed), src the major part.
NodeRef reshape_axis_into(NodeTable& t, std::int64_t src, std::int64_t dst, const NodeRef& x) {
  std::vector<std::int64_t> perm;
  for (std::int64_t i = 0; i < x->rank(); ++i)
    if (i != src) perm.push_back(i);
  perm.insert(perm.begin() + dst, src);
  Shape s;
  for (std::int64_t i = 0; i < x->rank(); ++i)
    if (i != src) s.push_back(x->shape()[std::size_t(i)]);
  s[std::size_t(dst)] *= x->shape()[std::size_t(src)];
  return build::reshape(t, build::transpose(t, x, perm), s);
}

// JAX's _reshape_axis_out_of: axis src of x split into (size1, rest).
NodeRef reshape_axis_out_of(NodeTable& t, std::int64_t src, std::int64_t size1, const NodeRef& x) {
  Shape s = x->shape();
  const std::int64_t whole = s[std::size_t(src)];
  s[std::size_t(src)] = whole / size1;
  s.insert(s.begin() + src, size1);
  return build::reshape(t, x, s);
}

std::vector<std::int64_t> swap01(std::vector<std::int64_t> spec) {
  std::swap(spec[0], spec[1]);
  return spec;
}

// x with axis `from` moved to position `to`.
NodeRef move_axis(NodeTable& t, const NodeRef& x, std::int64_t from, std::int64_t to) {
  if (from == to) return x;
  std::vector<std::int64_t> perm;
  for (std::int64_t i = 0; i < x->rank(); ++i)
    if (i != from) perm.push_back(i);
  perm.insert(perm.begin() + to, from);
  return build::transpose(t, x, perm);
}

}  // namespace

void Rule<Op::conv>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                               std::vector<NodeRef>& cts) {
  if (linear[0] && linear[1]) rule_util::not_linear(n);
  const auto& p = attrs_of(n);
  const Shape &a = n.in[0]->shape(), &b = n.in[1]->shape();
  const Geometry g = geometry(p, a, b);
  const std::size_t k = g.in.size();
  if (linear[0]) {
    // _conv_general_dilated_transpose_lhs
    NodeRef w = n.in[1];
    attr::Conv q = p;
    q.kernel_gradient = false;
    std::int64_t G = p.feature_group_count;
    const std::int64_t B = p.batch_group_count;
    if (G > 1 || B > 1) {
      const std::int64_t groups = G > 1 ? G : B;
      w = reshape_axis_out_of(t, p.rhs_spec[0], groups, w);
      w = reshape_axis_into(t, p.rhs_spec[0], p.rhs_spec[1], w);
      G = groups;
    }
    Shape kernel;
    std::vector<std::int64_t> sdims;
    for (std::size_t j = 0; j < k; ++j) {
      kernel.push_back(w->shape()[std::size_t(p.rhs_spec[2 + j])]);
      sdims.push_back(p.rhs_spec[2 + j]);
    }
    for (std::size_t j = 0; j < k; ++j) {
      const std::int64_t lhs_d = dilate_dim(g.in[j], p.lhs_dilation[j]);
      const std::int64_t rhs_d = dilate_dim(kernel[j], p.rhs_dilation[j]);
      const std::int64_t out_d = dilate_dim(g.out[j], p.strides[j]);
      const std::int64_t before = rhs_d - p.pad_lo[j] - 1;
      q.pad_lo[j] = before;
      q.pad_hi[j] = lhs_d + rhs_d - 1 - out_d - before;
    }
    q.strides = p.lhs_dilation;
    q.lhs_dilation = p.strides;
    q.lhs_spec = p.out_spec;
    q.rhs_spec = swap01(p.rhs_spec);
    q.out_spec = p.lhs_spec;
    q.feature_group_count = G;
    q.batch_group_count = 1;
    NodeRef r = build::conv(t, ct, build::rev(t, w, sdims), q);
    if (B > 1) {
      r = reshape_axis_out_of(t, p.lhs_spec[1], B, r);
      r = reshape_axis_into(t, p.lhs_spec[1], p.lhs_spec[0], r);
    }
    cts[0] = r;
  }
  if (linear[1]) {
    // _conv_general_dilated_transpose_rhs
    if (numel(ct->shape()) == 0) {
      cts[1] = ad::zeros(t, n.in[1]->aval);
      return;
    }
    attr::Conv q = p;
    q.feature_group_count = p.batch_group_count > 1 ? p.batch_group_count : 1;
    q.batch_group_count = p.feature_group_count > 1 ? p.feature_group_count : 1;
    for (std::size_t j = 0; j < k; ++j) {
      const std::int64_t lhs_d = dilate_dim(g.in[j], p.lhs_dilation[j]);
      const std::int64_t rhs_d = dilate_dim(g.kernel[j], p.rhs_dilation[j]);
      const std::int64_t out_d = dilate_dim(g.out[j], p.strides[j]);
      q.pad_lo[j] = p.pad_lo[j];
      q.pad_hi[j] = (out_d - lhs_d) + (rhs_d - p.pad_lo[j] - 1);
    }
    q.strides = p.rhs_dilation;
    q.rhs_dilation = p.strides;
    q.lhs_spec = swap01(p.lhs_spec);
    q.rhs_spec = swap01(p.out_spec);
    q.out_spec = swap01(p.rhs_spec);
    q.kernel_gradient = !p.kernel_gradient;  // a kernel gradient's own is a forward's form
    cts[1] = build::conv(t, n.in[0], ct, q);
  }
}

// A spatial dim split alike in the input and the result: each device takes
// the input rows its result rows read, from row k * to * stride - pad_lo on
// tile k's device, (to - 1) * stride + the dilated window of them
// (halo::rows_at: its neighbours' border rows where its rows are the stride
// times its result rows, by collective permutes from whichever tiles hold
// them elsewhere; zeros past the ends, the convolution's own padding) and
// convolves them unpadded. A spatial dim split as a sum (a kernel
// gradient's) takes the input rows its kernel rows read, from row
// k * kernel tile * kernel dilation - pad_lo on, and convolves them with
// this device's kernel rows: a partial sum. Where the result (the kernel)
// is not split alike, the dim is gathered instead: the result is cut to
// the tile, or, for a sum, kept on the first tile only (zeros elsewhere).
NodeRef Rule<Op::conv>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                              const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  const auto& p = attrs_of(n);
  NodeTable& t = b.table();
  const Shape &G = n.in[0]->shape(), &K = n.in[1]->shape();
  const Geometry g = geometry(p, G, K);
  struct Split {
    std::size_t j;
    bool sum, lines_up;               // lines_up: split alike (else gathered)
    std::vector<std::int64_t> starts;  // tile k reads `rows` input rows from starts[k]
    std::int64_t rows = 0;
    // An input-dilated dim: tile k's convolution makes `made` result rows,
    // of which it keeps `keep` from cut[k] on (none: it makes its own).
    std::int64_t made = 0, keep = 0;
    std::vector<std::int64_t> cut;
    // A one-row window at a stride (or a sum's one result row over a
    // dilated kernel): only every step-th row is read, so only those are
    // gathered, and the convolution runs on them at stride (dilation) 1.
    std::int64_t step = 1;
  };
  std::vector<Split> splits;
  for (std::size_t j = 0; j < g.in.size(); ++j) {
    const auto& A = op_sh[0].dims[std::size_t(p.lhs_spec[2 + j])];
    if (A.empty()) continue;
    const std::int64_t T = b.tiles(A), L = p.pad_lo[j], span = dilate_dim(g.kernel[j], p.rhs_dilation[j]) - 1;
    Split s{j, window_summable(p, G, K, j) || !haloable(p, G, K, j), false, std::vector<std::int64_t>(static_cast<std::size_t>(T)), 0, 0, 0, {}};
    if (!s.sum && p.lhs_dilation[j] > 1) {
      // Result rows k * to ..: made from the last row a at or before them
      // whose window starts on an input row ((a - pad_lo) % dilation == 0),
      // which is input row (a - pad_lo) / dilation, then cut.
      const std::int64_t dl = p.lhs_dilation[j], to = (g.out[j] + T - 1) / T;
      std::int64_t most = 0;
      s.cut.resize(std::size_t(T));
      for (std::int64_t k = 0; k < T; ++k) {
        const std::int64_t e = ((k * to - L) % dl + dl) % dl;
        s.cut[std::size_t(k)] = e;
        s.starts[std::size_t(k)] = (k * to - e - L) / dl;
        most = std::max(most, e);
      }
      s.keep = to;
      s.made = to + most;
      s.rows = (s.made - 1 + span) / dl + 1;
      s.lines_up = natural.dims[std::size_t(p.out_spec[2 + j])] == A;
    } else if (!s.sum) {
      const std::int64_t step = (g.out[j] + T - 1) / T * p.strides[j];  // a device's result rows times the stride
      for (std::int64_t k = 0; k < T; ++k) s.starts[std::size_t(k)] = k * step - L;
      s.rows = step - p.strides[j] + span + 1;
      if (span == 0 && p.strides[j] > 1) {
        s.step = p.strides[j];
        s.rows = step / p.strides[j];
      }
      s.lines_up = natural.dims[std::size_t(p.out_spec[2 + j])] == A;
    } else {
      const std::int64_t step = (g.kernel[j] + T - 1) / T * p.rhs_dilation[j];  // a device's kernel rows times their dilation
      for (std::int64_t k = 0; k < T; ++k) s.starts[std::size_t(k)] = k * step - L;
      s.rows = step - p.rhs_dilation[j] + dilate_dim(g.out[j], p.strides[j]);
      if (g.out[j] == 1 && p.rhs_dilation[j] > 1) {  // a 1x1 strided layer's kernel gradient: every dilation-th row
        s.step = p.rhs_dilation[j];
        s.rows = step / p.rhs_dilation[j];
      }
      s.lines_up = op_sh[1].dims[std::size_t(p.rhs_spec[2 + j])] == A && p.lhs_dilation[j] == 1;
    }
    s.lines_up = s.lines_up && L >= 0;
    splits.push_back(s);
  }
  if (splits.empty()) return build::with_operands(t, n, ops);
  NodeRef x = ops[0], w = ops[1];
  AxisSharding xs = op_sh[0], ws = op_sh[1];
  {
    AxisSharding xw = xs, ww = ws;
    for (auto& s : splits)
      if (!s.lines_up) {
        xw.dims[std::size_t(p.lhs_spec[2 + s.j])].clear();
        if (s.sum) ww.dims[std::size_t(p.rhs_spec[2 + s.j])].clear();
      }
    if (xw.dims != xs.dims) x = b.reshard(x, G, xs, xw), xs = xw;
    if (ww.dims != ws.dims) w = b.reshard(w, K, ws, ww), ws = ww;
  }
  attr::Conv q = p;
  std::vector<int> xdims, wdims;
  for (auto& s : splits)
    if (s.lines_up) {
      xdims.push_back(int(p.lhs_spec[2 + s.j]));
      if (s.sum) wdims.push_back(int(p.rhs_spec[2 + s.j]));
    }
  // Uneven tiles' padding: zeros (the convolution's padding; no term of a sum).
  if (!xdims.empty()) x = b.mask(x, G, xs, xdims, reduction_identity(Op::add, x->dtype()));
  if (!wdims.empty()) w = b.mask(w, K, ws, wdims, reduction_identity(Op::add, w->dtype()));
  for (auto& s : splits) {
    if (!s.lines_up) continue;
    const int d = int(p.lhs_spec[2 + s.j]);
    const auto& A = xs.dims[std::size_t(d)];
    x = halo::rows_at(b, x, A, d, s.starts, s.rows, s.step);
    if (s.step > 1) (s.sum ? q.rhs_dilation : q.strides)[s.j] = 1;
    q.pad_lo[s.j] = 0;
    // Undilated: the rows read make the device's result rows exactly.
    q.pad_hi[s.j] = s.made == 0 ? 0 : s.made + dilate_dim(g.kernel[s.j], p.rhs_dilation[s.j]) - 1 - dilate_dim(s.rows, p.lhs_dilation[s.j]);
  }
  NodeRef y = build::conv(t, x, w, q);
  for (auto& s : splits)
    if (s.lines_up && s.made != s.keep)
      y = halo::tile_rows(b, y, op_sh[0].dims[std::size_t(p.lhs_spec[2 + s.j])], int(p.out_spec[2 + s.j]), s.cut, s.keep);
  AxisSharding whole = natural;
  NodeRef first;  // whether this device holds the first tile of every gathered sum
  for (auto& s : splits) {
    if (s.lines_up) continue;
    if (!s.sum) {
      whole.dims[std::size_t(p.out_spec[2 + s.j])].clear();
      continue;
    }
    const auto& A = op_sh[0].dims[std::size_t(p.lhs_spec[2 + s.j])];
    NodeRef at0 = build::binary(t, Op::eq, b.offset(A, 1), build::scalar(t, DType::int32, 0));
    first = first ? build::binary(t, Op::and_, first, at0) : at0;
  }
  if (first)
    y = build::select(t, build::broadcast_in_dim(t, first, y->shape(), {}), y, ad::zeros_like(t, y));
  if (whole.dims != natural.dims) y = b.reshard(y, n.shape(), whole, natural);
  return y;
}

// JAX's _conv_general_dilated_batch_rule for the input batched (merged into
// the batch), the kernel batched (into the output features) and both (into
// the feature groups); with groups and one side batched, a map.
NodeRef Rule<Op::conv>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                              const BatchInfo& bi) {
  attr::Conv p = attrs_of(n);
  const std::int64_t bs = bi.size;
  if (bs == 0) return bt::by_map(t, n, x, batched, bi);
  if (batched[0] && batched[1]) {
    NodeRef l;
    if (p.batch_group_count > 1) {
      l = reshape_axis_into(t, 0, p.lhs_spec[0], x[0]);
      p.batch_group_count *= bs;
    } else {
      l = reshape_axis_into(t, 0, p.lhs_spec[1], x[0]);
      p.feature_group_count *= bs;
    }
    NodeRef r = reshape_axis_into(t, 0, p.rhs_spec[0], x[1]);
    NodeRef y = reshape_axis_out_of(t, p.out_spec[1], bs, build::conv(t, l, r, p));
    return move_axis(t, y, p.out_spec[1], 0);
  }
  if (batched[0] && p.batch_group_count == 1) {
    NodeRef l = reshape_axis_into(t, 0, p.lhs_spec[0], x[0]);
    NodeRef y = reshape_axis_out_of(t, p.out_spec[0], bs, build::conv(t, l, x[1], p));
    return move_axis(t, y, p.out_spec[0], 0);
  }
  if (batched[1] && p.feature_group_count == 1 && p.batch_group_count == 1) {
    NodeRef r = reshape_axis_into(t, 0, p.rhs_spec[0], x[1]);
    NodeRef y = reshape_axis_out_of(t, p.out_spec[1], bs, build::conv(t, x[0], r, p));
    return move_axis(t, y, p.out_spec[1], 0);
  }
  return bt::by_map(t, n, x, batched, bi);
}

// (a + bi)(c + di) summed: four real convolutions.
NodeRef Rule<Op::conv>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& p = attrs_of(n);
  Parts x = b.unpack(ops[0]), y = b.unpack(ops[1]);
  auto cv = [&](const NodeRef& l, const NodeRef& r) { return build::conv(b.table(), l, r, p); };
  return b.pack({b.sub(cv(x.re, y.re), cv(x.im, y.im)), b.add(cv(x.re, y.im), cv(x.im, y.re))});
}

// Two flops per result element, input feature of its group and kernel tap.
NodeCost Rule<Op::conv>::cost(const Node& n) {
  NodeCost c = rule_util::memory_cost(n);
  const auto& p = attrs_of(n);
  const Shape& b = n.in[1]->shape();
  double taps = double(b[std::size_t(p.rhs_spec[1])]);
  for (std::size_t j = 2; j < b.size(); ++j) taps *= double(b[std::size_t(p.rhs_spec[j])]);
  c.flops = 2 * double(numel(n.shape())) * taps;
  return c;
}

}  // namespace tessel
