#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "tessel/core/float_types.hpp"

using namespace tessel;

namespace {

// The layout of each format, written out here independently of the header.
struct Format {
  int E, M;
  bool ieee;  // all-ones exponent = inf/NaN; else (fn) only S.1..1.1..1 is NaN
  int bias() const { return (1 << (E - 1)) - 1; }
  std::uint32_t sign_bit() const { return 1u << (E + M); }
  std::uint32_t count() const { return 2u << (E + M); }
  // The largest finite positive pattern.
  std::uint32_t max_finite() const { return ieee ? (((1u << E) - 1) << M) - 1 : (1u << (E + M)) - 2; }
  std::uint32_t overflow() const { return ieee ? ((1u << E) - 1) << M : (1u << (E + M)) - 1; }
};

template <class T>
Format format_of() {
  if constexpr (std::is_same_v<T, bfloat16_t>) return {8, 7, true};
  else if constexpr (std::is_same_v<T, float16_t>) return {5, 10, true};
  else if constexpr (std::is_same_v<T, float8_e4m3fn_t>) return {4, 3, false};
  else return {5, 2, true};
}

// Closed-form decode: (-1)^s * 2^(e - bias) * (1 + m / 2^M), or
// (-1)^s * 2^(1 - bias) * (m / 2^M) for e == 0.
double ref_decode(const Format& f, std::uint32_t bits) {
  const bool neg = bits & f.sign_bit();
  const int e = int((bits >> f.M) & ((1u << f.E) - 1));
  const int m = int(bits & ((1u << f.M) - 1));
  const int e_ones = (1 << f.E) - 1, m_ones = (1 << f.M) - 1;
  double v;
  if (f.ieee && e == e_ones) v = m ? std::numeric_limits<double>::quiet_NaN() : HUGE_VAL;
  else if (!f.ieee && e == e_ones && m == m_ones) v = std::numeric_limits<double>::quiet_NaN();
  else if (e == 0) v = std::ldexp(double(m) / (1 << f.M), 1 - f.bias());
  else v = std::ldexp(1.0 + double(m) / (1 << f.M), e - f.bias());
  return neg ? -v : v;
}

// Reference rounding by search in the table of positive finite values, with
// one "virtual" value past max (max + its ulp, the encoding max_finite + 1):
// below the midpoint of two neighbours -> the lower, above -> the upper, at
// it -> the even encoding; landing on max_finite + 1 means overflow. In long
// double: x86's holds every int64 exactly.
struct RefTable {
  Format f;
  std::vector<long double> val;
  explicit RefTable(Format fmt) : f(fmt), val(fmt.max_finite() + 2) {
    const std::uint32_t top = f.max_finite() + 1;
    for (std::uint32_t k = 0; k < top; ++k) val[k] = ref_decode(f, k);
    val[top] = val[top - 1] + (val[top - 1] - val[top - 2]);
  }
};

std::uint32_t ref_round(const RefTable& t, long double x) {
  const Format& f = t.f;
  const auto& val = t.val;
  const std::uint32_t sign = std::signbit(x) ? f.sign_bit() : 0;
  const long double mag = std::fabs(x);
  const std::uint32_t top = f.max_finite() + 1;
  std::uint32_t k;
  if (mag >= val[top]) {
    k = top;
  } else {
    k = std::uint32_t(std::upper_bound(val.begin(), val.end(), mag) - val.begin()) - 1;
    if (val[k] != mag) {
      const long double mid = (val[k] + val[k + 1]) / 2;  // exact: <= 12 significant bits
      if (mag > mid || (mag == mid && (k & 1))) ++k;
    }
  }
  return sign | (k == top ? f.overflow() : k);
}

template <class T>
std::uint32_t bits_of(T t) {
  return t.bits;
}

double next_down(double x) { return std::nextafter(x, -HUGE_VAL); }
double next_up(double x) { return std::nextafter(x, HUGE_VAL); }

// Every pattern: decodes as the closed form, and encodes back to itself from
// float and from double (a NaN stays a NaN of its sign; a quiet one keeps
// its bits exactly).
template <class T>
void check_all_patterns() {
  const Format f = format_of<T>();
  for (std::uint32_t b = 0; b < f.count(); ++b) {
    const T x = T::from_bits(static_cast<decltype(T::bits)>(b));
    const float v = x;
    const double ref = ref_decode(f, b);
    if (std::isnan(ref)) {
      REQUIRE(std::isnan(v));
      CHECK(std::signbit(v) == bool(b & f.sign_bit()));
      const T y(v), z{double(v)};
      CHECK(std::isnan(float(y)));
      CHECK(std::isnan(float(z)));
      CHECK((bits_of(y) & f.sign_bit()) == (b & f.sign_bit()));
      const bool quiet = !f.ieee || (b & (1u << (f.M - 1)));
      if (quiet) {
        CHECK(bits_of(y) == b);
        CHECK(bits_of(z) == b);
      }
    } else {
      CHECK(double(v) == ref);
      CHECK(std::signbit(v) == std::signbit(ref));
      CHECK(bits_of(T(v)) == b);
      CHECK(bits_of(T(double(v))) == b);
      CHECK(bits_of(T(ref)) == b);
    }
  }
}

// Every pair of neighbours a < b (and the pair max < max + ulp): the exact
// midpoint goes to the even encoding, one double (or float) either side to
// the nearer value; both signs.
template <class T>
void check_midpoints() {
  const Format f = format_of<T>();
  for (std::uint32_t k = 0; k <= f.max_finite(); ++k) {
    const double a = ref_decode(f, k);
    const double b = k == f.max_finite() ? a + (a - ref_decode(f, k - 1)) : ref_decode(f, k + 1);
    const std::uint32_t lo = k, hi = k == f.max_finite() ? f.overflow() : k + 1;
    const double mid = (a + b) / 2;
    const std::uint32_t even = (k & 1) ? hi : lo;
    for (double s : {1.0, -1.0}) {
      const std::uint32_t sb = s < 0 ? f.sign_bit() : 0;
      CHECK(bits_of(T(s * mid)) == (even | sb));
      CHECK(bits_of(T(s * next_down(mid))) == (lo | sb));
      CHECK(bits_of(T(s * next_up(mid))) == (hi | sb));
      const float fm = float(mid);
      if (double(fm) == mid) {
        CHECK(bits_of(T(float(s) * fm)) == (even | sb));
        CHECK(bits_of(T(float(s) * std::nextafter(fm, 0.0f))) == (lo | sb));
        CHECK(bits_of(T(float(s) * std::nextafter(fm, HUGE_VALF))) == (hi | sb));
      }
    }
  }
}

// Random doubles over the whole range (and a little past both ends) against
// the table search; the float path on the same values rounded to float is
// checked against the table too.
template <class T>
void check_random(std::uint64_t seed, int n) {
  const Format f = format_of<T>();
  const RefTable table(f);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> exp_dist(1 - f.bias() - f.M - 3, f.bias() + 3);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t r = rng();
    double d = std::ldexp(1.0 + double(r >> 12) * 0x1p-52, exp_dist(rng));
    if (r & 1) d = -d;
    CHECK(bits_of(T(d)) == ref_round(table, d));
    const float fl = float(d);
    CHECK(bits_of(T(fl)) == ref_round(table, fl));
  }
}

}  // namespace

