// Elementwise operations and operators.
#include <cmath>

#include <tessel/device_put.hpp>
#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::apply1;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;

namespace {

// Unary ops of floats: integers and booleans become float32 first.
Array float_unary(const char* name, Op op, const Array& x) {
  return apply1(name, {x}, [op](NodeTable& t, const NR& in) { return build::unary(t, op, c::to_inexact(t, in[0])); });
}

Array numeric_unary(const char* name, Op op, const Array& x) {
  return apply1(name, {x}, [op, name](NodeTable& t, const NR& in) {
    if (in[0]->dtype() == DType::bool_) throw TypeError(std::string(name) + " of a boolean array");
    return build::unary(t, op, in[0]);
  });
}

Array binary_op(const char* name, Op op, const Array& a, const Array& b) {
  return apply1(name, {a, b}, [op, name](NodeTable& t, const NR& in) { return c::binary(t, op, in[0], in[1], name); });
}

// An arithmetic op that is a logical one (bool_op) when both operands promote to bool.
Array bool_aware_op(const char* name, Op op, Op bool_op, const Array& a, const Array& b) {
  return apply1(name, {a, b}, [op, bool_op, name](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[0], in[1]}, name);
    return build::binary(t, v[0]->dtype() == DType::bool_ ? bool_op : op, v[0], v[1]);
  });
}

// A binary op with a floating result: promoted operands, integers made inexact (true division, power, atan2).
Array inexact_binary_op(const char* name, Op op, const Array& a, const Array& b) {
  return apply1(name, {a, b}, [op, name](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[0], in[1]}, name);
    return build::binary(t, op, c::to_inexact(t, v[0]), c::to_inexact(t, v[1]));
  });
}

// lax's binary ops do not promote: operands of one dtype (a weakly typed
// scalar takes the other's).
Array lax_binary(const char* name, Op op, const Array& a, const Array& b) {
  if (a.dtype() != b.dtype() && !a.weak_type() && !b.weak_type())
    throw TypeError(std::string(name) + " requires arguments to have the same dtypes, got " +
                    aval_str(a.dtype(), a.shape()) + " and " + aval_str(b.dtype(), b.shape()));
  return binary_op(name, op, a, b);
}

// lax's floating-point functions take floating-point operands only.
Array lax_float_unary(const char* name, Op op, const Array& x) {
  if (!is_floating(x.dtype()))
    throw TypeError(std::string(name) + " requires a floating-point operand, got " + aval_str(x.dtype(), x.shape()));
  return float_unary(name, op, x);
}

}  // namespace

