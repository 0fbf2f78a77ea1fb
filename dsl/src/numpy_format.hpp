// numpy's array2string, as JAX's Array.__repr__ uses it: nested brackets,
// line wrapping at `linewidth`, summarisation past `threshold` elements, and
// numpy's float, int and bool element formats (floatmode 'maxprec', 8 digits).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessel/core/dtype.hpp"
#include "tessel/core/shape.hpp"

namespace tessel::detail {

// numpy's FloatingFormat settings (np.set_printoptions' float options).
struct FloatStyle {
  int precision = 8;                 // fractional digits at most (floatmode "unique": unlimited)
  std::string floatmode = "maxprec";  // "fixed", "unique", "maxprec", "maxprec_equal"
  bool suppress = false;             // no scientific notation for small values
  char sign = '-';                   // '-', '+' or ' '
  std::string nanstr = "nan", infstr = "inf";
};

struct Array2StringOptions {
  FloatStyle floats;
  std::string separator = " ";
  std::string prefix;  // text before the first '[' (sets the hanging indent)
  std::string suffix;  // text after the last ']' (shortens the line width)
  int linewidth = 75;
  int edgeitems = 3;
  std::int64_t threshold = 1000;
};

// The options in force (ts::set_printoptions): threshold, edgeitems,
// linewidth and the float style; separator, prefix and suffix as defaults.
Array2StringOptions current_array2string_options();

// Row-major flat indices of the elements numpy shows (all of them, or the
// edge items of every axis when the array has more than `threshold` elements).
std::vector<std::int64_t> shown_elements(const Shape& shape, const Array2StringOptions& opt);

// Lays out already formatted words (one per shown element, in the order of
// shown_elements) as numpy's _formatArray does.
std::string layout_array(const Shape& shape, const std::vector<std::string>& words, const Array2StringOptions& opt);

// numpy's element formats, fitted to the given values (all shown values).
std::vector<std::string> format_floats(const std::vector<double>& values, bool single_precision,
                                       const FloatStyle& style = {});
std::vector<std::string> format_complex(const std::vector<std::complex<double>>& values, bool single_precision,
                                        const FloatStyle& style = {});
std::vector<std::string> format_ints(const std::vector<std::int64_t>& values);
std::vector<std::string> format_uints(const std::vector<std::uint64_t>& values);
std::vector<std::string> format_bools(const std::vector<bool>& values, bool scalar);

// The narrow floats (dsl/src/narrow_format.cpp). A positive finite
// float16's shortest round-trip decimal: digits * 10^exponent, no trailing
// zeros in digits (Dragon4 "unique" on float16, ties to the even digit).
struct ShortestDecimal {
  std::uint64_t digits;
  int exponent;
};
ShortestDecimal float16_shortest(std::uint16_t bits);
// ml_dtypes' repr of a bfloat16 or float8 value: "%g" of it as a float, NaN "nan".
std::string ml_dtypes_text(float value);
// NumPy's repr of a float16 scalar ("0.1", "65500.0", "6e-08").
std::string float16_repr(float16_t value);
// NumPy's FloatingFormat for float16 values (each exactly a float16).
std::vector<std::string> format_float16(const std::vector<double>& values, const FloatStyle& style = {});

// NumPy's str() of typed row-major values: np.array2string's words joined by
// spaces, a 0-d array as its scalar (dsl/src/debug_print.cpp).
std::string numpy_str(DType dtype, const Shape& shape, const void* data);

// The formatted, shown elements of typed row-major data.
std::vector<std::string> format_elements(DType dtype, const void* data, const Shape& shape,
                                         const std::vector<std::int64_t>& shown, const FloatStyle& style = {});

// JAX's Array repr: "Array([[0., 1.],\n       [2., 3.]], dtype=float32)".
std::string array_repr(DType dtype, bool weak_type, const Shape& shape, const void* data);

}  // namespace tessel::detail
