// The AVX-512 kernel's tiling (12 x 32 tile, KC 512, MC 240: codegen/gemm_avx512.cpp)
// compiled with AVX2 flags, so that hosts without AVX-512 test its blocking and
// edge logic: GCC splits each 64-byte vector into two AVX2 registers.
#define TESSEL_GEMM_ISA avx512_tiling_on_avx2
#define TESSEL_GEMM_BYTES 64
#define TESSEL_GEMM_MR 12
#define TESSEL_GEMM_KC 512
#define TESSEL_GEMM_MC 240
#include "codegen/gemm_kernel.inc"
