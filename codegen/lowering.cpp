#include "codegen/lowering.hpp"

#include "tracer/rules.hpp"

#include <cmath>
#include <string>

#include "codegen/math.hpp"
#include "codegen/narrow_float.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

using llvm::Value;

#define TESSEL_LOWER(OP) \
  template <>            \
  Value* Lowering<Op::OP>::expr([[maybe_unused]] ExprEmitter& e, [[maybe_unused]] const Node& n, \
                                [[maybe_unused]] const Index& idx)

// Ops codegen/schedule.cpp makes steps of (materialised, never inlined).
#define TESSEL_NOT_AN_EXPRESSION(OP)                                                                       \
  TESSEL_LOWER(OP) {                                                                                       \
    throw InternalError(std::string(op_name(n.op)) + " reached the expression emitter unmaterialised"); \
  }

TESSEL_NOT_AN_EXPRESSION(parameter)
TESSEL_NOT_AN_EXPRESSION(axis_index)
TESSEL_NOT_AN_EXPRESSION(reduce_sum)
TESSEL_NOT_AN_EXPRESSION(reduce_max)
TESSEL_NOT_AN_EXPRESSION(reduce_min)
TESSEL_NOT_AN_EXPRESSION(reduce_prod)
TESSEL_NOT_AN_EXPRESSION(argmax)
TESSEL_NOT_AN_EXPRESSION(argmin)
TESSEL_NOT_AN_EXPRESSION(dot_general)
TESSEL_NOT_AN_EXPRESSION(sort)
TESSEL_NOT_AN_EXPRESSION(cumsum)  // a scan (codegen/library.cpp)
TESSEL_NOT_AN_EXPRESSION(cumprod)
TESSEL_NOT_AN_EXPRESSION(cummax)
TESSEL_NOT_AN_EXPRESSION(cummin)
TESSEL_NOT_AN_EXPRESSION(cumlogsumexp)
TESSEL_NOT_AN_EXPRESSION(top_k)
TESSEL_NOT_AN_EXPRESSION(cholesky)  // LAPACK (codegen/lapack.cpp)
TESSEL_NOT_AN_EXPRESSION(triangular_solve)
TESSEL_NOT_AN_EXPRESSION(lu)
TESSEL_NOT_AN_EXPRESSION(distributed_lu)
TESSEL_NOT_AN_EXPRESSION(distributed_cholesky)
TESSEL_NOT_AN_EXPRESSION(distributed_triangular_solve)
TESSEL_NOT_AN_EXPRESSION(qr)
TESSEL_NOT_AN_EXPRESSION(eigh)
TESSEL_NOT_AN_EXPRESSION(svd)
TESSEL_NOT_AN_EXPRESSION(eig)
TESSEL_NOT_AN_EXPRESSION(fft)  // FFTW (codegen/fft.cpp)
TESSEL_NOT_AN_EXPRESSION(conv)  // oneDNN or tessel's loops (codegen/conv.cpp)
TESSEL_NOT_AN_EXPRESSION(debug_callback)  // the host function (codegen/library.cpp)
TESSEL_NOT_AN_EXPRESSION(host_call)  // the host function (codegen/library.cpp)
TESSEL_NOT_AN_EXPRESSION(all_gather)
TESSEL_NOT_AN_EXPRESSION(all_reduce)
TESSEL_NOT_AN_EXPRESSION(reduce_scatter)
TESSEL_NOT_AN_EXPRESSION(all_to_all)
TESSEL_NOT_AN_EXPRESSION(collective_permute)
// Structural ops: inline_calls (tracer/rewrite.hpp) removes them before codegen.
TESSEL_NOT_AN_EXPRESSION(tuple)
TESSEL_NOT_AN_EXPRESSION(get_tuple_element)
TESSEL_NOT_AN_EXPRESSION(call)
TESSEL_NOT_AN_EXPRESSION(custom_jvp_call)
TESSEL_NOT_AN_EXPRESSION(custom_vjp_call)
TESSEL_NOT_AN_EXPRESSION(custom_lin)
TESSEL_NOT_AN_EXPRESSION(remat_call)
TESSEL_NOT_AN_EXPRESSION(remat_lin)
TESSEL_NOT_AN_EXPRESSION(shard_map)  // the partitioner inlines its body
TESSEL_NOT_AN_EXPRESSION(cond)  // control flow runs its regions as executables (compile.cpp)
TESSEL_NOT_AN_EXPRESSION(while_)
TESSEL_NOT_AN_EXPRESSION(scan)
// Complex values are pairs of real values by codegen (codegen/complex.cpp).
TESSEL_NOT_AN_EXPRESSION(real)
TESSEL_NOT_AN_EXPRESSION(imag)
TESSEL_NOT_AN_EXPRESSION(conj)
TESSEL_NOT_AN_EXPRESSION(complex)