Array negative(const Array& x) { return numeric_unary("tessel.negative", Op::neg, x); }
Array sin(const Array& x) { return float_unary("tessel.sin", Op::sin, x); }
Array cos(const Array& x) { return float_unary("tessel.cos", Op::cos, x); }
Array tan(const Array& x) { return float_unary("tessel.tan", Op::tan, x); }
Array tanh(const Array& x) { return float_unary("tessel.tanh", Op::tanh, x); }
Array exp(const Array& x) { return float_unary("tessel.exp", Op::exp, x); }
Array log(const Array& x) { return float_unary("tessel.log", Op::log, x); }
Array log1p(const Array& x) { return float_unary("tessel.log1p", Op::log1p, x); }
Array expm1(const Array& x) { return float_unary("tessel.expm1", Op::expm1, x); }
Array sqrt(const Array& x) { return float_unary("tessel.sqrt", Op::sqrt, x); }
Array rsqrt(const Array& x) { return float_unary("tessel.rsqrt", Op::rsqrt, x); }
Array abs(const Array& x) { return numeric_unary("tessel.abs", Op::abs, x); }
Array sign(const Array& x) { return numeric_unary("tessel.sign", Op::sign, x); }
Array floor(const Array& x) {
  if (!is_inexact(x.dtype())) return x;  // complex: the rule's TypeError
  return float_unary("tessel.floor", Op::floor, x);
}
Array ceil(const Array& x) {
  if (!is_inexact(x.dtype())) return x;  // complex: the rule's TypeError
  return float_unary("tessel.ceil", Op::ceil, x);
}
Array round(const Array& x) {
  if (!is_inexact(x.dtype())) return x;  // complex: the rule's TypeError
  return float_unary("tessel.round", Op::round, x);
}
Array square(const Array& x) {
  return apply1("tessel.square", {x}, [](NodeTable& t, const NR& in) { return build::binary(t, Op::mul, in[0], in[0]); });
}
Array reciprocal(const Array& x) {
  return apply1("tessel.reciprocal", {x}, [](NodeTable& t, const NR& in) {
    NodeRef f = c::to_inexact(t, in[0]);
    return build::binary(t, Op::div, c::full_like(t, f, 1.0), f);
  });
}
Array logical_not(const Array& x) {
  return apply1("tessel.logical_not", {x}, [](NodeTable& t, const NR& in) {
    return build::unary(t, Op::not_, c::cast(t, in[0], DType::bool_, false));
  });
}
Array isnan(const Array& x) {
  return apply1("tessel.isnan", {x}, [](NodeTable& t, const NR& in) {
    if (!is_floating(in[0]->dtype())) return c::broadcast_to(t, build::scalar(t, DType::bool_, 0), in[0]->shape());
    return build::binary(t, Op::ne, in[0], in[0]);
  });
}
Array real(const Array& x) {
  if (!is_complex(x.dtype())) return x;
  return apply1("tessel.real", {x}, [](NodeTable& t, const NR& in) { return build::unary(t, Op::real, in[0]); });
}
Array imag(const Array& x) {
  return apply1("tessel.imag", {x}, [](NodeTable& t, const NR& in) {
    if (!is_complex(in[0]->dtype())) return c::full_like(t, in[0], 0);
    return build::unary(t, Op::imag, in[0]);
  });
}
Array conj(const Array& x) {
  if (!is_complex(x.dtype())) return x;
  return apply1("tessel.conj", {x}, [](NodeTable& t, const NR& in) { return build::unary(t, Op::conj, in[0]); });
}
Array conjugate(const Array& x) { return conj(x); }
Array angle(const Array& x) {
  return apply1("tessel.angle", {x}, [](NodeTable& t, const NR& in) {
    NodeRef z = c::to_inexact(t, in[0]);
    if (!is_complex(z->dtype())) return build::binary(t, Op::atan2, c::full_like(t, z, 0), z);
    return build::binary(t, Op::atan2, build::unary(t, Op::imag, z), build::unary(t, Op::real, z));
  });
}
Array complex(const Array& re, const Array& im) {
  return apply1("tessel.complex", {re, im}, [](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[0], in[1]}, "tessel.complex");
    NodeRef a = c::to_inexact(t, v[0]), b = c::to_inexact(t, v[1]);
    if (is_complex(a->dtype()))
      throw TypeError("tessel.complex takes real parts, got " + a->aval.str() + " and " + b->aval.str());
    return build::binary(t, Op::complex, a, b);
  });
}
bool iscomplexobj(const Array& x) { return is_complex(x.dtype()); }

Array isfinite(const Array& x) {
  return apply1("tessel.isfinite", {x}, [](NodeTable& t, const NR& in) {
    if (!is_inexact(in[0]->dtype())) return c::broadcast_to(t, build::scalar(t, DType::bool_, 1), in[0]->shape());
    return build::unary(t, Op::is_finite, in[0]);
  });
}

