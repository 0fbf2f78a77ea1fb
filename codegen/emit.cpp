#include "codegen/emit.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "codegen/jit.hpp"
#include "codegen/llvm_headers.hpp"
#include "codegen/math.hpp"
#include "tracer/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

using llvm::Value;
using Index = std::vector<Value*>;

// Output blocks along the last dimension: long rows split into several items.
constexpr std::int64_t kRowBlock = 8192;
// Column reductions: output columns per work item.
constexpr std::int64_t kColumnBlock = 2048;

// ------------------------------------------------------------------ the emitter

class Emitter {
 public:
  Emitter(const Step& step, llvm::LLVMContext& ctx, llvm::Module& m)
      : step_(step), ctx_(ctx), m_(m), b_(ctx) {
    for (auto& r : step.reads) leaves_.insert(r.get());
  }

  // Emits the kernel `name`; returns (work items, elements per item).
  std::pair<std::int64_t, std::int64_t> build(const std::string& name) {
    llvm::Type* ptr = b_.getPtrTy();
    llvm::Type* i64 = b_.getInt64Ty();
    // The body takes each buffer as a noalias argument, so the vectoriser
    // knows the output does not overlap the inputs.
    std::vector<llvm::Type*> body_args(step_.reads.size() + 1, ptr);
    body_args.push_back(i64);
    body_args.push_back(i64);
    auto* body_ty = llvm::FunctionType::get(b_.getVoidTy(), body_args, false);
    auto* body = llvm::Function::Create(body_ty, llvm::Function::InternalLinkage, name + "_body", m_);
    for (size_t i = 0; i <= step_.reads.size(); ++i) {
      body->addParamAttr(unsigned(i), llvm::Attribute::NoAlias);
      body->addParamAttr(unsigned(i), llvm::Attribute::NoCapture);
    }
    body->addFnAttr(llvm::Attribute::NoUnwind);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
    out_ = body->getArg(0);
    for (size_t i = 0; i < step_.reads.size(); ++i) base_[step_.reads[i].get()] = body->getArg(unsigned(i + 1));
    Value* begin = body->getArg(unsigned(step_.reads.size() + 1));
    Value* end = body->getArg(unsigned(step_.reads.size() + 2));
    std::pair<std::int64_t, std::int64_t> shape;
    if (step_.kind == StepKind::Loop) shape = emit_loop(begin, end);
    else shape = emit_reduce(begin, end);
    b_.CreateRetVoid();

    // The entry point unpacks the buffer array.
    auto* entry_ty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false);
    auto* entry = llvm::Function::Create(entry_ty, llvm::Function::ExternalLinkage, name, m_);
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", entry));
    std::vector<Value*> args;
    for (size_t i = 0; i <= step_.reads.size(); ++i)
      args.push_back(b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, entry->getArg(0), i)));
    args.push_back(entry->getArg(1));
    args.push_back(entry->getArg(2));
    b_.CreateCall(body, args);
    b_.CreateRetVoid();
    return shape;
  }

 private:
  // ---------------------------------------------------------------- types and constants

  llvm::Type* reg_type(DType t) {
    switch (t) {
      case DType::bool_: return b_.getInt1Ty();
      case DType::int32: case DType::uint32: return b_.getInt32Ty();
      case DType::int64: return b_.getInt64Ty();
      case DType::float32: return b_.getFloatTy();
      case DType::float64: return b_.getDoubleTy();
    }
    __builtin_unreachable();
  }
  llvm::Type* mem_type(DType t) { return t == DType::bool_ ? b_.getInt8Ty() : reg_type(t); }
  Value* i64c(std::int64_t v) { return b_.getInt64(std::uint64_t(v)); }
  Value* constant(DType t, double v) {
    if (is_floating(t)) return llvm::ConstantFP::get(reg_type(t), v);
    if (t == DType::bool_) return b_.getInt1(v != 0);
    if (t == DType::uint32) return llvm::ConstantInt::get(reg_type(t), std::uint64_t(std::uint32_t(std::int64_t(v))));
    return llvm::ConstantInt::get(reg_type(t), std::uint64_t(std::int64_t(v)), true);
  }
  Value* literal_scalar(const Literal& l) {
    // Exact bits, not via double, for 64-bit integers.
    return visit_dtype(l.dtype, [&](auto tag) -> Value* {
      using T = decltype(tag);
      T v;
      std::memcpy(&v, l.bytes.data(), sizeof(T));
      if constexpr (std::is_same_v<T, bool>) return b_.getInt1(v);
      else if constexpr (std::is_floating_point_v<T>) return llvm::ConstantFP::get(reg_type(l.dtype), double(v));
      else return llvm::ConstantInt::get(reg_type(l.dtype), std::uint64_t(v), std::is_signed_v<T>);
    });
  }

  // ---------------------------------------------------------------- loops

  // for (i = lo; i < hi; ++i) body(i); the builder ends after the loop.
  void loop(Value* lo, Value* hi, const std::function<void(Value*)>& body) {
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", f);
    auto* inner = llvm::BasicBlock::Create(ctx_, "body", f);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", f);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
    i->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(i, hi), inner, exit);
    b_.SetInsertPoint(inner);
    body(i);
    Value* next = b_.CreateAdd(i, i64c(1), "", true, true);
    i->addIncoming(next, b_.GetInsertBlock());
    b_.CreateBr(header);
    b_.SetInsertPoint(exit);
  }

  // Splits a flat index into a row-major multi-index of `shape`.
  Index unflatten(Value* flat, const Shape& shape) {
    Index idx(shape.size());
    for (int d = int(shape.size()) - 1; d >= 0; --d) {
      if (d == 0) {
        idx[d] = flat;
      } else {
        idx[d] = b_.CreateURem(flat, i64c(shape[d]));
        flat = b_.CreateUDiv(flat, i64c(shape[d]));
      }
    }
    return idx;
  }

  Value* linearize(const Index& idx, const Shape& shape) {
    Value* flat = i64c(0);
    auto st = row_major_strides(shape);
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      flat = b_.CreateAdd(flat, b_.CreateMul(idx[d], i64c(st[d]), "", true, true), "", true, true);
    }
    return flat;
  }

  // ---------------------------------------------------------------- memory

  Value* load(const Node& n, Value* base, const Index& idx) {
    llvm::Type* mt = mem_type(n.dtype());
    Value* p = b_.CreateInBoundsGEP(mt, base, linearize(idx, n.shape()));
    Value* v = b_.CreateLoad(mt, p);
    if (n.dtype() == DType::bool_) v = b_.CreateICmpNE(v, b_.getInt8(0));
    return v;
  }

  void store(DType t, Value* flat, Value* v) {
    llvm::Type* mt = mem_type(t);
    if (t == DType::bool_) v = b_.CreateZExt(v, mt);
    b_.CreateStore(v, b_.CreateInBoundsGEP(mt, out_, flat));
  }

  // ---------------------------------------------------------------- expressions

  Value* value(const NodeRef& n, const Index& idx) {
    auto base = base_.find(n.get());
    if (base != base_.end()) return load(*n, base->second, idx);
    auto key = std::make_pair(n.get(), idx);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    Value* v = compute(n, idx);
    memo_[key] = v;
    return v;
  }

  Value* compute(const NodeRef& np, const Index& idx) {
    const Node& n = *np;
    const DType t = n.dtype();
    auto arg = [&](int k) { return value(n.in[k], idx); };
    const bool fl = is_floating(t);
    switch (n.op) {
      case Op::parameter:
      case Op::axis_index:
      case Op::reduce_sum: case Op::reduce_max: case Op::reduce_min: case Op::reduce_prod: case Op::argmax:
      case Op::argmin: case Op::dot_general: case Op::sort: case Op::all_gather: case Op::all_reduce: case Op::reduce_scatter:
      case Op::all_to_all: case Op::collective_permute:
        throw InternalError(std::string(op_name(n.op)) + " reached the expression emitter unmaterialised");
      case Op::constant: return literal_scalar(*n.attr<attr::Constant>().value);
      case Op::iota: return convert_value(idx[n.attr<attr::Iota>().dimension], DType::int64, t);
      case Op::sharding_constraint: return arg(0);

      // Unary
      case Op::neg: return fl ? b_.CreateFNeg(arg(0)) : b_.CreateNeg(arg(0));
      case Op::sin: return emit_math(b_, MathFn::sin, arg(0));
      case Op::cos: return emit_math(b_, MathFn::cos, arg(0));
      case Op::tan: return emit_math(b_, MathFn::tan, arg(0));
      case Op::tanh: return emit_math(b_, MathFn::tanh, arg(0));
      case Op::exp: return emit_math(b_, MathFn::exp, arg(0));
      case Op::expm1: return emit_math(b_, MathFn::expm1, arg(0));
      case Op::log: return emit_math(b_, MathFn::log, arg(0));
      case Op::log1p: return emit_math(b_, MathFn::log1p, arg(0));
      case Op::logistic: return emit_math(b_, MathFn::logistic, arg(0));
      case Op::erf_inv: return emit_math(b_, MathFn::erf_inv, arg(0));
      case Op::erf: return emit_math(b_, MathFn::erf, arg(0));
      case Op::sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, arg(0));
      case Op::rsqrt:
        return b_.CreateFDiv(constant(t, 1.0), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, arg(0)));
      case Op::abs: {
        Value* x = arg(0);
        if (fl) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
        if (t == DType::uint32) return x;
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
      }
      case Op::sign: {
        Value* x = arg(0);
        Value* zero = constant(t, 0), *one = constant(t, 1);
        if (fl) {
          Value* s = b_.CreateSelect(b_.CreateFCmpOGT(x, zero), one, x);
          return b_.CreateSelect(b_.CreateFCmpOLT(x, zero), constant(t, -1), s);
        }
        if (t == DType::uint32) return b_.CreateZExt(b_.CreateICmpNE(x, zero), reg_type(t));
        Value* s = b_.CreateSelect(b_.CreateICmpSGT(x, zero), one, zero);
        return b_.CreateSelect(b_.CreateICmpSLT(x, zero), constant(t, -1), s);
      }
      case Op::floor: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, arg(0));
      case Op::ceil: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, arg(0));
      case Op::round: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::roundeven, arg(0));
      case Op::is_finite: {
        Value* x = arg(0);
        return b_.CreateFCmpONE(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                                llvm::ConstantFP::getInfinity(x->getType()));
      }
      case Op::not_: return b_.CreateNot(arg(0));

      // Binary
      case Op::add: return fl ? b_.CreateFAdd(arg(0), arg(1)) : b_.CreateAdd(arg(0), arg(1));
      case Op::sub: return fl ? b_.CreateFSub(arg(0), arg(1)) : b_.CreateSub(arg(0), arg(1));
      case Op::mul: return fl ? b_.CreateFMul(arg(0), arg(1)) : b_.CreateMul(arg(0), arg(1));
      case Op::div: return fl ? b_.CreateFDiv(arg(0), arg(1)) : int_divrem(t, arg(0), arg(1), true);
      case Op::rem: return fl ? b_.CreateFRem(arg(0), arg(1)) : int_divrem(t, arg(0), arg(1), false);
      case Op::pow: return emit_math(b_, MathFn::pow, arg(0), arg(1));
      case Op::atan2: return emit_math(b_, MathFn::atan2, arg(0), arg(1));
      case Op::max: return minmax(t, arg(0), arg(1), true);
      case Op::min: return minmax(t, arg(0), arg(1), false);
      case Op::and_: return b_.CreateAnd(arg(0), arg(1));
      case Op::or_: return b_.CreateOr(arg(0), arg(1));
      case Op::xor_: return b_.CreateXor(arg(0), arg(1));
      case Op::shift_left:
      case Op::shift_right_logical: {
        Value* a = arg(0), *s = arg(1);
        unsigned bits = reg_type(t)->getIntegerBitWidth();
        Value* big = b_.CreateICmpUGE(s, llvm::ConstantInt::get(reg_type(t), bits));
        Value* safe = b_.CreateSelect(big, llvm::ConstantInt::get(reg_type(t), 0), s);
        Value* r = n.op == Op::shift_left ? b_.CreateShl(a, safe) : b_.CreateLShr(a, safe);
        return b_.CreateSelect(big, llvm::ConstantInt::get(reg_type(t), 0), r);
      }

      // Compare
      case Op::eq: case Op::ne: case Op::lt: case Op::le: case Op::gt: case Op::ge:
        return compare(n.op, n.in[0]->dtype(), arg(0), arg(1));

      case Op::select: return b_.CreateSelect(arg(0), arg(1), arg(2));
      case Op::threefry2x32: return threefry(arg(0), arg(1), arg(2), arg(3), int(n.attr<attr::Word>().word));
      case Op::convert: return convert_value(arg(0), n.in[0]->dtype(), t);
      case Op::bitcast_convert: return b_.CreateBitCast(arg(0), reg_type(t));

      // Data movement: the operand at a transformed index.
      case Op::broadcast_in_dim: {
        const Shape& s = n.in[0]->shape();
        Index sub(s.size());
        for (size_t i = 0; i < s.size(); ++i) sub[i] = s[i] == 1 ? i64c(0) : idx[n.attr<attr::Dimensions>().dims[i]];
        return value(n.in[0], sub);
      }
      case Op::reshape: {
        const Shape& s = n.in[0]->shape();
        if (s.empty()) return value(n.in[0], {});
        return value(n.in[0], unflatten(linearize(idx, n.shape()), s));
      }
      case Op::transpose: {
        Index sub(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) sub[n.attr<attr::Dimensions>().dims[i]] = idx[i];
        return value(n.in[0], sub);
      }
      case Op::rev: {
        Index sub = idx;
        for (auto d : n.attr<attr::Dimensions>().dims) sub[d] = b_.CreateSub(i64c(n.shape()[d] - 1), idx[d]);
        return value(n.in[0], sub);
      }
      case Op::slice: {
        Index sub(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) {
          Value* v = idx[i];
          if (n.attr<attr::Slice>().stride[i] != 1) v = b_.CreateMul(v, i64c(n.attr<attr::Slice>().stride[i]), "", true, true);
          if (n.attr<attr::Slice>().start[i] != 0) v = b_.CreateAdd(v, i64c(n.attr<attr::Slice>().start[i]), "", true, true);
          sub[i] = v;
        }
        return value(n.in[0], sub);
      }
      case Op::pad: {
        const Shape& s = n.in[0]->shape();
        Value* inside = b_.getTrue();
        Index sub(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) {
          std::int64_t period = n.attr<attr::Pad>().interior[i] + 1;
          Value* r = b_.CreateSub(idx[i], i64c(n.attr<attr::Pad>().low[i]));
          Value* ok = b_.CreateICmpSGE(r, i64c(0));
          Value* q = r;
          if (period != 1) {
            Value* rc = b_.CreateSelect(ok, r, i64c(0));
            q = b_.CreateUDiv(rc, i64c(period));
            ok = b_.CreateAnd(ok, b_.CreateICmpEQ(b_.CreateURem(rc, i64c(period)), i64c(0)));
          }
          ok = b_.CreateAnd(ok, b_.CreateICmpSLT(q, i64c(s[i])));
          inside = b_.CreateAnd(inside, ok);
          sub[i] = q;
        }
        // Read a safe index outside, then choose.
        for (auto& v : sub) v = b_.CreateSelect(inside, v, i64c(0));
        return b_.CreateSelect(inside, value(n.in[0], sub), value(n.in[1], {}));
      }
      case Op::concatenate: {
        const std::int64_t d = n.attr<attr::Dimension>().dimension;
        Value* result = nullptr;
        std::int64_t offset = 0;
        for (size_t k = 0; k < n.in.size(); ++k) {
          std::int64_t len = n.in[k]->shape()[d];
          Index sub = idx;
          Value* local = b_.CreateSub(idx[d], i64c(offset));
          Value* in_range = b_.CreateICmpULT(local, i64c(len));
          sub[d] = b_.CreateSelect(in_range, local, i64c(0));
          Value* v = value(n.in[k], sub);
          result = result ? b_.CreateSelect(in_range, v, result) : v;
          offset += len;
        }
        return result;
      }
      case Op::dynamic_slice: {
        const Shape& s = n.in[0]->shape();
        Index sub(idx.size());
        for (size_t i = 0; i < idx.size(); ++i)
          sub[i] = b_.CreateAdd(idx[i], clamped_start(n.in[i + 1], s[i] - n.attr<attr::DynamicSlice>().sizes[i]));
        return value(n.in[0], sub);
      }
      case Op::dynamic_update_slice: {
        const Shape& s = n.in[0]->shape();
        const Shape& u = n.in[1]->shape();
        Value* inside = b_.getTrue();
        Index sub(idx.size());
        for (size_t i = 0; i < idx.size(); ++i) {
          Value* r = b_.CreateSub(idx[i], clamped_start(n.in[i + 2], s[i] - u[i]));
          Value* ok = b_.CreateICmpULT(r, i64c(u[i]));
          inside = b_.CreateAnd(inside, ok);
          sub[i] = r;
        }
        for (auto& v : sub) v = b_.CreateSelect(inside, v, i64c(0));
        return b_.CreateSelect(inside, value(n.in[1], sub), arg(0));
      }
    }
    __builtin_unreachable();
  }

  // Threefry-2x32, 20 rounds (the reference: tracer/rules_elementwise.cpp).
  // The two words come from the same rounds; LLVM shares them when both are used.
  Value* threefry(Value* k0, Value* k1, Value* x0, Value* x1, int word) {
    auto c = [&](std::uint32_t v) { return b_.getInt32(v); };
    Value* ks[3] = {k0, k1, b_.CreateXor(b_.CreateXor(k0, k1), c(0x1BD11BDAu))};
    static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
    x0 = b_.CreateAdd(x0, ks[0]);
    x1 = b_.CreateAdd(x1, ks[1]);
    for (int i = 0; i < 5; ++i) {
      for (int r = 0; r < 4; ++r) {
        x0 = b_.CreateAdd(x0, x1);
        x1 = b_.CreateIntrinsic(llvm::Intrinsic::fshl, {b_.getInt32Ty()}, {x1, x1, c(std::uint32_t(rot[i % 2][r]))});
        x1 = b_.CreateXor(x1, x0);
      }
      x0 = b_.CreateAdd(x0, ks[(i + 1) % 3]);
      x1 = b_.CreateAdd(x1, b_.CreateAdd(ks[(i + 2) % 3], c(std::uint32_t(i + 1))));
    }
    return word == 0 ? x0 : x1;
  }

  // A dynamic start index, clamped to [0, limit] as XLA does.
  Value* clamped_start(const NodeRef& s, std::int64_t limit) {
    Value* v = convert_value(value(s, {}), s->dtype(), DType::int64);
    v = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, v, i64c(0));
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, v, i64c(limit));
  }

  Value* compare(Op op, DType t, Value* a, Value* b) {
    if (is_floating(t)) {
      switch (op) {
        case Op::eq: return b_.CreateFCmpOEQ(a, b);
        case Op::ne: return b_.CreateFCmpUNE(a, b);
        case Op::lt: return b_.CreateFCmpOLT(a, b);
        case Op::le: return b_.CreateFCmpOLE(a, b);
        case Op::gt: return b_.CreateFCmpOGT(a, b);
        default: return b_.CreateFCmpOGE(a, b);
      }
    }
    const bool u = t == DType::uint32 || t == DType::bool_;
    switch (op) {
      case Op::eq: return b_.CreateICmpEQ(a, b);
      case Op::ne: return b_.CreateICmpNE(a, b);
      case Op::lt: return u ? b_.CreateICmpULT(a, b) : b_.CreateICmpSLT(a, b);
      case Op::le: return u ? b_.CreateICmpULE(a, b) : b_.CreateICmpSLE(a, b);
      case Op::gt: return u ? b_.CreateICmpUGT(a, b) : b_.CreateICmpSGT(a, b);
      default: return u ? b_.CreateICmpUGE(a, b) : b_.CreateICmpSGE(a, b);
    }
  }

  // NaN-propagating for floats, as XLA's max and min.
  Value* minmax(DType t, Value* a, Value* b, bool is_max) {
    if (is_floating(t)) return b_.CreateBinaryIntrinsic(is_max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, a, b);
    if (t == DType::bool_) return is_max ? b_.CreateOr(a, b) : b_.CreateAnd(a, b);
    const bool u = t == DType::uint32;
    auto id = is_max ? (u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax) : (u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin);
    return b_.CreateBinaryIntrinsic(id, a, b);
  }

  // XLA's integer division: x / 0 = -1, x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0.
  Value* int_divrem(DType t, Value* a, Value* b, bool div) {
    llvm::Type* ty = reg_type(t);
    Value* zero = llvm::ConstantInt::get(ty, 0);
    Value* is_zero = b_.CreateICmpEQ(b, zero);
    if (t == DType::uint32) {
      Value* safe = b_.CreateSelect(is_zero, llvm::ConstantInt::get(ty, 1), b);
      Value* r = div ? b_.CreateUDiv(a, safe) : b_.CreateURem(a, safe);
      return b_.CreateSelect(is_zero, div ? llvm::ConstantInt::get(ty, -1, true) : a, r);
    }
    Value* minus1 = llvm::ConstantInt::get(ty, -1, true);
    Value* overflow = b_.CreateAnd(b_.CreateICmpEQ(a, llvm::ConstantInt::get(ty, llvm::APInt::getSignedMinValue(ty->getIntegerBitWidth()))),
                                   b_.CreateICmpEQ(b, minus1));
    Value* safe = b_.CreateSelect(b_.CreateOr(is_zero, overflow), llvm::ConstantInt::get(ty, 1), b);
    Value* r = div ? b_.CreateSDiv(a, safe) : b_.CreateSRem(a, safe);
    r = b_.CreateSelect(overflow, div ? a : zero, r);
    return b_.CreateSelect(is_zero, div ? minus1 : a, r);
  }

  // Conversion with XLA's semantics (tracer/convert.hpp).
  Value* convert_value(Value* v, DType from, DType to) {
    if (from == to) return v;
    llvm::Type* tt = reg_type(to);
    const bool fsigned = from != DType::uint32 && from != DType::bool_;
    if (to == DType::bool_) {
      if (is_floating(from)) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
      return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    }
    if (is_floating(to)) {
      if (is_floating(from)) return b_.CreateFPCast(v, tt);
      return fsigned ? b_.CreateSIToFP(v, tt) : b_.CreateUIToFP(v, tt);
    }
    // to an integer
    if (is_floating(from)) {
      const bool tsigned = to != DType::uint32;
      unsigned bits = tt->getIntegerBitWidth();
      double lo = tsigned ? -std::ldexp(1.0, int(bits) - 1) : 0.0;
      double hi = tsigned ? std::ldexp(1.0, int(bits) - 1) : std::ldexp(1.0, int(bits));
      llvm::Type* ft = v->getType();
      Value* nan = b_.CreateFCmpUNO(v, v);
      Value* below = b_.CreateFCmpOLE(v, llvm::ConstantFP::get(ft, lo));
      Value* above = b_.CreateFCmpOGE(v, llvm::ConstantFP::get(ft, hi));
      Value* safe = b_.CreateSelect(b_.CreateOr(nan, b_.CreateOr(below, above)), llvm::ConstantFP::get(ft, 0.0), v);
      Value* r = tsigned ? b_.CreateFPToSI(safe, tt) : b_.CreateFPToUI(safe, tt);
      llvm::APInt mn = tsigned ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits);
      llvm::APInt mx = tsigned ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits);
      r = b_.CreateSelect(below, llvm::ConstantInt::get(tt, mn), r);
      r = b_.CreateSelect(above, llvm::ConstantInt::get(tt, mx), r);
      return b_.CreateSelect(nan, llvm::ConstantInt::get(tt, 0), r);
    }
    return fsigned ? b_.CreateSExtOrTrunc(v, tt) : b_.CreateZExtOrTrunc(v, tt);
  }

  // ---------------------------------------------------------------- kernels

  std::pair<std::int64_t, std::int64_t> emit_loop(Value* begin, Value* end) {
    const Node& root = *step_.node;
    const Shape& s = root.shape();
    if (s.empty() || numel(s) == 0) {
      if (numel(s) == 1) {
        memo_.clear();
        store(root.dtype(), i64c(0), value(step_.node, {}));
      }
      return {1, 1};
    }
    const std::int64_t last = s.back();
    const std::int64_t rows = numel(s) / last;
    const std::int64_t block = std::min(last, kRowBlock);
    const std::int64_t nb = ceil_div(last, block);
    Shape row_shape(s.begin(), s.end() - 1);
    loop(begin, end, [&](Value* item) {
      Value* row = b_.CreateUDiv(item, i64c(nb));
      Value* jb = b_.CreateURem(item, i64c(nb));
      Value* j0 = b_.CreateMul(jb, i64c(block));
      Value* j1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(j0, i64c(block)), i64c(last));
      Index row_idx = unflatten(row, row_shape);
      Value* row_base = b_.CreateMul(row, i64c(last));
      loop(j0, j1, [&](Value* j) {
        Index idx = row_idx;
        idx.push_back(j);
        memo_.clear();
        store(root.dtype(), b_.CreateAdd(row_base, j), value(step_.node, idx));
      });
    });
    return {rows * nb, block};
  }

  struct Reduction {
    Op op;
    DType t;
    std::vector<bool> reduced;  // per input dim
  };

  Value* identity(Op op, DType t) { return literal_scalar(reduction_identity(op, t)); }

  Value* combine(Op op, DType t, Value* acc, Value* v) {
    const bool fl = is_floating(t);
    llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc();  // reductions may be reordered (vectorised)
    b_.setFastMathFlags(fmf);
    switch (op) {
      case Op::reduce_sum:
        if (!fl) return b_.CreateAdd(acc, v);
        return b_.CreateFAdd(acc, v);
      case Op::reduce_prod:
        if (!fl) return b_.CreateMul(acc, v);
        return b_.CreateFMul(acc, v);
      case Op::reduce_max: return minmax(t, acc, v, true);
      default: return minmax(t, acc, v, false);
    }
  }

  std::pair<std::int64_t, std::int64_t> emit_reduce(Value* begin, Value* end) {
    const Node& root = *step_.node;
    const NodeRef& x = root.in[0];
    const Shape& xs = x->shape();
    std::vector<bool> reduced(xs.size(), false);
    for (auto a : reduced_axes(root)) reduced[a] = true;
    const bool arg = root.op == Op::argmax || root.op == Op::argmin;
    int last_reduced = -1;
    for (int d = 0; d < int(xs.size()); ++d)
      if (reduced[d]) last_reduced = d;
    const bool column = !arg && last_reduced >= 0 && last_reduced < int(xs.size()) - 1;
    if (column) return emit_column_reduce(begin, end, reduced, last_reduced);
    return emit_row_reduce(begin, end, reduced, arg);
  }

  // Loops over the reduced dims (in order), calling body with the full input index.
  void reduce_loops(const Shape& xs, const std::vector<bool>& reduced, Index idx, size_t d,
                    const std::function<void(const Index&)>& body) {
    while (d < xs.size() && !reduced[d]) ++d;
    if (d == xs.size()) {
      body(idx);
      return;
    }
    loop(i64c(0), i64c(xs[d]), [&](Value* i) {
      Index next = idx;
      next[d] = i;
      reduce_loops(xs, reduced, next, d + 1, body);
    });
  }

  std::pair<std::int64_t, std::int64_t> emit_row_reduce(Value* begin, Value* end, const std::vector<bool>& reduced,
                                                        bool arg) {
    const Node& root = *step_.node;
    const NodeRef& x = root.in[0];
    const Shape& xs = x->shape();
    const DType xt = x->dtype();
    const Shape& os = root.shape();
    const std::int64_t n_out = numel(os);
    std::int64_t per_out = 1;
    for (size_t d = 0; d < xs.size(); ++d)
      if (reduced[d]) per_out *= xs[d];
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    llvm::IRBuilder<> entry(&f->getEntryBlock(), f->getEntryBlock().begin());
    llvm::AllocaInst* acc = entry.CreateAlloca(reg_type(xt));
    llvm::AllocaInst* best = arg ? entry.CreateAlloca(b_.getInt64Ty()) : nullptr;
    const bool is_max = root.op == Op::argmax;
    loop(begin, end, [&](Value* o) {
      Index oidx = unflatten(o, os);
      Index idx(xs.size(), nullptr);
      for (size_t d = 0, k = 0; d < xs.size(); ++d)
        if (!reduced[d]) idx[d] = oidx[k++];
      if (arg) {
        b_.CreateStore(identity(is_max ? Op::reduce_max : Op::reduce_min, xt), acc);
        b_.CreateStore(i64c(0), best);
      } else {
        b_.CreateStore(identity(root.op, xt), acc);
      }
      reduce_loops(xs, reduced, idx, 0, [&](const Index& full) {
        memo_.clear();
        Value* v = value(x, full);
        Value* a = b_.CreateLoad(reg_type(xt), acc);
        if (!arg) {
          b_.CreateStore(combine(root.op, xt, a, v), acc);
          return;
        }
        // Take v when it beats the best so far; NaN beats everything, once.
        Value* take;
        if (is_floating(xt)) {
          Value* a_nan = b_.CreateFCmpUNO(a, a);
          Value* v_nan = b_.CreateFCmpUNO(v, v);
          Value* better = is_max ? b_.CreateFCmpOGT(v, a) : b_.CreateFCmpOLT(v, a);
          take = b_.CreateAnd(b_.CreateNot(a_nan), b_.CreateOr(v_nan, better));
        } else {
          take = compare(is_max ? Op::gt : Op::lt, xt, v, a);
        }
        b_.CreateStore(b_.CreateSelect(take, v, a), acc);
        b_.CreateStore(b_.CreateSelect(take, full[root.attr<attr::ArgReduce>().dimension], b_.CreateLoad(b_.getInt64Ty(), best)), best);
      });
      Value* r = arg ? convert_value(b_.CreateLoad(b_.getInt64Ty(), best), DType::int64, root.dtype())
                     : b_.CreateLoad(reg_type(xt), acc);
      store(root.dtype(), o, r);
    });
    return {n_out, per_out};
  }

  std::pair<std::int64_t, std::int64_t> emit_column_reduce(Value* begin, Value* end, const std::vector<bool>& reduced,
                                                           int last_reduced) {
    const Node& root = *step_.node;
    const NodeRef& x = root.in[0];
    const Shape& xs = x->shape();
    const DType xt = x->dtype();
    // Output = (kept dims before the last reduced one) x (the tail after it).
    Shape outer_shape, tail_shape;
    for (int d = 0; d < int(xs.size()); ++d) {
      if (reduced[d]) continue;
      (d < last_reduced ? outer_shape : tail_shape).push_back(xs[d]);
    }
    const std::int64_t tail = numel(tail_shape);
    const std::int64_t block = std::min(tail, kColumnBlock);
    const std::int64_t nb = ceil_div(tail, block);
    std::int64_t per_item = block;
    for (size_t d = 0; d < xs.size(); ++d)
      if (reduced[d]) per_item *= xs[d];
    loop(begin, end, [&](Value* item) {
      Value* ob = b_.CreateUDiv(item, i64c(nb));
      Value* t0 = b_.CreateMul(b_.CreateURem(item, i64c(nb)), i64c(block));
      Value* t1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(t0, i64c(block)), i64c(tail));
      Value* out_base = b_.CreateMul(ob, i64c(tail));
      loop(t0, t1, [&](Value* t) { store(root.dtype(), b_.CreateAdd(out_base, t), identity(root.op, xt)); });
      Index oidx = unflatten(ob, outer_shape);
      Index idx(xs.size(), nullptr);
      for (int d = 0, k = 0; d < last_reduced; ++d)
        if (!reduced[d]) idx[d] = oidx[k++];
      reduce_loops(xs, reduced, idx, 0, [&](const Index& partial) {
        loop(t0, t1, [&](Value* t) {
          Index full = partial;
          Index tidx = unflatten(t, tail_shape);
          for (int d = last_reduced + 1, k = 0; d < int(xs.size()); ++d) full[d] = tidx[k++];
          memo_.clear();
          Value* v = value(x, full);
          llvm::Type* mt = mem_type(xt);
          Value* p = b_.CreateInBoundsGEP(mt, out_, b_.CreateAdd(out_base, t));
          Value* a = b_.CreateLoad(mt, p);
          if (xt == DType::bool_) a = b_.CreateICmpNE(a, b_.getInt8(0));
          Value* r = combine(root.op, xt, a, v);
          if (xt == DType::bool_) r = b_.CreateZExt(r, mt);
          b_.CreateStore(r, p);
        });
      });
    });
    return {numel(outer_shape) * nb, per_item};
  }

  const Step& step_;
  llvm::LLVMContext& ctx_;
  llvm::Module& m_;
  Builder b_;
  std::unordered_set<const Node*> leaves_;
  std::unordered_map<const Node*, Value*> base_;
  Value* out_ = nullptr;
  std::map<std::pair<const Node*, Index>, Value*> memo_;
};

