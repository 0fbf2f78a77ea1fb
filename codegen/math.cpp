#include "codegen/math.hpp"

#include <cmath>
#include <limits>
#include <utility>

#include "codegen/host.hpp"
#include "codegen/llvm_headers.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

namespace {

// A small helper over IRBuilder for float32 scalar code.
struct F {
  Builder& b;
  llvm::Type* t;
  llvm::Type* i32;

  llvm::Value* c(double v) { return llvm::ConstantFP::get(t, v); }
  llvm::Value* ci(int v) { return llvm::ConstantInt::get(i32, v, true); }
  llvm::Value* add(llvm::Value* x, llvm::Value* y) { return b.CreateFAdd(x, y); }
  llvm::Value* sub(llvm::Value* x, llvm::Value* y) { return b.CreateFSub(x, y); }
  llvm::Value* mul(llvm::Value* x, llvm::Value* y) { return b.CreateFMul(x, y); }
  llvm::Value* div(llvm::Value* x, llvm::Value* y) { return b.CreateFDiv(x, y); }
  // x * y + z, fused where the CPU has FMA.
  llvm::Value* fma(llvm::Value* x, llvm::Value* y, llvm::Value* z) {
    return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t}, {x, y, z});
  }
  llvm::Value* abs(llvm::Value* x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x); }
  llvm::Value* sqrt(llvm::Value* x) { return b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x); }
  llvm::Value* minnum(llvm::Value* x, llvm::Value* y) { return b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, x, y); }
  llvm::Value* copysign(llvm::Value* mag, llvm::Value* sgn) {
    return b.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, mag, sgn);
  }
  llvm::Value* sel(llvm::Value* c, llvm::Value* x, llvm::Value* y) { return b.CreateSelect(c, x, y); }
  llvm::Value* lt(llvm::Value* x, llvm::Value* y) { return b.CreateFCmpOLT(x, y); }
  llvm::Value* gt(llvm::Value* x, llvm::Value* y) { return b.CreateFCmpOGT(x, y); }
  llvm::Value* eq(llvm::Value* x, llvm::Value* y) { return b.CreateFCmpOEQ(x, y); }
  llvm::Value* isnan(llvm::Value* x) { return b.CreateFCmpUNO(x, x); }
  // x within [lo, hi], NaN kept (a max and a min that pass NaN through).
  llvm::Value* clamp(llvm::Value* x, double lo, double hi) {
    llvm::Value* v = sel(lt(x, c(lo)), c(lo), x);
    return sel(gt(v, c(hi)), c(hi), v);
  }
  // Horner: ((c0 * x + c1) * x + c2) ...
  llvm::Value* poly(llvm::Value* x, std::initializer_list<double> coeffs) {
    auto it = coeffs.begin();
    llvm::Value* p = c(*it++);
    for (; it != coeffs.end(); ++it) p = fma(p, x, c(*it));
    return p;
  }
  llvm::Value* to_int(llvm::Value* x) { return b.CreateFPToSI(x, i32); }
  llvm::Value* bits(llvm::Value* x) { return b.CreateBitCast(x, i32); }
  llvm::Value* from_bits(llvm::Value* i) { return b.CreateBitCast(i, t); }
  // 2^k for an i32 k in [-126, 127].
  llvm::Value* pow2(llvm::Value* k) { return from_bits(b.CreateShl(b.CreateAdd(k, ci(127)), ci(23))); }
  // Added to a float of magnitude below 2^22, rounds it to an integer: in
  // [2^23, 2^24) a float's ulp is 1, and the integer is the sum's low bits.
  static constexpr double kShifter = 0x1.8p23;

  // exp, Cephes expf: x = n ln2 + r, |r| <= ln2/2, degree-5 polynomial.
  // exp_reduce: for x clamped to [lo, 88.8] (NaN kept), the integer n =
  // round(x / ln2) in the low bits of the returned float `big` (rounded by
  // adding 1.5 * 2^23 inside the multiply's FMA, as sincos does) and
  // expm1(r).
  std::pair<llvm::Value*, llvm::Value*> exp_reduce(llvm::Value* x, double lo) {
    llvm::Value* xc = clamp(x, lo, 88.8);
    llvm::Value* big = fma(xc, c(1.44269504088896341), c(kShifter));
    llvm::Value* n = sub(big, c(kShifter));
    llvm::Value* r = fma(n, c(-0.693359375), xc);
    r = fma(n, c(2.12194440e-4), r);
    llvm::Value* p = poly(r, {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2, 1.6666665459E-1,
                              5.0000001201E-1});
    return {big, fma(mul(p, r), r, r)};
  }
  // n as an i32 from exp_reduce's `big`.
  llvm::Value* reduced_n(llvm::Value* big) { return b.CreateSub(bits(big), bits(c(kShifter))); }
  // exp(x) = 2^n (1 + q): 2^n as two exact powers of two (n in [-150, 128]),
  // so that subnormal results round once and e^x past 88.72 overflows to
  // inf by itself. No selects: -inf and x below -103.97 give 0, +inf gives
  // inf, NaN stays NaN through the arithmetic. Before, a floor, conversions
  // and three selects did this, and n was rounded from the rounded product
  // x / ln2 (now from the exact one, inside the FMA).
  llvm::Value* exp(llvm::Value* x) {
    auto [big, q] = exp_reduce(x, -104.0);
    llvm::Value* n = reduced_n(big);
    llvm::Value* h = b.CreateAShr(n, ci(1));
    return mul(mul(add(q, c(1.0)), pow2(h)), pow2(b.CreateSub(n, h)));
  }

  // log, Cephes logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), polynomial in m - 1.
  // log_reduce: u's e and f = m - 1 (u normal, positive).
  // In integers: u's bits less those of float(sqrt(1/2)) carry e in their
  // top bits (arithmetic shift), and taking e's exponent off u leaves m in
  // [sqrt(1/2), sqrt(2)). Six instructions, the same e and f as the
  // compare-and-select form they replace.
  std::pair<llvm::Value*, llvm::Value*> log_reduce(llvm::Value* u) {
    llvm::Value* ib = bits(u);
    llvm::Value* off = b.CreateSub(ib, ci(0x3f3504f3));
    llvm::Value* e = b.CreateSIToFP(b.CreateAShr(off, ci(23)), t);
    llvm::Value* m = from_bits(b.CreateSub(ib, b.CreateAnd(off, ci(int(0xff800000u)))));
    return {e, sub(m, c(1.0))};
  }
  // e ln2 + log1p(f) for |f| <= sqrt(2) - 1 (Cephes logf's polynomial).
  llvm::Value* log_core(llvm::Value* e, llvm::Value* m) {
    llvm::Value* z = mul(m, m);
    llvm::Value* y = mul(mul(poly(m, {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1,
                                      1.4249322787E-1, -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1,
                                      3.3333331174E-1}),
                             m),
                         z);
    y = fma(e, c(-2.12194440e-4), y);
    y = fma(z, c(-0.5), y);
    llvm::Value* r = add(m, y);
    return fma(e, c(0.693359375), r);
  }
  llvm::Value* log(llvm::Value* x) {
    // Subnormals: scale into the normal range first.
    llvm::Value* tiny = lt(x, c(1.17549435e-38));
    llvm::Value* xs = sel(tiny, mul(x, c(8388608.0)), x);
    auto [e, m] = log_reduce(xs);
    llvm::Value* r = log_core(add(e, sel(tiny, c(-23.0), c(0.0))), m);
    r = sel(eq(x, c(HUGE_VAL)), x, r);
    r = sel(eq(x, c(0.0)), c(-HUGE_VAL), r);
    r = sel(b.CreateFCmpULT(x, c(0.0)), c(std::nan("")), r);  // negative or NaN
    return r;
  }

  // sin and cos by one odd minimax polynomial on [-pi/2, pi/2]: sin writes
  // x = n*pi + r, cos writes x = (n + 1/2)*pi + r, and the parity of n gives
  // the sign. One polynomial and no octant selects (the Cephes way evaluates
  // both sin's and cos's and picks).
  //
  // What it costs is counted in vector instructions on the FMA pipes (a
  // double-pumped 512-bit FMA on this project's hosts): n is rounded by
  // adding 1.5 * 2^23 inside the multiply's FMA, so n's parity is the low
  // bit of the sum; the sign is applied by one copysign from r's sign bit
  // (which also gives sin(-0) = -0). With FMA, pi in three parts, the first
  // float(pi) rounded down: x - n * part1 is exact for |n| < 2^16, so |x| up
  // to kTrigFastLimit reduces to half an ulp (1.8 ulp at most in all). A CPU
  // without FMA rounds each product: there pi is in four short parts whose
  // products with n are exact. Beyond the limit (inf too) the value is not
  // used: ExprEmitter::trig takes libm's.
  llvm::Value* sincos(llvm::Value* x, bool want_cos) {
    const double inv_pi = 0.3183098861837907;
    llvm::Value* big = want_cos ? add(fma(x, c(inv_pi), c(-0.5)), c(kShifter)) : fma(x, c(inv_pi), c(kShifter));
    llvm::Value* n = sub(big, c(kShifter));  // exact: an integer
    llvm::Value* h = want_cos ? add(n, c(0.5)) : n;  // x = h*pi + r
    // pi's parts are all positive, so each product -h * part has -h's sign
    // and sin(-0) stays -0 (a +0 product would turn r into +0).
    static const bool has_fma = host_cpu().has("fma");
    llvm::Value* r;
    if (has_fma) {
      r = fma(h, c(-3.141592502593994), x);
      r = fma(h, c(-1.5099578831723193e-07), r);
      r = fma(h, c(-1.0780605906948477e-14), r);
    } else {
      r = fma(h, c(-3.140625), x);
      r = fma(h, c(-0.0009670257568359375), r);
      r = fma(h, c(-6.2771141529083251953e-07), r);
      r = fma(h, c(-1.2154201256553420762e-10), r);
    }
    llvm::Value* z = mul(r, r);
    llvm::Value* p = poly(z, {2.6083159809786593541503e-06, -0.0001981069071916863322258, 0.00833307858556509017944336,
                              -0.166666597127914428710938});
    llvm::Value* v = fma(mul(p, z), r, r);  // sin(r): r's sign, as 1 + z*p > 1/2
    // sin x = (-1)^n sin r; cos x = (-1)^(n+1) sin r.
    llvm::Value* odd = b.CreateShl(bits(big), ci(31));
    if (want_cos) odd = b.CreateXor(odd, ci(std::numeric_limits<int>::min()));
    return copysign(v, from_bits(b.CreateXor(bits(r), odd)));
  }

  // XLA:CPU's float32 tanh (its intrinsic EmitFastTanh with FMA, what JAX
  // computes on CPU, 3 ulp): x itself below |x| = 0.0004, else a rational
  // function, odd degree 13 over even degree 6, of x clamped to +-7.9988
  // (where it is exactly +-1), and +-1 from |x| = 20. NaN stays NaN (the
  // clamp keeps it). It was Cephes' (a polynomial below 0.625, else 1 - 2 /
  // (e^2|x| + 1)): an exp and a division, 2.2x the time of 2*x+1.
  llvm::Value* tanh(llvm::Value* x) {
    const double limit = 7.99881172180175781;
    llvm::Value* ax = abs(x);
    llvm::Value* xc = clamp(x, -limit, limit);
    llvm::Value* z = mul(xc, xc);
    llvm::Value* num = mul(xc, poly(z, {-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                                        5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                                        4.89352455891786e-03}));
    llvm::Value* den = poly(z, {1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03});
    llvm::Value* r = sel(lt(ax, c(0.0004)), x, div(num, den));
    return sel(b.CreateFCmpOGE(ax, c(20.0)), copysign(c(1.0), x), r);
  }

  // expm1 by exp's reduction: x = n ln2 + r, |r| <= ln2/2, expm1(r) = q by
  // exp's polynomial, then expm1(x) = 2^n q + (2^n - 1) in one FMA (2^n - 1
  // exact for n in [-24, 24]; beyond, the -1 is below half an ulp or the
  // result is -1). Below x = -18 the clamped x gives -1, as it should from
  // -17.33 down. +-0 kept (the reduction loses -0's sign), NaN passed
  // through. It was Kahan's (e^x - 1) x / log(e^x): an exp, a log and two
  // divisions, 3.6x the time of 2*x+1 over 8192^2 floats.
  llvm::Value* expm1(llvm::Value* x) {
    auto [big, q] = exp_reduce(x, -18.0);
    llvm::Value* n = sub(big, c(kShifter));
    // 2^n for n in [-26, 127]; n = 128 (x in (88.38, 88.73]) as 2 * 2^127 q + 2^127 (the -1 is far below an ulp).
    llvm::Value* top = eq(n, c(128.0));
    llvm::Value* s = pow2(to_int(minnum(n, c(127.0))));
    llvm::Value* y = fma(q, s, sel(top, s, sub(s, c(1.0))));
    y = sel(top, mul(y, c(2.0)), y);
    y = sel(gt(x, c(88.72283935546875)), c(HUGE_VAL), y);
    y = sel(eq(x, c(0.0)), x, y);
    return sel(isnan(x), x, y);
  }
  // log1p(x) = log(u + c), u = 1 + x rounded and c = x - (u - 1) its
  // rounding error (exact; taken as 0 from x = 2^24 up, where it is below
  // an ulp of the result): with u = m 2^e, log(u + c) = e ln2 + log1p(f +
  // c 2^-e), f = m - 1, by log's polynomial. No division (it was
  // log(u) x / (u - 1): 1.8x the time of 2*x+1 over 8192^2 floats).
  llvm::Value* log1p(llvm::Value* x) {
    llvm::Value* u = add(x, c(1.0));
    llvm::Value* corr = sel(lt(x, c(16777216.0)), sub(x, sub(u, c(1.0))), c(0.0));
    auto [e, f] = log_reduce(u);
    llvm::Value* scale = pow2(b.CreateNeg(to_int(minnum(e, c(100.0)))));  // 2^-e
    llvm::Value* r = log_core(e, fma(corr, scale, f));
    r = sel(eq(x, c(0.0)), x, r);  // +-0
    r = sel(eq(u, c(HUGE_VAL)), u, r);
    r = sel(eq(u, c(0.0)), c(-HUGE_VAL), r);
    r = sel(lt(u, c(0.0)), c(std::nan("")), r);
    return sel(isnan(x), x, r);
  }

  // XLA:CPU's float32 erf (its EmitErfF32: Eigen's rational interpolant, an
  // odd degree-9 numerator over an even degree-12 denominator in x^2), +-1
  // from |x| >= 3.8325 (erf's inverse of 1 - half an ulp). NaN stays NaN.
  // Vector code: the libm erff it replaces ran lane by lane, 70x the time
  // of 2*x+1 over 8192^2 floats.
  llvm::Value* erf(llvm::Value* x) {
    llvm::Value* x2 = mul(x, x);
    llvm::Value* p = mul(x, poly(x2, {0.00022905065861350646, 0.0034082910107109506, 0.050955695062380861,
                                      0.18520832239976145, 1.128379143519084}));
    llvm::Value* q = poly(x2, {-1.1791602954361697e-7, 0.000023547966471313185, 0.0010179625278914885,
                               0.014070470171167667, 0.11098505178285362, 0.49746925110067538, 1.0});
    return sel(b.CreateFCmpOLE(c(3.832506856900711), abs(x)), copysign(c(1.0), x), div(p, q));
  }

  // XLA's ErfInv32 (Giles' single-precision polynomials), what JAX's normal uses.
  llvm::Value* erf_inv(llvm::Value* x) {
    llvm::Value* w = b.CreateFNeg(log1p(b.CreateFNeg(mul(x, x))));
    llvm::Value* lt5 = lt(w, c(5.0));
    const double a[9] = {2.81022636e-08,  3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                         -0.00125372503, -0.00417768164, 0.246640727,    1.50140941};
    const double g[9] = {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                         -0.0076224613,   0.00943887047,  1.00167406,    2.83297682};
    w = sel(lt5, sub(w, c(2.5)), sub(sqrt(w), c(3.0)));
    llvm::Value* p = sel(lt5, c(a[0]), c(g[0]));
    for (int i = 1; i < 9; ++i) p = add(sel(lt5, c(a[i]), c(g[i])), mul(p, w));
    llvm::Value* r = mul(p, x);
    return sel(eq(abs(x), c(1.0)), mul(x, c(HUGE_VAL)), r);
  }
};

