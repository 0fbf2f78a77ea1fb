// jax.lax's convolutions (tessel/conv.hpp) over the conv primitive
// (tracer/rules_conv.cpp), and reduce_window composed of pads, strided
// slices and a tree of the op (docs/convolutions.md).
#include <tessel/conv.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"
#include "tessel/custom.hpp"
#include "tessel/creation.hpp"
#include "tessel/dtype_info.hpp"
#include "tessel/ops.hpp"
#include "tracer/build.hpp"

namespace tessel::lax {

namespace {

using detail::cat;

using Pairs = std::vector<std::pair<std::int64_t, std::int64_t>>;

std::vector<std::int64_t> ones_if_empty(const std::vector<std::int64_t>& v, std::size_t n, const char* what,
                                        const char* name) {
  if (v.empty()) return std::vector<std::int64_t>(n, 1);
  if (v.size() != n)
    throw ValueError(cat(what, " ", name, " argument must have length equal to the number of spatial dimensions (", n,
                         "), got ", v.size()));
  for (auto d : v)
    if (d < 1) throw ValueError(cat(what, " ", name, " must be positive, got ", d));
  return v;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  return s;
}

// lax.padtype_to_pads: "SAME" puts the odd element last, "SAME_LOWER" first.
Pairs pads_of(const Padding& p, const Shape& in, const std::vector<std::int64_t>& window,
              const std::vector<std::int64_t>& strides, const char* what) {
  if (p.kind.empty()) {
    if (p.pairs.size() != in.size())
      throw ValueError(cat(what, " padding must have one (low, high) pair per spatial dimension (", in.size(), "), got ",
                           p.pairs.size()));
    return p.pairs;
  }
  const std::string k = upper(p.kind);
  Pairs out;
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (k == "VALID") {
      out.push_back({0, 0});
      continue;
    }
    if (k != "SAME" && k != "SAME_LOWER") throw ValueError(cat("Unknown padding type: ", p.kind, "."));
    const std::int64_t o = (in[d] + strides[d] - 1) / strides[d];
    const std::int64_t total = std::max<std::int64_t>(0, (o - 1) * strides[d] + window[d] - in[d]);
    const std::int64_t lo = k == "SAME" ? total / 2 : total - total / 2;
    out.push_back({lo, total - lo});
  }
  return out;
}

// x with d - 1 copies of `fill` between neighbours along axis.
Array dilate(const Array& x, int axis, std::int64_t d, double fill) {
  const std::int64_t n = x.shape()[std::size_t(axis)];
  if (d == 1 || n == 0) return x;
  std::vector<Array> parts{x};
  const Array f = full_like(x, fill);
  for (std::int64_t k = 1; k < d; ++k) parts.push_back(f);
  Shape merged = x.shape();
  merged[std::size_t(axis)] = n * d;
  Array y = reshape(stack(parts, axis + 1), merged);
  std::vector<IndexItem> idx(std::size_t(x.ndim()), all);
  idx[std::size_t(axis)] = slice(0, (n - 1) * d + 1);
  return y.index(idx);
}

// x padded with `fill` by (lo, hi) along axis; a negative side crops.
Array pad_axis(const Array& x, int axis, std::int64_t lo, std::int64_t hi, double fill) {
  Array y = x;
  if (lo > 0 || hi > 0) {
    Pairs w(std::size_t(x.ndim()), {0, 0});
    w[std::size_t(axis)] = {std::max<std::int64_t>(lo, 0), std::max<std::int64_t>(hi, 0)};
    y = pad(y, w, fill);
  }
  if (lo < 0 || hi < 0) {
    const std::int64_t n = y.shape()[std::size_t(axis)];
    const std::int64_t a = lo < 0 ? -lo : 0, b = hi < 0 ? n + hi : n;
    std::vector<IndexItem> idx(std::size_t(y.ndim()), all);
    idx[std::size_t(axis)] = slice(std::min(a, n), std::max(std::min(a, n), b));
    y = y.index(idx);
  }
  return y;
}

// The windows of x (dims `dims`, each padded already): for every tap of
// `window` (row-major), the strided slice it meets.
std::vector<Array> windows(const Array& x, const std::vector<int>& dims, const std::vector<std::int64_t>& window,
                           const std::vector<std::int64_t>& strides, const std::vector<std::int64_t>& dilation) {
  std::vector<std::int64_t> out;  // the number of windows along each of `dims`
  for (std::size_t j = 0; j < dims.size(); ++j) {
    const std::int64_t n = x.shape()[std::size_t(dims[j])], eff = (window[j] - 1) * dilation[j] + 1;
    out.push_back(n >= eff ? (n - eff) / strides[j] + 1 : 0);
  }
  std::int64_t taps = 1;
  for (auto w : window) taps *= w;
  std::vector<Array> slices;
  for (std::int64_t t = 0; t < taps; ++t) {
    std::vector<IndexItem> idx(std::size_t(x.ndim()), all);
    std::int64_t rest = t;
    for (std::size_t j = dims.size(); j-- > 0;) {
      const std::int64_t k = rest % window[j];
      rest /= window[j];
      const std::int64_t start = k * dilation[j];
      idx[std::size_t(dims[j])] = out[j] == 0 ? slice(0, 0) : slice(start, start + (out[j] - 1) * strides[j] + 1, strides[j]);
    }
    slices.push_back(x.index(idx));
  }
  return slices;
}

struct Layout {
  std::vector<int> lhs, rhs, out;  // (batch, feature, spatial...) positions; the kernel's (out, in, spatial...)
};

Layout layout_of(const std::vector<std::string>& specs, int rank) {
  Layout l;
  if (specs.empty()) {
    for (int d = 0; d < rank; ++d) l.lhs.push_back(d), l.rhs.push_back(d), l.out.push_back(d);
    return l;
  }
  if (specs.size() != 3)
    throw ValueError(cat("convolution dimension_numbers must have three layout strings (lhs, rhs, out), got ",
                         specs.size()));
  for (std::size_t s = 0; s < 3; ++s)
    if (int(specs[s].size()) != rank)
      throw ValueError(cat("convolution dimension_numbers[", s, "] must have length equal to the ndim of the operands (",
                           rank, "), got '", specs[s], "'"));
  const std::string &ls = specs[0], &rs = specs[1], &os = specs[2];
  auto letters_ok = [&](const std::string& s, char a, char b) {
    std::string seen;
    for (char c : s) {
      if (seen.find(c) != std::string::npos) return false;
      seen += c;
    }
    return s.find(a) != std::string::npos && s.find(b) != std::string::npos;
  };
  if (!letters_ok(ls, 'N', 'C') || !letters_ok(rs, 'O', 'I') || !letters_ok(os, 'N', 'C'))
    throw ValueError(cat("convolution dimension_numbers (", ls, ", ", rs, ", ", os,
                         ") must name N and C in lhs and out, O and I in rhs, each letter once"));
  std::string spatial;
  for (char c : rs)
    if (c != 'O' && c != 'I') spatial += c;
  auto spatial_of = [&](const std::string& s, char a, char b) {
    std::string sp;
    for (char c : s)
      if (c != a && c != b) sp += c;
    std::string x = sp, y = spatial;
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    if (x != y)
      throw ValueError(cat("convolution dimension_numbers (", ls, ", ", rs, ", ", os,
                           ") must name the same spatial dimensions in lhs, rhs and out"));
  };
  spatial_of(ls, 'N', 'C');
  spatial_of(os, 'N', 'C');
  auto perm = [&](const std::string& s, char a, char b) {
    std::vector<int> p{int(s.find(a)), int(s.find(b))};
    for (char c : spatial) p.push_back(int(s.find(c)));
    return p;
  };
  l.lhs = perm(ls, 'N', 'C');
  l.rhs = perm(rs, 'O', 'I');
  l.out = perm(os, 'N', 'C');
  return l;
}

Array conv_impl(const Array& lhs_in, const Array& rhs_in, const std::vector<std::int64_t>& strides_in,
                const Padding& padding, const ConvOptions& o) {
  const char* what = "conv_general_dilated";
  if (lhs_in.ndim() != rhs_in.ndim())
    throw TypeError(cat(what, " lhs and rhs must have the same number of dimensions, got ", lhs_in.ndim(), " and ",
                        rhs_in.ndim()));
  if (lhs_in.ndim() < 2) throw TypeError(cat(what, " needs operands of at least 2 dimensions, got ", lhs_in.ndim()));
  if (lhs_in.dtype() != rhs_in.dtype())
    throw TypeError(cat(what, " requires arguments to have the same dtypes, got ", dtype_name(lhs_in.dtype()), ", ",
                        dtype_name(rhs_in.dtype()), "."));
  if (lhs_in.dtype() == DType::bool_) throw TypeError(cat(what, " does not accept dtype bool."));
  const int rank = lhs_in.ndim(), k = rank - 2;
  const Layout l = layout_of(o.dimension_numbers, rank);
  // The operands' shapes in the canonical order: (N, C, S...), (O, I, K...).
  Shape xs, wsh;
  for (int d = 0; d < rank; ++d)
    xs.push_back(lhs_in.shape()[std::size_t(l.lhs[std::size_t(d)])]), wsh.push_back(rhs_in.shape()[std::size_t(l.rhs[std::size_t(d)])]);
  const auto strides = ones_if_empty(strides_in, std::size_t(k), what, "window_strides");
  const auto ld = ones_if_empty(o.lhs_dilation, std::size_t(k), what, "lhs_dilation");
  const auto rd = ones_if_empty(o.rhs_dilation, std::size_t(k), what, "rhs_dilation");
  const std::int64_t G = o.feature_group_count, B = o.batch_group_count;
  const std::int64_t N = xs[0], C = xs[1], O = wsh[0], I = wsh[1];
  if (G < 1 || B < 1) throw ValueError(cat(what, " feature_group_count and batch_group_count must be positive, got ", G, " and ", B));
  if (G > 1 && B > 1)
    throw ValueError(cat(what, " At most one of batch_group_count and feature_group_count may be > 1, got batch_group_count=",
                         B, " and feature_group_count=", G));
  if (C % G != 0)
    throw ValueError(cat(what, " feature_group_count must divide lhs feature dimension size, but ", G,
                         " does not divide ", C, "."));
  if (C / G != I)
    throw ValueError(cat(what, " lhs feature dimension size divided by feature_group_count must equal the rhs input "
                               "feature dimension size, but ", C, " // ", G, " != ", I, "."));
  if (O % G != 0)
    throw ValueError(cat(what, " rhs output feature dimension size must be a multiple of feature_group_count, but ", O,
                         " is not a multiple of ", G, "."));
  if (N % B != 0)
    throw ValueError(cat(what, " lhs batch dimension size must be evenly divisible by batch_group_count, but ", N,
                         " is not a multiple of ", B, "."));
  if (O % B != 0)
    throw ValueError(cat(what, " rhs output feature dimension size must be a multiple of batch_group_count, but ", O,
                         " is not a multiple of ", B, "."));
  Shape in(xs.begin() + 2, xs.end());
  std::vector<std::int64_t> kernel(wsh.begin() + 2, wsh.end()), eff;
  for (int j = 0; j < k; ++j) eff.push_back((kernel[std::size_t(j)] - 1) * rd[std::size_t(j)] + 1);
  const Pairs pads = pads_of(padding, in, eff, strides, what);
  attr::Conv how;
  how.strides = strides;
  for (auto& pr : pads) how.pad_lo.push_back(pr.first), how.pad_hi.push_back(pr.second);
  how.lhs_dilation = ld;
  how.rhs_dilation = rd;
  how.lhs_spec.assign(l.lhs.begin(), l.lhs.end());
  how.rhs_spec.assign(l.rhs.begin(), l.rhs.end());
  how.out_spec.assign(l.out.begin(), l.out.end());
  how.feature_group_count = G;
  how.batch_group_count = B;
  const auto pref = o.preferred_element_type;
  return detail::apply1(what, {lhs_in, rhs_in}, [&](NodeTable& t, const std::vector<NodeRef>& ops) {
    // The dtype it computes in: the preferred one when that holds every
    // operand value (int8 to int32, bfloat16 to float32) or the operands
    // are integers and it is a float (as a dot's); 16- and 8-bit floats in
    // float32, rounded once to the result's dtype.
    DType compute = ops[0]->dtype();
    if (pref) {
      if (is_inexact(compute) && !is_inexact(*pref))
        throw TypeError(cat(what, ": preferred_element_type ", dtype_name(*pref), " is not a floating type for ",
                            dtype_name(compute), " operands"));
      if (is_complex(compute) && !is_complex(*pref))
        throw TypeError(cat(what, ": preferred_element_type ", dtype_name(*pref), " is not complex for ",
                            dtype_name(compute), " operands"));
      if (can_cast(compute, *pref, "safe") || (!is_inexact(compute) && is_inexact(*pref))) compute = *pref;
    }
    const DType result = pref ? *pref : ops[0]->dtype();
    if (is_narrow_float(compute)) compute = DType::float32;
    auto as = [&](const NodeRef& v, DType d) { return v->dtype() == d ? v : detail::compose::cast(t, v, d, v->aval.weak_type); };
    NodeRef y = build::conv(t, as(ops[0], compute), as(ops[1], compute), how);
    return as(y, result);
  });
}

}  // namespace

