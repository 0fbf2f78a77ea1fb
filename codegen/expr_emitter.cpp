// The helpers ExprEmitter gives every op's lowering (codegen/lowering.hpp):
// types, constants, index arithmetic, and ops with XLA's semantics.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "codegen/llvm_headers.hpp"
#include "codegen/lowering.hpp"
#include "codegen/math.hpp"
#include "codegen/narrow_float.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

using llvm::Value;

llvm::Type* ExprEmitter::reg_type(DType t) {
  switch (t) {
    case DType::bool_: return b.getInt1Ty();
    case DType::int8: case DType::uint8: return b.getInt8Ty();
    case DType::int16: case DType::uint16: return b.getInt16Ty();
    case DType::int32: case DType::uint32: return b.getInt32Ty();
    case DType::int64: case DType::uint64: return b.getInt64Ty();
    // Narrow floats compute in float32 registers (codegen/narrow_float.hpp).
    case DType::bfloat16: case DType::float16: case DType::float8_e4m3fn: case DType::float8_e5m2:
    case DType::float8_e8m0fnu: case DType::float4_e2m1fn:
    case DType::float32: return b.getFloatTy();
    case DType::float64: return b.getDoubleTy();
    case DType::complex64: case DType::complex128:
      throw InternalError("a complex value reached the expression emitter (codegen/complex.cpp expands them)");
  }
  __builtin_unreachable();
}
llvm::Type* ExprEmitter::mem_type(DType t) {
  if (t == DType::bool_) return b.getInt8Ty();
  if (is_narrow_float(t)) return b.getIntNTy(unsigned(8 * dtype_size(t)));
  return reg_type(t);
}
Value* ExprEmitter::i64c(std::int64_t v) { return b.getInt64(std::uint64_t(v)); }
Value* ExprEmitter::constant(DType t, double v) {
  if (is_narrow_float(t)) return literal_scalar(*Literal::scalar(t, v));  // rounded on the host, once
  if (is_floating(t)) return llvm::ConstantFP::get(reg_type(t), v);
  if (t == DType::bool_) return b.getInt1(v != 0);
  if (is_unsigned_int(t)) return llvm::ConstantInt::get(reg_type(t), v >= 0x1p63 ? std::uint64_t(v) : std::uint64_t(std::int64_t(v)));
  return llvm::ConstantInt::get(reg_type(t), std::uint64_t(std::int64_t(v)), true);
}
Value* ExprEmitter::literal_scalar(const Literal& l) {
  // Exact bits, not via double, for 64-bit integers.
  return visit_dtype(l.dtype, [&](auto tag) -> Value* {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, l.bytes.data(), sizeof(T));
    if constexpr (std::is_same_v<T, bool>) return b.getInt1(v);
    else if constexpr (std::is_floating_point_v<T>) return llvm::ConstantFP::get(reg_type(l.dtype), double(v));
    else if constexpr (is_narrow_float_v<T>) return llvm::ConstantFP::get(b.getFloatTy(), double(float(v)));  // exact
    else if constexpr (is_complex_v<T>) throw InternalError("a complex constant reached the expression emitter");
    else return llvm::ConstantInt::get(reg_type(l.dtype), std::uint64_t(v), std::is_signed_v<T>);
  });
}

// Splits a flat index into a row-major multi-index of `shape`.
Index ExprEmitter::unflatten(Value* flat, const Shape& shape) {
  Index idx(shape.size());
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    if (d == 0) {
      idx[d] = flat;
    } else {
      idx[d] = b.CreateURem(flat, i64c(shape[d]));
      flat = b.CreateUDiv(flat, i64c(shape[d]));
    }
  }
  return idx;
}

Value* ExprEmitter::linearize(const Index& idx, const Shape& shape) {
  Value* flat = i64c(0);
  auto st = row_major_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    flat = b.CreateAdd(flat, b.CreateMul(idx[d], i64c(st[d]), "", true, true), "", true, true);
  }
  return flat;
}

