// An 8-bit integer matrix product for CPUs with AVX512_VNNI (gemm_int8_avx512.cpp,
// compiled with -mavx512f -mavx512vl -mavx512bw -mavx512vnni; call it only
// where the CPU has avx512_vnni).
//
// C (int32, row-major [batch][m][n], written, not accumulated) = A . B with A
// and B bytes at any element strides, each read as int8 or uint8 (a_signed,
// b_signed). The blocking is the float32 GEMM's (gemm.hpp), over groups of 4
// along k: B is packed into 32-column slivers whose 32-bit lanes hold B[4q..
// 4q+3][j], A into 12-row slivers of A[i][4q..4q+3], and the micro-kernel's
// vpdpbusd adds the 4 products of a group to an int32 accumulator. A k that is
// not a multiple of 4 is zero-padded.
//
// Numerics: exact, modulo 2^32. vpdpbusd multiplies unsigned by signed bytes
// and adds without saturation, so every combination is brought to that one:
// u8 A . s8 B runs as is, s8 A . u8 B with the operands' places swapped in the
// instruction (B the unsigned one), and s8 . s8 (u8 . u8, swapped too) with
// A's bytes flipped to A + 128 (A - 128) and 128 * the column sums of B
// subtracted (added), computed while packing B. C[i][j] is sum_p A[i][p] *
// B[p][j] reduced to int32 by wrapping, whatever k, as an int64 sum cast would
// give.
//
// Speed: on a Zen 5 EPYC (a KVM guest) vpdpbusd (128 ops) issues as often as a
// 512-bit FMA (32 flops), twice a cycle: one core peaked at 860 GOP/s with it,
// 215 GFLOP/s with FMAs, and this kernel ran 4096^3 (s8 . s8) at 750 GOP/s
// on one thread (87% of that peak) and 1260 on two (77%), 4.1x and 3.6x the
// float32 GEMM's 181 and 355 GFLOP/s there (the guest's clock varies: runs
// ranged 700-800 and 1150-1340 GOP/s). Other signedness combinations run the
// same loop. Products of few rows pay for packing all of B (1 x 4096 x 4096:
// 13 GOP/s).
#pragma once

#include <cstdint>

#include "codegen/gemm_isa.hpp"

namespace tessel::codegen::gemm {

struct OperandsI8 {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  const std::uint8_t* a = nullptr;  // a[bi*a_bs + i*a_rs + p*a_cs], int8 or uint8 bit patterns
  std::int64_t a_bs = 0, a_rs = 0, a_cs = 1;
  bool a_signed = true;
  const std::uint8_t* b = nullptr;  // b[bi*b_bs + p*b_rs + j*b_cs]
  std::int64_t b_bs = 0, b_rs = 0, b_cs = 1;
  bool b_signed = true;
  std::int32_t* c = nullptr;  // c[bi*m*n + i*n + j], written (not accumulated)
};

// `threads`: how many threads `parallel` may use (tasks are cut so that every
// one has work); parallel(ctx, n, task, task_ctx) runs task over [0, n).
void matmul_int8_avx512vnni(const OperandsI8& op, int threads, ParallelForFn parallel, void* ctx);


}  // namespace tessel::codegen::gemm
