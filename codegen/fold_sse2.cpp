// The collectives' fold for sse2 (fold_kernel.inc, compiled with its flags).
#define TESSEL_FOLD_ISA sse2
#define TESSEL_FOLD_BYTES 16
#include "codegen/fold_kernel.inc"
