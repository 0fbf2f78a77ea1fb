// jax.numpy's NaN-aware reductions, counts and the cumulative scans
// (dsl/tessel/numpy.hpp). The scans are JAX's primitives (lax.cumsum, ...);
// tracer/rules_cumulative.cpp says how they run split over devices.
#include <cmath>

#include <tessel/numpy.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::apply1;
using detail::staged;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;
using V = std::vector<Array>;

namespace {

// Whether every element reduced into each result is NaN.
Array all_nan(const Array& x, Axes axis, bool keepdims) { return logical_not(any(logical_not(isnan(x)), axis, keepdims)); }

// x with NaNs replaced by v (x itself when it cannot hold NaN).
Array nan_as(const Array& x, double v) {
  if (!is_inexact(x.dtype())) return x;
  return where(isnan(x), full_like(x, v), x);
}

}  // namespace

Array nansum(const Array& x, Axes axis, bool keepdims) {
  return staged("tessel.nansum", {x}, [=](const V& v) { return sum(nan_as(v[0], 0), axis, keepdims); });
}
Array nanprod(const Array& x, Axes axis, bool keepdims) {
  return staged("tessel.nanprod", {x}, [=](const V& v) { return prod(nan_as(v[0], 1), axis, keepdims); });
}
Array nanmean(const Array& x, Axes axis, bool keepdims) {
  if (!is_inexact(x.dtype())) return mean(x, axis, keepdims);
  return staged("tessel.nanmean", {x}, [=](const V& v) {
    Array n = sum(logical_not(isnan(v[0])), axis, keepdims).astype(real_dtype(v[0].dtype()));
    return nansum(v[0], axis, keepdims) / n;
  });
}
Array nanmax(const Array& x, Axes axis, bool keepdims) {
  if (!is_floating(x.dtype())) return max(x, axis, keepdims);
  return staged("tessel.nanmax", {x}, [=](const V& v) {
    Array m = max(nan_as(v[0], -INFINITY), axis, keepdims);
    return where(all_nan(v[0], axis, keepdims), full_like(m, NAN), m);
  });
}
Array nanmin(const Array& x, Axes axis, bool keepdims) {
  if (!is_floating(x.dtype())) return min(x, axis, keepdims);
  return staged("tessel.nanmin", {x}, [=](const V& v) {
    Array m = min(nan_as(v[0], INFINITY), axis, keepdims);
    return where(all_nan(v[0], axis, keepdims), full_like(m, NAN), m);
  });
}
Array nanvar(const Array& x, Axes axis, int ddof, bool keepdims) {
  if (!is_inexact(x.dtype())) return var(x, axis, ddof, keepdims);
  return staged("tessel.nanvar", {x}, [=](const V& v) {
    const Array& f = v[0];
    Array ok = logical_not(isnan(f));
    Array n = sum(ok, axis, true).astype(real_dtype(f.dtype()));
    Array m = nansum(f, axis, true) / n;
    Array d = where(ok, f - m, zeros_like(f));
    Array sq = is_complex(f.dtype()) ? real(d * conj(d)) : d * d;
    Array r = sum(sq, axis, true) / maximum(n - double(ddof), zeros_like(n));
    return keepdims ? r : squeeze(r, axis.all() ? Axes() : axis);
  });
}
Array nanstd(const Array& x, Axes axis, int ddof, bool keepdims) { return sqrt(nanvar(x, axis, ddof, keepdims)); }
Array nanargmax(const Array& x, std::optional<int> axis, bool keepdims) {
  if (!is_floating(x.dtype())) return argmax(x, axis, keepdims);
  return staged("tessel.nanargmax", {x}, [=](const V& v) {
    Array i = argmax(nan_as(v[0], -INFINITY), axis, keepdims);
    Array none = axis ? all_nan(v[0], Axes(*axis), keepdims) : all_nan(v[0], Axes(), keepdims);
    return where(none, full_like(i, -1), i);
  });
}
Array nanargmin(const Array& x, std::optional<int> axis, bool keepdims) {
  if (!is_floating(x.dtype())) return argmin(x, axis, keepdims);
  return staged("tessel.nanargmin", {x}, [=](const V& v) {
    Array i = argmin(nan_as(v[0], INFINITY), axis, keepdims);
    Array none = axis ? all_nan(v[0], Axes(*axis), keepdims) : all_nan(v[0], Axes(), keepdims);
    return where(none, full_like(i, -1), i);
  });
}
Array count_nonzero(const Array& x, Axes axis, bool keepdims) {
  return staged("tessel.count_nonzero", {x}, [=](const V& v) {
    return sum(v[0] != 0, axis, keepdims).astype(DType::int32);
  });
}
Array ptp(const Array& x, Axes axis, bool keepdims) {
  return staged("tessel.ptp", {x}, [=](const V& v) { return max(v[0], axis, keepdims) - min(v[0], axis, keepdims); });
}
Array amax(const Array& x, Axes axis, bool keepdims) { return max(x, axis, keepdims); }
Array amin(const Array& x, Axes axis, bool keepdims) { return min(x, axis, keepdims); }
Array average(const Array& x, Axes axis, const std::optional<Array>& weights, bool keepdims) {
  if (!weights) return mean(x, axis, keepdims);
  const Array& w = *weights;
  if (w.shape() != x.shape()) {
    if (axis.all() || axis.list().size() != 1 || w.ndim() != 1)
      throw ShapeError("average: weights of shape " + shape_str(w.shape()) + " differ from a's shape " +
                       shape_str(x.shape()) + "; 1-D weights need one axis");
    const auto ax = c::norm_axis(axis.list()[0], x.ndim(), "average");
    if (w.shape()[0] != x.shape()[std::size_t(ax)])
      throw ShapeError("average: 1-D weights of length " + std::to_string(w.shape()[0]) + " for axis " +
                       std::to_string(ax) + " of length " + std::to_string(x.shape()[std::size_t(ax)]));
  }
  return staged("tessel.average", {x, w}, [=](const V& v) {
    Array ww = v[1];
    if (ww.shape() != v[0].shape()) {
      const auto ax = c::norm_axis(axis.list()[0], v[0].ndim(), "average");
      Shape s(std::size_t(v[0].ndim()), 1);
      s[std::size_t(ax)] = ww.shape()[0];
      ww = broadcast_to(reshape(ww, s), v[0].shape());
    }
    return sum(v[0] * ww, axis, keepdims) / sum(ww, axis, keepdims);
  });
}

