// More of jax.numpy (dsl/tessel/numpy.hpp, "more of jax.numpy"): Array API
// spellings, aliases, index helpers, polynomials, windows, statistics and
// set functions, as compositions.
#include <algorithm>
#include <cmath>

#include <tessel/numpy.hpp>
#include <tessel/sorting.hpp>
#include <tessel/special.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::along;
using detail::inexact;
using detail::staged;
constexpr auto norm = detail::axis_in;
namespace c = detail::compose;
using V = std::vector<Array>;

namespace {
constexpr double kPi = 3.14159265358979323846;
}  // namespace

Array absolute(const Array& x) { return abs(x); }
Array acos(const Array& x) { return arccos(x); }
Array acosh(const Array& x) { return arccosh(x); }
Array asin(const Array& x) { return arcsin(x); }
Array asinh(const Array& x) { return arcsinh(x); }
Array atan(const Array& x) { return arctan(x); }
Array atanh(const Array& x) { return arctanh(x); }
Array atan2(const Array& a, const Array& b) { return arctan2(a, b); }
Array round(const Array& x, int decimals) {
  if (decimals == 0 || !is_inexact(x.dtype())) return round(x);
  const double f = std::pow(10.0, decimals);
  return staged("tessel.round", {x}, [f](const V& v) { return round(v[0] * f) / f; });
}
Array around(const Array& x, int decimals) { return round(x, decimals); }
Array rint(const Array& x) { return round(x); }
Array bitwise_invert(const Array& x) { return bitwise_not(x); }
Array bitwise_left_shift(const Array& a, const Array& b) { return left_shift(a, b); }
Array bitwise_right_shift(const Array& a, const Array& b) { return right_shift(a, b); }
Array concat(const std::vector<Array>& xs, int axis) { return concatenate(xs, axis); }
Array permute_dims(const Array& x, const std::vector<int>& axes) { return transpose(x, axes); }
Array matrix_transpose(const Array& x) {
  if (x.ndim() < 2) throw ValueError("matrix_transpose requires an array of at least two dimensions, got " + aval_str(x.dtype(), x.shape()));
  return swapaxes(x, -1, -2);
}
Array fmax(const Array& a, const Array& b) {
  return staged("tessel.fmax", {a, b}, [](const V& v) {
    Array m = maximum(v[0], v[1]);
    if (!is_inexact(m.dtype())) return m;
    Array x = broadcast_to(v[0].astype(m.dtype()), m.shape()), y = broadcast_to(v[1].astype(m.dtype()), m.shape());
    return where(isnan(x), y, where(isnan(y), x, m));
  });
}
Array fmin(const Array& a, const Array& b) {
  return staged("tessel.fmin", {a, b}, [](const V& v) {
    Array m = minimum(v[0], v[1]);
    if (!is_inexact(m.dtype())) return m;
    Array x = broadcast_to(v[0].astype(m.dtype()), m.shape()), y = broadcast_to(v[1].astype(m.dtype()), m.shape());
    return where(isnan(x), y, where(isnan(y), x, m));
  });
}
Array empty(const Shape& shape, DType dtype) { return zeros(shape, dtype); }
Array empty_like(const Array& x, std::optional<DType> dtype) { return zeros_like(x, dtype); }
Array identity(std::int64_t n, DType dtype) { return eye(n, std::nullopt, 0, dtype); }
Array asarray(const Array& x, std::optional<DType> dtype) { return dtype ? x.astype(*dtype) : x; }
int ndim(const Array& x) { return x.ndim(); }
Shape shape(const Array& x) { return x.shape(); }
std::int64_t size(const Array& x, std::optional<int> axis) {
  if (!axis) return x.size();
  return x.shape()[std::size_t(norm(*axis, x.ndim(), "size"))];
}
Array isreal(const Array& x) { return is_complex(x.dtype()) ? imag(x) == 0 : ones(x.shape(), DType::bool_); }
Array iscomplex(const Array& x) { return is_complex(x.dtype()) ? imag(x) != 0 : zeros(x.shape(), DType::bool_); }
bool isrealobj(const Array& x) { return !is_complex(x.dtype()); }
Array array_equal(const Array& a, const Array& b, bool equal_nan) {
  if (a.shape() != b.shape()) return array(false);
  return staged("tessel.array_equal", {a, b}, [equal_nan](const V& v) {
    Array eq = v[0] == v[1];
    if (equal_nan && (is_inexact(v[0].dtype()) || is_inexact(v[1].dtype())))
      eq = logical_or(eq, logical_and(isnan(v[0]), isnan(v[1])));
    return all(eq);
  });
}
Array array_equiv(const Array& a, const Array& b) {
  try {
    c::broadcast_shapes(a.shape(), b.shape(), "array_equiv");
  } catch (const ShapeError&) {
    return array(false);
  }
  return staged("tessel.array_equiv", {a, b}, [](const V& v) { return all(v[0] == v[1]); });
}
Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  Shape s;
  for (auto& t : shapes) s = c::broadcast_shapes(s, t, "broadcast_shapes");
  return s;
}
std::vector<Array> broadcast_arrays(const std::vector<Array>& xs) {
  std::vector<Shape> shapes;
  for (auto& x : xs) shapes.push_back(x.shape());
  const Shape s = broadcast_shapes(shapes);
  std::vector<Array> out;
  for (auto& x : xs) out.push_back(broadcast_to(x, s));
  return out;
}
std::vector<Array> array_split(const Array& x, int sections, int axis) {
  if (sections <= 0) throw ValueError("array_split: number sections must be larger than 0, got " + std::to_string(sections));
  const int a = norm(axis, x.ndim(), "array_split");
  const std::int64_t n = x.shape()[std::size_t(a)], each = n / sections, extra = n % sections;
  std::vector<Array> out;
  std::int64_t at = 0;
  for (int s = 0; s < sections; ++s) {
    const std::int64_t len = each + (s < extra ? 1 : 0);
    out.push_back(along(x, a, at, at + len));
    at += len;
  }
  return out;
}
std::vector<Array> hsplit(const Array& x, int sections) { return split(x, sections, x.ndim() == 1 ? 0 : 1); }
std::vector<Array> vsplit(const Array& x, int sections) {
  if (x.ndim() < 2) throw ValueError("vsplit only works on arrays of 2 or more dimensions");
  return split(x, sections, 0);
}
std::vector<Array> dsplit(const Array& x, int sections) {
  if (x.ndim() < 3) throw ValueError("dsplit only works on arrays of 3 or more dimensions");
  return split(x, sections, 2);
}
std::vector<Array> unstack(const Array& x, int axis) {
  const int a = norm(axis, x.ndim(), "unstack");
  std::vector<Array> out;
  for (std::int64_t i = 0; i < x.shape()[std::size_t(a)]; ++i) out.push_back(squeeze(along(x, a, i, i + 1), a));
  return out;
}
Array select(const std::vector<Array>& condlist, const std::vector<Array>& choicelist, double default_value) {
  if (condlist.size() != choicelist.size())
    throw ValueError("select: condlist and choicelist must have the same length, got " + std::to_string(condlist.size()) +
                     " and " + std::to_string(choicelist.size()));
  if (condlist.empty()) throw ValueError("select: condlist must be non-empty");
  V in = condlist;
  in.insert(in.end(), choicelist.begin(), choicelist.end());
  const std::size_t n = condlist.size();
  return staged("tessel.select", in, [=](const V& v) {
    Array r = full_like(v[n], default_value);
    for (std::size_t i = n; i-- > 0;) r = where(v[i], v[n + i], r);
    return r;
  });
}
Array choose(const Array& a, const std::vector<Array>& choices, const std::string& mode) {
  if (choices.empty()) throw ValueError("choose: choices must be non-empty");
  if (mode != "raise" && mode != "clip" && mode != "wrap")
    throw ValueError("choose: mode must be raise, clip or wrap, got '" + mode + "'");
  if (!is_integral(a.dtype()))
    throw TypeError("choose: the index array must be integer typed, got " + aval_str(a.dtype(), a.shape()));
  const int n = int(choices.size());
  if (mode == "raise") {
    // As JAX: checked on the concrete indices; under jit, choose a mode.
    if (a.is_tracer())
      throw ConcretizationError("choose: mode='raise' needs concrete indices (jnp.choose was jit-compiled with "
                                "mode='raise'); use mode='wrap' or mode='clip' instead");
    if (a.size() > 0 && any(logical_or(a < 0, a >= n)).item<bool>()) throw ValueError("invalid entry in choice array");
  }
  V in{a};
  in.insert(in.end(), choices.begin(), choices.end());
  return staged("tessel.choose", in, [=](const V& v) {
    Array i = v[0];
    if (mode == "wrap") i = i % n;
    else i = clip(i, 0, n - 1);  // raise: checked above, every index in range
    V ch(v.begin() + 1, v.end());
    auto b = broadcast_arrays(ch);
    Array r = b[0];
    for (int k = 1; k < n; ++k) r = where(i == k, b[std::size_t(k)], r);
    return r;
  });
}
std::pair<Array, Array> modf(const Array& x) {
  Array t = trunc(inexact(x));
  return {inexact(x) - t, t};
}
Array logspace(double start, double stop, std::int64_t num, bool endpoint, double base, DType dtype) {
  return power(full({}, base, dtype), linspace(start, stop, num, endpoint, dtype));
}
Array geomspace(double start, double stop, std::int64_t num, bool endpoint, DType dtype) {
  if (start == 0 || stop == 0) throw ValueError("geomspace: geometric sequence cannot include zero");
  const double sgn = start < 0 && stop < 0 ? -1.0 : 1.0;
  if (start * stop < 0) throw ValueError("geomspace: start and stop must have the same sign for real results");
  Array r = sgn * power(full({}, 10.0, DType::float64),
                        linspace(std::log10(sgn * start), std::log10(sgn * stop), num, endpoint, DType::float64));
  // The ends exactly, as NumPy.
  if (num > 0) r = r.at({0}).set(start);
  if (num > 1 && endpoint) r = r.at({num - 1}).set(stop);
  return r.astype(dtype);
}
Array indices(const Shape& dims, DType dtype) {
  if (dims.empty()) return zeros({0}, dtype);  // jnp.indices(()): an empty int array of shape (0,)
  std::vector<Array> out;
  for (int d = 0; d < int(dims.size()); ++d) out.push_back(lax::broadcasted_iota(dtype, dims, d));
  return stack(out, 0);
}
std::vector<Array> diag_indices(std::int64_t n, int nd) {
  return std::vector<Array>(std::size_t(nd), arange(0, n, 1, DType::int32));
}
std::vector<Array> diag_indices_from(const Array& x) {
  for (auto d : x.shape())
    if (d != x.shape()[0]) throw ValueError("diag_indices_from: all dimensions of the input must be of equal length");
  return diag_indices(x.ndim() ? x.shape()[0] : 0, x.ndim());
}
namespace {
std::vector<Array> tri_indices(std::int64_t n, std::int64_t k, std::optional<std::int64_t> m, bool lower) {
  std::vector<std::int32_t> r, cidx;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m.value_or(n); ++j)
      if (lower ? j - i <= k : j - i >= k) {
        r.push_back(std::int32_t(i));
        cidx.push_back(std::int32_t(j));
      }
  return {array(r), array(cidx)};
}
}  // namespace
std::vector<Array> tril_indices(std::int64_t n, std::int64_t k, std::optional<std::int64_t> m) { return tri_indices(n, k, m, true); }
std::vector<Array> triu_indices(std::int64_t n, std::int64_t k, std::optional<std::int64_t> m) { return tri_indices(n, k, m, false); }
std::vector<Array> tril_indices_from(const Array& x, std::int64_t k) {
  if (x.ndim() != 2) throw ValueError("tril_indices_from: input array must be 2-D");
  return tril_indices(x.shape()[0], k, x.shape()[1]);
}
std::vector<Array> triu_indices_from(const Array& x, std::int64_t k) {
  if (x.ndim() != 2) throw ValueError("triu_indices_from: input array must be 2-D");
  return triu_indices(x.shape()[0], k, x.shape()[1]);
}
std::vector<Array> unravel_index(const Array& idx, const Shape& shape) {
  std::vector<Array> out(shape.size());
  // As JAX: a negative index counts from the end, then out-of-range ones are clipped.
  const double total = double(numel(shape));
  Array rest = clip(where(idx < 0, idx + full_like(idx, total), idx), 0, std::max(0.0, total - 1));
  for (std::size_t d = shape.size(); d-- > 0;) {
    out[d] = rest % int(shape[d]);
    rest = floor_divide(rest, int(shape[d]));
  }
  return out;
}
Array ravel_multi_index(const std::vector<Array>& mi, const Shape& dims, const std::string& mode) {
  if (mi.size() != dims.size())
    throw ValueError("ravel_multi_index: " + std::to_string(mi.size()) + " index arrays for " + std::to_string(dims.size()) + " dims");
  if (mode != "clip" && mode != "wrap" && mode != "raise")
    throw ValueError("ravel_multi_index: mode must be clip, wrap or raise, got '" + mode + "'");
  for (auto& i : mi)
    if (!is_integral(i.dtype()))
      throw TypeError("ravel_multi_index: only int indices permitted, got " + aval_str(i.dtype(), i.shape()));
  if (mode == "raise")
    for (std::size_t d = 0; d < dims.size(); ++d) {
      // As JAX: checked on the concrete indices; under jit, choose a mode.
      if (mi[d].is_tracer())
        throw ConcretizationError("ravel_multi_index: mode='raise' needs concrete indices (it was jit-compiled with "
                                  "mode='raise'); use mode='wrap' or mode='clip' instead");
      if (mi[d].size() > 0 && any(logical_or(mi[d] < 0, mi[d] >= double(dims[d]))).item<bool>())
        throw ValueError("invalid entry in coordinates array");
    }
  Array r = zeros_like(mi.empty() ? array(0) : mi[0]);
  for (std::size_t d = 0; d < dims.size(); ++d) {
    Array i = mode == "wrap" ? mi[d] % int(dims[d]) : clip(mi[d], 0, double(dims[d] - 1));
    r = r * int(dims[d]) + i;
  }
  return r;
}
Array diagflat(const Array& v, int k) { return diag(ravel(v), k); }
Array fill_diagonal(const Array& a, double val, bool wrap) {
  if (a.ndim() < 2) throw ValueError("fill_diagonal: array must be at least 2-d");
  const std::int64_t n = a.shape()[0];
  for (auto d : a.shape())
    if (a.ndim() > 2 && d != n) throw ValueError("fill_diagonal: all dimensions of input must be of equal length");
  return staged("tessel.fill_diagonal", {a}, [=](const V& v) {
    if (v[0].ndim() == 2) {
      const std::int64_t rows = v[0].shape()[0], cols = v[0].shape()[1];
      Array i = lax::broadcasted_iota(DType::int32, {rows, cols}, 0), j = lax::broadcasted_iota(DType::int32, {rows, cols}, 1);
      // Flat positions step cols + 1; without wrap only the first min(rows, cols) rows.
      Array on = wrap ? ((i * int(cols) + j) % int(cols + 1)) == 0 : logical_and(i == j, i < int(std::min(rows, cols)));
      return where(on, full_like(v[0], val), v[0]);
    }
    Array on = ones(v[0].shape(), DType::bool_);
    Array i0 = lax::broadcasted_iota(DType::int32, v[0].shape(), 0);
    for (int d = 1; d < v[0].ndim(); ++d) on = logical_and(on, lax::broadcasted_iota(DType::int32, v[0].shape(), d) == i0);
    return where(on, full_like(v[0], val), v[0]);
  });
}
Array ediff1d(const Array& x) { return diff(ravel(x)); }
Array trapezoid(const Array& y, double dx, int axis) {
  const int a = norm(axis, y.ndim(), "trapezoid");
  const std::int64_t n = y.shape()[std::size_t(a)];
  if (n < 2) return sum(zeros_like(inexact(y)), a);
  return staged("tessel.trapezoid", {y}, [=](const V& v) {
    Array f = inexact(v[0]);
    return sum(along(f, a, 1, n) + along(f, a, 0, n - 1), a) * (dx * 0.5);
  });
}
Array trapezoid(const Array& y, const Array& x, int axis) {
  const int a = norm(axis, y.ndim(), "trapezoid");
  const std::int64_t n = y.shape()[std::size_t(a)];
  return staged("tessel.trapezoid", {y, x}, [=](const V& v) {
    Array f = inexact(v[0]);
    Array xs = v[1];
    Array dx = xs.ndim() == 1 ? diff(xs) : diff(xs, 1, a);
    if (xs.ndim() == 1 && f.ndim() > 1) {
      Shape s(std::size_t(f.ndim()), 1);
      s[std::size_t(a)] = n - 1;
      dx = reshape(dx, s);
    }
    return sum((along(f, a, 1, n) + along(f, a, 0, n - 1)) * dx, a) * 0.5;
  });
}
Array vecdot(const Array& a, const Array& b, int axis) {
  const int aa = norm(axis, a.ndim(), "vecdot"), ba = norm(axis, b.ndim(), "vecdot");
  if (a.shape()[std::size_t(aa)] != b.shape()[std::size_t(ba)])
    throw ValueError("vecdot: axes must match; got shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) +
                     " with axis=" + std::to_string(axis));
  return staged("tessel.vecdot", {a, b}, [axis](const V& v) { return sum(conj(v[0]) * v[1], axis); });
}
Array matvec(const Array& a, const Array& v) { return squeeze(matmul(a, expand_dims(v, -1)), -1); }
Array vecmat(const Array& v, const Array& a) { return squeeze(matmul(expand_dims(conj(v), -2), a), -2); }
Array i0(const Array& x) {
  return staged("tessel.i0", {x}, [](const V& v) { return scipy::special::i0e(v[0]) * exp(abs(inexact(v[0]))); });
}
Array vander(const Array& x, std::optional<std::int64_t> n, bool increasing) {
  if (x.ndim() != 1) throw ValueError("vander: x must be a one-dimensional array, got " + aval_str(x.dtype(), x.shape()));
  const std::int64_t cols = n.value_or(x.size());
  return staged("tessel.vander", {x}, [=](const V& v) {
    std::vector<Array> powers;
    Array p = ones_like(v[0]);
    for (std::int64_t k = 0; k < cols; ++k) {
      powers.push_back(p);
      p = p * v[0];
    }
    if (!increasing) std::reverse(powers.begin(), powers.end());
    return cols ? stack(powers, 1) : zeros({v[0].size(), 0}, v[0].dtype());
  });
}

