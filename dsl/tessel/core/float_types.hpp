// Host scalar types for the floats narrower than float32, bit for bit as
// ml_dtypes (and so JAX) defines them: bfloat16, IEEE float16, float8_e4m3fn
// and float8_e5m2. They are storage types: a value converts implicitly to
// float (exactly), and all comparison and arithmetic happen there, with
// float's IEEE semantics (NaN != NaN, -0 == +0). Converting in is explicit and
// rounds once, to nearest even, from the exact value given.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace tessel {

namespace detail {

// A format with E exponent bits, M stored mantissa bits and the usual bias
// 2^(E-1) - 1. Ieee: the all-ones exponent holds inf (mantissa 0) and NaNs.
// Otherwise ("fn": finite and NaN) the all-ones exponent holds finite values,
// except the all-ones mantissa, the only NaN; there is no infinity.
template <int E, int M, bool Ieee>
struct float_format {
  static constexpr int bias = (1 << (E - 1)) - 1;
  static constexpr std::uint32_t sign_bit = 1u << (E + M);
  static constexpr std::uint32_t mant_mask = (1u << M) - 1;
  static constexpr std::uint32_t exp_ones = (1u << E) - 1;
  static constexpr std::uint32_t inf = exp_ones << M;  // Ieee only
  static constexpr std::uint32_t qnan = Ieee ? inf | (1u << (M - 1)) : inf | mant_mask;
  static constexpr std::uint32_t max_finite = Ieee ? inf - 1 : qnan - 1;
  // What a value beyond max_finite becomes (ml_dtypes' non-saturating rule).
  static constexpr std::uint32_t overflow = Ieee ? inf : qnan;
};

// Rounds x to nearest, ties to even, in the format and returns its bits. All
// integer arithmetic on x's own bits: exact, constexpr, and independent of
// the floating-point rounding mode. A NaN stays a NaN of the same sign, made
// quiet, with the top bits of its payload kept (Ieee formats).
template <int E, int M, bool Ieee>
constexpr std::uint32_t round_from_double(double x) noexcept {
  using F = float_format<E, M, Ieee>;
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const std::uint32_t sign = b >> 63 ? F::sign_bit : 0;
  const std::uint64_t mag = b & 0x7FFF'FFFF'FFFF'FFFFull;
  if (mag >= 0x7FF0'0000'0000'0000ull) {  // inf or NaN
    if (!Ieee) return sign | F::qnan;       // no inf: NaN either way
    if (mag == 0x7FF0'0000'0000'0000ull) return sign | F::inf;
    return sign | F::qnan | std::uint32_t((mag >> (52 - M)) & F::mant_mask);
  }
  // x = sig * 2^(e - 52), sig < 2^53 (double subnormals: e = -1022, no
  // implicit bit; far below every format's subnormals, they round to 0).
  int e = int(mag >> 52);
  std::uint64_t sig = mag & 0x000F'FFFF'FFFF'FFFFull;
  if (e == 0) e = 1;
  else sig |= 1ull << 52;
  e -= 1023;
  if (e > F::bias + 1) return sign | F::overflow;  // >= 2^(bias+2): beyond any finite
  // The result's quantum is 2^(q - M) with q = max(e, emin); below emin the
  // quantum stays the subnormal one. Drop `shift` bits of sig, rounding.
  constexpr int emin = 1 - F::bias;
  const int q = e < emin ? emin : e;
  const int shift = 52 - M + (q - e);  // >= 52 - M
  std::uint64_t r = 0;
  if (shift < 63) {  // else sig < 2^53 <= quantum / 2^10: rounds to 0
    const std::uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
    r = sig >> shift;
    if (rem > half || (rem == half && (r & 1))) ++r;
  }
  // r is the significand in quanta: [2^M, 2^(M+1)] for a normal q, [0, 2^M]
  // for a subnormal one. Adding it onto (biased q - 1) << M puts the implicit
  // bit into the exponent field, so a round-up to 2^(M+1) carries into the
  // next binade, and a subnormal rounding up to 2^M becomes the min normal.
  const std::uint64_t enc = (std::uint64_t(q + F::bias - 1) << M) + r;
  return sign | (enc > F::max_finite ? F::overflow : std::uint32_t(enc));
}

// Rounds f likewise. float -> double is exact, so the generic routine is
// exact too; bfloat16 (float's upper half) uses the classic bit trick: add
// half the 16 dropped bits (less one, plus the kept lsb: ties to even) and
// truncate; a carry rolls into the exponent, and max + half an ulp into inf.
template <int E, int M, bool Ieee>
constexpr std::uint32_t round_from_float(float f) noexcept {
  if constexpr (E == 8 && M == 7 && Ieee) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7FFF'FFFFu) > 0x7F80'0000u) return (u >> 16) | 0x40u;  // NaN: quiet
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  } else {
    return round_from_double<E, M, Ieee>(double(f));
  }
}