TEST_CASE("float_types: layout, traits and constexpr use") {
  static_assert(sizeof(bfloat16_t) == 2 && sizeof(float16_t) == 2);
  static_assert(sizeof(float8_e4m3fn_t) == 1 && sizeof(float8_e5m2_t) == 1);
  static_assert(std::is_trivial_v<bfloat16_t> && std::is_trivial_v<float16_t>);
  static_assert(std::is_trivial_v<float8_e4m3fn_t> && std::is_trivial_v<float8_e5m2_t>);
  static_assert(std::is_standard_layout_v<bfloat16_t> && std::is_standard_layout_v<float8_e5m2_t>);
  static_assert(std::is_same_v<decltype(bfloat16_t::bits), std::uint16_t>);
  static_assert(std::is_same_v<decltype(float8_e4m3fn_t::bits), std::uint8_t>);
  static_assert(is_narrow_float_v<bfloat16_t> && is_narrow_float_v<float16_t>);
  static_assert(is_narrow_float_v<float8_e4m3fn_t> && is_narrow_float_v<const float8_e5m2_t>);
  static_assert(!is_narrow_float_v<float> && !is_narrow_float_v<double> && !is_narrow_float_v<std::uint16_t>);
  // Explicit in, implicit out.
  static_assert(!std::is_convertible_v<float, bfloat16_t> && !std::is_convertible_v<int, float16_t>);
  static_assert(std::is_convertible_v<float8_e5m2_t, float> && std::is_convertible_v<bfloat16_t, double>);
  static_assert(std::is_constructible_v<float16_t, long long> && std::is_constructible_v<float16_t, bool>);
  // Everything is constexpr.
  static_assert(bfloat16_t(1.0f).bits == 0x3F80 && float(bfloat16_t::from_bits(0x4049)) == 3.140625f);
  static_assert(float16_t(65504.0).bits == 0x7BFF && float(float16_t::from_bits(1)) == 0x1p-24f);
  static_assert(float8_e4m3fn_t(448).bits == 0x7E && float8_e5m2_t(-2.0).bits == 0xC0);
  static_assert(float(std::numeric_limits<float8_e4m3fn_t>::max()) == 448.0f);

  CHECK(bfloat16_t{}.bits == 0);
  CHECK(float(float8_e5m2_t{}) == 0.0f);
  // Comparison and arithmetic through float.
  const bfloat16_t one(1.0f), two(2), nan(std::nan(""));
  CHECK(one < two);
  CHECK(one == 1);
  CHECK(two == 2.0);
  CHECK(one + two == 3.0f);
  static_assert(std::is_same_v<decltype(one + two), float>);
  CHECK(nan != nan);
  CHECK(std::isnan(nan));
  CHECK(float16_t(-0.0) == float16_t(0.0));
  CHECK(static_cast<double>(two) == 2.0);
  CHECK(double(float8_e4m3fn_t(0.5f)) == 0.5);
  CHECK(float16_t(bfloat16_t(3.0f)).bits == 0x4200);  // through float
  CHECK(static_cast<int>(float8_e5m2_t(9.0)) == 8);   // ties to the even mantissa
  CHECK(static_cast<int>(float8_e5m2_t(11.0)) == 12);
}

