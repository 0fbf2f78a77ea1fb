// tessel's own matrix product for float32 and float64: C = A . B with A, B at
// any element strides (transposed operands are read in place) and C row-major.
//
// Why our own and not oneDNN's: measured on the 2-core AMD host, Debian's
// oneDNN (2.6) sgemm ran 256x2048x2048 at 38 GFLOP/s when B was 32-byte
// aligned and at 65 when it was not (its copy/no-copy heuristic), which cost the data-parallel
// MLP step a fifth of its time; on the 16-core Sapphire Rapids host it ran
// 8192^3 1.7x slower than PyTorch's MKL; and it runs on OpenMP threads beside
// our TBB arenas. This one runs on the caller's tasks, so it lives inside the
// device's core budget.
//
// The structure is the classic one (Goto; BLIS): C is cut into tasks of
// rows x columns; a task packs a KC x columns panel of B into NR-wide slivers
// (L3/L2), then for each MC-row block packs A into MR-tall slivers (L2), and
// the micro-kernel multiplies one A sliver by one B sliver (L1) into an
// MR x NR tile held in registers. The kernel is one template over the vector
// width; each ISA's instance is compiled in its own file with its own flags
// (gemm_avx512.cpp, gemm_avx2.cpp, gemm_sse2.cpp) and chosen at run time.
#pragma once

#include <cstdint>
#include <functional>

#include "codegen/gemm_isa.hpp"

namespace tessel::codegen::gemm {

// Runs task(lo, hi) over [0, n) in any split, possibly in parallel.
using ParallelFor = std::function<void(std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& task)>;

// The ParallelForFn the per-ISA entry points (gemm_isa.hpp) take, running
// tasks through the ParallelFor that `ctx` points to.
void run_parallel(void* ctx, std::int64_t n, TaskFn task, void* task_ctx);

// The kernels this build has; `best_isa` is the widest the CPU runs
// (respecting TESSEL_NO_AVX512).
enum class Isa { sse2, avx2, avx512 };
Isa best_isa();
const char* isa_name(Isa isa);

// C = A . B. `threads` is how many threads `parallel` may use: tasks are cut
// so that every thread has work.
void matmul(const Operands<float>& op, int threads, const ParallelFor& parallel, Isa isa = best_isa());
void matmul(const Operands<double>& op, int threads, const ParallelFor& parallel, Isa isa = best_isa());
// Integer products wrap around (XLA's): computed in the unsigned type of the
// same width, whose bits are the signed type's.
void matmul(const Operands<std::uint32_t>& op, int threads, const ParallelFor& parallel, Isa isa = best_isa());
void matmul(const Operands<std::uint64_t>& op, int threads, const ParallelFor& parallel, Isa isa = best_isa());

}  // namespace tessel::codegen::gemm
