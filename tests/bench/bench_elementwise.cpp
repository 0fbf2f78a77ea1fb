// 2 * sin(x) + 1 on 8192 x 8192 float32: one fused kernel. Floor: reading
// and writing 256 MiB each at the machine's best bandwidth (bench::memory_floor).
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 8192;
  const std::size_t bytes = std::size_t(n * n) * 4;
  auto f = ts::jit([](ts::Array x) { return 2.0f * ts::sin(x) + 1.0f; });
  auto x = ts::linspace(-100, 100, n * n).reshape({n, n}).block_until_ready();
  const bench::Floor floor = bench::memory_floor(bytes, bytes);
  const double floor_s = floor.seconds;
  const double torch_s = bench::torch_seconds("x = torch.linspace(-100, 100, " + std::to_string(n * n) + ").reshape(" +
                                                  std::to_string(n) + ", " + std::to_string(n) + ")",
                                              "y = 2 * torch.sin(x) + 1");
  bench::header("2*sin(x)+1, " + std::to_string(n) + "x" + std::to_string(n) + " float32 (" +
                std::to_string(bench::cores()) + " cores, " + std::to_string(ts::device_count()) + " devices); floor: " +
                bench::describe(floor, 2.0 * double(bytes)));
  auto x1 = ts::device_put(x, ts::Device(0));
  double one = bench::seconds([&] { f(x1).block_until_ready(); });
  bench::row("1 device", floor_s, one, torch_s);
  auto x8 = ts::device_put(x, ts::NamedSharding(ts::make_mesh({ts::device_count()}, {"x"}), P("x")));
  double eight = bench::seconds([&] { f(x8).block_until_ready(); });
  bench::row(std::to_string(ts::device_count()) + " devices, P('x')", floor_s, eight, torch_s);
  return bench::status();
}
