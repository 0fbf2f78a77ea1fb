// jax.nn's activations, standardize and dot_product_attention (dsl/tessel/nn.hpp).
#include <cmath>

#include <tessel/nn.hpp>
#include <tessel/numpy.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::nn {

using detail::inexact;
using detail::staged;
using V = std::vector<Array>;

namespace {
template <class F>
Array act(const char* name, const Array& x, F f) {
  return staged(name, {x}, [f](const V& v) { return f(inexact(v[0])); });
}
}  // namespace

Array silu(const Array& x) { return act("nn.silu", x, [](const Array& f) { return f * sigmoid(f); }); }
Array swish(const Array& x) { return silu(x); }
Array elu(const Array& x, double alpha) {
  return act("nn.elu", x, [alpha](const Array& f) {
    Array pos = f > 0;
    return where(pos, f, alpha * expm1(where(pos, zeros_like(f), f)));
  });
}
Array celu(const Array& x, double alpha) {
  return act("nn.celu", x, [alpha](const Array& f) {
    return maximum(f, 0.0) + alpha * expm1(minimum(f, 0.0) / alpha);
  });
}
Array selu(const Array& x) {
  constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  return act("nn.selu", x, [](const Array& f) { return scale * elu(f, alpha); });
}
Array leaky_relu(const Array& x, double negative_slope) {
  return act("nn.leaky_relu", x, [negative_slope](const Array& f) { return where(f >= 0, f, negative_slope * f); });
}
Array softplus(const Array& x) { return act("nn.softplus", x, [](const Array& f) { return logaddexp(f, zeros_like(f)); }); }
Array log_sigmoid(const Array& x) { return act("nn.log_sigmoid", x, [](const Array& f) { return -softplus(-f); }); }
Array glu(const Array& x, int axis) {
  const int a = int(detail::compose::norm_axis(axis, x.ndim(), "nn.glu"));
  if (x.shape()[std::size_t(a)] % 2 != 0)
    throw ShapeError("nn.glu: axis " + std::to_string(axis) + " of " + aval_str(x.dtype(), x.shape()) +
                     " must have an even size");
  return act("nn.glu", x, [a](const Array& f) {
    auto parts = split(f, 2, a);
    return parts[0] * sigmoid(parts[1]);
  });
}
Array relu6(const Array& x) { return act("nn.relu6", x, [](const Array& f) { return minimum(maximum(f, 0.0), 6.0); }); }
Array hard_tanh(const Array& x) {
  return act("nn.hard_tanh", x, [](const Array& f) {
    return where(f > 1, ones_like(f), where(f < -1, full_like(f, -1.0), f));
  });
}
Array hard_sigmoid(const Array& x) { return act("nn.hard_sigmoid", x, [](const Array& f) { return relu6(f + 3.0) / 6.0; }); }
Array hard_silu(const Array& x) { return act("nn.hard_silu", x, [](const Array& f) { return f * hard_sigmoid(f); }); }
Array hard_swish(const Array& x) { return hard_silu(x); }
Array soft_sign(const Array& x) { return act("nn.soft_sign", x, [](const Array& f) { return f / (abs(f) + 1.0); }); }
Array mish(const Array& x) { return act("nn.mish", x, [](const Array& f) { return f * tessel::tanh(softplus(f)); }); }
Array squareplus(const Array& x, double b) {
  return act("nn.squareplus", x, [b](const Array& f) { return (f + sqrt(f * f + b)) / 2.0; });
}
Array sparse_plus(const Array& x) {
  return act("nn.sparse_plus", x, [](const Array& f) {
    return where(f <= -1, zeros_like(f), where(f >= 1, f, (f + 1.0) * (f + 1.0) / 4.0));
  });
}
Array sparse_sigmoid(const Array& x) {
  return act("nn.sparse_sigmoid", x, [](const Array& f) { return 0.5 * clip(f + 1.0, 0.0, 2.0); });
}
Array tanh(const Array& x) { return tessel::tanh(x); }
Array identity(const Array& x) { return x; }
Array standardize(const Array& x, Axes axis, const std::optional<Array>& mean_in,
                  const std::optional<Array>& variance_in, double epsilon) {
  Array f = inexact(x);
  Array m = mean_in ? *mean_in : mean(f, axis, true);
  Array var = variance_in ? *variance_in : mean(f * f, axis, true) - m * m;
  return (f - m) * rsqrt(var + epsilon);
}
Array logsumexp(const Array& x, Axes axis, bool keepdims) { return tessel::logsumexp(x, axis, keepdims); }

Array logmeanexp(const Array& x, Axes axis, bool keepdims) {
  std::int64_t n = 1;
  for (auto a : detail::compose::norm_axes(axis, x.ndim(), "nn.logmeanexp")) n *= x.shape()[std::size_t(a)];
  return tessel::logsumexp(x, axis, keepdims) - std::log(double(n));
}
Array log1mexp(const Array& x) {
  return act("nn.log1mexp", x, [](const Array& f) {
    // Below ln 2, log(-expm1(-x)); above, log1p(-exp(-x)) (Maechler's switch).
    Array small = f < 0.6931471805599453;
    return where(small, log(-expm1(-f)), log1p(-exp(-f)));
  });
}

