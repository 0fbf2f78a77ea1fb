// The elementwise family's complex expansion and cost rules (its other rules
// are in tracer/rules_elementwise.cpp; the expansion is codegen/complex.hpp).
#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tracer/rules.hpp"

namespace tessel {

// ------------------------------------------------------------------ complex expansion

// The complex form of an elementwise op, from its operands' parts P(k).
#define TESSEL_COMPLEX(OP, ...)                                                                             \
  NodeRef Rule<Op::OP>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) { \
    [[maybe_unused]] auto P = [&](int k) { return b.unpack(ops[size_t(k)]); };                              \
    (void)n;                                                                                                \
    __VA_ARGS__                                                                                             \
  }

TESSEL_COMPLEX(neg, { return b.pack({b.un(Op::neg, P(0).re), b.un(Op::neg, P(0).im)}); })
TESSEL_COMPLEX(add, { return b.pack({b.add(P(0).re, P(1).re), b.add(P(0).im, P(1).im)}); })
TESSEL_COMPLEX(sub, { return b.pack({b.sub(P(0).re, P(1).re), b.sub(P(0).im, P(1).im)}); })
TESSEL_COMPLEX(mul, { return b.pack(b.cmul(P(0), P(1))); })
TESSEL_COMPLEX(div, { return b.pack(b.cdiv(P(0), P(1))); })
TESSEL_COMPLEX(abs, { return b.hypot(P(0).re, P(0).im); })
TESSEL_COMPLEX(sign, {
  Parts z = P(0);
  NodeRef r = b.hypot(z.re, z.im);
  NodeRef zero = b.is_zero(r), safe = b.sel(zero, b.sc(r, 1), r);
  return b.pack({b.sel(zero, b.sc(r, 0), b.div(z.re, safe)), b.sel(zero, b.sc(r, 0), b.div(z.im, safe))});
})
TESSEL_COMPLEX(is_finite, { return b.bin(Op::and_, b.un(Op::is_finite, P(0).re), b.un(Op::is_finite, P(0).im)); })
TESSEL_COMPLEX(exp, { return b.pack(b.cexp(P(0))); })
TESSEL_COMPLEX(log, { return b.pack(b.clog(P(0))); })
TESSEL_COMPLEX(expm1, {
  Parts z = P(0);
  NodeRef s = b.un(Op::sin, b.mul(z.im, b.sc(z.im, 0.5)));
  NodeRef re = b.sub(b.mul(b.un(Op::expm1, z.re), b.un(Op::cos, z.im)), b.mul(b.sc(s, 2), b.mul(s, s)));
  return b.pack({re, b.mul(b.un(Op::exp, z.re), b.un(Op::sin, z.im))});
})
TESSEL_COMPLEX(log1p, {
  Parts z = P(0);
  NodeRef m = b.add(b.mul(z.re, b.add(b.sc(z.re, 2), z.re)), b.mul(z.im, z.im));
  return b.pack({b.mul(b.un(Op::log1p, m), b.sc(m, 0.5)), b.bin(Op::atan2, z.im, b.add(b.sc(z.re, 1), z.re))});
})
TESSEL_COMPLEX(sqrt, { return b.pack(b.csqrt(P(0))); })
TESSEL_COMPLEX(rsqrt, {
  Parts s = b.csqrt(P(0));
  return b.pack(b.cdiv({b.sc(s.re, 1), b.sc(s.re, 0)}, s));
})
TESSEL_COMPLEX(sin, {
  Parts z = P(0);
  return b.pack({b.mul(b.un(Op::sin, z.re), b.cosh(z.im)), b.mul(b.un(Op::cos, z.re), b.sinh(z.im))});
})
TESSEL_COMPLEX(cos, {
  Parts z = P(0);
  return b.pack(
      {b.mul(b.un(Op::cos, z.re), b.cosh(z.im)), b.un(Op::neg, b.mul(b.un(Op::sin, z.re), b.sinh(z.im)))});
})
// (sin 2a + i sinh 2b) / (cos 2a + cosh 2b); i sign(b) once cosh overflows
TESSEL_COMPLEX(tan, {
  Parts z = P(0);
  NodeRef a2 = b.mul(z.re, b.sc(z.re, 2)), b2 = b.mul(z.im, b.sc(z.im, 2));
  NodeRef den = b.add(b.un(Op::cos, a2), b.cosh(b2));
  NodeRef fin = b.un(Op::is_finite, den);
  return b.pack({b.div(b.un(Op::sin, a2), den), b.sel(fin, b.div(b.sinh(b2), den), b.un(Op::sign, z.im))});
})
// (sinh 2a + i sin 2b) / (cosh 2a + cos 2b); sign(a) once cosh overflows
TESSEL_COMPLEX(tanh, {
  Parts z = P(0);
  NodeRef a2 = b.mul(z.re, b.sc(z.re, 2)), b2 = b.mul(z.im, b.sc(z.im, 2));
  NodeRef den = b.add(b.cosh(a2), b.un(Op::cos, b2));
  NodeRef fin = b.un(Op::is_finite, den);
  return b.pack({b.sel(fin, b.div(b.sinh(a2), den), b.un(Op::sign, z.re)), b.div(b.un(Op::sin, b2), den)});
})
// z^w = exp(w log z); 0^w = 1 for w = 0, else 0 (the reference kernel's rule)
TESSEL_COMPLEX(pow, {
  Parts z = P(0), w = P(1);
  Parts r = b.cexp(b.cmul(w, b.clog(z)));
  NodeRef z0 = b.bin(Op::and_, b.is_zero(z.re), b.is_zero(z.im));
  NodeRef w0 = b.bin(Op::and_, b.is_zero(w.re), b.is_zero(w.im));
  NodeRef one = b.sel(w0, b.sc(r.re, 1), b.sc(r.re, 0));
  return b.pack({b.sel(z0, one, r.re), b.sel(z0, b.sc(r.im, 0), r.im)});
})
TESSEL_COMPLEX(eq, { return b.bin(Op::and_, b.bin(Op::eq, P(0).re, P(1).re), b.bin(Op::eq, P(0).im, P(1).im)); })
TESSEL_COMPLEX(ne, { return b.bin(Op::or_, b.bin(Op::ne, P(0).re, P(1).re), b.bin(Op::ne, P(0).im, P(1).im)); })
TESSEL_COMPLEX(select, {
  return b.pack({b.sel(ops[0], P(1).re, P(2).re), b.sel(ops[0], P(1).im, P(2).im)});
})
TESSEL_COMPLEX(convert, {
  NodeTable& t = b.table();
  const DType from = n.in[0]->dtype(), to = n.dtype();
  if (!is_complex(from)) {
    NodeRef re = build::convert(t, ops[0], real_dtype(to), false);
    return b.pack({re, b.zeros(re->dtype(), n.shape())});
  }
  Parts z = P(0);
  if (is_complex(to))
    return b.pack({build::convert(t, z.re, real_dtype(to), false), build::convert(t, z.im, real_dtype(to), false)});
  if (is_bool(to)) return b.bin(Op::or_, b.bin(Op::ne, z.re, b.sc(z.re, 0)), b.bin(Op::ne, z.im, b.sc(z.im, 0)));
  return build::convert(t, z.re, to, n.aval.weak_type);
})
#undef TESSEL_COMPLEX