llvm::Value* libm_call(Builder& b, const char* name, llvm::Value* x, llvm::Value* y) {
  llvm::Module* m = b.GetInsertBlock()->getModule();
  llvm::Type* t = x->getType();
  std::vector<llvm::Type*> args(y ? 2 : 1, t);
  auto callee = m->getOrInsertFunction(name, llvm::FunctionType::get(t, args, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->setDoesNotThrow();
    f->setOnlyAccessesInaccessibleMemory();
  }
  return y ? b.CreateCall(callee, {x, y}) : b.CreateCall(callee, {x});
}

const char* libm_name(MathFn fn, bool f32) {
  switch (fn) {
    case MathFn::sin: return f32 ? "sinf" : "sin";
    case MathFn::cos: return f32 ? "cosf" : "cos";
    case MathFn::tan: return f32 ? "tanf" : "tan";
    case MathFn::tanh: return f32 ? "tanhf" : "tanh";
    case MathFn::exp: return f32 ? "expf" : "exp";
    case MathFn::expm1: return f32 ? "expm1f" : "expm1";
    case MathFn::log: return f32 ? "logf" : "log";
    case MathFn::log1p: return f32 ? "log1pf" : "log1p";
    case MathFn::pow: return f32 ? "powf" : "pow";
    case MathFn::atan2: return f32 ? "atan2f" : "atan2";
    case MathFn::erf: return f32 ? "erff" : "erf";
    case MathFn::logistic:
    case MathFn::erf_inv: return nullptr;
  }
  __builtin_unreachable();
}

// erf^-1 in double: a start from the f32 polynomial, then three Halley
// steps on erf(y) = |x| (f = erf(y) - |x|, f' = d = 2/sqrt(pi) exp(-y^2),
// f'' = -2 y d: y -= f / (d + y f)). From |x| = 1/2 up, f is computed as
// (1 - |x|) - erfc(y), exact to erfc's rounding, where erf(y) - |x| would
// lose the digits 1 - |x| has (near 1 - 1e-8: half of them). Where |x| is
// within 2^-25 of 1 it rounds to 1 in float32 and the polynomial's start is
// infinite: there the tail's asymptotic y^2 = L - log(L)/2 - log(sqrt(pi)),
// L = -log(1 - |x|), starts the steps instead (a NaN before this, for one
// float64 normal draw in about 3e7).
llvm::Value* erf_inv_f64(Builder& b, llvm::Value* x) {
  F d{b, x->getType(), b.getInt32Ty()};  // float64 arithmetic
  F f{b, b.getFloatTy(), b.getInt32Ty()};
  auto libm = [&](const char* name, llvm::Value* v) { return libm_call(b, name, v, nullptr); };
  llvm::Value* ax = d.abs(x);
  llvm::Value* y = d.abs(b.CreateFPExt(f.erf_inv(b.CreateFPTrunc(x, b.getFloatTy())), x->getType()));
  llvm::Value* below_one = d.sub(d.c(1.0), ax);  // exact from 1/2 up
  llvm::Value* L = b.CreateFNeg(libm("log", below_one));
  llvm::Value* tail = d.sqrt(d.sub(d.sub(L, d.mul(d.c(0.5), libm("log", L))), d.c(0.57236494292470008)));
  llvm::Value* one = d.eq(ax, d.c(1.0));
  y = d.sel(b.CreateAnd(d.eq(y, d.c(HUGE_VAL)), b.CreateNot(one)), tail, y);
  llvm::Value* upper = b.CreateFCmpOGE(ax, d.c(0.5));
  for (int k = 0; k < 3; ++k) {
    llvm::Value* fy = d.sel(upper, d.sub(below_one, libm("erfc", y)), d.sub(libm("erf", y), ax));
    llvm::Value* dy = d.mul(d.c(1.1283791670955126), libm("exp", b.CreateFNeg(d.mul(y, y))));
    y = d.sel(one, y, d.sub(y, d.div(fy, d.add(dy, d.mul(y, fy)))));  // keep the infinities at +-1
  }
  return d.copysign(y, x);
}

}  // namespace