// ------------------------------------------------------------------ leaves

TESSEL_LOWER(constant) { return e.literal_scalar(*n.attr<attr::Constant>().value); }
TESSEL_LOWER(iota) { return e.convert_value(idx[n.attr<attr::Iota>().dimension], DType::int64, n.dtype()); }
TESSEL_LOWER(sharding_constraint) { return e.arg(n, idx, 0); }
TESSEL_LOWER(pvary) { return e.arg(n, idx, 0); }  // a type change only
TESSEL_LOWER(stop_gradient) { return e.arg(n, idx, 0); }  // autodiff saw it already
TESSEL_LOWER(checkpoint_name) { return e.arg(n, idx, 0); }  // autodiff saw it already
TESSEL_LOWER(remat_barrier) { return e.arg(n, idx, 0); }  // its second operand orders the step only

// ------------------------------------------------------------------ unary

#define TESSEL_LOWER_MATH1(OP, FN) \
  TESSEL_LOWER(OP) { return emit_math(e.b, MathFn::FN, e.arg(n, idx, 0)); }
TESSEL_LOWER(sin) { return e.trig(MathFn::sin, e.arg(n, idx, 0)); }
TESSEL_LOWER(cos) { return e.trig(MathFn::cos, e.arg(n, idx, 0)); }
TESSEL_LOWER(tan) { return e.trig(MathFn::tan, e.arg(n, idx, 0)); }
TESSEL_LOWER_MATH1(tanh, tanh)
TESSEL_LOWER_MATH1(exp, exp)
TESSEL_LOWER_MATH1(expm1, expm1)
TESSEL_LOWER_MATH1(log, log)
TESSEL_LOWER_MATH1(log1p, log1p)
TESSEL_LOWER_MATH1(logistic, logistic)
TESSEL_LOWER_MATH1(erf_inv, erf_inv)
TESSEL_LOWER_MATH1(erf, erf)
#undef TESSEL_LOWER_MATH1

#define TESSEL_LOWER_INTRINSIC1(OP, ID) \
  TESSEL_LOWER(OP) { return e.b.CreateUnaryIntrinsic(llvm::Intrinsic::ID, e.arg(n, idx, 0)); }
TESSEL_LOWER_INTRINSIC1(sqrt, sqrt)
TESSEL_LOWER_INTRINSIC1(floor, floor)
TESSEL_LOWER_INTRINSIC1(ceil, ceil)
TESSEL_LOWER_INTRINSIC1(round, roundeven)
#undef TESSEL_LOWER_INTRINSIC1

TESSEL_LOWER(neg) {
  Value* x = e.arg(n, idx, 0);
  return is_floating(n.dtype()) ? e.b.CreateFNeg(x) : e.b.CreateNeg(x);
}
TESSEL_LOWER(rsqrt) {
  return e.b.CreateFDiv(e.constant(n.dtype(), 1.0), e.b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, e.arg(n, idx, 0)));
}
TESSEL_LOWER(abs) {
  const DType t = n.dtype();
  Value* x = e.arg(n, idx, 0);
  if (is_floating(t)) return e.b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  if (is_unsigned_int(t)) return x;
  return e.b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, e.b.getFalse());
}
TESSEL_LOWER(sign) {
  const DType t = n.dtype();
  auto& b = e.b;
  Value* x = e.arg(n, idx, 0);
  Value *zero = e.constant(t, 0), *one = e.constant(t, 1);
  if (is_floating(t)) {
    Value* s = b.CreateSelect(b.CreateFCmpOGT(x, zero), one, x);
    return b.CreateSelect(b.CreateFCmpOLT(x, zero), e.constant(t, -1), s);
  }
  if (is_unsigned_int(t)) return b.CreateZExt(b.CreateICmpNE(x, zero), e.reg_type(t));
  Value* s = b.CreateSelect(b.CreateICmpSGT(x, zero), one, zero);
  return b.CreateSelect(b.CreateICmpSLT(x, zero), e.constant(t, -1), s);
}
TESSEL_LOWER(is_finite) {
  Value* x = e.arg(n, idx, 0);
  return e.b.CreateFCmpONE(e.b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x),
                           llvm::ConstantFP::getInfinity(x->getType()));
}
TESSEL_LOWER(not_) { return e.b.CreateNot(e.arg(n, idx, 0)); }