// The value of bits as a float: exact, since every one of these formats is a
// subset of float. A NaN keeps its sign and payload (no quieting).
template <int E, int M, bool Ieee>
constexpr float to_float(std::uint32_t bits) noexcept {
  using F = float_format<E, M, Ieee>;
  if constexpr (E == 8 && M == 7 && Ieee) return std::bit_cast<float>(bits << 16);
  const std::uint32_t sign = bits & F::sign_bit ? 0x8000'0000u : 0u;
  const std::uint32_t ef = (bits >> M) & F::exp_ones, mf = bits & F::mant_mask;
  if (ef == F::exp_ones && (Ieee || mf == F::mant_mask))  // inf or NaN
    return std::bit_cast<float>(sign | 0x7F80'0000u | (Ieee ? mf << (23 - M) : 0x40'0000u));
  if (ef == 0) {  // zero or subnormal: mf * 2^-M * 2^(1 - bias), each step exact
    const float v = float(mf) / float(1u << M) * std::bit_cast<float>(std::uint32_t(128 - F::bias) << 23);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((ef - F::bias + 127) << 23) | (mf << (23 - M)));
}

// An integer as a double that rounds to the same narrow float as the integer
// itself does. Exact up to 2^53; beyond, the bits dropped are OR-ed into the
// lowest bit kept (round to odd at 53 bits), which keeps every tie and
// near-tie of a later rounding to <= 51 bits on the right side, where
// double(v) would round twice (2^60 + 2^52 + 1 would become a bfloat16 tie).
template <class I>
constexpr double integer_to_double(I v) noexcept {
  static_assert(sizeof(I) <= 8, "integers wider than 64 bits are not supported");
  if constexpr (std::is_same_v<I, bool>) {
    return v ? 1.0 : 0.0;
  } else {
    bool neg = false;
    if constexpr (std::is_signed_v<I>) neg = v < 0;
    std::uint64_t m = std::uint64_t(v);
    if (neg) m = 0 - m;  // |v|, INT64_MIN included
    const int k = int(std::bit_width(m)) - 53;
    double scale = 1.0;
    if (k > 0) {
      m = (m >> k) | ((m & ((1ull << k) - 1)) != 0);
      scale = double(1ull << k);
    }
    const double d = double(m) * scale;  // exact: m < 2^53, scale = 2^k
    return neg ? -d : d;
  }
}

}  // namespace detail

