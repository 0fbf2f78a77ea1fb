#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tracer/convert.hpp"
#include "tessel/core/dtype.hpp"
#include "tessel/core/errors.hpp"

using namespace tessel;

TEST_CASE("dtype traits derive from the one list") {
  CHECK(kNumDTypes == 19);
  CHECK(dtype_size(complex64) == 8);
  CHECK(dtype_size(complex128) == 16);
  CHECK(is_complex(complex64));
  CHECK(is_inexact(complex128));
  CHECK_FALSE(is_floating(complex64));
  CHECK(real_dtype(complex128) == float64);
  CHECK(complex_dtype(float32) == complex64);
  CHECK(dtype_of_v<std::complex<float>> == complex64);
  CHECK(std::string(dtype_name(float32)) == "float32");
  CHECK(std::string(dtype_name(bool_)) == "bool");
  CHECK(dtype_size(float64) == 8);
  CHECK(dtype_size(bool_) == 1);
  CHECK(dtype_size(uint32) == 4);
  CHECK(is_floating(float32));
  CHECK(is_signed_int(int64));
  CHECK(is_unsigned_int(uint32));
  CHECK_FALSE(is_integral(bool_));
  CHECK(dtype_from_name("int32") == int32);
  CHECK_THROWS_AS(dtype_from_name("float8_e4m3"), TypeError);
  CHECK(dtype_from_name("float16") == float16);
  CHECK(dtype_of_v<double> == float64);
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = DType(i);
    CHECK(dtype_from_name(dtype_name(t)) == t);
  }
}

TEST_CASE("conversion follows XLA: truncation, saturation, NaN to zero, != 0 to bool") {
  CHECK(convert_element<std::int32_t>(2.9f) == 2);
  CHECK(convert_element<std::int32_t>(-2.9f) == -2);
  CHECK(convert_element<std::int32_t>(std::nanf("")) == 0);
  CHECK(convert_element<std::int32_t>(1e20f) == std::numeric_limits<std::int32_t>::max());
  CHECK(convert_element<std::int32_t>(-1e20) == std::numeric_limits<std::int32_t>::min());
  CHECK(convert_element<std::uint32_t>(-5.0f) == 0u);
  CHECK(convert_element<bool>(0.25f));
  CHECK_FALSE(convert_element<bool>(0));
  // complex: the real part to reals, a zero imaginary part from reals, != 0 to bool
  CHECK(convert_element<float>(std::complex<double>(2.5, 9)) == 2.5f);
  CHECK(convert_element<std::int32_t>(std::complex<float>(-2.9f, 1)) == -2);
  CHECK(convert_element<std::complex<float>>(1.5) == std::complex<float>(1.5f, 0));
  CHECK(convert_element<bool>(std::complex<float>(0, 1)));
  CHECK_FALSE(convert_element<bool>(std::complex<float>(0, 0)));
  CHECK(convert_element<float>(true) == 1.0f);
  float src[3] = {1.5f, -7.25f, 3e9f};
  std::int64_t dst[3];
  convert_elements(float32, src, int64, dst, 3);
  CHECK(dst[0] == 1);
  CHECK(dst[1] == -7);
  CHECK(dst[2] == 3000000000LL);
}
