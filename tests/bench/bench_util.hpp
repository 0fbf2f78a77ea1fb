// Benchmark helpers: medians of repeated runs, the machine's floors (memory
// bandwidth, peak FLOP rate) measured or read in the same run, and PyTorch's
// time for the same work, run by /usr/bin/python3 in the same run.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <immintrin.h>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

inline double seconds(const std::function<void()>& f, int reps = 5, int warmup = 1) {
  for (int i = 0; i < warmup; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

inline int cores() { return std::max(1u, std::thread::hardware_concurrency()); }

// Time to read `bytes` and write `bytes` with plain (write-allocating) stores on
// every core: the memory floor of an elementwise kernel of that size.
inline double copy_seconds(std::size_t bytes) {
  const std::size_t n = bytes / sizeof(float);
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]);
  for (std::size_t i = 0; i < n; ++i) a[i] = float(i), b[i] = 0;
  return seconds([&] {
    std::vector<std::thread> ts;
    const int c = cores();
    for (int k = 0; k < c; ++k)
      ts.emplace_back([&, k] {
        std::size_t lo = n * k / c, hi = n * (k + 1) / c;
        float* __restrict out = b.get();
        const float* __restrict in = a.get();
        for (std::size_t i = lo; i < hi; ++i) out[i] = in[i] * 1.0001f;
      });
    for (auto& t : ts) t.join();
  }, 5, 1);
}

namespace detail {
// Independent FMA chains in registers, `iters` times 12 FMAs of a vector;
// returns a lane of their sum so the work cannot be dropped. A macro because
// each ISA's copy needs its own target attribute to be compiled inline.
#define TESSEL_BENCH_FMA_CHAINS(V, FMA, SET1)                              \
  V acc[12];                                                               \
  for (int i = 0; i < 12; ++i) acc[i] = SET1(float(i));                    \
  const V a = SET1(0.999999f), b = SET1(1e-7f);                            \
  for (long k = 0; k < iters; ++k)                                         \
    for (int i = 0; i < 12; ++i) acc[i] = FMA(acc[i], a, b);               \
  V s = acc[0];                                                            \
  for (int i = 1; i < 12; ++i) s = FMA(acc[i], a, s);                      \
  float out[sizeof(V) / sizeof(float)];                                    \
  std::memcpy(out, &s, sizeof out);                                        \
  return out[0];
__attribute__((target("avx2,fma"))) inline float fma_chains8(long iters) {
  TESSEL_BENCH_FMA_CHAINS(__m256, _mm256_fmadd_ps, _mm256_set1_ps)
}
__attribute__((target("avx512f"))) inline float fma_chains16(long iters) {
  TESSEL_BENCH_FMA_CHAINS(__m512, _mm512_fmadd_ps, _mm512_set1_ps)
}
#undef TESSEL_BENCH_FMA_CHAINS

// FLOP/s of `chains` on every core at once, run for about a quarter second.
inline double all_core_rate(float (*chains)(long), int lanes) {
  std::vector<float> sums(cores() + 1);  // one per thread, so that no two threads write one place
  sums.back() = chains(1000);            // warm up the units (AVX-512 licences, clocks)
  long iters = 1 << 20;
  for (;;) {
    std::vector<std::thread> ts;
    auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < cores(); ++c) ts.emplace_back([&, c] { sums[c] = chains(iters); });
    for (auto& t : ts) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.25) return double(cores()) * double(iters) * 12 * 2 * lanes / s;
    iters *= 2;
  }
}
}  // namespace detail

// Peak float32 FLOP rate, measured once: every core running independent FMA
// chains with the widest vectors the CPU has. Read off the CPU flags it would
// be wrong by 2x on CPUs whose 512-bit FMAs issue as two 256-bit halves
// (AMD Zen 4) or that have one 512-bit FMA unit, and by the turbo clock on all.
inline double peak_flops() {
  static const double peak = [] {
    double rate = 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) rate = detail::all_core_rate(detail::fma_chains8, 8);
    if (__builtin_cpu_supports("avx512f")) rate = std::max(rate, detail::all_core_rate(detail::fma_chains16, 16));
    return rate > 0 ? rate : 1e9 * cores();  // neither: no floor worth printing
  }();
  return peak;
}

// Seconds PyTorch (CPU, all cores) takes for `stmt` after `setup`, median of reps;
// negative when PyTorch is not there.
inline double torch_seconds(const std::string& setup, const std::string& stmt, int reps = 5) {
  std::ostringstream py;
  py << "import time, torch\n"
     << "torch.set_num_threads(" << cores() << ")\n"
     << setup << "\n"
     << "def f():\n    " << stmt << "\n"
     << "f()\n"
     << "ts = []\n"
     << "for _ in range(" << reps << "):\n"
     << "    t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)\n"
     << "ts.sort(); print(ts[len(ts) // 2])\n";
  std::string path = "/tmp/tessel_bench_torch.py";
  std::ofstream(path) << py.str();
  const char* python = std::getenv("TESSEL_BENCH_PYTHON");  // default: Debian's, with python3-torch
  FILE* p = popen((std::string(python ? python : "/usr/bin/python3") + " " + path + " 2>/dev/null").c_str(), "r");
  if (!p) return -1;
  char buf[128] = {0};
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  int rc = pclose(p);
  if (rc != 0 || out.empty()) return -1;
  return std::stod(out);
}

inline void header(const std::string& title) {
  std::printf("\n%s\n%-44s %12s %12s %8s %12s %9s\n", title.c_str(), "case", "floor (ms)", "tessel (ms)", "x floor",
              "torch (ms)", "x torch");
}

inline void row(const std::string& name, double floor_s, double ours_s, double torch_s) {
  std::printf("%-44s %12.2f %12.2f %8.2f ", name.c_str(), floor_s * 1e3, ours_s * 1e3, ours_s / floor_s);
  if (torch_s > 0) std::printf("%12.2f %9.2f\n", torch_s * 1e3, ours_s / torch_s);
  else std::printf("%12s %9s\n", "n/a", "n/a");
  std::fflush(stdout);
}

}  // namespace bench
