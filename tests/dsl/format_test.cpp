#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "tests/common/golden.hpp"

namespace ts = tessel;
using ts::testing::jax_fact;

namespace {
template <class T, class F>
std::vector<T> gen(std::int64_t n, F&& f) {
  std::vector<T> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = f(i);
  return v;
}
}  // namespace

TEST_CASE("Array repr matches JAX's text for every measured case") {
  auto r = jax_fact("repr.json");
  auto prng = jax_fact("prng.json");
  auto check = [&](std::string name, const ts::Array& x) {
    CAPTURE(name);
    CHECK(ts::to_string(x) == r[name].get<std::string>());
  };
  check("arange32", ts::arange(32));
  check("arange32f_4x8", ts::array(gen<float>(32, [](auto i) { return float(i); }), {4, 8}));
  check("mixed_exp", ts::array(std::vector<float>{1e-5f, 1.0f, 3.5f}));
  check("big_exp", ts::array(std::vector<float>{1e9f, -2.5f, 0.0f}));
  check("neg", ts::array(std::vector<float>{-1.5f, 2.25f, 3.0f, -0.125f}, {2, 2}));
  const float inf = std::numeric_limits<float>::infinity();
  check("nan_inf", ts::array(std::vector<float>{std::nanf(""), inf, -inf, 1.5f}));
  check("bool", ts::array(std::vector<bool>{true, false, true}));
  check("bool_scalar", ts::array(true));
  check("scalar_weak", ts::array(1.0));
  check("scalar_f32", ts::array(2.5f));
  check("int_weak", ts::array(3));
  check("uint32", ts::array(std::vector<std::uint32_t>{1u, 4000000000u}));
  check("summ_1d", ts::arange(2000.0));
  // XLA divides by a constant as a multiplication by its reciprocal.
  check("summ_2d", ts::array(gen<float>(40000, [](auto i) { return float(i) * (1.0f / 7.0f); }), {200, 200}));
  check("summ_3d", ts::array(gen<std::int32_t>(3000, [](auto i) { return std::int32_t(i); }), {10, 15, 20}));
  check("empty", ts::zeros({0, 3}));
  check("rank3", ts::array(gen<std::int32_t>(24, [](auto i) { return std::int32_t(i); }), {2, 3, 4}));
  check("thirds", ts::array(gen<float>(10, [](auto i) { return float(i) * (1.0f / 3.0f); })));
  check("wide_ints", ts::array(gen<std::int32_t>(100, [](auto i) { return std::int32_t(i * 1000); })));
  check("normal44", ts::array(prng["on"]["normal_4x4"].get<std::vector<float>>(), {4, 4}));
  check("linspace", ts::linspace(0, 1, 7));
  check("eye3", ts::eye(3));
  check("tiny", ts::array(std::vector<float>{1e-8f, 2e-8f}));
  check("neg_zero", ts::array(std::vector<float>{-0.0f, 1.0f}));
}

TEST_CASE("float64 and int64 arrays print with their dtype") {
  CHECK(ts::to_string(ts::array(std::vector<double>{0.1, 0.25})) == "Array([0.1 , 0.25], dtype=float64)");
  CHECK(ts::to_string(ts::array(std::vector<std::int64_t>{-3, 12})) == "Array([-3, 12], dtype=int64)");
  // The shortest digits of the double, not of a float.
  CHECK(ts::to_string(ts::array(std::vector<double>{1.0 / 3})) == "Array([0.33333333], dtype=float64)");
}

TEST_CASE("Array repr matches numpy's array2string on 300 random arrays") {
  std::ifstream f(std::string(TESSEL_SOURCE_DIR) + "/tests/data/numpy_repr.json");
  REQUIRE(f);
  auto cases = nlohmann::json::parse(f);
  for (auto& c : cases) {
    ts::Shape shape = c["shape"].get<ts::Shape>();
    std::string dt = c["dtype"];
    ts::Array x;
    // Non-finite values come as the strings "nan", "inf", "-inf".
    auto real = [](const nlohmann::json& e) {
      if (e.is_number()) return e.get<double>();
      std::string s = e;
      return s == "nan" ? std::nan("") : (s == "inf" ? HUGE_VAL : -HUGE_VAL);
    };
    if (dt == "float32") {
      std::vector<float> v;
      for (auto& e : c["values"]) v.push_back(float(real(e)));
      x = ts::array(v, shape);
    } else if (dt == "float64") {
      std::vector<double> v;
      for (auto& e : c["values"]) v.push_back(real(e));
      x = ts::array(v, shape);
    } else if (dt == "int32") {
      x = ts::array(c["values"].get<std::vector<std::int32_t>>(), shape);
    } else if (dt == "int64") {
      x = ts::array(c["values"].get<std::vector<std::int64_t>>(), shape);
    } else if (dt == "uint32") {
      x = ts::array(c["values"].get<std::vector<std::uint32_t>>(), shape);
    } else {
      x = ts::array(c["values"].get<std::vector<bool>>(), shape);
    }
    CAPTURE(dt);
    CHECK(ts::to_string(x) == c["repr"].get<std::string>());
  }
}
