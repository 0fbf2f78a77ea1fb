// float8_e8m0fnu and float4_e2m1fn, the MX formats' scale and element types
// (issue 36's scaled_dot_general configs, issue 38's dtypes): conversions as
// ml_dtypes converts (checked on a stride of every float32 bit pattern
// against formulas of their own here, and on the values ml_dtypes'
// tests list), every bit pattern out and back, printing, finfo, promotion,
// and compiled code equal to the reference interpreter bit for bit on 1..8
// devices, even and uneven splits.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::P;
using tessel::testing::host_of;
using tessel::testing::same_bits;

namespace {

// e8m0 from a double, by frexp: v = m 2^e, m in [0.5, 1); the power of two
// 2^(e-1) when m < 0.75, else 2^e.
std::uint8_t e8m0_reference(double v) {
  if (!(v > 0) || std::isinf(v)) return 0xFF;
  if (v <= std::ldexp(1.0, -127)) return 0x00;
  if (v < std::ldexp(1.0, -126)) return 0x01;
  int e = 0;
  const double m = std::frexp(v, &e);
  const int p = m < 0.75 ? e - 1 : e;
  return p > 127 ? 0xFF : std::uint8_t(p + 127);
}

// e2m1 from a double: the nearest of the 8 magnitudes (ties to the even
// code), saturating; NaN -> -0.
std::uint8_t e2m1_reference(double v) {
  if (std::isnan(v)) return 0x8;
  static const double mags[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double a = std::fabs(v);
  int best = a >= 6 ? 7 : 0;  // saturating (infinities too)
  for (int c = 1; c < 8 && a < 6; ++c) {
    const double d = std::fabs(a - mags[c]), db = std::fabs(a - mags[best]);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return std::uint8_t((std::signbit(v) ? 8 : 0) | best);
}

}  // namespace

TEST_CASE("mx dtypes: names, sizes, kinds") {
  CHECK(std::string(ts::dtype_name(ts::float8_e8m0fnu)) == "float8_e8m0fnu");
  CHECK(std::string(ts::dtype_name(ts::float4_e2m1fn)) == "float4_e2m1fn");
  CHECK(ts::dtype_from_name("float8_e8m0fnu") == ts::float8_e8m0fnu);
  CHECK(ts::dtype_from_name("float4_e2m1fn") == ts::float4_e2m1fn);
  CHECK(ts::dtype_size(ts::float8_e8m0fnu) == 1);
  CHECK(ts::dtype_size(ts::float4_e2m1fn) == 1);  // one value per byte, as NumPy with ml_dtypes stores it
  CHECK(ts::is_floating(ts::float8_e8m0fnu));
  CHECK(ts::is_floating(ts::float4_e2m1fn));
}

TEST_CASE("mx dtypes: the host types convert as ml_dtypes does") {
  // A stride through every float32 bit pattern (both signs, NaNs, infinities, subnormals).
  int n = 0;
  for (std::uint64_t u = 0; u <= 0xFFFF'FFFFull; u += 4099) {
    const float f = std::bit_cast<float>(std::uint32_t(u));
    REQUIRE(ts::float8_e8m0fnu_t(f).bits == e8m0_reference(f));
    REQUIRE(ts::float4_e2m1fn_t(f).bits == e2m1_reference(f));
    ++n;
  }
  CHECK(n > 1000000);
  // ml_dtypes' listed cases.
  CHECK(ts::float8_e8m0fnu_t(1.5).bits == 128);
  CHECK(ts::float8_e8m0fnu_t(1.4999).bits == 127);
  CHECK(ts::float8_e8m0fnu_t(0.1).bits == 124);  // 0.125
  CHECK(ts::float8_e8m0fnu_t(0.0).bits == 0xFF);
  CHECK(ts::float8_e8m0fnu_t(-2.0).bits == 0xFF);
  CHECK(ts::float8_e8m0fnu_t(1e-50).bits == 0x00);  // the double path: below 2^-127
  CHECK(ts::float8_e8m0fnu_t(1.01 * std::ldexp(1.0, -127)).bits == 0x01);
  CHECK(ts::float8_e8m0fnu_t(1.5 * std::ldexp(1.0, 127)).bits == 0xFF);
  CHECK(ts::float8_e8m0fnu_t(std::numeric_limits<float>::max()).bits == 0xFF);
  for (double v : {0.25, 0.2501, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 1e9, -0.1})
    CHECK(ts::float4_e2m1fn_t(v).bits == e2m1_reference(v));
  CHECK(ts::float4_e2m1fn_t(5.0).bits == 0x6);   // a tie: 4, the even code
  CHECK(ts::float4_e2m1fn_t(-INFINITY).bits == 0xF);  // saturates to -6
  CHECK(ts::float4_e2m1fn_t(-0.0).bits == 0x8);
  CHECK(ts::float4_e2m1fn_t(std::int64_t(7)).bits == 0x7);
  // Every bit pattern out and back in.
  for (int b = 0; b < 256; ++b) {
    const float f = ts::float8_e8m0fnu_t::from_bits(std::uint8_t(b));
    CHECK(ts::float8_e8m0fnu_t(f).bits == b);
    if (b != 0xFF) CHECK(f == std::ldexp(1.0f, b - 127));
  }
  for (int b = 0; b < 16; ++b) CHECK(ts::float4_e2m1fn_t(float(ts::float4_e2m1fn_t::from_bits(std::uint8_t(b)))).bits == b);
}

TEST_CASE("mx dtypes: finfo is ml_dtypes', printing its text, promotion JAX's") {
  const auto e8 = ts::finfo(ts::float8_e8m0fnu);
  CHECK(e8.bits == 8);
  CHECK(e8.eps == 1.0);
  CHECK(e8.max == std::ldexp(1.0, 127));
  CHECK(e8.min == std::ldexp(1.0, -127));
  CHECK(e8.nmant == 0);
  CHECK(e8.maxexp == 128);
  CHECK(e8.minexp == -127);
  CHECK(e8.resolution == 0.125);
  const auto e2 = ts::finfo(ts::float4_e2m1fn);
  CHECK(e2.bits == 4);
  CHECK(e2.eps == 0.5);
  CHECK(e2.max == 6.0);
  CHECK(e2.min == -6.0);
  CHECK(e2.tiny == 1.0);
  CHECK(e2.smallest_subnormal == 0.5);
  CHECK(e2.precision == 0);
  CHECK(e2.resolution == 1.0);
  // ml_dtypes' "%.6g" per element, unpadded; JAX's repr does not quote the name.
  auto x = ts::array(std::vector<double>{1, 2, 0.5, std::ldexp(1.0, -127), NAN, 0}).astype(ts::float8_e8m0fnu);
  CHECK(ts::array_str(x) == "[1 2 0.5 5.87747e-39 nan nan]");
  CHECK(x.str() == "Array([1, 2, 0.5, 5.87747e-39, nan, nan], dtype=float8_e8m0fnu)");
  auto y = ts::array(std::vector<double>{0, 0.5, 1.5, 3, -6, -0.0, 7}).astype(ts::float4_e2m1fn);
  CHECK(ts::array_str(y) == "[0 0.5 1.5 3 -6 -0 6]");
  // Only with themselves, integers and C++ scalars; the small float wins.
  CHECK((y + 1).dtype() == ts::float4_e2m1fn);
  CHECK((y * 2.0).dtype() == ts::float4_e2m1fn);
  CHECK((x * ts::array(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6})).dtype() == ts::float8_e8m0fnu);
  CHECK_THROWS_WITH_AS(x + ts::ones({6}), doctest::Contains("8-bit floats do not support implicit promotion"),
                       ts::TypeError);
  CHECK_THROWS_WITH_AS(y + ts::ones({7}).astype(ts::bfloat16),
                       doctest::Contains("4-bit floats do not support implicit promotion"), ts::TypeError);
  CHECK_THROWS_AS(x + ts::ones({6}).astype(ts::float8_e4m3fn), ts::TypeError);
  // No zero, so no sums: a TypeError naming the dtype, not a NaN.
  CHECK_THROWS_WITH_AS(ts::sum(x), doctest::Contains("float8_e8m0fnu has no zero"), ts::TypeError);
  CHECK_THROWS_AS(ts::cumsum(x, 0), ts::TypeError);
  CHECK_THROWS_AS(ts::matmul(x, x), ts::TypeError);
  CHECK(float(ts::sum(y).item<ts::float4_e2m1fn_t>()) == 4.0f);  // 5 (0 + 0.5 + 1.5 + 3 - 6 - 0 + 6), a tie: 4
}

TEST_CASE("mx dtypes: compiled code equals the reference interpreter bit for bit on 1..8 devices") {
  std::mt19937 rng(36);
  std::uniform_real_distribution<double> u(-8, 8);
  const int max_devices = std::min(8, ts::device_count());
  for (ts::DType t : {ts::float8_e8m0fnu, ts::float4_e2m1fn}) {
    for (std::int64_t rows : {8, 7}) {
      std::vector<double> a(std::size_t(rows * 3)), b(a.size());
      for (auto& v : a) v = u(rng);
      for (auto& v : b) v = std::ldexp(u(rng), int(u(rng)));
      a[0] = NAN, a[1] = INFINITY, a[2] = 0, b[3] = 1e-40, b[4] = -1e30;
      const ts::Array xf = ts::array(a, {rows, 3}).astype(ts::float32), yf = ts::array(b, {rows, 3}).astype(ts::float32);
      for (int k = 1; k <= max_devices; ++k) {
        CAPTURE(ts::dtype_name(t));
        CAPTURE(rows);
        CAPTURE(k);
        const auto all = ts::devices();
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
        const ts::NamedSharding s(mesh, P("x"));
        auto fn = [t](const std::vector<ts::Array>& in) {
          const ts::Array x = in[0].astype(t), y = in[1].astype(t);
          std::vector<ts::Array> out = {x, x + y, x * y, x - y, -x, ts::abs(x), ts::maximum(x, y), x < y,
                                        ts::where(x < y, x, y), ts::max(x, 0), ts::min(x, 1), ts::argmax(y, 0),
                                        ts::sort(x, 0), ts::transpose(y), ts::concatenate({x, y}, 0),
                                        x.astype(ts::float32), (x * y + x) * y, x[ts::slice(1, 5)], x / y,
                                        ts::sqrt(ts::abs(y)), ts::minimum(x, y)};
          return out;
        };
        const std::vector<ts::Array> args = {ts::device_put(xf, s), ts::device_put(yf, s)};
        const auto want = ts::testing::interpret_fn(fn, args);
        const auto got = ts::jit(fn)(args);
        REQUIRE(got.size() == want.size());
        for (size_t o = 0; o < got.size(); ++o) {
          CAPTURE(o);
          CHECK(same_bits(host_of(got[o]), want[o]) == "");
        }
        // astype under jit is the host conversion.
        const auto xs = host_of(got[0]);
        for (std::int64_t i = 0; i < rows * 3; ++i) {
          const std::uint8_t want_bits = t == ts::float8_e8m0fnu ? e8m0_reference(float(a[i])) : e2m1_reference(float(a[i]));
          CHECK(xs.bytes[std::size_t(i)] == want_bits);
        }
      }
    }
  }
}
