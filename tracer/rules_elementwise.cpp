// Rules of the elementwise families: unary, binary, compare, select, convert.
//
// Semantics are XLA's, which JAX users see: integer arithmetic wraps; integer
// division truncates, x / 0 is -1 (all ones) and x % 0 is x; shifts by the
// bit width or more give 0; max/min propagate NaN; round is half-to-even.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tracer/build.hpp"
#include "tracer/convert.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::elementwise_factors;
using rule_util::expect_arity;

namespace {

// Inexact: floating or complex; Numeric: not bool; Real: numeric, not complex;
// Ordered: anything but complex (JAX's lax orders no complex values).
enum class Accepts { Float, Inexact, Numeric, Real, Ordered, Integer, IntOrBool, Any };

constexpr bool accepts_complex(Accepts a) {
  return a == Accepts::Inexact || a == Accepts::Numeric || a == Accepts::Any;
}

bool accepts(Accepts a, DType t) {
  switch (a) {
    case Accepts::Float: return is_floating(t);
    case Accepts::Inexact: return is_inexact(t);
    case Accepts::Numeric: return !is_bool(t);
    case Accepts::Real: return !is_bool(t) && !is_complex(t);
    case Accepts::Ordered: return !is_complex(t);
    case Accepts::Integer: return is_integral(t);
    case Accepts::IntOrBool: return is_integral(t) || is_bool(t);
    case Accepts::Any: return true;
  }
  __builtin_unreachable();
}

const char* accepts_str(Accepts a) {
  switch (a) {
    case Accepts::Float: return "floating-point";
    case Accepts::Inexact: return "floating-point or complex";
    case Accepts::Numeric: return "numeric";
    case Accepts::Real: return "real numeric (not complex)";
    case Accepts::Ordered: return "non-complex";
    case Accepts::Integer: return "integer";
    case Accepts::IntOrBool: return "integer or boolean";
    case Accepts::Any: return "any";
  }
  __builtin_unreachable();
}

void check_dtype(Op op, Accepts a, const std::vector<Aval>& in) {
  for (auto& x : in)
    if (!accepts(a, x.dtype))
      throw TypeError(cat(op_name(op), " requires ", accepts_str(a), " operands, got ", avals_str(in)));
}

Aval unary_infer(Op op, Accepts a, const std::vector<Aval>& in) {
  expect_arity(op, in, 1);
  check_dtype(op, a, in);
  return in[0];
}

Aval binary_infer(Op op, Accepts a, const std::vector<Aval>& in, bool to_bool) {
  expect_arity(op, in, 2);
  check_dtype(op, a, in);
  if (in[0].shape != in[1].shape || in[0].dtype != in[1].dtype)
    throw TypeError(cat(op_name(op), " requires operands of one shape and dtype, got ", avals_str(in)));
  Aval out = in[0];
  out.weak_type = in[0].weak_type && in[1].weak_type;
  if (to_bool) out = Aval{DType::bool_, in[0].shape, false};
  return out;
}

// Applies f elementwise to typed data: out[i] = f(a[i]) (or f(a[i], b[i])).
template <class F>
void map1(const HostArray& a, HostArray& out, F&& f) {
  visit_wide_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::int64_t n = numel(a.shape);
    const T* x = reinterpret_cast<const T*>(a.bytes.data());
    visit_wide_dtype(out.dtype, [&](auto otag) {
      using O = decltype(otag);
      O* y = reinterpret_cast<O*>(out.bytes.data());
      using R = decltype(f(x[0]));
      if constexpr (requires(R r) { static_cast<O>(r); })
        for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<O>(f(x[i]));
      else
        throw InternalError("an elementwise kernel's result does not convert to " + std::string(dtype_name(out.dtype)));
    });
  });
}

template <class F>
void map2(const HostArray& a, const HostArray& b, HostArray& out, F&& f) {
  visit_wide_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::int64_t n = numel(a.shape);
    const T* x = reinterpret_cast<const T*>(a.bytes.data());
    const T* y = reinterpret_cast<const T*>(b.bytes.data());
    visit_wide_dtype(out.dtype, [&](auto otag) {
      using O = decltype(otag);
      O* z = reinterpret_cast<O*>(out.bytes.data());
      using R = decltype(f(x[0], y[0]));
      if constexpr (requires(R r) { static_cast<O>(r); })
        for (std::int64_t i = 0; i < n; ++i) z[i] = static_cast<O>(f(x[i], y[i]));
      else
        throw InternalError("an elementwise kernel's result does not convert to " + std::string(dtype_name(out.dtype)));
    });
  });
}

