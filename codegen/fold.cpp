#include "codegen/fold.hpp"

#include "codegen/gemm.hpp"

namespace tessel::codegen::fold {

void fold(Type t, Combine c, void* dst, const void* first, const void* const* rest, int m, std::int64_t count) {
  static const gemm::Isa isa = gemm::best_isa();  // the widest vectors the CPU runs at full rate
  switch (isa) {
    case gemm::Isa::sse2: return fold_sse2(t, c, dst, first, rest, m, count);
    case gemm::Isa::avx2: return fold_avx2(t, c, dst, first, rest, m, count);
    case gemm::Isa::avx512: return fold_avx512(t, c, dst, first, rest, m, count);
  }
}

}  // namespace tessel::codegen::fold
