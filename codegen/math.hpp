// Transcendental functions emitted as plain IR (polynomials after range
// reduction, Cephes-style, as XLA:CPU does), so that the loop vectoriser turns
// them into vector code for the host's widest vectors. float32 is emitted
// inline; float64 calls libm, whose results the reference matches exactly.
#pragma once

namespace llvm {
class Value;
class Module;
template <typename T, typename Inserter>
class IRBuilder;
class ConstantFolder;
class IRBuilderDefaultInserter;
}  // namespace llvm

namespace tessel::codegen {

enum class MathFn { sin, cos, tan, tanh, exp, expm1, log, log1p, logistic, erf_inv, erf, pow, atan2 };

using Builder = llvm::IRBuilder<llvm::ConstantFolder, llvm::IRBuilderDefaultInserter>;

// fn(x) (or fn(x, y) for pow and atan2) for a float or double value.
llvm::Value* emit_math(Builder& b, MathFn fn, llvm::Value* x, llvm::Value* y = nullptr);

}  // namespace tessel::codegen