// No complex form: the API refuses complex operands of these.
TESSEL_COMPLEX_NONE(logistic)
TESSEL_COMPLEX_NONE(erf_inv)
TESSEL_COMPLEX_NONE(erf)
TESSEL_COMPLEX_NONE(floor)
TESSEL_COMPLEX_NONE(ceil)
TESSEL_COMPLEX_NONE(round)
TESSEL_COMPLEX_NONE(not_)
TESSEL_COMPLEX_NONE(rem)
TESSEL_COMPLEX_NONE(max)
TESSEL_COMPLEX_NONE(min)
TESSEL_COMPLEX_NONE(atan2)
TESSEL_COMPLEX_NONE(and_)
TESSEL_COMPLEX_NONE(or_)
TESSEL_COMPLEX_NONE(xor_)
TESSEL_COMPLEX_NONE(shift_left)
TESSEL_COMPLEX_NONE(shift_right_logical)
TESSEL_COMPLEX_NONE(lt)
TESSEL_COMPLEX_NONE(le)
TESSEL_COMPLEX_NONE(gt)
TESSEL_COMPLEX_NONE(ge)
TESSEL_COMPLEX_NONE(threefry2x32)
TESSEL_COMPLEX_NONE(bitcast_convert)

// ------------------------------------------------------------------ cost