// Wrapping integer arithmetic without undefined behaviour.
template <class T>
T wrap_add(T a, T b) {
  using U = wrap_unsigned_t<T>;
  return T(U(a) + U(b));
}
template <class T>
T wrap_sub(T a, T b) {
  using U = wrap_unsigned_t<T>;
  return T(U(a) - U(b));
}
template <class T>
T wrap_mul(T a, T b) {
  using U = wrap_unsigned_t<T>;
  return T(U(a) * U(b));
}

template <class T>
constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// exp(z) - 1 and log(1 + z) for complex z, accurate near 0 (no cancellation):
// exp(x+iy) - 1 = (expm1(x) cos y - 2 sin^2(y/2)) + i e^x sin y;
// log(1+z) = log1p(2x + x^2 + y^2) / 2 + i atan2(y, 1 + x).
template <class C>
C complex_expm1(C z) {
  using R = typename C::value_type;
  R x = z.real(), y = z.imag(), s = std::sin(y / 2);
  return C(std::expm1(x) * std::cos(y) - 2 * s * s, std::exp(x) * std::sin(y));
}
template <class C>
C complex_log1p(C z) {
  using R = typename C::value_type;
  R x = z.real(), y = z.imag();
  return C(std::log1p(x * (2 + x) + y * y) / 2, std::atan2(y, R(1) + x));
}

// erf^-1 to full precision: Newton in long double from a close start
// (Giles' f32 polynomial), on erf(y) - |x|, or from |x| = 1/2 up on
// (1 - |x|) - erfc(y), which keeps the digits of 1 - |x|.
double erf_inv_ref(double x) {
  if (x <= -1) return x == -1 ? -HUGE_VAL : std::nan("");
  if (x >= 1) return x == 1 ? HUGE_VAL : std::nan("");
  double w = -std::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  const long double ax = std::fabs(x);
  long double y = std::fabs(p * x);
  for (int k = 0; k < 6; ++k) {
    const long double err = ax < 0.5 ? std::erf(y) - ax : (1.0L - ax) - std::erfc(y);
    y -= err / (1.1283791670955125739L * std::exp(-y * y));
  }
  return std::copysign(double(y), x);
}

template <class T>
T round_half_even(T x) {
  return std::nearbyint(x);  // the default rounding mode is to nearest, ties to even
}

// IEEE 754-2019's maximum and minimum (LLVM's llvm.maximum, which compiled
// code uses): NaN if either is, and -0 below +0.
template <class T>
T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return std::signbit(a) ? b : a;
  }
  return a > b ? a : b;
}
template <class T>
T nan_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return std::signbit(a) ? a : b;
  }
  return a < b ? a : b;
}

template <class T>
T int_div(T a, T b) {
  if (b == 0) return T(-1);
  if constexpr (std::is_signed_v<T>) {
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return a;
  }
  return T(a / b);
}
template <class T>
T int_rem(T a, T b) {
  if (b == 0) return a;
  if constexpr (std::is_signed_v<T>) {
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return T(0);
  }
  return T(a % b);
}

template <class T>
T shl(T a, T b) {
  using U = wrap_unsigned_t<T>;
  if (U(std::make_unsigned_t<T>(b)) >= sizeof(T) * 8) return T(0);
  return T(U(a) << U(b));
}
template <class T>
T shr_logical(T a, T b) {
  using U = wrap_unsigned_t<T>;
  if (U(std::make_unsigned_t<T>(b)) >= sizeof(T) * 8) return T(0);
  // a's own bits, zero-extended (an int8's -128 is 0x80, not 0xFFFFFF80).
  return T(U(std::make_unsigned_t<T>(a)) >> U(b));
}

}  // namespace

// ------------------------------------------------------------------ unary

#define TESSEL_UNARY(OP, ACCEPTS, BODY)                                                              \
  Aval Rule<Op::OP>::infer(const std::vector<Aval>& in, const A&, const Aval&) {               \
    return unary_infer(Op::OP, Accepts::ACCEPTS, in);                                                \
  }                                                                                                  \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, \
                          HostArray& out) {                                                          \
    rule_util::allocate(out, aval);                                                                  \
    map1(*in[0], out, [](auto x) {                                                                   \
      using T = decltype(x);                                                                         \
      if constexpr (is_complex_v<T> && !accepts_complex(Accepts::ACCEPTS)) {                         \
        return x; /* not reached: the rule refuses complex operands */                              \
      } else {                                                                                       \
        BODY                                                                                         \
      }                                                                                              \
    });                                                                                              \
  } \
  TESSEL_LOCAL_SAME_OP(OP)

