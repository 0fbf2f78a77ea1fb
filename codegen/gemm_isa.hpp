// Between gemm.cpp (dispatch) and the per-ISA kernel files: the operands, and
// the entry points each ISA file defines. Only plain types cross this line
// (see gemm_kernel.inc on why).
#pragma once

#include <cstdint>

namespace tessel::codegen::gemm {

template <class T>
struct Operands {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  const T* a = nullptr;  // a[bi*a_bs + i*a_rs + p*a_cs]
  std::int64_t a_bs = 0, a_rs = 0, a_cs = 1;
  const T* b = nullptr;  // b[bi*b_bs + p*b_rs + j*b_cs]
  std::int64_t b_bs = 0, b_rs = 0, b_cs = 1;
  T* c = nullptr;  // c[(bi*m + i)*ldc + j], ldc = c_rs or n: written, or subtracted from
  std::int64_t c_rs = 0;
  bool subtract = false;  // C -= A . B (each KC-deep block's product subtracted in turn), not C = A . B
};

// parallel(ctx, n, task, task_ctx) runs task(task_ctx, lo, hi) over [0, n).
using TaskFn = void (*)(void* task_ctx, std::int64_t lo, std::int64_t hi);
using ParallelForFn = void (*)(void* ctx, std::int64_t n, TaskFn task, void* task_ctx);

#define TESSEL_GEMM_DECLARE(isa)                                                                \
  void matmul_##isa(const Operands<float>& op, int threads, ParallelForFn parallel, void* ctx); \
  void matmul_##isa(const Operands<double>& op, int threads, ParallelForFn parallel, void* ctx);        \
  void matmul_##isa(const Operands<std::uint32_t>& op, int threads, ParallelForFn parallel, void* ctx); \
  void matmul_##isa(const Operands<std::uint64_t>& op, int threads, ParallelForFn parallel, void* ctx);
TESSEL_GEMM_DECLARE(sse2)
TESSEL_GEMM_DECLARE(avx2)
TESSEL_GEMM_DECLARE(avx512)
#undef TESSEL_GEMM_DECLARE

}  // namespace tessel::codegen::gemm
