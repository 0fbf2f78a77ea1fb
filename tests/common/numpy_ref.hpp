// Shared by the NumPy/SciPy reference tests (tests/dsl/surface_ref*_test.cpp):
// reading tests/data/numpy's JSON numbers (NaN and infinities as strings),
// splitting inputs over devices, and central differences of tessel's own
// functions for the gradient cases (which tests/dsl/autodiff_test.cpp's
// gradient checks use too, with compare_grads).
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <tessel/tessel.hpp>

namespace tessel::testing::numpy_ref {

using json = nlohmann::json;
using Inputs = std::vector<Array>;
using Fn = std::function<Array(const Inputs&)>;

// JSON has no NaN or infinities: the reference writes them as strings.
inline double num(const json& v) {
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    throw std::runtime_error("tests/data/numpy: bad number \"" + s + "\"");
  }
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  return v.get<double>();
}

inline std::vector<double> nums(const json& values) {
  std::vector<double> out;
  for (const auto& v : values) out.push_back(num(v));
  return out;
}

inline Shape shape_of(const json& a) { return a.at("shape").get<Shape>(); }

// tests/data/numpy/<file>, parsed.
inline json load(const std::string& file) {
  const std::string path = std::string(TESSEL_SOURCE_DIR) + "/tests/data/numpy/" + file;
  std::ifstream f(path);
  if (!f) throw std::runtime_error("missing " + path + " (written by tools/numpy_reference.py)");
  return json::parse(f);
}

// A case's input: values, shape and dtype (float32, float64, int32 or bool).
inline Array make_input(const json& a) {
  const auto v = nums(a.at("values"));
  const auto dtype = a.at("dtype").get<std::string>();
  if (dtype == "float32") return array(std::vector<float>(v.begin(), v.end()), shape_of(a));
  if (dtype == "float64") return array(v, shape_of(a));
  if (dtype == "int32") return array(std::vector<std::int32_t>(v.begin(), v.end()), shape_of(a));
  if (dtype == "bool") return array(std::vector<std::int32_t>(v.begin(), v.end()), shape_of(a)).astype(DType::bool_);
  throw std::runtime_error("tests/data/numpy: input dtype " + dtype);
}

// The inputs split along their first dim over n devices (replicated when shorter).
inline Inputs shard_inputs(const Inputs& xs, int n) {
  std::vector<Device> all = devices();
  Mesh mesh(std::vector<Device>(all.begin(), all.begin() + n), "x");
  Inputs out;
  for (const auto& x : xs)
    out.push_back(device_put(x, NamedSharding(mesh, x.ndim() > 0 && x.shape()[0] >= n ? P("x") : P())));
  return out;
}

// Central differences of f (tessel's own, float64) at xs, one element at a time.
inline std::vector<std::vector<double>> tessel_differences(const Fn& f, const Inputs& xs, double h) {
  auto jf = jit(f);
  std::vector<std::vector<double>> g;
  for (size_t i = 0; i < xs.size(); ++i) {
    const std::vector<double> v = xs[i].to_vector<double>();
    std::vector<double> gi(v.size());
    for (size_t j = 0; j < v.size(); ++j) {
      auto at = [&](double delta) {
        Inputs ys = xs;
        std::vector<double> w = v;
        w[j] += delta;
        ys[i] = array(w, xs[i].shape());
        return jf(ys).item<double>();
      };
      gi[j] = (at(h) - at(-h)) / (2 * h);
    }
    g.push_back(gi);
  }
  return g;
}

// "" when every gradient is float64 and within tol (relative to 1 + |want|)
// of want, element by element; else what differs first.
inline std::string compare_grads(const Inputs& got, const std::vector<std::vector<double>>& want, double tol) {
  if (got.size() != want.size()) return "got " + std::to_string(got.size()) + " gradients";
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].dtype() != float64) return "gradient " + std::to_string(i) + " is " + dtype_name(got[i].dtype());
    const auto g = got[i].to_vector<double>();
    if (g.size() != want[i].size()) return "gradient " + std::to_string(i) + " has the wrong size";
    for (size_t j = 0; j < g.size(); ++j)
      if (!(std::fabs(g[j] - want[i][j]) <= tol * (1 + std::fabs(want[i][j])))) {
        std::ostringstream os;
        os.precision(12);
        os << "gradient " << i << " element " << j << ": autodiff " << g[j] << ", want " << want[i][j];
        return os.str();
      }
  }
  return "";
}

}  // namespace tessel::testing::numpy_ref
