#include "codegen/narrow_float.hpp"

#include <cmath>
#include <limits>

#include "codegen/host.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {

using llvm::Value;

struct Format {
  int mant;       // stored mantissa bits
  int ebits;      // exponent bits
  int bias;
  bool ieee;      // all-ones exponent is inf/NaN (float8_e4m3fn: only S.1111.111 is NaN)
  double max;     // largest finite
  bool has_nan;   // float4_e2m1fn has none (NaN becomes -0, beyond max saturates)
  int emin() const { return 1 - bias; }
  int width() const { return 1 + ebits + mant; }
};

// The format's facts from its host type's std::numeric_limits
// (tessel/core/float_types.hpp), so the two cannot disagree.
Format format_of(DType t) {
  return visit_dtype(t, [&](auto tag) -> Format {
    using T = decltype(tag);
    if constexpr (is_narrow_float_v<T>) {
      using L = std::numeric_limits<T>;
      const int mant = L::digits - 1, bias = 1 - (L::min_exponent - 1);
      const int width = std::is_same_v<T, float4_e2m1fn_t> ? 4 : int(8 * sizeof(T));
      if constexpr (!L::is_signed) throw InternalError("float8_e8m0fnu has its own code paths");
      return {mant, width - 1 - mant, bias, L::has_infinity, double(float(L::max())), L::has_quiet_NaN};
    } else {
      throw InternalError(std::string(dtype_name(t)) + " is not a narrow float");
    }
  });
}

// F16C's conversions (vcvtps2ph, vcvtph2ps): LLVM emits them for half
// conversions on a CPU that has them.
bool has_f16c() {
  static const bool yes = host_cpu().has("f16c");
  return yes;
}

}  // namespace

namespace {

// float8_e8m0fnu (tessel/core/float_types.hpp, e8m0_from_double): x (float
// or double) to the nearest power of two, a mantissa of 1.5 or more rounding
// up; up to 2^-127 -> 2^-127, below 2^-126 -> 2^-126; NaN, inf, zero,
// negatives and beyond 2^127 -> NaN. As a float (2^-127 a subnormal).
Value* e8m0_round(llvm::IRBuilderBase& b, Value* x) {
  llvm::Type* ft = x->getType();
  const bool dbl = ft->isDoubleTy();
  const int src_mant = dbl ? 52 : 23;
  llvm::Type* it = dbl ? b.getInt64Ty() : b.getInt32Ty();
  auto ic = [&](std::uint64_t v) { return llvm::ConstantInt::get(it, v); };
  auto fc = [&](double v) { return llvm::ConstantFP::get(ft, v); };
  Value* ix = b.CreateBitCast(x, it);
  const std::uint64_t exp_mask = dbl ? 0x7FF0'0000'0000'0000ull : 0x7F80'0000ull;
  // Adding half the mantissa's range carries into the exponent exactly when the mantissa is >= 1.5.
  Value* y = b.CreateBitCast(b.CreateAnd(b.CreateAdd(ix, ic(std::uint64_t(1) << (src_mant - 1))), ic(exp_mask)), ft);
  y = b.CreateSelect(b.CreateFCmpOLT(x, fc(0x1p-126)), fc(0x1p-126), y);
  y = b.CreateSelect(b.CreateFCmpOLE(x, fc(0x1p-127)), fc(0x1p-127), y);
  Value* bad = b.CreateOr(b.CreateFCmpUGT(y, fc(0x1p127)), b.CreateFCmpULE(x, fc(0)));  // NaN, <= 0, too big
  y = b.CreateSelect(bad, fc(std::nan("")), y);
  return dbl ? b.CreateFPTrunc(y, b.getFloatTy()) : y;  // exact: 2^-127 .. 2^127
}

}  // namespace

