// Arrays from host values (API.md "Arrays"). Results are uncommitted and
// live on the default device (device 0).
//
// Dtype rules follow JAX without x64 for C++ scalars, which act as Python
// scalars: a `double` is a weakly typed float32 and an `int` a weakly typed
// int32. Typed data keeps its type: std::vector<double> is float64.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <tessel/array.hpp>

namespace tessel {

namespace detail {
// Host data of `dtype` (row-major, numel(shape) elements) to an uncommitted array.
Array from_host(DType dtype, const Shape& shape, const void* data, bool weak_type = false);

// The dtype a C++ scalar gets (JAX's rules for Python scalars).
struct ScalarType {
  DType dtype;
  bool weak;
};
template <class T>
constexpr ScalarType scalar_type() {
  static_assert(std::is_arithmetic_v<T> || is_complex_v<T> || is_narrow_float_v<T>,
                "expected an arithmetic, narrow float or std::complex scalar");
  if constexpr (std::is_same_v<T, std::complex<float>>) return {DType::complex64, false};
  else if constexpr (is_complex_v<T>) return {DType::complex64, true};  // a weak complex, as Python's complex
  else if constexpr (is_narrow_float_v<T>) return {dtype_of_v<T>, false};
  else if constexpr (std::is_same_v<T, bool>) return {DType::bool_, false};
  else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, long double>) return {DType::float32, true};
  else if constexpr (std::is_same_v<T, float>) return {DType::float32, false};
  else if constexpr (std::is_same_v<T, int>) return {DType::int32, true};
  // Other integers keep their width and signedness (NumPy's scalar types).
  else if constexpr (std::is_signed_v<T>)
    return {sizeof(T) == 1 ? DType::int8 : sizeof(T) == 2 ? DType::int16 : sizeof(T) == 4 ? DType::int32 : DType::int64, false};
  else
    return {sizeof(T) == 1 ? DType::uint8 : sizeof(T) == 2 ? DType::uint16 : sizeof(T) == 4 ? DType::uint32 : DType::uint64, false};
}
// A host scalar as `dtype` (weak or not).
Array scalar_array(double value, DType dtype, bool weak);
Array scalar_array_i64(std::int64_t value, DType dtype, bool weak);
Array scalar_array_c(std::complex<double> value, DType dtype, bool weak);
Array full_weak(const Shape& shape, double value, DType dtype, bool weak);
template <class T>
Array scalar_of(T v, DType dtype, bool weak) {
  if constexpr (is_complex_v<T>) return scalar_array_c(std::complex<double>(v), dtype, weak);
  else if constexpr (std::is_floating_point_v<T>) return scalar_array(double(v), dtype, weak);
  else if constexpr (is_narrow_float_v<T>) return scalar_array(double(static_cast<float>(v)), dtype, weak);  // exact
  else return scalar_array_i64(std::int64_t(v), dtype, weak);
}
}  // namespace detail

// C++ types that are tessel scalars: arithmetic types, tessel's narrow
// floats (ts::bfloat16_t, ...) and std::complex<float/double>.
template <class T>
inline constexpr bool is_host_scalar_v = std::is_arithmetic_v<T> || is_narrow_float_v<T> ||
                                         std::is_same_v<T, std::complex<float>> ||
                                         std::is_same_v<T, std::complex<double>>;

namespace detail {
template <class T>
struct host_storage {
  // An integer: the fixed-width type of its size and signedness.
  using type = std::conditional_t<
      std::is_signed_v<T>,
      std::conditional_t<sizeof(T) == 1, std::int8_t,
                         std::conditional_t<sizeof(T) == 2, std::int16_t,
                                            std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>>>,
      std::conditional_t<sizeof(T) == 1, std::uint8_t,
                         std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                            std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>>;
};
template <class T>
  requires(std::is_same_v<T, bool> || std::is_floating_point_v<T> || is_complex_v<T> || is_narrow_float_v<T>)
struct host_storage<T> {
  using type = std::conditional_t<std::is_same_v<T, long double>, double, T>;
};
}  // namespace detail

