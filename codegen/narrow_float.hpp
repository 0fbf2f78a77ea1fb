// The narrow floats (bfloat16, float16, float8_e4m3fn, float8_e5m2) in
// emitted code. Their values live in float32 registers, always on the
// narrow format's grid; memory holds their bits. Every op computing a narrow
// float computes in float32 and rounds its result to nearest even here
// (docs/dtypes.md), so fused code rounds exactly where the reference
// interpreter does.
#pragma once

#include "codegen/llvm_headers.hpp"
#include "tessel/core/dtype.hpp"

namespace tessel::codegen {

// x (a float or a double) rounded to nearest even onto t's grid, as a
// float: overflow to +-inf (float8_e4m3fn, which has none: NaN); NaN stays NaN.
llvm::Value* narrow_round(llvm::IRBuilderBase& b, llvm::Value* x, DType t);
// A float on t's grid as t's bits (an i16 or i8); NaN as t's quiet NaN.
llvm::Value* narrow_encode(llvm::IRBuilderBase& b, llvm::Value* on_grid, DType t);
// t's bits as the float they stand for (exact).
llvm::Value* narrow_decode(llvm::IRBuilderBase& b, llvm::Value* bits, DType t);
// An integer (of `from`, signed or not) as a double that rounds to any
// format of at most 51 bits of precision exactly as the integer itself
// would: exact below 2^53, else rounded to odd (a sticky last bit).
llvm::Value* int_to_double_for_rounding(llvm::IRBuilderBase& b, llvm::Value* v, DType from);

}  // namespace tessel::codegen
