// Element conversion between dtypes with XLA's semantics (what JAX users
// see): float to integer truncates toward zero, saturates at the integer's
// range and maps NaN to 0; anything to bool is "!= 0". Complex to real keeps
// the real part (NumPy's and JAX's convert_element_type); real to complex has
// a zero imaginary part.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tessel/core/dtype.hpp"

namespace tessel {

template <class To, class From>
To convert_element(From v) {
  if constexpr (is_narrow_float_v<From>) {
    // Exact in float; from there as any float converts.
    return convert_element<To>(static_cast<float>(v));
  } else if constexpr (is_narrow_float_v<To>) {
    // Rounded once, to nearest even, from the exact value (never through
    // float: a double or a 64-bit integer would round twice).
    if constexpr (is_complex_v<From>) return To(v.real());
    else return To(v);
  } else if constexpr (is_complex_v<From>) {
    if constexpr (std::is_same_v<To, bool>) return v != From(0);
    else if constexpr (is_complex_v<To>) return To(typename To::value_type(v.real()), typename To::value_type(v.imag()));
    else return convert_element<To>(v.real());
  } else if constexpr (is_complex_v<To>) {
    return To(convert_element<typename To::value_type>(v), typename To::value_type(0));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To(0);
    if (v <= From(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return To(v);
  } else {
    return To(v);
  }
}

// Converts n elements of `from` at src to `to` at dst.
void convert_elements(DType from, const void* src, DType to, void* dst, std::int64_t n);

}  // namespace tessel
