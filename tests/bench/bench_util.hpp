// Benchmark helpers: medians of repeated runs, the machine's floors (memory
// bandwidth, peak FLOP rate) measured in the same run as true lower bounds
// (a time below its floor fails the run), and PyTorch's time for the same
// work, run by /usr/bin/python3 in the same run.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <cpuid.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
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

namespace detail {
// Best (least) seconds of f over reps runs: the floors take the fastest run,
// the measured work the median.
inline double best_seconds(const std::function<void()>& f, int reps, int warmup = 1) {
  for (int i = 0; i < warmup; ++i) f();
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  return best;
}
// body(lo, hi) over [0, n) split evenly over `threads` threads (the caller's
// thread when one).
inline void split(std::size_t n, int threads, const std::function<void(std::size_t, std::size_t)>& body) {
  if (threads == 1) return body(0, n);
  std::vector<std::thread> ts;
  for (int k = 0; k < threads; ++k)
    ts.emplace_back([&, k] { body(n * std::size_t(k) / std::size_t(threads), n * std::size_t(k + 1) / std::size_t(threads)); });
  for (auto& t : ts) t.join();
}
// Streaming stores that bypass the cache (no read for ownership), a whole
// cache line per store where the CPU has AVX-512 (full lines combine best),
// else 8 floats; n a multiple of 32 floats, out 64-byte aligned.
__attribute__((target("avx512f"))) inline void nt_copy512(const float* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 16) _mm512_stream_ps(out + i, _mm512_loadu_ps(in + i));
  _mm_sfence();
}
__attribute__((target("avx"))) inline void nt_copy256(const float* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 8) _mm256_stream_ps(out + i, _mm256_loadu_ps(in + i));
  _mm_sfence();
}
inline void nt_copy(const float* in, float* out, std::size_t n) {
  if (__builtin_cpu_supports("avx512f")) nt_copy512(in, out, n);
  else nt_copy256(in, out, n);
}
// A sum with 8 independent accumulators of 16 (or 8) floats: reads, no
// stores. A macro, as TESSEL_BENCH_FMA_CHAINS below: each ISA's copy needs
// its own target attribute.
#define TESSEL_BENCH_READ_SUM(V, W, ZERO, LOAD, ADD, STORE)                          \
  V acc[8];                                                                        \
  for (auto& x : acc) x = ZERO();                                                  \
  for (std::size_t i = 0; i + 8 * W <= n; i += 8 * W)                              \
    for (int k = 0; k < 8; ++k) acc[k] = ADD(acc[k], LOAD(in + i + W * k));        \
  for (int k = 1; k < 8; ++k) acc[0] = ADD(acc[0], acc[k]);                        \
  float out[W];                                                                    \
  STORE(out, acc[0]);                                                              \
  return out[0];
__attribute__((target("avx512f"))) inline float read_sum512(const float* in, std::size_t n) {
  TESSEL_BENCH_READ_SUM(__m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_add_ps, _mm512_storeu_ps)
}
__attribute__((target("avx"))) inline float read_sum256(const float* in, std::size_t n) {
  TESSEL_BENCH_READ_SUM(__m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_add_ps, _mm256_storeu_ps)
}
#undef TESSEL_BENCH_READ_SUM
inline float read_sum(const float* in, std::size_t n) {
  return __builtin_cpu_supports("avx512f") ? read_sum512(in, n) : read_sum256(in, n);
}
}  // namespace detail

// The memory floor: the least time in which this machine moves `read` bytes
// in and `written` bytes out, measured in this run at that working set as
// the fastest of three patterns that each move read + written bytes, on one
// thread and on every core: a plain copy (memcpy), a copy with non-temporal
// (streaming) stores, and a read-only sum. No kernel that must read and
// write those bytes can beat it; `how` names the pattern that set it. The
// arrays are on huge pages, as tessel's buffers are.
struct Floor {
  double seconds = 0;
  std::string how;
};
namespace detail {
// Every memory floor measured in this run (check() measures one again).
struct FloorRecord {
  double seconds;
  std::size_t read, written;
};
inline std::vector<FloorRecord>& floor_log() {
  static std::vector<FloorRecord> log;
  return log;
}
}  // namespace detail

