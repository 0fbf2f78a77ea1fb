#include "codegen/gemm.hpp"

#include "codegen/host.hpp"

namespace tessel::codegen::gemm {

Isa best_isa() {
  static const Isa isa = [] {
    const HostCpu& cpu = host_cpu();  // without AVX-512 when TESSEL_NO_AVX512 is set
    // Zen 4 runs a 512-bit FMA as two 256-bit halves: there the AVX-512
    // kernel has no more flops per cycle than the AVX2 one and pays for its
    // larger tile (measured on an EPYC Zen 4, one thread, best of 5: the AVX2
    // kernel 3-10% faster on every shape of the MLP step).
    if (cpu.has("avx512f") && cpu.name != "znver4") return Isa::avx512;
    if (cpu.has("avx2") && cpu.has("fma")) return Isa::avx2;
    return Isa::sse2;
  }();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::sse2: return "sse2";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

void run_parallel(void* ctx, std::int64_t n, TaskFn task, void* task_ctx) {
  const ParallelFor& parallel = *static_cast<const ParallelFor*>(ctx);
  parallel(n, [&](std::int64_t lo, std::int64_t hi) { task(task_ctx, lo, hi); });
}

namespace {

template <class T>
void dispatch(const Operands<T>& op, int threads, const ParallelFor& parallel, Isa isa) {
  void* ctx = const_cast<ParallelFor*>(&parallel);
  switch (isa) {
    case Isa::sse2: return matmul_sse2(op, threads, run_parallel, ctx);
    case Isa::avx2: return matmul_avx2(op, threads, run_parallel, ctx);
    case Isa::avx512: return matmul_avx512(op, threads, run_parallel, ctx);
  }
}

}  // namespace

void matmul(const Operands<float>& op, int threads, const ParallelFor& parallel, Isa isa) {
  dispatch(op, threads, parallel, isa);
}
void matmul(const Operands<double>& op, int threads, const ParallelFor& parallel, Isa isa) {
  dispatch(op, threads, parallel, isa);
}
void matmul(const Operands<std::uint32_t>& op, int threads, const ParallelFor& parallel, Isa isa) {
  dispatch(op, threads, parallel, isa);
}
void matmul(const Operands<std::uint64_t>& op, int threads, const ParallelFor& parallel, Isa isa) {
  dispatch(op, threads, parallel, isa);
}

}  // namespace tessel::codegen::gemm