// ---------------------------------------------------------------- polynomials
namespace {
void need_1d(const Array& p, const char* what) {
  if (p.ndim() != 1) throw ValueError(std::string(what) + ": the coefficients must be 1-D, got " + aval_str(p.dtype(), p.shape()));
}
Array pad_front(const Array& p, std::int64_t n) { return n > p.size() ? pad(p, {{n - p.size(), 0}}) : p; }
}  // namespace
Array polyval(const Array& p, const Array& x) {
  need_1d(p, "polyval");
  const std::int64_t n = p.size();
  return staged("tessel.polyval", {p, x}, [n](const V& v) {
    Array y = zeros_like(v[1] * v[0][0]);
    for (std::int64_t k = 0; k < n; ++k) y = y * v[1] + v[0][k];
    return y;
  });
}
Array polyadd(const Array& a, const Array& b) {
  need_1d(a, "polyadd");
  need_1d(b, "polyadd");
  const std::int64_t n = std::max(a.size(), b.size());
  return pad_front(a, n) + pad_front(b, n);
}
Array polysub(const Array& a, const Array& b) {
  need_1d(a, "polysub");
  need_1d(b, "polysub");
  const std::int64_t n = std::max(a.size(), b.size());
  return pad_front(a, n) - pad_front(b, n);
}
Array convolve(const Array& a, const Array& v, const std::string& mode) {
  if (a.ndim() != 1 || v.ndim() != 1) throw ValueError("convolve: a and v must be 1-D");
  if (a.size() == 0 || v.size() == 0) throw ValueError("convolve: inputs cannot be empty");
  if (mode != "full" && mode != "same" && mode != "valid")
    throw ValueError("convolve: mode must be full, same or valid, got '" + mode + "'");
  const std::int64_t na = a.size(), nv = v.size(), nf = na + nv - 1;
  return staged("tessel.convolve", {a, v}, [=](const V& in) {
    // full[k] = sum_i a[i] v[k - i]: each a[i] times v, shifted by i, summed
    // (integers as float32, as JAX's promote_dtypes_inexact).
    Array outer = expand_dims(inexact(in[0]), 1) * expand_dims(inexact(in[1]), 0);  // [na, nv]
    std::vector<Array> rows;
    for (std::int64_t i = 0; i < na; ++i) rows.push_back(pad(outer[i], {{i, na - 1 - i}}));
    Array full_ = sum(stack(rows, 0), 0);
    if (mode == "full") return full_;
    const std::int64_t big = std::max(na, nv), small = std::min(na, nv);
    if (mode == "same") {
      const std::int64_t start = (small - 1) / 2;
      return full_[slice(start, start + big)];
    }
    return full_[slice(small - 1, nf - (small - 1))];
  });
}
Array correlate(const Array& a, const Array& v, const std::string& mode) {
  // NumPy's (and JAX's) window for "same" is taken with the longer array
  // first: a shorter a swaps them, correlate(a, v) = conj(reverse(correlate(v, a))).
  if (a.ndim() == 1 && v.ndim() == 1 && v.size() > a.size()) return conj(flip(correlate(v, a, mode), 0));
  return convolve(a, flip(conj(v), 0), mode);
}
Array polymul(const Array& a, const Array& b) {
  need_1d(a, "polymul");
  need_1d(b, "polymul");
  return convolve(a, b, "full");
}
Array polyder(const Array& p, int m) {
  need_1d(p, "polyder");
  if (m < 0) throw ValueError("polyder: order of derivative must be positive");
  Array r = inexact(p);  // JAX's promote_dtypes_inexact
  for (int k = 0; k < m && r.size() > 0; ++k) {
    const std::int64_t n = r.size();
    if (n == 1) return zeros({0}, r.dtype());
    Array pw = arange(double(n - 1), 0.0, -1.0, real_dtype(r.dtype()));
    r = r[slice(0, n - 1)] * pw;
  }
  return r;
}
Array polyint(const Array& p, int m, double k) {
  need_1d(p, "polyint");
  if (m < 0) throw ValueError("polyint: order of integral must be positive");
  Array r = inexact(p);
  for (int i = 0; i < m; ++i) {
    const std::int64_t n = r.size();
    Array pw = arange(double(n), 0.0, -1.0, r.dtype());
    r = concatenate({r / pw, full({1}, k, r.dtype())}, 0);
  }
  return r;
}

