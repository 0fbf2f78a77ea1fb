// A bfloat16 matrix product for CPUs with AVX512_BF16 (gemm_bf16_avx512.cpp,
// compiled with -mavx512f -mavx512vl -mavx512bw -mavx512bf16; call it only
// where the CPU has avx512_bf16).
//
// C (float32, row-major [batch][m][n], written, not accumulated) = A . B with
// A and B bfloat16 bit patterns (the top 16 bits of a float32) at any element
// strides, as Operands<T> (gemm_isa.hpp) has them. The blocking is the float32
// GEMM's (gemm.hpp), over pairs along k: B is packed into 32-column slivers
// whose 32-bit lanes hold (B[p][j], B[p+1][j]), A into 12-row slivers of
// (A[i][p], A[i][p+1]), and the micro-kernel's vdpbf16ps adds both products
// of a pair to a float32 accumulator. An odd k's last pair is zero-padded.
//
// Numerics (vdpbf16ps's, not IEEE float32 FMA's): a lane adds the pair's
// odd-k product, then its even-k one (each exact in float32), rounding to
// nearest even after each add whatever MXCSR says; bfloat16 denormal inputs
// are read as zero and denormal results flushed to zero (DAZ/FTZ), also
// regardless of MXCSR. Sums run along k a pair at a time, KC-deep blocks
// added into C in order.
//
// Speed depends on the core. On an Emerald Rapids Xeon (a KVM guest) vdpbf16ps
// (64 flops) issues about once per two cycles against two 512-bit FMAs (32
// flops each) per cycle: one core peaked at 86 GFLOP/s with it, 175 with FMAs,
// and this kernel ran 4096^3 at 81 GFLOP/s, 0.54x the float32 GEMM's 151 there.
// It pays only where vdpbf16ps issues as often as an FMA.
#pragma once

#include <cstdint>

#include "codegen/gemm_isa.hpp"

namespace tessel::codegen::gemm {

struct OperandsBf16 {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  const std::uint16_t* a = nullptr;  // a[bi*a_bs + i*a_rs + p*a_cs]
  std::int64_t a_bs = 0, a_rs = 0, a_cs = 1;
  const std::uint16_t* b = nullptr;  // b[bi*b_bs + p*b_rs + j*b_cs]
  std::int64_t b_bs = 0, b_rs = 0, b_cs = 1;
  float* c = nullptr;  // c[bi*m*n + i*n + j], written (not accumulated)
};

// `threads`: how many threads `parallel` may use (tasks are cut so that every
// one has work); parallel(ctx, n, task, task_ctx) runs task over [0, n).
void matmul_bf16_avx512(const OperandsBf16& op, int threads, ParallelForFn parallel, void* ctx);

// The same on AMX tiles (tdpbf16ps: 16 x 16 x 32 products an instruction);
// call it only where amx_bf16_usable(). Numerics: the instruction's, as
// above (each product exact, each add rounded to nearest even, bfloat16
// subnormals read as zero, subnormal results flushed).
void matmul_bf16_amx(const OperandsBf16& op, int threads, ParallelForFn parallel, void* ctx);

// Whether this CPU has AMX-TILE and AMX-BF16 and the OS granted this process
// the tile state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM), asked once.
bool amx_bf16_usable();

// The FLOP rate of vdpbf16ps over that of a float32 FMA on this core,
// measured with the instructions themselves (about 2 ms). codegen/dot.cpp
// runs bfloat16 products on matmul_bf16_avx512 only where this is well
// above 1; elsewhere (Sapphire and Emerald Rapids: about 0.5) the float32
// GEMM on converted operands is faster.
double bf16_dot_rate_over_fma();

}  // namespace tessel::codegen::gemm