// ------------------------------------------------------------------ binary

#define TESSEL_LOWER_ARITH(OP, FLOAT, INT)                                                         \
  TESSEL_LOWER(OP) {                                                                               \
    Value *a = e.arg(n, idx, 0), *b = e.arg(n, idx, 1);                                           \
    return is_floating(n.dtype()) ? e.b.Create##FLOAT(a, b) : e.b.Create##INT(a, b);               \
  }
TESSEL_LOWER_ARITH(add, FAdd, Add)
TESSEL_LOWER_ARITH(sub, FSub, Sub)
TESSEL_LOWER_ARITH(mul, FMul, Mul)
#undef TESSEL_LOWER_ARITH

TESSEL_LOWER(div) {
  Value *a = e.arg(n, idx, 0), *b = e.arg(n, idx, 1);
  return is_floating(n.dtype()) ? e.b.CreateFDiv(a, b) : e.int_divrem(n.dtype(), a, b, true);
}
TESSEL_LOWER(rem) {
  Value *a = e.arg(n, idx, 0), *b = e.arg(n, idx, 1);
  return is_floating(n.dtype()) ? e.b.CreateFRem(a, b) : e.int_divrem(n.dtype(), a, b, false);
}
TESSEL_LOWER(pow) { return emit_math(e.b, MathFn::pow, e.arg(n, idx, 0), e.arg(n, idx, 1)); }
TESSEL_LOWER(atan2) { return emit_math(e.b, MathFn::atan2, e.arg(n, idx, 0), e.arg(n, idx, 1)); }
TESSEL_LOWER(max) { return e.minmax(n.dtype(), e.arg(n, idx, 0), e.arg(n, idx, 1), true); }
TESSEL_LOWER(min) { return e.minmax(n.dtype(), e.arg(n, idx, 0), e.arg(n, idx, 1), false); }
TESSEL_LOWER(and_) { return e.b.CreateAnd(e.arg(n, idx, 0), e.arg(n, idx, 1)); }
TESSEL_LOWER(or_) { return e.b.CreateOr(e.arg(n, idx, 0), e.arg(n, idx, 1)); }
TESSEL_LOWER(xor_) { return e.b.CreateXor(e.arg(n, idx, 0), e.arg(n, idx, 1)); }

namespace {
// Shifts by the bit width or more give 0 (XLA), never poison.
Value* shift(ExprEmitter& e, const Node& n, const Index& idx, bool left) {
  auto& b = e.b;
  llvm::Type* ty = e.reg_type(n.dtype());
  Value *a = e.arg(n, idx, 0), *s = e.arg(n, idx, 1);
  Value* big = b.CreateICmpUGE(s, llvm::ConstantInt::get(ty, ty->getIntegerBitWidth()));
  Value* safe = b.CreateSelect(big, llvm::ConstantInt::get(ty, 0), s);
  Value* r = left ? b.CreateShl(a, safe) : b.CreateLShr(a, safe);
  return b.CreateSelect(big, llvm::ConstantInt::get(ty, 0), r);
}
}  // namespace
TESSEL_LOWER(shift_left) { return shift(e, n, idx, true); }
TESSEL_LOWER(shift_right_logical) { return shift(e, n, idx, false); }

#define TESSEL_LOWER_COMPARE(OP) \
  TESSEL_LOWER(OP) { return e.compare(Op::OP, n.in[0]->dtype(), e.arg(n, idx, 0), e.arg(n, idx, 1)); }
