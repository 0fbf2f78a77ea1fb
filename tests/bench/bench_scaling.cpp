// 8 devices against 1 on the same machine: sin, a row x column dot (no
// communication), and an all-reduce of 256 MiB (bytes moved, GB/s).
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 8192;
  const std::int64_t m = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int d = ts::device_count();
  auto mesh = ts::make_mesh({d}, {"x"});
  std::printf("\nscaling: %d devices vs 1 (%d cores, %d threads per device)\n", d, bench::cores(), ts::threads_per_device());

  auto sinf = ts::jit([](ts::Array x) { return ts::sin(x); });
  auto x = ts::linspace(-5, 5, n * n).reshape({n, n}).block_until_ready();
  auto x1 = ts::device_put(x, ts::Device(0));
  auto xd = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
  double s1 = bench::seconds([&] { sinf(x1).block_until_ready(); });
  double sd = bench::seconds([&] { sinf(xd).block_until_ready(); });
  std::printf("  sin %ldx%ld:        1 device %8.2f ms   %d devices %8.2f ms   speedup %.2f\n", long(n), long(n), s1 * 1e3, d,
              sd * 1e3, s1 / sd);

  auto dot = ts::jit([](ts::Array a, ts::Array b) { return ts::dot(a, b); });
  auto a = ts::linspace(-1, 1, m * m).reshape({m, m}).block_until_ready();
  auto a1 = ts::device_put(a, ts::Device(0));
  // Rows over one mesh axis, columns over the other: every block local.
  auto mesh2 = ts::make_mesh({d >= 4 ? d / 2 : d, d >= 4 ? 2 : 1}, {"a", "b"});
  auto ar = ts::device_put(a, ts::NamedSharding(mesh2, P("a", ts::None)));
  auto ac = ts::device_put(a, ts::NamedSharding(mesh2, P(ts::None, "b")));
  double d1 = bench::seconds([&] { dot(a1, a1).block_until_ready(); }, 3);
  double dd = bench::seconds([&] { dot(ar, ac).block_until_ready(); }, 3);
  auto text = dot.lower(ar, ac).compile().as_text();
  std::printf("  dot %ldx%ld row x col: 1 device %8.2f ms   %d devices %8.2f ms   speedup %.2f   collectives: %s\n", long(m),
              long(m), d1 * 1e3, d, dd * 1e3, d1 / dd, text.find("all-") == std::string::npos ? "none" : "some");

  // All-reduce: each device holds a 256 MiB partial sum; sum over the device axis.
  const std::int64_t per = 64 * 1024 * 1024;  // floats: 256 MiB
  auto parts = ts::device_put(ts::ones({d, per}), ts::NamedSharding(mesh, P("x")));
  auto allreduce = ts::jit([](ts::Array p) { return ts::sum(p, 0); });
  auto compiled = allreduce.lower(parts).compile();
  double ar_s = bench::seconds([&] { allreduce(parts).block_until_ready(); }, 3);
  double moved = 0;
  for (auto& c : compiled.communication()) moved += c.bytes_per_device;
  std::printf("  all-reduce of 256 MiB over %d devices: %8.2f ms, %.0f MiB read from peers per device, %.2f GB/s per device\n",
              d, ar_s * 1e3, moved / (1 << 20), moved / ar_s / 1e9);
  return 0;
}
