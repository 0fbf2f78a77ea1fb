// How NumPy (with ml_dtypes, as JAX uses it) prints the narrow floats.
//
// bfloat16 and the float8s: ml_dtypes' scalar types are not np.floating, so
// NumPy's array printer writes each element's repr, which ml_dtypes makes
// C's "%g" of the value as a float (NaN as "nan"): no padding, no common
// notation — Array([1.5, 2], dtype=bfloat16). float16 is NumPy's own: its
// FloatingFormat with float16's shortest round-trip digits (Dragon4
// "unique" on the float16), the fixed/scientific choice by float16's own
// ratio (numpy_format.cpp's float rules otherwise).
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "dsl/src/numpy_format.hpp"

namespace tessel::detail {

namespace {

using u128 = unsigned __int128;

u128 pow10(int n) {
  u128 r = 1;
  while (n-- > 0) r *= 10;
  return r;
}

// |value| of positive finite float16 bits in units of 2^-24 (exact).
std::uint64_t units(std::uint32_t b) {
  const std::uint32_t e = b >> 10, m = b & 0x3ff;
  return e == 0 ? m : std::uint64_t(m + 1024) << (e - 1);
}

}  // namespace

ShortestDecimal float16_shortest(std::uint16_t bits) {
  const std::uint32_t b = bits & 0x7fff;  // positive finite non-zero
  // Every candidate is D * 10^j with j >= -12; scaled by 10^12 all are integers.
  const int S = 12;
  const u128 V = units(b), below = units(b - 1), above = b == 0x7bff ? V + 32 : units(b + 1);
  const u128 val2 = 2 * V * pow10(S), lo2 = (below + V) * pow10(S), hi2 = (V + above) * pow10(S);
  const bool even = (b & 1) == 0;  // round-to-nearest-even: the bounds belong to an even mantissa
  int E = -8;
  while (V * pow10(S) >= (u128(1) << 24) * pow10(S + E + 1)) ++E;  // 10^E <= v < 10^(E+1)
  for (int p = 1;; ++p) {
    const int j = E - p + 1;
    const u128 unit = (u128(1) << 24) * pow10(S + j);
    const u128 d0 = V * pow10(S) / unit;  // the p-digit decimals around v: d0 and d0 + 1
    bool found = false;
    u128 best = 0, best_dist = 0;
    for (u128 d = d0; d <= d0 + 1; ++d) {
      const u128 c2 = 2 * d * unit;
      const bool in = even ? (lo2 <= c2 && c2 <= hi2) : (lo2 < c2 && c2 < hi2);
      if (!in) continue;
      const u128 dist = c2 > val2 ? c2 - val2 : val2 - c2;
      if (!found || dist < best_dist || (dist == best_dist && d % 2 == 0)) best = d, best_dist = dist, found = true;
    }
    if (found) {
      int jj = j;
      while (best % 10 == 0) best /= 10, ++jj;
      return {std::uint64_t(best), jj};
    }
  }
}

std::string ml_dtypes_text(float f) {
  if (std::isnan(f)) return "nan";
  char buf[48];
  auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::general, 6);  // printf("%g")
  return std::string(buf, r.ptr);
}

std::string float16_repr(float16_t h) {
  const float f = h;
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  const std::string sign = std::signbit(f) ? "-" : "";
  if (f == 0) return sign + "0.0";
  const ShortestDecimal d = float16_shortest(h.bits);
  const std::string digits = std::to_string(d.digits);
  const int n = int(digits.size()), exp10 = d.exponent + n - 1;
  const float a = std::fabs(f);
  if (a < 1e-4f || a >= 1e16f) {
    // NumPy's scalar repr: d.ddde-XX, no trailing point
    std::string m = digits.substr(0, 1) + (n > 1 ? "." + digits.substr(1) : "");
    char e[8];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return sign + m + e;
  }
  if (d.exponent >= 0) return sign + digits + std::string(std::size_t(d.exponent), '0') + ".0";
  const int frac = -d.exponent;
  std::string s = n > frac ? digits.substr(0, std::size_t(n - frac)) + "." + digits.substr(std::size_t(n - frac))
                           : "0." + std::string(std::size_t(frac - n), '0') + digits;
  return sign + s;
}

}  // namespace tessel::detail
