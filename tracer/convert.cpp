#include "tracer/convert.hpp"

#include <cstring>

namespace tessel {

void convert_elements(DType from, const void* src, DType to, void* dst, std::int64_t n) {
  if (from == to) {
    std::memcpy(dst, src, std::size_t(n) * dtype_size(from));
    return;
  }
  visit_dtype(from, [&](auto f) {
    using F = decltype(f);
    visit_dtype(to, [&](auto t) {
      using T = decltype(t);
      const F* s = static_cast<const F*>(src);
      T* d = static_cast<T*>(dst);
      for (std::int64_t i = 0; i < n; ++i) d[i] = convert_element<T>(s[i]);
    });
  });
}

}  // namespace tessel