TESSEL_LOWER_COMPARE(eq)
TESSEL_LOWER_COMPARE(ne)
TESSEL_LOWER_COMPARE(lt)
TESSEL_LOWER_COMPARE(le)
TESSEL_LOWER_COMPARE(gt)
TESSEL_LOWER_COMPARE(ge)
#undef TESSEL_LOWER_COMPARE

TESSEL_LOWER(select) { return e.b.CreateSelect(e.arg(n, idx, 0), e.arg(n, idx, 1), e.arg(n, idx, 2)); }
TESSEL_LOWER(threefry2x32) {
  return e.threefry(e.arg(n, idx, 0), e.arg(n, idx, 1), e.arg(n, idx, 2), e.arg(n, idx, 3),
                    int(n.attr<attr::Word>().word));
}
TESSEL_LOWER(convert) { return e.convert_value(e.arg(n, idx, 0), n.in[0]->dtype(), n.dtype()); }
// A narrow float's bits are its encoding, not its float32 register.
TESSEL_LOWER(bitcast_convert) {
  const DType from = n.in[0]->dtype(), to = n.dtype();
  Value* v = e.arg(n, idx, 0);
  if (is_narrow_float(from)) v = narrow_encode(e.b, v, from);
  if (is_narrow_float(to)) return narrow_decode(e.b, e.b.CreateBitCast(v, e.mem_type(to)), to);
  return e.b.CreateBitCast(v, e.reg_type(to));
}

// ------------------------------------------------------------------ data movement: the operand at a moved index

