// Host overhead of an eager op and of a jit call whose programs are cached
// (time for the call to return; the work is asynchronous, or done in the call
// when the program is cheap), and the time to trace, lower, compile and run a
// new small fused kernel. Each call is timed two ways: its result dropped, as
// torch's `y = torch.sin(x)` drops the last one (the targets' measure), and
// every result kept alive, so that each call takes fresh memory.
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;

namespace {
// Seconds per call of f over n calls: results dropped (waiting for every 64th,
// so that queued work stays bounded) or all kept until the end.
double per_call(const std::function<ts::Array()>& f, int n, bool keep_results) {
  std::vector<ts::Array> kept;
  if (keep_results) kept.reserve(std::size_t(n));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    ts::Array y = f();
    if (keep_results) kept.push_back(y);
    else if (i % 64 == 0) y.block_until_ready();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
  if (keep_results) kept.back().block_until_ready();
  return s;
}
}  // namespace

int main() {
  auto x = ts::arange(16.0);
  ts::sin(x).block_until_ready();  // compile once
  const int n = 20000;
  auto eager = [&] { return ts::sin(x); };
  const double dropped = per_call(eager, n, false), kept = per_call(eager, n, true);
  double torch_s = bench::torch_seconds("x = torch.arange(16.0)", "y = torch.sin(x)", 2001);
  std::printf("\neager dispatch of a cached op (sin of 16 floats)\n");
  std::printf("  tessel per call, result dropped: %.2f us (target <= 5 us, issue 19)\n", dropped * 1e6);
  std::printf("  tessel per call, results kept:   %.2f us\n", kept * 1e6);
  if (torch_s > 0) std::printf("  torch.sin per call:              %.2f us\n", torch_s * 1e6);

  // A cached jit call with 4 arguments sharded over 8 devices (issue 19:
  // <= 10 us): the call's host overhead, the (small) work included.
  if (ts::device_count() >= 8) {
    auto mesh = ts::make_mesh({4, 2}, {"x", "y"});
    auto sh = ts::NamedSharding(mesh, ts::P("x", "y"));
    std::vector<ts::Array> a;
    for (int i = 0; i < 4; ++i) a.push_back(ts::device_put(ts::ones({64, 64}), sh));
    auto f = ts::jit([](ts::Array p, ts::Array q, ts::Array r, ts::Array s) { return p * q + r * s; });
    auto call = [&] { return f(a[0], a[1], a[2], a[3]); };
    call().block_until_ready();
    const double jit_dropped = per_call(call, n, false), jit_kept = per_call(call, n, true);
    std::printf("cached jit call, 4 arguments sharded P('x', 'y') over 8 devices (64x64 f32 each)\n");
    std::printf("  tessel per call, result dropped: %.2f us (target <= 10 us, issue 19)\n", jit_dropped * 1e6);
    std::printf("  tessel per call, results kept:   %.2f us\n", jit_kept * 1e6);
  }

  std::vector<double> compile;
  for (int i = 0; i < 7; ++i) {
    const float k = 1.0f + float(i) / 8;  // a new constant: a new kernel
    auto f = ts::jit([k](ts::Array a) { return ts::exp(a * k) + ts::tanh(a) * 2.0f; });
    auto a = std::chrono::steady_clock::now();
    f(x).block_until_ready();
    compile.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(compile.begin(), compile.end());
  std::printf("new small fused kernel: trace + lower + compile + run, median of 7: %.1f ms (target < 50 ms)\n",
              compile[compile.size() / 2] * 1e3);
  return 0;
}
