// jax.nn.initializers (dsl/tessel/initializers.hpp): JAX's formulas
// (jax/_src/nn/initializers.py) over ts::random's bit-identical draws.
#include <cmath>

#include <tessel/initializers.hpp>
#include <tessel/ops.hpp>
#include <tessel/random.hpp>

#include "tessel/core/errors.hpp"

namespace tessel::nn::initializers {

namespace {
void need_float(DType dtype, const char* what) {
  if (!is_floating(dtype))
    throw TypeError(std::string("nn.initializers.") + what + ": real floating-point dtypes only, got " +
                    std::string(dtype_name(dtype)));
}
// The value as an array of dtype, then rounded as JAX's jnp.array(v, dtype).
Array value_as(double v, DType dtype) { return full({}, v, dtype); }
}  // namespace

Initializer zeros() {
  return Initializer([](const Array&, const Shape& s, DType dt) { return tessel::zeros(s, dt); });
}
Initializer ones() {
  return Initializer([](const Array&, const Shape& s, DType dt) { return tessel::ones(s, dt); });
}
Initializer constant(double value) {
  return Initializer([value](const Array&, const Shape& s, DType dt) { return full(s, value, dt); });
}
Initializer uniform(double scale) {
  return Initializer([scale](const Array& key, const Shape& s, DType dt) {
    need_float(dt, "uniform");
    return random::uniform(key, s, dt) * value_as(scale, dt);
  });
}
Initializer normal(double stddev) {
  return Initializer([stddev](const Array& key, const Shape& s, DType dt) {
    need_float(dt, "normal");
    return random::normal(key, s, dt) * value_as(stddev, dt);
  });
}
Initializer truncated_normal(double stddev, double lower, double upper) {
  return Initializer([=](const Array& key, const Shape& s, DType dt) {
    need_float(dt, "truncated_normal");
    return random::truncated_normal(key, lower, upper, s, dt) * value_as(stddev, dt);
  });
}

Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution, int in_axis,
                             int out_axis, std::vector<int> batch_axis) {
  if (mode != "fan_in" && mode != "fan_out" && mode != "fan_avg" && mode != "fan_geo_avg")
    throw ValueError("invalid mode for variance scaling initializer: " + mode);
  if (distribution != "truncated_normal" && distribution != "normal" && distribution != "uniform")
    throw ValueError("invalid distribution for variance scaling initializer: " + distribution);
  return Initializer([=](const Array& key, const Shape& shape, DType dt) {
    need_float(dt, "variance_scaling");
    const int r = int(shape.size());
    if (in_axis == -2 && r <= 1)
      throw ValueError("Can't compute input and output sizes of a " + std::to_string(r) +
                       "-dimensional weights tensor with default in_axis. Must be at least 2D or specify in_axis "
                       "explicitly.");
    auto dim = [&](int a) {
      const int d = a < 0 ? a + r : a;
      if (d < 0 || d >= r) throw ShapeError("variance_scaling: axis " + std::to_string(a) + " out of range for shape " + shape_str(shape));
      return double(shape[std::size_t(d)]);
    };
    double total = 1, batch = 1;
    for (auto e : shape) total *= double(e);
    for (int b : batch_axis) batch *= dim(b);
    const double in = dim(in_axis), out = dim(out_axis);
    const double receptive = total / in / out / batch;
    const double fan_in = in * receptive, fan_out = out * receptive;
    const double den = mode == "fan_in" ? fan_in : mode == "fan_out" ? fan_out : mode == "fan_avg" ? (fan_in + fan_out) / 2
                                                                                                  : std::sqrt(fan_in * fan_out);
    Array variance = value_as(scale / den, dt);
    if (distribution == "truncated_normal") {
      Array stddev = sqrt(variance) / value_as(.87962566103423978, dt);
      return random::truncated_normal(key, -2, 2, shape, dt) * stddev;
    }
    if (distribution == "normal") return random::normal(key, shape, dt) * sqrt(variance);
    return random::uniform(key, shape, dt, -1) * sqrt(3 * variance);
  });
}

Initializer glorot_uniform(int in_axis, int out_axis) { return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis); }
Initializer glorot_normal(int in_axis, int out_axis) {
  return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis);
}
Initializer xavier_uniform(int in_axis, int out_axis) { return glorot_uniform(in_axis, out_axis); }
Initializer xavier_normal(int in_axis, int out_axis) { return glorot_normal(in_axis, out_axis); }
Initializer lecun_uniform(int in_axis, int out_axis) { return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis); }
Initializer lecun_normal(int in_axis, int out_axis) {
  return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis);
}
Initializer he_uniform(int in_axis, int out_axis) { return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis); }
Initializer he_normal(int in_axis, int out_axis) { return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis); }
Initializer kaiming_uniform(int in_axis, int out_axis) { return he_uniform(in_axis, out_axis); }
Initializer kaiming_normal(int in_axis, int out_axis) { return he_normal(in_axis, out_axis); }

}  // namespace tessel::nn::initializers