TESSEL_LOWER(broadcast_in_dim) {
  const Shape& s = n.in[0]->shape();
  const auto& dims = n.attr<attr::Dimensions>().dims;
  Index sub(s.size());
  for (size_t i = 0; i < s.size(); ++i) sub[i] = s[i] == 1 ? e.i64c(0) : idx[dims[i]];
  return e.value(n.in[0], sub);
}
// The shapes split into groups of dims whose sizes multiply to the same
// product (XLA's reshape decomposition): a dim matched by one of the same size
// takes its index as it is, a unit dim 0, and only a group that merges or
// splits dims linearizes and divides. A squeeze or an expand_dims divides
// nothing (the max-pool gradient's pads of a [..., 1] slice were 60x slower
// through one flat index).
TESSEL_LOWER(reshape) {
  const Shape& s = n.in[0]->shape();
  const Shape& o = n.shape();
  if (s.empty()) return e.value(n.in[0], {});
  if (numel(s) == 0) return e.value(n.in[0], e.unflatten(e.linearize(idx, o), s));
  Index sub(s.size());
  std::size_t i = 0, j = 0;
  while (i < s.size() || j < o.size()) {
    if (i < s.size() && s[i] == 1) {
      sub[i++] = e.i64c(0);
      continue;
    }
    if (j < o.size() && o[j] == 1) {
      ++j;
      continue;
    }
    const std::size_t i0 = i, j0 = j;
    std::int64_t pi = s[i++], po = o[j++];
    while (pi != po) {
      if (pi < po) pi *= s[i++];
      else po *= o[j++];
    }
    if (i - i0 == 1 && j - j0 == 1) {
      sub[i0] = idx[j0];
      continue;
    }
    const Index out_part(idx.begin() + std::ptrdiff_t(j0), idx.begin() + std::ptrdiff_t(j));
    const Index in_part = e.unflatten(e.linearize(out_part, Shape(o.begin() + std::ptrdiff_t(j0), o.begin() + std::ptrdiff_t(j))),
                                      Shape(s.begin() + std::ptrdiff_t(i0), s.begin() + std::ptrdiff_t(i)));
    std::copy(in_part.begin(), in_part.end(), sub.begin() + std::ptrdiff_t(i0));
  }
  return e.value(n.in[0], sub);
}
TESSEL_LOWER(transpose) {
  const auto& perm = n.attr<attr::Dimensions>().dims;
  Index sub(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) sub[perm[i]] = idx[i];
  return e.value(n.in[0], sub);
}
TESSEL_LOWER(rev) {
  Index sub = idx;
  for (auto d : n.attr<attr::Dimensions>().dims) sub[d] = e.b.CreateSub(e.i64c(n.shape()[d] - 1), idx[d]);
  return e.value(n.in[0], sub);
}
TESSEL_LOWER(slice) {
  const auto& a = n.attr<attr::Slice>();
  Index sub(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    Value* v = idx[i];
    if (a.stride[i] != 1) v = e.b.CreateMul(v, e.i64c(a.stride[i]), "", true, true);
    if (a.start[i] != 0) v = e.b.CreateAdd(v, e.i64c(a.start[i]), "", true, true);
    sub[i] = v;
  }
  return e.value(n.in[0], sub);
}
TESSEL_LOWER(pad) {
  const auto& a = n.attr<attr::Pad>();
  auto& b = e.b;
  const Shape& s = n.in[0]->shape();
  Value* inside = b.getTrue();
  Index sub(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    std::int64_t period = a.interior[i] + 1;
    if (period == 1 && a.low[i] == 0 && a.high[i] == 0) {  // not padded: always inside
      sub[i] = idx[i];
      continue;
    }
    Value* r = b.CreateSub(idx[i], e.i64c(a.low[i]));
    Value* ok = b.CreateICmpSGE(r, e.i64c(0));
    Value* q = r;
    if (period != 1) {
      Value* rc = b.CreateSelect(ok, r, e.i64c(0));
      q = b.CreateUDiv(rc, e.i64c(period));
      ok = b.CreateAnd(ok, b.CreateICmpEQ(b.CreateURem(rc, e.i64c(period)), e.i64c(0)));
    }
    ok = b.CreateAnd(ok, b.CreateICmpSLT(q, e.i64c(s[i])));
    inside = b.CreateAnd(inside, ok);
    // Read a safe index where this dim is outside. A dim's index depends on
    // its own test only, so an unpadded (innermost) dim stays contiguous and
    // its loads vectorise instead of gathering.
    sub[i] = b.CreateSelect(ok, q, e.i64c(0));
  }
  return b.CreateSelect(inside, e.value(n.in[0], sub), e.value(n.in[1], {}));
}
TESSEL_LOWER(concatenate) {
  auto& b = e.b;
  const std::int64_t d = n.attr<attr::Dimension>().dimension;
  if (idx[std::size_t(d)] == e.piece_iv) {  // in one operand's range throughout
    std::int64_t offset = 0;
    for (const auto& x : n.in) {
      const std::int64_t len = x->shape()[std::size_t(d)];
      if (offset <= e.piece_lo && e.piece_hi <= offset + len) {
        Index sub = idx;
        sub[std::size_t(d)] = b.CreateSub(idx[std::size_t(d)], e.i64c(offset));
        return e.value(x, sub);
      }
      offset += len;
    }
  }
  Value* result = nullptr;
  std::int64_t offset = 0;
  for (size_t k = 0; k < n.in.size(); ++k) {
    std::int64_t len = n.in[k]->shape()[d];
    Index sub = idx;
    Value* local = b.CreateSub(idx[d], e.i64c(offset));
    Value* in_range = b.CreateICmpULT(local, e.i64c(len));
    sub[d] = b.CreateSelect(in_range, local, e.i64c(0));
    Value* v = e.value(n.in[k], sub);
    result = result ? b.CreateSelect(in_range, v, result) : v;
    offset += len;
  }
  return result;
}
TESSEL_LOWER(dynamic_slice) {
  const Shape& s = n.in[0]->shape();
  const Shape& sizes = n.attr<attr::DynamicSlice>().sizes;
  Index sub(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) sub[i] = e.b.CreateAdd(idx[i], e.clamped_start(n.in[i + 1], s[i] - sizes[i]));
  return e.value(n.in[0], sub);
}
TESSEL_LOWER(dynamic_update_slice) {
  auto& b = e.b;
  const Shape& s = n.in[0]->shape();
  const Shape& u = n.in[1]->shape();
  Value* inside = b.getTrue();
  Index sub(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    Value* r = b.CreateSub(idx[i], e.clamped_start(n.in[i + 2], s[i] - u[i]));
    inside = b.CreateAnd(inside, b.CreateICmpULT(r, e.i64c(u[i])));
    sub[i] = r;
  }
  for (auto& v : sub) v = b.CreateSelect(inside, v, e.i64c(0));
  return b.CreateSelect(inside, e.value(n.in[1], sub), e.arg(n, idx, 0));
}