// Precise: libm's value beyond the limit; Scan: the polynomial, noting a
// large argument in trig_flag_ (Emitter::guarded); Fast: the polynomial.
Value* ExprEmitter::trig(MathFn fn, Value* x) {
  Value* fast = emit_math(b, fn, x);
  if (!x->getType()->isFloatTy() || trig_ == Trig::Fast) return fast;  // double: libm already
  if (trig_ == Trig::Scan) {
    // The largest |x|'s bits so far (two vector instructions; NaN counts as
    // large, and its row takes the precise path, which gives NaN too).
    Value* mag = b.CreateAnd(b.CreateBitCast(x, b.getInt32Ty()), b.getInt32(0x7fffffff));
    Value* seen = b.CreateLoad(b.getInt32Ty(), trig_flag_);
    b.CreateStore(b.CreateBinaryIntrinsic(llvm::Intrinsic::umax, seen, mag), trig_flag_);
    return fast;
  }
  Value* large = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                 llvm::ConstantFP::get(x->getType(), kTrigFastLimit));  // inf too; not NaN
  return b.CreateSelect(large, emit_libm(b, fn, x), fast);
}

// Threefry-2x32, 20 rounds (the reference: tracer/rules_elementwise.cpp).
// The two words come from the same rounds; LLVM shares them when both are used.
Value* ExprEmitter::threefry(Value* k0, Value* k1, Value* x0, Value* x1, int word) {
  auto c = [&](std::uint32_t v) { return b.getInt32(v); };
  Value* ks[3] = {k0, k1, b.CreateXor(b.CreateXor(k0, k1), c(0x1BD11BDAu))};
  static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  x0 = b.CreateAdd(x0, ks[0]);
  x1 = b.CreateAdd(x1, ks[1]);
  for (int i = 0; i < 5; ++i) {
    for (int r = 0; r < 4; ++r) {
      x0 = b.CreateAdd(x0, x1);
      x1 = b.CreateIntrinsic(llvm::Intrinsic::fshl, {b.getInt32Ty()}, {x1, x1, c(std::uint32_t(rot[i % 2][r]))});
      x1 = b.CreateXor(x1, x0);
    }
    x0 = b.CreateAdd(x0, ks[(i + 1) % 3]);
    x1 = b.CreateAdd(x1, b.CreateAdd(ks[(i + 2) % 3], c(std::uint32_t(i + 1))));
  }
  return word == 0 ? x0 : x1;
}

// A dynamic start index, clamped to [0, limit] as XLA does.
Value* ExprEmitter::clamped_start(const NodeRef& s, std::int64_t limit) {
  Value* v = convert_value(value(s, {}), s->dtype(), DType::int64);
  v = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, v, i64c(0));
  return b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, v, i64c(limit));
}

Value* ExprEmitter::compare(Op op, DType t, Value* x, Value* y) {
  if (is_floating(t)) {
    switch (op) {
      case Op::eq: return b.CreateFCmpOEQ(x, y);
      case Op::ne: return b.CreateFCmpUNE(x, y);
      case Op::lt: return b.CreateFCmpOLT(x, y);
      case Op::le: return b.CreateFCmpOLE(x, y);
      case Op::gt: return b.CreateFCmpOGT(x, y);
      case Op::ge: return b.CreateFCmpOGE(x, y);
      default: throw InternalError(std::string(op_name(op)) + " is not a comparison");
    }
  }
  const bool u = is_unsigned_int(t) || t == DType::bool_;
  switch (op) {
    case Op::eq: return b.CreateICmpEQ(x, y);
    case Op::ne: return b.CreateICmpNE(x, y);
    case Op::lt: return u ? b.CreateICmpULT(x, y) : b.CreateICmpSLT(x, y);
    case Op::le: return u ? b.CreateICmpULE(x, y) : b.CreateICmpSLE(x, y);
    case Op::gt: return u ? b.CreateICmpUGT(x, y) : b.CreateICmpSGT(x, y);
    case Op::ge: return u ? b.CreateICmpUGE(x, y) : b.CreateICmpSGE(x, y);
    default: throw InternalError(std::string(op_name(op)) + " is not a comparison");
  }
}

// NaN-propagating for floats, as XLA's max and min.
Value* ExprEmitter::minmax(DType t, Value* x, Value* y, bool is_max) {
  if (is_floating(t)) return b.CreateBinaryIntrinsic(is_max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, x, y);
  if (t == DType::bool_) return is_max ? b.CreateOr(x, y) : b.CreateAnd(x, y);
  const bool u = is_unsigned_int(t);
  auto id = is_max ? (u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax) : (u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin);
  return b.CreateBinaryIntrinsic(id, x, y);
}