Array conv_general_dilated(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& window_strides,
                           const Padding& padding, const ConvOptions& options) {
  return conv_impl(lhs, rhs, window_strides, padding, options);
}

Array conv(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& window_strides, const Padding& padding,
           std::optional<DType> preferred_element_type) {
  return conv_general_dilated(lhs, rhs, window_strides, padding, {.preferred_element_type = preferred_element_type});
}

Array conv_with_general_padding(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& window_strides,
                                const Padding& padding, const std::vector<std::int64_t>& lhs_dilation,
                                const std::vector<std::int64_t>& rhs_dilation,
                                std::optional<DType> preferred_element_type) {
  return conv_general_dilated(lhs, rhs, window_strides, padding,
                              {.lhs_dilation = lhs_dilation, .rhs_dilation = rhs_dilation,
                               .preferred_element_type = preferred_element_type});
}

Array conv_transpose(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& strides,
                     const Padding& padding, const ConvTransposeOptions& o) {
  const int rank = rhs.ndim(), k = rank - 2;
  if (lhs.ndim() != rank || rank < 2)
    throw TypeError(cat("conv_transpose: lhs and rhs must have the same number (>= 2) of dimensions, got ", lhs.ndim(),
                        " and ", rank));
  // jax.lax.conv_transpose's default: TensorFlow's layouts (NHWC, HWIO).
  std::vector<std::string> dn = o.dimension_numbers;
  if (dn.empty()) {
    const std::string sp = std::string("HWDEFGJKLMPQRSTUVXYZ").substr(0, std::size_t(std::max(k, 0)));
    dn = {"N" + sp + "C", sp + "IO", "N" + sp + "C"};
  }
  const Layout l = layout_of(dn, rank);
  const auto rd = ones_if_empty(o.rhs_dilation, std::size_t(k), "conv_transpose", "rhs_dilation");
  const auto st = ones_if_empty(strides, std::size_t(k), "conv_transpose", "strides");
  // The kernel's spatial sizes, dilated.
  std::vector<std::int64_t> eff;
  for (int j = 0; j < k; ++j) eff.push_back((rhs.shape()[std::size_t(l.rhs[std::size_t(2 + j)])] - 1) * rd[std::size_t(j)] + 1);
  // jax's _conv_transpose_padding for the strings; pairs as given.
  Pairs pads;
  if (padding.kind.empty()) {
    pads = padding.pairs;
    if (pads.size() != std::size_t(k))
      throw ValueError(cat("conv_transpose padding must have one (low, high) pair per spatial dimension (", k, "), got ",
                           pads.size()));
  } else {
    const std::string kind = upper(padding.kind);
    for (int j = 0; j < k; ++j) {
      const std::int64_t kk = eff[std::size_t(j)], s = st[std::size_t(j)];
      std::int64_t len, lo;
      if (kind == "SAME") {
        len = kk + s - 2;
        lo = s > kk - 1 ? kk - 1 : (len + 1) / 2;
      } else if (kind == "VALID") {
        len = kk + s - 2 + std::max<std::int64_t>(kk - s, 0);
        lo = kk - 1;
      } else {
        throw ValueError("Padding mode must be `SAME` or `VALID`.");
      }
      pads.push_back({lo, len - lo});
    }
  }
  Array w = rhs;
  if (o.transpose_kernel) {
    // Flip the spatial dims and swap the kernel's O and I.
    std::vector<int> spatial;
    for (int j = 0; j < k; ++j) spatial.push_back(l.rhs[std::size_t(2 + j)]);
    w = flip(w, spatial);
    std::string& rs = dn[1];
    std::swap(rs[rs.find('O')], rs[rs.find('I')]);
  }
  // As a convolution: lhs dilated by the strides.
  return conv_general_dilated(lhs, w, std::vector<std::int64_t>(std::size_t(k), 1), pads,
                              {.lhs_dilation = st, .rhs_dilation = rd, .dimension_numbers = dn,
                               .preferred_element_type = o.preferred_element_type});
}