// The kernel shape (items, work) without building IR: what emit_* return.
std::pair<std::int64_t, std::int64_t> kernel_shape(const Step& step) {
  const Node& root = *step.node;
  if (numel(root.shape()) == 0) return {0, 1};  // an empty result: nothing to compute
  if (step.kind == StepKind::Loop) {
    const Shape& s = root.shape();
    if (s.empty()) return {1, 1};
    const std::int64_t last = s.back(), block = std::min(last, kRowBlock);
    return {numel(s) / last * ceil_div(last, block), block};
  }
  const Shape& xs = root.in[0]->shape();
  std::vector<bool> reduced(xs.size(), false);
  for (auto a : reduced_axes(root)) reduced[a] = true;
  int last_reduced = -1;
  std::int64_t per = 1;
  for (int d = 0; d < int(xs.size()); ++d)
    if (reduced[d]) last_reduced = d, per *= xs[d];
  const bool arg = root.op == Op::argmax || root.op == Op::argmin;
  if (!arg && last_reduced >= 0 && last_reduced < int(xs.size()) - 1) {
    std::int64_t outer = 1, tail = 1;
    for (int d = 0; d < int(xs.size()); ++d)
      if (!reduced[d]) (d < last_reduced ? outer : tail) *= xs[d];
    const std::int64_t block = std::min(tail, kColumnBlock);
    return {outer * ceil_div(tail, block), per * block};
  }
  return {numel(root.shape()), per};
}

}  // namespace

Kernel compile_kernel(const Step& step) {
  TESSEL_CHECK_INTERNAL(step.kind == StepKind::Loop || step.kind == StepKind::Reduce);
  Kernel k;
  // Exact structure and bits of the kernel's expression (tracer/key.hpp).
  k.key = (step.kind == StepKind::Loop ? "L" : "R") + fingerprint(step.node, step.reads).bytes();
  auto [items, work] = kernel_shape(step);
  k.items = items;
  k.work_per_item = work;
  k.code = Jit::get().cached(k.key, [&]() -> ModuleRef {
    static std::atomic<int> counter{0};
    const std::string name = "tessel_kernel_" + std::to_string(counter++);
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto m = Jit::get().new_module(name, *ctx);
    Emitter e(step, *ctx, *m);
    e.build(name);
    return Jit::get().compile(std::move(m), std::move(ctx), {name});
  });
  k.fn = reinterpret_cast<KernelFn>(k.code->symbols.at(0));
  return k;
}

}  // namespace tessel::codegen