TESSEL_UNARY(neg, Numeric, {
  if constexpr (is_int_v<T>) return wrap_sub(T(0), x);
  else return T(-x);
})
TESSEL_UNARY(sin, Inexact, { return std::sin(x); })
TESSEL_UNARY(cos, Inexact, { return std::cos(x); })
TESSEL_UNARY(tan, Inexact, { return std::tan(x); })
TESSEL_UNARY(tanh, Inexact, { return std::tanh(x); })
TESSEL_UNARY(exp, Inexact, { return std::exp(x); })
TESSEL_UNARY(expm1, Inexact, {
  if constexpr (is_complex_v<T>) return complex_expm1(x);
  else return std::expm1(x);
})
TESSEL_UNARY(log, Inexact, { return std::log(x); })
TESSEL_UNARY(log1p, Inexact, {
  if constexpr (is_complex_v<T>) return complex_log1p(x);
  else return std::log1p(x);
})
TESSEL_UNARY(sqrt, Inexact, { return std::sqrt(x); })
TESSEL_UNARY(rsqrt, Inexact, { return T(1) / std::sqrt(x); })
TESSEL_UNARY(logistic, Float, { return T(1) / (T(1) + std::exp(-x)); })
TESSEL_UNARY(erf_inv, Float, { return T(erf_inv_ref(double(x))); })
TESSEL_UNARY(erf, Float, { return std::erf(x); })
TESSEL_UNARY(sign, Numeric, {
  if constexpr (is_complex_v<T>) {
    // x / |x|, 0 at 0 (JAX's sign of a complex number)
    if (x == T(0)) return x;
    return x / std::abs(x);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x)) return x;
    return x > 0 ? T(1) : (x < 0 ? T(-1) : T(0));
  } else if constexpr (std::is_unsigned_v<T>) {
    return x > 0 ? T(1) : T(0);
  } else {
    return x > 0 ? T(1) : (x < 0 ? T(-1) : T(0));
  }
})
TESSEL_UNARY(floor, Float, { return std::floor(x); })
TESSEL_UNARY(ceil, Float, { return std::ceil(x); })
TESSEL_UNARY(round, Float, { return round_half_even(x); })
TESSEL_UNARY(not_, IntOrBool, {
  if constexpr (std::is_same_v<T, bool>) return !x;
  else if constexpr (std::is_integral_v<T>) return T(~x);
  else return x;  // not reached: the rule admits integers and bools only
})
#undef TESSEL_UNARY

// abs: |x|; a complex operand's modulus is real.
Aval Rule<Op::abs>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  Aval a = unary_infer(Op::abs, Accepts::Numeric, in);
  a.dtype = real_dtype(a.dtype);
  return a;
}
void Rule<Op::abs>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  map1(*in[0], out, [](auto x) {
    using T = decltype(x);
    if constexpr (is_complex_v<T>) return std::abs(x);  // hypot: no overflow in the squares
    else if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (is_int_v<T>) return x < 0 ? wrap_sub(T(0), x) : x;
    else return std::fabs(x);
  });
}
TESSEL_LOCAL_SAME_OP(abs)

Aval Rule<Op::is_finite>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  Aval a = unary_infer(Op::is_finite, Accepts::Inexact, in);
  return Aval{DType::bool_, a.shape, false};
}
void Rule<Op::is_finite>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval,
                               HostArray& out) {
  rule_util::allocate(out, aval);
  map1(*in[0], out, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) return std::isfinite(x);
    else if constexpr (is_complex_v<decltype(x)>) return std::isfinite(x.real()) && std::isfinite(x.imag());
    else return true;
  });
}

// ------------------------------------------------------------------ binary

#define TESSEL_BINARY(OP, ACCEPTS, BODY)                                                             \
  Aval Rule<Op::OP>::infer(const std::vector<Aval>& in, const A&, const Aval&) {               \
    return binary_infer(Op::OP, Accepts::ACCEPTS, in, false);                                        \
  }                                                                                                  \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, \
                          HostArray& out) {                                                          \
    rule_util::allocate(out, aval);                                                                  \
    map2(*in[0], *in[1], out, [](auto a, auto b) {                                                   \
      using T = decltype(a);                                                                         \
      if constexpr (is_complex_v<T> && !accepts_complex(Accepts::ACCEPTS)) {                         \
        return a; /* not reached: the rule refuses complex operands */                              \
      } else {                                                                                       \
        BODY                                                                                         \
      }                                                                                              \
    });                                                                                              \
  } \
  TESSEL_LOCAL_SAME_OP(OP)

