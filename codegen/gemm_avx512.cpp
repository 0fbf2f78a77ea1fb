// The matrix-product kernel for AVX-512 (compiled with -mavx512f -mavx512vl).
// Tile 12 x 32 floats: 24 accumulators + 2 B vectors + 1 broadcast of 32 zmm.
// KC 192 keeps the B sliver (24 KiB) in a 48 KiB L1 beside the A sliver; MC
// 480 makes the A block 360 KiB of a 2 MiB L2 (Sapphire Rapids). Not tuned:
// no AVX-512 host was at hand when it was written.
#define TESSEL_GEMM_ISA avx512
#define TESSEL_GEMM_BYTES 64
#define TESSEL_GEMM_MR 12
#define TESSEL_GEMM_KC 192
#define TESSEL_GEMM_MC 480
#include "codegen/gemm_kernel.inc"
