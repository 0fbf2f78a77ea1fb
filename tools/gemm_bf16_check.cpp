// Test and benchmark of the bfloat16 matrix products (codegen/gemm_bf16.hpp):
// the AMX kernel where the CPU has AMX, the vdpbf16ps kernel where it has
// AVX512_BF16. Not part of the build (the AMX kernel cannot run on the hosts
// tessel is mostly developed on); compile it with the kernel file directly:
//
//   g++ -std=c++20 -O2 -I. -DWITH_F32 tools/gemm_bf16_check.cpp codegen/gemm_bf16_avx512.cpp
//     codegen/gemm_avx512.cpp -mavx512f -mavx512vl -mavx512bw -mavx512bf16 -mamx-tile -mamx-bf16
//     -mavx2 -mfma -O3 -pthread -o /tmp/bf16check
//
// and run `/tmp/bf16check` (tests, then the benchmark), `test` or `bench`.
// With -DEMULATE_AMX (and without the kernel file on the command line) the AMX
// kernel's packing and blocking run on any AVX512_BF16 CPU, the tile
// instructions emulated (below).
// Tests: (1) small integers, whose products and sums are exact in float32 in
// any order, so every kernel must give the exact result bit for bit; (2)
// random values against a double reference within the float32 accumulation
// bound (2 k 2^-24 sum |a b|); random shapes, strides (transposed, strided,
// stride 0, negative), batches, on 1 thread and on every core, C guarded at
// both ends. Exit status 1 on a mismatch.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef EMULATE_AMX
// The AMX kernel's packing and blocking on a CPU without AMX: the tile
// instructions replaced by scalar code following Intel's description of them
// (tdpbf16ps: per row m and column n, for each pair k, C += a[2k] b[2k], then
// C += a[2k+1] b[2k+1], in float32). Compile with -DEMULATE_AMX and without
// codegen/gemm_bf16_avx512.cpp (it is included here); matmul_bf16_amx then
// runs whatever amx_bf16_usable() says.
#include <immintrin.h>
namespace amx_emulation {
struct Tiles {
  unsigned char t[8][16][64];
};
thread_local Tiles tiles;
inline void load(int t, const void* base, long stride) {
  for (int r = 0; r < 16; ++r) std::memcpy(tiles.t[t][r], static_cast<const char*>(base) + r * stride, 64);
}
inline void store(int t, void* base, long stride) {
  for (int r = 0; r < 16; ++r) std::memcpy(static_cast<char*>(base) + r * stride, tiles.t[t][r], 64);
}
inline float bf(const unsigned char* row, int i) {
  std::uint32_t u = std::uint32_t(row[2 * i] | (row[2 * i + 1] << 8)) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void dpbf16(int d, int a, int b) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float c;
      std::memcpy(&c, tiles.t[d][m] + 4 * n, 4);
      for (int k = 0; k < 16; ++k) {
        c += bf(tiles.t[a][m], 2 * k) * bf(tiles.t[b][k], 2 * n);
        c += bf(tiles.t[a][m], 2 * k + 1) * bf(tiles.t[b][k], 2 * n + 1);
      }
      std::memcpy(tiles.t[d][m] + 4 * n, &c, 4);
    }
}
}  // namespace amx_emulation
#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps
#define _tile_loadconfig(p) ((void)(p))
#define _tile_release() ((void)0)
#define _tile_loadd(t, base, stride) amx_emulation::load(t, base, stride)
#define _tile_stored(t, base, stride) amx_emulation::store(t, base, stride)
#define _tile_zero(tile) std::memset(::amx_emulation::tiles.t[tile], 0, 1024)
#define _tile_dpbf16ps(d, a, b) amx_emulation::dpbf16(d, a, b)
#include "codegen/gemm_bf16_avx512.cpp"
#else
#include "codegen/gemm_bf16.hpp"
#endif
#ifdef WITH_F32
#include "codegen/gemm_isa.hpp"
#endif

using namespace tessel::codegen::gemm;
using i64 = std::int64_t;
using u16 = std::uint16_t;

