// Complex values for codegen: a per-device program with complex64/complex128
// values becomes one of real values only, so the expression emitter, the
// GEMM, the reductions and the collectives need no complex types.
//
// A complex array of shape S is held *packed* — a real array of shape S + [2]
// (the same bytes: NumPy's and std::complex's interleaved layout) — wherever
// it is stored, moved or reshaped (parameters, outputs, shape ops,
// collectives, loop carries, regions), and as two real arrays (its parts)
// where it is computed with (elementwise math, dots, reductions, gathers and
// scatters). The reference interpreter runs the complex program itself
// (std::complex kernels), so it stays an independent check of this pass.
#pragma once

#include "tracer/ir.hpp"

namespace tessel::codegen {

// Whether g (or a region of it) holds a complex value.
bool has_complex(const Graph& g);

// g with every complex value expanded as above; parameters and outputs of
// complex type become packed real arrays. Throws NotImplementedError for an
// op this pass cannot expand (named in the message).
Graph expand_complex(const Graph& g);

}  // namespace tessel::codegen