Value* narrow_round(llvm::IRBuilderBase& b, Value* x, DType t) {
  llvm::IRBuilderBase::FastMathFlagGuard guard(b);
  b.setFastMathFlags(llvm::FastMathFlags());  // (ax + C) - C must round
  if (t == DType::float8_e8m0fnu) return e8m0_round(b, x);
  const Format f = format_of(t);
  llvm::Type* ft = x->getType();
  const bool dbl = ft->isDoubleTy();
  if (!dbl && t == DType::bfloat16) {
    // bfloat16 has float's exponent range: rounding the float's bits at bit
    // 16 is exact for subnormals too, and a carry past the largest finite
    // value makes the infinity. Only a NaN needs its own case (its payload
    // could round away).
    llvm::Type* i32 = b.getInt32Ty();
    Value* ix = b.CreateBitCast(x, i32);
    Value* lsb = b.CreateAnd(b.CreateLShr(ix, b.getInt32(16)), b.getInt32(1));
    Value* r = b.CreateAnd(b.CreateAdd(b.CreateAdd(ix, b.getInt32(0x7FFF)), lsb), b.getInt32(0xFFFF0000u));
    // A NaN: quiet, its sign and its payload's top bits kept (the host's rule, float_types.hpp).
    Value* nan = b.CreateAnd(b.CreateOr(ix, b.getInt32(0x0040'0000u)), b.getInt32(0xFFFF0000u));
    return b.CreateBitCast(b.CreateSelect(b.CreateFCmpUNO(x, x), nan, r), ft);
  }
  // Not float16 by fptrunc and fpext, though F16C rounds right: the
  // backend fuses a multiply and an add across an fpext (AllowFPOpFusion,
  // codegen/jit.cpp), which would skip the rounding between them. The
  // integer ops below are opaque to it.
  const int src_mant = dbl ? 52 : 23;
  llvm::Type* it = dbl ? b.getInt64Ty() : b.getInt32Ty();
  auto ic = [&](std::uint64_t v) { return llvm::ConstantInt::get(it, v); };
  auto fc = [&](double v) { return llvm::ConstantFP::get(ft, v); };
  const int sh = src_mant - f.mant;
  // Normal range: round the source's mantissa to f.mant bits (a carry
  // into the exponent is the right answer).
  Value* ix = b.CreateBitCast(x, it);
  Value* lsb = b.CreateAnd(b.CreateLShr(ix, ic(std::uint64_t(sh))), ic(1));
  Value* r = b.CreateAdd(b.CreateAdd(ix, ic((std::uint64_t(1) << (sh - 1)) - 1)), lsb);
  r = b.CreateAnd(r, ic(~((std::uint64_t(1) << sh) - 1)));
  Value* y_norm = b.CreateBitCast(r, ft);
  // Below the format's smallest normal: to a multiple of its quantum, by
  // the addition that rounds there.
  Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  Value* c = fc(std::ldexp(1.0, f.emin() - f.mant + src_mant));
  Value* y_sub = b.CreateFSub(b.CreateFAdd(ax, c), c);
  y_sub = b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, y_sub, x);
  Value* y = b.CreateSelect(b.CreateFCmpOLT(ax, fc(std::ldexp(1.0, f.emin()))), y_sub, y_norm);
  // Beyond the largest finite (inf included): inf, or NaN without one
  // (float4_e2m1fn, with neither, saturates; its NaN stand-in is -0).
  Value* over = b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, y), fc(f.max));
  Value* big = f.ieee       ? b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, fc(HUGE_VAL), x)
               : f.has_nan ? fc(std::nan(""))
                           : b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, fc(f.max), x);
  y = b.CreateSelect(over, big, y);
  // A NaN: IEEE formats keep its sign and its payload's top bits, made
  // quiet (the host's rule, float_types.hpp); e4m3fn's NaN keeps the sign.
  Value* nan = f.ieee ? b.CreateBitCast(b.CreateAnd(b.CreateOr(ix, ic(std::uint64_t(1) << (src_mant - 1))),
                                                    ic(~((std::uint64_t(1) << sh) - 1))),
                                        ft)
               : f.has_nan ? b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, fc(std::nan("")), x)
                           : fc(-0.0);
  y = b.CreateSelect(b.CreateFCmpUNO(x, x), nan, y);
  return dbl ? b.CreateFPTrunc(y, b.getFloatTy()) : y;  // exact: y is on the grid
}

