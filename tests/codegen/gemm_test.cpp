// tessel's matrix-product kernels (codegen/gemm.hpp) against a float64 loop:
// every ISA this CPU runs, float32 and float64, shapes around the register
// tile's and the packed blocks' edges, operands at row-major, transposed and
// general strides, batches, and cut into tasks run on several threads.
#include "codegen/gemm.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "codegen/host.hpp"

using namespace tessel::codegen;
using gemm::Isa;

namespace tessel::codegen::gemm {
// tests/codegen/gemm_avx512_tiling.cpp
void matmul_avx512_tiling_on_avx2(const Operands<float>& op, int threads, ParallelForFn parallel, void* ctx);
void matmul_avx512_tiling_on_avx2(const Operands<double>& op, int threads, ParallelForFn parallel, void* ctx);
}  // namespace tessel::codegen::gemm

namespace {

// Runs tasks on `threads` std::threads in interleaved chunks of one.
gemm::ParallelFor threads_for(int threads) {
  return [threads](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)>& task) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (std::int64_t i = t; i < n; i += threads) task(i, i + 1);
      });
    for (auto& t : ts) t.join();
  };
}

// The kernels to test: every ISA this CPU runs, and the AVX-512 tiling
// compiled for AVX2 (as `kernel` -1) where AVX2 runs.
constexpr int kAvx512TilingOnAvx2 = -1;
std::vector<int> kernels() {
  std::vector<int> v{int(Isa::sse2)};
  if (host_cpu().has("avx2") && host_cpu().has("fma")) v.push_back(int(Isa::avx2)), v.push_back(kAvx512TilingOnAvx2);
  if (host_cpu().has("avx512f")) v.push_back(int(Isa::avx512));
  return v;
}
const char* kernel_name(int kernel) {
  return kernel == kAvx512TilingOnAvx2 ? "avx512 tiling on avx2" : gemm::isa_name(Isa(kernel));
}

template <class T>
void run(int kernel, const gemm::Operands<T>& op, int threads) {
  const gemm::ParallelFor parallel = threads_for(threads);
  if (kernel != kAvx512TilingOnAvx2) return gemm::matmul(op, threads, parallel, Isa(kernel));
  gemm::matmul_avx512_tiling_on_avx2(op, threads, gemm::run_parallel, const_cast<gemm::ParallelFor*>(&parallel));
}

enum class Layout { row_major, transposed, strided };

template <class T>
void check_product(int kernel, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, Layout la, Layout lb,
                   int threads) {
  CAPTURE(kernel_name(kernel));
  CAPTURE(batch);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(int(la));
  CAPTURE(int(lb));
  CAPTURE(threads);
  std::mt19937 rng(unsigned(m * 131 + n * 17 + k));
  std::uniform_real_distribution<double> dist(-1, 1);
  // A logical [batch, m, k], B [batch, k, n]; stored per layout, with a gap
  // between rows for `strided` (and every element two apart).
  auto strides = [](Layout l, std::int64_t rows, std::int64_t cols, std::int64_t& rs, std::int64_t& cs,
                    std::int64_t& bs) {
    switch (l) {
      case Layout::row_major: rs = cols, cs = 1; break;
      case Layout::transposed: rs = 1, cs = rows; break;
      case Layout::strided: rs = 2 * cols + 3, cs = 2; break;
    }
    bs = (l == Layout::strided ? rows * (2 * cols + 3) : rows * cols) + 5;
  };
  gemm::Operands<T> op;
  op.batch = batch, op.m = m, op.n = n, op.k = k;
  strides(la, m, k, op.a_rs, op.a_cs, op.a_bs);
  strides(lb, k, n, op.b_rs, op.b_cs, op.b_bs);
  std::vector<T> a(std::size_t(batch * op.a_bs + 1)), b(std::size_t(batch * op.b_bs + 1));
  for (auto& x : a) x = T(dist(rng));
  for (auto& x : b) x = T(dist(rng));
  std::vector<T> c(std::size_t(batch * m * n + 1),
                   T(12345));  // the sentinel past the end must survive
  op.a = a.data(), op.b = b.data(), op.c = c.data();
  run(kernel, op, threads);
  const double eps = sizeof(T) == 4 ? 1e-5 : 1e-13;
  long bad = 0;
  for (std::int64_t bi = 0; bi < batch; ++bi)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double want = 0, mag = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double x = double(a[std::size_t(bi * op.a_bs + i * op.a_rs + p * op.a_cs)]) *
                           double(b[std::size_t(bi * op.b_bs + p * op.b_rs + j * op.b_cs)]);
          want += x, mag += std::fabs(x);
        }
        const double got = double(c[std::size_t((bi * m + i) * n + j)]);
        if (!(std::fabs(got - want) <= eps * (mag + 1) * 4)) {
          if (bad++ < 3) FAIL_CHECK("C[" << bi << "," << i << "," << j << "] = " << got << ", want " << want);
        }
      }
  CHECK(bad == 0);
  CHECK(c.back() == T(12345));
}

}  // namespace