namespace {

int g_threads = 1;

// parallel(ctx, n, task, task_ctx) on g_threads threads, indices handed out one at a time.
void pool_for(void*, i64 n, TaskFn task, void* task_ctx) {
  std::atomic<i64> next{0};
  auto work = [&] {
    for (i64 i; (i = next.fetch_add(1)) < n;) task(task_ctx, i, i + 1);
  };
  std::vector<std::thread> ts;
  for (int t = 1; t < g_threads; ++t) ts.emplace_back(work);
  work();
  for (auto& t : ts) t.join();
}

u16 to_bf16(float f) {  // round to nearest even (finite values only here)
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return u16(u >> 16);
}
double from_bf16(u16 h) {
  std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

i64 cases = 0, failures = 0;

struct Layout {
  i64 rs, cs, bs, span;
};

Layout pick_layout(std::mt19937_64& rng, i64 r, i64 c, i64 batch) {
  Layout l{};
  const int kind = int(rng() % 6);
  const i64 pad = i64(rng() % 3) * i64(rng() % 9);
  if (kind <= 2) l.cs = 1, l.rs = c + pad;  // row-major (the common case, twice as often)
  else if (kind == 3) l.rs = 1, l.cs = r + pad;  // column-major
  else if (kind == 4) l.cs = 2, l.rs = 2 * c + pad;
  else l.rs = 2, l.cs = 2 * r + pad;
  if (rng() % 16 == 0 && r > 0) l.rs = 0;
  l.span = 1 + (r > 0 ? (r - 1) * l.rs : 0) + (c > 0 ? (c - 1) * l.cs : 0);
  if (r == 0 || c == 0) l.span = 1;
  l.bs = batch > 1 && rng() % 3 == 0 ? 0 : l.span + i64(rng() % 5);
  return l;
}

using Kernel = void (*)(const OperandsBf16&, int, ParallelForFn, void*);

void run_case(const char* name, Kernel kernel, OperandsBf16 op, bool exact, std::mt19937_64& rng) {
  ++cases;
  const i64 cn = op.batch * op.m * op.n, guard = 64;
  std::vector<double> ref(static_cast<size_t>(cn)), mag(static_cast<size_t>(cn));
  for (i64 bi = 0; bi < op.batch; ++bi)
    for (i64 i = 0; i < op.m; ++i)
      for (i64 j = 0; j < op.n; ++j) {
        double s = 0, a = 0;
        for (i64 p = 0; p < op.k; ++p) {
          const double x = from_bf16(op.a[bi * op.a_bs + i * op.a_rs + p * op.a_cs]);
          const double y = from_bf16(op.b[bi * op.b_bs + p * op.b_rs + j * op.b_cs]);
          s += x * y, a += std::fabs(x * y);
        }
        ref[size_t(bi * op.m * op.n + i * op.n + j)] = s, mag[size_t(bi * op.m * op.n + i * op.n + j)] = a;
      }
  const int all = int(std::max(2u, std::thread::hardware_concurrency()));
  for (int threads : {1, all}) {
    std::vector<float> c(size_t(cn + 2 * guard));
    for (auto& x : c) x = float(rng() % 1000) - 500.0f;
    const std::vector<float> before = c;
    op.c = c.data() + guard;
    g_threads = threads;
    kernel(op, threads, pool_for, nullptr);
    i64 bad = 0, first = -1;
    for (i64 t = 0; t < cn; ++t) {
      const double got = op.c[t], want = ref[size_t(t)];
      const bool ok = exact ? got == want : std::fabs(got - want) <= 2.0 * double(op.k) * 0x1p-24 * mag[size_t(t)] + 1e-30;
      if (!ok && first < 0) first = t;
      bad += !ok;
    }
    bool guards = true;
    for (i64 t = 0; t < guard; ++t)
      guards = guards && c[size_t(t)] == before[size_t(t)] && c[size_t(cn + guard + t)] == before[size_t(cn + guard + t)];
    if ((bad || !guards) && ++failures <= 20)
      std::printf("FAIL %s %s: batch %lld m %lld n %lld k %lld a(rs %lld cs %lld bs %lld) b(rs %lld cs %lld bs %lld) "
                  "threads %d: %lld wrong (first %lld: got %.9g want %.9g), guards %s\n",
                  name, exact ? "exact" : "rounded", (long long)op.batch, (long long)op.m, (long long)op.n,
                  (long long)op.k, (long long)op.a_rs, (long long)op.a_cs, (long long)op.a_bs, (long long)op.b_rs,
                  (long long)op.b_cs, (long long)op.b_bs, threads, (long long)bad, (long long)first,
                  first >= 0 ? double(op.c[first]) : 0.0, first >= 0 ? ref[size_t(first)] : 0.0, guards ? "ok" : "BROKEN");
  }
}

void random_case(const char* name, Kernel kernel, std::mt19937_64& rng, i64 m, i64 n, i64 k, i64 batch) {
  OperandsBf16 op;
  op.batch = batch, op.m = m, op.n = n, op.k = k;
  const Layout la = pick_layout(rng, m, k, batch), lb = pick_layout(rng, k, n, batch);
  op.a_rs = la.rs, op.a_cs = la.cs, op.a_bs = la.bs, op.b_rs = lb.rs, op.b_cs = lb.cs, op.b_bs = lb.bs;
  std::vector<u16> a(size_t(la.span + (batch - 1) * la.bs)), b(size_t(lb.span + (batch - 1) * lb.bs));
  // Exact: integers in [-8, 8] (|sum| <= 64 k < 2^24 for k < 2^18); else values in [-2, 2).
  const bool exact = rng() % 2;
  std::uniform_real_distribution<float> u(-2, 2);
  for (auto* v : {&a, &b})
    for (auto& x : *v) x = exact ? to_bf16(float(int(rng() % 17) - 8)) : to_bf16(u(rng));
  auto flip = [&](std::int64_t& stride, i64 extent) {
    if (rng() % 8 || extent < 2) return i64(0);
    stride = -stride;
    return -(extent - 1) * stride;
  };
  const i64 a_off = flip(op.a_rs, m) + flip(op.a_cs, k), b_off = flip(op.b_rs, k) + flip(op.b_cs, n);
  op.a = a.data() + a_off, op.b = b.data() + b_off;
  run_case(name, kernel, op, exact, rng);
}

int run_tests(const char* name, Kernel kernel) {
  std::mt19937_64 rng(12345);
  const i64 special[] = {0, 1, 2, 3, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 95, 96, 127, 128, 129, 255, 256, 257, 300};
  auto dim = [&] { return rng() % 2 ? special[rng() % (sizeof special / sizeof *special)] : i64(rng() % 301); };
  const i64 before = failures, cases0 = cases;
  for (i64 s : {1, 16, 31, 32, 33, 64, 100, 256}) random_case(name, kernel, rng, s, s, s, 1);
  for (int t = 0; t < 600; ++t) random_case(name, kernel, rng, dim(), dim(), dim(), rng() % 4 == 0 ? 1 + i64(rng() % 3) : 1);
  for (i64 k : {511, 512, 513, 1023, 1025, 2049, 4100})  // several k blocks, odd tails
    for (int r = 0; r < 3; ++r) random_case(name, kernel, rng, 1 + i64(rng() % 70), 1 + i64(rng() % 70), k, 1);
  for (int r = 0; r < 4; ++r) random_case(name, kernel, rng, 300 + i64(rng() % 300), 300 + i64(rng() % 300), 600, 1);
  std::printf("%s: %lld cases, %lld failures\n", name, (long long)(cases - cases0), (long long)(failures - before));
  return failures > before;
}

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void run_bench(bool amx) {
  const i64 N = 4096;
  const int all = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<u16> a(size_t(N * N)), b(size_t(N * N));
  std::vector<float> c(size_t(N * N));
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (auto* v : {&a, &b})
    for (auto& x : *v) x = to_bf16(u(rng));
  OperandsBf16 op;
  op.m = op.n = op.k = N;
  op.a = a.data(), op.a_rs = N, op.a_cs = 1;
  op.b = b.data(), op.b_rs = N, op.b_cs = 1;
  op.c = c.data();
  const double flops = 2.0 * double(N) * double(N) * double(N);
  auto time = [&](const char* name, auto run) {
    for (int threads : {1, all}) {
      g_threads = threads;
      double best = 1e30;
      for (int rep = 0; rep < (threads == 1 ? 2 : 5); ++rep) {
        const double t0 = seconds();
        run(threads);
        best = std::min(best, seconds() - t0);
      }
      std::printf("%s %lld^3, %d thread(s): %.1f ms, %.0f GFLOP/s\n", name, (long long)N, threads, best * 1e3,
                  flops / best * 1e-9);
    }
  };
  if (amx) time("bf16 amx", [&](int t) { matmul_bf16_amx(op, t, pool_for, nullptr); });
  time("bf16 vdpbf16ps", [&](int t) { matmul_bf16_avx512(op, t, pool_for, nullptr); });
#ifdef WITH_F32
  std::vector<float> fa(size_t(N * N)), fb(size_t(N * N));
  for (size_t t = 0; t < fa.size(); ++t) fa[t] = float(from_bf16(a[t])), fb[t] = float(from_bf16(b[t]));
  Operands<float> fo;
  fo.m = fo.n = fo.k = N;
  fo.a = fa.data(), fo.a_rs = N, fo.a_cs = 1;
  fo.b = fb.data(), fo.b_rs = N, fo.b_cs = 1;
  fo.c = c.data();
  time("f32 avx512", [&](int t) { matmul_avx512(fo, t, pool_for, nullptr); });
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
#ifdef EMULATE_AMX
  const bool amx = true;
  std::printf("AMX emulated in scalar code\n");
#else
  const bool amx = amx_bf16_usable();
#endif
  std::printf("AMX-BF16 %s, %u threads\n", amx ? "usable" : "not usable", std::thread::hardware_concurrency());
  int rc = 0;
  if (what != "bench") {
    if (amx) rc |= run_tests("amx", matmul_bf16_amx);
    rc |= run_tests("vdpbf16ps", matmul_bf16_avx512);
  }
  if (what != "test") run_bench(amx);
  return rc;
}
