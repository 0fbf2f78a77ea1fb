#include "codegen/complex.hpp"

#include <limits>
#include <unordered_map>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

using detail::cat;

bool is_cx(const Aval& a) {
  if (a.tuple) {
    for (auto& e : a.elements)
      if (is_cx(e)) return true;
    return false;
  }
  return is_complex(a.dtype);
}

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

template <class V>
V plus(V v, typename V::value_type x) {
  v.push_back(x);
  return v;
}

struct Parts {
  NodeRef re, im;
};

class Expander {
 public:
  explicit Expander(NodeTable& t) : t_(t) {}

  GraphRef expand(const Graph& g) {
    auto out = std::make_shared<Graph>();
    out->name = g.name;
    for (size_t i = 0; i < g.params.size(); ++i)
      out->params.push_back(build::parameter(t_, int(i), packed_aval(g.params[i]->aval)));
    auto m = rewrite(
        g, t_, out->params, [this](const Node& n, const std::vector<NodeRef>& ops) { return node(n, ops); },
        /*into_regions=*/false);
    for (auto& o : g.outputs) out->outputs.push_back(m.at(o.get()));
    for (auto& e : g.effects) out->effects.push_back(m.at(e.get()));
    return out;
  }

 private:
  NodeTable& t_;
  std::unordered_map<const Node*, Parts> parts_of_;  // packed value -> its parts

  // ---------------------------------------------------------------- real arithmetic
  NodeRef un(Op op, const NodeRef& x) { return build::unary(t_, op, x); }
  NodeRef bin(Op op, const NodeRef& a, const NodeRef& b) { return build::binary(t_, op, a, b); }
  NodeRef add(const NodeRef& a, const NodeRef& b) { return bin(Op::add, a, b); }
  NodeRef sub(const NodeRef& a, const NodeRef& b) { return bin(Op::sub, a, b); }
  NodeRef mul(const NodeRef& a, const NodeRef& b) { return bin(Op::mul, a, b); }
  NodeRef div(const NodeRef& a, const NodeRef& b) { return bin(Op::div, a, b); }
  NodeRef sel(const NodeRef& p, const NodeRef& a, const NodeRef& b) { return build::select(t_, p, a, b); }
  NodeRef sc(const NodeRef& like, double v) { return ad::scalar_like(t_, like, v); }
  NodeRef is_zero(const NodeRef& x) { return bin(Op::eq, x, sc(x, 0)); }

