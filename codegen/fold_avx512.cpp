// The collectives' fold for avx512 (fold_kernel.inc, compiled with its flags).
#define TESSEL_FOLD_ISA avx512
#define TESSEL_FOLD_BYTES 64
#include "codegen/fold_kernel.inc"