// ---------------------------------------------------------------- statistics
Array cov(const Array& m, bool rowvar, bool bias, std::optional<int> ddof) {
  if (m.ndim() > 2) throw ValueError("cov: m has more than 2 dimensions");
  const int dd = ddof.value_or(bias ? 0 : 1);
  return staged("tessel.cov", {m}, [=](const V& v) {
    Array x = atleast_2d(inexact(v[0]));
    if (!rowvar && x.shape()[0] != 1) x = x.T();
    const std::int64_t n = x.shape()[1];
    Array xc = x - mean(x, 1, true);
    Array r = matmul(xc, conj(xc).T()) / double(n - dd);
    return squeeze(r);
  });
}
Array corrcoef(const Array& x, bool rowvar) {
  return staged("tessel.corrcoef", {x}, [=](const V& v) {
    Array c = cov(v[0], rowvar);
    if (c.ndim() == 0) return c / c;
    Array d = sqrt(real(diagonal(c)));
    Array r = c / expand_dims(d, 1) / expand_dims(d, 0);
    return is_complex(r.dtype()) ? r : clip(r, -1.0, 1.0);
  });
}
std::vector<Array> gradient(const Array& f, const std::vector<Array>& spacing, const std::vector<int>& axes) {
  std::vector<int> ax;
  if (axes.empty())
    for (int d = 0; d < f.ndim(); ++d) ax.push_back(d);
  for (int d : axes) ax.push_back(norm(d, f.ndim(), "gradient"));
  for (int d : ax)
    if (f.shape()[std::size_t(d)] < 2)
      throw ValueError("gradient: shape of the array too small to calculate a numerical gradient, at least 2 elements "
                       "required (" + aval_str(f.dtype(), f.shape()) + ", axis " + std::to_string(d) + ")");
  std::vector<Array> h = spacing;
  if (h.empty()) h.assign(ax.size(), array(1.0));
  else if (h.size() == 1) h.assign(ax.size(), spacing[0]);
  else if (h.size() != ax.size())
    throw TypeError("gradient: " + std::to_string(spacing.size()) + " spacings for " + std::to_string(ax.size()) +
                    " axes (give none, one, or one per axis)");
  std::vector<Array> out;
  for (std::size_t k = 0; k < ax.size(); ++k) {
    const int a = ax[k];
    const std::int64_t n = f.shape()[std::size_t(a)];
    if (h[k].ndim() == 0) {
      out.push_back(gradient(f, h[k].astype(DType::float64).item<double>(), a));
      continue;
    }
    // Coordinates along the axis: second-order differences on the uneven grid.
    if (h[k].ndim() != 1 || h[k].size() != n)
      throw ValueError("gradient: the spacing for axis " + std::to_string(a) + " must be a scalar or " +
                       std::to_string(n) + " coordinates, got " + aval_str(h[k].dtype(), h[k].shape()));
    out.push_back(staged("tessel.gradient_coordinates", {f, h[k]}, [=](const V& v) {
      Array y = inexact(v[0]);
      Shape hs(std::size_t(y.ndim()), 1);
      hs[std::size_t(a)] = n;
      Array x = reshape(v[1], hs).astype(y.dtype());
      Array first = (along(y, a, 1, 2) - along(y, a, 0, 1)) / (along(x, a, 1, 2) - along(x, a, 0, 1));
      Array last = (along(y, a, n - 1, n) - along(y, a, n - 2, n - 1)) / (along(x, a, n - 1, n) - along(x, a, n - 2, n - 1));
      if (n == 2) return concatenate({first, last}, a);
      Array d1 = along(x, a, 1, n - 1) - along(x, a, 0, n - 2), d2 = along(x, a, 2, n) - along(x, a, 1, n - 1);
      Array mid = -d2 / (d1 * (d1 + d2)) * along(y, a, 0, n - 2) + (d2 - d1) / (d1 * d2) * along(y, a, 1, n - 1) +
                  d1 / (d2 * (d1 + d2)) * along(y, a, 2, n);
      return concatenate({first, mid, last}, a);
    }));
  }
  return out;
}
Array gradient(const Array& f, double dx, int axis) {
  const int a = norm(axis, f.ndim(), "gradient");
  const std::int64_t n = f.shape()[std::size_t(a)];
  if (n < 2) throw ValueError("gradient: shape of the array too small to calculate a numerical gradient, at least 2 elements required");
  return staged("tessel.gradient", {f}, [=](const V& v) {
    Array y = inexact(v[0]);
    Array first = (along(y, a, 1, 2) - along(y, a, 0, 1)) / dx;
    Array last = (along(y, a, n - 1, n) - along(y, a, n - 2, n - 1)) / dx;
    if (n == 2) return concatenate({first, last}, a);
    Array mid = (along(y, a, 2, n) - along(y, a, 0, n - 2)) / (2 * dx);
    return concatenate({first, mid, last}, a);
  });
}
Array unwrap(const Array& p, double discont, int axis, double period) {
  const int a = norm(axis, p.ndim(), "unwrap");
  const double dc = discont < 0 ? period / 2 : discont;
  const std::int64_t n = p.shape()[std::size_t(a)];
  if (n < 2) return inexact(p);
  return staged("tessel.unwrap", {p}, [=](const V& v) {
    Array x = inexact(v[0]);
    Array dd = diff(x, 1, a);
    const double half = period / 2;
    Array ddmod = remainder(dd + half, full_like(dd, period)) - half;
    ddmod = where(logical_and(ddmod == -half, dd > 0), full_like(ddmod, half), ddmod);
    Array correct = where(abs(dd) < dc, zeros_like(dd), ddmod - dd);
    Array up = cumsum(correct, a);
    Shape s = x.shape();
    s[std::size_t(a)] = 1;
    return x + concatenate({zeros(s, x.dtype()), up}, a);
  });
}
Array interp(const Array& x, const Array& xp, const Array& fp, std::optional<double> left, std::optional<double> right) {
  if (xp.ndim() != 1 || fp.ndim() != 1 || xp.size() != fp.size() || xp.size() == 0)
    throw ValueError("interp: xp and fp must be 1-D of one nonzero length, got " + shape_str(xp.shape()) + " and " +
                     shape_str(fp.shape()));
  const std::int64_t n = xp.size();
  return staged("tessel.interp", {x, xp, fp}, [=](const V& v) {
    Array xs = inexact(v[0]), xq = v[1].astype(xs.dtype()), fq = inexact(v[2]).astype(xs.dtype());
    if (n == 1) return where(xs == xs, broadcast_to(fq[0], xs.shape()), broadcast_to(fq[0], xs.shape()));
    Array i = clip(searchsorted(xq, xs, "right"), 1, double(n - 1));
    Array x0 = take(xq, i - 1, 0, "clip"), x1 = take(xq, i, 0, "clip");
    Array f0 = take(fq, i - 1, 0, "clip"), f1 = take(fq, i, 0, "clip");
    Array dxs = x1 - x0;
    Array t = (xs - x0) / where(dxs == 0, ones_like(dxs), dxs);
    Array r = where(dxs == 0, f0, f0 + t * (f1 - f0));
    r = where(xs < xq[0], left ? full_like(r, *left) : broadcast_to(fq[0], r.shape()), r);
    return where(xs > xq[n - 1], right ? full_like(r, *right) : broadcast_to(fq[n - 1], r.shape()), r);
  });
}

