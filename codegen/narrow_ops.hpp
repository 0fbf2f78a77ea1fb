// Narrow floats (bfloat16, float16, float8_*) for the ops codegen does not
// compute in them: a per-device program's reductions, dots and library calls
// (sort, scans, top_k, scatter, ...) on narrow floats become the same op in
// float32 between converts, so the emitted loops, the GEMM and the host
// kernels see float32 only. Reductions thus accumulate in float32 and round
// once, as jnp's sum of a bfloat16 array does; elementwise ops, data
// movement and collectives keep the narrow type (codegen/narrow_float.hpp,
// codegen/fold.hpp). The reference interpreter does the same in float64
// (tracer/interpreter.cpp).
//
// One exception: a dot of bfloat16 operands (or of their float32 converts,
// as preferred_element_type = float32 writes it) becomes a *mixed* dot,
// bfloat16 x bfloat16 -> float32, which codegen/dot.cpp runs on the CPU's
// bfloat16 dot-product instructions (or converts, without them). The mixed
// form exists only here, after the reference interpreter's graphs: its
// graphs are dumped but not verified against the dot's shape rule.
//
// Likewise a dot of 8-bit integers (int8 or uint8, or their converts to a
// wider integer, as preferred_element_type writes them) with an integer
// result of at most 32 bits becomes int8/uint8 x int8/uint8 -> int32, then a
// convert to the result's type (wrapping, which is exact: the products'
// sum mod 2^w). codegen/dot.cpp runs it on AVX512_VNNI's vpdpbusd.
#pragma once

#include "tracer/ir.hpp"

namespace tessel::codegen {

// Whether g (or a region of it) has an op the pass rewrites.
bool has_narrow_compute(const Graph& g);

// g with those ops computed in float32.
Graph widen_narrow_compute(const Graph& g);

}  // namespace tessel::codegen