TESSEL_BINARY(add, Numeric, {
  if constexpr (is_int_v<T>) return wrap_add(a, b);
  else return T(a + b);
})
TESSEL_BINARY(sub, Numeric, {
  if constexpr (is_int_v<T>) return wrap_sub(a, b);
  else return T(a - b);
})
TESSEL_BINARY(mul, Numeric, {
  if constexpr (is_int_v<T>) return wrap_mul(a, b);
  else return T(a * b);
})
TESSEL_BINARY(div, Numeric, {
  if constexpr (is_int_v<T>) return int_div(a, b);
  else return T(a / b);
})
TESSEL_BINARY(rem, Real, {
  if constexpr (is_int_v<T>) return int_rem(a, b);
  else return std::fmod(a, b);
})
TESSEL_BINARY(pow, Inexact, {
  if constexpr (is_complex_v<T>) {
    // exp(b log a); 0^b is 1 for b = 0, else 0 (codegen/complex.cpp computes the same)
    if (a == T(0)) return b == T(0) ? T(1) : T(0);
    return T(std::exp(b * std::log(a)));
  } else {
    return T(std::pow(a, b));
  }
})
TESSEL_BINARY(max, Ordered, { return nan_max(a, b); })
TESSEL_BINARY(min, Ordered, { return nan_min(a, b); })
TESSEL_BINARY(atan2, Float, { return std::atan2(a, b); })
TESSEL_BINARY(and_, IntOrBool, {
  if constexpr (std::is_same_v<T, bool>) return a && b;
  else if constexpr (std::is_integral_v<T>) return T(a & b);
  else return a;  // not reached: integers and bools only
})
TESSEL_BINARY(or_, IntOrBool, {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else if constexpr (std::is_integral_v<T>) return T(a | b);
  else return a;  // not reached: integers and bools only
})
TESSEL_BINARY(xor_, IntOrBool, {
  if constexpr (std::is_same_v<T, bool>) return a != b;
  else if constexpr (std::is_integral_v<T>) return T(a ^ b);
  else return a;  // not reached: integers and bools only
})
TESSEL_BINARY(shift_left, Integer, {
  if constexpr (is_int_v<T>) return shl(a, b);
  else return a;
})
TESSEL_BINARY(shift_right_logical, Integer, {
  if constexpr (is_int_v<T>) return shr_logical(a, b);
  else return a;
})
#undef TESSEL_BINARY

// ------------------------------------------------------------------ compare

#define TESSEL_COMPARE(OP, ACCEPTS, EXPR)                                                            \
  Aval Rule<Op::OP>::infer(const std::vector<Aval>& in, const A&, const Aval&) {               \
    return binary_infer(Op::OP, Accepts::ACCEPTS, in, true);                                         \
  }                                                                                                  \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, \
                          HostArray& out) {                                                          \
    rule_util::allocate(out, aval);                                                                  \
    map2(*in[0], *in[1], out, [](auto a, auto b) {                                                   \
      if constexpr (is_complex_v<decltype(a)> && !accepts_complex(Accepts::ACCEPTS)) return false;   \
      else return bool(EXPR);                                                                        \
    });                                                                                              \
  } \
  TESSEL_LOCAL_SAME_OP(OP)
TESSEL_COMPARE(eq, Any, a == b)
TESSEL_COMPARE(ne, Any, a != b)
TESSEL_COMPARE(lt, Ordered, a < b)
TESSEL_COMPARE(le, Ordered, a <= b)
TESSEL_COMPARE(gt, Ordered, a > b)
TESSEL_COMPARE(ge, Ordered, a >= b)
#undef TESSEL_COMPARE

// ------------------------------------------------------------------ select

Aval Rule<Op::select>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  expect_arity(Op::select, in, 3);
  if (in[0].dtype != DType::bool_)
    throw TypeError(cat("select requires a boolean predicate, got ", avals_str(in)));
  if (in[0].shape != in[1].shape || in[1].shape != in[2].shape || in[1].dtype != in[2].dtype)
    throw TypeError(cat("select requires a predicate and two cases of one shape, and cases of one dtype, got ",
                        avals_str(in)));
  Aval out = in[1];
  out.weak_type = in[1].weak_type && in[2].weak_type;
  return out;
}
void Rule<Op::select>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval,
                            HostArray& out) {
  rule_util::allocate(out, aval);
  const std::size_t es = dtype_size(aval.dtype);
  const std::int64_t n = numel(aval.shape);
  const bool* pred = reinterpret_cast<const bool*>(in[0]->bytes.data());
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(out.bytes.data() + i * es, (pred[i] ? in[1] : in[2])->bytes.data() + i * es, es);
}

