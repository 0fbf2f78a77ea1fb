// The matrix-product kernel for AVX2 + FMA (compiled with -mavx2 -mfma).
// Tile 6 x 16 floats: 12 accumulators + 2 B vectors + 1 broadcast of 16 ymm.
// KC 384 (B sliver 24 KiB of a 32 KiB L1) measured best of 128/256/384/512 on
// the 2-core Zen 3 host (noisy: 74-85 GFLOP/s against a 95-100 FMA peak).
#define TESSEL_GEMM_ISA avx2
#define TESSEL_GEMM_BYTES 32
#define TESSEL_GEMM_MR 6
#define TESSEL_GEMM_KC 384
#define TESSEL_GEMM_MC 168
#include "codegen/gemm_kernel.inc"
