// The matrix-product kernel for SSE2, the x86-64 baseline (no flags needed).
#define TESSEL_GEMM_ISA sse2
#define TESSEL_GEMM_BYTES 16
#define TESSEL_GEMM_MR 6  // 12 accumulators + 2 B vectors + 1 broadcast of 16 registers
#define TESSEL_GEMM_KC 256
#define TESSEL_GEMM_MC 168
#include "codegen/gemm_kernel.inc"