TEST_CASE(
    "gemm: shapes around the tile and block edges, every ISA, float32 "
    "and float64") {
  for (int isa : kernels())
    for (std::int64_t m : {1, 5, 6, 7, 12, 13, 37})
      for (std::int64_t n : {1, 8, 15, 16, 17, 33, 70})
        for (std::int64_t k : {1, 3, 191, 193, 255, 257, 383, 385, 511, 513, 769, 1025}) {  // KC: 192, 256, 384, 512
          check_product<float>(isa, 1, m, n, k, Layout::row_major, Layout::row_major, 1);
          if (k >= 191) check_product<double>(isa, 1, m, n, k, Layout::row_major, Layout::row_major, 1);
        }
  // Rows around the A blocks (MC: 480, 240 and 120 rows for float32, 240, 120 and 60 for float64).
  for (int isa : kernels())
    for (std::int64_t m : {59, 61, 119, 121, 239, 241, 481})
      for (std::int64_t k : {3, 513}) {
        check_product<float>(isa, 1, m, 17, k, Layout::row_major, Layout::row_major, 1);
        check_product<double>(isa, 1, m, 17, k, Layout::row_major, Layout::row_major, 1);
      }
}

TEST_CASE("gemm: transposed and strided operands, batches, several threads") {
  for (int isa : kernels())
    for (Layout la : {Layout::row_major, Layout::transposed, Layout::strided})
      for (Layout lb : {Layout::row_major, Layout::transposed, Layout::strided}) {
        check_product<float>(isa, 1, 29, 45, 300, la, lb, 1);
        check_product<float>(isa, 3, 29, 45, 300, la, lb, 3);
        check_product<double>(isa, 2, 17, 35, 70, la, lb, 2);
      }
}

TEST_CASE("gemm: more rows than a packed block, more columns than a panel, K = 0") {
  for (int isa : kernels()) {
    check_product<float>(isa, 1, 600, 40, 20, Layout::row_major, Layout::row_major, 4);
    check_product<float>(isa, 1, 600, 40, 20, Layout::transposed, Layout::row_major, 1);
    check_product<float>(isa, 1, 3, 2100, 20, Layout::row_major, Layout::transposed, 1);
    check_product<double>(isa, 1, 400, 1100, 9, Layout::row_major, Layout::row_major, 3);
    check_product<float>(isa, 2, 7, 9, 0, Layout::row_major, Layout::row_major, 2);
  }
}

namespace {
// An integer product against a plain loop, exactly: wrapping arithmetic in
// the unsigned type (int32 and int64 dots run as uint32 and uint64).
template <class U>
void check_integer_product(Isa isa, std::int64_t m, std::int64_t n, std::int64_t k, bool b_transposed, int threads,
                           std::mt19937_64& rng) {
  std::vector<U> a(std::size_t(m * k)), b(std::size_t(k * n)), c(std::size_t(m * n), U(7)), want(std::size_t(m * n));
  for (auto& x : a) x = U(rng());
  for (auto& x : b) x = U(rng());
  gemm::Operands<U> op;
  op.m = m, op.n = n, op.k = k;
  op.a = a.data(), op.a_rs = k, op.a_cs = 1;
  op.b = b.data();
  if (b_transposed) op.b_rs = 1, op.b_cs = k;  // b holds B^T: element (p, j) at j * k + p
  else op.b_rs = n, op.b_cs = 1;
  op.c = c.data();
  gemm::matmul(op, threads, threads_for(threads), isa);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      U s = 0;
      for (std::int64_t p = 0; p < k; ++p) s = U(s + a[std::size_t(i * k + p)] * b[std::size_t(p * op.b_rs + j * op.b_cs)]);
      want[std::size_t(i * n + j)] = s;
    }
  CHECK(c == want);
}
}  // namespace

TEST_CASE("gemm: int32 and int64 products wrap around exactly, every ISA, edges and threads") {
  std::mt19937_64 rng(77);
  for (int kernel : kernels()) {
    if (kernel == kAvx512TilingOnAvx2) continue;
    CAPTURE(kernel_name(kernel));
    for (const std::array<std::int64_t, 3>& s : std::vector<std::array<std::int64_t, 3>>{
             {1, 1, 1}, {13, 33, 7}, {37, 70, 513}, {241, 17, 3}, {64, 64, 1025}})
      for (bool bt : {false, true}) {
        const std::int64_t m = s[0], n = s[1], k = s[2];
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        CAPTURE(bt);
        check_integer_product<std::uint32_t>(Isa(kernel), m, n, k, bt, 3, rng);
        check_integer_product<std::uint64_t>(Isa(kernel), m, n, k, bt, 1, rng);
      }
  }
}