// One storage type: trivial, standard-layout, sizeof(Storage) bytes, the bit
// pattern its only data member. T{} is +0 (value-initialized bits).
//   T(float), T(double): rounded to nearest even from the exact value (a
//     double is never rounded to float first); NaN -> a quiet NaN of the same
//     sign; beyond max finite -> +/-inf, or NaN where there is no inf.
//   T(integer): as the integer's exact value (detail::integer_to_double).
//   operator float: exact, implicit; double(x), std::isnan(x), x < y and
//     x + y all go through it.
#define TESSEL_NARROW_FLOAT(T, Storage, E, M, Ieee)                                        \
  struct T {                                                                               \
    Storage bits;                                                                          \
                                                                                           \
    T() = default;                                                                         \
    explicit constexpr T(float f) noexcept                                                 \
        : bits(Storage(detail::round_from_float<E, M, Ieee>(f))) {}                        \
    explicit constexpr T(double d) noexcept                                                \
        : bits(Storage(detail::round_from_double<E, M, Ieee>(d))) {}                       \
    template <class I>                                                                     \
      requires std::is_integral_v<I>                                                       \
    explicit constexpr T(I v) noexcept : T(detail::integer_to_double(v)) {}                \
    static constexpr T from_bits(Storage b) noexcept {                                     \
      T t{};                                                                               \
      t.bits = b;                                                                          \
      return t;                                                                            \
    }                                                                                      \
    constexpr operator float() const noexcept { return detail::to_float<E, M, Ieee>(bits); } \
  };

// bfloat16: 1-8-7, float's upper half (same exponent range), inf and NaN.
TESSEL_NARROW_FLOAT(bfloat16_t, std::uint16_t, 8, 7, true)
// float16: IEEE 754 binary16, 1-5-10.
TESSEL_NARROW_FLOAT(float16_t, std::uint16_t, 5, 10, true)
// float8_e4m3fn: 1-4-3, no infinities, NaN only S.1111.111, max 448.
TESSEL_NARROW_FLOAT(float8_e4m3fn_t, std::uint8_t, 4, 3, false)
// float8_e5m2: 1-5-2, IEEE-like (binary16's upper byte), max 57344.
TESSEL_NARROW_FLOAT(float8_e5m2_t, std::uint8_t, 5, 2, true)
#undef TESSEL_NARROW_FLOAT

