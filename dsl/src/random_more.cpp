// More of jax.random's distributions (dsl/tessel/random.hpp): JAX's formulas
// (jax/_src/random) over the bit-identical draws, each run as one program so
// that eager and compiled calls round alike.
#include <cmath>

#include <tessel/linalg.hpp>
#include <tessel/numpy.hpp>
#include <tessel/random.hpp>

#include "dsl/src/staged.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::random {

using detail::staged;
using V = std::vector<Array>;

namespace {
void need_float(DType dtype, const char* what) {
  if (!is_floating(dtype))
    throw TypeError(std::string("random.") + what + ": dtype must be a real floating-point type, got " + dtype_name(dtype));
}
// A parameter converted to dtype first, as JAX's lax.convert_element_type.
Array param(double v, DType dtype) { return full({}, v, dtype); }
}  // namespace

Array PRNGKey(std::int64_t seed) { return key(seed); }
Array clone(const Array& k) { return k; }
Array wrap_key_data(const Array& data) {
  if (data.dtype() != DType::uint32 || data.ndim() < 1 || data.shape().back() != 2)
    throw TypeError("random.wrap_key_data: threefry2x32 key data is uint32[..., 2], got " + aval_str(data.dtype(), data.shape()));
  return data;
}
std::string key_impl(const Array&) { return "threefry2x32"; }

Array chisquare(const Array& k, double df, std::optional<Shape> shape, DType dtype) {
  need_float(dtype, "chisquare");
  return staged("random.chisquare", {k}, [=](const V& v) {
    Array half = param(df, dtype) / param(2, dtype);
    return exp(loggamma(v[0], half, shape, dtype)) * param(2, dtype);
  });
}
Array f(const Array& k, double dfnum, double dfden, std::optional<Shape> shape, DType dtype) {
  need_float(dtype, "f");
  return staged("random.f", {k}, [=](const V& v) {
    Array ks = random::split(v[0]);
    Array key_dfd = ks[0], key_dfn = ks[1];
    Array num = chisquare(key_dfn, dfnum, shape, dtype) / param(dfnum, dtype);
    Array den = chisquare(key_dfd, dfden, shape, dtype) / param(dfden, dtype);
    return num / den;
  });
}
Array geometric(const Array& k, double p, const Shape& shape, DType dtype) {
  if (!is_integral(dtype))
    throw ValueError(std::string("dtype argument to `geometric` must be an int dtype, got ") + dtype_name(dtype));
  return staged("random.geometric", {k}, [=](const V& v) {
    Array u = uniform(v[0], shape, DType::float32);
    u = where(u == 0, ones_like(u), u);
    Array log_one_minus_p = broadcast_to(log1p(-param(p, DType::float32)), shape);
    return (floor(log(u) / log_one_minus_p) + 1.0).astype(dtype);
  });
}
Array lognormal(const Array& k, double sigma, const Shape& shape, DType dtype) {
  need_float(dtype, "lognormal");
  return staged("random.lognormal", {k}, [=](const V& v) { return exp(normal(v[0], shape, dtype) * param(sigma, dtype)); });
}
Array maxwell(const Array& k, const Shape& shape, DType dtype) {
  need_float(dtype, "maxwell");
  return staged("random.maxwell", {k}, [=](const V& v) {
    Shape s = shape;
    s.push_back(3);
    return linalg::norm(normal(v[0], s, dtype), std::nullopt, -1);
  });
}
Array double_sided_maxwell(const Array& k, double loc, double scale, const Shape& shape, DType dtype) {
  need_float(dtype, "double_sided_maxwell");
  return staged("random.double_sided_maxwell", {k}, [=](const V& v) {
    Array ks = random::split(v[0]);
    Array m = maxwell(ks[0], shape, dtype);
    Array sign = rademacher(ks[1], shape, dtype);
    return sign * m * param(scale, dtype) + param(loc, dtype);
  });
}
Array pareto(const Array& k, double b, const Shape& shape, DType dtype) {
  need_float(dtype, "pareto");
  return staged("random.pareto", {k}, [=](const V& v) { return exp(exponential(v[0], shape, dtype) / param(b, dtype)); });
}
Array rayleigh(const Array& k, double scale, const Shape& shape, DType dtype) {
  need_float(dtype, "rayleigh");
  return staged("random.rayleigh", {k}, [=](const V& v) {
    Array u = uniform(v[0], shape, dtype);
    Array sc = broadcast_to(param(scale, dtype), shape);
    return sc * sqrt(log(u) * param(-2, dtype));
  });
}
Array triangular(const Array& k, double left, double mode, double right, const Shape& shape, DType dtype) {
  need_float(dtype, "triangular");
  return staged("random.triangular", {k}, [=](const V& v) {
    Array l = broadcast_to(param(left, dtype), shape), r = broadcast_to(param(right, dtype), shape),
          m = broadcast_to(param(mode, dtype), shape);
    Array fc = (m - l) / (r - l);
    Array u = uniform(v[0], shape, dtype);
    Array out1 = l + sqrt(u * (r - l) * (m - l));
    Array out2 = r - sqrt((1 - u) * (r - l) * (r - m));
    return where(u < fc, out1, out2);
  });
}
Array wald(const Array& k, double mean, const Shape& shape, DType dtype) {
  need_float(dtype, "wald");
  return staged("random.wald", {k}, [=](const V& v) {
    Array ks = random::split(v[0], 2);
    Array mu = broadcast_to(param(mean, dtype), shape);
    Array nv = normal(ks[0], shape, dtype);
    Array z = uniform(ks[1], shape, dtype);
    Array y = pow(nv, 2), y_sq = pow(y, 2), mean_sq = pow(mu, 2);
    Array sqrt_term = sqrt(4 * mu * y + mean_sq * y_sq);
    Array x = mu + mean_sq * y / 2 - mu / 2 * sqrt_term;
    return where(z <= mu / (mu + x), x, mean_sq / x);
  });
}
Array weibull_min(const Array& k, double scale, double concentration, const Shape& shape, DType dtype) {
  need_float(dtype, "weibull_min");
  return staged("random.weibull_min", {k}, [=](const V& v) {
    Array u = uniform(v[0], shape, dtype, 0, 1);
    return power(-log1p(-u), 1.0 / concentration) * scale;
  });
}
Array generalized_normal(const Array& k, double p, const Shape& shape, DType dtype) {
  need_float(dtype, "generalized_normal");
  return staged("random.generalized_normal", {k}, [=](const V& v) {
    Array ks = random::split(v[0]);
    Array g = gamma(ks[0], 1 / p, shape, dtype);
    Array r = rademacher(ks[1], shape, dtype);
    return r * power(g, 1 / p);
  });
}
Array ball(const Array& k, std::int64_t d, double p, const Shape& shape, DType dtype) {
  need_float(dtype, "ball");
  return staged("random.ball", {k}, [=](const V& v) {
    Array ks = random::split(v[0]);
    Shape s = shape;
    s.push_back(d);
    Array g = generalized_normal(ks[0], p, s, dtype);
    Array e = exponential(ks[1], shape, dtype);
    return g / expand_dims(power(sum(power(abs(g), p), -1) + e, 1 / p), -1);
  });
}

}  // namespace tessel::random
