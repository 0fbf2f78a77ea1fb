// The complex expansion's builder: packing and the complex arithmetic in real ops.
#include "tracer/complex_build.hpp"

#include <limits>

#include "tracer/build.hpp"
#include "tracer/rules.hpp"

namespace tessel {

Aval packed_aval(const Aval& a) {
  if (a.tuple) {
    std::vector<Aval> e;
    for (auto& x : a.elements) e.push_back(packed_aval(x));
    return Aval::make_tuple(std::move(e));
  }
  if (!is_complex(a.dtype)) return a;
  Shape s = a.shape;
  s.push_back(2);
  return Aval{real_dtype(a.dtype), s, a.weak_type};
}

NodeRef ComplexBuilder::pack(const Parts& p) {
  Shape s1 = appended(p.re->shape(), std::int64_t(1));
  NodeRef packed = build::concatenate(t_, {build::reshape(t_, p.re, s1), build::reshape(t_, p.im, s1)},
                                      std::int64_t(p.re->shape().size()));
  parts_of_.emplace(packed.get(), p);
  return packed;
}

Parts ComplexBuilder::unpack(const NodeRef& packed) {
  auto it = parts_of_.find(packed.get());
  if (it != parts_of_.end()) return it->second;
  const Shape& ps = packed->shape();
  Shape s(ps.begin(), ps.end() - 1);
  std::vector<std::int64_t> start(ps.size(), 0), limit = ps;
  limit.back() = 1;
  NodeRef re = build::reshape(t_, build::slice(t_, packed, start, limit), s);
  start.back() = 1;
  limit.back() = 2;
  NodeRef im = build::reshape(t_, build::slice(t_, packed, start, limit), s);
  Parts p{re, im};
  parts_of_.emplace(packed.get(), p);
  return p;
}

NodeRef ComplexBuilder::zeros(DType dtype, const Shape& s) {
  return build::broadcast_in_dim(t_, build::scalar(t_, dtype, 0), s, {});
}

NodeRef ComplexBuilder::un(Op op, const NodeRef& x) { return build::unary(t_, op, x); }
NodeRef ComplexBuilder::bin(Op op, const NodeRef& a, const NodeRef& b) { return build::binary(t_, op, a, b); }
NodeRef ComplexBuilder::sel(const NodeRef& p, const NodeRef& a, const NodeRef& b) { return build::select(t_, p, a, b); }
NodeRef ComplexBuilder::sc(const NodeRef& like, double v) { return ad::scalar_like(t_, like, v); }

NodeRef ComplexBuilder::cosh(const NodeRef& x) {
  return mul(add(un(Op::exp, x), un(Op::exp, un(Op::neg, x))), sc(x, 0.5));
}
NodeRef ComplexBuilder::sinh(const NodeRef& x) {
  return mul(sub(un(Op::expm1, x), un(Op::expm1, un(Op::neg, x))), sc(x, 0.5));
}

// m sqrt(1 + (s/m)^2) with m the larger part.
NodeRef ComplexBuilder::hypot(const NodeRef& a, const NodeRef& b) {
  NodeRef A = un(Op::abs, a), B = un(Op::abs, b);
  NodeRef m = bin(Op::max, A, B), s = bin(Op::min, A, B);
  NodeRef r = div(s, m);
  NodeRef h = mul(m, un(Op::sqrt, add(sc(r, 1), mul(r, r))));
  h = sel(is_zero(m), sc(h, 0), h);
  NodeRef inf = sc(A, std::numeric_limits<double>::infinity());
  return sel(bin(Op::or_, bin(Op::eq, A, inf), bin(Op::eq, B, inf)), inf, h);
}

Parts ComplexBuilder::cdiv(const Parts& x, const Parts& y) {
  const NodeRef &a = x.re, &b = x.im, &c = y.re, &d = y.im;
  NodeRef big = bin(Op::ge, un(Op::abs, c), un(Op::abs, d));
  NodeRef r1 = div(d, c), den1 = add(c, mul(d, r1));
  NodeRef re1 = div(add(a, mul(b, r1)), den1), im1 = div(sub(b, mul(a, r1)), den1);
  NodeRef r2 = div(c, d), den2 = add(mul(c, r2), d);
  NodeRef re2 = div(add(mul(a, r2), b), den2), im2 = div(sub(mul(b, r2), a), den2);
  return {sel(big, re1, re2), sel(big, im1, im2)};
}

Parts ComplexBuilder::cmul(const Parts& x, const Parts& y) {
  return {sub(mul(x.re, y.re), mul(x.im, y.im)), add(mul(x.re, y.im), mul(x.im, y.re))};
}

Parts ComplexBuilder::cexp(const Parts& z) {
  NodeRef e = un(Op::exp, z.re);
  return {mul(e, un(Op::cos, z.im)), sel(is_zero(z.im), z.im, mul(e, un(Op::sin, z.im)))};
}

Parts ComplexBuilder::clog(const Parts& z) { return {un(Op::log, hypot(z.re, z.im)), bin(Op::atan2, z.im, z.re)}; }

Parts ComplexBuilder::csqrt(const Parts& z) {
  const NodeRef &a = z.re, &b = z.im;
  NodeRef r = hypot(a, b);
  NodeRef t = un(Op::sqrt, mul(add(r, un(Op::abs, a)), sc(r, 0.5)));
  NodeRef zero = is_zero(t);
  NodeRef q = div(b, mul(sc(t, 2), sel(zero, sc(t, 1), t)));  // b / 2t
  NodeRef neg_a = bin(Op::lt, a, sc(a, 0));
  NodeRef re = sel(neg_a, un(Op::abs, q), t);
  NodeRef im = sel(neg_a, sel(bin(Op::lt, b, sc(b, 0)), un(Op::neg, t), t), q);
  return {sel(zero, sc(t, 0), re), sel(zero, b, im)};
}

Parts ComplexBuilder::prod_along(Parts x, std::int64_t d) {
  auto sl = [&](const NodeRef& v, std::int64_t a, std::int64_t b) {
    std::vector<std::int64_t> start(v->shape().size(), 0), limit = v->shape();
    start[size_t(d)] = a;
    limit[size_t(d)] = b;
    return build::slice(t_, v, start, limit);
  };
  std::int64_t n = x.re->shape()[size_t(d)];
  if (n == 0) {
    Shape s = x.re->shape();
    s[size_t(d)] = 1;
    return {build::broadcast_in_dim(t_, build::scalar(t_, x.re->dtype(), 1), s, {}), zeros(x.re->dtype(), s)};
  }
  while (n > 1) {
    const std::int64_t h = n / 2;
    Parts p = cmul({sl(x.re, 0, h), sl(x.im, 0, h)}, {sl(x.re, h, 2 * h), sl(x.im, h, 2 * h)});
    if (n % 2)
      p = {build::concatenate(t_, {p.re, sl(x.re, 2 * h, n)}, d), build::concatenate(t_, {p.im, sl(x.im, 2 * h, n)}, d)};
    x = p;
    n = h + n % 2;
  }
  return x;
}

}  // namespace tessel