// On booleans, as NumPy: add is a logical or, multiply a logical and.
Array add(const Array& a, const Array& b) { return bool_aware_op("tessel.add", Op::add, Op::or_, a, b); }
Array subtract(const Array& a, const Array& b) { return binary_op("tessel.subtract", Op::sub, a, b); }
Array multiply(const Array& a, const Array& b) { return bool_aware_op("tessel.multiply", Op::mul, Op::and_, a, b); }
Array divide(const Array& a, const Array& b) { return inexact_binary_op("tessel.divide", Op::div, a, b); }
Array floor_divide(const Array& a, const Array& b) {
  return apply1("tessel.floor_divide", {a, b}, [](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[0], in[1]}, "tessel.floor_divide");
    if (is_floating(v[0]->dtype())) return build::unary(t, Op::floor, build::binary(t, Op::div, v[0], v[1]));
    // Integers: truncation, then one down where the signs differ and it was inexact.
    NodeRef q = build::binary(t, Op::div, v[0], v[1]);
    if (v[0]->dtype() == DType::uint32) return q;
    NodeRef r = build::binary(t, Op::rem, v[0], v[1]);
    NodeRef zero = c::full_like(t, v[0], 0);
    NodeRef inexact = build::binary(t, Op::ne, r, zero);
    NodeRef signs = build::binary(t, Op::ne, build::binary(t, Op::lt, v[0], zero), build::binary(t, Op::lt, v[1], zero));
    NodeRef adjust = build::binary(t, Op::and_, inexact, signs);
    return build::select(t, adjust, build::binary(t, Op::sub, q, c::full_like(t, q, 1)), q);
  });
}
Array remainder(const Array& a, const Array& b) {
  return apply1("tessel.remainder", {a, b}, [](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[0], in[1]}, "tessel.remainder");
    NodeRef r = build::binary(t, Op::rem, v[0], v[1]);
    if (v[0]->dtype() == DType::uint32) return r;
    // numpy: the result takes the divisor's sign.
    NodeRef zero = c::full_like(t, r, 0);
    NodeRef fix = build::binary(t, Op::and_, build::binary(t, Op::ne, r, zero),
                                build::binary(t, Op::ne, build::binary(t, Op::lt, r, zero),
                                              build::binary(t, Op::lt, v[1], c::full_like(t, v[1], 0))));
    return build::select(t, fix, build::binary(t, Op::add, r, v[1]), r);
  });
}
Array power(const Array& a, const Array& b) { return inexact_binary_op("tessel.power", Op::pow, a, b); }
Array pow(const Array& a, const Array& b) { return power(a, b); }
Array pow(const Array& x, int n) {
  return apply1("tessel.integer_pow", {x}, [n](NodeTable& t, const NR& in) {
    NodeRef base = in[0];
    if (n == 0) return c::full_like(t, base, 1);
    unsigned k = unsigned(n < 0 ? -n : n);
    NodeRef acc, p = base;
    while (k) {
      if (k & 1) acc = acc ? build::binary(t, Op::mul, acc, p) : p;
      k >>= 1;
      if (k) p = build::binary(t, Op::mul, p, p);
    }
    if (n < 0) {
      NodeRef f = c::to_inexact(t, acc);
      acc = build::binary(t, Op::div, c::full_like(t, f, 1), f);
    }
    return acc;
  });
}
Array maximum(const Array& a, const Array& b) { return binary_op("tessel.maximum", Op::max, a, b); }
Array minimum(const Array& a, const Array& b) { return binary_op("tessel.minimum", Op::min, a, b); }
Array arctan2(const Array& a, const Array& b) { return inexact_binary_op("tessel.arctan2", Op::atan2, a, b); }
Array logical_and(const Array& a, const Array& b) {
  return apply1("tessel.logical_and", {a, b}, [](NodeTable& t, const NR& in) {
    return c::binary(t, Op::and_, c::cast(t, in[0], DType::bool_, false), c::cast(t, in[1], DType::bool_, false),
                     "tessel.logical_and");
  });
}
Array logical_or(const Array& a, const Array& b) {
  return apply1("tessel.logical_or", {a, b}, [](NodeTable& t, const NR& in) {
    return c::binary(t, Op::or_, c::cast(t, in[0], DType::bool_, false), c::cast(t, in[1], DType::bool_, false),
                     "tessel.logical_or");
  });
}
Array equal(const Array& a, const Array& b) { return binary_op("tessel.equal", Op::eq, a, b); }
Array not_equal(const Array& a, const Array& b) { return binary_op("tessel.not_equal", Op::ne, a, b); }
Array less(const Array& a, const Array& b) { return binary_op("tessel.less", Op::lt, a, b); }
Array less_equal(const Array& a, const Array& b) { return binary_op("tessel.less_equal", Op::le, a, b); }
Array greater(const Array& a, const Array& b) { return binary_op("tessel.greater", Op::gt, a, b); }
Array greater_equal(const Array& a, const Array& b) { return binary_op("tessel.greater_equal", Op::ge, a, b); }

