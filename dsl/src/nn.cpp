// ts::nn: activations and friends, as compositions.
#include <cmath>

#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"

namespace tessel::nn {

using detail::apply1;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;

Array relu(const Array& x) {
  return apply1("nn.relu", {x}, [](NodeTable& t, const NR& in) {
    return build::binary(t, Op::max, in[0], c::full_like(t, in[0], 0));
  });
}

Array sigmoid(const Array& x) {
  return apply1("nn.sigmoid", {x}, [](NodeTable& t, const NR& in) { return build::unary(t, Op::logistic, c::to_inexact(t, in[0])); });
}

namespace {
// x - max(x) along axes (the max treated as a constant, as jax.nn does).
NodeRef shifted(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& axes) {
  NodeRef m = c::reduce(t, Op::reduce_max, x, axes, true);
  NodeRef finite = build::unary(t, Op::is_finite, m);
  m = build::select(t, finite, m, c::full_like(t, m, 0));
  return build::binary(t, Op::sub, x, c::broadcast_to(t, m, x->shape()));
}
}  // namespace

Array softmax(const Array& x, Axes axis) {
  return apply1("nn.softmax", {x}, [axis](NodeTable& t, const NR& in) {
    NodeRef f = c::to_inexact(t, in[0]);
    auto axes = c::norm_axes(axis, f->rank(), "nn.softmax");
    NodeRef e = build::unary(t, Op::exp, shifted(t, f, axes));
    NodeRef s = c::broadcast_to(t, c::reduce(t, Op::reduce_sum, e, axes, true), f->shape());
    return build::binary(t, Op::div, e, s);
  });
}

Array log_softmax(const Array& x, Axes axis) {
  return apply1("nn.log_softmax", {x}, [axis](NodeTable& t, const NR& in) {
    NodeRef f = c::to_inexact(t, in[0]);
    auto axes = c::norm_axes(axis, f->rank(), "nn.log_softmax");
    NodeRef sh = shifted(t, f, axes);
    NodeRef s = c::reduce(t, Op::reduce_sum, build::unary(t, Op::exp, sh), axes, true);
    return build::binary(t, Op::sub, sh, c::broadcast_to(t, build::unary(t, Op::log, s), f->shape()));
  });
}

Array gelu(const Array& x, bool approximate) {
  return apply1("nn.gelu", {x}, [approximate](NodeTable& t, const NR& in) {
    NodeRef f = c::to_inexact(t, in[0]);
    auto k = [&](double v) { return c::full_like(t, f, v); };
    if (approximate) {
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      NodeRef x3 = build::binary(t, Op::mul, build::binary(t, Op::mul, f, f), f);
      NodeRef inner = build::binary(t, Op::mul, k(std::sqrt(2.0 / M_PI)),
                                    build::binary(t, Op::add, f, build::binary(t, Op::mul, k(0.044715), x3)));
      NodeRef th = build::unary(t, Op::tanh, inner);
      return build::binary(t, Op::mul, build::binary(t, Op::mul, k(0.5), f), build::binary(t, Op::add, k(1.0), th));
    }
    // Exact: 0.5 x (1 + erf(x / sqrt 2)).
    NodeRef e = build::unary(t, Op::erf, build::binary(t, Op::mul, f, k(1.0 / std::sqrt(2.0))));
    return build::binary(t, Op::mul, build::binary(t, Op::mul, k(0.5), f), build::binary(t, Op::add, k(1.0), e));
  });
}

Array one_hot(const Array& x, std::int64_t num_classes, DType dtype) {
  return apply1("nn.one_hot", {x}, [num_classes, dtype](NodeTable& t, const NR& in) {
    Shape s = in[0]->shape();
    s.push_back(num_classes);
    std::vector<std::int64_t> dims;
    for (int d = 0; d < in[0]->rank(); ++d) dims.push_back(d);
    NodeRef idx = build::broadcast_in_dim(t, c::cast(t, in[0], DType::int32, false), s, dims);
    NodeRef cls = build::iota(t, DType::int32, s, std::int64_t(s.size() - 1));
    return c::cast(t, build::binary(t, Op::eq, idx, cls), dtype, false);
  });
}

}  // namespace tessel::nn
