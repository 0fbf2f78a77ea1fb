// Convolutions and windowed reductions, as jax.lax has them.
//
//   // NHWC images, HWIO kernels: a 3x3 convolution keeping the size.
//   ts::Array y = ts::lax::conv_general_dilated(x, w, {1, 1}, "SAME",
//                                               {.dimension_numbers = {"NHWC", "HWIO", "NHWC"}});
//   ts::Array p = ts::lax::reduce_window(y, -INFINITY, "max", {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
//
// JAX's semantics (StableHLO's convolution): strides, padding, input
// (lhs) and kernel (rhs) dilation, feature and batch groups, any layout.
// One primitive with its own derivative, batching and sharding rules, run
// by oneDNN on the devices' threads for float32 (docs/convolutions.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tessel/array.hpp>

namespace tessel::lax {

// A convolution's or window's padding: "SAME", "VALID", "SAME_LOWER", or a
// (low, high) pair per spatial dim (negative crops).
struct Padding {
  std::string kind;
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  Padding(const char* k) : kind(k) {}
  Padding(std::string k) : kind(std::move(k)) {}
  Padding(std::vector<std::pair<std::int64_t, std::int64_t>> p) : pairs(std::move(p)) {}
  Padding(std::initializer_list<std::pair<std::int64_t, std::int64_t>> p) : pairs(p) {}
};

struct ConvOptions {
  std::vector<std::int64_t> lhs_dilation, rhs_dilation;  // empty: 1 per spatial dim
  // {lhs, rhs, out} layouts ("NHWC", "HWIO", "NHWC"): N batch, C feature,
  // O and I the kernel's output and input features, other letters spatial
  // (ordered as in the kernel's layout). Empty: "NC...", "OI...", "NC...".
  std::vector<std::string> dimension_numbers;
  std::int64_t feature_group_count = 1, batch_group_count = 1;
  std::optional<DType> preferred_element_type;
};

// jax.lax.conv_general_dilated.
Array conv_general_dilated(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& window_strides,
                           const Padding& padding, const ConvOptions& options = {});
// jax.lax.conv: NCHW input, OIHW kernel, no dilation.
Array conv(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& window_strides, const Padding& padding,
           std::optional<DType> preferred_element_type = std::nullopt);
// jax.lax.conv_with_general_padding.
Array conv_with_general_padding(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& window_strides,
                                const Padding& padding, const std::vector<std::int64_t>& lhs_dilation,
                                const std::vector<std::int64_t>& rhs_dilation,
                                std::optional<DType> preferred_element_type = std::nullopt);

struct ConvTransposeOptions {
  std::vector<std::int64_t> rhs_dilation;
  std::vector<std::string> dimension_numbers;  // empty: TensorFlow's, as jax.lax.conv_transpose: "NHWC", "HWIO", "NHWC"
  bool transpose_kernel = false;
  std::optional<DType> preferred_element_type;
};
// jax.lax.conv_transpose: the gradient of a strided convolution with
// respect to its input (a convolution with lhs_dilation = strides).
Array conv_transpose(const Array& lhs, const Array& rhs, const std::vector<std::int64_t>& strides,
                     const Padding& padding, const ConvTransposeOptions& options = {});

// jax.lax.reduce_window with the monoid `op` ("add", "max", "min", "mul")
// and its identity `init` (as JAX: 0 for add, -inf for max, ...): every
// window of `window_dimensions`, stepped by `window_strides` (empty: 1s),
// over x padded with init.
Array reduce_window(const Array& x, double init, const std::string& op,
                    const std::vector<std::int64_t>& window_dimensions,
                    const std::vector<std::int64_t>& window_strides = {}, const Padding& padding = "VALID",
                    const std::vector<std::int64_t>& base_dilation = {},
                    const std::vector<std::int64_t>& window_dilation = {});

}  // namespace tessel::lax