Array reduce_window(const Array& x, double init, const std::string& op, const std::vector<std::int64_t>& window,
                    const std::vector<std::int64_t>& strides_in, const Padding& padding,
                    const std::vector<std::int64_t>& base_dilation, const std::vector<std::int64_t>& window_dilation) {
  const char* what = "reduce_window";
  const std::size_t r = std::size_t(x.ndim());
  if (window.size() != r)
    throw ValueError(cat(what, ": window_dimensions must have one entry per dimension of the operand (", r, "), got ",
                         window.size()));
  for (auto w : window)
    if (w < 1) throw ValueError(cat(what, ": window_dimensions must be positive, got ", w));
  std::function<Array(const Array&, const Array&)> f;
  if (op == "add" || op == "sum") f = [](const Array& a, const Array& b) { return a + b; };
  else if (op == "max") f = [](const Array& a, const Array& b) { return maximum(a, b); };
  else if (op == "min") f = [](const Array& a, const Array& b) { return minimum(a, b); };
  else if (op == "mul") f = [](const Array& a, const Array& b) { return a * b; };
  else throw ValueError(cat(what, ": unsupported reduction '", op, "' (add, max, min, mul)"));
  const auto strides = ones_if_empty(strides_in, r, what, "window_strides");
  const auto bd = ones_if_empty(base_dilation, r, what, "base_dilation");
  const auto wd = ones_if_empty(window_dilation, r, what, "window_dilation");
  std::vector<std::int64_t> eff;
  for (std::size_t d = 0; d < r; ++d) eff.push_back((window[d] - 1) * wd[d] + 1);
  const Pairs pads = pads_of(padding, x.shape(), eff, strides, what);
  std::vector<int> dims;
  for (std::size_t d = 0; d < r; ++d) dims.push_back(int(d));
  // The taps of v padded (and dilated) with `fill`, each a strided slice. A
  // balanced tree of the op over them: the gradient is then a sum of interior
  // pads of the operand's shape, which fuses into one loop over it (a stack of
  // the taps, (o..., T), made the gradient's loops run along T and was 4x
  // slower for 2x2 pooling).
  auto taps_of = [=](const Array& v, double fill) {
    Array p = v;
    for (std::size_t d = 0; d < r; ++d) {
      p = dilate(p, int(d), bd[d], fill);
      p = pad_axis(p, int(d), pads[d].first, pads[d].second, fill);
    }
    return windows(p, dims, window, strides, wd);
  };
  auto tree = [f](std::vector<Array> level) {
    while (level.size() > 1) {
      std::vector<Array> next;
      for (std::size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(f(level[i], level[i + 1]));
      if (level.size() % 2) next.push_back(level.back());
      level = std::move(next);
    }
    return level[0];
  };
  // XLA's ReduceWindow starts each window's reduction from init, so an init
  // that is not the op's identity enters every window once more (the
  // padding holds it too): reduce_window(ones, 1.0, "add", 2) is 3.
  const bool floating = issubdtype(x.dtype(), "floating");
  const bool integer = issubdtype(x.dtype(), "integer");
  const double lowest = integer ? double(iinfo(x.dtype()).min) : x.dtype() == DType::bool_ ? 0.0 : -INFINITY;
  const double highest = integer ? double(iinfo(x.dtype()).max) : x.dtype() == DType::bool_ ? 1.0 : INFINITY;
  const bool identity = op == "add" || op == "sum" ? init == 0.0
                        : op == "mul"             ? init == 1.0
                        : op == "max"             ? init <= lowest
                                                  : init >= highest;
  if (!identity) {
    const Array y = tree(taps_of(x, init));
    return f(full_like(y, init), y);
  }
  // The window primitives serve windows without dilation, with padding >= 0
  // and at most 64 taps (each a load in the fused loop).
  std::int64_t taps = 1;
  bool plain = true;
  for (std::size_t d = 0; d < r; ++d) {
    taps *= window[d];
    plain = plain && bd[d] == 1 && wd[d] == 1 && pads[d].first >= 0 && pads[d].second >= 0;
  }
  attr::ReduceWindow how;
  how.base = x.shape();
  how.window = window;
  how.strides = strides;
  for (auto& pr : pads) how.pad_lo.push_back(pr.first), how.pad_hi.push_back(pr.second);
  // JAX's pooling primitives (reduce_window_sum, _max, _min) for real
  // float32/float64 and integer operands: one fused loop over the windows,
  // split along the rows with their neighbours' border rows; the max's and
  // min's tangent is select_and_gather_add of the window's selection (the
  // primitive's rule).
  const DType xt = x.dtype();
  const bool wide = xt == DType::float32 || xt == DType::float64 || integer;
  if (wide && plain && taps <= 64 && (op == "add" || op == "sum" || op == "max" || op == "min")) {
    const Op prim = op == "max" ? Op::reduce_window_max : op == "min" ? Op::reduce_window_min : Op::reduce_window_sum;
    return detail::apply1("reduce_window", {x}, [&](NodeTable& t, const std::vector<NodeRef>& ops) {
      return build::reduce_window(t, prim, ops[0], how);
    });
  }
  // 16- and 8-bit floats: the tree of taps (rounded as XLA rounds each op),
  // the tangent picked in float32.
  if ((op == "max" || op == "min") && floating && plain && taps <= 64) {
    const attr::SelectWindow sel = how.selection(op == "max");
    auto fun = [=](const std::vector<Array>& a) { return std::vector<Array>{tree(taps_of(a[0], init))}; };
    // The tangent at each window's first extreme, picked in float32 for
    // 16- and 8-bit floats (exact).
    auto jvp = [=](const std::vector<Array>& a) {
      const Array y = tree(taps_of(a[0], init));
      const DType dt = a[0].dtype();
      const DType c = dt == DType::float64 ? dt : DType::float32;
      const Array dy = detail::apply1("reduce_window", {a[1].astype(c), a[0].astype(c)},
                                      [&](NodeTable& t, const std::vector<NodeRef>& ops) {
                                        return build::select_and_gather_add(t, ops[0], build::window_select(t, ops[1], sel),
                                                                            sel);
                                      });
      return std::vector<Array>{y, dy.astype(dt)};
    };
    return detail::custom_jvp_call("reduce_window_" + op, fun, jvp, {x}, {})[0];
  }
  if ((op == "max" || op == "min") && floating) {
    // JAX's derivative (_reduce_window_chooser_jvp_rule, select_and_gather_add
    // with ge or le): the tangent of the window's first element, in row-major
    // order, equal to the result. A tie sends the whole cotangent to one
    // element, as JAX's gradient does; lax.max's own rule would split it.
    auto fun = [=](const std::vector<Array>& a) { return std::vector<Array>{tree(taps_of(a[0], init))}; };
    // Written as a sum of one select per tap, each with its own test (the
    // tap equals the result and no earlier one does): its transpose is one
    // select per tap, and the input gradient one fused loop. A chain of
    // selects would transpose into a chain of materialised masks.
    auto jvp = [=](const std::vector<Array>& a) {
      const std::vector<Array> taps = taps_of(a[0], init), dtaps = taps_of(a[1], 0.0);
      const Array y = tree(taps);
      Array dy;  // the first tap's select starts the sum (a zeros_like here was a captured constant, as large as the result)
      // Up to 16 taps each test repeats the earlier taps' compares (at most
      // 120, fused); past that a running "seen" mask keeps the rule O(taps)
      // (a global pool's thousands of taps), its masks materialised.
      const bool small = taps.size() <= 16;
      Array seen;
      for (std::size_t t = 0; t < taps.size(); ++t) {
        const Array hit = taps[t] == y;
        Array first = hit;
        if (small) {
          for (std::size_t k = 0; k < t; ++k) first = logical_and(first, taps[k] != y);
        } else if (t > 0) {
          first = logical_and(hit, logical_not(seen));
          seen = logical_or(seen, hit);
        } else {
          seen = hit;
        }
        dy = t == 0 ? where(first, dtaps[t], 0.0) : dy + where(first, dtaps[t], 0.0);
      }
      return std::vector<Array>{y, dy};
    };
    return detail::custom_jvp_call("reduce_window_" + op, fun, jvp, {x}, {})[0];
  }
  return tree(taps_of(x, init));
}

}  // namespace tessel::lax
