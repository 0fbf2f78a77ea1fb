// dot_general as a thunk: float32 and float64 through tessel's own matrix
// product (codegen/gemm.hpp) on the calling device's threads, or on every core
// for a large product when that pays (ComputeSlot); integer dtypes through a
// plain loop. Operands whose
// batch, free and contracting dimensions are each contiguous in memory are
// passed with strides (transposes cost nothing); others are first copied
// into that order.
#pragma once

#include <memory>

#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

// A thunk computing `dot` from slots lhs, rhs into slot out.
std::unique_ptr<rt::Thunk> make_dot_thunk(const Node& dot, int lhs, int rhs, int out, int threads);

}  // namespace tessel::codegen
