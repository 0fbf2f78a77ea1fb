// The collectives users write in shard_map, over every device, 1 KiB to
// 256 MiB per device: psum, all_gather, psum_scatter, all_to_all, ppermute.
// Each is one jitted shard_map whose body is the collective alone, so the time
// is the collective's (plus one dispatch); the shape-keeping ones (psum,
// all_to_all, ppermute) also run 16 in a chain in one body, and the
// "(chained)" rows give the time per collective with a sixteenth of the
// dispatch: t16 / 16 (an upper bound; the difference t16 - t1 of two noisy
// medians could fall below the floor).
//
// Floor: the least traffic any implementation moves, every device's operand
// read once and every distinct result written once, at the machine's best
// bandwidth measured in the same run for those bytes (bench::memory_floor):
// a lower bound even where the operands sit in the cache and are read n
// times. A result the same on every device (psum's, all_gather's) is
// written once: devices of one process may share its block
// (runtime/buffer.hpp), so an all-gather reads n x b and writes n x b. In
// the chained psum every link after the first reads that one shared block. The last
// columns ("moved") compare with the copy of the bytes each device reads
// from its peers in a ring or tree of shared-memory copies (as
// Compiled::communication() counts them), times the devices, at the best
// copy bandwidth (a plain or non-temporal copy, not the read-only sum: on a
// host whose reads outrun its writes that would price a copy's writes as
// reads): the reference, met at 0.7 of it (x moved <= 1.43).
// From 4 MiB per device the time and the floor are the best of five runs
// side by side (side_by_side). No peer library runs in-process collectives
// on CPU devices.
//
//   ./tessel bench collectives [max MiB per device, default 256]
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

namespace {

// (time, floor). From 4 MiB per device (the sizes the 1.5x target
// is about) the collective and its floor are timed side by side, five times
// alternating, and the best of each counts: the floor is the fastest of
// many runs, and a median of the work against it measured the host's
// neighbours (its bandwidth drifts by up to 1.6x for seconds at a time; a
// psum_scatter of 4 MiB read 4.4x its floor in one run, 1.4x side by side).
// Below, the median of `time` and the floor once. `links`: the work's runs
// per call (a chain).
std::pair<double, double> side_by_side(double kib, const std::function<double()>& time, const std::function<void()>& once,
                                       std::size_t read, std::size_t written, int links = 1) {
  if (kib < 4096) return {time(), bench::memory_floor(read, written).seconds};
  double t = 1e300, floor_s = 1e300;
  for (int k = 0; k < 5; ++k) {
    t = std::min(t, bench::detail::best_seconds(once, 3) / links);
    floor_s = std::min(floor_s, bench::memory_floor(read, written).seconds);
  }
  return {t, floor_s};
}

}  // namespace

int main(int argc, char** argv) {
  const double max_mib = argc > 1 ? std::atof(argv[1]) : 256;
  const int n = ts::device_count();
  auto mesh = ts::make_mesh({n}, {"x"});
  bench::header("collectives in shard_map over " + std::to_string(n) + " devices (" + std::to_string(bench::cores()) +
                " cores); size = bytes per device",
                "moved");
  for (double kib = 1; kib <= max_mib * 1024; kib *= 16) {
    const std::int64_t per = std::int64_t(kib * 1024 / 4);  // float32 elements per device
    const std::int64_t block = std::max<std::int64_t>(per / n * n, n);
    ts::Array x = ts::device_put(ts::ones({block * n}), ts::NamedSharding(mesh, P("x"))).block_until_ready();
    const double b = double(block) * 4;  // bytes per device
    struct Case {
      std::string name;
      std::function<ts::Array(ts::Array)> body;
      ts::PartitionSpec out;
      double moved;   // bytes each device reads from peers (a ring or tree of copies)
      double result;  // bytes of each device's result
      bool same;      // every device's result is the same (written once)
    };
    std::vector<std::pair<int, int>> shift;
    for (int i = 0; i < n; ++i) shift.push_back({i, (i + 1) % n});
    std::vector<Case> cases = {
        {"psum", [](ts::Array v) { return ts::psum(v, "x"); }, P(), 2.0 * (n - 1) / n * b, b, true},
        {"all_gather", [](ts::Array v) { return ts::all_gather(v, "x", {.tiled = true}); }, P(), double(n - 1) * b,
         double(n) * b, true},
        {"psum_scatter", [](ts::Array v) { return ts::psum_scatter(v, "x", {.tiled = true}); }, P("x"),
         double(n - 1) / n * b, b / n, false},
        {"all_to_all", [](ts::Array v) { return ts::all_to_all(v, "x", 0, 0, {.tiled = true}); }, P("x"),
         double(n - 1) / n * b, b, false},
        {"ppermute", [shift](ts::Array v) { return ts::ppermute(v, "x", shift); }, P("x"), b, b, false},
    };
    for (auto& c : cases) {
      // all_gather's result is n times the input on every device.
      if (c.name == "all_gather" && b * n * n > 4.0 * (1 << 30)) continue;
      auto f = ts::jit(ts::shard_map(c.body, mesh, P("x"), c.out, {.check_vma = false}));
      f(x).block_until_ready();
      const int reps = kib < 1024 ? 21 : 5;
      auto time_once = [&] { return bench::seconds([&] { f(x).block_until_ready(); }, reps); };
      const double written = c.same ? c.result : c.result * n;
      auto [t, floor_s] = side_by_side(kib, time_once, [&] { f(x).block_until_ready(); }, std::size_t(b * n),
                                       std::size_t(written));
      const double moved_s = bench::memory_floor(std::size_t(c.moved * n), std::size_t(c.moved * n), true).seconds;
      char name[96];
      std::snprintf(name, sizeof name, "%s %.0f KiB", c.name.c_str(), b / 1024);
      bench::row(name, floor_s, t, moved_s, time_once);
      if (c.name == "psum" || c.name == "all_to_all" || c.name == "ppermute") {
        auto chain = ts::jit(ts::shard_map(
            [&](ts::Array v) {
              for (int k = 0; k < 16; ++k) v = c.body(v);
              return v;
            },
            mesh, P("x"), c.out, {.check_vma = false}));
        chain(x).block_until_ready();
        auto time_chain = [&] { return bench::seconds([&] { chain(x).block_until_ready(); }, reps) / 16; };
        // Per link: a psum's later links read the one block the link before wrote.
        auto [t16, chain_floor_s] =
            side_by_side(kib, time_chain, [&] { chain(x).block_until_ready(); },
                         c.same ? std::size_t((b * n + 15 * b) / 16) : std::size_t(b * n), std::size_t(written), 16);
        std::snprintf(name, sizeof name, "%s %.0f KiB (chained)", c.name.c_str(), b / 1024);
        bench::row(name, chain_floor_s, t16, moved_s, time_chain);
      }
    }
  }
  return bench::status();
}