// `copies_only`: the copies alone (a reference for work that is copies,
// not a floor: on a host whose reads run faster than its writes, the
// read-only sum of a copy's bytes beats every copy).
inline Floor memory_floor(std::size_t read, std::size_t written, bool copies_only = false) {
  const std::size_t total = std::max<std::size_t>(read + written, 256);
  const std::size_t half = (total / 2 + 511) / 512 * 512;  // bytes per array: 128 floats at a time
  const std::size_t n = half / 4;
  // On huge pages where the kernel gives them (as tessel's buffers, runtime/buffer.cpp): no TLB walks.
  auto alloc = [](std::size_t bytes) {
    const std::size_t huge = std::size_t(2) << 20, size = (bytes + huge - 1) / huge * huge;
    void* p = std::aligned_alloc(huge, size);
    if (!p) throw std::bad_alloc();
    madvise(p, size, MADV_HUGEPAGE);
    return std::unique_ptr<float[], void (*)(void*)>(static_cast<float*>(p), std::free);
  };
  auto a = alloc(half), b = alloc(half);
  detail::split(n, cores(), [&](std::size_t lo, std::size_t hi) {  // first touch on the threads that use them
    for (std::size_t i = lo; i < hi; ++i) a[i] = float(i), b[i] = 0;
  });
  const int reps = total < (std::size_t(1) << 24) ? 51 : 15;  // the fastest of many: the machine is shared
  Floor best{1e300, ""};
  volatile float sink = 0;
  for (int threads : {1, cores()}) {
    const std::string on = threads == 1 ? ", 1 thread" : ", " + std::to_string(threads) + " threads";
    auto consider = [&](const char* what, const std::function<void(std::size_t, std::size_t)>& body, std::size_t count) {
      const double t = detail::best_seconds([&] { detail::split(count, threads, body); }, reps);
      if (t < best.seconds) best = {t, what + on};
    };
    consider("copy", [&](std::size_t lo, std::size_t hi) { std::memcpy(b.get() + lo, a.get() + lo, (hi - lo) * 4); }, n);
    consider("non-temporal copy", [&](std::size_t lo, std::size_t hi) {
      detail::nt_copy(a.get() + lo * 32, b.get() + lo * 32, (hi - lo) * 32);
    }, n / 32);
    if (!copies_only) consider("read-only sum", [&](std::size_t lo, std::size_t hi) {  // of a then b: read + written bytes
      const std::size_t units = n / 128, a_hi = std::min(hi, units), b_lo = std::max(lo, units);
      if (lo < a_hi) sink = sink + detail::read_sum(a.get() + lo * 128, (a_hi - lo) * 128);
      if (b_lo < hi) sink = sink + detail::read_sum(b.get() + (b_lo - units) * 128, (hi - b_lo) * 128);
    }, 2 * n / 128);
  }
  if (!copies_only) detail::floor_log().push_back({best.seconds, read, written});
  return best;
}

