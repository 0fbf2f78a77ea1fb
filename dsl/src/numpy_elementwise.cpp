// jax.numpy's further elementwise functions, bitwise operators and
// stop_gradient (dsl/tessel/numpy.hpp), as compositions.
#include <cmath>
#include <limits>

#include <tessel/numpy.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::apply1;
using detail::inexact;
using detail::staged;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;
using V = std::vector<Array>;

Array stop_gradient(const Array& x) {
  return apply1("tessel.stop_gradient", {x}, [](NodeTable& t, const NR& in) { return build::stop_gradient(t, in[0]); });
}

namespace {

constexpr double kLn2 = 0.69314718055994530942, kLn10 = 2.30258509299404568402, kPi = 3.14159265358979323846;

// A float function of one array: integers become float32 first.
template <class F>
Array float_fn(const char* name, const Array& x, F f) {
  return staged(name, {x}, [f](const V& v) { return f(inexact(v[0])); });
}

// Above this magnitude x^2 overflows float32: asinh/acosh use log(2|x|).
constexpr double kBig = 268435456.0;  // 2^28

}  // namespace

// Near 0, sinh from expm1 (no cancellation); beyond, e^|x| / 2 as exp(|x| -
// ln 2), which stays finite as far as sinh and cosh themselves do.
Array sinh(const Array& x) {
  return float_fn("tessel.sinh", x, [](const Array& f) {
    Array a = abs(f), small = a < 1.0;
    Array fs = where(small, f, zeros_like(f)), ab = where(small, ones_like(a), a);
    Array e = exp(ab - kLn2);
    return where(small, (expm1(fs) - expm1(-fs)) * 0.5, sign(f) * (e - 0.25 / e));
  });
}
Array cosh(const Array& x) {
  return float_fn("tessel.cosh", x, [](const Array& f) {
    Array e = exp(abs(f) - kLn2);
    return e + 0.25 / e;
  });
}
Array arcsin(const Array& x) {
  return float_fn("tessel.arcsin", x, [](const Array& f) { return arctan2(f, sqrt((1 - f) * (1 + f))); });
}
Array arccos(const Array& x) {
  return float_fn("tessel.arccos", x, [](const Array& f) { return arctan2(sqrt((1 - f) * (1 + f)), f); });
}
Array arctan(const Array& x) {
  return float_fn("tessel.arctan", x, [](const Array& f) { return arctan2(f, ones_like(f)); });
}
Array arcsinh(const Array& x) {
  return float_fn("tessel.arcsinh", x, [](const Array& f) {
    Array pos = f >= 0;
    Array a = where(pos, f, -f), big = a > kBig;  // not abs: its derivative at 0 is 0, arcsinh's is 1
    Array small = where(big, ones_like(a), a);  // keeps the unused branch finite (and its gradient)
    Array near = log1p(small + small * small / (1 + sqrt(1 + small * small)));
    Array far = log(where(big, a, ones_like(a))) + kLn2;
    Array r = where(big, far, near);
    return where(pos, r, -r);
  });
}
Array arccosh(const Array& x) {
  return float_fn("tessel.arccosh", x, [](const Array& f) {
    Array big = f > kBig;
    Array s = where(big, full_like(f, 2.0), f);
    Array near = log1p((s - 1) + sqrt((s - 1) * (s + 1)));
    Array far = log(where(big, f, ones_like(f))) + kLn2;
    return where(big, far, near);
  });
}
Array arctanh(const Array& x) {
  return float_fn("tessel.arctanh", x, [](const Array& f) { return log1p(2 * f / (1 - f)) * 0.5; });
}
Array log2(const Array& x) {
  return float_fn("tessel.log2", x, [](const Array& f) { return log(f) / kLn2; });
}
Array log10(const Array& x) {
  return float_fn("tessel.log10", x, [](const Array& f) { return log(f) / kLn10; });
}
Array exp2(const Array& x) {
  return float_fn("tessel.exp2", x, [](const Array& f) { return exp(f * kLn2); });
}
Array trunc(const Array& x) {
  if (is_complex(x.dtype()))
    throw TypeError("trunc does not support complex-valued inputs, got " + aval_str(x.dtype(), x.shape()));
  if (!is_floating(x.dtype())) return x;
  return staged("tessel.trunc", {x}, [](const V& v) { return where(v[0] < 0, ceil(v[0]), floor(v[0])); });
}
Array fix(const Array& x) { return trunc(x); }
Array cbrt(const Array& x) {
  if (is_complex(x.dtype()))
    throw TypeError("cbrt does not accept complex dtype " + std::string(dtype_name(x.dtype())) +
                    " (lax.cbrt takes floating point values only)");
  return float_fn("tessel.cbrt", x, [](const Array& f) { return sign(f) * power(abs(f), 1.0 / 3.0); });
}
Array deg2rad(const Array& x) {
  return float_fn("tessel.deg2rad", x, [](const Array& f) { return f * (kPi / 180.0); });
}
Array rad2deg(const Array& x) {
  return float_fn("tessel.rad2deg", x, [](const Array& f) { return f * (180.0 / kPi); });
}
Array radians(const Array& x) { return deg2rad(x); }
Array degrees(const Array& x) { return rad2deg(x); }
Array isinf(const Array& x) {
  if (!is_inexact(x.dtype())) return zeros(x.shape(), DType::bool_);
  return staged("tessel.isinf", {x}, [](const V& v) { return logical_not(logical_or(isfinite(v[0]), isnan(v[0]))); });
}
Array isposinf(const Array& x) {
  if (is_complex(x.dtype())) throw ValueError("isposinf/isneginf are not well defined for complex-valued inputs");
  if (!is_floating(x.dtype())) return zeros(x.shape(), DType::bool_);
  return staged("tessel.isposinf", {x}, [](const V& v) { return logical_and(isinf(v[0]), v[0] > 0); });
}
Array isneginf(const Array& x) {
  if (is_complex(x.dtype())) throw ValueError("isposinf/isneginf are not well defined for complex-valued inputs");
  if (!is_floating(x.dtype())) return zeros(x.shape(), DType::bool_);
  return staged("tessel.isneginf", {x}, [](const V& v) { return logical_and(isinf(v[0]), v[0] < 0); });
}
Array signbit(const Array& x) {
  if (x.dtype() == DType::bool_ || x.dtype() == DType::uint32) return zeros(x.shape(), DType::bool_);
  if (is_complex(x.dtype())) throw TypeError("signbit of a complex array (" + aval_str(x.dtype(), x.shape()) + ")");
  if (!is_floating(x.dtype())) return x < 0;
  // The sign bit itself: -0.0 and negative NaNs count.
  const DType bits = x.dtype() == DType::float64 ? DType::int64 : DType::int32;
  return staged("tessel.signbit", {x}, [bits](const V& v) { return lax::bitcast_convert_type(v[0], bits) < 0; });
}
Array fabs(const Array& x) {
  if (is_complex(x.dtype())) throw TypeError("fabs of a complex array; use abs");
  return float_fn("tessel.fabs", x, [](const Array& f) { return abs(f); });
}
Array positive(const Array& x) {
  if (x.dtype() == DType::bool_) throw TypeError("positive of a boolean array");
  return x;
}
Array sinc(const Array& x) {
  return float_fn("tessel.sinc", x, [](const Array& f) {
    Array zero = f == 0;
    Array safe = where(zero, ones_like(f), f) * kPi;  // no 0/0, and a zero gradient there
    return where(zero, ones_like(f), sin(safe) / safe);
  });
}

