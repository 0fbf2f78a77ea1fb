// Each primitive's lowering to LLVM IR, in one table built from the op list.
//
// The codegen half of a primitive's rules (tracer/rules.hpp holds the rest;
// LLVM headers stay in codegen/). An elementwise or data-movement op lowers
// to the LLVM value of its result at one output index, from its operands'
// values (`e.value`) at indices it computes: fusion inlines it into the loop
// nest of its consumer. Ops that never become an expression (reductions,
// dots, collectives, library calls: codegen/schedule.cpp makes steps of
// them) say so in their entry. Adding a primitive adds one
// `Lowering<Op::x>::expr` in codegen/lowering.cpp; a missing one does not link.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/llvm_headers.hpp"
#include "codegen/math.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

using Index = std::vector<llvm::Value*>;

// What an op's lowering may use: the builder, operands' values at an index,
// and helpers with XLA's semantics (codegen/emit.cpp implements them).
class ExprEmitter {
 public:
  explicit ExprEmitter(llvm::LLVMContext& ctx) : ctx_(ctx), b(ctx) {}
  virtual ~ExprEmitter() = default;

  // The value of node n at index idx (memoised; loads from a step's inputs).
  virtual llvm::Value* value(const NodeRef& n, const Index& idx) = 0;
  llvm::Value* arg(const Node& n, const Index& idx, int k) { return value(n.in[k], idx); }

  llvm::Type* reg_type(DType t);
  llvm::Type* mem_type(DType t);
  llvm::Value* i64c(std::int64_t v);
  llvm::Value* constant(DType t, double v);
  llvm::Value* literal_scalar(const Literal& l);  // exact bits
  Index unflatten(llvm::Value* flat, const Shape& shape);
  llvm::Value* linearize(const Index& idx, const Shape& shape);
  // A dynamic start index, clamped to [0, limit] as XLA does.
  llvm::Value* clamped_start(const NodeRef& s, std::int64_t limit);
  llvm::Value* compare(Op op, DType t, llvm::Value* a, llvm::Value* b);
  // NaN-propagating for floats, as XLA's max and min.
  llvm::Value* minmax(DType t, llvm::Value* a, llvm::Value* b, bool is_max);
  // XLA's integer division: x / 0 = -1, x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0.
  llvm::Value* int_divrem(DType t, llvm::Value* a, llvm::Value* b, bool div);
  // Conversion with XLA's semantics (tracer/convert.hpp).
  llvm::Value* convert_value(llvm::Value* v, DType from, DType to);
  // Threefry-2x32, 20 rounds (the reference: tracer/rules_elementwise.cpp).
  llvm::Value* threefry(llvm::Value* k0, llvm::Value* k1, llvm::Value* x0, llvm::Value* x1, int word);
  // sin, cos or tan. float32's vector polynomial reduces exactly only to
  // |x| <= kTrigFastLimit; by default (Precise) a larger argument takes
  // libm's result. A kernel that notes large arguments block by block
  // (Emitter::guarded, codegen/emit.cpp) runs the polynomial alone where
  // its block has none.
  llvm::Value* trig(MathFn fn, llvm::Value* x);

 protected:
  llvm::LLVMContext& ctx_;
  enum class Trig { Precise, Fast, Scan };
  Trig trig_ = Trig::Precise;
  llvm::AllocaInst* trig_flag_ = nullptr;  // Scan: the largest |x|'s bits (an i32)

 public:
  llvm::IRBuilder<> b;
  // Inside one piece of a row (Emitter::emit_loop): the innermost loop's
  // index and the constant range [piece_lo, piece_hi) it stays in, so that a
  // concatenation along the last dim reads the one operand holding that
  // range with an affine index (a vector loop), not both through selects.
  llvm::Value* piece_iv = nullptr;
  std::int64_t piece_lo = 0, piece_hi = 0;
};

template <Op op>
struct Lowering {
  // The value of n (whose op is `op`) at output index idx.
  static llvm::Value* expr(ExprEmitter& e, const Node& n, const Index& idx);
};

// The lowering of n's op (the table).
llvm::Value* lower_expr(ExprEmitter& e, const Node& n, const Index& idx);

}  // namespace tessel::codegen
