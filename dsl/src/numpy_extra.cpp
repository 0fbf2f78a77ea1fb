// jax.numpy's integer and floating-point bit functions, unique's extras,
// functional helpers, put, polyfit, dtype promotion and the multi-dimensional
// histograms (dsl/tessel/numpy.hpp), as compositions.
#include <cmath>
#include <limits>

#include <tessel/linalg.hpp>
#include <tessel/numpy.hpp>
#include <tessel/sorting.hpp>
#include <tessel/vmap.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::staged;
using detail::inexact;
using detail::along;
constexpr auto norm = detail::axis_in;
namespace c = detail::compose;
using V = std::vector<Array>;

namespace {
void need_int(const Array& x, const char* what) {
  if (is_inexact(x.dtype()) || x.dtype() == DType::bool_)
    throw TypeError(std::string(what) + " is only defined for integer arrays, got " + aval_str(x.dtype(), x.shape()));
}
void need_float(const Array& x, const char* what) {
  if (!is_floating(x.dtype()))
    throw TypeError(std::string(what) + " is only defined for real floating-point arrays, got " + aval_str(x.dtype(), x.shape()));
}
// The integer type of a float's bits, and the float's exponent layout.
struct Bits {
  DType int_type;
  int mant_bits, bias;
};
Bits bits_of(DType t) { return t == DType::float64 ? Bits{DType::int64, 52, 1023} : Bits{DType::int32, 23, 127}; }
}  // namespace

// ---------------------------------------------------------------- integers
Array gcd(const Array& a, const Array& b) {
  need_int(a, "gcd");
  need_int(b, "gcd");
  return staged("tessel.gcd", {a, b}, [](const V& v) {
    auto p = broadcast_arrays({v[0] + zeros_like(v[1]), v[1] + zeros_like(v[0])});
    Array x = abs(p[0]), y = abs(p[1]);
    // Euclid's steps, elementwise: 92 suffice for 64-bit values (Fibonacci's bound).
    const int steps = x.dtype() == DType::int64 ? 92 : 47;
    for (int k = 0; k < steps; ++k) {
      Array go = y != 0;
      Array safe = where(go, y, ones_like(y));
      Array r = x % safe;
      x = where(go, y, x);
      y = where(go, r, y);
    }
    return x;
  });
}
Array lcm(const Array& a, const Array& b) {
  return staged("tessel.lcm", {a, b}, [](const V& v) {
    Array g = gcd(v[0], v[1]);
    Array safe = where(g == 0, ones_like(g), g);
    return where(g == 0, zeros_like(g), abs(floor_divide(v[0], safe) * v[1]));
  });
}
Array bitwise_count(const Array& x) {
  need_int(x, "bitwise_count");
  return staged("tessel.bitwise_count", {x}, [](const V& v) {
    Array a = v[0].dtype() == DType::uint32 ? v[0] : abs(v[0]);
    const bool wide = a.dtype() == DType::int64;
    // Bit by bit (shifts and masks; 32 or 64 steps fuse into one loop).
    Array n = zeros_like(a);
    Array one = ones_like(a);
    for (int k = 0; k < (wide ? 64 : 32); ++k) n = n + bitwise_and(right_shift(a, full_like(a, double(k))), one);
    return n.astype(wide ? DType::int64 : DType::int32);
  });
}