// ---------------------------------------------------------------- windows
namespace {
Array window(std::int64_t M, const std::function<Array(const Array&)>& f) {
  if (M < 1) return zeros({0});
  if (M == 1) return ones({1});
  Array n = arange(0, M, 1, DType::float32);
  return f(n);
}
}  // namespace
Array bartlett(std::int64_t M) {
  return window(M, [M](const Array& n) { return 1.0 - abs(2.0 * n / double(M - 1) - 1.0); });
}
Array blackman(std::int64_t M) {
  return window(M, [M](const Array& n) {
    Array t = 2.0 * kPi * n / double(M - 1);
    return 0.42 - 0.5 * cos(t) + 0.08 * cos(2.0 * t);
  });
}
Array hamming(std::int64_t M) {
  return window(M, [M](const Array& n) { return 0.54 - 0.46 * cos(2.0 * kPi * n / double(M - 1)); });
}
Array hanning(std::int64_t M) {
  return window(M, [M](const Array& n) { return 0.5 - 0.5 * cos(2.0 * kPi * n / double(M - 1)); });
}
Array kaiser(std::int64_t M, double beta) {
  return window(M, [M, beta](const Array& n) {
    const double alpha = (M - 1) / 2.0;
    Array r = (n - alpha) / alpha;
    return i0(beta * sqrt(1.0 - r * r)) / i0(full({}, beta));
  });
}

