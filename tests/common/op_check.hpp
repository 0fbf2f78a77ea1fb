// The op-test helper (docs/architecture.md, principle 10): runs an operation
// eagerly, under jit, and under jit with its inputs sharded over meshes of
// 1..8 devices (split along their first dimension, uneven sizes included),
// and checks every result against the expected values.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <sstream>

#include <tessel/tessel.hpp>

namespace tessel::testing {

inline std::string diff(const Array& got, const std::vector<double>& want, const Shape& shape, double tol) {
  if (got.shape() != shape) return "shape " + shape_str(got.shape()) + ", want " + shape_str(shape);
  auto g = got.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) {
    // NaN matches NaN, an infinity only the same infinity (inf - inf is NaN, which no tolerance accepts).
    bool ok = std::isnan(want[i]) ? std::isnan(g[i])
              : std::isinf(want[i]) ? g[i] == want[i]
                                    : std::fabs(g[i] - want[i]) <= tol * (1 + std::fabs(want[i]));
    if (!ok) {
      std::ostringstream os;
      os.precision(9);
      os << "element " << i << ": got " << g[i] << ", want " << want[i];
      return os.str();
    }
  }
  return "";
}

using OpFn = std::function<Array(const std::vector<Array>&)>;

inline void check_op(const std::string& name, const OpFn& fn, const std::vector<Array>& inputs,
                     const std::vector<double>& want, const Shape& shape, double tol = 1e-5) {
  CAPTURE(name);
  CHECK(diff(fn(inputs), want, shape, tol) == "");
  auto jitted = jit([fn](const std::vector<Array>& xs) { return fn(xs); });
  CHECK(diff(jitted(inputs), want, shape, tol) == "");
  for (int n : {1, 2, 3, 5, 8}) {
    std::vector<Device> all = devices();
    std::vector<Device> devs(all.begin(), all.begin() + n);
    Mesh mesh(devs, "x");
    std::vector<Array> sharded;
    for (auto& x : inputs)
      sharded.push_back(x.ndim() > 0 && x.shape()[0] >= n ? device_put(x, NamedSharding(mesh, P("x"))) : device_put(x, NamedSharding(mesh, P())));
    CAPTURE(n);
    CHECK(diff(jitted(sharded), want, shape, tol) == "");
  }
}

}  // namespace tessel::testing