  // |a + bi| without overflow in the squares: m sqrt(1 + (s/m)^2); inf
  // when either part is infinite, 0 at 0.
  NodeRef hypot(const NodeRef& a, const NodeRef& b) {
    NodeRef A = un(Op::abs, a), B = un(Op::abs, b);
    NodeRef m = bin(Op::max, A, B), s = bin(Op::min, A, B);
    NodeRef r = div(s, m);
    NodeRef h = mul(m, un(Op::sqrt, add(sc(r, 1), mul(r, r))));
    h = sel(is_zero(m), sc(h, 0), h);
    NodeRef inf = sc(A, std::numeric_limits<double>::infinity());
    return sel(bin(Op::or_, bin(Op::eq, A, inf), bin(Op::eq, B, inf)), inf, h);
  }
  // (a + bi) / (c + di), Smith's algorithm (no overflow in c^2 + d^2).
  Parts cdiv(const Parts& x, const Parts& y) {
    const NodeRef &a = x.re, &b = x.im, &c = y.re, &d = y.im;
    NodeRef big = bin(Op::ge, un(Op::abs, c), un(Op::abs, d));
    NodeRef r1 = div(d, c), den1 = add(c, mul(d, r1));
    NodeRef re1 = div(add(a, mul(b, r1)), den1), im1 = div(sub(b, mul(a, r1)), den1);
    NodeRef r2 = div(c, d), den2 = add(mul(c, r2), d);
    NodeRef re2 = div(add(mul(a, r2), b), den2), im2 = div(sub(mul(b, r2), a), den2);
    return {sel(big, re1, re2), sel(big, im1, im2)};
  }
  Parts cmul(const Parts& x, const Parts& y) {
    return {sub(mul(x.re, y.re), mul(x.im, y.im)), add(mul(x.re, y.im), mul(x.im, y.re))};
  }
  Parts cexp(const Parts& z) {
    NodeRef e = un(Op::exp, z.re);
    return {mul(e, un(Op::cos, z.im)), sel(is_zero(z.im), z.im, mul(e, un(Op::sin, z.im)))};
  }
  Parts clog(const Parts& z) { return {un(Op::log, hypot(z.re, z.im)), bin(Op::atan2, z.im, z.re)}; }
  Parts csqrt(const Parts& z) {
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
  // cosh and sinh of real x (sinh through expm1: exact near 0).
  NodeRef cosh(const NodeRef& x) { return mul(add(un(Op::exp, x), un(Op::exp, un(Op::neg, x))), sc(x, 0.5)); }
  NodeRef sinh(const NodeRef& x) {
    return mul(sub(un(Op::expm1, x), un(Op::expm1, un(Op::neg, x))), sc(x, 0.5));
  }

  // ---------------------------------------------------------------- packing
  NodeRef pack(const Parts& p) {
    Shape s1 = plus(p.re->shape(), std::int64_t(1));
    NodeRef packed = build::concatenate(t_, {build::reshape(t_, p.re, s1), build::reshape(t_, p.im, s1)},
                                        std::int64_t(p.re->shape().size()));
    parts_of_.emplace(packed.get(), p);
    return packed;
  }
  Parts unpack(const NodeRef& packed) {
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
  NodeRef zeros(DType dtype, const Shape& s) {
    return build::broadcast_in_dim(t_, build::scalar(t_, dtype, 0), s, {});
  }
  // The complex product along dim d (kept, of size 1), by halves: ceil(log2 n)
  // rounds of complex multiplies, an odd entry carried to the next round.
  Parts prod_along(Parts x, std::int64_t d) {
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

  // ---------------------------------------------------------------- nodes
  NodeRef node(const Node& n, const std::vector<NodeRef>& ops) {
    if (!n.regions().empty()) {
      // Regions: expanded on their own (their parameters and results packed
      // like the operands and results they meet).
      std::vector<GraphRef> rs;
      for (auto& r : n.regions()) rs.push_back(expand(*r));
      return with_regions(t_, n, rs, ops);
    }
    bool touches = is_cx(n.aval);
    for (auto& x : n.in) touches = touches || is_cx(x->aval);
    if (!touches) return build::with_operands(t_, n, ops);
    auto P = [&](int k) { return unpack(ops[size_t(k)]); };
    const Shape& shape = n.shape();
    switch (n.op) {
      case Op::constant: {
        const Literal& v = *n.attr<attr::Constant>().value;
        auto l = std::make_shared<Literal>(v);
        l->dtype = real_dtype(v.dtype);
        l->shape.push_back(2);
        return build::constant(t_, l, n.aval.weak_type);
      }
      case Op::iota: {
        NodeRef re = build::iota(t_, real_dtype(n.dtype()), shape, n.attr<attr::Iota>().dimension);
        return pack({re, zeros(re->dtype(), shape)});
      }
      case Op::neg: return pack({un(Op::neg, P(0).re), un(Op::neg, P(0).im)});
      case Op::conj: return pack({P(0).re, un(Op::neg, P(0).im)});
      case Op::real: return P(0).re;
      case Op::imag: return P(0).im;
      case Op::complex: return pack({ops[0], ops[1]});
      case Op::add: return pack({add(P(0).re, P(1).re), add(P(0).im, P(1).im)});
      case Op::sub: return pack({sub(P(0).re, P(1).re), sub(P(0).im, P(1).im)});
      case Op::mul: return pack(cmul(P(0), P(1)));
      case Op::div: return pack(cdiv(P(0), P(1)));
      case Op::abs: return hypot(P(0).re, P(0).im);
      case Op::sign: {
        Parts z = P(0);
        NodeRef r = hypot(z.re, z.im);
        NodeRef zero = is_zero(r), safe = sel(zero, sc(r, 1), r);
        return pack({sel(zero, sc(r, 0), div(z.re, safe)), sel(zero, sc(r, 0), div(z.im, safe))});
      }
      case Op::is_finite: return bin(Op::and_, un(Op::is_finite, P(0).re), un(Op::is_finite, P(0).im));
      case Op::exp: return pack(cexp(P(0)));
      case Op::log: return pack(clog(P(0)));
      case Op::expm1: {
        Parts z = P(0);
        NodeRef s = un(Op::sin, mul(z.im, sc(z.im, 0.5)));
        NodeRef re = sub(mul(un(Op::expm1, z.re), un(Op::cos, z.im)), mul(sc(s, 2), mul(s, s)));
        return pack({re, mul(un(Op::exp, z.re), un(Op::sin, z.im))});
      }
      case Op::log1p: {
        Parts z = P(0);
        NodeRef m = add(mul(z.re, add(sc(z.re, 2), z.re)), mul(z.im, z.im));
        return pack({mul(un(Op::log1p, m), sc(m, 0.5)), bin(Op::atan2, z.im, add(sc(z.re, 1), z.re))});
      }
      case Op::sqrt: return pack(csqrt(P(0)));
      case Op::rsqrt: {
        Parts s = csqrt(P(0));
        return pack(cdiv({sc(s.re, 1), sc(s.re, 0)}, s));
      }
      case Op::sin: {
        Parts z = P(0);
        return pack({mul(un(Op::sin, z.re), cosh(z.im)), mul(un(Op::cos, z.re), sinh(z.im))});
      }
      case Op::cos: {
        Parts z = P(0);
        return pack({mul(un(Op::cos, z.re), cosh(z.im)), un(Op::neg, mul(un(Op::sin, z.re), sinh(z.im)))});
      }
      case Op::tan: {
        // (sin 2a + i sinh 2b) / (cos 2a + cosh 2b); i sign(b) once cosh overflows
        Parts z = P(0);
        NodeRef a2 = mul(z.re, sc(z.re, 2)), b2 = mul(z.im, sc(z.im, 2));
        NodeRef den = add(un(Op::cos, a2), cosh(b2));
        NodeRef fin = un(Op::is_finite, den);
        return pack({div(un(Op::sin, a2), den), sel(fin, div(sinh(b2), den), un(Op::sign, z.im))});
      }
      case Op::tanh: {
        // (sinh 2a + i sin 2b) / (cosh 2a + cos 2b); sign(a) once cosh overflows
        Parts z = P(0);
        NodeRef a2 = mul(z.re, sc(z.re, 2)), b2 = mul(z.im, sc(z.im, 2));
        NodeRef den = add(cosh(a2), un(Op::cos, b2));
        NodeRef fin = un(Op::is_finite, den);
        return pack({sel(fin, div(sinh(a2), den), un(Op::sign, z.re)), div(un(Op::sin, b2), den)});
      }
      case Op::pow: {
        // z^w = exp(w log z); 0^w = 1 for w = 0, else 0 (the reference kernel's rule)
        Parts z = P(0), w = P(1);
        Parts r = cexp(cmul(w, clog(z)));
        NodeRef z0 = bin(Op::and_, is_zero(z.re), is_zero(z.im));
        NodeRef w0 = bin(Op::and_, is_zero(w.re), is_zero(w.im));
        NodeRef one = sel(w0, sc(r.re, 1), sc(r.re, 0));
        return pack({sel(z0, one, r.re), sel(z0, sc(r.im, 0), r.im)});
      }
      case Op::eq: return bin(Op::and_, bin(Op::eq, P(0).re, P(1).re), bin(Op::eq, P(0).im, P(1).im));
      case Op::ne: return bin(Op::or_, bin(Op::ne, P(0).re, P(1).re), bin(Op::ne, P(0).im, P(1).im));
      case Op::select: return pack({sel(ops[0], P(1).re, P(2).re), sel(ops[0], P(1).im, P(2).im)});
      case Op::convert: {
        const DType from = n.in[0]->dtype(), to = n.dtype();
        if (!is_complex(from)) {
          NodeRef re = build::convert(t_, ops[0], real_dtype(to), false);
          return pack({re, zeros(re->dtype(), shape)});
        }
        Parts z = P(0);
        if (is_complex(to))
          return pack({build::convert(t_, z.re, real_dtype(to), false), build::convert(t_, z.im, real_dtype(to), false)});
        if (is_bool(to)) return bin(Op::or_, bin(Op::ne, z.re, sc(z.re, 0)), bin(Op::ne, z.im, sc(z.im, 0)));
        return build::convert(t_, z.re, to, n.aval.weak_type);
      }
      case Op::broadcast_in_dim:
        return build::broadcast_in_dim(t_, ops[0], plus(shape, std::int64_t(2)),
                                       plus(n.attr<attr::Dimensions>().dims, std::int64_t(shape.size())));
      case Op::reshape: return build::reshape(t_, ops[0], plus(shape, std::int64_t(2)));
      case Op::transpose:
        return build::transpose(t_, ops[0], plus(n.attr<attr::Dimensions>().dims, std::int64_t(shape.size())));
      case Op::rev: return build::rev(t_, ops[0], n.attr<attr::Dimensions>().dims);
      case Op::slice: {
        const auto& s = n.attr<attr::Slice>();
        std::vector<std::int64_t> stride = s.stride;
        if (!stride.empty()) stride.push_back(1);
        return build::slice(t_, ops[0], plus(s.start, std::int64_t(0)), plus(s.limit, std::int64_t(2)), stride);
      }
      case Op::pad: {
        const auto& p = n.attr<attr::Pad>();
        Parts x = P(0), v = P(1);
        return pack({build::pad(t_, x.re, v.re, p.low, p.high, p.interior),
                     build::pad(t_, x.im, v.im, p.low, p.high, p.interior)});
      }
      case Op::concatenate: return build::concatenate(t_, ops, n.attr<attr::Dimension>().dimension);
      case Op::dynamic_slice: {
        std::vector<NodeRef> starts(ops.begin() + 1, ops.end());
        starts.push_back(build::scalar(t_, starts.empty() ? DType::int32 : starts[0]->dtype(), 0));
        return build::dynamic_slice(t_, ops[0], starts, plus(n.attr<attr::DynamicSlice>().sizes, std::int64_t(2)));
      }
      case Op::dynamic_update_slice: {
        std::vector<NodeRef> starts(ops.begin() + 2, ops.end());
        starts.push_back(build::scalar(t_, starts.empty() ? DType::int32 : starts[0]->dtype(), 0));
        return build::dynamic_update_slice(t_, ops[0], ops[1], starts);
      }
      case Op::gather: {
        const auto& how = n.attr<attr::Indexed>();
        Parts x = P(0);
        return pack({build::gather(t_, x.re, ops[1], how), build::gather(t_, x.im, ops[1], how)});
      }
      case Op::scatter: {
        const auto& how = n.attr<attr::Indexed>();
        if (how.combine != Op::add && how.combine != Op::select)
          throw NotImplementedError(cat("scatter-", op_name(how.combine), " of complex values"));
        Parts x = P(0), u = P(2);
        return pack({build::scatter(t_, x.re, ops[1], u.re, how), build::scatter(t_, x.im, ops[1], u.im, how)});
      }
      case Op::sort: {
        if (is_complex(n.in[0]->dtype())) throw NotImplementedError("sorting by complex keys");
        const std::int64_t d = n.attr<attr::Dimension>().dimension;
        Parts v = P(1);
        return pack({build::sort(t_, ops[0], v.re, d), build::sort(t_, ops[0], v.im, d)});
      }
      case Op::reduce_sum: {
        const auto& dims = n.attr<attr::Dimensions>().dims;
        Parts x = P(0);
        return pack({build::reduce(t_, Op::reduce_sum, x.re, dims), build::reduce(t_, Op::reduce_sum, x.im, dims)});
      }
      case Op::reduce_prod: {
        Parts x = P(0);
        for (auto d : n.attr<attr::Dimensions>().dims) x = prod_along(x, d);
        return pack({build::reshape(t_, x.re, shape), build::reshape(t_, x.im, shape)});
      }
      case Op::dot_general: {
        const auto& dd = n.attr<attr::Dot>().dims;
        Parts a = P(0), b = P(1);
        auto dot = [&](const NodeRef& x, const NodeRef& y) { return build::dot_general(t_, x, y, dd); };
        return pack({sub(dot(a.re, b.re), dot(a.im, b.im)), add(dot(a.re, b.im), dot(a.im, b.re))});
      }
      case Op::fft:
        // FFTW reads and writes the packed arrays as they are (codegen/fft.cpp).
        return t_.make(Op::fft, {ops[0]}, packed_aval(n.aval), n.attrs);
      case Op::cholesky:
      case Op::triangular_solve:
      case Op::lu:
      case Op::qr:
      case Op::eigh:
      case Op::svd: {
        // LAPACK's complex routines read and write the packed arrays as they are (codegen/lapack.cpp).
        attr::Linalg p = n.attr<attr::Linalg>();
        p.packed_complex = true;
        return t_.make(n.op, ops, packed_aval(n.aval), p);
      }
      case Op::distributed_lu:
      case Op::distributed_cholesky:
      case Op::distributed_triangular_solve: {
        attr::RowBlocked p = n.attr<attr::RowBlocked>();
        p.packed_complex = true;
        return t_.make(n.op, ops, packed_aval(n.aval), p);
      }
      case Op::sharding_constraint:
      case Op::stop_gradient:
      case Op::pvary: return ops[0];  // identities
      case Op::cumsum: {
        const auto& p = n.attr<attr::Cumulative>();
        Parts x = P(0);
        return pack({build::cumulative(t_, Op::cumsum, x.re, p.dimension, p.reverse),
                     build::cumulative(t_, Op::cumsum, x.im, p.dimension, p.reverse)});
      }
      case Op::all_reduce: {
        const auto& how = n.attr<attr::AllReduce>();
        if (how.reduce_op == Op::add) return build::with_operands(t_, n, ops);
        if (how.reduce_op != Op::mul)
          throw InternalError(cat("an all-reduce by ", op_name(how.reduce_op), " of complex values"));
        // A product: every device's value gathered (the same order everywhere), multiplied by halves.
        Parts x = P(0);
        auto gather = [&](const NodeRef& v) {
          Shape s1 = shape;
          s1.insert(s1.begin(), 1);
          return build::all_gather(t_, build::reshape(t_, v, s1), how.mesh, how.axes, 0);
        };
        Parts g = prod_along({gather(x.re), gather(x.im)}, 0);
        return pack({build::reshape(t_, g.re, shape), build::reshape(t_, g.im, shape)});
      }
      case Op::reduce_scatter:
      case Op::all_gather:
      case Op::all_to_all:
      case Op::collective_permute:
      case Op::tuple:
      case Op::get_tuple_element:
      case Op::debug_callback: return build::with_operands(t_, n, ops);  // packed: the same bytes move (or are read)
      // Removed before codegen, handled above (regions, parameters), or never complex.
      case Op::parameter: case Op::axis_index: case Op::call: case Op::shard_map: case Op::cond: case Op::while_:
      case Op::scan:
        throw InternalError(cat(op_name(n.op), " of complex values (", n.aval.str(), ") reached the complex expander"));
      // No complex form here: the API refuses complex operands of most of
      // these (comparisons, bitwise and rounding ops, erf, atan2, threefry,
      // top_k); the others are not supported yet. Every op is listed: a new
      // op fails to build (-Werror=switch) until it says how it expands.
      case Op::logistic: case Op::erf_inv: case Op::erf: case Op::floor: case Op::ceil: case Op::round: case Op::not_:
      case Op::rem: case Op::max: case Op::min: case Op::atan2: case Op::and_: case Op::or_: case Op::xor_:
      case Op::shift_left: case Op::shift_right_logical: case Op::lt: case Op::le: case Op::gt: case Op::ge:
      case Op::threefry2x32: case Op::bitcast_convert: case Op::reduce_max: case Op::reduce_min: case Op::argmax:
      case Op::argmin: case Op::cumprod: case Op::cummax: case Op::cummin: case Op::cumlogsumexp: case Op::top_k:
        throw NotImplementedError(cat(op_name(n.op), " of complex values (", n.aval.str(),
                                      ") is not supported by the compiler yet"));
    }
    throw InternalError("the complex expander's op switch fell through");
  }
};

}  // namespace

bool has_complex(const Graph& g) {
  bool any = false;
  for_each_graph(g, [&](const Graph& r) {
    for (auto& n : r.topo_order()) any = any || is_cx(n->aval);
  });
  return any;
}

Graph expand_complex(const Graph& g) {
  NodeTable t;
  Expander e(t);
  return *e.expand(g);
}

}  // namespace tessel::codegen