// The floor as a string: "256 MiB at 41.2 GB/s (non-temporal copy, 2 threads)".
inline std::string describe(const Floor& f, double bytes) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.4g MiB at %.1f GB/s (%s)", bytes / (1 << 20), bytes / f.seconds / 1e9, f.how.c_str());
  return buf;
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
inline double every_core_at_once(float (*chains)(long), int lanes) {
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
// The cores' rate for `chains`: the larger of every core's at once and one
// core's alone times the cores. A floor must be a lower bound, and a core
// alone may clock higher than all at once: on a 16-core Emerald Rapids guest
// every core running FMA chains reached 1394 GFLOP/s and a 4096^3 product
// ran at 1546 (power-limited clocks: the chains draw more than a product
// waiting on its loads now and then).
inline double all_core_rate(float (*chains)(long), int lanes) {
  const double together = every_core_at_once(chains, lanes);
  long iters = 1 << 18;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float sink = chains(iters);
    (void)sink;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.05) return std::max(together, double(cores()) * double(iters) * 12 * 2 * lanes / s);
    iters *= 2;
  }
}
// The best of `tries` all-core rates: on this shared host one window's rate
// can be below what the cores reach a moment later (a product then ran 8%
// faster than its instruction's measured peak), and a floor must be a lower
// bound.
inline double best_rate(float (*chains)(long), int lanes, int tries = 3) {
  double best = 0;
  for (int k = 0; k < tries; ++k) best = std::max(best, all_core_rate(chains, lanes));
  return best;
}
// A peak measured again beside a run of `ops` that took `seconds`, and
// again (up to 5 more times) while the run beats ops / peak: the rate
// drifts on this shared host, and a floor must be a lower bound (as
// check() does for the FMA's).
inline double peak_beside(double peak, double ops, double seconds, const std::function<double()>& measure) {
  for (int k = 0; k == 0 || (k < 6 && seconds < ops / peak); ++k) peak = std::max(peak, measure());
  return peak;
}
}  // namespace detail

// Peak float32 FLOP rate, measured once: every core running independent FMA
// chains with the widest vectors the CPU has. Read off the CPU flags it would
// be wrong by 2x on CPUs whose 512-bit FMAs issue as two 256-bit halves
// (AMD Zen 4) or that have one 512-bit FMA unit, and by the turbo clock on all.
// The best rate measured so far counts (check() measures it again when a
// time falls below a FLOP floor: on this shared host a core's FMA rate
// drifts with its neighbours' load, and a floor from a slow window is no
// lower bound).
namespace detail {
inline double measure_peak_flops() {
  double rate = 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) rate = all_core_rate(fma_chains8, 8);
  if (__builtin_cpu_supports("avx512f")) rate = std::max(rate, all_core_rate(fma_chains16, 16));
  return rate > 0 ? rate : 1e9 * cores();  // neither: no floor worth printing
}
inline double& best_peak_flops() {
  static double peak = measure_peak_flops();
  return peak;
}
}  // namespace detail
inline double peak_flops() { return detail::best_peak_flops(); }

namespace detail {
// 12 independent chains of vdpbf16ps: 16 lanes x 2 bfloat16 products.
__attribute__((target("avx512f,avx512bf16"))) inline float dpbf16_chains(long iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3F803F80), b = (__m512bh)_mm512_set1_epi32(0x33803380);
  for (long k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}
}  // namespace detail
// The cores' bfloat16 dot-product peak (vdpbf16ps, measured), or 0 without AVX512_BF16.
inline double bf16_peak_flops() {
  // all_core_rate counts 2 x lanes flops per chain step: 32 "lanes" make the 64 of a vdpbf16ps.
  return __builtin_cpu_supports("avx512bf16") ? detail::best_rate(detail::dpbf16_chains, 32) : 0.0;
}