// ------------------------------------------------------------------ threefry2x32

// The Threefry-2x32 block cipher (20 rounds), as JAX's threefry2x32_p:
// operands key0, key1, count0, count1 (uint32, one shape); dims = {word}
// picks output word 0 or 1 (two nodes share the rounds after CSE).
namespace {
inline std::uint32_t rotl(std::uint32_t v, int d) { return (v << d) | (v >> (32 - d)); }
}  // namespace

void threefry2x32_block(std::uint32_t k0, std::uint32_t k1, std::uint32_t& x0, std::uint32_t& x1) {
  const std::uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  x0 += ks[0];
  x1 += ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = rotl(x1, rot[i % 2][r]);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + std::uint32_t(i + 1);
  }
}

Aval Rule<Op::threefry2x32>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::threefry2x32, in, 4);
  for (auto& a : in)
    if (a.dtype != DType::uint32 || a.shape != in[0].shape)
      throw TypeError(cat("threefry2x32 takes four uint32 arrays of one shape, got ", avals_str(in)));
  if (p.word != 0 && p.word != 1) throw InternalError("threefry2x32 word must be 0 or 1");
  return Aval{DType::uint32, in[0].shape, false};
}
void Rule<Op::threefry2x32>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                  HostArray& out) {
  rule_util::allocate(out, aval);
  const std::int64_t n = numel(aval.shape);
  auto u = [&](int k, std::int64_t i) { return reinterpret_cast<const std::uint32_t*>(in[k]->bytes.data())[i]; };
  auto* y = reinterpret_cast<std::uint32_t*>(out.bytes.data());
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t x0 = u(2, i), x1 = u(3, i);
    threefry2x32_block(u(0, i), u(1, i), x0, x1);
    y[i] = p.word == 0 ? x0 : x1;
  }
}
FactorRule Rule<Op::threefry2x32>::factors(const Node& n) { return elementwise_factors(n); }

// ------------------------------------------------------------------ convert

Aval Rule<Op::convert>::infer(const std::vector<Aval>& in, const A&, const Aval& declared) {
  expect_arity(Op::convert, in, 1);
  return Aval{declared.dtype, in[0].shape, declared.weak_type};
}
void Rule<Op::convert>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval,
                             HostArray& out) {
  rule_util::allocate(out, aval);
  convert_elements(in[0]->dtype, in[0]->bytes.data(), aval.dtype, out.bytes.data(), numel(aval.shape));
}

Aval Rule<Op::bitcast_convert>::infer(const std::vector<Aval>& in, const A&, const Aval& declared) {
  expect_arity(Op::bitcast_convert, in, 1);
  if (dtype_size(in[0].dtype) != dtype_size(declared.dtype) || is_bool(in[0].dtype) || is_bool(declared.dtype) ||
      is_complex(in[0].dtype) || is_complex(declared.dtype))
    throw TypeError(cat("bitcast_convert needs dtypes of one width (not bool or complex), got ", avals_str(in), " to ",
                        dtype_name(declared.dtype)));
  return Aval{declared.dtype, in[0].shape, false};
}
void Rule<Op::bitcast_convert>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval,
                                     HostArray& out) {
  rule_util::allocate(out, aval);
  std::memcpy(out.bytes.data(), in[0]->bytes.data(), out.bytes.size());
}

// Elementwise: operand dim i and result dim i are one factor.
FactorRule Rule<Op::neg>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::sin>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::cos>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::tan>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::tanh>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::exp>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::expm1>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::log>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::log1p>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::sqrt>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::rsqrt>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::logistic>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::erf_inv>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::erf>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::abs>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::sign>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::floor>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::ceil>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::round>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::is_finite>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::not_>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::add>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::sub>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::mul>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::div>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::rem>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::pow>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::max>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::min>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::atan2>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::and_>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::or_>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::xor_>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::shift_left>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::shift_right_logical>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::eq>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::ne>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::lt>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::le>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::gt>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::ge>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::select>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::convert>::factors(const Node& n) { return elementwise_factors(n); }
FactorRule Rule<Op::bitcast_convert>::factors(const Node& n) { return elementwise_factors(n); }

}  // namespace tessel