// ---------------------------------------------------------------- floating-point bits
Array ldexp(const Array& x, const Array& e) {
  need_int(e, "ldexp (the exponent)");
  return staged("tessel.ldexp", {x, e}, [](const V& v) {
    Array f = is_floating(v[0].dtype()) ? v[0] : v[0].astype(DType::float32);
    const Bits b = bits_of(f.dtype());
    // 2^k exactly, from its bits, for k in the normal range; the exponent split in three steps
    // so that results near the ends of the range (and subnormals) round once.
    Array ex = clip(v[1].astype(b.int_type), -3.0 * b.bias, 3.0 * b.bias);
    auto pow2 = [&](const Array& k) {
      Array kk = clip(k, double(1 - b.bias), double(b.bias));
      return lax::bitcast_convert_type(left_shift(kk + b.bias, full_like(kk, double(b.mant_bits))), f.dtype());
    };
    Array e1 = floor_divide(ex, 3), e2 = floor_divide(ex - e1, 2), e3 = ex - e1 - e2;
    return f * pow2(e1) * pow2(e2) * pow2(e3);
  });
}
std::pair<Array, Array> frexp(const Array& x_in) {
  const Array x = is_complex(x_in.dtype()) ? x_in : inexact(x_in);  // integers as floats, as JAX
  need_float(x, "frexp");
  auto r = detail::staged_many("tessel.frexp", {x}, [](const V& v) {
    const Array& f = v[0];
    const Bits b = bits_of(f.dtype());
    // Subnormals scaled up into the normal range first.
    Array small = logical_and(abs(f) < (b.int_type == DType::int64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38), f != 0);
    const double up = b.int_type == DType::int64 ? 18014398509481984.0 : 16777216.0;  // 2^54, 2^24
    const int up_e = b.int_type == DType::int64 ? 54 : 24;
    Array g = where(small, f * up, f);
    Array bits = lax::bitcast_convert_type(g, b.int_type);
    Array expo = bitwise_and(right_shift(bits, full_like(bits, double(b.mant_bits))), full_like(bits, double(2 * b.bias + 1)));
    Array e = expo - (b.bias - 1) - where(small, full_like(expo, double(up_e)), zeros_like(expo));
    // The mantissa: the exponent bits replaced by those of 2^-1.
    Array clear = bitwise_and(bits, bitwise_not(left_shift(full_like(bits, double(2 * b.bias + 1)), full_like(bits, double(b.mant_bits)))));
    Array m = lax::bitcast_convert_type(bitwise_or(clear, left_shift(full_like(bits, double(b.bias - 1)), full_like(bits, double(b.mant_bits)))), f.dtype());
    Array special = logical_or(f == 0, logical_not(isfinite(f)));
    return V{where(special, f, m), where(special, zeros_like(e), e).astype(DType::int32)};
  });
  return {r[0], r[1]};
}
Array nextafter(const Array& a_in, const Array& b_in) {
  // Integers as floats, as JAX (promote_args_inexact).
  const Array a = is_complex(a_in.dtype()) ? a_in : inexact(a_in), b = is_complex(b_in.dtype()) ? b_in : inexact(b_in);
  return staged("tessel.nextafter", {a, b}, [](const V& v) {
    auto p = broadcast_arrays({v[0] + zeros_like(v[1]), v[1] + zeros_like(v[0])});
    Array x = p[0], y = p[1];
    need_float(x, "nextafter");
    const Bits bt = bits_of(x.dtype());
    Array bits = lax::bitcast_convert_type(x, bt.int_type);
    // Away from zero: the bits + 1; toward zero: - 1 (sign-magnitude).
    Array away = (y > x) == (x > 0);
    Array step = where(away, ones_like(bits), full_like(bits, -1.0));
    Array moved = lax::bitcast_convert_type(bits + step, x.dtype());
    // From zero: the smallest subnormal with y's sign.
    Array tiny = lax::bitcast_convert_type(ones_like(bits), x.dtype());
    Array from_zero = where(y > 0, tiny, -tiny);
    Array r = where(x == 0, from_zero, moved);
    r = where(x == y, y, r);
    return where(logical_or(isnan(x), isnan(y)), full_like(x, NAN), r);
  });
}
Array spacing(const Array& x_in) {
  const Array x = is_complex(x_in.dtype()) ? x_in : inexact(x_in);  // integers as floats, as JAX
  need_float(x, "spacing");
  return staged("tessel.spacing", {x}, [](const V& v) {
    const Array& f = v[0];
    Array toward = where(f < 0, full_like(f, -INFINITY), full_like(f, INFINITY));
    Array r = nextafter(f, toward) - f;
    return where(isinf(f), full_like(f, NAN), r);
  });
}