TEST_CASE("float_types: every pattern decodes as the closed form and round-trips") {
  check_all_patterns<bfloat16_t>();
  check_all_patterns<float16_t>();
  check_all_patterns<float8_e4m3fn_t>();
  check_all_patterns<float8_e5m2_t>();
}

#if defined(__FLT16_MAX__)
TEST_CASE("float_types: float16 agrees with the compiler's _Float16") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float mine = float16_t::from_bits(std::uint16_t(b));
    const float theirs = std::bit_cast<_Float16>(std::uint16_t(b));
    if (std::isnan(theirs)) CHECK(std::isnan(mine));
    else CHECK(std::bit_cast<std::uint32_t>(mine) == std::bit_cast<std::uint32_t>(theirs));
  }
  std::mt19937_64 rng(16);
  std::uniform_int_distribution<int> exp_dist(-30, 17);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t r = rng();
    double d = std::ldexp(1.0 + double(r >> 12) * 0x1p-52, exp_dist(rng));
    if (r & 1) d = -d;
    CHECK(float16_t(d).bits == std::bit_cast<std::uint16_t>(static_cast<_Float16>(d)));
    CHECK(float16_t(float(d)).bits == std::bit_cast<std::uint16_t>(static_cast<_Float16>(float(d))));
  }
}
#endif

TEST_CASE("float_types: midpoints round to even, neighbours to the nearer value") {
  check_midpoints<bfloat16_t>();
  check_midpoints<float16_t>();
  check_midpoints<float8_e4m3fn_t>();
  check_midpoints<float8_e5m2_t>();
}

TEST_CASE("float_types: random doubles and floats round as the table search says") {
  check_random<bfloat16_t>(1, 20000);
  check_random<float16_t>(2, 20000);
  check_random<float8_e4m3fn_t>(3, 20000);
  check_random<float8_e5m2_t>(4, 20000);
}

