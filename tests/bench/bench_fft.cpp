// fftn of a 256^3 complex64 volume (`small`: 128^3): tessel on 1 device and on
// 8 devices split P('x', 'y') over 4 x 2 (pencils: all-to-alls move the
// split), against FFTW called directly (the same FFTW_ESTIMATE planning) on
// every core with its own threads, and on one thread. The floor is the larger
// of one read and one write of the volume at the best bandwidth (bench::memory_floor)
// and 5 N log2 N flops at the peak FMA rate, both measured here. The
// all-to-all share: the same number of all-to-alls of the same blocks, timed
// alone in a shard_map.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>

#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

namespace {

double fftw_seconds(int n, int threads, int reps) {
  const std::size_t N = std::size_t(n) * n * n;
  auto* in = static_cast<fftwf_complex*>(fftwf_malloc(N * sizeof(fftwf_complex)));
  auto* out = static_cast<fftwf_complex*>(fftwf_malloc(N * sizeof(fftwf_complex)));
  for (std::size_t i = 0; i < N; ++i) in[i][0] = float(std::sin(0.001 * double(i))), in[i][1] = 0;
  fftwf_plan_with_nthreads(threads);
  fftwf_plan p = fftwf_plan_dft_3d(n, n, n, in, out, FFTW_FORWARD, FFTW_ESTIMATE);
  const double s = bench::seconds([&] { fftwf_execute(p); }, reps, 1);
  fftwf_destroy_plan(p);
  fftwf_free(in);
  fftwf_free(out);
  return s;
}

int count(const std::string& text, const std::string& what) {
  int c = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++c;
  return c;
}

void row(const std::string& name, double floor, double ours, double peer) {
  bench::check(name, floor, ours);
  std::printf("%-52s %10.1f %11.1f %8.2f %11.1f %8.2f\n", name.c_str(), floor * 1e3, ours * 1e3, ours / floor, peer * 1e3,
              ours / peer);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 && std::strcmp(argv[1], "small") == 0 ? 128 : 256;
  const int reps = 3;
  fftwf_init_threads();
  const double N = double(n) * n * n, bytes = N * 8;
  const double floor = std::max(bench::memory_floor(std::size_t(bytes), std::size_t(bytes)).seconds,
                                5 * N * std::log2(N) / bench::peak_flops());
  const double peer_all = fftw_seconds(n, bench::cores(), reps), peer_one = fftw_seconds(n, 1, reps);
  std::printf("\nfftn of %d^3 complex64 (%.0f MiB); FFTW directly: %.1f ms on %d threads, %.1f ms on 1\n", n, bytes / (1 << 20),
              peer_all * 1e3, bench::cores(), peer_one * 1e3);
  std::printf("%-52s %10s %11s %8s %11s %8s\n", "case", "floor (ms)", "tessel (ms)", "x floor", "FFTW (ms)", "x FFTW");
  ts::Array x = (ts::random::normal(ts::random::key(0), {n, n, n}) * std::complex<double>(1, 0)).astype(ts::complex64);
  auto fftn = ts::jit([](const ts::Array& a) { return ts::fft::fftn(a); });
  const auto all = ts::devices();
  ts::Array x1 = ts::device_put(x, ts::NamedSharding(ts::Mesh({all[0]}, {1}, {"x"}), P()));
  fftn(x1).block_until_ready();
  row("1 device", floor, bench::seconds([&] { fftn(x1).block_until_ready(); }, reps, 0), peer_all);
  if (all.size() >= 8) {
    ts::Mesh mesh(all, {4, 2}, {"x", "y"});
    ts::Array x8 = ts::device_put(x, ts::NamedSharding(mesh, P("x", "y")));
    fftn(x8).block_until_ready();
    const double ours = bench::seconds([&] { fftn(x8).block_until_ready(); }, reps, 0);
    row("8 devices, P('x', 'y') on 4 x 2", floor, ours, peer_all);
    // The all-to-all share: as many all-to-alls of the same blocks, alone.
    const int a2a = count(fftn.lower(x8).compile().as_text(), "all-to-all ");
    auto moves = ts::jit([&](const ts::Array& a) {
      return ts::shard_map([a2a](ts::Array b) {
        for (int k = 0; k < a2a; ++k) b = ts::all_to_all(b, k % 2 ? "x" : "y", 2, k % 2 ? 0 : 1, {.tiled = true});
        return b;
      }, mesh, P("x", "y"), P("x", "y"), {.check_vma = false})(a);
    });
    moves(x8).block_until_ready();
    const double comm = bench::seconds([&] { moves(x8).block_until_ready(); }, reps, 0);
    std::printf("  its %d all-to-alls alone: %.1f ms, %.0f%% of its time\n", a2a, comm * 1e3, 100 * comm / ours);
  }
  fftwf_cleanup_threads();
  return bench::status();
}
