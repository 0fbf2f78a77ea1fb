// Returning from main() while launches still run must neither crash nor cut
// them short: exit() waits for the devices before destroying the JIT's code
// (Runtime::synchronize_at_exit). Run as its own process,
// since what it tests is process exit; the exit status is the verdict.
#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

int main() {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto x = ts::device_put(ts::ones({1024, 1024}), ts::NamedSharding(mesh, P("a", ts::None)));
  auto w = ts::device_put(ts::ones({1024, 1024}), ts::NamedSharding(mesh, P(ts::None, "b")));
  auto y = ts::jit([](const ts::Array& a, const ts::Array& b) { return ts::tanh(ts::dot(a, b)) * 2.0; });
  // Many launches queued, none awaited; the results are dropped at once.
  for (int i = 0; i < 16; ++i) y(x, w);
  for (int i = 0; i < 16; ++i) ts::dot(x, w);
  return 0;
}
