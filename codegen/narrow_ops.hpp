// Narrow floats (bfloat16, float16, float8_*) for the ops codegen does not
// compute in them: a per-device program's reductions, dots and library calls
// (sort, scans, top_k, scatter, ...) on narrow floats become the same op in
// float32 between converts, so the emitted loops, the GEMM and the host
// kernels see float32 only. Reductions thus accumulate in float32 and round
// once, as jnp's sum of a bfloat16 array does; elementwise ops, data
// movement and collectives keep the narrow type (codegen/narrow_float.hpp,
// codegen/fold.hpp). The reference interpreter does the same in float64
// (tracer/interpreter.cpp).
#pragma once

#include "tracer/ir.hpp"

namespace tessel::codegen {

// Whether g (or a region of it) has an op the pass rewrites.
bool has_narrow_compute(const Graph& g);

// g with those ops computed in float32.
Graph widen_narrow_compute(const Graph& g);

}  // namespace tessel::codegen
