// The single-device lu of large real matrices runs blocked (tessel's GEMM
// for the trailing updates, LAPACK's getrf for the panels:
// codegen/lapack_blocked.cpp). Checked against the reference interpreter
// (partial pivoting in long double), by P A = L U, and bit for bit between
// one thread and several.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

#include <tessel/tessel.hpp>

#include "codegen/lapack_blocked.hpp"
#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::Array;
namespace la = tessel::linalg;

namespace {

Array rand_mat(std::uint32_t seed, ts::Shape s, ts::DType t) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(size_t(ts::numel(s)));
  for (auto& e : v) e = u(rng);
  return ts::array(v, s).astype(t);
}
double max_abs(const Array& a) { return ts::max(ts::abs(a.astype(ts::float64))).item<double>(); }

// L (m x k unit lower) U (k x n upper) minus the rows of a in perm's order, for one matrix.
double residual(const Array& a, const Array& lu, const Array& perm) {
  const std::int64_t m = a.shape()[0], n = a.shape()[1], k = std::min(m, n);
  const ts::DType t = ts::float64;
  Array f = lu.astype(t);
  Array l = ts::tril(f, -1).index({ts::all, ts::slice(0, k)}) + ts::eye(m, k, 0, t);
  Array u = ts::triu(f).index({ts::slice(0, k), ts::all});
  return max_abs(ts::matmul(l, u) - ts::take(a.astype(t), perm, 0));
}

using tessel::codegen::gemm::ParallelFor;
// Tasks run in order on this thread, or on four threads each taking every
// fourth task from the last, so that tasks finish out of order.
const ParallelFor kSerial = [](std::int64_t len, const std::function<void(std::int64_t, std::int64_t)>& task) { task(0, len); };
const ParallelFor kFourThreads = [](std::int64_t len, const std::function<void(std::int64_t, std::int64_t)>& task) {
  std::vector<std::thread> ts_;
  for (int q = 0; q < 4; ++q)
    ts_.emplace_back([&, q] {
      for (std::int64_t t = len - 1 - q; t >= 0; t -= 4) task(t, t + 1);
    });
  for (auto& th : ts_) th.join();
};

}  // namespace

TEST_CASE("a large lu runs blocked: the reference interpreter's pivots and factors, square, tall, wide and batched") {
  auto lu3 = [](const std::vector<Array>& x) {
    auto r = la::lu(x[0]);
    return std::vector<Array>{r.lu, r.pivots, r.permutation};
  };
  for (auto t : {ts::float32, ts::float64})
    for (ts::Shape s : {ts::Shape{300, 300}, ts::Shape{520, 300}, ts::Shape{300, 520}, ts::Shape{2, 260, 270}}) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(ts::shape_str(s));
      Array a = rand_mat(7, s, t);
      auto f = ts::jit([&](const Array& x) {
        auto r = lu3({x});
        return std::make_tuple(r[0], r[1], r[2]);
      });
      CHECK(f.lower(a).compile().as_text().find("blocked with tessel's GEMM") != std::string::npos);
      auto [lu, piv, perm] = f(a);
      auto want = ts::testing::interpret_fn(lu3, {a});
      // Random matrices have no near ties among pivots: the same rows, exactly.
      CHECK(ts::testing::same_bits(ts::testing::host_of(piv), want[1]) == "");
      CHECK(ts::testing::same_bits(ts::testing::host_of(perm), want[2]) == "");
      const double tol = t == ts::float32 ? 2e-3 : 1e-11;
      CHECK(ts::testing::compare_arrays(ts::testing::host_of(lu), want[0], tol, tol) == "");
      if (s.size() == 2) {
        CHECK(residual(a, lu, perm) < (t == ts::float32 ? 1e-4 : 1e-12));
        CHECK(max_abs(ts::tril(lu, -1)) <= 1.0);
      }
    }
}

TEST_CASE("blocked lu: a singular matrix gives a valid factorisation; small ones stay on LAPACK's getrf") {
  const std::int64_t n = 300;
  Array a0 = rand_mat(8, {n, n}, ts::float64);
  Array a = ts::concatenate({a0.index({ts::all, ts::slice(0, 130)}), a0.index({ts::all, ts::slice(0, n - 130)})}, 1);
  auto r = la::lu(a);
  CHECK(residual(a, r.lu, r.permutation) < 1e-12);
  CHECK(max_abs(ts::tril(r.lu, -1)) <= 1.0);
  // Past column 130 the columns repeat: U's diagonal is a rounding error there.
  CHECK(std::fabs(ts::diagonal(r.lu).index({ts::slice(200, 300)}).astype(ts::float64).to_vector<double>()[50]) < 1e-10);
  auto f = ts::jit([](const Array& x) { return la::lu(x).lu; });
  CHECK(f.lower(rand_mat(9, {255, 400}, ts::float32)).compile().as_text().find("blocked") == std::string::npos);
}

