// The seed tutorial's MLP ("Distributed arrays and automatic parallelization",
// "Neural networks"), line for line: init with ts::random exactly as the
// tutorial does, a ReLU network, the mean squared error, plain SGD. The
// sample (samples/mlp.cpp) and the end-to-end test (tests/e2e/mlp_test.cpp)
// share it.
#pragma once

#include <tessel/tessel.hpp>

#include <cmath>
#include <utility>
#include <vector>

namespace mlp {

namespace ts = tessel;
using Params = std::vector<std::pair<ts::Array, ts::Array>>;  // (W, b) per layer
using Batch = std::pair<ts::Array, ts::Array>;                // (inputs, targets)

inline std::pair<ts::Array, ts::Array> init_layer(const ts::Array& key, std::int64_t n_in, std::int64_t n_out) {
  auto keys = ts::random::split(key);
  auto W = ts::random::normal(keys.index({0}), {n_in, n_out}) / ts::sqrt(ts::array(float(n_in)));
  auto b = ts::random::normal(keys.index({1}), {n_out});
  return {W, b};
}

inline std::pair<Params, Batch> init_model(ts::Array key, const std::vector<std::int64_t>& layer_sizes,
                                           std::int64_t batch_size) {
  // key, *keys = jax.random.split(key, len(layer_sizes))
  auto keys = ts::random::split(key, std::int64_t(layer_sizes.size()));
  key = keys.index({0});
  Params params;
  for (size_t i = 0; i + 1 < layer_sizes.size(); ++i)
    params.push_back(init_layer(keys.index({std::int64_t(i + 1)}), layer_sizes[i], layer_sizes[i + 1]));
  keys = ts::random::split(key, 3);
  auto inputs = ts::random::normal(keys.index({1}), {batch_size, layer_sizes.front()});
  auto targets = ts::random::normal(keys.index({2}), {batch_size, layer_sizes.back()});
  return {params, {inputs, targets}};
}

inline ts::Array predict(const Params& params, ts::Array inputs) {
  ts::Array outputs;
  for (const auto& [W, b] : params) {
    outputs = ts::dot(inputs, W) + b;
    inputs = ts::maximum(outputs, 0);
  }
  return outputs;
}

inline ts::Array loss(const Params& params, const Batch& batch) {
  const auto& [inputs, targets] = batch;
  auto predictions = predict(params, inputs);
  return ts::mean(ts::sum(ts::pow(predictions - targets, 2), -1));
}

// Mixed precision: activations and matmuls in `dtype` (bfloat16: products
// accumulated in float32, each result rounded to bfloat16), the float32
// master weights cast on the way in, the loss in float32. Its gradients
// come back float32, like the weights.
inline ts::Array predict_mixed(const Params& params, ts::Array inputs, ts::DType dtype) {
  ts::Array x = ts::astype(inputs, dtype), outputs;
  for (const auto& [W, b] : params) {
    outputs = ts::dot(x, ts::astype(W, dtype)) + ts::astype(b, dtype);
    x = ts::maximum(outputs, 0);
  }
  return ts::astype(outputs, ts::float32);
}

inline ts::Array loss_mixed(const Params& params, const Batch& batch, ts::DType dtype) {
  const auto& [inputs, targets] = batch;
  auto predictions = predict_mixed(params, inputs, dtype);
  return ts::mean(ts::sum(ts::pow(predictions - targets, 2), -1));
}

// The tutorial's 4x2 layout: the batch split 4 ways over "batch", W2 by
// columns and W3 by rows over "model", the rest replicated.
inline void data_and_model_parallel(Params& params, Batch& batch) {
  auto mesh = ts::make_mesh({4, 2}, {"batch", "model"});
  batch = ts::device_put(batch, ts::NamedSharding(mesh, ts::P("batch", ts::None)));
  params = ts::device_put(params, ts::NamedSharding(mesh, ts::P()));
  params[1].first = ts::device_put(params[1].first, ts::NamedSharding(mesh, ts::P(ts::None, "model")));
  params[1].second = ts::device_put(params[1].second, ts::NamedSharding(mesh, ts::P("model")));
  params[2].first = ts::device_put(params[2].first, ts::NamedSharding(mesh, ts::P("model", ts::None)));
}

inline Params sgd(const Params& params, const Params& grads, double step_size) {
  Params next;
  for (size_t i = 0; i < params.size(); ++i)
    next.emplace_back(params[i].first - step_size * grads[i].first, params[i].second - step_size * grads[i].second);
  return next;
}

}  // namespace mlp
