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
// float32 sin, cos and tan are exact to a few ulp for |x| <= kTrigFastLimit
// only (no meaning beyond): ExprEmitter::trig gives libm's beyond the limit.
llvm::Value* emit_math(Builder& b, MathFn fn, llvm::Value* x, llvm::Value* y = nullptr);
// libm's fn (sinf, cosf, tanf, ...: the name by x's type).
llvm::Value* emit_libm(Builder& b, MathFn fn, llvm::Value* x, llvm::Value* y = nullptr);

// Where the float32 polynomial's parts of pi stop reducing exactly: |n| < 2^16.
constexpr double kTrigFastLimit = 131072.0;

}  // namespace tessel::codegen