Value* narrow_encode(llvm::IRBuilderBase& b, Value* y, DType t) {
  if (t == DType::float8_e8m0fnu) {
    // The float's exponent field (2^-127, a subnormal, has field 0); NaN 0xFF.
    Value* field = b.CreateLShr(b.CreateBitCast(y, b.getInt32Ty()), b.getInt32(23));
    field = b.CreateSelect(b.CreateFCmpUNO(y, y), b.getInt32(0xFF), field);
    return b.CreateTrunc(field, b.getInt8Ty());
  }
  const Format f = format_of(t);
  if (t == DType::float16 && has_f16c())  // exact: y is on the grid
    return b.CreateBitCast(b.CreateFPTrunc(y, b.getHalfTy()), b.getInt16Ty());
  llvm::Type* nt = b.getIntNTy(unsigned(8 * dtype_size(t)));
  llvm::Type* i32 = b.getInt32Ty();
  auto c32 = [&](std::uint32_t v) { return b.getInt32(v); };
  Value* fb = b.CreateBitCast(y, i32);
  if (t == DType::bfloat16) {
    // The top half of the float: exact on the grid, subnormals and NaNs too
    // (a NaN on the grid has its payload in the top half: narrow_decode puts
    // data's there, narrow_round keeps a computed one's top bits and the
    // quiet bit), so that moved data keeps its bits.
    return b.CreateTrunc(b.CreateLShr(fb, c32(16)), nt);
  }
  Value* sign = b.CreateShl(b.CreateLShr(fb, c32(31)), c32(std::uint32_t(f.width() - 1)));
  Value* a = b.CreateAnd(fb, c32(0x7FFFFFFFu));
  // Normal: the exponent rebiased, the mantissa's top bits (the rest are 0).
  Value* field = b.CreateAdd(b.CreateLShr(a, c32(23)), c32(std::uint32_t(f.bias - 127)));
  Value* m = b.CreateAnd(b.CreateLShr(a, c32(std::uint32_t(23 - f.mant))), c32((1u << f.mant) - 1));
  Value* normal = b.CreateOr(b.CreateShl(field, c32(std::uint32_t(f.mant))), m);
  // Subnormal: the value in quanta.
  Value* ay = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, y);
  Value* sub = b.CreateFPToUI(b.CreateFMul(ay, llvm::ConstantFP::get(b.getFloatTy(), std::ldexp(1.0, f.mant - f.emin()))), i32);
  Value* is_sub = b.CreateFCmpOLT(ay, llvm::ConstantFP::get(b.getFloatTy(), std::ldexp(1.0, f.emin())));
  Value* enc = b.CreateSelect(is_sub, sub, normal);
  const std::uint32_t emask = (1u << f.ebits) - 1;
  if (f.ieee) {
    Value* is_inf = b.CreateICmpEQ(a, c32(0x7F800000u));
    enc = b.CreateSelect(is_inf, c32(emask << f.mant), enc);
  }
  // A NaN: IEEE formats keep the payload's top bits (narrow_decode puts a
  // payload there, so moved data keeps its bits; narrow_round's canonical
  // NaN gives the quiet NaN), the quiet bit set where none is left;
  // e4m3fn's one NaN is all ones; e2m1fn, without one, gives -0.
  Value* nan;
  if (f.ieee) {
    const std::uint32_t mmask = (1u << f.mant) - 1;
    Value* payload = b.CreateAnd(b.CreateLShr(a, c32(std::uint32_t(23 - f.mant))), c32(mmask));
    payload = b.CreateSelect(b.CreateICmpEQ(payload, c32(0)), c32(1u << (f.mant - 1)), payload);
    nan = b.CreateOr(c32(emask << f.mant), payload);
  } else {
    nan = c32(f.has_nan ? (1u << (f.width() - 1)) - 1 : 1u << (f.width() - 1));
  }
  enc = b.CreateSelect(b.CreateFCmpUNO(y, y), nan, enc);
  return b.CreateTrunc(b.CreateOr(enc, sign), nt);
}

