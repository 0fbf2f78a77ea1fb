// jax.nn beyond ops.hpp's relu, sigmoid, softmax, log_softmax, gelu and
// one_hot: the activations, standardize and dot_product_attention, with
// JAX's definitions (float inputs; integers become float32).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/ops.hpp>

namespace tessel::nn {

Array silu(const Array& x);
Array swish(const Array& x);  // silu
Array elu(const Array& x, double alpha = 1.0);
Array celu(const Array& x, double alpha = 1.0);
Array selu(const Array& x);
Array leaky_relu(const Array& x, double negative_slope = 0.01);
Array softplus(const Array& x);
Array log_sigmoid(const Array& x);
Array glu(const Array& x, int axis = -1);
Array relu6(const Array& x);
Array hard_tanh(const Array& x);
Array hard_sigmoid(const Array& x);
Array hard_silu(const Array& x);
Array hard_swish(const Array& x);
Array soft_sign(const Array& x);
Array mish(const Array& x);
Array squareplus(const Array& x, double b = 4);
Array sparse_plus(const Array& x);
Array sparse_sigmoid(const Array& x);
Array tanh(const Array& x);
Array identity(const Array& x);
// (x - mean) / sqrt(variance + epsilon) along axis; mean and variance
// (JAX's: mean(x^2) - mean^2) computed unless given.
Array standardize(const Array& x, Axes axis = -1, const std::optional<Array>& mean = std::nullopt,
                  const std::optional<Array>& variance = std::nullopt, double epsilon = 1e-5);
Array logsumexp(const Array& x, Axes axis = {}, bool keepdims = false);
// log(mean(exp(x))) along axis, stably.
Array logmeanexp(const Array& x, Axes axis = {}, bool keepdims = false);
// log(1 - exp(-x)) for x > 0, stably at both ends.
Array log1mexp(const Array& x);

struct AttentionOptions {
  std::optional<Array> bias;   // added to the logits, broadcast to [B, N, T, S]
  std::optional<Array> mask;   // boolean, broadcast to [B, N, T, S]: false positions are excluded
  bool is_causal = false;      // query t sees keys s <= t
  std::optional<double> scale; // default 1 / sqrt(H)
};
// jax.nn.dot_product_attention: q [B, T, N, H], k and v [B, S, K, H] (K
// divides N: grouped heads), or without the leading B; softmax over S in
// float32 at least. A heads dim split over devices stays split.
Array dot_product_attention(const Array& query, const Array& key, const Array& value, AttentionOptions options = {});

// jax.nn.scaled_matmul: the block-scaled product of lhs [B, M, K] and rhs
// [B, N, K] (K contracted) with scales lhs_scales [B, M, K_a] and rhs_scales
// [B, N, K_b] (K_a and K_b divide K): each scale multiplies its block of
// K / K_a (K / K_b) consecutive elements. Computed as JAX computes it off
// cuDNN: every operand converted to preferred_element_type, scaled, and
// contracted into preferred_element_type; a [B, M, N] result.
Array scaled_matmul(const Array& lhs, const Array& rhs, const Array& lhs_scales, const Array& rhs_scales,
                    DType preferred_element_type = DType::float32);

// jax.nn's BlockScaleConfig: how scaled_dot_general quantizes an operand:
// blocks of block_size elements along the contraction, each stored as
// data_type values times one scale_type scale (nvfp4: and a float32 global
// scale, an array of shape [1]).
struct BlockScaleConfig {
  std::string mode;  // "mxfp8" or "nvfp4"
  std::int64_t block_size = 0;
  DType data_type = DType::float8_e4m3fn;
  DType scale_type = DType::float8_e8m0fnu;
  std::optional<Array> global_scale;
  bool infer_only = false;
};
// jax.nn.get_scaled_dot_general_config: "mxfp8" (block 32, float8_e4m3fn
// values, float8_e8m0fnu scales; global_scale ignored) or "nvfp4" (block 16,
// float4_e2m1fn values, float8_e4m3fn scales, global_scale ones([1]) when
// not given). ValueError for another mode.
BlockScaleConfig get_scaled_dot_general_config(const std::string& mode, std::optional<Array> global_scale = std::nullopt);
// jax.nn.scaled_dot_general: without configs, lax.dot_general into
// preferred_element_type. With configs (lhs, rhs, gradient): both operands
// normalized to [batch, free, contracting] (each group in ascending axis
// order, as JAX's), block-quantized along the contraction, multiplied by
// scaled_matmul into preferred_element_type (float32, bfloat16 or float16;
// TypeError otherwise) and reshaped to dot_general's result; its gradient is
// JAX's custom one (the cotangent quantized with config 2). ValueError when
// the contraction is not a multiple of the block size.
Array scaled_dot_general(const Array& lhs, const Array& rhs, const lax::DotDimensionNumbers& dimension_numbers,
                         DType preferred_element_type = DType::float32,
                         std::optional<std::vector<BlockScaleConfig>> configs = std::nullopt);

}  // namespace tessel::nn