// x at the position the index array names along the axis (attr::Indexed).
TESSEL_LOWER(gather) {
  auto& b = e.b;
  const auto& a = n.attr<attr::Indexed>();
  const Shape& is = n.in[1]->shape();
  const std::int64_t s = std::int64_t(is.size());
  Index ip, xp;
  if (a.along) {
    ip = idx;
    xp = idx;  // the axis coordinate replaced below
  } else {
    xp.assign(idx.begin(), idx.begin() + a.axis);
    xp.push_back(nullptr);  // the axis coordinate, below
    xp.insert(xp.end(), idx.begin() + a.axis + s, idx.end());
    ip.assign(idx.begin() + a.axis, idx.begin() + a.axis + s);
  }
  const std::int64_t len = n.in[0]->shape()[size_t(a.axis)];
  Value* i = e.convert_value(e.value(n.in[1], ip), n.in[1]->dtype(), DType::int64);
  Value* k = b.CreateSelect(b.CreateICmpSLT(i, e.i64c(0)), b.CreateAdd(i, e.i64c(len)), i);
  if (a.mode == attr::IndexMode::clip) {
    k = b.CreateSelect(b.CreateICmpSLT(k, e.i64c(0)), e.i64c(0), k);
    k = b.CreateSelect(b.CreateICmpSGT(k, e.i64c(len - 1)), e.i64c(len - 1), k);
    xp[size_t(a.axis)] = k;
    return e.value(n.in[0], xp);
  }
  Value* inside = b.CreateICmpULT(k, e.i64c(len));  // also false for negatives
  xp[size_t(a.axis)] = b.CreateSelect(inside, k, e.i64c(0));
  const Literal fill = a.mode == attr::IndexMode::zero ? *Literal::scalar(n.dtype(), 0) : gather_fill(n.dtype());
  return b.CreateSelect(inside, e.value(n.in[0], xp), e.literal_scalar(fill));
}
TESSEL_NOT_AN_EXPRESSION(scatter)

// ------------------------------------------------------------ pooling's derivative

