// jit over an array sharded across a 2x4 mesh of devices, checked against
// the sum a loop computes.
#include <tessel/tessel.hpp>

#include <iostream>

namespace ts = tessel;

int main() {
  auto mesh = ts::make_mesh({2, 4}, {"x", "y"});
  auto x = ts::device_put(ts::arange(64, ts::float32).reshape({8, 8}),
                          ts::NamedSharding(mesh, ts::P("x", "y")));
  auto f = ts::jit([](const ts::Array& a) { return ts::sum(a * 2.0f + 1.0f); });
  const float got = f(x).item<float>();
  const float want = 2.0f * (63.0f * 64.0f / 2.0f) + 64.0f;
  std::cout << "sum(2x + 1) over " << x.sharding() << " = " << got << " (expected " << want << ")\n";
  return got == want ? 0 : 1;
}
