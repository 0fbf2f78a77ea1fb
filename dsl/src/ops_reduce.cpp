// Reductions.
#include <algorithm>

#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::apply1;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;
using detail::cat;

namespace {

Array reduction(const char* name, Op op, const Array& x, const Axes& axis, bool keepdims) {
  return apply1(name, {x}, [=](NodeTable& t, const NR& in) {
    NodeRef v = in[0];
    // As jnp: sums and products of booleans count in int32.
    if ((op == Op::reduce_sum || op == Op::reduce_prod) && v->dtype() == DType::bool_)
      v = c::cast(t, v, DType::int32, false);
    auto axes = c::norm_axes(axis, v->rank(), name);
    // As JAX: max and min have no identity, so an empty reduced axis is an error.
    if (op == Op::reduce_max || op == Op::reduce_min)
      for (auto a : axes)
        if (v->shape()[a] == 0)
          throw ValueError(cat("zero-size array to reduction operation ", op == Op::reduce_max ? "max" : "min",
                               " which has no identity: ", name, " over axis ", a, " of ",
                               aval_str(v->dtype(), v->shape())));
    return c::reduce(t, op, v, axes, keepdims);
  });
}

std::int64_t count(const Shape& s, const std::vector<std::int64_t>& axes) {
  std::int64_t n = 1;
  for (auto a : axes) n *= s[a];
  return n;
}

NodeRef mean_node(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& axes, bool keepdims) {
  NodeRef f = c::to_inexact(t, x);
  NodeRef s = c::reduce(t, Op::reduce_sum, f, axes, keepdims);
  return build::binary(t, Op::div, s, c::full_like(t, s, double(count(x->shape(), axes))));
}

Array arg_reduction(const char* name, Op op, const Array& x, std::optional<int> axis, bool keepdims) {
  return apply1(name, {x}, [=](NodeTable& t, const NR& in) {
    NodeRef v = in[0];
    std::int64_t ax;
    if (!axis) {
      v = build::reshape(t, v, {numel(v->shape())});
      ax = 0;
    } else {
      ax = c::norm_axis(*axis, v->rank(), name);
    }
    if (v->shape()[ax] == 0)
      throw ValueError(cat("attempt to get ", op == Op::argmax ? "argmax" : "argmin", " of an empty sequence: ", name,
                           " over axis ", ax, " of ", aval_str(in[0]->dtype(), in[0]->shape())));
    NodeRef r = build::arg_reduce(t, op, v, ax, DType::int32);
    if (!keepdims) return r;
    Shape kept = axis ? in[0]->shape() : Shape(in[0]->shape().size(), 1);
    if (axis) kept[ax] = 1;
    return build::reshape(t, r, kept);
  });
}

}  // namespace

Array sum(const Array& x, Axes axis, bool keepdims) { return reduction("tessel.sum", Op::reduce_sum, x, axis, keepdims); }
Array max(const Array& x, Axes axis, bool keepdims) { return reduction("tessel.max", Op::reduce_max, x, axis, keepdims); }
Array min(const Array& x, Axes axis, bool keepdims) { return reduction("tessel.min", Op::reduce_min, x, axis, keepdims); }
Array prod(const Array& x, Axes axis, bool keepdims) {
  return reduction("tessel.prod", Op::reduce_prod, x, axis, keepdims);
}
Array mean(const Array& x, Axes axis, bool keepdims) {
  return apply1("tessel.mean", {x}, [=](NodeTable& t, const NR& in) {
    // 16- and 8-bit floats are computed in float32 and rounded once (jnp's
    // upcast_f16_for_computation).
    const DType dt = in[0]->dtype();
    NodeRef x = is_narrow_float(dt) ? c::cast(t, in[0], DType::float32, false) : in[0];
    NodeRef m = mean_node(t, x, c::norm_axes(axis, in[0]->rank(), "tessel.mean"), keepdims);
    return is_narrow_float(dt) ? c::cast(t, m, dt, false) : m;
  });
}
Array argmax(const Array& x, std::optional<int> axis, bool keepdims) {
  return arg_reduction("tessel.argmax", Op::argmax, x, axis, keepdims);
}
Array argmin(const Array& x, std::optional<int> axis, bool keepdims) {
  return arg_reduction("tessel.argmin", Op::argmin, x, axis, keepdims);
}
Array AllTag::operator()(const Array& x, Axes axis, bool keepdims) const {
  return equal(sum(logical_not(astype(x, DType::bool_)), axis, keepdims), array(std::int32_t(0)));
}
Array any(const Array& x, Axes axis, bool keepdims) {
  return greater(sum(astype(x, DType::bool_), axis, keepdims), array(std::int32_t(0)));
}
Array isclose(const Array& a, const Array& b, double rtol, double atol) {
  // As numpy: infinities are close only to themselves, NaNs to nothing.
  auto finite = logical_and(isfinite(a), isfinite(b));
  return logical_or(equal(a, b), logical_and(finite, less_equal(abs(a - b), atol + rtol * abs(b))));
}
Array allclose(const Array& a, const Array& b, double rtol, double atol) { return tessel::all(isclose(a, b, rtol, atol)); }

