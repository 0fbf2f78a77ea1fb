// Element types. One X-macro is the single list; the enum, names, sizes and
// traits all derive from it, so adding a dtype is one line here plus kernels.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "tessel/core/float_types.hpp"

namespace tessel {

// X(enumerator, numpy name, C++ storage type, kind) — kind: b bool, i signed,
// u unsigned, f floating, c complex (interleaved real and imaginary parts,
// as NumPy and std::complex store them). The 16- and 8-bit floats (ml_dtypes'
// formats, as JAX names them) are stored in tessel's own scalar types
// (tessel/core/float_types.hpp) and computed in float32, rounded to nearest
// even at each op's result (docs/dtypes.md).
#define TESSEL_DTYPES(X)                  \
  X(bool_, "bool", bool, 'b')             \
  X(int32, "int32", std::int32_t, 'i')    \
  X(int64, "int64", std::int64_t, 'i')    \
  X(uint32, "uint32", std::uint32_t, 'u') \
  X(float32, "float32", float, 'f')       \
  X(float64, "float64", double, 'f')      \
  X(complex64, "complex64", std::complex<float>, 'c') \
  X(complex128, "complex128", std::complex<double>, 'c') \
  X(bfloat16, "bfloat16", bfloat16_t, 'f')  \
  X(float16, "float16", float16_t, 'f')     \
  X(int8, "int8", std::int8_t, 'i')         \
  X(uint8, "uint8", std::uint8_t, 'u')      \
  X(int16, "int16", std::int16_t, 'i')      \
  X(uint16, "uint16", std::uint16_t, 'u')   \
  X(uint64, "uint64", std::uint64_t, 'u')   \
  X(float8_e4m3fn, "float8_e4m3fn", float8_e4m3fn_t, 'f') \
  X(float8_e5m2, "float8_e5m2", float8_e5m2_t, 'f') \
  X(float8_e8m0fnu, "float8_e8m0fnu", float8_e8m0fnu_t, 'f') \
  X(float4_e2m1fn, "float4_e2m1fn", float4_e2m1fn_t, 'f')

enum class DType : std::uint8_t {
#define TESSEL_X(e, name, type, kind) e,
  TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
};

inline constexpr int kNumDTypes = 0
#define TESSEL_X(e, name, type, kind) +1
    TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
    ;

// The names users write: ts::float32, ts::int32, ...
#define TESSEL_X(e, name, type, kind) inline constexpr DType e = DType::e;
TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X

// numpy's name: "float32", "bool", ...
const char* dtype_name(DType t);
std::size_t dtype_size(DType t);
char dtype_kind(DType t);
inline bool is_floating(DType t) { return dtype_kind(t) == 'f'; }
inline bool is_integral(DType t) { return dtype_kind(t) == 'i' || dtype_kind(t) == 'u'; }
inline bool is_signed_int(DType t) { return dtype_kind(t) == 'i'; }
inline bool is_unsigned_int(DType t) { return dtype_kind(t) == 'u'; }
inline bool is_bool(DType t) { return t == DType::bool_; }
inline bool is_complex(DType t) { return dtype_kind(t) == 'c'; }
// The floats narrower than float32 (bfloat16, float16, float8_*): stored in
// tessel's scalar types, computed in float32 (their "compute dtype").
inline bool is_narrow_float(DType t) {
  return t == DType::bfloat16 || t == DType::float16 || t == DType::float8_e4m3fn || t == DType::float8_e5m2 ||
         t == DType::float8_e8m0fnu || t == DType::float4_e2m1fn;
}
// float32 for a narrow float, the dtype itself otherwise.
inline DType compute_dtype(DType t) { return is_narrow_float(t) ? DType::float32 : t; }
// floating or complex (numpy's inexact)
inline bool is_inexact(DType t) { return is_floating(t) || is_complex(t); }
// complex64 -> float32, complex128 -> float64; others unchanged.
inline DType real_dtype(DType t) {
  return t == DType::complex64 ? DType::float32 : t == DType::complex128 ? DType::float64 : t;
}
// float32 -> complex64, float64 -> complex128; complex unchanged.
inline DType complex_dtype(DType t) {
  return t == DType::float64 || t == DType::complex128 ? DType::complex128 : DType::complex64;
}

template <class T>
struct is_complex_type : std::false_type {};
template <class T>
struct is_complex_type<std::complex<T>> : std::true_type {};
template <class T>
inline constexpr bool is_complex_v = is_complex_type<T>::value;

// The unsigned type wrapping arithmetic on integer T runs in: T's width, at
// least unsigned int's (a uint16_t product would be promoted to a signed int
// and could overflow).
template <class T>
using wrap_unsigned_t =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// Parses a numpy dtype name; throws TypeError for an unknown one.
DType dtype_from_name(const std::string& name);

// The DType of a C++ storage type, at compile time.
template <class T>
struct dtype_of;
#define TESSEL_X(e, name, type, kind)           \
  template <>                                   \
  struct dtype_of<type> {                       \
    static constexpr DType value = DType::e;    \
  };
TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
template <class T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Calls f(T{}) with T the storage type of `t` (a visitor over dtypes).
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
#define TESSEL_X(e, name, type, kind) \
  case DType::e:                      \
    return f(type{});
    TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
  }
  __builtin_unreachable();
}

[[noreturn]] void narrow_float_in_kernel(DType t);

// visit_dtype for the reference kernels, which never see a narrow float: the
// interpreter runs an op on narrow floats in float64 and rounds its results
// once (tracer/interpreter.cpp). A narrow float here is an InternalError.
template <class F>
decltype(auto) visit_wide_dtype(DType t, F&& f) {
  switch (t) {
#define TESSEL_X(e, name, type, kind)                                   \
  case DType::e:                                                        \
    if constexpr (is_narrow_float_v<type>) narrow_float_in_kernel(t);  \
    else return f(type{});
    TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
  }
  __builtin_unreachable();
}

}  // namespace tessel