Array where(const Array& cond, const Array& x, const Array& y) {
  return apply1("tessel.where", {cond, x, y}, [](NodeTable& t, const NR& in) {
    auto v = c::promote(t, {in[1], in[2]}, "tessel.where");
    Shape shape = c::broadcast_shapes(in[0]->shape(), v[0]->shape(), "tessel.where");
    NodeRef p = c::broadcast_to(t, c::cast(t, in[0], DType::bool_, false), shape, "tessel.where");
    return build::select(t, p, c::broadcast_to(t, v[0], shape), c::broadcast_to(t, v[1], shape));
  });
}

// A bound is a weak scalar, as a Python number in jnp.clip: a whole-number
// bound of an integer array stays an integer (int32 stays int32), a
// fractional one is a weak float (the result promotes to float32).
Array clip(const Array& x, std::optional<double> lo, std::optional<double> hi) {
  auto bound = [&](double v) {
    const bool integral = !is_inexact(x.dtype()) && x.dtype() != DType::bool_ && v == std::floor(v) && std::fabs(v) < 9.2e18;
    if (integral) return detail::scalar_literal(v, std::fabs(v) < 2147483648.0 ? DType::int32 : DType::int64, true);
    return detail::scalar_literal(v, is_floating(x.dtype()) ? x.dtype() : DType::float32, true);
  };
  Array r = x;
  if (lo) r = maximum(r, bound(*lo));
  if (hi) r = minimum(r, bound(*hi));
  return r;
}

Array astype(const Array& x, DType dtype) {
  if (x.dtype() == dtype && !x.weak_type()) return x;
  return apply1("tessel.astype", {x}, [dtype](NodeTable& t, const NR& in) { return c::cast(t, in[0], dtype, false); });
}

Array operator-(const Array& x) { return negative(x); }
Array operator+(const Array& a, const Array& b) { return add(a, b); }
Array operator-(const Array& a, const Array& b) { return subtract(a, b); }
Array operator*(const Array& a, const Array& b) { return multiply(a, b); }
Array operator/(const Array& a, const Array& b) { return divide(a, b); }
Array operator==(const Array& a, const Array& b) { return equal(a, b); }
Array operator!=(const Array& a, const Array& b) { return not_equal(a, b); }
Array operator<(const Array& a, const Array& b) { return less(a, b); }
Array operator<=(const Array& a, const Array& b) { return less_equal(a, b); }
Array operator>(const Array& a, const Array& b) { return greater(a, b); }
Array operator>=(const Array& a, const Array& b) { return greater_equal(a, b); }

Array with_sharding_constraint(const Array& x, const Sharding& sharding) {
  if (!x.is_tracer()) return device_put(x, sharding);
  AxisSharding s = detail::axis_sharding(sharding, x.shape());
  detail::check_constraint_in_body(s);
  return apply1("tessel.with_sharding_constraint", {x},
                [s](NodeTable& t, const NR& in) { return build::sharding_constraint(t, in[0], s); });
}

namespace lax {
Array convert_element_type(const Array& x, DType dtype) { return astype(x, dtype); }
Array shift_left(const Array& a, const Array& b) { return lax_binary("lax.shift_left", Op::shift_left, a, b); }
Array shift_right_logical(const Array& a, const Array& b) {
  return lax_binary("lax.shift_right_logical", Op::shift_right_logical, a, b);
}
Array bitwise_and(const Array& a, const Array& b) { return lax_binary("lax.bitwise_and", Op::and_, a, b); }
Array bitwise_or(const Array& a, const Array& b) { return lax_binary("lax.bitwise_or", Op::or_, a, b); }
Array bitwise_xor(const Array& a, const Array& b) { return lax_binary("lax.bitwise_xor", Op::xor_, a, b); }
Array bitcast_convert_type(const Array& x, DType dtype) {
  return apply1("lax.bitcast_convert_type", {x},
                [dtype](NodeTable& t, const NR& in) { return build::bitcast_convert(t, in[0], dtype); });
}
Array erf_inv(const Array& x) { return lax_float_unary("lax.erf_inv", Op::erf_inv, x); }
Array erf(const Array& x) { return lax_float_unary("lax.erf", Op::erf, x); }
}  // namespace lax

// Array methods that are one op.
Array Array::astype(DType dtype) const { return tessel::astype(*this, dtype); }

}  // namespace tessel