// ---------------------------------------------------------------- insert, delete, sorting helpers
Array insert(const Array& x, std::int64_t index, const Array& values, std::optional<int> axis) {
  if (!axis) return insert(ravel(x), index, ravel(values), 0);
  const int a = norm(*axis, x.ndim(), "insert");
  const std::int64_t n = x.shape()[std::size_t(a)];
  std::int64_t i = index < 0 ? index + n : index;
  if (i < 0 || i > n)
    throw ValueError("insert: index " + std::to_string(index) + " is out of bounds for axis " + std::to_string(a) + " with size " + std::to_string(n));
  // As NumPy's (and JAX's) scalar index: values gets leading unit dims up
  // to x's rank, its first axis moves to `axis` and counts the new slices,
  // and it broadcasts against the other dims.
  if (values.ndim() > x.ndim())
    throw ValueError("insert: values " + aval_str(values.dtype(), values.shape()) + " have more dims than x " +
                     aval_str(x.dtype(), x.shape()));
  Array v = values;
  while (v.ndim() < x.ndim()) v = expand_dims(v, 0);
  v = moveaxis(v, 0, a);
  Shape s = x.shape();
  s[std::size_t(a)] = v.shape()[std::size_t(a)];
  try {
    v = broadcast_to(v, s);
  } catch (const Error&) {
    throw ValueError("insert: values " + aval_str(values.dtype(), values.shape()) + " (as slices along axis " +
                     std::to_string(a) + ": " + shape_str(v.shape()) + ") do not broadcast to " + shape_str(s));
  }
  return concatenate({along(x, a, 0, i), v.astype(x.dtype()), along(x, a, i, n)}, a);
}
Array delete_(const Array& x, std::int64_t index, std::optional<int> axis) {
  if (!axis) return delete_(ravel(x), index, 0);
  const int a = norm(*axis, x.ndim(), "delete");
  const std::int64_t n = x.shape()[std::size_t(a)];
  std::int64_t i = index < 0 ? index + n : index;
  if (i < 0 || i >= n)
    throw ValueError("delete: index " + std::to_string(index) + " is out of bounds for axis " + std::to_string(a) + " with size " + std::to_string(n));
  return concatenate({along(x, a, 0, i), along(x, a, i + 1, n)}, a);
}
Array lexsort(const std::vector<Array>& keys, int axis) {
  if (keys.empty()) throw ValueError("lexsort: need sequence of keys with len > 0");
  std::vector<Array> ops(keys.rbegin(), keys.rend());  // the last key is the primary one
  const int a = norm(axis, keys[0].ndim(), "lexsort");
  ops.push_back(lax::broadcasted_iota(DType::int32, keys[0].shape(), a));
  return lax::sort(ops, a, int(keys.size())).back();
}
Array sort_complex(const Array& x) {
  if (!is_complex(x.dtype())) return sort(x, -1).astype(x.dtype() == DType::float64 ? DType::complex128 : DType::complex64);
  auto r = lax::sort({real(x), imag(x), x}, -1, 2);
  return r[2];
}
Array partition(const Array& x, std::int64_t kth, int axis) {
  const int a = norm(axis, x.ndim(), "partition");
  if (kth < -x.shape()[std::size_t(a)] || kth >= x.shape()[std::size_t(a)])
    throw ValueError("partition: kth " + std::to_string(kth) + " is out of bounds for axis " + std::to_string(a));
  return sort(x, a);
}
Array argpartition(const Array& x, std::int64_t kth, int axis) {
  const int a = norm(axis, x.ndim(), "argpartition");
  if (kth < -x.shape()[std::size_t(a)] || kth >= x.shape()[std::size_t(a)])
    throw ValueError("argpartition: kth " + std::to_string(kth) + " is out of bounds for axis " + std::to_string(a));
  return argsort(x, a);
}
Array block(const std::vector<std::vector<Array>>& rows) {
  if (rows.empty()) throw ValueError("block: no arrays");
  std::vector<Array> r;
  for (auto& row : rows) {
    if (row.empty()) throw ValueError("block: an empty row");
    std::vector<Array> cells;
    for (auto& a : row) cells.push_back(atleast_2d(a));
    r.push_back(concatenate(cells, -1));
  }
  return concatenate(r, -2);
}