namespace detail {

// float8_e8m0fnu (the MX formats' scale): 8 exponent bits, bias 127, no
// sign, no mantissa, no zero, no infinity; 0xFF is the NaN. From a double,
// as ml_dtypes converts: NaN, +-inf, +-0 and negatives -> NaN; up to 2^-127
// -> 0x00 (2^-127, the least value); between 2^-127 and 2^-126 -> 2^-126;
// else the nearest power of two, a mantissa of 1.5 or more rounding up
// (ties up), and beyond 2^127 -> NaN.
constexpr std::uint32_t e8m0_from_double(double x) noexcept {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  if (b >> 63 || !(x > 0) || x > 1.7976931348623157e308) return 0xFF;  // negative, zero, NaN, inf
  if (x <= 0x1p-127) return 0x00;
  if (x < 0x1p-126) return 0x01;
  const int e = int((b >> 52) & 0x7FF) - 1023;
  const std::uint64_t mant = b & 0x000F'FFFF'FFFF'FFFFull;
  const int r = e + 127 + (mant >= (1ull << 51) ? 1 : 0);
  return r > 0xFE ? 0xFF : std::uint32_t(r);
}
constexpr float e8m0_to_float(std::uint32_t bits) noexcept {
  if (bits == 0xFF) return std::bit_cast<float>(0x7FC0'0000u);
  if (bits == 0) return std::bit_cast<float>(0x0040'0000u);  // 2^-127, a float subnormal
  return std::bit_cast<float>(bits << 23);
}

// float4_e2m1fn: 1-2-1, bias 1, the values 0 0.5 1 1.5 2 3 4 6 and their
// negatives, no infinity, no NaN; one per byte, in the low four bits. From a
// double: nearest, ties to the even code; beyond 6 (and +-inf) saturates to
// +-6; a NaN becomes -0 (XLA's convert; ml_dtypes' host constructor gives
// +0 for a negative NaN).
inline constexpr double kE2M1Values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
constexpr std::uint32_t e2m1_from_double(double x) noexcept {
  if (x != x) return 0x8;
  const std::uint32_t sign = std::bit_cast<std::uint64_t>(x) >> 63 ? 0x8 : 0;
  const double a = x < 0 ? -x : x;
  std::uint32_t c = 7;
  for (std::uint32_t k = 0; k < 7; ++k) {
    if (a < kE2M1Values[k + 1]) {
      const double mid = (kE2M1Values[k] + kE2M1Values[k + 1]) / 2;
      c = a > mid || (a == mid && (k & 1)) ? k + 1 : k;
      break;
    }
  }
  return sign | c;
}
constexpr float e2m1_to_float(std::uint32_t bits) noexcept {
  const float v = float(kE2M1Values[bits & 7]);
  return bits >= 8 ? -v : v;
}

}  // namespace detail

// The two MX-format types: same interface as the macro's types (explicit in
// from float, double and integers, exact out to float).
#define TESSEL_TABLE_FLOAT(T, FROM, TO)                                                         \
  struct T {                                                                                    \
    std::uint8_t bits;                                                                          \
                                                                                                \
    T() = default;                                                                              \
    explicit constexpr T(float f) noexcept : bits(std::uint8_t(detail::FROM(double(f)))) {}    \
    explicit constexpr T(double d) noexcept : bits(std::uint8_t(detail::FROM(d))) {}           \
    template <class I>                                                                          \
      requires std::is_integral_v<I>                                                            \
    explicit constexpr T(I v) noexcept : T(detail::integer_to_double(v)) {}                     \
    static constexpr T from_bits(std::uint8_t b) noexcept {                                     \
      T t{};                                                                                    \
      t.bits = b;                                                                               \
      return t;                                                                                 \
    }                                                                                           \
    constexpr operator float() const noexcept { return detail::TO(bits); }                      \
  };
// float8_e8m0fnu: T{} (bits 0) is 2^-127, the format having no zero.
TESSEL_TABLE_FLOAT(float8_e8m0fnu_t, e8m0_from_double, e8m0_to_float)
TESSEL_TABLE_FLOAT(float4_e2m1fn_t, e2m1_from_double, e2m1_to_float)
#undef TESSEL_TABLE_FLOAT

template <class T>
inline constexpr bool is_narrow_float_v =
    std::is_same_v<std::remove_cv_t<T>, bfloat16_t> || std::is_same_v<std::remove_cv_t<T>, float16_t> ||
    std::is_same_v<std::remove_cv_t<T>, float8_e4m3fn_t> || std::is_same_v<std::remove_cv_t<T>, float8_e5m2_t> ||
    std::is_same_v<std::remove_cv_t<T>, float8_e8m0fnu_t> || std::is_same_v<std::remove_cv_t<T>, float4_e2m1fn_t>;

namespace detail {

// std::numeric_limits members common to the four types, from the format.
// C's exponent convention (as for float): min_exponent - 1 and max_exponent - 1
// are the least and greatest normal exponents. The fn format's all-ones
// exponent is finite, so its max_exponent is one more than an Ieee one's.
template <class T, int E, int M, bool Ieee, int MinExp10, int MaxExp10>
struct narrow_float_limits {
  using F = float_format<E, M, Ieee>;
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = Ieee;
  static constexpr bool has_quiet_NaN = true;
  // NaNs are made quiet on the way in, so none is kept signaling.
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = M + 1;
  static constexpr int digits10 = M * 30103 / 100000;                           // floor(M log10 2)
  static constexpr int max_digits10 = 1 + ((M + 1) * 30103 + 99999) / 100000;  // 1 + ceil(digits log10 2)
  static constexpr int radix = 2;
  static constexpr int min_exponent = 2 - F::bias;
  static constexpr int max_exponent = F::bias + (Ieee ? 1 : 2);
  static constexpr int min_exponent10 = MinExp10;
  static constexpr int max_exponent10 = MaxExp10;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  static constexpr T min() noexcept { return bits(1u << M); }
  static constexpr T lowest() noexcept { return bits(F::sign_bit | F::max_finite); }
  static constexpr T max() noexcept { return bits(F::max_finite); }
  static constexpr T epsilon() noexcept { return bits(std::uint32_t(F::bias - M) << M); }  // 2^-M
  static constexpr T round_error() noexcept { return bits(std::uint32_t(F::bias - 1) << M); }  // 0.5
  // Without an infinity (fn), infinity() is the NaN, as in ml_dtypes.
  static constexpr T infinity() noexcept { return bits(F::overflow); }
  static constexpr T quiet_NaN() noexcept { return bits(F::qnan); }
  // The IEEE signaling encoding (quiet bit clear), the only NaN for fn.
  static constexpr T signaling_NaN() noexcept { return bits(Ieee ? F::inf | (1u << (M - 2)) : F::qnan); }
  static constexpr T denorm_min() noexcept { return bits(1u); }

 private:
  static constexpr T bits(std::uint32_t b) noexcept { return T::from_bits(static_cast<decltype(T::bits)>(b)); }
};

}  // namespace detail
}  // namespace tessel

// Specializing numeric_limits for a program-defined type is allowed.
namespace std {
template <>
struct numeric_limits<tessel::bfloat16_t>
    : tessel::detail::narrow_float_limits<tessel::bfloat16_t, 8, 7, true, -37, 38> {};
template <>
struct numeric_limits<tessel::float16_t>
    : tessel::detail::narrow_float_limits<tessel::float16_t, 5, 10, true, -4, 4> {
  static constexpr bool is_iec559 = true;  // binary16 itself
};
template <>
struct numeric_limits<tessel::float8_e4m3fn_t>
    : tessel::detail::narrow_float_limits<tessel::float8_e4m3fn_t, 4, 3, false, -1, 2> {};
template <>
struct numeric_limits<tessel::float8_e5m2_t>
    : tessel::detail::narrow_float_limits<tessel::float8_e5m2_t, 5, 2, true, -4, 4> {};

// The MX formats, as ml_dtypes specialises them.
template <>
struct numeric_limits<tessel::float8_e8m0fnu_t> {
  using T = tessel::float8_e8m0fnu_t;
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = false;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm = std::denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 1;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 2;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -126;
  static constexpr int max_exponent = 128;
  static constexpr int min_exponent10 = -38;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr T min() noexcept { return T::from_bits(0x00); }  // 2^-127
  static constexpr T lowest() noexcept { return T::from_bits(0x00); }
  static constexpr T max() noexcept { return T::from_bits(0xFE); }  // 2^127
  static constexpr T epsilon() noexcept { return T::from_bits(0x7F); }  // 1
  static constexpr T round_error() noexcept { return T::from_bits(0x7E); }  // 0.5
  static constexpr T infinity() noexcept { return T::from_bits(0xFF); }  // none: the NaN
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0xFF); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0xFF); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x00); }
};
template <>
struct numeric_limits<tessel::float4_e2m1fn_t> {
  using T = tessel::float4_e2m1fn_t;
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm = std::denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 2;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 2;
  static constexpr int radix = 2;
  static constexpr int min_exponent = 1;
  static constexpr int max_exponent = 3;
  static constexpr int min_exponent10 = 0;
  static constexpr int max_exponent10 = 0;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr T min() noexcept { return T::from_bits(0x2); }     // 1, the least normal
  static constexpr T lowest() noexcept { return T::from_bits(0xF); }  // -6
  static constexpr T max() noexcept { return T::from_bits(0x7); }     // 6
  static constexpr T epsilon() noexcept { return T::from_bits(0x1); }  // 0.5
  static constexpr T round_error() noexcept { return T::from_bits(0x1); }
  // No infinity and no NaN: ml_dtypes' stand-ins (max, and -0).
  static constexpr T infinity() noexcept { return T::from_bits(0x7); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x8); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x8); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x1); }  // 0.5
};
}  // namespace std
