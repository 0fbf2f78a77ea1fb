// Transpose folding (XLA's TransposeFolding, in small): a dot_general whose
// operand is a transpose reads the transpose's source instead, with its
// dimension numbers renamed, so the library matmul walks the source with
// strides rather than the program materialising the transposed copy. Reverse
// mode makes this common: the transpose of y = x.W needs dy.W^T and x^T.dy.
#pragma once

#include "tracer/ir.hpp"

namespace tessel::codegen {

Graph fold_transposes_into_dots(const Graph& g);

}  // namespace tessel::codegen
