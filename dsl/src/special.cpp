// jax.scipy.special (dsl/tessel/special.hpp), as compositions. gammaln is
// Lanczos' approximation (g = 7, 9 terms) with the reflection formula below
// 1/2; digamma shifts its argument past 6 by the recurrence, then sums the
// asymptotic series; erfc uses the Chebyshev fit of Numerical Recipes
// (relative error below 1.2e-7 everywhere, so also far into the tails)
// where 1 - erf would lose all digits.
#include <cmath>

#include <tessel/numpy.hpp>
#include <tessel/special.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "dsl/src/trace.hpp"

namespace tessel::scipy::special {

using detail::inexact;
using detail::staged;
using V = std::vector<Array>;

namespace {
constexpr double kPi = 3.14159265358979323846, kSqrt2 = 1.41421356237309504880;

template <class F>
Array fn1(const char* name, const Array& x, F f) {
  return staged(name, {x}, [f](const V& v) { return f(inexact(v[0])); });
}
template <class F>
Array fn2(const char* name, const Array& a, const Array& b, F f) {
  return staged(name, {a, b}, [f](const V& v) {
    Array x = inexact(v[0]), y = inexact(v[1]);
    Array z = x + y;  // the promoted dtype and shape
    return f(broadcast_to(x.astype(z.dtype()), z.shape()), broadcast_to(y.astype(z.dtype()), z.shape()));
  });
}

// log Gamma(x) for x >= 1/2 (Lanczos).
Array lanczos_lgamma(const Array& x) {
  static const double c[] = {0.99999999999980993,  676.5203681218851,     -1259.1392167224028,
                             771.32342877765313,   -176.61502916214059,   12.507343278686905,
                             -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7};
  Array z = x - 1.0;
  Array a = full_like(z, c[0]);
  for (int i = 1; i < 9; ++i) a = a + c[i] / (z + double(i));
  Array t = z + 7.5;
  return 0.5 * std::log(2 * kPi) + (z + 0.5) * log(t) - t + log(a);
}

// erfc for x >= 0 as t exp(-x^2 + p(t)), t = 1 / (1 + x / 2); and its log.
Array erfc_log_pos(const Array& z) {
  Array t = 1.0 / (1.0 + 0.5 * z);
  static const double c[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                             0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  Array p = full_like(z, c[9]);
  for (int i = 8; i >= 0; --i) p = c[i] + t * p;
  return log(t) - z * z + p;
}
}  // namespace

Array erf(const Array& x) { return fn1("special.erf", x, [](const Array& f) { return lax::erf(f); }); }
namespace {
// log erfc(z) for z >= 0. float32: the Chebyshev fit (relative 1.2e-7);
// float64: log(1 - erf(z)) below 3 (relative error under 1e-11 there), the
// continued fraction erfc(z) = exp(-z^2) / (sqrt(pi) K(z)),
// K = z + (1/2) / (z + 1 / (z + (3/2) / ...)), 60 levels, from 3 on.
Array erfc_log(const Array& z) {
  if (z.dtype() != DType::float64) return erfc_log_pos(z);
  Array near = z < 3.0;
  Array zn = where(near, z, zeros_like(z)), zf = where(near, full_like(z, 3.0), z);
  Array k = zf;
  for (int n = 60; n >= 1; --n) k = zf + (0.5 * n) / k;
  Array far = -zf * zf - 0.5 * std::log(kPi) - log(k);
  return where(near, log1p(-lax::erf(zn)), far);
}
}  // namespace

Array erfc(const Array& x) {
  return fn1("special.erfc", x, [](const Array& f) {
    Array a = where(f >= 0, f, -f);  // not abs: erfc's derivative at 0 is -2/sqrt(pi), abs' is 0 there
    Array pos = f.dtype() == DType::float64 ? exp(erfc_log(a)) : where(a < 0.5, 1.0 - lax::erf(a), exp(erfc_log_pos(a)));
    return where(f < 0, 2.0 - pos, pos);
  });
}
Array erfinv(const Array& x) { return fn1("special.erfinv", x, [](const Array& f) { return lax::erf_inv(f); }); }
Array gammaln(const Array& x) {
  return fn1("special.gammaln", x, [](const Array& f) {
    Array small = f < 0.5;
    Array up = where(small, 1.0 - f, f);  // both branches at arguments >= 1/2
    Array lg = lanczos_lgamma(up);
    Array s = abs(sin(kPi * f));
    Array reflected = std::log(kPi) - log(s) - lg;
    Array pole = logical_and(f <= 0, f == floor(f));
    Array inf = logical_or(pole, isposinf(f));  // log Gamma(+inf) = +inf (Lanczos' sum would give inf - inf)
    return where(inf, full_like(f, INFINITY), where(small, reflected, lg));
  });
}
Array digamma(const Array& x) {
  return fn1("special.digamma", x, [](const Array& f) {
    Array small = f < 0.5;
    Array y = where(small, 1.0 - f, f);
    // psi(y) = psi(y + 6) - sum 1 / (y + k), k < 6
    Array acc = zeros_like(y);
    for (int k = 0; k < 6; ++k) acc = acc + 1.0 / (y + double(k));
    Array w = y + 6.0, w2 = 1.0 / (w * w);
    Array series = log(w) - 0.5 / w -
                   w2 * (1.0 / 12 - w2 * (1.0 / 120 - w2 * (1.0 / 252 - w2 * (1.0 / 240 - w2 * (1.0 / 132)))));
    Array psi = series - acc;
    Array reflected = psi - kPi / tan(kPi * f);
    Array pole = logical_and(f <= 0, f == floor(f));
    return where(pole, full_like(f, NAN), where(small, reflected, psi));
  });
}
Array logit(const Array& p) { return fn1("special.logit", p, [](const Array& f) { return log(f / (1.0 - f)); }); }
Array expit(const Array& x) { return nn::sigmoid(x); }

namespace {
// x * g(y), 0 where x == 0, with JAX's derivative (d/dx = g(y) also at x == 0).
template <class G>
Array x_times(const char* name, const Array& x, const Array& y, G g) {
  return fn2(name, x, y, [g](const Array& a, const Array& b) {
    Array zero = a == 0;
    Array safe_b = where(zero, ones_like(b) * 0.5, b);  // keeps the other branch's gradient finite
    Array gy = g(b);
    Array coef = stop_gradient(where(isfinite(gy), gy, zeros_like(gy)));
    return where(zero, a * coef, a * g(safe_b));
  });
}
}  // namespace
Array xlogy(const Array& x, const Array& y) {
  return x_times("special.xlogy", x, y, [](const Array& b) { return log(b); });
}
Array xlog1py(const Array& x, const Array& y) {
  return x_times("special.xlog1py", x, y, [](const Array& b) { return log1p(b); });
}
Array betaln(const Array& a, const Array& b) {
  return fn2("special.betaln", a, b, [](const Array& x, const Array& y) { return gammaln(x) + gammaln(y) - gammaln(x + y); });
}
namespace {
// exp(-|x|) I_nu(x) for nu = 0 or 1: the power series (40 terms, nested)
// up to |x| = 15, the asymptotic series (20 terms) beyond. Each branch sees
// a harmless argument where the other is taken, so neither's gradient is NaN.
Array bessel_e(const Array& f, int nu) {
  Array pos = f >= 0;
  // i0e: abs (JAX: derivative 0 at the kink); i1e: not abs, its derivative at 0 is 1/2.
  Array a = nu == 0 ? abs(f) : where(pos, f, -f);
  Array far = a > 15.0;
  Array xs = where(far, zeros_like(a), a), xl = where(far, a, full_like(a, 20.0));
  Array q = xs * xs * 0.25;
  Array s = ones_like(a);
  for (int k = 40; k >= 1; --k) s = 1.0 + s * q / double(nu == 0 ? k * k : k * (k + 1));
  Array near = exp(-xs) * (nu == 0 ? s : xs * 0.5 * s);
  Array term = ones_like(a), sum = ones_like(a);
  const double mu = 4.0 * nu * nu;
  for (int k = 1; k <= 20; ++k) {
    const double m = double(2 * k - 1);
    term = term * ((m * m - mu) / (8.0 * k)) / xl;
    sum = sum + term;
  }
  Array asym = sum * rsqrt(2 * kPi * xl);
  Array r = where(far, asym, near);
  return nu == 0 ? r : where(pos, r, -r);
}
}  // namespace
Array i0e(const Array& x) { return fn1("special.i0e", x, [](const Array& f) { return bessel_e(f, 0); }); }
Array i1e(const Array& x) { return fn1("special.i1e", x, [](const Array& f) { return bessel_e(f, 1); }); }

Array ndtr(const Array& x) {
  return fn1("special.ndtr", x, [](const Array& f) { return 0.5 * erfc(-f / kSqrt2); });
}
Array log_ndtr(const Array& x) {
  return fn1("special.log_ndtr", x, [](const Array& f) {
    // Left of -1: log(erfc(z) / 2) in log space; else log1p(-ndtr(-x)).
    Array left = f < -1.0;
    Array z = where(left, -f, full_like(f, 2.0)) / kSqrt2;
    Array lt = erfc_log(z) - std::log(2.0);
    Array right = log1p(-ndtr(-where(left, zeros_like(f), f)));
    return where(left, lt, right);
  });
}
// Acklam's rational approximations (relative error 1.2e-9) in the lower
// tail and the centre, by symmetry above 1/2, then one Halley step on ndtr
// (accurate in both tails: erfc's continued fraction) for full precision.
Array ndtri(const Array& p) {
  return fn1("special.ndtri", p, [](const Array& f) {
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                               1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                               6.680131188771972e+01,  -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                               -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    auto horner = [](const double* k, int n, const Array& x) {
      Array r = full_like(x, k[0]);
      for (int i = 1; i < n; ++i) r = r * x + k[i];
      return r;
    };
    Array upper = f > 0.5;
    Array q = where(upper, 1.0 - f, f);  // the tail probability, <= 1/2
    Array ok = logical_and(q > 0, q <= 0.5);
    Array qs = where(ok, q, full_like(q, 0.25));  // harmless where the edges take over
    Array tail = qs < 0.02425;
    Array qt = where(tail, qs, full_like(qs, 0.01));
    Array t = sqrt(-2.0 * log(qt));
    Array xt = horner(c, 6, t) / (horner(d, 4, t) * t + 1.0);
    Array qc = where(tail, full_like(qs, 0.25), qs) - 0.5;
    Array r = qc * qc;
    Array xc = horner(a, 6, r) * qc / (horner(b, 5, r) * r + 1.0);
    Array x = where(tail, xt, xc);  // <= 0
    // Halley: e = ndtr(x) - q; u = e sqrt(2 pi) exp(x^2 / 2); x -= u / (1 + x u / 2).
    Array e = ndtr(x) - qs;
    Array u = e * std::sqrt(2 * kPi) * exp(x * x * 0.5);
    x = x - u / (1.0 + x * u * 0.5);
    Array res = where(upper, -x, x);
    // As JAX's: -inf at and below 0, +inf at and above 1.
    res = where(f <= 0, full_like(f, -INFINITY), where(f >= 1, full_like(f, INFINITY), res));
    return where(isnan(f), full_like(f, NAN), res);
  });
}

}  // namespace tessel::scipy::special
