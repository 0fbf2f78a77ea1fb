// Element types. One X-macro is the single list; the enum, names, sizes and
// traits all derive from it, so adding a dtype is one line here plus kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessel {

// X(enumerator, numpy name, C++ storage type, kind) — kind: b bool, i signed,
// u unsigned, f floating.
#define TESSEL_DTYPES(X)                  \
  X(bool_, "bool", bool, 'b')             \
  X(int32, "int32", std::int32_t, 'i')    \
  X(int64, "int64", std::int64_t, 'i')    \
  X(uint32, "uint32", std::uint32_t, 'u') \
  X(float32, "float32", float, 'f')       \
  X(float64, "float64", double, 'f')

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

}  // namespace tessel