Array fmod(const Array& a, const Array& b) {
  return apply1("tessel.fmod", {a, b}, [](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[0], in[1]}, "tessel.fmod");
    if (v[0]->dtype() == DType::bool_) throw TypeError("fmod of boolean arrays");
    return build::binary(t, Op::rem, v[0], v[1]);
  });
}
Array mod(const Array& a, const Array& b) { return remainder(a, b); }
std::pair<Array, Array> divmod(const Array& a, const Array& b) { return {floor_divide(a, b), remainder(a, b)}; }

Array logaddexp(const Array& a, const Array& b) {
  return staged("tessel.logaddexp", {a, b}, [](const V& v) {
    Array x = inexact(v[0]), y = inexact(v[1]);
    Array amax = maximum(x, y), delta = x - y;
    // JAX's: NaN delta (inf - inf, or a NaN) gives x + y.
    return where(isnan(delta), x + y, amax + log1p(exp(-abs(delta))));
  });
}
Array logaddexp2(const Array& a, const Array& b) {
  return staged("tessel.logaddexp2", {a, b}, [](const V& v) {
    Array x = inexact(v[0]), y = inexact(v[1]);
    Array amax = maximum(x, y), delta = x - y;
    return where(isnan(delta), x + y, amax + log1p(exp2(-abs(delta))) / kLn2);
  });
}
Array hypot(const Array& a, const Array& b) {
  return staged("tessel.hypot", {a, b}, [](const V& v) {
    Array x = abs(inexact(v[0])), y = abs(inexact(v[1]));
    Array hi = maximum(x, y), lo = minimum(x, y);
    Array safe = where(hi == 0, ones_like(hi), hi);
    Array r = lo / safe;
    // inf beats NaN, as C's hypot.
    return where(logical_or(isinf(x), isinf(y)), full_like(hi, INFINITY), where(hi == 0, zeros_like(hi), hi * sqrt(1 + r * r)));
  });
}
Array copysign(const Array& a, const Array& b) {
  return staged("tessel.copysign", {a, b}, [](const V& v) {
    Array x = inexact(v[0]), y = inexact(v[1]);
    return where(signbit(y), -abs(x), abs(x));
  });
}
Array heaviside(const Array& x, const Array& h0) {
  return staged("tessel.heaviside", {x, h0}, [](const V& v) {
    Array f = inexact(v[0]);
    Array h = v[1].astype(f.dtype());
    return where(f < 0, zeros_like(f), where(f == 0, h, where(f > 0, ones_like(f), f)));
  });
}
Array float_power(const Array& a, const Array& b) { return power(a, b); }
Array true_divide(const Array& a, const Array& b) { return divide(a, b); }

