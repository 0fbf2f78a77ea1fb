// Rules of the complex-number primitives: real, imag, conj (complex ->
// real, real, complex) and complex (two reals of one dtype -> complex).
//
// Their derivatives are JAX's: transposes pair a cotangent w with a value z
// as Re(w z) (no conjugation), so real^T(c) = c + 0i, imag^T(c) = -ic,
// conj^T(c) = conj(c), complex^T(c) = (Re c, -Im c). With these, grad of a
// real function of z is the conjugate of the Wirtinger-style gradient JAX
// returns (grad |z|^2 at 3+4j is 6-8j).
#include <cstring>

#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::elementwise_factors;
using rule_util::expect_arity;

namespace {

// Reads a complex array's parts: out[i] = part(x[i]).
template <class F>
void complex_parts(const HostArray& x, HostArray& out, F&& f) {
  visit_wide_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_complex_v<T>) {
      using R = typename T::value_type;
      const T* a = reinterpret_cast<const T*>(x.bytes.data());
      R* y = reinterpret_cast<R*>(out.bytes.data());
      for (std::int64_t i = 0; i < numel(x.shape); ++i) y[i] = f(a[i]);
    } else {
      throw InternalError("complex_parts of a non-complex array");
    }
  });
}

NodeRef real_part(NodeTable& t, const NodeRef& z) { return build::unary(t, Op::real, z); }
NodeRef imag_part(NodeTable& t, const NodeRef& z) { return build::unary(t, Op::imag, z); }

}  // namespace

// ------------------------------------------------------------------ real, imag

#define TESSEL_PART(OP, PART)                                                                              \
  Aval Rule<Op::OP>::infer(const std::vector<Aval>& in, const A&, const Aval&) {                          \
    expect_arity(Op::OP, in, 1);                                                                           \
    if (!is_complex(in[0].dtype)) throw TypeError(cat(#OP " requires a complex operand, got ", avals_str(in))); \
    return Aval{real_dtype(in[0].dtype), in[0].shape, in[0].weak_type};                                    \
  }                                                                                                        \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval,            \
                          HostArray& out) {                                                                \
    rule_util::allocate(out, aval);                                                                        \
    complex_parts(*in[0], out, [](auto z) { return z.PART(); });                                           \
  }                                                                                                        \
  FactorRule Rule<Op::OP>::factors(const Node& n) { return elementwise_factors(n); }                      \
  TESSEL_LOCAL_SAME_OP(OP)                                                                                 \
  TESSEL_BATCH_SAME_OP(OP)
TESSEL_PART(real, real)
TESSEL_PART(imag, imag)
#undef TESSEL_PART

NodeRef Rule<Op::real>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                            const NodeRef&) {
  return tx[0] ? real_part(t, tx[0]) : nullptr;
}
void Rule<Op::real>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                               std::vector<NodeRef>& cts) {
  cts[0] = build::convert(t, ct, n.in[0]->dtype(), n.in[0]->aval.weak_type);
}

NodeRef Rule<Op::imag>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                            const NodeRef&) {
  return tx[0] ? imag_part(t, tx[0]) : nullptr;
}
void Rule<Op::imag>::transpose(NodeTable& t, const Node&, const NodeRef& ct, const std::vector<bool>&,
                               std::vector<NodeRef>& cts) {
  cts[0] = build::binary(t, Op::complex, ad::zeros_like(t, ct), build::unary(t, Op::neg, ct));
}

// ------------------------------------------------------------------ conj

Aval Rule<Op::conj>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  expect_arity(Op::conj, in, 1);
  if (!is_complex(in[0].dtype)) throw TypeError(cat("conj requires a complex operand, got ", avals_str(in)));
  return in[0];
}
void Rule<Op::conj>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_complex_v<T>) {
      const T* a = reinterpret_cast<const T*>(in[0]->bytes.data());
      T* y = reinterpret_cast<T*>(out.bytes.data());
      for (std::int64_t i = 0; i < numel(aval.shape); ++i) y[i] = std::conj(a[i]);
    }
  });
}
FactorRule Rule<Op::conj>::factors(const Node& n) { return elementwise_factors(n); }
TESSEL_LOCAL_SAME_OP(conj)
TESSEL_BATCH_SAME_OP(conj)
NodeRef Rule<Op::conj>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                            const NodeRef&) {
  return tx[0] ? build::unary(t, Op::conj, tx[0]) : nullptr;
}
void Rule<Op::conj>::transpose(NodeTable& t, const Node&, const NodeRef& ct, const std::vector<bool>&,
                               std::vector<NodeRef>& cts) {
  cts[0] = build::unary(t, Op::conj, ct);
}

// ------------------------------------------------------------------ complex

Aval Rule<Op::complex>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  expect_arity(Op::complex, in, 2);
  if (!is_floating(in[0].dtype) || in[0].dtype != in[1].dtype || in[0].shape != in[1].shape)
    throw TypeError(cat("complex requires two floating-point operands of one shape and dtype, got ", avals_str(in)));
  return Aval{complex_dtype(in[0].dtype), in[0].shape, in[0].weak_type && in[1].weak_type};
}
void Rule<Op::complex>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_complex_v<T>) {
      using R = typename T::value_type;
      const R* x = reinterpret_cast<const R*>(in[0]->bytes.data());
      const R* y = reinterpret_cast<const R*>(in[1]->bytes.data());
      T* z = reinterpret_cast<T*>(out.bytes.data());
      for (std::int64_t i = 0; i < numel(aval.shape); ++i) z[i] = T(x[i], y[i]);
    }
  });
}
FactorRule Rule<Op::complex>::factors(const Node& n) { return elementwise_factors(n); }
TESSEL_LOCAL_SAME_OP(complex)
TESSEL_BATCH_SAME_OP(complex)
NodeRef Rule<Op::complex>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x,
                               const std::vector<NodeRef>& tx, const NodeRef&) {
  auto d = ad::dense_tangents(t, x, tx);
  if (d.empty()) return nullptr;
  return build::binary(t, Op::complex, d[0], d[1]);
}
void Rule<Op::complex>::transpose(NodeTable& t, const Node&, const NodeRef& ct, const std::vector<bool>& linear,
                                  std::vector<NodeRef>& cts) {
  if (linear[0]) cts[0] = real_part(t, ct);
  if (linear[1]) cts[1] = build::unary(t, Op::neg, imag_part(t, ct));
}

// ------------------------------------------------------------------ complex expansion, cost

NodeRef Rule<Op::real>::expand_complex(ComplexBuilder& b, const Node&, const std::vector<NodeRef>& ops) {
  return b.unpack(ops[0]).re;
}
NodeRef Rule<Op::imag>::expand_complex(ComplexBuilder& b, const Node&, const std::vector<NodeRef>& ops) {
  return b.unpack(ops[0]).im;
}
NodeRef Rule<Op::conj>::expand_complex(ComplexBuilder& b, const Node&, const std::vector<NodeRef>& ops) {
  Parts z = b.unpack(ops[0]);
  return b.pack({z.re, b.un(Op::neg, z.im)});
}
NodeRef Rule<Op::complex>::expand_complex(ComplexBuilder& b, const Node&, const std::vector<NodeRef>& ops) {
  return b.pack({ops[0], ops[1]});
}
TESSEL_COST(real, elementwise_cost)
TESSEL_COST(imag, elementwise_cost)
TESSEL_COST(conj, elementwise_cost)
TESSEL_COST(complex, elementwise_cost)

}  // namespace tessel