Array sort(const Array& x, int axis) {
  return apply1("tessel.sort", {x}, [=](NodeTable& t, const NR& in) {
    const std::int64_t d = c::norm_axis(axis, in[0]->rank(), "tessel.sort");
    return build::sort(t, in[0], in[0], d);
  });
}
Array argsort(const Array& x, int axis) {
  return apply1("tessel.argsort", {x}, [=](NodeTable& t, const NR& in) {
    const std::int64_t d = c::norm_axis(axis, in[0]->rank(), "tessel.argsort");
    return build::sort(t, in[0], build::iota(t, DType::int32, in[0]->shape(), d), d);
  });
}
Array var(const Array& x, Axes axis, int ddof, bool keepdims) {
  return apply1("tessel.var", {x}, [=](NodeTable& t, const NR& in) {
    auto axes = c::norm_axes(axis, in[0]->rank(), "tessel.var");
    NodeRef f = c::to_inexact(t, in[0]);
    const DType narrow = is_narrow_float(f->dtype()) ? f->dtype() : DType::float32;
    if (is_narrow_float(f->dtype())) f = c::cast(t, f, DType::float32, false);  // in float32, rounded once
    NodeRef m = c::broadcast_to(t, mean_node(t, f, axes, true), f->shape());
    NodeRef d = build::binary(t, Op::sub, f, m);
    // |d|^2: a complex array's variance is real (NumPy's and JAX's)
    NodeRef d2 = is_complex(d->dtype()) ? build::unary(t, Op::real, build::binary(t, Op::mul, d, build::unary(t, Op::conj, d)))
                                        : build::binary(t, Op::mul, d, d);
    NodeRef s = c::reduce(t, Op::reduce_sum, d2, axes, keepdims);
    NodeRef v = build::binary(t, Op::div, s, c::full_like(t, s, double(count(f->shape(), axes) - ddof)));
    return is_narrow_float(narrow) ? c::cast(t, v, narrow, false) : v;
  });
}
Array std(const Array& x, Axes axis, int ddof, bool keepdims) { return sqrt(var(x, axis, ddof, keepdims)); }
Array logsumexp(const Array& x, Axes axis, bool keepdims) {
  return apply1("tessel.logsumexp", {x}, [=](NodeTable& t, const NR& in) {
    auto axes = c::norm_axes(axis, in[0]->rank(), "tessel.logsumexp");
    NodeRef f = c::to_inexact(t, in[0]);
    NodeRef m = c::reduce(t, Op::reduce_max, f, axes, true);
    // A max of -inf (all -inf) or inf must not produce NaN: shift by 0 there.
    NodeRef finite = build::unary(t, Op::is_finite, m);
    m = build::select(t, finite, m, c::full_like(t, m, 0));
    NodeRef e = build::unary(t, Op::exp, build::binary(t, Op::sub, f, c::broadcast_to(t, m, f->shape())));
    NodeRef s = c::reduce(t, Op::reduce_sum, e, axes, true);
    NodeRef r = build::binary(t, Op::add, build::unary(t, Op::log, s), m);
    if (keepdims) return r;
    Shape out;
    for (int d = 0; d < f->rank(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(f->shape()[d]);
    return build::reshape(t, r, out);
  });
}

Array Array::sum(const Axes& axis, bool keepdims) const { return tessel::sum(*this, axis, keepdims); }
Array Array::sum() const { return tessel::sum(*this); }
Array Array::mean(const Axes& axis, bool keepdims) const { return tessel::mean(*this, axis, keepdims); }
Array Array::mean() const { return tessel::mean(*this); }
Array Array::max(const Axes& axis, bool keepdims) const { return tessel::max(*this, axis, keepdims); }
Array Array::max() const { return tessel::max(*this); }
Array Array::min(const Axes& axis, bool keepdims) const { return tessel::min(*this, axis, keepdims); }
Array Array::min() const { return tessel::min(*this); }

}  // namespace tessel
