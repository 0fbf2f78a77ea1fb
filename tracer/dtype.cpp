#include "tessel/core/dtype.hpp"

#include "tessel/core/errors.hpp"

namespace tessel {

const char* dtype_name(DType t) {
  switch (t) {
#define TESSEL_X(e, name, type, kind) \
  case DType::e:                      \
    return name;
    TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
  }
  __builtin_unreachable();
}

std::size_t dtype_size(DType t) {
  return visit_dtype(t, [](auto v) { return sizeof(v); });
}

char dtype_kind(DType t) {
  switch (t) {
#define TESSEL_X(e, name, type, kind) \
  case DType::e:                      \
    return kind;
    TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
  }
  __builtin_unreachable();
}

DType dtype_from_name(const std::string& name) {
#define TESSEL_X(e, n, type, kind) \
  if (name == n) return DType::e;
  TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
  std::string names;
#define TESSEL_X(e, n, type, kind) names += std::string(names.empty() ? "" : ", ") + n;
  TESSEL_DTYPES(TESSEL_X)
#undef TESSEL_X
  throw TypeError("unknown dtype name '" + name + "'; expected one of " + names);
}

void narrow_float_in_kernel(DType t) {
  throw InternalError(std::string("a reference kernel was given ") + dtype_name(t) +
                      " values; the interpreter runs ops on narrow floats in float64 (tracer/interpreter.cpp)");
}

}  // namespace tessel