Value* narrow_decode(llvm::IRBuilderBase& b, Value* bits, DType t) {
  if (t == DType::float8_e8m0fnu) {
    Value* x = b.CreateZExt(bits, b.getInt32Ty());
    Value* v = b.CreateShl(x, b.getInt32(23));
    v = b.CreateSelect(b.CreateICmpEQ(x, b.getInt32(0)), b.getInt32(0x0040'0000u), v);  // 2^-127
    v = b.CreateSelect(b.CreateICmpEQ(x, b.getInt32(0xFF)), b.getInt32(0x7FC0'0000u), v);
    return b.CreateBitCast(v, b.getFloatTy());
  }
  const Format f = format_of(t);
  if (t == DType::float16 && has_f16c()) return b.CreateFPExt(b.CreateBitCast(bits, b.getHalfTy()), b.getFloatTy());
  llvm::Type* i32 = b.getInt32Ty();
  llvm::Type* flt = b.getFloatTy();
  auto c32 = [&](std::uint32_t v) { return b.getInt32(v); };
  Value* x = b.CreateZExt(bits, i32);
  if (t == DType::bfloat16) return b.CreateBitCast(b.CreateShl(x, c32(16)), flt);  // the top half of a float
  Value* sign = b.CreateShl(b.CreateLShr(x, c32(std::uint32_t(f.width() - 1))), c32(31));
  const std::uint32_t emask = (1u << f.ebits) - 1, mmask = (1u << f.mant) - 1;
  Value* field = b.CreateAnd(b.CreateLShr(x, c32(std::uint32_t(f.mant))), c32(emask));
  Value* m = b.CreateAnd(x, c32(mmask));
  Value* normal = b.CreateOr(b.CreateShl(b.CreateAdd(field, c32(std::uint32_t(127 - f.bias))), c32(23)),
                             b.CreateShl(m, c32(std::uint32_t(23 - f.mant))));
  Value* v = b.CreateBitCast(b.CreateOr(normal, sign), flt);
  Value* sub = b.CreateFMul(b.CreateUIToFP(m, flt), llvm::ConstantFP::get(flt, std::ldexp(1.0, f.emin() - f.mant)));
  sub = b.CreateBitCast(b.CreateOr(b.CreateBitCast(sub, i32), sign), flt);
  v = b.CreateSelect(b.CreateICmpEQ(field, c32(0)), sub, v);
  // Infinities and NaNs keep their sign, and a NaN its payload (in the
  // float's top mantissa bits), so that encoding gives the same bits back.
  Value* nan = b.CreateBitCast(b.CreateOr(c32(0x7FC00000u), sign), flt);
  if (f.ieee) {
    Value* special = b.CreateICmpEQ(field, c32(emask));
    Value* ones = b.CreateOr(b.CreateOr(c32(0x7F800000u), sign), b.CreateShl(m, c32(std::uint32_t(23 - f.mant))));
    v = b.CreateSelect(special, b.CreateBitCast(ones, flt), v);
  } else if (f.has_nan) {
    v = b.CreateSelect(b.CreateICmpEQ(b.CreateAnd(x, c32((1u << (f.width() - 1)) - 1)), c32((1u << (f.width() - 1)) - 1)), nan, v);
  }
  return v;
}

Value* int_to_double_for_rounding(llvm::IRBuilderBase& b, Value* v, DType from) {
  llvm::Type* dt = b.getDoubleTy();
  const bool sgn = !is_unsigned_int(from) && from != DType::bool_;
  if (dtype_size(from) < 8) return sgn ? b.CreateSIToFP(v, dt) : b.CreateUIToFP(v, dt);
  llvm::Type* i64 = b.getInt64Ty();
  auto c = [&](std::uint64_t x) { return llvm::ConstantInt::get(i64, x); };
  Value* neg = sgn ? b.CreateICmpSLT(v, c(0)) : b.getFalse();
  Value* u = sgn ? b.CreateSelect(neg, b.CreateSub(c(0), v), v) : v;  // |v| as unsigned (INT64_MIN too)
  // Keep the top 53 significant bits; any dropped bit sets the last kept one.
  Value* lz = b.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, u, b.getFalse());
  Value* sh = b.CreateSub(c(11), b.CreateBinaryIntrinsic(llvm::Intrinsic::umin, lz, c(11)));  // 64 - 53 - lz, at least 0
  Value* kept = b.CreateLShr(u, sh);
  Value* dropped = b.CreateAnd(u, b.CreateSub(b.CreateShl(c(1), sh), c(1)));
  kept = b.CreateOr(kept, b.CreateZExt(b.CreateICmpNE(dropped, c(0)), i64));
  Value* d = b.CreateUIToFP(kept, dt);  // exact: at most 53 bits
  Value* scale = b.CreateBitCast(b.CreateShl(b.CreateAdd(sh, c(1023)), c(52)), dt);  // 2^sh
  d = b.CreateFMul(d, scale);
  return b.CreateSelect(neg, b.CreateFNeg(d), d);
}

}  // namespace tessel::codegen
