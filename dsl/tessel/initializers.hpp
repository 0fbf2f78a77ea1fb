// jax.nn.initializers: factories of functions (key, shape, dtype) -> Array,
// with JAX's formulas over ts::random, so the same key gives JAX's values.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tessel/array.hpp>

namespace tessel::nn::initializers {

class Initializer {
 public:
  using Fn = std::function<Array(const Array& key, const Shape& shape, DType dtype)>;
  explicit Initializer(Fn fn) : fn_(std::move(fn)) {}
  Array operator()(const Array& key, const Shape& shape, DType dtype = DType::float32) const { return fn_(key, shape, dtype); }

 private:
  Fn fn_;
};

Initializer zeros();
Initializer ones();
Initializer constant(double value);
Initializer uniform(double scale = 1e-2);                  // U[0, scale)
Initializer normal(double stddev = 1e-2);
Initializer truncated_normal(double stddev = 1e-2, double lower = -2.0, double upper = 2.0);
// scale / fan (fan_in, fan_out, fan_avg or fan_geo_avg) as the variance of a truncated
// normal, a normal or a uniform distribution; fans from in_axis and out_axis,
// the other dims a receptive field (batch_axis excluded).
Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution, int in_axis = -2,
                             int out_axis = -1, std::vector<int> batch_axis = {});
Initializer glorot_uniform(int in_axis = -2, int out_axis = -1);
Initializer glorot_normal(int in_axis = -2, int out_axis = -1);
Initializer xavier_uniform(int in_axis = -2, int out_axis = -1);
Initializer xavier_normal(int in_axis = -2, int out_axis = -1);
Initializer lecun_uniform(int in_axis = -2, int out_axis = -1);
Initializer lecun_normal(int in_axis = -2, int out_axis = -1);
Initializer he_uniform(int in_axis = -2, int out_axis = -1);
Initializer he_normal(int in_axis = -2, int out_axis = -1);
Initializer kaiming_uniform(int in_axis = -2, int out_axis = -1);
Initializer kaiming_normal(int in_axis = -2, int out_axis = -1);

}  // namespace tessel::nn::initializers