// A flop per element, or a transcendental for the op list's Transcendental
// class (pow and atan2 too, as XLA counts them).
#define TESSEL_ELEMENTWISE_COST(OP) TESSEL_COST(OP, elementwise_cost)
TESSEL_ELEMENTWISE_COST(neg)
TESSEL_ELEMENTWISE_COST(sin)
TESSEL_ELEMENTWISE_COST(cos)
TESSEL_ELEMENTWISE_COST(tan)
TESSEL_ELEMENTWISE_COST(tanh)
TESSEL_ELEMENTWISE_COST(exp)
TESSEL_ELEMENTWISE_COST(expm1)
TESSEL_ELEMENTWISE_COST(log)
TESSEL_ELEMENTWISE_COST(log1p)
TESSEL_ELEMENTWISE_COST(sqrt)
TESSEL_ELEMENTWISE_COST(rsqrt)
TESSEL_ELEMENTWISE_COST(logistic)
TESSEL_ELEMENTWISE_COST(erf_inv)
TESSEL_ELEMENTWISE_COST(erf)
TESSEL_ELEMENTWISE_COST(abs)
TESSEL_ELEMENTWISE_COST(sign)
TESSEL_ELEMENTWISE_COST(floor)
TESSEL_ELEMENTWISE_COST(ceil)
TESSEL_ELEMENTWISE_COST(round)
TESSEL_ELEMENTWISE_COST(is_finite)
TESSEL_ELEMENTWISE_COST(not_)
TESSEL_ELEMENTWISE_COST(add)
TESSEL_ELEMENTWISE_COST(sub)
TESSEL_ELEMENTWISE_COST(mul)
TESSEL_ELEMENTWISE_COST(div)
TESSEL_ELEMENTWISE_COST(rem)
TESSEL_ELEMENTWISE_COST(pow)
TESSEL_ELEMENTWISE_COST(max)
TESSEL_ELEMENTWISE_COST(min)
TESSEL_ELEMENTWISE_COST(atan2)
TESSEL_ELEMENTWISE_COST(and_)
TESSEL_ELEMENTWISE_COST(or_)
TESSEL_ELEMENTWISE_COST(xor_)
TESSEL_ELEMENTWISE_COST(shift_left)
TESSEL_ELEMENTWISE_COST(shift_right_logical)
TESSEL_ELEMENTWISE_COST(eq)
TESSEL_ELEMENTWISE_COST(ne)
TESSEL_ELEMENTWISE_COST(lt)
TESSEL_ELEMENTWISE_COST(le)
TESSEL_ELEMENTWISE_COST(gt)
TESSEL_ELEMENTWISE_COST(ge)
TESSEL_ELEMENTWISE_COST(select)
TESSEL_ELEMENTWISE_COST(threefry2x32)
TESSEL_ELEMENTWISE_COST(convert)
TESSEL_ELEMENTWISE_COST(bitcast_convert)
#undef TESSEL_ELEMENTWISE_COST

}  // namespace tessel
