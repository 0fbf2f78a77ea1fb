// Test and benchmark of the int8 matrix product (codegen/gemm_int8.hpp), not
// part of the build. Compile it with the kernel file directly, e.g.
//
//   g++ -std=c++20 -O2 -I. tools/gemm_int8_check.cpp codegen/gemm_int8_avx512.cpp
//     -mavx512f -mavx512vl -mavx512bw -mavx512vnni -mavx2 -mfma -O3 -pthread -o /tmp/i8check
//
// (add -DWITH_F32 codegen/gemm_avx512.cpp to time the float32 GEMM beside it)
// and run `/tmp/i8check` (tests, then the benchmark), `/tmp/i8check test` or
// `/tmp/i8check bench`. The tests compare against a scalar int64 reference
// reduced mod 2^32 over random shapes, strides, batches and all four
// signedness combinations, on 1 and 2 threads; exit status 1 on a mismatch.
// Needs a CPU with avx512_vnni.

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "codegen/gemm_int8.hpp"
#ifdef WITH_F32
#include "codegen/gemm_isa.hpp"
#endif

using namespace tessel::codegen::gemm;
using i64 = std::int64_t;

namespace {

// parallel(ctx, n, task, task_ctx): serially, one index per call (so that tasks see lo > 0).
void serial_for(void*, i64 n, TaskFn task, void* task_ctx) {
  for (i64 i = 0; i < n; ++i) task(task_ctx, i, i + 1);
}

// On 2 threads (this one and one more), indices handed out one at a time.
void two_thread_for(void*, i64 n, TaskFn task, void* task_ctx) {
  std::atomic<i64> next{0};
  auto work = [&] {
    for (i64 i; (i = next.fetch_add(1)) < n;) task(task_ctx, i, i + 1);
  };
  std::thread t(work);
  work();
  t.join();
}

i64 cases = 0, assertions = 0, failures = 0;

void check(bool ok, const char* what, const std::string& ctx) {
  ++assertions;
  if (!ok && ++failures <= 20) std::printf("FAIL %s: %s\n", what, ctx.c_str());
}

struct Layout {
  i64 rs, cs, bs, span;  // strides and the bytes a batch element needs
};

// Row (r) by column (c) strides for an r x c operand: row-major, column-major, or strided/padded.
Layout pick_layout(std::mt19937_64& rng, i64 r, i64 c, i64 batch) {
  Layout l{};
  const int kind = int(rng() % 6);
  const i64 pad = i64(rng() % 3) * i64(rng() % 9);
  if (kind <= 1)
    l.cs = 1, l.rs = c + pad;  // row-major
  else if (kind <= 3)
    l.rs = 1, l.cs = r + pad;  // column-major (transposed)
  else if (kind == 4)
    l.cs = 2 + i64(rng() % 2), l.rs = l.cs * c + pad;  // strided along rows
  else
    l.rs = 2 + i64(rng() % 2), l.cs = l.rs * r + pad;  // strided along columns
  if (rng() % 16 == 0 && r > 0) l.rs = 0;              // every row the same (stride 0)
  l.span = 1 + (r > 0 ? (r - 1) * l.rs : 0) + (c > 0 ? (c - 1) * l.cs : 0);
  if (r == 0 || c == 0) l.span = 1;
  l.bs = batch > 1 && rng() % 3 == 0 ? 0 : l.span + i64(rng() % 5);  // 0: the batch broadcasts
  return l;
}

std::string describe(const OperandsI8& op, int threads) {
  char s[256];
  std::snprintf(
      s, sizeof s,
      "batch %lld m %lld n %lld k %lld a(%s rs %lld cs %lld bs %lld) b(%s rs %lld cs %lld bs %lld) threads %d",
      (long long)op.batch, (long long)op.m, (long long)op.n, (long long)op.k, op.a_signed ? "s8" : "u8",
      (long long)op.a_rs, (long long)op.a_cs, (long long)op.a_bs, op.b_signed ? "s8" : "u8", (long long)op.b_rs,
      (long long)op.b_cs, (long long)op.b_bs, threads);
  return s;
}

// Runs op (C prefilled with garbage, guarded at both ends) on 1 and 2 threads against the reference.
void run_case(OperandsI8 op, std::mt19937_64& rng) {
  ++cases;
  const i64 cn = op.batch * op.m * op.n, guard = 64;
  std::vector<std::int32_t> ref(static_cast<size_t>(cn));
  for (i64 bi = 0; bi < op.batch; ++bi)
    for (i64 i = 0; i < op.m; ++i)
      for (i64 j = 0; j < op.n; ++j) {
        i64 s = 0;
        for (i64 p = 0; p < op.k; ++p) {
          const std::uint8_t x = op.a[bi * op.a_bs + i * op.a_rs + p * op.a_cs];
          const std::uint8_t y = op.b[bi * op.b_bs + p * op.b_rs + j * op.b_cs];
          s += (op.a_signed ? i64(std::int8_t(x)) : i64(x)) * (op.b_signed ? i64(std::int8_t(y)) : i64(y));
        }
        ref[size_t(bi * op.m * op.n + i * op.n + j)] = std::int32_t(std::uint32_t(std::uint64_t(s)));
      }
  for (int threads : {1, 2}) {
    std::vector<std::int32_t> c(size_t(cn + 2 * guard));
    for (auto& x : c) x = std::int32_t(rng());
    const std::vector<std::int32_t> before = c;
    op.c = c.data() + guard;
    matmul_int8_avx512vnni(op, threads, threads == 1 ? serial_for : two_thread_for, nullptr);
    i64 bad = 0, first = -1;
    for (i64 t = 0; t < cn; ++t)
      if (op.c[t] != ref[size_t(t)]) {
        if (first < 0) first = t;
        ++bad;
      }
    assertions += cn - (bad ? 1 : 0);  // one assertion per element (a failing case reports once)
    if (bad) {
      char s[160];
      std::snprintf(s, sizeof s, " -- %lld wrong, first at %lld: got %d want %d", (long long)bad, (long long)first,
                    op.c[first], ref[size_t(first)]);
      check(false, "elements", describe(op, threads) + s);
    }
    bool guards = true;
    for (i64 t = 0; t < guard; ++t)
      guards =
          guards && c[size_t(t)] == before[size_t(t)] && c[size_t(cn + guard + t)] == before[size_t(cn + guard + t)];
    check(guards, "guards untouched", describe(op, threads));
  }
}

// Bytes: uniform, or mostly extremes (0, 0x7f, 0x80, 0xff), or one constant.
void fill(std::vector<std::uint8_t>& v, std::mt19937_64& rng) {
  const int mode = int(rng() % 4);
  const std::uint8_t extremes[4] = {0x00, 0x7f, 0x80, 0xff};
  const std::uint8_t constant = extremes[rng() % 4];
  for (auto& x : v) {
    if (mode <= 1)
      x = std::uint8_t(rng());
    else if (mode == 2)
      x = rng() % 4 ? extremes[rng() % 4] : std::uint8_t(rng());
    else
      x = constant;
  }
}

void random_case(std::mt19937_64& rng, i64 m, i64 n, i64 k, i64 batch, bool as, bool bs) {
  OperandsI8 op;
  op.batch = batch, op.m = m, op.n = n, op.k = k, op.a_signed = as, op.b_signed = bs;
  const Layout la = pick_layout(rng, m, k, batch), lb = pick_layout(rng, k, n, batch);
  op.a_rs = la.rs, op.a_cs = la.cs, op.a_bs = la.bs, op.b_rs = lb.rs, op.b_cs = lb.cs, op.b_bs = lb.bs;
  std::vector<std::uint8_t> a(size_t(la.span + (batch - 1) * la.bs)), b(size_t(lb.span + (batch - 1) * lb.bs));
  fill(a, rng), fill(b, rng);
  // Now and then a negative stride (the same elements, walked from the other end).
  auto flip = [&](std::int64_t& stride, i64 extent) {
    if (rng() % 8 || extent < 2) return i64(0);
    stride = -stride;
    return -(extent - 1) * stride;
  };
  const i64 a_off = flip(op.a_rs, m) + flip(op.a_cs, k), b_off = flip(op.b_rs, k) + flip(op.b_cs, n);
  op.a = a.data() + a_off, op.b = b.data() + b_off;
  run_case(op, rng);
}

int run_tests() {
  std::mt19937_64 rng(12345);
  const i64 special[] = {0,  1,  2,  3,  4,  5,  7,   8,   11,  12,  13,  15,  16,  17,  24,  31, 32,
                         33, 47, 48, 63, 64, 65, 127, 128, 129, 239, 240, 241, 255, 256, 257, 300};
  auto dim = [&] { return rng() % 2 ? special[rng() % (sizeof special / sizeof *special)] : i64(rng() % 301); };
  // Every signedness on a few fixed shapes, then random ones.
  for (int combo = 0; combo < 4; ++combo)
    for (i64 s : {1, 3, 4, 5, 12, 17, 32, 33, 64, 255}) random_case(rng, s, s, s, 1, combo & 1, combo & 2);
  for (int t = 0; t < 1200; ++t) {
    const i64 batch = rng() % 4 == 0 ? 1 + i64(rng() % 3) : 1;
    random_case(rng, dim(), dim(), dim(), batch, rng() % 2, rng() % 2);
  }
  // Deep k (more than one KC block, odd tails) on small m, n.
  for (i64 k : {1023, 1025, 2047, 2048, 2049, 4100, 6145})
    for (int combo = 0; combo < 4; ++combo)
      random_case(rng, 1 + i64(rng() % 30), 1 + i64(rng() % 70), k, 1, combo & 1, combo & 2);
  // Sums that wrap int32: constant extremes and k up to 140000 (|A B| up to 65025 per term).
  for (i64 k : {70000, 140001})
    for (int combo = 0; combo < 4; ++combo)
      for (int v = 0; v < 3; ++v) {
        OperandsI8 op;
        op.m = v == 2 ? 13 : 3, op.n = v == 2 ? 33 : 5, op.k = k, op.a_signed = combo & 1, op.b_signed = combo & 2;
        op.a_rs = k, op.a_cs = 1;
        op.b_rs = v == 1 ? 1 : op.n, op.b_cs = v == 1 ? k : 1;  // v 1: B transposed
        std::vector<std::uint8_t> a(size_t(op.m * k)), b(size_t(op.n * k));
        const std::uint8_t x = v == 0 ? 0x80 : 0xff, y = v == 0 ? 0x80 : 0xff;
        for (auto& e : a) e = rng() % 8 ? x : std::uint8_t(rng());
        for (auto& e : b) e = rng() % 8 ? y : std::uint8_t(rng());
        op.a = a.data(), op.b = b.data();
        run_case(op, rng);
      }
  std::printf("tests: %lld cases, %lld assertions, %lld failures\n", (long long)cases, (long long)assertions,
              (long long)failures);
  return failures ? 1 : 0;
}

// ---------------------------------------------------------------- benchmark

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Ops per second of vpdpbusd (128 ops) or zmm float32 FMA (32 flops), 12 chains, on `threads` threads.
template <bool kDot>
double peak(int threads) {
  auto one = [] {
    __m512i acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(0x3F800000 + i);
    const __m512i a = _mm512_set1_epi32(0x01020304), b = _mm512_set1_epi32(0x05060708);
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    const long iters = 1 << 20;
    for (long r = 0; r < iters; ++r)
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i)
        acc[i] = kDot ? _mm512_dpbusd_epi32(acc[i], a, b)
                      : _mm512_castps_si512(_mm512_fmadd_ps(_mm512_castsi512_ps(acc[i]), x, y));
    __m512i s = acc[0];
    for (int i = 1; i < 12; ++i) s = _mm512_xor_si512(s, acc[i]);
    alignas(64) int lanes[16];
    _mm512_store_si512(lanes, s);
    volatile int sink = lanes[0];
    (void)sink;
    return double(iters) * 12 * (kDot ? 128 : 32);
  };
  one();  // warm up
  double best = 0;
  for (int rep = 0; rep < 10; ++rep) {  // the best of 10 runs of about 5 ms
    const double t0 = seconds();
    double ops = 0;
    if (threads == 1)
      ops = one();
    else {
      std::thread t([&] { one(); });
      ops = one() * 2;
      t.join();
    }
    best = std::max(best, ops / (seconds() - t0));
  }
  return best;
}