// ---------------------------------------------------------------- unique's extras
UniqueAll unique_all(const Array& x, UniqueOptions o) {
  Array values = unique(x, o);
  auto r = detail::staged_many("tessel.unique_all", {x, values}, [](const V& v) {
    Array flat = ravel(v[0]);
    const std::int64_t n = flat.size();
    Array u = v[1];
    Array eq = expand_dims(flat, 0) == expand_dims(u, 1);  // [u, n]
    if (is_inexact(flat.dtype())) eq = logical_or(eq, logical_and(isnan(expand_dims(flat, 0)), isnan(expand_dims(u, 1))));
    Array pos = broadcast_to(arange(0, n, 1, DType::int32), eq.shape());
    Array first = min(where(eq, pos, full_like(pos, double(n))), 1);
    // Padding (values past the count repeat a value): its count is 0 and its index that value's.
    Array counts = sum(eq, 1).astype(DType::int32);
    Array inverse = argmax(eq, 0).astype(DType::int32);
    // Positions past the number of distinct values are padding.
    Array distinct = n == 0 ? array(0) : sum(detail::run_starts(sort(flat, 0))).astype(DType::int32);
    Array pad_pos = arange(0, u.size(), 1, DType::int32) >= distinct;
    counts = where(pad_pos, zeros_like(counts), counts);
    return V{first.astype(DType::int32), reshape(inverse, v[0].shape()), counts};
  });
  return {values, r[0], r[1], r[2]};
}
UniqueCounts unique_counts(const Array& x, UniqueOptions o) {
  auto a = unique_all(x, o);
  return {a.values, a.counts};
}
UniqueInverse unique_inverse(const Array& x, UniqueOptions o) {
  auto a = unique_all(x, o);
  return {a.values, a.inverse_indices};
}