// XLA's integer division: x / 0 = -1, x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0.
Value* ExprEmitter::int_divrem(DType t, Value* x, Value* y, bool div) {
  llvm::Type* ty = reg_type(t);
  Value* zero = llvm::ConstantInt::get(ty, 0);
  Value* is_zero = b.CreateICmpEQ(y, zero);
  if (is_unsigned_int(t)) {
    Value* safe = b.CreateSelect(is_zero, llvm::ConstantInt::get(ty, 1), y);
    Value* r = div ? b.CreateUDiv(x, safe) : b.CreateURem(x, safe);
    return b.CreateSelect(is_zero, div ? llvm::ConstantInt::get(ty, -1, true) : x, r);
  }
  Value* minus1 = llvm::ConstantInt::get(ty, -1, true);
  Value* overflow = b.CreateAnd(b.CreateICmpEQ(x, llvm::ConstantInt::get(ty, llvm::APInt::getSignedMinValue(ty->getIntegerBitWidth()))),
                                 b.CreateICmpEQ(y, minus1));
  Value* safe = b.CreateSelect(b.CreateOr(is_zero, overflow), llvm::ConstantInt::get(ty, 1), y);
  Value* r = div ? b.CreateSDiv(x, safe) : b.CreateSRem(x, safe);
  r = b.CreateSelect(overflow, div ? x : zero, r);
  return b.CreateSelect(is_zero, div ? minus1 : x, r);
}

// Conversion with XLA's semantics (tracer/convert.hpp).
Value* ExprEmitter::convert_value(Value* v, DType from, DType to) {
  if (from == to) return v;
  // A narrow float's value is a float32 (exact); to one, the exact value is
  // rounded once: from a float or double directly, from an integer through a
  // double that rounds as the integer does.
  if (is_narrow_float(to)) {
    if (is_narrow_float(from) || is_floating(from)) return narrow_round(b, v, to);
    return narrow_round(b, int_to_double_for_rounding(b, v, from), to);
  }
  if (is_narrow_float(from)) from = DType::float32;
  if (from == to) return v;
  llvm::Type* tt = reg_type(to);
  const bool fsigned = !is_unsigned_int(from) && from != DType::bool_;
  if (to == DType::bool_) {
    if (is_floating(from)) return b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
    return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
  }
  if (is_floating(to)) {
    if (is_floating(from)) return b.CreateFPCast(v, tt);
    return fsigned ? b.CreateSIToFP(v, tt) : b.CreateUIToFP(v, tt);
  }
  // to an integer
  if (is_floating(from)) {
    const bool tsigned = !is_unsigned_int(to);
    unsigned bits = tt->getIntegerBitWidth();
    double lo = tsigned ? -std::ldexp(1.0, int(bits) - 1) : 0.0;
    double hi = tsigned ? std::ldexp(1.0, int(bits) - 1) : std::ldexp(1.0, int(bits));
    llvm::Type* ft = v->getType();
    Value* nan = b.CreateFCmpUNO(v, v);
    Value* below = b.CreateFCmpOLE(v, llvm::ConstantFP::get(ft, lo));
    Value* above = b.CreateFCmpOGE(v, llvm::ConstantFP::get(ft, hi));
    Value* safe = b.CreateSelect(b.CreateOr(nan, b.CreateOr(below, above)), llvm::ConstantFP::get(ft, 0.0), v);
    Value* r = tsigned ? b.CreateFPToSI(safe, tt) : b.CreateFPToUI(safe, tt);
    llvm::APInt mn = tsigned ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits);
    llvm::APInt mx = tsigned ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits);
    r = b.CreateSelect(below, llvm::ConstantInt::get(tt, mn), r);
    r = b.CreateSelect(above, llvm::ConstantInt::get(tt, mx), r);
    return b.CreateSelect(nan, llvm::ConstantInt::get(tt, 0), r);
  }
  return fsigned ? b.CreateSExtOrTrunc(v, tt) : b.CreateZExtOrTrunc(v, tt);
}

}  // namespace tessel::codegen
