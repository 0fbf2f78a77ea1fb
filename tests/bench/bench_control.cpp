// Overhead of compiled loops: a fori_loop of 10,000 steps of a small body
// (y = y * 0.999 + 1 on 16 floats), jitted, against the body's own work
// (the floor: its bytes over the memory bandwidth measured here, a generous
// lower bound for data that stays in cache) and against PyTorch running the
// same 10,000 steps from Python (the peer). Also a scan that reads a slice
// and writes a slice per step, and a while loop (its condition is a second
// region per step). Target (issue 15): < 5 us of overhead per iteration.
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
namespace lax = tessel::lax;

int main() {
  const int steps = 10000;
  const std::int64_t n = 16;
  ts::Array x = ts::arange(double(n)).astype(ts::DType::float32);
  // Reading and writing the 16 floats once per step.
  const double floor = bench::memory_floor(std::size_t(n * 4), std::size_t(n * 4)).seconds * steps;
  bench::header("compiled loops: 10,000 steps of a 16-float body (ms for all steps)");

  auto fori = ts::jit([&](ts::Array v) {
    return lax::fori_loop(0, steps, [](ts::Array, ts::Array y) { return y * 0.999f + 1.0f; }, v);
  });
  fori(x).block_until_ready();
  const double t_fori = bench::seconds([&] { fori(x).block_until_ready(); }, 7, 1);
  const double torch_loop = bench::torch_seconds("x = torch.arange(16.0)",
                                                 "y = x\n    for _ in range(10000): y = y * 0.999 + 1", 5);
  bench::row("fori_loop (static bounds: a scan)", floor, t_fori, torch_loop);

  using C = std::pair<ts::Array, ts::Array>;
  auto wl = ts::jit([&](ts::Array v) {
    return lax::while_loop([&](const C& c) { return c.first < steps; },
                           [](const C& c) { return C(c.first + 1, c.second * 0.999f + 1.0f); },
                           C(ts::array(std::int32_t(0)), v))
        .second;
  });
  wl(x).block_until_ready();
  const double t_while = bench::seconds([&] { wl(x).block_until_ready(); }, 7, 1);
  bench::row("while_loop (a condition region per step)", floor, t_while, torch_loop);

  ts::Array xs = ts::ones({steps, n});
  auto sc = ts::jit([](ts::Array c0, ts::Array s) {
    return lax::scan([](ts::Array c, ts::Array row) { return std::pair{c * 0.999f + row, c}; }, c0, s).second;
  });
  sc(x, xs).block_until_ready();
  const double t_scan = bench::seconds([&] { sc(x, xs).block_until_ready(); }, 7, 1);
  const double torch_scan = bench::torch_seconds(
      "x = torch.arange(16.0); xs = torch.ones(10000, 16); ys = torch.empty(10000, 16)",
      "c = x\n    for i in range(10000): ys[i] = c; c = c * 0.999 + xs[i]", 5);
  bench::row("scan (reads a row, writes a row per step)", floor * 3, t_scan, torch_scan);

  std::printf("\nper iteration: fori_loop %.2f us, while_loop %.2f us, scan %.2f us (target: < 5 us of overhead)\n",
              t_fori / steps * 1e6, t_while / steps * 1e6, t_scan / steps * 1e6);

  // x.at[i].set(v) in a fori_loop of 100,000 steps: the carry is updated in
  // place (O(1) a step), so 1M elements cost about what 1 element does
  // (issue 41's target: within 3x). Floor: the carry copied in and out once
  // and 100,000 elements written.
  {
    const int usteps = 100000;
    auto updates = [&](std::int64_t len) {
      return ts::jit([len, usteps](ts::Array v) {
        return lax::fori_loop(0, usteps, [len](ts::Array i, ts::Array y) {
          return y.at({i % std::int32_t(len)}).set(i.astype(ts::DType::float32));
        }, v);
      });
    };
    const std::int64_t big = std::int64_t(1) << 20;
    ts::Array one = ts::zeros({1}, ts::DType::float32), large = ts::zeros({big}, ts::DType::float32);
    auto u1 = updates(1), ub = updates(big);
    u1(one).block_until_ready();
    ub(large).block_until_ready();
    const double t_one = bench::seconds([&] { u1(one).block_until_ready(); }, 5, 1);
    const double t_big = bench::seconds([&] { ub(large).block_until_ready(); }, 5, 1);
    const double ufloor = bench::memory_floor(std::size_t(big * 4), std::size_t(big * 4 + usteps * 4)).seconds;
    const double torch_upd = bench::torch_seconds("x = torch.zeros(1 << 20)",
                                                  "for i in range(100000): x[i] = float(i)", 3);
    std::printf("\nfori_loop of 100,000 steps of y.at[i].set(v), y f32[1M] (in place) and f32[1]\n");
    bench::row("fori_loop y.at[i].set(v), 1M floats", ufloor, t_big, torch_upd);
    std::printf("the same loop over 1 float: %.3f ms; 1M / 1 = %.2fx (target: at most 3x)\n", t_one * 1e3,
                t_big / t_one);
    // Scatters at index arrays: 16 positions a step, along one dim and at
    // (row, column) pairs (one scatter into the carry flattened, its
    // reshapes bitcasts), into 1M floats and into 16.
    const ts::Array idx = ts::arange(std::int64_t(0), std::int64_t(16), std::int64_t(1), ts::DType::int32) * 5;
    const ts::Array vals = ts::ones({16}, ts::DType::float32);
    auto scatters = [&](std::int64_t rows, std::int64_t cols) {
      return ts::jit([rows, cols, usteps, idx, vals](ts::Array v) {
        return lax::fori_loop(0, usteps, [&](ts::Array i, ts::Array y) {
          if (cols == 0) return y.at({(idx + i) % std::int32_t(rows)}).add(vals);
          return y.at({(idx + i) % std::int32_t(rows), idx % std::int32_t(cols)}).add(vals);
        }, v);
      });
    };
    for (std::int64_t cols : {0, 1024}) {
      const std::int64_t rows = cols ? big / cols : big, small_rows = cols ? 4 : 16, small_cols = cols ? 4 : 0;
      ts::Array sb = cols ? ts::zeros({rows, cols}) : ts::zeros({rows});
      ts::Array ss = cols ? ts::zeros({small_rows, small_cols}) : ts::zeros({small_rows});
      auto fb = scatters(rows, cols), fs = scatters(small_rows, small_cols);
      fb(sb).block_until_ready();
      fs(ss).block_until_ready();
      const double t_small = bench::seconds([&] { fs(ss).block_until_ready(); }, 5, 1);
      const double t_large = bench::seconds([&] { fb(sb).block_until_ready(); }, 5, 1);
      const double sfloor = bench::memory_floor(std::size_t(big * 4), std::size_t(big * 4 + usteps * 16 * 4)).seconds;
      const double torch_sc = bench::torch_seconds(
          cols ? "x = torch.zeros(1024, 1024); r = torch.arange(16) * 5; c = r % 1024; v = torch.ones(16)"
               : "x = torch.zeros(1 << 20); r = torch.arange(16) * 5; v = torch.ones(16)",
          cols ? "for i in range(100000): x.index_put_(((r + i) % 1024, c), v, accumulate=True)"
               : "for i in range(100000): x.index_add_(0, (r + i) % (1 << 20), v)",
          1);
      bench::row(cols ? "fori_loop y.at[r, c].add(v), 16 pairs, 1024^2 floats" : "fori_loop y.at[idx].add(v), 16 indices, 1M floats",
                 sfloor, t_large, torch_sc);
      std::printf("the same loop over 16 floats: %.3f ms; 1M / 16 = %.2fx (target: at most 3x)\n", t_small * 1e3,
                  t_large / t_small);
    }
  }

  // A loop whose every step meets the other devices: y = y * 0.999 +
  // mean(y) over an array split across every device (an all-reduce per
  // step). Where the devices' threads outnumber the cores the launch runs
  // in lockstep (one thread for every device, runtime/executable.hpp), so no
  // step wakes a device's thread; the same program with lockstep launches
  // off (each device on its own thread, meeting its peers every step) is
  // measured in the same run.
  if (ts::device_count() >= 2) {
    const int msteps = 1000;
    const std::int64_t d = ts::device_count(), m = 16 * d;
    ts::Mesh mesh(ts::devices(), {d}, {"x"});
    ts::Array xm = ts::device_put(ts::arange(double(m)).astype(ts::DType::float32), ts::NamedSharding(mesh, ts::P("x")));
    auto meet = ts::jit([&](ts::Array v) {
      return lax::fori_loop(0, msteps, [](ts::Array, ts::Array y) { return y * 0.999f + ts::mean(y); }, v);
    });
    const double mfloor = bench::memory_floor(std::size_t(m * 4), std::size_t(m * 4)).seconds * msteps;
    const double torch_meet = bench::torch_seconds("x = torch.arange(" + std::to_string(m) + ".0)",
                                                   "y = x\n    for _ in range(1000): y = y * 0.999 + y.mean()", 5);
    meet(xm).block_until_ready();
    const double t_lockstep = bench::seconds([&] { meet(xm).block_until_ready(); }, 7, 1);
    const bool saved = ts::config().lockstep_launches;
    ts::config().lockstep_launches = false;
    meet(xm).block_until_ready();
    const double t_threads = bench::seconds([&] { meet(xm).block_until_ready(); }, 7, 1);
    ts::config().lockstep_launches = saved;
    std::printf("\n1,000 steps of y * 0.999 + mean(y), y f32[%lld] split over %lld devices (a psum per step)\n",
                (long long)m, (long long)d);
    bench::row("fori_loop with a psum, lockstep launch", mfloor, t_lockstep, torch_meet);
    bench::row("fori_loop with a psum, devices' threads", mfloor, t_threads, torch_meet);
    std::printf("per step: lockstep %.2f us, devices' threads %.2f us\n", t_lockstep / msteps * 1e6,
                t_threads / msteps * 1e6);
  }
  return bench::status();
}
