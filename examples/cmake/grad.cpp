// The gradient of a loss over a row-sharded batch, checked against its
// closed form: d/dw sum((x w)^2) = 2 x^T x w.
#include <tessel/tessel.hpp>

#include <cmath>
#include <iostream>

namespace ts = tessel;

int main() {
  auto mesh = ts::make_mesh({ts::device_count()}, {"batch"});
  auto x = ts::device_put(ts::arange(32, ts::float32).reshape({8, 4}) / 32.0f,
                          ts::NamedSharding(mesh, ts::P("batch")));
  auto w = ts::ones({4});
  auto loss = [](const ts::Array& w, const ts::Array& x) { return ts::sum(ts::square(ts::matmul(x, w))); };
  auto g = ts::jit(ts::grad(loss))(w, x).to_vector<float>();
  auto want = (2.0f * ts::matmul(ts::matmul(x.T(), x), w)).to_vector<float>();
  bool ok = g.size() == want.size();
  for (std::size_t i = 0; ok && i < g.size(); ++i) ok = std::abs(g[i] - want[i]) <= 1e-5f * std::abs(want[i]);
  std::cout << "grad of sum((x w)^2) over " << x.sharding() << ": [";
  for (std::size_t i = 0; i < g.size(); ++i) std::cout << (i ? ", " : "") << g[i];
  std::cout << "] " << (ok ? "matches" : "DIFFERS FROM") << " 2 x^T x w\n";
  return ok ? 0 : 1;
}
