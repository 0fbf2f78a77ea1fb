// What an op's complex-expansion rule builds with (Rule<op>::expand_complex,
// tracer/rules.hpp; the pass is codegen/complex.hpp).
//
// A complex array of shape S is held *packed*, a real array of shape S + [2]
// (NumPy's and std::complex's interleaved bytes), wherever it is stored or
// moved, and as its two real parts where it is computed with. The builder
// packs and unpacks (each packed value's parts are made once) and holds the
// complex arithmetic the rules share, written in real ops so that no later
// pass needs a complex type.
#pragma once

#include <unordered_map>

#include "tracer/ir.hpp"

namespace tessel {

// A complex value's two real parts, each of its shape.
struct Parts {
  NodeRef re, im;
};

// v with x appended (a packed value's shape, dims or starts gain the pair's).
template <class V>
V appended(V v, typename V::value_type x) {
  v.push_back(x);
  return v;
}

// The packed form of a complex aval (S + [2] of the real dtype); others as they are.
Aval packed_aval(const Aval& a);

class ComplexBuilder {
 public:
  explicit ComplexBuilder(NodeTable& t) : t_(t) {}
  NodeTable& table() { return t_; }

  // ------------------------------------------------------------ packing
  // A packed complex value from its parts.
  NodeRef pack(const Parts& p);
  // A packed value's parts (made once per value).
  Parts unpack(const NodeRef& packed);
  // zeros of dtype and shape s.
  NodeRef zeros(DType dtype, const Shape& s);

  // ------------------------------------------------------------ real arithmetic
  NodeRef un(Op op, const NodeRef& x);
  NodeRef bin(Op op, const NodeRef& a, const NodeRef& b);
  NodeRef add(const NodeRef& a, const NodeRef& b) { return bin(Op::add, a, b); }
  NodeRef sub(const NodeRef& a, const NodeRef& b) { return bin(Op::sub, a, b); }
  NodeRef mul(const NodeRef& a, const NodeRef& b) { return bin(Op::mul, a, b); }
  NodeRef div(const NodeRef& a, const NodeRef& b) { return bin(Op::div, a, b); }
  NodeRef sel(const NodeRef& p, const NodeRef& a, const NodeRef& b);
  NodeRef sc(const NodeRef& like, double v);  // v broadcast like `like`
  NodeRef is_zero(const NodeRef& x) { return bin(Op::eq, x, sc(x, 0)); }
  // cosh and sinh of real x (sinh through expm1: exact near 0).
  NodeRef cosh(const NodeRef& x);
  NodeRef sinh(const NodeRef& x);

  // ------------------------------------------------------------ complex arithmetic
  // |a + bi| without overflow in the squares; inf when a part is infinite, 0 at 0.
  NodeRef hypot(const NodeRef& a, const NodeRef& b);
  Parts cmul(const Parts& x, const Parts& y);
  // Smith's algorithm (no overflow in c^2 + d^2).
  Parts cdiv(const Parts& x, const Parts& y);
  Parts cexp(const Parts& z);
  Parts clog(const Parts& z);
  Parts csqrt(const Parts& z);
  // The complex product along dim d (kept, of size 1), by halves: ceil(log2 n)
  // rounds of complex multiplies, an odd entry carried to the next round.
  Parts prod_along(Parts x, std::int64_t d);

 private:
  NodeTable& t_;
  std::unordered_map<const Node*, Parts> parts_of_;  // packed value -> its parts
};

}  // namespace tessel
