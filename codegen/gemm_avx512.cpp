// The matrix-product kernel for AVX-512 (compiled with -mavx512f -mavx512vl).
// Tile 12 x 32 floats: 24 accumulators + 2 B vectors + 1 broadcast of 32 zmm.
// KC 512, MC 240: the A block 480 KiB of a 1 MiB (Zen 5) or 2 MiB (Sapphire
// Rapids) L2; the B sliver (64 KiB) streams from L2. Deeper blocks pay: each
// micro-kernel call loads and stores its C tile once, and with KC 192 (a B
// sliver in L1) that traffic cost more than L1 saves. Measured on a Zen 5
// EPYC, one thread, 4096^3 f32 (/tmp probe of this file's kernel, best of 2):
// KC 192 / MC 480 143.6 GFLOP/s, 512 / 240 166.2, 1024 / 120 169.7,
// 2048 / 120 164.2 (the core's FMA peak: 209).
#define TESSEL_GEMM_ISA avx512
#define TESSEL_GEMM_BYTES 64
#define TESSEL_GEMM_MR 12
#define TESSEL_GEMM_KC 512
#define TESSEL_GEMM_MC 240
#include "codegen/gemm_kernel.inc"