// ---------------------------------------------------------------- scans
namespace lax {
namespace {
Array cumulative(const char* name, Op op, const Array& x, int axis, bool reverse) {
  return apply1(name, {x}, [=](NodeTable& t, const NR& in) {
    const std::int64_t d = c::norm_axis(axis, in[0]->rank(), name);
    return build::cumulative(t, op, in[0], d, reverse);
  });
}
}  // namespace
Array cumsum(const Array& x, int axis, bool reverse) { return cumulative("lax.cumsum", Op::cumsum, x, axis, reverse); }
Array cumprod(const Array& x, int axis, bool reverse) { return cumulative("lax.cumprod", Op::cumprod, x, axis, reverse); }
Array cummax(const Array& x, int axis, bool reverse) { return cumulative("lax.cummax", Op::cummax, x, axis, reverse); }
Array cummin(const Array& x, int axis, bool reverse) { return cumulative("lax.cummin", Op::cummin, x, axis, reverse); }
Array cumlogsumexp(const Array& x, int axis, bool reverse) {
  return cumulative("lax.cumlogsumexp", Op::cumlogsumexp, x, axis, reverse);
}
}  // namespace lax

namespace {
// jnp's cumsum/cumprod: of the flattened array without an axis; booleans in int32.
template <class F>
Array jnp_scan(const Array& x, std::optional<int> axis, F f) {
  Array v = x.dtype() == DType::bool_ ? x.astype(DType::int32) : x;
  if (!axis) return f(ravel(v), 0);
  return f(v, *axis);
}
}  // namespace
Array cumsum(const Array& x, std::optional<int> axis) {
  return jnp_scan(x, axis, [](const Array& v, int a) { return lax::cumsum(v, a); });
}
Array cumprod(const Array& x, std::optional<int> axis) {
  return jnp_scan(x, axis, [](const Array& v, int a) { return lax::cumprod(v, a); });
}
Array cumulative_sum(const Array& x, std::optional<int> axis) {
  if (!axis && x.ndim() > 1)
    throw ValueError("cumulative_sum: an axis is required for arrays of rank > 1, got " + aval_str(x.dtype(), x.shape()));
  return cumsum(x, axis ? axis : std::optional<int>(0));
}
Array cumulative_prod(const Array& x, std::optional<int> axis) {
  if (!axis && x.ndim() > 1)
    throw ValueError("cumulative_prod: an axis is required for arrays of rank > 1, got " + aval_str(x.dtype(), x.shape()));
  return cumprod(x, axis ? axis : std::optional<int>(0));
}
Array nancumsum(const Array& x, std::optional<int> axis) { return cumsum(nan_as(x, 0), axis); }
Array nancumprod(const Array& x, std::optional<int> axis) { return cumprod(nan_as(x, 1), axis); }

}  // namespace tessel