namespace detail {
// 6 independent accumulator tiles of AMX tdpbf16ps (16 x 16 x 32 products,
// 16384 flops each) on the same two source tiles: 4096 "lanes" make a step's
// 6 x 16384 flops in all_core_rate's count (12 x 2 x lanes).
__attribute__((target("amx-tile,amx-bf16"))) inline float amx_bf16_chains(long iters) {
  struct alignas(64) Config {
    std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
    std::uint16_t colsb[16] = {};
    std::uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  alignas(64) std::uint16_t src[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) src[i] = std::uint16_t(0x3A80 + (i & 7));  // about 1e-3
  _tile_loadconfig(&cfg);
  _tile_loadd(6, src, 64);
  _tile_loadd(7, src, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  for (long k = 0; k < iters; ++k) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}
}  // namespace detail
// The cores' AMX bfloat16 peak (tdpbf16ps, measured), or 0 where the CPU has
// no AMX, Linux does not grant the tile state, or TESSEL_NO_AMX is set (as
// codegen/dot.cpp decides whether to use it).
inline double amx_bf16_peak_flops() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return 0.0;
  __cpuid_count(7, 0, a, b, c, d);
  if (!((d >> 22) & 1u) || !((d >> 24) & 1u)) return 0.0;
  const char* off = std::getenv("TESSEL_NO_AMX");
  const char* no512 = std::getenv("TESSEL_NO_AVX512");
  if ((off && *off && std::string(off) != "0") || (no512 && *no512 && std::string(no512) != "0")) return 0.0;
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return 0.0;
  return detail::best_rate(detail::amx_bf16_chains, 4096);
}

namespace detail {
// Every FLOP floor taken through flop_floor in this run (check() measures
// the peak again for them).
struct FlopRecord {
  double seconds, flops;
};
inline std::vector<FlopRecord>& flop_log() {
  static std::vector<FlopRecord> log;
  return log;
}
}  // namespace detail

// `flops` float32 operations at the peak FMA rate.
inline double flop_floor(double flops) {
  const double seconds = flops / peak_flops();
  detail::flop_log().push_back({seconds, flops});
  return seconds;
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
  // -I: isolated, so that no stray module beside the script (a /tmp/random.py) shadows the library's.
  FILE* p = popen((std::string(python ? python : "/usr/bin/python3") + " -I " + path + " 2>/dev/null").c_str(), "r");
  if (!p) return -1;
  char buf[128] = {0};
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  int rc = pclose(p);
  if (rc != 0 || out.empty()) return -1;
  return std::stod(out);
}

// PyTorch's side of the seed MLP (samples/mlp.hpp): `sizes`, `B`, `params`
// (W, b per layer, requiring gradients), `flat`, the batch `x`, `t`, and
// `loss()`, the mean squared error of the ReLU network.
inline std::string torch_mlp_setup(const std::vector<std::int64_t>& sizes, std::int64_t batch) {
  std::ostringstream py;
  py << "sizes = [";
  for (auto s : sizes) py << s << ", ";
  py << "]\nB = " << batch << "\n"
     << "params = [(torch.randn(a, b) / a ** 0.5, torch.randn(b)) for a, b in zip(sizes[:-1], sizes[1:])]\n"
     << "for W, b in params: W.requires_grad_(); b.requires_grad_()\n"
     << "x = torch.randn(B, sizes[0]); t = torch.randn(B, sizes[-1])\n"
     << "flat = [v for p in params for v in p]\n"
     << "def loss():\n"
     << "    h = x\n"
     << "    for W, b in params:\n"
     << "        out = h @ W + b\n"
     << "        h = torch.relu(out)\n"
     << "    return ((out - t) ** 2).sum(-1).mean()\n";
  return py.str();
}

// `peer`: what the last two columns compare with (PyTorch unless named).
inline void header(const std::string& title, const std::string& peer = "torch") {
  std::printf("\n%s\n%-44s %12s %12s %8s %12s %9s\n", title.c_str(), "case", "floor (ms)", "tessel (ms)", "x floor",
              (peer + " (ms)").c_str(), ("x " + peer).c_str());
}

// Every measured time must be at least its floor: a ratio below 1.0 means
// the floor is not a lower bound (a wrong model of the work, or the machine
// faster than measured), and fails the run (status()).
inline int& below_floor() {
  static int n = 0;
  return n;
}
// A time below a memory floor first has the floor measured again, up to
// three times (the fastest counts): on a shared host the floor's window may
// have been slower than the work's. If it is still below and the work can be
// timed again (`retime`: its median seconds), the two are measured side by
// side, alternating five times (the floor's fastest run, the work's median),
// and that pair is reported: this host's bandwidth drifts for seconds at a
// time (a 512 MiB copy on 2 threads took 22 ms, then 14 ms a few seconds
// later; a ppermute of 64 MiB over 8 devices timed 17.8 ms in a fast window
// stood below a floor of 21.0 ms measured four times in a slow one).
//
// A time below a FLOP floor (flop_floor) has the peak FMA rate measured
// again so, up to three times and then beside the work; the best peak
// measured in the run counts (a higher peak only lowers a floor).
inline void check(const std::string& name, double& floor_s, double& ours_s,
                  const std::function<double()>& retime = {}) {
  bool memory = false;
  if (ours_s < floor_s)
    for (const detail::FloorRecord f : detail::floor_log())
      if (f.seconds == floor_s) {
        memory = true;
        for (int k = 0; k < 3 && ours_s < floor_s; ++k) {
          const double again = memory_floor(f.read, f.written).seconds;
          if (again < floor_s) std::printf("(the floor of %s measured again: %.4g ms)\n", name.c_str(), again * 1e3);
          floor_s = std::min(floor_s, again);
        }
        if (ours_s < floor_s && retime) {
          double floor_beside = 1e300;
          std::vector<double> works;
          for (int k = 0; k < 5; ++k) {
            floor_beside = std::min(floor_beside, memory_floor(f.read, f.written).seconds);
            works.push_back(retime());
          }
          std::sort(works.begin(), works.end());
          ours_s = works[works.size() / 2];
          floor_s = floor_beside;
          std::printf("(%s and its floor measured again side by side: %.4g ms, floor %.4g ms)\n", name.c_str(),
                      ours_s * 1e3, floor_s * 1e3);
        }
        break;
      }
  double work = 0;  // the FLOP floor's operations
  if (ours_s < floor_s && !memory)
    for (const detail::FlopRecord f : detail::flop_log())
      if (f.seconds == floor_s) work = f.flops;
  if (ours_s < floor_s && work > 0) {
    for (int k = 0; k < 3 && ours_s < floor_s; ++k) {
      const double again = detail::measure_peak_flops();
      if (again > peak_flops()) {
        std::printf("(the peak FMA rate measured again for %s: %.4g GFLOP/s)\n", name.c_str(), again / 1e9);
        detail::best_peak_flops() = again;
      }
      floor_s = work / peak_flops();
    }
    if (ours_s < floor_s && retime) {
      double peak_beside = 0;
      std::vector<double> works;
      for (int k = 0; k < 5; ++k) {
        peak_beside = std::max(peak_beside, detail::measure_peak_flops());
        works.push_back(retime());
      }
      std::sort(works.begin(), works.end());
      ours_s = works[works.size() / 2];
      detail::best_peak_flops() = std::max(peak_flops(), peak_beside);
      floor_s = work / peak_flops();
      std::printf("(%s and the peak FMA rate measured again side by side: %.4g ms, floor %.4g ms)\n", name.c_str(),
                  ours_s * 1e3, floor_s * 1e3);
    }
  }
  if (ours_s < floor_s) {
    ++below_floor();
    std::printf("BELOW THE FLOOR: %s takes %.4g ms, its floor %.4g ms (%.2fx)\n", name.c_str(), ours_s * 1e3,
                floor_s * 1e3, ours_s / floor_s);
  }
}
// main's return: 1 when a time was below its floor.
inline int status() {
  if (below_floor()) std::printf("\n%d time(s) below their floor: the floors are not lower bounds\n", below_floor());
  return below_floor() ? 1 : 0;
}

inline void row(const std::string& name, double floor_s, double ours_s, double torch_s,
                const std::function<double()>& retime = {}) {
  check(name, floor_s, ours_s, retime);
  std::printf("%-44s %12.3f %12.3f %8.2f ", name.c_str(), floor_s * 1e3, ours_s * 1e3, ours_s / floor_s);
  if (torch_s > 0) std::printf("%12.3f %9.2f\n", torch_s * 1e3, ours_s / torch_s);
  else std::printf("%12s %9s\n", "n/a", "n/a");
  std::fflush(stdout);
}

}  // namespace bench