int run_bench() {
  const i64 N = 4096;
  std::vector<std::uint8_t> a(size_t(N * N)), b(size_t(N * N));
  std::vector<std::int32_t> c(size_t(N * N));
  std::mt19937_64 rng(7);
  for (auto& x : a) x = std::uint8_t(rng());
  for (auto& x : b) x = std::uint8_t(rng());
  OperandsI8 op;
  op.m = op.n = op.k = N;
  op.a = a.data(), op.a_rs = N, op.a_cs = 1;
  op.b = b.data(), op.b_rs = N, op.b_cs = 1;
  op.c = c.data();
  const double ops = 2.0 * double(N) * double(N) * double(N);
  const double dot1 = peak<true>(1), dot2 = peak<true>(2), fma1 = peak<false>(1), fma2 = peak<false>(2);
  std::printf("peaks: vpdpbusd %.0f GOP/s (1 thread) %.0f (2); float32 FMA %.0f GFLOP/s (1) %.0f (2)\n", dot1 * 1e-9,
              dot2 * 1e-9, fma1 * 1e-9, fma2 * 1e-9);
  double int8_rate[2] = {0, 0};  // for the float32 comparison (WITH_F32)
  (void)int8_rate;
  for (int threads : {1, 2}) {
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = seconds();
      matmul_int8_avx512vnni(op, threads, threads == 1 ? serial_for : two_thread_for, nullptr);
      best = std::min(best, seconds() - t0);
    }
    const double peak_ops = threads == 1 ? dot1 : dot2;
    int8_rate[threads - 1] = ops / best;
    std::printf("int8 s8xs8 %lld^3, %d thread(s): %.3f s, %.1f GOP/s, %.0f%% of vpdpbusd peak\n", (long long)N, threads,
                best, ops / best * 1e-9, 100.0 * ops / best / peak_ops);
  }
#ifdef WITH_F32
  {
    std::vector<float> fa(size_t(N * N)), fb(size_t(N * N)), fc(size_t(N * N));
    for (size_t t = 0; t < fa.size(); ++t) fa[t] = float(std::int8_t(a[t])), fb[t] = float(std::int8_t(b[t]));
    Operands<float> fo;
    fo.m = fo.n = fo.k = N;
    fo.a = fa.data(), fo.a_rs = N, fo.a_cs = 1;
    fo.b = fb.data(), fo.b_rs = N, fo.b_cs = 1;
    fo.c = fc.data();
    for (int threads : {1, 2}) {
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        const double t0 = seconds();
        matmul_avx512(fo, threads, threads == 1 ? serial_for : two_thread_for, nullptr);
        best = std::min(best, seconds() - t0);
      }
      std::printf("float32 %lld^3, %d thread(s): %.3f s, %.1f GFLOP/s (int8 %.2fx that)\n", (long long)N, threads, best,
                  ops / best * 1e-9, int8_rate[threads - 1] * best / ops);
    }
  }
#endif
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "all";
  int rc = 0;
  if (what == "all" || what == "test") rc |= run_tests();
  if (what == "all" || what == "bench") rc |= run_bench();
  return rc;
}