llvm::Value* emit_libm(Builder& b, MathFn fn, llvm::Value* x, llvm::Value* y) {
  const char* name = libm_name(fn, x->getType()->isFloatTy());
  if (!name) throw InternalError("no libm function for this math function");
  return libm_call(b, name, x, y);
}

llvm::Value* emit_math(Builder& b, MathFn fn, llvm::Value* x, llvm::Value* y) {
  const bool f32 = x->getType()->isFloatTy();
  if (!f32) {
    if (fn == MathFn::logistic) {
      llvm::Type* t = x->getType();
      llvm::Value* e = libm_call(b, "exp", b.CreateFNeg(x), nullptr);
      return b.CreateFDiv(llvm::ConstantFP::get(t, 1.0), b.CreateFAdd(llvm::ConstantFP::get(t, 1.0), e));
    }
    if (fn == MathFn::erf_inv) return erf_inv_f64(b, x);
    return libm_call(b, libm_name(fn, false), x, y);
  }
  F f{b, x->getType(), b.getInt32Ty()};
  switch (fn) {
    case MathFn::sin: return f.sincos(x, false);
    case MathFn::cos: return f.sincos(x, true);
    case MathFn::tan: return f.div(f.sincos(x, false), f.sincos(x, true));
    case MathFn::tanh: return f.tanh(x);
    case MathFn::exp: return f.exp(x);
    case MathFn::expm1: return f.expm1(x);
    case MathFn::log: return f.log(x);
    case MathFn::log1p: return f.log1p(x);
    case MathFn::logistic: return f.div(f.c(1.0), f.add(f.c(1.0), f.exp(b.CreateFNeg(x))));
    case MathFn::erf_inv: return f.erf_inv(x);
    case MathFn::erf: return f.erf(x);
    case MathFn::pow:
    case MathFn::atan2: return libm_call(b, libm_name(fn, true), x, y);
  }
  __builtin_unreachable();
}

}  // namespace tessel::codegen