// ---------------------------------------------------------------- functional helpers
Array apply_along_axis(const std::function<Array(const Array&)>& fn, int axis, const Array& arr) {
  const int a = norm(axis, arr.ndim(), "apply_along_axis");
  Array moved = moveaxis(arr, a, -1);
  Shape batch(moved.shape().begin(), moved.shape().end() - 1);
  const std::int64_t rows = numel(batch), len = moved.shape().back();
  Array flat = reshape(moved, {rows, len});
  Array out = vmap([&](const Array& row) { return fn(row); })(flat);
  Shape res = batch;
  res.insert(res.end(), out.shape().begin() + 1, out.shape().end());
  out = reshape(out, res);
  // The function's result dims take the place of the axis.
  const int extra = out.ndim() - int(batch.size());
  std::vector<int> perm;
  for (int d = 0; d < a; ++d) perm.push_back(d);
  for (int d = 0; d < extra; ++d) perm.push_back(int(batch.size()) + d);
  for (int d = a; d < int(batch.size()); ++d) perm.push_back(d);
  return transpose(out, perm);
}
Array apply_over_axes(const std::function<Array(const Array&, int)>& fn, const Array& a, const std::vector<int>& axes) {
  Array r = a;
  for (int ax : axes) {
    const int d = norm(ax, r.ndim(), "apply_over_axes");
    Array res = fn(r, d);
    if (res.ndim() == r.ndim() - 1) res = expand_dims(res, d);
    if (res.ndim() != r.ndim())
      throw ValueError("apply_over_axes: the function must return an array of the same rank or one less");
    r = res;
  }
  return r;
}
Array fromfunction(const std::function<Array(const std::vector<Array>&)>& fn, const Shape& shape, DType dtype) {
  std::vector<Array> idx;
  for (int d = 0; d < int(shape.size()); ++d) idx.push_back(lax::broadcasted_iota(dtype, shape, d));
  return fn(idx);
}
Array piecewise(const Array& x, const std::vector<Array>& condlist,
                const std::vector<std::function<Array(const Array&)>>& funclist) {
  const std::size_t nc = condlist.size(), nf = funclist.size();
  if (nf != nc && nf != nc + 1)
    throw ValueError("piecewise: with " + std::to_string(nc) + " condition(s), " + std::to_string(nc) + " or " +
                     std::to_string(nc + 1) + " functions are expected, got " + std::to_string(nf));
  Array r = nf == nc + 1 ? funclist.back()(x) + zeros_like(x) : zeros_like(x);
  for (std::size_t i = 0; i < nc; ++i) r = where(condlist[i], funclist[i](x) + zeros_like(x), r);
  return r;
}
std::vector<Array> mask_indices(std::int64_t n, const std::function<Array(const Array&, int)>& mask_func, int k) {
  return nonzero(mask_func(ones({n, n}), k));
}
bool isscalar(const Array& x) { return x.ndim() == 0; }
std::vector<Array> ix_(const std::vector<Array>& args) {
  std::vector<Array> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].ndim() != 1) throw ValueError("ix_: cross index must be 1 dimensional, got " + shape_str(args[i].shape()));
    Shape s(args.size(), 1);
    s[i] = args[i].size();
    out.push_back(reshape(args[i].dtype() == DType::bool_ ? flatnonzero(args[i]) : args[i], s));
  }
  return out;
}
std::string array_repr(const Array& x) { return to_string(x); }
Array put(const Array& a, const Array& ind, const Array& v, const std::string& mode) {
  if (mode != "clip" && mode != "wrap" && mode != "fill")
    throw ValueError("put: mode must be clip, wrap or fill, got '" + mode + "'");
  return staged("tessel.put", {a, ind, v}, [mode](const V& in) {
    Array flat = ravel(in[0]);
    const std::int64_t n = flat.size();
    Array i = ravel(in[1]);
    if (mode == "wrap") i = i % int(n);
    else if (mode == "clip") i = clip(i, 0, double(n - 1));
    Array vals = broadcast_to(ravel(in[2]), i.shape());
    return reshape(flat.at({i}).set(vals), in[0].shape());
  });
}
Array put_along_axis(const Array& arr, const Array& indices, const Array& values, int axis) {
  const int a = norm(axis, arr.ndim(), "put_along_axis");
  if (indices.ndim() != arr.ndim())
    throw ShapeError("put_along_axis: indices must have the array's rank " + std::to_string(arr.ndim()) + ", got " +
                     shape_str(indices.shape()));
  return staged("tessel.put_along_axis", {arr, indices, values}, [a](const V& v) {
    std::vector<IndexItem> items;
    for (int d = 0; d < v[0].ndim(); ++d) {
      if (d == a) {
        items.push_back(v[1]);
      } else {
        Shape s(std::size_t(v[0].ndim()), 1);
        s[std::size_t(d)] = v[1].shape()[std::size_t(d)];
        items.push_back(reshape(arange(0, s[std::size_t(d)], 1, DType::int32), s));
      }
    }
    return v[0].at(items).set(broadcast_to(v[2], v[1].shape()));
  });
}
Array poly(const Array& seq_of_zeros) {
  Array z = inexact(seq_of_zeros);
  if (z.ndim() == 0) z = reshape(z, {1});
  // A square matrix: the characteristic polynomial, from its eigenvalues (JAX's).
  if (z.ndim() == 2 && z.shape()[0] == z.shape()[1] && z.shape()[0] != 0) z = linalg::eigvals(z);
  if (z.ndim() != 1) throw ValueError("poly: input must be 1d or non-empty square 2d array, got " + shape_str(z.shape()));
  const std::int64_t n = z.size();
  if (n == 0) return ones({}, z.dtype());
  // (x - z0)(x - z1)...: each factor shifts the coefficients and subtracts.
  return staged("tessel.poly", {z}, [n](const V& v) {
    Array a = ones({1}, v[0].dtype());
    for (std::int64_t k = 0; k < n; ++k) {
      Array zero = zeros({1}, v[0].dtype());
      a = concatenate({a, zero}, 0) - v[0][k] * concatenate({zero, a}, 0);
    }
    return a;
  });
}
std::pair<Array, Array> polydiv(const Array& u, const Array& v, bool trim_leading_zeros) {
  if (u.ndim() != 1 || v.ndim() != 1 || v.size() == 0)
    throw ValueError("polydiv: u and v must be 1-D coefficient arrays (v non-empty), got " + shape_str(u.shape()) + " and " +
                     shape_str(v.shape()));
  const std::int64_t m = u.size() - 1, n = v.size() - 1;
  // JAX's long division: q[k] = r[k] / v[0], r[k:k+n+1] -= q[k] v; r keeps
  // u's length (its leading entries are the eliminated ones).
  auto qr = detail::staged_many("tessel.polydiv", {u, v}, [m, n](const V& in) {
    const DType dt = result_type(V{in[0], in[1]});
    const DType t = is_inexact(dt) ? dt : DType::float32;
    Array uu = in[0].astype(t), vv = in[1].astype(t);
    Array scale = 1.0 / vv[0];
    Array q = zeros({std::max<std::int64_t>(m - n + 1, 1)}, t), r = uu;
    for (std::int64_t k = 0; k <= m - n; ++k) {
      Array d = scale * r[k];
      q = q.at({k}).set(d);
      r = r.at({slice(k, k + n + 1)}).add(-d * vv);
    }
    return V{q, r};
  });
  if (!trim_leading_zeros) return {qr[0], qr[1]};
  if (qr[1].is_tracer())
    throw ConcretizationError("polydiv: trim_leading_zeros=True needs concrete inputs (the remainder's length depends on them)");
  // As JAX: leading entries below sqrt(eps) go (at least one entry stays).
  const bool f64 = real_dtype(qr[1].dtype()) == DType::float64;
  const double tol = std::sqrt(f64 ? std::numeric_limits<double>::epsilon() : double(std::numeric_limits<float>::epsilon()));
  auto r = abs(qr[1]).astype(DType::float64).to_vector<double>();
  std::int64_t lead = 0;
  while (lead + 1 < std::int64_t(r.size()) && r[std::size_t(lead)] < tol) ++lead;
  return {qr[0], qr[1][slice(lead, qr[1].size())]};
}
Array roots(const Array& p, bool strip_zeros) {
  if (p.ndim() != 1) throw ValueError("roots: input must be a rank-1 array, got " + aval_str(p.dtype(), p.shape()));
  Array c = inexact(p);
  std::int64_t lead = 0, trail = 0;
  if (strip_zeros) {
    // As JAX: leading zeros go (they are not roots), which needs the values.
    if (p.is_tracer())
      throw ConcretizationError("roots: strip_zeros=true needs a concrete p (the number of roots depends on it); under "
                                "jit pass strip_zeros=false");
    auto nz = flatnonzero(p);
    if (nz.size() == 0) return zeros({0}, complex_dtype(real_dtype(c.dtype())));
    lead = nz[0].item<std::int64_t>();
    // Trailing zeros are roots at 0 (NumPy's): counted on the values here;
    // without strip_zeros each is left to the companion matrix.
    trail = p.size() - 1 - nz[nz.size() - 1].item<std::int64_t>();
  }
  Array q = along(c, 0, lead, p.size() - trail);
  const std::int64_t n = q.size() - 1;
  const DType cd = complex_dtype(real_dtype(c.dtype()));
  if (n < 1) return zeros({trail}, cd);
  // The companion matrix's eigenvalues (NumPy's and JAX's).
  Array r = staged("tessel.roots", {q}, [n](const V& v) {
    Array a = -along(v[0], 0, 1, n + 1) / v[0][0];
    Array top = reshape(a, {1, n});
    if (n == 1) return linalg::eigvals(top);
    Array rest = concatenate({eye(n - 1, n - 1, 0, v[0].dtype()), zeros({n - 1, 1}, v[0].dtype())}, 1);
    return linalg::eigvals(concatenate({top, rest}, 0));
  });
  return trail ? concatenate({r, zeros({trail}, cd)}, 0) : r;
}
Array place(const Array& arr, const Array& mask, const Array& vals, bool inplace) {
  if (inplace)
    throw ValueError("place: tessel arrays are immutable and cannot be modified in place; use place(arr, mask, vals, "
                     "/*inplace=*/false) for the updated copy");
  if (mask.size() != arr.size())
    throw ShapeError("place: mask " + shape_str(mask.shape()) + " must have as many elements as arr " +
                     aval_str(arr.dtype(), arr.shape()));
  if (vals.size() == 0) throw ValueError("place: vals must not be empty");
  const std::int64_t nv = vals.size();
  // The k-th true position of mask takes vals[k mod len(vals)] (NumPy's cycling).
  return staged("tessel.place", {arr, mask, vals}, [nv](const V& v) {
    Array m = ravel(v[1]).astype(DType::bool_);
    Array k = cumsum(m.astype(DType::int32)) - 1;
    Array got = take(ravel(v[2]).astype(v[0].dtype()), k % int(nv), 0, "clip");
    return reshape(where(m, got, ravel(v[0])), v[0].shape());
  });
}
Array polyfit(const Array& x, const Array& y, int deg) {
  if (deg < 0) throw ValueError("polyfit: expected deg >= 0, got " + std::to_string(deg));
  if (x.ndim() != 1 || y.ndim() < 1 || y.ndim() > 2 || x.size() != y.shape()[0])
    throw ShapeError("polyfit: expected a 1-D x and a y of x's length (1-D or 2-D), got " + shape_str(x.shape()) + " and " +
                     shape_str(y.shape()));
  if (x.size() <= deg) throw ValueError("polyfit: deg " + std::to_string(deg) + " needs more than " + std::to_string(deg) + " points");
  return staged("tessel.polyfit", {x, y}, [deg](const V& v) {
    Array xf = is_inexact(v[0].dtype()) ? v[0] : v[0].astype(DType::float32);
    Array a = vander(xf, deg + 1);
    // Columns scaled to unit norm (as NumPy), then least squares through QR.
    Array scale = sqrt(sum(a * a, 0));
    scale = where(scale == 0, ones_like(scale), scale);
    Array as = a / scale;
    auto [q, r] = linalg::qr(as);
    Array yy = v[1].ndim() == 1 ? expand_dims(v[1].astype(xf.dtype()), 1) : v[1].astype(xf.dtype());
    Array c = linalg::triangular_solve(r, matmul(q.T(), yy), {.left_side = true, .lower = false});
    c = c / expand_dims(scale, 1);
    return v[1].ndim() == 1 ? squeeze(c, 1) : c;
  });
}
DType promote_types(DType a, DType b) { return where(ones({}, DType::bool_), zeros({0}, a), zeros({0}, b)).dtype(); }
DType result_type(const std::vector<Array>& xs) {
  if (xs.empty()) throw ValueError("result_type: at least one array is needed");
  Array r = zeros({0}, xs[0].dtype());
  for (auto& x : xs) r = where(ones({}, DType::bool_), r, x.weak_type() ? x : zeros({0}, x.dtype()));
  return r.dtype();
}