TEST_CASE("blocked lu: the same bits on one thread and on four, whatever the tasks' order") {
  for (std::int64_t m : {384, 700})
    for (std::int64_t n : {700, 384}) {
      CAPTURE(m);
      CAPTURE(n);
      REQUIRE(tessel::codegen::lu_runs_blocked(m, n));
      std::mt19937 rng(unsigned(m * 7 + n));
      std::uniform_real_distribution<double> u(-1, 1);
      std::vector<float> a(size_t(m * n));
      for (auto& e : a) e = float(u(rng));
      std::vector<float> one = a, four = a, work(size_t(m * n));
      std::vector<std::int32_t> p1(size_t(std::min(m, n))), p4 = p1;
      tessel::codegen::blocked_lu(one.data(), m, n, p1.data(), work.data(), 1, kSerial);
      tessel::codegen::blocked_lu(four.data(), m, n, p4.data(), work.data(), 4, kFourThreads);
      CHECK(p1 == p4);
      CHECK(std::memcmp(one.data(), four.data(), one.size() * sizeof(float)) == 0);
    }
}

TEST_CASE("a left-side triangular solve with many right-hand sides runs blocked: equal to the reference interpreter") {
  for (auto t : {ts::float32, ts::float64})
    for (int flags = 0; flags < 8; ++flags) {
      la::TriangularSolveOptions o{.left_side = true, .lower = bool(flags & 1), .transpose_a = bool(flags & 2),
                                   .unit_diagonal = bool(flags & 4)};
      CAPTURE(ts::dtype_name(t));
      CAPTURE(flags);
      const std::int64_t n = 130, k = 100;  // blocks of 32 rows and a partial one; column blocks of 64 and 36
      // A well-conditioned triangle: a dominant diagonal (read unless unit), small entries elsewhere.
      Array a = (rand_mat(10, {n, n}, ts::float64) * 0.1 + 2.0 * ts::eye(n, std::nullopt, 0, ts::float64)).astype(t);
      Array b = rand_mat(11, {n, k}, t);
      auto fn = [o](const std::vector<Array>& x) { return std::vector<Array>{la::triangular_solve(x[0], x[1], o)}; };
      auto f = ts::jit([o](const Array& x, const Array& y) { return la::triangular_solve(x, y, o); });
      CHECK(f.lower(a, b).compile().as_text().find("blocked with tessel's GEMM") != std::string::npos);
      Array x = f(a, b);
      auto want = ts::testing::interpret_fn(fn, {a, b});
      const double tol = t == ts::float32 ? 1e-4 : 1e-12;
      CHECK(ts::testing::compare_arrays(ts::testing::host_of(x), want[0], tol, tol) == "");
    }
  // inv and solve with as many right-hand sides as rows: A X = I and A X = B.
  for (auto t : {ts::float32, ts::float64}) {
    const std::int64_t n = 300;
    Array a = rand_mat(12, {n, n}, t);
    Array ai = la::inv(a);
    const double tol = t == ts::float32 ? 2e-3 : 1e-10;
    CHECK(max_abs(ts::matmul(a.astype(ts::float64), ai.astype(ts::float64)) - ts::eye(n, std::nullopt, 0, ts::float64)) < tol);
    Array b = rand_mat(13, {n, 200}, t);
    CHECK(max_abs(ts::matmul(a.astype(ts::float64), la::solve(a, b).astype(ts::float64)) - b.astype(ts::float64)) < tol);
  }
}

