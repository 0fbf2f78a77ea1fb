// The bfloat16 product kernels (codegen/gemm_bf16.hpp) that this CPU runs,
// AMX tiles and vdpbf16ps, against a float64 loop: small integers, whose
// products and sums are exact in float32 in any order (so bit for bit), and
// values in [-2, 2) within float32 accumulation's bound; shapes around the
// tiles' and blocks' edges, transposed, strided and broadcast operands,
// batches, several threads, C's neighbours untouched. (tools/gemm_bf16_check.cpp
// runs many more shapes, and the AMX kernel's blocking on CPUs without AMX.)
#include "codegen/gemm_bf16.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "codegen/gemm.hpp"
#include "codegen/host.hpp"

using namespace tessel::codegen;
using i64 = std::int64_t;

namespace {

using Kernel = void (*)(const gemm::OperandsBf16&, int, gemm::ParallelForFn, void*);

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return std::uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
double from_bf16(std::uint16_t h) {
  const std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void check(Kernel kernel, i64 batch, i64 m, i64 n, i64 k, int layout, bool exact, int threads, std::mt19937& rng) {
  CAPTURE(batch);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(layout);
  CAPTURE(exact);
  CAPTURE(threads);
  // layout 0: both row-major; 1: A transposed; 2: B transposed; 3: A strided by 2, B's rows broadcast across batches.
  gemm::OperandsBf16 op;
  op.batch = batch, op.m = m, op.n = n, op.k = k;
  op.a_cs = layout == 1 ? m : layout == 3 ? 2 : 1, op.a_rs = layout == 1 ? 1 : layout == 3 ? 2 * k + 1 : k;
  op.b_cs = layout == 2 ? k : 1, op.b_rs = layout == 2 ? 1 : n;
  const i64 a_span = layout == 3 ? m * (2 * k + 1) : m * k, b_span = k * n;
  op.a_bs = a_span, op.b_bs = layout == 3 ? 0 : b_span;
  std::vector<std::uint16_t> a(std::size_t(batch * a_span + 1)), b(std::size_t(batch * b_span + 1));
  std::uniform_real_distribution<float> u(-2, 2);
  for (auto* v : {&a, &b})
    for (auto& x : *v) x = exact ? to_bf16(float(int(rng() % 17) - 8)) : to_bf16(u(rng));
  op.a = a.data(), op.b = b.data();
  const i64 guard = 32, cn = batch * m * n;
  std::vector<float> c(std::size_t(cn + 2 * guard), 7.0f);
  op.c = c.data() + guard;
  const gemm::ParallelFor parallel = [threads](i64 tasks, const std::function<void(i64, i64)>& task) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (i64 i = t; i < tasks; i += threads) task(i, i + 1);
      });
    for (auto& t : ts) t.join();
  };
  kernel(op, threads, gemm::run_parallel, const_cast<gemm::ParallelFor*>(&parallel));
  i64 bad = 0;
  for (i64 bi = 0; bi < batch; ++bi)
    for (i64 i = 0; i < m; ++i)
      for (i64 j = 0; j < n; ++j) {
        double s = 0, mag = 0;
        for (i64 p = 0; p < k; ++p) {
          const double x = from_bf16(a[std::size_t(bi * op.a_bs + i * op.a_rs + p * op.a_cs)]);
          const double y = from_bf16(b[std::size_t(bi * op.b_bs + p * op.b_rs + j * op.b_cs)]);
          s += x * y, mag += std::fabs(x * y);
        }
        const double got = op.c[bi * m * n + i * n + j];
        bad += exact ? got != s : std::fabs(got - s) > 2.0 * double(k) * 0x1p-24 * mag;
      }
  CHECK(bad == 0);
  for (i64 t = 0; t < guard; ++t) CHECK((c[std::size_t(t)] == 7.0f && c[std::size_t(cn + guard + t)] == 7.0f));
}

}  // namespace

TEST_CASE("gemm: bfloat16 products on AMX tiles and vdpbf16ps, exact and rounded, edges, layouts, threads") {
  std::vector<std::pair<const char*, Kernel>> kernels;
  if (host_cpu().has("avx512bf16") && host_cpu().has("avx512bw") && !avx512_disabled()) {
    kernels.push_back({"vdpbf16ps", gemm::matmul_bf16_avx512});
    if (host_cpu().has("amx-tile") && host_cpu().has("amx-bf16") && gemm::amx_bf16_usable())
      kernels.push_back({"amx", gemm::matmul_bf16_amx});
  }
  if (kernels.empty()) MESSAGE("no bfloat16 product kernel runs on this CPU");
  std::mt19937 rng(3);
  for (auto [name, kernel] : kernels) {
    CAPTURE(name);
    for (i64 s : {1, 15, 16, 17, 31, 32, 33, 64, 97}) check(kernel, 1, s, s, s, 0, true, 1, rng);
    for (int layout = 0; layout < 4; ++layout)
      for (bool exact : {true, false}) {
        check(kernel, 2, 45, 70, 33, layout, exact, 3, rng);
        check(kernel, 1, 300, 65, 1100, layout, exact, 2, rng);  // k over two blocks with an odd tail
        check(kernel, 3, 33, 257, 96, layout, exact, 4, rng);
      }
    check(kernel, 1, 5, 7, 0, 0, true, 2, rng);  // k = 0: C zero
  }
}
