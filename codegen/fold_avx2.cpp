// The collectives' fold for avx2 (fold_kernel.inc, compiled with its flags).
#define TESSEL_FOLD_ISA avx2
#define TESSEL_FOLD_BYTES 32
#include "codegen/fold_kernel.inc"