TEST_CASE("float_types: overflow, NaN, infinities and signed zeros") {
  const float inf = HUGE_VALF, qnan = std::numeric_limits<float>::quiet_NaN();
  // bfloat16: max 0x7F7F (odd mantissa), so max + half an ulp is inf.
  const double bf_mid = 0x1.FEp127 + 0x1p119;
  CHECK(bfloat16_t(3.4e38f).bits == 0x7F80);
  CHECK(bfloat16_t(std::numeric_limits<float>::max()).bits == 0x7F80);
  CHECK(bfloat16_t(bf_mid).bits == 0x7F80);
  CHECK(bfloat16_t(float(bf_mid)).bits == 0x7F80);
  CHECK(bfloat16_t(next_down(bf_mid)).bits == 0x7F7F);
  CHECK(bfloat16_t(std::nextafter(float(bf_mid), 0.0f)).bits == 0x7F7F);
  CHECK(bfloat16_t(-1e300).bits == 0xFF80);
  CHECK(bfloat16_t(inf).bits == 0x7F80);
  CHECK(bfloat16_t(-qnan).bits == 0xFFC0);
  CHECK(bfloat16_t(qnan).bits == 0x7FC0);
  // A NaN whose payload lies only in the dropped bits stays a NaN (quiet),
  // not inf; a quiet one keeps its upper payload bits.
  CHECK(bfloat16_t(std::bit_cast<float>(0x7F80'0001u)).bits == 0x7FC0);
  CHECK(bfloat16_t(std::bit_cast<float>(0xFF80'FFFFu)).bits == 0xFFC0);
  CHECK(bfloat16_t(std::bit_cast<float>(0x7FFF'FFFFu)).bits == 0x7FFF);
  CHECK(bfloat16_t(std::bit_cast<double>(0x7FF0'0000'0000'0001ull)).bits == 0x7FC0);
  CHECK(float16_t(std::bit_cast<double>(0xFFF0'0000'0000'0001ull)).bits == 0xFE00);
  CHECK(float8_e5m2_t(std::bit_cast<double>(0x7FF0'0000'0000'0001ull)).bits == 0x7E);
  // float16
  CHECK(float16_t(65520.0).bits == 0x7C00);
  CHECK(float16_t(65519.99).bits == 0x7BFF);
  CHECK(float16_t(-65520.0f).bits == 0xFC00);
  CHECK(float16_t(1e6).bits == 0x7C00);
  CHECK(float16_t(std::nan("")).bits == 0x7E00);
  CHECK(float16_t(-std::nan("")).bits == 0xFE00);
  // float8_e4m3fn: max 448 has an even mantissa (110), so 464 ties down;
  // anything that would round past it, and inf, become NaN (no saturation).
  CHECK(float8_e4m3fn_t(464.0).bits == 0x7E);
  CHECK(float8_e4m3fn_t(464.0f).bits == 0x7E);
  CHECK(float8_e4m3fn_t(-464.0).bits == 0xFE);
  CHECK(float8_e4m3fn_t(464.0001).bits == 0x7F);
  CHECK(float8_e4m3fn_t(480.0).bits == 0x7F);
  CHECK(float8_e4m3fn_t(1e9).bits == 0x7F);
  CHECK(float8_e4m3fn_t(-1e9f).bits == 0xFF);
  CHECK(float8_e4m3fn_t(inf).bits == 0x7F);
  CHECK(float8_e4m3fn_t(-HUGE_VAL).bits == 0xFF);
  CHECK(float8_e4m3fn_t(qnan).bits == 0x7F);
  CHECK(float8_e4m3fn_t(-qnan).bits == 0xFF);
  CHECK(float8_e4m3fn_t(256.0).bits == 0x78);  // exponent field 1111 is finite
  CHECK(float(float8_e4m3fn_t::from_bits(0x78)) == 256.0f);
  // float8_e5m2: max 57344 (mantissa 11, odd): 61440 ties up to inf.
  CHECK(float8_e5m2_t(61440.0).bits == 0x7C);
  CHECK(float8_e5m2_t(61439.0).bits == 0x7B);
  CHECK(float8_e5m2_t(60000.0f).bits == 0x7B);
  CHECK(float8_e5m2_t(-1e9).bits == 0xFC);
  CHECK(float8_e5m2_t(qnan).bits == 0x7E);
  CHECK(float8_e5m2_t(-inf).bits == 0xFC);
  // Signed zeros, including values too small for any subnormal.
  CHECK(bfloat16_t(-0.0f).bits == 0x8000);
  CHECK(float16_t(-0.0).bits == 0x8000);
  CHECK(float8_e4m3fn_t(-0.0).bits == 0x80);
  CHECK(float8_e5m2_t(-1e-300).bits == 0x80);
  CHECK(float16_t(std::numeric_limits<double>::denorm_min()).bits == 0);
  CHECK(bfloat16_t(-std::numeric_limits<float>::denorm_min()).bits == 0x8000);
  CHECK(std::signbit(float(bfloat16_t(-1e-300))));
  // Subnormal quanta: half the smallest subnormal ties to 0, a hair more to it.
  CHECK(float8_e4m3fn_t(0x1p-10).bits == 0x00);
  CHECK(float8_e4m3fn_t(0x1.000001p-10).bits == 0x01);
  CHECK(float8_e4m3fn_t(0x3p-10).bits == 0x02);  // 1.5 quanta -> 2 (even)
  CHECK(float8_e5m2_t(0x1p-17).bits == 0x00);
  CHECK(float16_t(0x1.8p-24).bits == 0x0002);
  CHECK(bfloat16_t(0x1p-134).bits == 0x0000);
  CHECK(bfloat16_t(0x1.8p-133).bits == 0x0002);
  CHECK(bfloat16_t(0x1.8p-133f).bits == 0x0002);
  // The largest subnormal rounds up into the smallest normal.
  CHECK(float8_e4m3fn_t(0x1.fp-7).bits == 0x08);
}

TEST_CASE("float_types: a double is rounded once, never through float") {
  // 1 + 2^-8 is the bfloat16 midpoint of 1 and 1 + 2^-7; 2^-30 more is lost
  // in float (which then ties down to 1) but not in double (which goes up).
  const double d = 1.0 + 0x1p-8 + 0x1p-30;
  REQUIRE(double(float(d)) == 1.0 + 0x1p-8);
  CHECK(bfloat16_t(float(d)).bits == 0x3F80);
  CHECK(bfloat16_t(d).bits == 0x3F81);
  CHECK(bfloat16_t(-d).bits == 0xBF81);
  // Just below the midpoint of 0x3F81 and 0x3F82: float lands on the tie
  // and goes up to the even 0x3F82, double stays down.
  const double u = 1.0 + 0x3p-8 - 0x1p-30;
  REQUIRE(double(float(u)) == 1.0 + 0x3p-8);
  CHECK(bfloat16_t(float(u)).bits == 0x3F82);
  CHECK(bfloat16_t(u).bits == 0x3F81);
  // float16 and the float8 formats likewise.
  const double h = 1.0 + 0x1p-11 + 0x1p-40;
  REQUIRE(double(float(h)) == 1.0 + 0x1p-11);
  CHECK(float16_t(float(h)).bits == 0x3C00);
  CHECK(float16_t(h).bits == 0x3C01);
  CHECK(float8_e4m3fn_t(1.0 + 0x1p-4 + 0x1p-40).bits == 0x39);
  CHECK(float8_e5m2_t(1.0 + 0x1p-3 + 0x1p-40).bits == 0x3D);
}

TEST_CASE("float_types: integers convert exactly, rounding once") {
  // bfloat16 has 8 significant bits: 255 (0b1111'1111) is exact, 511 (nine
  // ones) is not and rounds up to 512.
  CHECK(bfloat16_t(std::uint8_t(255)).bits == 0x437F);
  CHECK(float(bfloat16_t(std::uint8_t(255))) == 255.0f);
  CHECK(float(bfloat16_t(std::uint16_t(511))) == 512.0f);
  CHECK(float(bfloat16_t(std::int16_t(-511))) == -512.0f);
  CHECK(float(bfloat16_t(257)) == 256.0f);  // tie -> even mantissa
  CHECK(float(bfloat16_t(259)) == 260.0f);  // tie -> even mantissa
  CHECK(float(bfloat16_t(-259)) == -260.0f);
  CHECK(float(float16_t(2049)) == 2048.0f);
  CHECK(float(float16_t(2051)) == 2052.0f);
  CHECK(float16_t(65519).bits == 0x7BFF);
  CHECK(float16_t(65520).bits == 0x7C00);
  CHECK(float16_t(-70000L).bits == 0xFC00);
  CHECK(float8_e4m3fn_t(std::int8_t(-128)).bits == 0xF0);
  CHECK(float8_e4m3fn_t(1000).bits == 0x7F);
  CHECK(float8_e5m2_t(100000u).bits == 0x7C);
  CHECK(float8_e5m2_t(true).bits == 0x3C);
  CHECK(float16_t(false).bits == 0x0000);
  CHECK(float16_t(char16_t(1024)).bits == 0x6400);
  // Beyond 2^53 a plain double(v) would round first: 2^60 + 2^52 + 1 sits
  // just above a bfloat16 tie (2^60 + 2^52 exactly), which double(v) hits.
  const std::int64_t p60 = std::int64_t(1) << 60;
  REQUIRE(double(p60 + (std::int64_t(1) << 52) + 1) == double(p60 + (std::int64_t(1) << 52)));
  CHECK(double(bfloat16_t(p60 + 1)) == 0x1p60);
  CHECK(double(bfloat16_t(p60 + (std::int64_t(1) << 52))) == 0x1p60);  // tie, even
  CHECK(double(bfloat16_t(p60 + (std::int64_t(1) << 52) + 1)) == 0x1p60 + 0x1p53);
  CHECK(double(bfloat16_t(-(p60 + (std::int64_t(1) << 52) + 1))) == -(0x1p60 + 0x1p53));
  CHECK(double(bfloat16_t(p60 + 3 * (std::int64_t(1) << 52))) == 0x1p60 + 0x1p54);  // tie, even
  CHECK(double(bfloat16_t(p60 + 3 * (std::int64_t(1) << 52) - 1)) == 0x1p60 + 0x1p53);
  CHECK(double(bfloat16_t(std::numeric_limits<std::uint64_t>::max())) == 0x1p64);
  CHECK(double(bfloat16_t(std::numeric_limits<std::int64_t>::min())) == -0x1p63);
  CHECK(double(bfloat16_t(std::numeric_limits<std::int64_t>::max())) == 0x1p63);
  CHECK(float16_t(std::numeric_limits<std::uint64_t>::max()).bits == 0x7C00);
  CHECK(float8_e4m3fn_t(std::numeric_limits<std::int64_t>::min()).bits == 0xFF);
  // Random 64-bit integers, with ties and near-ties built in, against the
  // table search in long double (exact for 64-bit integers on x86-64).
  if constexpr (std::numeric_limits<long double>::digits >= 64) {
    std::mt19937_64 rng(64);
    const RefTable bf(format_of<bfloat16_t>()), f16(format_of<float16_t>());
    for (int i = 0; i < 20000; ++i) {
      const int width = 1 + int(rng() % 64);
      std::uint64_t u = rng() >> (64 - width);
      u |= std::uint64_t(1) << (width - 1);
      if (width > 9 && (i & 1)) {  // a tie at bfloat16's 8 bits, +/- 0 or 1
        const int drop = width - 8;
        u = (u & ~((std::uint64_t(1) << drop) - 1)) | (std::uint64_t(1) << (drop - 1));
        u += std::uint64_t(int(rng() % 3) - 1);
      }
      CHECK(bfloat16_t(u).bits == ref_round(bf, (long double)u));
      const std::int64_t s = std::int64_t(u >> 1) * ((i & 2) ? -1 : 1);
      CHECK(bfloat16_t(s).bits == ref_round(bf, (long double)s));
      CHECK(float16_t(s).bits == ref_round(f16, (long double)s));
    }
  }
}

TEST_CASE("float_types: numeric_limits as ml_dtypes' finfo gives them") {
  using L16 = std::numeric_limits<float16_t>;
  using LB = std::numeric_limits<bfloat16_t>;
  using L43 = std::numeric_limits<float8_e4m3fn_t>;
  using L52 = std::numeric_limits<float8_e5m2_t>;
  static_assert(LB::is_specialized && L16::is_specialized && L43::is_specialized && L52::is_specialized);
  static_assert(LB::is_signed && !LB::is_integer && !LB::is_exact && L43::is_signed && !L43::is_integer);
  static_assert(LB::has_infinity && L16::has_infinity && !L43::has_infinity && L52::has_infinity);
  static_assert(LB::has_quiet_NaN && L43::has_quiet_NaN && !LB::has_signaling_NaN && !L43::has_signaling_NaN);
  static_assert(LB::has_denorm == std::denorm_present && L43::has_denorm == std::denorm_present);
  static_assert(L52::round_style == std::round_to_nearest && LB::radix == 2 && L43::radix == 2);
  static_assert(L16::is_iec559 && !LB::is_iec559 && !L43::is_iec559 && !L52::is_iec559);
  static_assert(LB::digits == 8 && L16::digits == 11 && L43::digits == 4 && L52::digits == 3);
  static_assert(LB::digits10 == 2 && L16::digits10 == 3 && L43::digits10 == 0 && L52::digits10 == 0);
  static_assert(LB::max_digits10 == 4 && L16::max_digits10 == 5 && L43::max_digits10 == 3 && L52::max_digits10 == 2);
  // As for float: min_exponent - 1 is tiny's exponent, max_exponent - 1 max's.
  static_assert(std::numeric_limits<float>::min_exponent == -125 && LB::min_exponent == -125);
  static_assert(LB::max_exponent == 128 && L16::min_exponent == -13 && L16::max_exponent == 16);
  static_assert(L43::min_exponent == -5 && L43::max_exponent == 9 && L52::min_exponent == -13 && L52::max_exponent == 16);
  static_assert(LB::min_exponent10 == -37 && LB::max_exponent10 == 38 && L16::min_exponent10 == -4 && L16::max_exponent10 == 4);
  static_assert(L43::min_exponent10 == -1 && L43::max_exponent10 == 2 && L52::min_exponent10 == -4 && L52::max_exponent10 == 4);

  CHECK(float(LB::max()) == 0x1.FEp127f);
  CHECK(float(LB::max()) == 3.38953139e38f);
  CHECK(float(LB::lowest()) == -0x1.FEp127f);
  CHECK(float(LB::epsilon()) == 0x1p-7f);
  CHECK(float(LB::min()) == 0x1p-126f);
  CHECK(float(LB::denorm_min()) == 0x1p-133f);
  CHECK(float(L16::max()) == 65504.0f);
  CHECK(float(L16::lowest()) == -65504.0f);
  CHECK(float(L16::epsilon()) == 0x1p-10f);
  CHECK(float(L16::min()) == 0x1p-14f);
  CHECK(float(L16::denorm_min()) == 0x1p-24f);
  CHECK(float(L43::max()) == 448.0f);
  CHECK(float(L43::lowest()) == -448.0f);
  CHECK(float(L43::epsilon()) == 0.125f);
  CHECK(float(L43::min()) == 0x1p-6f);
  CHECK(float(L43::denorm_min()) == 0x1p-9f);
  CHECK(float(L52::max()) == 57344.0f);
  CHECK(float(L52::lowest()) == -57344.0f);
  CHECK(float(L52::epsilon()) == 0.25f);
  CHECK(float(L52::min()) == 0x1p-14f);
  CHECK(float(L52::denorm_min()) == 0x1p-16f);
  CHECK(float(LB::round_error()) == 0.5f);
  CHECK(float(L16::round_error()) == 0.5f);
  CHECK(float(L43::round_error()) == 0.5f);
  CHECK(float(L52::round_error()) == 0.5f);
  // epsilon is the gap after 1.
  CHECK(float(bfloat16_t::from_bits(0x3F81)) - 1.0f == float(LB::epsilon()));
  CHECK(float(float8_e4m3fn_t::from_bits(0x39)) - 1.0f == float(L43::epsilon()));
  CHECK(std::isinf(float(LB::infinity())));
  CHECK(std::isinf(float(L16::infinity())));
  CHECK(std::isinf(float(L52::infinity())));
  CHECK(L52::infinity().bits == 0x7C);
  CHECK(std::isnan(float(L43::infinity())));  // no infinity: NaN, as ml_dtypes
  CHECK(LB::quiet_NaN().bits == 0x7FC0);
  CHECK(L16::quiet_NaN().bits == 0x7E00);
  CHECK(L43::quiet_NaN().bits == 0x7F);
  CHECK(L52::quiet_NaN().bits == 0x7E);
  CHECK(L43::signaling_NaN().bits == 0x7F);
  CHECK(std::isnan(float(LB::signaling_NaN())));
  CHECK(std::isnan(float(L16::signaling_NaN())));
  CHECK(std::isnan(float(L52::signaling_NaN())));
  // Limits are fixed points of the conversion.
  CHECK(bfloat16_t(float(LB::max())).bits == LB::max().bits);
  CHECK(float8_e4m3fn_t(double(L43::denorm_min())).bits == 0x01);
}
