// jax.nn.initializers: JAX's fan computation and formulas over ts::random.
#include <doctest/doctest.h>

#include <cmath>

#include <tessel/tessel.hpp>

namespace ts = tessel;
namespace init = ts::nn::initializers;

namespace {
double variance(const std::vector<float>& v) {
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= double(v.size());
  for (float x : v) s += (x - m) * (x - m);
  return s / double(v.size());
}
}  // namespace

TEST_CASE("nn.initializers: fans, scales and distributions as JAX's") {
  auto key = ts::random::key(0);
  // A dense [256, 512] kernel: glorot_uniform is uniform(-1, 1) * sqrt(3 / fan_avg), fan_avg = 384.
  auto w = init::glorot_uniform()(key, {256, 512});
  auto want = ts::random::uniform(key, {256, 512}, ts::float32, -1) * std::sqrt(3.0 / 384.0);
  CHECK(w.to_vector<float>() == want.to_vector<float>());
  auto wv = w.to_vector<float>();
  double lim = std::sqrt(3.0 / 384.0);
  for (float x : wv) CHECK_UNARY(std::fabs(x) <= lim);
  CHECK(variance(wv) == doctest::Approx(1.0 / 384.0).epsilon(0.02));
  // A conv kernel [3, 3, 16, 32] (HWIO): fan_in = 144, fan_out = 288; he_normal's variance 2 / 144.
  auto k = init::he_normal()(key, {3, 3, 16, 32});
  CHECK(k.shape() == ts::Shape{3, 3, 16, 32});
  auto kv = k.to_vector<float>();
  CHECK(variance(kv) == doctest::Approx(2.0 / 144.0).epsilon(0.1));
  auto ln = init::lecun_normal()(key, {3, 3, 16, 32}).to_vector<float>();
  CHECK(variance(ln) == doctest::Approx(1.0 / 144.0).epsilon(0.1));
  // truncated at 2 standard deviations of the untruncated normal
  double sd = std::sqrt(1.0 / 144.0) / .87962566103423978;
  for (float x : ln) CHECK_UNARY(std::fabs(x) <= 2 * sd + 1e-6);
  CHECK(init::zeros()(key, {2, 3}).to_vector<float>() == std::vector<float>(6, 0));
  CHECK(init::ones()(key, {2}, ts::float64).dtype() == ts::float64);
  CHECK(init::constant(0.5)(key, {3}).to_vector<float>() == std::vector<float>(3, 0.5f));
  CHECK(init::normal(0.1)(key, {4}).to_vector<float>() == (ts::random::normal(key, {4}) * 0.1f).to_vector<float>());
  auto u = init::uniform(0.5)(key, {1000}).to_vector<float>();
  for (float x : u) CHECK_UNARY((x >= 0 && x < 0.5));
  CHECK(init::xavier_normal()(key, {8, 8}).to_vector<float>() == init::glorot_normal()(key, {8, 8}).to_vector<float>());
  CHECK(init::kaiming_uniform()(key, {8, 8}).to_vector<float>() == init::he_uniform()(key, {8, 8}).to_vector<float>());
  // JAX's errors: a 1-D shape with the default in_axis, an unknown mode, an integer dtype.
  CHECK_THROWS_AS(init::glorot_uniform()(key, {5}), ts::ValueError);
  CHECK_THROWS_AS(init::variance_scaling(1.0, "fan_max", "normal"), ts::ValueError);
  CHECK_THROWS_AS(init::he_uniform()(key, {4, 4}, ts::int32), ts::TypeError);
}