// ---------------------------------------------------------------- bitwise
namespace {
Array bitwise(const char* name, Op op, const Array& a, const Array& b) {
  return apply1(name, {a, b}, [op, name](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[0], in[1]}, name);
    if (is_inexact(v[0]->dtype()))
      throw TypeError(std::string(name) + " is only defined for integer and boolean arrays, got " +
                      aval_str(v[0]->dtype(), v[0]->shape()));
    return build::binary(t, op, v[0], v[1]);
  });
}
}  // namespace
Array bitwise_and(const Array& a, const Array& b) { return bitwise("tessel.bitwise_and", Op::and_, a, b); }
Array bitwise_or(const Array& a, const Array& b) { return bitwise("tessel.bitwise_or", Op::or_, a, b); }
Array bitwise_xor(const Array& a, const Array& b) { return bitwise("tessel.bitwise_xor", Op::xor_, a, b); }
Array logical_xor(const Array& a, const Array& b) { return bitwise_xor(a.astype(DType::bool_), b.astype(DType::bool_)); }
Array bitwise_not(const Array& x) {
  return apply1("tessel.bitwise_not", {x}, [](NodeTable& t, const NR& in) {
    if (is_inexact(in[0]->dtype()))
      throw TypeError("bitwise_not is only defined for integer and boolean arrays, got " +
                      aval_str(in[0]->dtype(), in[0]->shape()));
    return build::unary(t, Op::not_, in[0]);
  });
}
Array invert(const Array& x) { return bitwise_not(x); }
Array left_shift(const Array& a, const Array& b) { return bitwise("tessel.left_shift", Op::shift_left, a, b); }
Array right_shift(const Array& a, const Array& b) {
  return staged("tessel.right_shift", {a, b}, [](const V& v) {
    Array r = bitwise("tessel.right_shift", Op::shift_right_logical, v[0], v[1]);
    const DType dt = r.dtype();
    if (dt == DType::bool_ || dt == DType::uint32) return r;
    // Signed: arithmetic, as ~(~x >> n) for negative x.
    Array x = v[0].astype(dt), n = v[1].astype(dt);
    Array neg = bitwise_not(bitwise("tessel.right_shift", Op::shift_right_logical, bitwise_not(x), n));
    return where(x < 0, neg, r);
  });
}

Array nan_to_num(const Array& x, NanToNumOptions o) {
  if (!is_inexact(x.dtype())) return x;
  if (is_complex(x.dtype()))
    return complex(nan_to_num(real(x), o), nan_to_num(imag(x), o));
  const bool f64 = x.dtype() == DType::float64;
  const double hi = o.posinf.value_or(f64 ? std::numeric_limits<double>::max() : double(std::numeric_limits<float>::max()));
  const double lo = o.neginf.value_or(f64 ? std::numeric_limits<double>::lowest() : double(std::numeric_limits<float>::lowest()));
  const double nan = o.nan;
  return staged("tessel.nan_to_num", {x}, [=](const V& v) {
    const Array& f = v[0];
    Array r = where(isnan(f), full_like(f, nan), f);
    r = where(isposinf(f), full_like(f, hi), r);
    return where(isneginf(f), full_like(f, lo), r);
  });
}

// ---------------------------------------------------------------- operators
Array operator%(const Array& a, const Array& b) { return remainder(a, b); }
Array operator&(const Array& a, const Array& b) { return bitwise_and(a, b); }
Array operator|(const Array& a, const Array& b) { return bitwise_or(a, b); }
Array operator^(const Array& a, const Array& b) { return bitwise_xor(a, b); }
Array operator~(const Array& x) { return bitwise_not(x); }
Array operator<<(const Array& a, const Array& b) { return left_shift(a, b); }
Array operator>>(const Array& a, const Array& b) { return right_shift(a, b); }
Array& operator+=(Array& a, const Array& b) { return a = a + b; }
Array& operator-=(Array& a, const Array& b) { return a = a - b; }
Array& operator*=(Array& a, const Array& b) { return a = a * b; }
Array& operator/=(Array& a, const Array& b) { return a = a / b; }

namespace lax {
Array stop_gradient(const Array& x) { return tessel::stop_gradient(x); }
}  // namespace lax

}  // namespace tessel
