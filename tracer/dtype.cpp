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
  throw TypeError("unknown dtype name '" + name +
                  "'; expected one of bool, int32, int64, uint32, float32, float64, complex64, complex128");
}

}  // namespace tessel