TEST_CASE("a forward substitution skips right-hand sides' leading zero rows: the reference interpreter's solution, zeros and NaNs") {
  const std::int64_t n = 300, k = 300;
  // Right-hand sides with leading zero rows: a permuted identity (inv's), and
  // random columns, each zero above a random row (some all zero).
  std::mt19937 rng(21);
  std::vector<std::int64_t> perm(static_cast<size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) perm[size_t(j)] = j;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<double> pid(size_t(n * k), 0.0), lead(size_t(n * k), 0.0);
  std::vector<std::int64_t> first(static_cast<size_t>(k));
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<std::int64_t> row(0, n + 20);
  for (std::int64_t j = 0; j < k; ++j) {
    pid[size_t(perm[size_t(j)] * k + j)] = 1.0;
    first[size_t(j)] = std::min(n, row(rng));
    for (std::int64_t i = first[size_t(j)]; i < n; ++i) lead[size_t(i * k + j)] = u(rng);
  }
  for (auto t : {ts::float32, ts::float64})
    for (int flags : {1, 5, 2, 6}) {  // lower, unit lower, upper transposed, unit upper transposed: all forward
      la::TriangularSolveOptions o{.left_side = true, .lower = bool(flags & 1), .transpose_a = bool(flags & 2),
                                   .unit_diagonal = bool(flags & 4)};
      CAPTURE(ts::dtype_name(t));
      CAPTURE(flags);
      Array a = (rand_mat(22, {n, n}, ts::float64) * 0.1 + 2.0 * ts::eye(n, std::nullopt, 0, ts::float64)).astype(t);
      auto fn = [o](const std::vector<Array>& x) { return std::vector<Array>{la::triangular_solve(x[0], x[1], o)}; };
      auto f = ts::jit([o](const Array& x, const Array& y) { return la::triangular_solve(x, y, o); });
      const double tol = t == ts::float32 ? 1e-4 : 1e-12;
      for (const auto* rhs : {&pid, &lead}) {
        Array b = ts::array(*rhs, {n, k}).astype(t);
        CHECK(f.lower(a, b).compile().as_text().find("blocked with tessel's GEMM") != std::string::npos);
        const Array x = f(a, b);
        CHECK(ts::testing::compare_arrays(ts::testing::host_of(x), ts::testing::interpret_fn(fn, {a, b})[0], tol, tol) == "");
        // Rows above a column's first nonzero are exactly zero.
        const auto xv = x.astype(ts::float64).to_vector<double>();
        bool zeros = true;
        for (std::int64_t j = 0; j < k; ++j)
          for (std::int64_t i = 0; i < (rhs == &pid ? perm[size_t(j)] : first[size_t(j)]); ++i) zeros = zeros && xv[size_t(i * k + j)] == 0.0;
        CHECK(zeros);
      }
      // A non-finite entry of the triangle below a skipped row, or a zero
      // diagonal: the full substitution's NaNs (inf * 0, 0 / 0), as the interpreter's.
      for (int bad = 0; bad < 2; ++bad) {
        std::vector<double> av = a.astype(ts::float64).to_vector<double>();
        if (bad == 0) av[size_t(o.transpose_a ? 10 * n + 250 : 250 * n + 10)] = INFINITY;
        else av[size_t(40 * n + 40)] = 0.0;
        Array ab = ts::array(av, {n, n}).astype(t);
        Array b = ts::array(pid, {n, k}).astype(t);
        const auto want = ts::testing::interpret_fn(fn, {ab, b})[0];
        CHECK(ts::testing::compare_arrays(ts::testing::host_of(f(ab, b)), want, tol, tol) == "");
      }
    }
}

TEST_CASE("a large cholesky runs blocked: the reference interpreter's factor, NaN when not positive definite, the same bits on any thread count") {
  for (auto t : {ts::float32, ts::float64})
    for (std::int64_t n : {300, 520}) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(n);
      Array g = rand_mat(14, {n, n}, ts::float64);
      Array s = (ts::matmul(g, g.T()) / double(n) + ts::eye(n, std::nullopt, 0, ts::float64)).astype(t);
      auto fn = [](const std::vector<Array>& x) { return std::vector<Array>{la::cholesky(x[0], false, false)}; };
      auto f = ts::jit([](const Array& x) { return la::cholesky(x, false, false); });
      CHECK(f.lower(s).compile().as_text().find("blocked with tessel's GEMM") != std::string::npos);
      Array l = f(s);
      auto want = ts::testing::interpret_fn(fn, {s});
      const double tol = t == ts::float32 ? 1e-5 : 1e-13;
      CHECK(ts::testing::compare_arrays(ts::testing::host_of(l), want[0], tol, tol) == "");
      CHECK(max_abs(ts::triu(l, 1)) == 0);
      // Not positive definite past the first panel: NaN everywhere, as LAPACK's path.
      Array bad = s - 3.0 * ts::eye(n, std::nullopt, 0, t) * (ts::arange(n) >= 200).astype(t);
      CHECK(ts::all(ts::isnan(f(bad))).item<bool>());
    }
  const std::int64_t n = 450;
  std::mt19937 rng(3);
  std::normal_distribution<double> u;
  std::vector<double> g(size_t(n * n)), a(size_t(n * n));
  for (auto& e : g) e = u(rng);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double v = i == j ? double(n) : 0;
      for (std::int64_t k = 0; k < n; ++k) v += g[size_t(i * n + k)] * g[size_t(j * n + k)] / double(n);
      a[size_t(i * n + j)] = v;
    }
  std::vector<double> one = a, four = a;
  CHECK(tessel::codegen::blocked_cholesky(one.data(), n, 1, kSerial) == 0);
  CHECK(tessel::codegen::blocked_cholesky(four.data(), n, 4, kFourThreads) == 0);
  CHECK(std::memcmp(one.data(), four.data(), one.size() * sizeof(double)) == 0);
}