namespace {
// The taps of window `o` (row-major): whether each lies inside the operand
// (p.base) and the index of its element (a safe one where it does not).
struct Taps {
  std::vector<Value*> inside;
  std::vector<Index> at;
};
// `off`: a device's global row of its local row 0 for p.offset_dims (the
// inside test is then against p.extent there).
Taps window_taps(ExprEmitter& e, const attr::SelectWindow& p, const Index& o, const std::vector<Value*>& off = {}) {
  const Shape& s = p.base;
  const std::size_t r = s.size();
  auto& b = e.b;
  std::int64_t taps = 1;
  for (auto w : p.window) taps *= w;
  Taps w;
  for (std::int64_t k = 0; k < taps; ++k) {
    Index at(r);
    Value* ok = b.getTrue();
    std::int64_t rem = k;
    for (std::size_t d = r; d-- > 0;) {
      const std::int64_t u = rem % p.window[d];
      rem /= p.window[d];
      if (p.untouched(d)) {
        at[d] = o[d];
        continue;
      }
      Value* q = b.CreateAdd(b.CreateMul(o[d], e.i64c(p.strides[d])), e.i64c(u - p.pad_lo[d]));
      // Dim by dim, as pad reads: an untouched innermost dim stays contiguous.
      Value* in_d = b.CreateICmpULT(q, e.i64c(s[d]));
      at[d] = b.CreateSelect(in_d, q, e.i64c(0));
      if (!off.empty() && off[d]) in_d = b.CreateAnd(in_d, b.CreateICmpULT(b.CreateAdd(q, off[d]), e.i64c(p.extent[d])));
      ok = b.CreateAnd(ok, in_d);
    }
    w.inside.push_back(ok);
    w.at.push_back(std::move(at));
  }
  return w;
}
// The selection (an i8) of window o; compared as i8 (a vector of 64 lanes,
// not of 64-bit ones).
Value* selection_at(ExprEmitter& e, const Node& n, const Index& o) { return e.value(n.in[1], o); }
// The selection holds 1 + the tap (0: none).
Value* is_tap(ExprEmitter& e, Value* sel, Value* tap) {
  return e.b.CreateICmpEQ(sel, e.b.CreateTrunc(e.b.CreateAdd(tap, e.i64c(1)), e.b.getInt8Ty()));
}
// The row offsets of a device's window op (operands 1.., p.offset_dims),
// per dim (null where none).
std::vector<Value*> row_offsets(ExprEmitter& e, const Node& n, const std::vector<std::int64_t>& offset_dims, std::size_t rank) {
  std::vector<Value*> off;
  if (offset_dims.empty()) return off;
  off.assign(rank, nullptr);
  for (std::size_t k = 0; k < offset_dims.size(); ++k)
    off[std::size_t(offset_dims[k])] = e.b.CreateSExt(e.value(n.in[k + 1], {}), e.b.getInt64Ty());
  return off;
}
// Pooling: the window's taps folded from the identity, in row-major order;
// taps outside the operand are the identity.
Value* pool(ExprEmitter& e, const Node& n, const Index& idx, Op reduce) {
  const auto& a = n.attr<attr::ReduceWindow>();
  const attr::SelectWindow p = a.selection();
  auto& b = e.b;
  const DType t = n.dtype();
  const Taps w = window_taps(e, p, idx, row_offsets(e, n, a.offset_dims, a.base.size()));
  Value* id = e.literal_scalar(reduction_identity(reduce, t));
  Value* acc = id;
  for (std::size_t k = 0; k < w.at.size(); ++k) {
    Value* v = b.CreateSelect(w.inside[k], e.value(n.in[0], w.at[k]), id);
    if (reduce == Op::add) acc = is_floating(t) ? b.CreateFAdd(acc, v) : b.CreateAdd(acc, v);
    else acc = e.minmax(t, acc, v, reduce == Op::max);
  }
  return acc;
}
}  // namespace

TESSEL_LOWER(reduce_window_sum) { return pool(e, n, idx, Op::add); }
TESSEL_LOWER(reduce_window_max) { return pool(e, n, idx, Op::max); }
TESSEL_LOWER(reduce_window_min) { return pool(e, n, idx, Op::min); }

// 1 + the tap of window idx's first extreme among the taps inside the
// operand, NaN-propagating (none, 0, when the extreme is NaN or every tap
// is padding).
TESSEL_LOWER(window_select) {
  const auto& p = n.attr<attr::SelectWindow>();
  auto& b = e.b;
  const DType t = n.in[0]->dtype();
  const Taps w = window_taps(e, p, idx, row_offsets(e, n, p.offset_dims, p.base.size()));
  std::vector<Value*> v;
  // The extreme of the numbers (an ordered compare and a select: one
  // vmaxps), and whether a NaN is among the taps: then the extreme is NaN,
  // which nothing equals. Cheaper than NaN-propagating max per tap, and the
  // sign of a zero extreme does not matter to an equality.
  Value* extreme = e.constant(t, p.ge ? -INFINITY : INFINITY);
  Value* nan = b.getFalse();
  for (std::size_t k = 0; k < w.at.size(); ++k) {
    v.push_back(e.value(n.in[0], w.at[k]));
    Value* beyond = p.ge ? b.CreateFCmpOGT(v[k], extreme) : b.CreateFCmpOLT(v[k], extreme);
    extreme = b.CreateSelect(b.CreateAnd(w.inside[k], beyond), v[k], extreme);
    nan = b.CreateOr(nan, b.CreateAnd(w.inside[k], b.CreateFCmpUNO(v[k], v[k])));
  }
  llvm::Type* i8 = b.getInt8Ty();
  Value* r = llvm::ConstantInt::get(i8, 0);
  for (std::size_t k = v.size(); k-- > 0;) {
    Value* hit = b.CreateAnd(w.inside[k], b.CreateFCmpOEQ(v[k], extreme));
    r = b.CreateSelect(hit, llvm::ConstantInt::get(i8, std::uint64_t(k + 1)), r);
  }
  return b.CreateSelect(nan, llvm::ConstantInt::get(i8, 0), r);
}