// ---------------------------------------------------------------- multi-dimensional histograms
std::pair<Array, std::vector<Array>> histogramdd(const Array& sample, int bins,
                                                 std::optional<std::vector<std::pair<double, double>>> range) {
  if (sample.ndim() != 2) throw ShapeError("histogramdd: sample must be [N, D], got " + shape_str(sample.shape()));
  const int D = int(sample.shape()[1]);
  if (range && int(range->size()) != D)
    throw ValueError("histogramdd: " + std::to_string(range->size()) + " ranges for " + std::to_string(D) + " dimensions");
  std::vector<Array> edges;
  for (int d = 0; d < D; ++d) {
    Array col = sample.index({all, d});
    edges.push_back(histogram_bin_edges(col, bins, range ? std::optional<std::pair<double, double>>((*range)[std::size_t(d)]) : std::nullopt));
  }
  V in{sample};
  in.insert(in.end(), edges.begin(), edges.end());
  Array counts = staged("tessel.histogramdd", in, [D, bins](const V& v) {
    Array flat = zeros({v[0].shape()[0]}, DType::int32);
    Array inside = ones({v[0].shape()[0]}, DType::bool_);
    for (int d = 0; d < D; ++d) {
      const Array& e = v[std::size_t(1 + d)];
      Array col = v[0].index({all, d}).astype(e.dtype());
      Array b = searchsorted(e, col, "right") - 1;
      b = where(col == e[bins], full_like(b, double(bins - 1)), b);
      inside = logical_and(inside, logical_and(col >= e[0], col <= e[bins]));
      flat = flat * bins + clip(b, 0, double(bins - 1));
    }
    std::int64_t total = 1;
    for (int d = 0; d < D; ++d) total *= bins;
    Array ids = arange(0, total, 1, DType::int32);
    Array hit = logical_and(expand_dims(flat, -1) == ids, expand_dims(inside, -1));
    return reshape(sum(hit, 0).astype(DType::float32), Shape(std::size_t(D), bins));
  });
  return {counts, edges};
}
std::tuple<Array, Array, Array> histogram2d(const Array& x, const Array& y, int bins,
                                            std::optional<std::vector<std::pair<double, double>>> range) {
  if (x.ndim() != 1 || y.shape() != x.shape())
    throw ShapeError("histogram2d: x and y must be 1-D of one length, got " + shape_str(x.shape()) + " and " + shape_str(y.shape()));
  auto [h, e] = histogramdd(stack({x, y.astype(x.dtype())}, 1), bins, range);
  return {h, e[0], e[1]};
}

}  // namespace tessel
