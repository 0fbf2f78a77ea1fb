#include "codegen/fold.hpp"

#include <cmath>

#include "codegen/gemm.hpp"
#include "tessel/core/float_types.hpp"

namespace tessel::codegen::fold {

namespace {

// A narrow float's fold: each step in float32, rounded to T; a NaN result is
// T's quiet NaN whatever the operands' NaNs were (as the kernels' NaN).
template <class T>
void fold_narrow(Combine c, void* dst, const void* first, const void* const* rest, int m, std::int64_t n) {
  auto* d = static_cast<T*>(dst);
  auto* f = static_cast<const T*>(first);
  for (std::int64_t i = 0; i < n; ++i) {
    float a = f[i];
    for (int k = 0; k < m; ++k) {
      const float x = static_cast<const T*>(rest[k])[i];
      if (c == Combine::add) a = float(T(a + x));
      else if (std::isnan(a) || std::isnan(x)) a = NAN;
      else a = c == Combine::max ? (x > a ? x : a) : (x < a ? x : a);
    }
    d[i] = T(std::isnan(a) ? NAN : a);
  }
}

}  // namespace

void fold(Type t, Combine c, void* dst, const void* first, const void* const* rest, int m, std::int64_t count) {
  switch (t) {
    case Type::bf16: return fold_narrow<bfloat16_t>(c, dst, first, rest, m, count);
    case Type::f16: return fold_narrow<float16_t>(c, dst, first, rest, m, count);
    case Type::f8e4m3fn: return fold_narrow<float8_e4m3fn_t>(c, dst, first, rest, m, count);
    case Type::f8e5m2: return fold_narrow<float8_e5m2_t>(c, dst, first, rest, m, count);
    case Type::f8e8m0fnu: return fold_narrow<float8_e8m0fnu_t>(c, dst, first, rest, m, count);
    case Type::f4e2m1fn: return fold_narrow<float4_e2m1fn_t>(c, dst, first, rest, m, count);
    default: break;
  }
  static const gemm::Isa isa = gemm::best_isa();  // the widest vectors the CPU runs at full rate
  switch (isa) {
    case gemm::Isa::sse2: return fold_sse2(t, c, dst, first, rest, m, count);
    case gemm::Isa::avx2: return fold_avx2(t, c, dst, first, rest, m, count);
    case gemm::Isa::avx512: return fold_avx512(t, c, dst, first, rest, m, count);
  }
}

}  // namespace tessel::codegen::fold