Array dot_product_attention(const Array& q_in, const Array& k_in, const Array& v_in, AttentionOptions o) {
  const bool batched = q_in.ndim() == 4;
  if (!(q_in.ndim() == 3 || q_in.ndim() == 4) || k_in.ndim() != q_in.ndim() || v_in.ndim() != q_in.ndim())
    throw ShapeError("dot_product_attention: query, key and value must all be [B, T, N, H] or [T, N, H], got " +
                     aval_str(q_in.dtype(), q_in.shape()) + ", " + aval_str(k_in.dtype(), k_in.shape()) + " and " +
                     aval_str(v_in.dtype(), v_in.shape()));
  if (q_in.dtype() != k_in.dtype() || q_in.dtype() != v_in.dtype())
    throw ValueError("dot_product_attention: query, key and value must have the same dtype, got " +
                     std::string(dtype_name(q_in.dtype())) + ", " + dtype_name(k_in.dtype()) + " and " +
                     dtype_name(v_in.dtype()));
  if (o.mask && o.mask->dtype() != DType::bool_)
    throw ValueError("dot_product_attention: mask must be boolean, got " + aval_str(o.mask->dtype(), o.mask->shape()));
  Array q = batched ? q_in : expand_dims(q_in, 0), k = batched ? k_in : expand_dims(k_in, 0),
        v = batched ? v_in : expand_dims(v_in, 0);
  const std::int64_t B = q.shape()[0], T = q.shape()[1], N = q.shape()[2], H = q.shape()[3];
  const std::int64_t S = k.shape()[1], K = k.shape()[2];
  if (k.shape() != v.shape() || k.shape()[0] != B || k.shape()[3] != H || K == 0 || N % K != 0)
    throw ShapeError("dot_product_attention: key and value must be [B, S, K, H] with B and H the query's and K "
                     "dividing its N heads; got query " + shape_str(q_in.shape()) + ", key " + shape_str(k_in.shape()) +
                     ", value " + shape_str(v_in.shape()));
  const double scale = o.scale.value_or(1.0 / std::sqrt(double(H)));
  if (K != N) {  // grouped heads: each key head serves N / K query heads
    k = repeat(k, N / K, 2);
    v = repeat(v, N / K, 2);
  }
  Array logits = einsum("btnh,bsnh->bnts", q, k) * scale;
  const DType dt = logits.dtype();
  Array lf = dt == DType::float64 ? logits : logits.astype(DType::float32);
  if (o.bias) lf = lf + o.bias->astype(lf.dtype());
  Array keep = ones({B, N, T, S}, DType::bool_);
  if (o.mask) keep = logical_and(keep, broadcast_to(o.mask->astype(DType::bool_), {B, N, T, S}));
  if (o.is_causal) keep = logical_and(keep, broadcast_to(reshape(tri(T, S, 0, DType::bool_), {1, 1, T, S}), {B, N, T, S}));
  // Excluded positions take the dtype's lowest value (a fully masked row averages v, as JAX).
  lf = where(keep, lf, full_like(lf, lf.dtype() == DType::float64 ? -1.7976931348623157e308 : -3.4028234663852886e38));
  Array w = softmax(lf, -1).astype(dt);
  Array out = einsum("bnts,bsnh->btnh", w, v);
  return batched ? out : squeeze(out, 0);
}

}  // namespace tessel::nn

namespace tessel::nn {

Array scaled_matmul(const Array& lhs, const Array& rhs, const Array& lhs_scales, const Array& rhs_scales,
                    DType preferred_element_type) {
  using detail::cat;
  for (const Array* x : {&lhs, &rhs, &lhs_scales, &rhs_scales})
    if (x->ndim() != 3)
      throw ValueError(cat("scaled_matmul requires all inputs to be 3-dimensional arrays, got shapes ",
                           shape_str(lhs.shape()), ", ", shape_str(rhs.shape()), ", ", shape_str(lhs_scales.shape()),
                           " and ", shape_str(rhs_scales.shape())));
  const Shape &a = lhs.shape(), &b = rhs.shape(), &as = lhs_scales.shape(), &bs = rhs_scales.shape();
  if (a[2] != b[2] || a[0] != b[0])
    throw ValueError(cat("scaled_matmul requires inputs a and b to have matching batch (B) and contract (K) "
                         "dimensions, but got shapes ", shape_str(a), " and ", shape_str(b)));
  if (as[2] != bs[2] || as[0] != bs[0])
    throw ValueError(cat("scaled_matmul requires scales to have matching batch (B) and contract (K) dimensions, "
                         "but got shapes ", shape_str(as), " and ", shape_str(bs)));
  if (as[1] != a[1] || bs[1] != b[1] || as[0] != a[0])
    throw ValueError(cat("scaled_matmul requires scales to match non-contract dimensions of inputs, but got shapes "
                         "a: ", shape_str(a), ", b: ", shape_str(b), ", a_scales: ", shape_str(as),
                         ", b_scales: ", shape_str(bs)));
  if (as[2] == 0 || a[2] % as[2] != 0)
    throw ValueError(cat("scaled_matmul: the scales' last dimension ", as[2], " must divide the contracting dimension ",
                         a[2], " (each scale covers a block of K / K_a elements)"));
  // Each scale times its block: [B, M, K] seen as [B, M, K_a, K / K_a]
  // against [B, M, K_a, 1], in preferred_element_type (JAX's CPU lowering).
  auto scaled = [&](const Array& x, const Array& s) {
    const Shape& xs = x.shape();
    const std::int64_t blocks = s.shape()[2];
    Array xb = reshape(x.astype(preferred_element_type), {xs[0], xs[1], blocks, xs[2] / blocks});
    Array sb = reshape(s.astype(preferred_element_type), {xs[0], xs[1], blocks, 1});
    return reshape(xb * sb, xs);
  };
  return lax::dot_general(scaled(lhs, lhs_scales), scaled(rhs, rhs_scales), {{2}, {2}, {0}, {0}},
                          DotOptions{.preferred_element_type = preferred_element_type});
}

}  // namespace tessel::nn