// The tessel storage type of a C++ element type: its own (long double:
// double; an integer: the fixed-width one of its size and signedness).
template <class T>
using host_storage_t = typename detail::host_storage<T>::type;

// Values (row-major) with a shape; the dtype is T's (float -> float32, double -> float64, ...).
template <class T>
Array array(const std::vector<T>& values, const Shape& shape) {
  static_assert(is_host_scalar_v<T>,
                "ts::array: values must be arithmetic, a narrow float (ts::bfloat16_t, ...) or std::complex<float/double>");
  using S = host_storage_t<T>;
  if (std::int64_t(values.size()) != numel(shape))
    throw ShapeError("ts::array: " + std::to_string(values.size()) + " values cannot fill shape " + shape_str(shape));
  if constexpr (std::is_same_v<S, T> && !std::is_same_v<T, bool>) {
    return detail::from_host(dtype_of_v<S>, shape, values.data());
  } else {
    std::unique_ptr<S[]> conv(new S[values.size() + 1]);
    for (size_t i = 0; i < values.size(); ++i) conv[i] = S(values[i]);
    return detail::from_host(dtype_of_v<S>, shape, conv.get());
  }
}

// A 1-D array of the values.
template <class T>
Array array(const std::vector<T>& values) {
  return array(values, Shape{std::int64_t(values.size())});
}
template <class T>
Array array(std::initializer_list<T> values) {
  return array(std::vector<T>(values));
}
template <class T>
Array array(std::initializer_list<T> values, const Shape& shape) {
  return array(std::vector<T>(values), shape);
}

// A 0-d array from a C++ scalar (a double is a weakly typed float32, as in
// JAX; a std::complex<double> a weakly typed complex64).
template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>
Array array(T scalar) {
  auto st = detail::scalar_type<T>();
  return detail::scalar_of(scalar, st.dtype, st.weak);
}

Array zeros(const Shape& shape, DType dtype = DType::float32);
Array ones(const Shape& shape, DType dtype = DType::float32);
// Every element `value`, as `dtype`.
Array full(const Shape& shape, double value, DType dtype);
// Every element `value`; the dtype (and weak type) is the scalar's.
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
Array full(const Shape& shape, T value) {
  auto st = detail::scalar_type<T>();
  return detail::full_weak(shape, double(value), st.dtype, st.weak);
}

// [start, stop) in steps; integer arguments give int32, floating ones float32.
Array arange(double start, double stop, double step, DType dtype);
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
Array arange(T stop, std::optional<DType> dtype = std::nullopt) {
  return arange(0.0, double(stop), 1.0, dtype.value_or(std::is_floating_point_v<T> ? DType::float32 : DType::int32));
}
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
Array arange(T start, T stop, T step = T(1), std::optional<DType> dtype = std::nullopt) {
  return arange(double(start), double(stop), double(step),
                dtype.value_or(std::is_floating_point_v<T> ? DType::float32 : DType::int32));
}
// arange(0, 64, 1, ts::float32): integers with a dtype (exact, so not ambiguous
// between the two overloads above).
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, double>>>
Array arange(T start, T stop, T step, DType dtype) {
  return arange(double(start), double(stop), double(step), dtype);
}

// n x m (default n x n) with ones on diagonal k.
Array eye(std::int64_t n, std::optional<std::int64_t> m = std::nullopt, std::int64_t k = 0,
          DType dtype = DType::float32);
// `num` evenly spaced values over [start, stop] (or [start, stop) without endpoint).
Array linspace(double start, double stop, std::int64_t num = 50, bool endpoint = true,
               DType dtype = DType::float32);

// Same shape, dtype (unless given) and weak type as x.
Array zeros_like(const Array& x, std::optional<DType> dtype = std::nullopt);
Array ones_like(const Array& x, std::optional<DType> dtype = std::nullopt);
Array full_like(const Array& x, double value, std::optional<DType> dtype = std::nullopt);

}  // namespace tessel