// The tangent (n.in[0]) at window idx's selected element, else zero.
TESSEL_LOWER(select_and_gather_add) {
  const auto& p = n.attr<attr::SelectWindow>();
  const Taps w = window_taps(e, p, idx);
  Value* k = selection_at(e, n, idx);
  Value* r = e.constant(n.dtype(), 0.0);
  for (std::size_t t = w.at.size(); t-- > 0;)
    r = e.b.CreateSelect(is_tap(e, k, e.i64c(std::int64_t(t))), e.value(n.in[0], w.at[t]), r);
  return r;
}

// At operand index idx: the sum of the source (n.in[0]) over the windows
// whose selected element idx is. Per windowed dim, idx lies in the windows
// o = (idx + pad_lo) / stride - j, j < ceil(window / stride), at tap
// (idx + pad_lo) % stride + j * stride of each.
TESSEL_LOWER(select_and_scatter_add) {
  const auto& p = n.attr<attr::SelectWindow>();
  auto& b = e.b;
  const Shape& out = n.in[0]->shape();
  const std::size_t r = idx.size();
  std::vector<std::size_t> dims;
  std::vector<std::int64_t> count;
  std::int64_t combos = 1;
  for (std::size_t d = 0; d < r; ++d)
    if (!p.untouched(d)) {
      dims.push_back(d);
      count.push_back((p.window[d] + p.strides[d] - 1) / p.strides[d]);
      combos *= count.back();
    }
  std::vector<Value*> top(r), phase(r);
  for (std::size_t d : dims) {
    Value* q = b.CreateAdd(idx[d], e.i64c(p.pad_lo[d]));  // >= 0
    top[d] = b.CreateUDiv(q, e.i64c(p.strides[d]));
    phase[d] = b.CreateURem(q, e.i64c(p.strides[d]));
  }
  Value* sum = nullptr;
  for (std::int64_t c = 0; c < combos; ++c) {
    Index o = idx;
    Value* ok = b.getTrue();
    std::vector<Value*> tap_d(r, nullptr);
    std::int64_t rem = c;
    for (std::size_t j = dims.size(); j-- > 0;) {
      const std::size_t d = dims[j];
      const std::int64_t back = rem % count[j];
      rem /= count[j];
      Value* od = b.CreateSub(top[d], e.i64c(back));
      Value* td = b.CreateAdd(phase[d], e.i64c(back * p.strides[d]));
      Value* fits = b.CreateAnd(b.CreateICmpULT(od, e.i64c(out[d])), b.CreateICmpSLT(td, e.i64c(p.window[d])));
      ok = b.CreateAnd(ok, fits);
      o[d] = b.CreateSelect(fits, od, e.i64c(0));
      tap_d[d] = td;
    }
    Value* tap = e.i64c(0);  // idx's tap in window o, row-major over every dim
    for (std::size_t d = 0; d < r; ++d)
      if (tap_d[d]) tap = b.CreateAdd(b.CreateMul(tap, e.i64c(p.window[d])), tap_d[d]);
    Value* chosen = b.CreateAnd(ok, is_tap(e, selection_at(e, n, o), tap));
    Value* v = b.CreateSelect(chosen, e.value(n.in[0], o), e.constant(n.dtype(), 0.0));
    sum = sum ? b.CreateFAdd(sum, v) : v;
  }
  return sum ? sum : e.constant(n.dtype(), 0.0);
}

#undef TESSEL_LOWER
#undef TESSEL_NOT_AN_EXPRESSION

namespace {
using ExprFn = Value* (*)(ExprEmitter&, const Node&, const Index&);
const ExprFn kLowerings[] = {
#define TESSEL_X(e, text, family, cost, attrs) &Lowering<Op::e>::expr,
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
static_assert(sizeof(kLowerings) / sizeof(kLowerings[0]) == kNumOps);
}  // namespace

Value* lower_expr(ExprEmitter& e, const Node& n, const Index& idx) { return kLowerings[int(n.op)](e, n, idx); }

}  // namespace tessel::codegen