// ---------------------------------------------------------------- sets
namespace {
// The elements of u (sorted unique) where keep is set, compacted to `size` (or the concrete count).
Array compact(const Array& u, const Array& keep, UniqueOptions o, const char* what) {
  std::int64_t size;
  if (o.size) {
    size = *o.size;
  } else {
    if (u.is_tracer() || keep.is_tracer())
      throw ConcretizationError(std::string(what) + ": the size of the result depends on traced values; pass a static `size`");
    size = sum(keep).item<std::int64_t>();
  }
  const std::int64_t n = u.size();
  if (n == 0) return zeros({size}, u.dtype());
  Array slot = cumsum(keep) - 1;
  Array to = where(keep, slot, full_like(slot, double(size)));
  // Default padding, as JAX's code: the smallest kept value (0 when none is kept).
  Array first_kept = where(any(keep), take(u, argmax(keep), 0, "clip"), zeros({}, u.dtype()));
  Array fill = o.fill_value ? full({size}, *o.fill_value, u.dtype()) : broadcast_to(first_kept, {size});
  return fill.at({to}).set(u);
}
}  // namespace
Array union1d(const Array& a, const Array& b, UniqueOptions o) { return unique(concatenate({ravel(a), ravel(b)}, 0), o); }
Array intersect1d(const Array& a, const Array& b, UniqueOptions o) {
  Array s = sort(ravel(a), 0);
  return compact(s, logical_and(detail::run_starts(s), isin(s, b)), o, "intersect1d");
}
Array setdiff1d(const Array& a, const Array& b, UniqueOptions o) {
  if (!o.fill_value) o.fill_value = 0.0;  // JAX's code pads setdiff1d with 0
  Array s = sort(ravel(a), 0);
  return compact(s, logical_and(detail::run_starts(s), isin(s, b, true)), o, "setdiff1d");
}
Array setxor1d(const Array& a, const Array& b, UniqueOptions o) {
  Array s = sort(concatenate({ravel(a), ravel(b)}, 0), 0);
  return compact(s, logical_and(detail::run_starts(s), logical_xor(isin(s, a), isin(s, b))), o, "setxor1d");
}
Array extract(const Array& condition, const Array& a, NonzeroOptions o) {
  Array idx = flatnonzero(condition, o);
  Array vals = take(ravel(a), idx, 0, "clip");
  if (!o.size) return vals;
  // Padded positions (past the count) take fill_value, as JAX's.
  Array n = count_nonzero(condition);
  return where(arange(0, *o.size, 1, DType::int32) < n, vals, full_like(vals, double(o.fill_value)));
}
Array compress(const Array& condition, const Array& a, std::optional<int> axis, NonzeroOptions options) {
  if (condition.ndim() != 1)
    throw ValueError("compress: condition must be a 1D array, got " + aval_str(condition.dtype(), condition.shape()));
  if (condition.is_tracer() && !options.size)
    throw ConcretizationError("compress: the condition must be concrete, or give a static size (jnp.compress(..., "
                              "size=...)): its count sets the result's size");
  Array arr = axis ? moveaxis(a, norm(*axis, a.ndim(), "compress"), 0) : ravel(a);
  const std::int64_t n = arr.ndim() == 0 ? 1 : arr.shape()[0], m = condition.size();
  // As NumPy: a condition longer than the axis may only add false entries.
  Array cond = condition;
  if (m > n) {
    if (!condition.is_tracer() && any(along(condition, 0, n, m)).item<bool>())
      throw ValueError("compress: condition has " + std::to_string(m) + " entries, and a true one past the " +
                       std::to_string(n) + " of the axis");
    cond = along(condition, 0, 0, n);
  } else if (m < n) {
    arr = along(arr, 0, 0, m);
  }
  Array idx = flatnonzero(cond, options);
  Array r = take(arr, idx, 0, "clip");
  if (options.size) {
    // Padded positions (past the count) take fill_value, as JAX's.
    Shape s(std::size_t(r.ndim()), 1);
    s[0] = *options.size;
    Array keep = reshape(arange(0, *options.size, 1, DType::int32) < count_nonzero(cond), s);
    r = where(keep, r, full_like(r, double(options.fill_value)));
  }
  return axis ? moveaxis(r, 0, norm(*axis, a.ndim(), "compress")) : r;
}
Array trim_zeros(const Array& x, const std::string& trim) {
  if (x.is_tracer()) throw ConcretizationError("trim_zeros: the input must be concrete (the result's size depends on it)");
  if (x.ndim() != 1) throw ValueError("trim_zeros: the input must be 1-D");
  auto nz = flatnonzero(x);
  if (nz.size() == 0) return x[slice(0, 0)];
  std::int64_t lo = trim.find_first_of("fF") != std::string::npos ? nz[0].item<std::int64_t>() : 0;
  std::int64_t hi = trim.find_first_of("bB") != std::string::npos ? nz[nz.size() - 1].item<std::int64_t>() + 1 : x.size();
  return x[slice(lo, hi)];
}
Array resize(const Array& x, const Shape& new_shape) {
  const std::int64_t n = numel(new_shape), have = x.size();
  if (have == 0) return zeros(new_shape, x.dtype());
  Array flat = ravel(x);
  if (n > have) flat = tile(flat, {(n + have - 1) / have});
  return reshape(flat[slice(0, n)], new_shape);
}

}  // namespace tessel
