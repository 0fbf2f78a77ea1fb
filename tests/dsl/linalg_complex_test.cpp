// ts::linalg on complex64 and complex128 (LAPACK's c and z routines) against
// independent references: residuals (|A x - b|, |L U - P A|, |L L^H - A|,
// |Q R - A| and Q^H Q = I, |A V - V diag(w)|, |U S Vh - A|), closed forms
// (2x2 determinants, Hermitian 2x2 eigenvalues), the reference interpreter
// (textbook algorithms in std::complex<long double>) for the compiled code on
// 1..8 devices, the distributed factorisations against the single-device
// ones, and derivatives (jvp) against central finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <random>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::Array;
using ts::P;
namespace la = tessel::linalg;
using C = std::complex<double>;
using C64 = std::complex<float>;

namespace {

const std::vector<ts::DType> kComplex{ts::complex64, ts::complex128};
double tol_of(ts::DType t) { return t == ts::complex64 ? 3e-5 : 1e-11; }

std::vector<C> host(const Array& a) {
  Array c = a.astype(ts::complex128);
  return c.to_vector<C>();
}
double max_abs(const Array& a) {
  double m = 0;
  for (C v : host(a)) m = std::max(m, std::abs(v));
  return m;
}
// Random complex matrices [batch..., m, n], parts in [-1, 1]; `shift` added on the diagonal.
Array rand_cmat(std::uint32_t seed, ts::Shape s, ts::DType t, double shift = 0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<C> v(size_t(ts::numel(s)));
  for (auto& e : v) e = C(u(rng), u(rng));
  const std::int64_t m = s[s.size() - 2], n = s.back();
  for (std::int64_t b = 0; b < ts::numel(s) / std::max<std::int64_t>(m * n, 1); ++b)
    for (std::int64_t i = 0; i < std::min(m, n); ++i) v[size_t(b * m * n + i * n + i)] += shift;
  return ts::array(v, s).astype(t);
}
// The diagonal of each square matrix: [..., n].
Array diag_of(const Array& x) {
  Array e = ts::broadcast_to(ts::eye(x.shape().back(), std::nullopt, 0, x.dtype()), x.shape());
  return ts::sum(x * e, -1);
}
Array mH(const Array& a) { return ts::conj(ts::swapaxes(a, -1, -2)); }
Array mT(const Array& a) { return ts::swapaxes(a, -1, -2); }
Array eye_b(const Array& like) {
  return ts::broadcast_to(ts::eye(like.shape().back(), std::nullopt, 0, like.dtype()), like.shape());
}
// Hermitian positive definite: B B^H + n I.
Array hpd(std::uint32_t seed, ts::Shape s, ts::DType t) {
  Array b = rand_cmat(seed, s, ts::complex128);
  return (ts::matmul(b, mH(b)) + double(s.back()) * eye_b(b)).astype(t);
}
Array herm(std::uint32_t seed, ts::Shape s, ts::DType t) {
  Array b = rand_cmat(seed, s, ts::complex128);
  return ((b + mH(b)) * 0.5).astype(t);
}
// Each column divided by the phase of its largest entry (eigen- and
// singular vectors are defined up to a unit complex factor per column).
Array phased_cols(const Array& v) {
  Array big = ts::take_along_axis(v, ts::expand_dims(ts::argmax(ts::abs(v), -2), -2), -2);
  return v * ts::conj(big) / ts::abs(big).astype(v.dtype());
}

}  // namespace

TEST_CASE("complex solve, inv, lu_solve (trans 0, 1, 2): residuals for vectors, matrices and batches") {
  for (auto t : kComplex) {
    CAPTURE(ts::dtype_name(t));
    Array a = rand_cmat(1, {5, 5}, t, 2), b = rand_cmat(2, {5, 3}, t), bb = rand_cmat(3, {4, 5, 5}, t, 2);
    Array x = la::solve(a, b);
    CHECK(x.dtype() == t);
    CHECK(max_abs(ts::matmul(a, x) - b) < tol_of(t));
    Array xv = la::solve(a, b.index({ts::all, 0}));
    CHECK(max_abs(ts::matmul(a, xv) - b.index({ts::all, 0})) < tol_of(t));
    Array xb = la::solve(bb, rand_cmat(4, {4, 5, 2}, t));
    CHECK(max_abs(ts::matmul(bb, xb) - rand_cmat(4, {4, 5, 2}, t)) < tol_of(t));
    CHECK(max_abs(ts::matmul(a, la::inv(a)) - eye_b(a)) < tol_of(t));
    auto f = la::lu_factor(a);
    CHECK(max_abs(ts::matmul(a, la::lu_solve(f, b, 0)) - b) < tol_of(t));
    CHECK(max_abs(ts::matmul(mT(a), la::lu_solve(f, b, 1)) - b) < tol_of(t));
    CHECK(max_abs(ts::matmul(mH(a), la::lu_solve(f, b, 2)) - b) < tol_of(t));
    // A real right-hand side with a complex matrix: promoted, not truncated.
    Array xr = la::solve(a, ts::ones({5}, ts::float32));
    CHECK(xr.dtype() == t);
    CHECK(max_abs(ts::matmul(a, xr) - ts::ones({5}, t)) < tol_of(t));
  }
}

TEST_CASE("complex lu: P A = L U with LAPACK's pivots (|re| + |im|), square and rectangular") {
  for (auto t : kComplex)
    for (ts::Shape s : {ts::Shape{4, 4}, ts::Shape{5, 3}, ts::Shape{3, 5}}) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(ts::shape_str(s));
      Array a = rand_cmat(5, s, t);
      auto [lu, piv, perm] = la::lu(a);
      const std::int64_t m = s[0], n = s[1], k = std::min(m, n);
      Array l = ts::tril(lu.index({ts::all, ts::slice(0, k)}), -1) + ts::eye(m, k, 0, t);
      Array u = ts::triu(lu.index({ts::slice(0, k), ts::all}));
      CHECK(max_abs(ts::matmul(l, u) - ts::take(a, perm, 0)) < tol_of(t));
      // Partial pivoting by LAPACK's measure (|re| + |im| of an entry at most the pivot's): |l| <= sqrt(2).
      for (C z : host(ts::tril(lu.index({ts::all, ts::slice(0, k)}), -1))) CHECK(std::abs(z) <= std::sqrt(2.0) + 1e-6);
    }
  // The pivot LAPACK's icamax/izamax picks: the largest |re| + |im|, not the largest |z|. Column
  // [1.3, 0.9 + 0.9j]: |re| + |im| is 1.3 < 1.8 (row 1 wins) though |0.9 + 0.9j| = 1.27 < 1.3.
  for (auto t : kComplex) {
    Array e = ts::array(std::vector<C>{{1.3, 0}, {1, 0}, {0.9, 0.9}, {0, 1}}, {2, 2}).astype(t);
    CHECK(la::lu(e).pivots.to_vector<int>() == std::vector<int>{1, 1});
    Array f = ts::array(std::vector<C>{{1.9, 0}, {1, 0}, {0.9, 0.9}, {0, 1}}, {2, 2}).astype(t);
    CHECK(la::lu(f).pivots.to_vector<int>() == std::vector<int>{0, 1});
  }
}

TEST_CASE("complex det and slogdet: closed forms, sign on the unit circle, singular matrices") {
  for (auto t : kComplex) {
    CAPTURE(ts::dtype_name(t));
    const C p(1, 2), q(-0.5, 1), r(3, -1), s(0.25, 0.75);
    Array a = ts::array(std::vector<C>{p, q, r, s}, {2, 2}).astype(t);
    const C want = p * s - q * r;
    CHECK(std::abs(host(la::det(a))[0] - want) < tol_of(t) * 10);
    auto [sign, logabs] = la::slogdet(a);
    CHECK(logabs.dtype() == ts::real_dtype(t));
    CHECK(std::abs(host(sign)[0] - want / std::abs(want)) < tol_of(t) * 10);
    CHECK(std::fabs(host(logabs)[0].real() - std::log(std::abs(want))) < tol_of(t) * 10);
    // A batch: det(A B) = det A det B.
    Array x = rand_cmat(6, {3, 4, 4}, t, 1), y = rand_cmat(7, {3, 4, 4}, t, 1);
    auto dx = host(la::det(x)), dy = host(la::det(y)), dxy = host(la::det(ts::matmul(x, y)));
    for (size_t i = 0; i < 3; ++i) CHECK(std::abs(dxy[i] - dx[i] * dy[i]) < tol_of(t) * 100 * (1 + std::abs(dxy[i])));
    Array z = ts::array(std::vector<C>{{1, 1}, {2, 2}, {2, 2}, {4, 4}}, {2, 2}).astype(t);
    CHECK(std::abs(host(la::det(z))[0]) < tol_of(t) * 10);
    CHECK(host(la::slogdet(z).sign)[0] == C(0, 0));
    CHECK(std::isinf(host(la::slogdet(z).logabsdet)[0].real()));
  }
}

TEST_CASE("complex cholesky: L L^H = A, upper = L^H, NaN when not positive definite") {
  for (auto t : kComplex) {
    CAPTURE(ts::dtype_name(t));
    Array a = hpd(8, {2, 5, 5}, t);
    Array l = la::cholesky(a);
    CHECK(max_abs(ts::matmul(l, mH(l)) - a) < tol_of(t) * 10);
    CHECK(max_abs(ts::triu(l, 1)) == 0);
    for (C d : host(diag_of(l))) CHECK((d.imag() == 0 && d.real() > 0));
    CHECK(max_abs(la::cholesky(a, true) - mH(l)) < tol_of(t));
    Array bad = ts::array(std::vector<C>{{1, 0}, {2, 1}, {2, -1}, {1, 0}}, {2, 2}).astype(t);
    for (C v : host(la::cholesky(bad))) CHECK(std::isnan(v.real()));
  }
}

TEST_CASE("complex qr: Q R = A, Q^H Q = I, R upper with a real diagonal; reduced, complete; tall and wide") {
  for (auto t : kComplex)
    for (ts::Shape s : {ts::Shape{5, 3}, ts::Shape{3, 5}, ts::Shape{2, 4, 4}})
      for (std::string mode : {"reduced", "complete"}) {
        CAPTURE(ts::dtype_name(t));
        CAPTURE(ts::shape_str(s));
        CAPTURE(mode);
        Array a = rand_cmat(9, s, t);
        auto [q, r] = la::qr(a, mode);
        CHECK(max_abs(ts::matmul(q, r) - a) < tol_of(t) * 10);
        CHECK(max_abs(ts::matmul(mH(q), q) - eye_b(ts::matmul(mH(q), q))) < tol_of(t) * 10);
        CHECK(max_abs(ts::tril(r, -1)) == 0);
        for (C d : host(diag_of(r.index({ts::ellipsis, ts::slice(0, std::min(r.shape()[r.ndim() - 2], r.shape().back())), ts::slice(0, std::min(r.shape()[r.ndim() - 2], r.shape().back()))})))) CHECK(std::fabs(d.imag()) <= tol_of(t));
      }
}

TEST_CASE("complex eigh: real ascending eigenvalues, A V = V diag(w), V unitary; the 2x2 closed form") {
  for (auto t : kComplex)
    for (std::string uplo : {"L", "U"}) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(uplo);
      Array a = herm(10, {3, 6, 6}, t);
      auto [w, v] = la::eigh(a, uplo);
      CHECK(w.dtype() == ts::real_dtype(t));
      CHECK(v.dtype() == t);
      CHECK(max_abs(ts::matmul(a, v) - v * ts::expand_dims(w, -2).astype(t)) < tol_of(t) * 10);
      CHECK(max_abs(ts::matmul(mH(v), v) - eye_b(v)) < tol_of(t) * 10);
      auto wv = w.astype(ts::float64).to_vector<double>();
      for (size_t i = 0; i + 1 < wv.size(); ++i)
        if ((i + 1) % 6) CHECK(wv[i] <= wv[i + 1]);
      // Only one triangle is read: garbage in the other changes nothing.
      Array tri = uplo == "L" ? ts::tril(a) + ts::triu(rand_cmat(11, {3, 6, 6}, t), 1)
                              : ts::triu(a) + ts::tril(rand_cmat(11, {3, 6, 6}, t), -1);
      CHECK(max_abs(la::eigh(tri, uplo, false).eigenvalues - w) < tol_of(t) * 10);
    }
  // [[a, b], [conj b, d]]: (a + d)/2 -+ sqrt(((a - d)/2)^2 + |b|^2).
  Array h = ts::array(std::vector<C>{{2, 0}, {1, -2}, {1, 2}, {-1, 0}}, {2, 2});
  auto w = la::eigvalsh(h).to_vector<double>();
  const double rad = std::sqrt(1.5 * 1.5 + 5);
  CHECK(std::fabs(w[0] - (0.5 - rad)) < 1e-12);
  CHECK(std::fabs(w[1] - (0.5 + rad)) < 1e-12);
}

TEST_CASE("complex svd: U diag(s) Vh = A, real descending s, unitary factors; full and reduced, tall and wide") {
  for (auto t : kComplex)
    for (ts::Shape s : {ts::Shape{5, 3}, ts::Shape{3, 5}, ts::Shape{2, 4, 4}})
      for (bool full : {true, false}) {
        CAPTURE(ts::dtype_name(t));
        CAPTURE(ts::shape_str(s));
        CAPTURE(full);
        Array a = rand_cmat(12, s, t);
        auto [u, sv, vh] = la::svd(a, full);
        CHECK(sv.dtype() == ts::real_dtype(t));
        const std::int64_t k = std::min(s[s.size() - 2], s.back());
        Array uk = u.index({ts::ellipsis, ts::all, ts::slice(0, k)}), vk = vh.index({ts::ellipsis, ts::slice(0, k), ts::all});
        CHECK(max_abs(ts::matmul(uk * ts::expand_dims(sv, -2).astype(t), vk) - a) < tol_of(t) * 10);
        CHECK(max_abs(ts::matmul(mH(u), u) - eye_b(ts::matmul(mH(u), u))) < tol_of(t) * 10);
        CHECK(max_abs(ts::matmul(vh, mH(vh)) - eye_b(ts::matmul(vh, mH(vh)))) < tol_of(t) * 10);
        CHECK(max_abs(la::svdvals(a) - sv) < tol_of(t) * 10);
        // The 2-norm and the nuclear norm from s; Frobenius = sqrt(sum s^2).
        if (s.size() == 2) {
          auto sh = sv.astype(ts::float64).to_vector<double>();
          double fro = 0;
          for (double x : sh) fro += x * x;
          CHECK(std::fabs(la::norm(a, "fro").astype(ts::float64).item<double>() - std::sqrt(fro)) < tol_of(t) * 10);
          CHECK(std::fabs(la::norm(a, 2.0).astype(ts::float64).item<double>() - sh[0]) < tol_of(t) * 10);
        }
      }
}

TEST_CASE("complex triangular_solve: every side, triangle, transpose, conjugate and unit diagonal") {
  for (auto t : kComplex)
    for (int flags = 0; flags < 32; ++flags) {
      la::TriangularSolveOptions o{.left_side = bool(flags & 1), .lower = bool(flags & 2), .transpose_a = bool(flags & 4),
                                   .unit_diagonal = bool(flags & 8), .conjugate_a = bool(flags & 16)};
      CAPTURE(ts::dtype_name(t));
      CAPTURE(flags);
      Array a = rand_cmat(13, {2, 4, 4}, t, 3);
      Array b = o.left_side ? rand_cmat(14, {2, 4, 3}, t) : rand_cmat(14, {2, 3, 4}, t);
      Array tri = o.lower ? ts::tril(a, o.unit_diagonal ? -1 : 0) : ts::triu(a, o.unit_diagonal ? 1 : 0);
      if (o.unit_diagonal) tri = tri + eye_b(a);
      Array op = tri;
      if (o.conjugate_a) op = ts::conj(op);
      if (o.transpose_a) op = mT(op);
      Array x = la::triangular_solve(a, b, o);
      CHECK(max_abs((o.left_side ? ts::matmul(op, x) : ts::matmul(x, op)) - b) < tol_of(t) * 10);
    }
}

TEST_CASE("complex prod: closed forms, sharded along the reduced axis on 1..8 devices (a gathered product)") {
  std::mt19937 rng(15);
  std::uniform_real_distribution<double> u(0.5, 1.5), ph(-3, 3);
  std::vector<C> v(24);
  for (auto& z : v) z = std::polar(u(rng), ph(rng));
  for (auto t : kComplex) {
    Array x = ts::array(v, {24}).astype(t);
    C want = 1;
    for (C z : v) want *= z;
    CHECK(std::abs(host(ts::prod(x))[0] - want) < tol_of(t) * 10 * std::abs(want));
    Array m = x.reshape({4, 6});
    auto rows = host(ts::prod(m, 1));
    for (int i = 0; i < 4; ++i) {
      C w = 1;
      for (int j = 0; j < 6; ++j) w *= v[size_t(i * 6 + j)];
      CHECK(std::abs(rows[size_t(i)] - w) < tol_of(t) * 10);
    }
    CHECK(host(ts::prod(ts::zeros({0}, t)))[0] == C(1, 0));
    const auto all = ts::devices();
    for (int n = 1; n <= 8; ++n) {
      CAPTURE(n);
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
      Array xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
      CHECK(std::abs(host(ts::jit([](const Array& a) { return ts::prod(a); })(xs))[0] - want) <
            tol_of(t) * 10 * std::abs(want));
      ts::testing::check([](const std::vector<Array>& a) { return ts::prod(a[0].reshape({4, 6}), 1); }, {xs}, false);
    }
  }
}

TEST_CASE("complex LAPACK equals the reference interpreter on 1..8 devices, batch split evenly and unevenly") {
  using Fn = std::function<Array(const std::vector<Array>&)>;
  std::vector<std::pair<std::string, Fn>> fns{
      {"solve", [](const std::vector<Array>& x) { return la::solve(x[0], x[1]); }},
      {"lu", [](const std::vector<Array>& x) {
         auto r = la::lu(x[0]);
         return r.lu + r.permutation.astype(x[0].dtype()).reshape({x[0].shape()[0], -1, 1});
       }},
      {"cholesky", [](const std::vector<Array>& x) { return la::cholesky(ts::matmul(x[0], mH(x[0])) + eye_b(x[0]) * 5.0); }},
      {"qr", [](const std::vector<Array>& x) { auto [q, r] = la::qr(x[0]); return ts::matmul(q, r) + q; }},
      {"eigh", [](const std::vector<Array>& x) {
         auto [w, v] = la::eigh(x[0]);
         return phased_cols(v) + ts::expand_dims(w, -2).astype(v.dtype());
       }},
      {"svd", [](const std::vector<Array>& x) {
         auto [u, s, vh] = la::svd(x[0]);
         return phased_cols(u) * ts::expand_dims(s, -2).astype(u.dtype());
       }},
      {"det", [](const std::vector<Array>& x) { return la::det(x[0]); }},
      {"triangular_solve", [](const std::vector<Array>& x) {
         return la::triangular_solve(x[0], x[1], {.left_side = true, .lower = true, .transpose_a = true, .conjugate_a = true});
       }},
  };
  const auto all = ts::devices();
  for (auto t : kComplex)
    for (std::int64_t batch : {8, 5})
      for (int n : {1, 3, 8}) {
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
        Array a = ts::device_put(rand_cmat(16, {batch, 4, 4}, t, 2), ts::NamedSharding(mesh, P("x")));
        Array b = ts::device_put(rand_cmat(17, {batch, 4, 2}, t), ts::NamedSharding(mesh, P("x")));
        for (auto& [name, fn] : fns) {
          CAPTURE(name);
          CAPTURE(n);
          CAPTURE(batch);
          CAPTURE(ts::dtype_name(t));
          ts::testing::check(fn, {a, b}, false);
        }
      }
}

TEST_CASE("complex matrix split by rows or 2-D: distributed lu, solve, cholesky, triangular_solve equal the single-device ones") {
  const auto all = ts::devices();
  for (auto t : kComplex)
    for (int p : {2, 3, 8}) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(p);
      const std::int64_t n = 21;
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + p), {p}, {"x"});
      ts::NamedSharding rows_sh(mesh, P("x", ts::None));
      Array a0 = rand_cmat(18, {n, n}, t, 0.5), s0 = hpd(19, {n, n}, t), b0 = rand_cmat(20, {n, 3}, t);
      auto flu = ts::jit([](const Array& x) {
        auto r = la::lu(x);
        return std::make_tuple(r.lu, r.pivots, r.permutation);
      });
      auto [lu, piv, perm] = flu(ts::device_put(a0, rows_sh));
      auto ref = la::lu(a0);
      CHECK(max_abs(lu - ref.lu) < tol_of(t) * 10);
      CHECK(piv.to_vector<int>() == ref.pivots.to_vector<int>());
      CHECK(perm.to_vector<int>() == ref.permutation.to_vector<int>());
      CHECK(lu.sharding().is_equivalent_to(rows_sh, 2));
      auto fs = ts::jit([](const Array& a, const Array& b) { return la::solve(a, b); });
      CHECK(max_abs(ts::matmul(a0, fs(ts::device_put(a0, rows_sh), b0)) - b0) < tol_of(t) * 10);
      Array L = ts::jit([](const Array& x) { return la::cholesky(x); })(ts::device_put(s0, rows_sh));
      CHECK(max_abs(L - la::cholesky(s0)) < tol_of(t) * 10);
      CHECK(L.sharding().is_equivalent_to(rows_sh, 2));
      for (int flags = 0; flags < 8; ++flags) {
        la::TriangularSolveOptions o{.left_side = true, .lower = bool(flags & 1), .transpose_a = bool(flags & 2),
                                     .conjugate_a = bool(flags & 4)};
        CAPTURE(flags);
        auto ft = ts::jit([o](const Array& a, const Array& b) { return la::triangular_solve(a, b, o); });
        Array want = la::triangular_solve(s0, b0, o);
        CHECK(max_abs(ft(ts::device_put(s0, rows_sh), b0) - want) < tol_of(t) * 10 * (1 + max_abs(want)));
      }
    }
  ts::Mesh mesh2(all, {4, 2}, {"x", "y"});
  ts::NamedSharding two_d(mesh2, P("x", "y"));
  Array a0 = rand_cmat(21, {16, 16}, ts::complex128, 0.5), s0 = hpd(22, {16, 16}, ts::complex128);
  auto [lu, L] = ts::jit([](const Array& a, const Array& s) { return std::make_tuple(la::lu(a).lu, la::cholesky(s, false, false)); })(
      ts::device_put(a0, two_d), ts::device_put(s0, two_d));
  CHECK(max_abs(lu - la::lu(a0).lu) < 1e-10);
  CHECK(max_abs(L - la::cholesky(s0)) < 1e-10);
  CHECK(L.sharding().is_equivalent_to(two_d, 2));
}

namespace {

// jvp(f, x, dx) against (f(x + h dx) - f(x - h dx)) / 2h, in complex128.
void check_jvp(const std::string& what, const std::function<Array(const Array&)>& f, const Array& x, const Array& dx) {
  CAPTURE(what);
  auto [y, dy] = ts::jvp(f, std::make_tuple(x), std::make_tuple(dx));
  const double h = 1e-6;
  Array fd = (f(x + dx * h) - f(x - dx * h)) / (2 * h);
  CHECK(max_abs(dy - fd) < 1e-6 * (1 + max_abs(fd)));
  CHECK(max_abs(y - f(x)) < 1e-12 * (1 + max_abs(y)));
}

}  // namespace

TEST_CASE("derivatives of complex solve, inv, det, slogdet, cholesky, triangular_solve, eigh, qr, svd against finite differences") {
  const auto t = ts::complex128;
  Array a = rand_cmat(23, {4, 4}, t, 2), da = rand_cmat(24, {4, 4}, t), b = rand_cmat(25, {4, 2}, t), db = rand_cmat(26, {4, 2}, t);
  check_jvp("solve wrt a", [=](const Array& x) { return la::solve(x, b); }, a, da);
  check_jvp("solve wrt b", [=](const Array& x) { return la::solve(a, x); }, b, db);
  check_jvp("inv", [](const Array& x) { return la::inv(x); }, a, da);
  check_jvp("det", [](const Array& x) { return la::det(x); }, a, da);
  check_jvp("slogdet", [](const Array& x) { return la::slogdet(x).logabsdet; }, a, da);
  check_jvp("slogdet sign", [](const Array& x) { return la::slogdet(x).sign; }, a, da);
  check_jvp("lu", [](const Array& x) { return la::lu(x).lu; }, a, da);
  Array s = hpd(27, {4, 4}, t), ds = herm(28, {4, 4}, t);
  check_jvp("cholesky (a Hermitian direction)", [](const Array& x) { return la::cholesky(x); }, s, ds);
  for (int flags = 0; flags < 8; ++flags)
    check_jvp("triangular_solve wrt a, flags " + std::to_string(flags), [=](const Array& x) {
      return la::triangular_solve(x, b, {.left_side = true, .lower = bool(flags & 1), .transpose_a = bool(flags & 2),
                                         .conjugate_a = bool(flags & 4)});
    }, a, da);
  Array h = herm(29, {4, 4}, t), dh = herm(30, {4, 4}, t);
  check_jvp("eigh values", [](const Array& x) { return la::eigh(x).eigenvalues; }, h, dh);
  // Functions of the vectors that do not depend on their phases: |v|^2 and the projector v v^H.
  check_jvp("eigh vectors", [](const Array& x) {
    auto v = la::eigh(x).eigenvectors;
    return ts::matmul(v * ts::array(std::vector<C>{1, 2, 3, 4}, {1, 4}), mH(v));
  }, h, dh);
  Array q0 = rand_cmat(31, {5, 3}, t, 1), dq = rand_cmat(32, {5, 3}, t);
  check_jvp("qr", [](const Array& x) {
    auto [q, r] = la::qr(x);
    return ts::concatenate({q.reshape({-1}), r.reshape({-1})}, 0);
  }, q0, dq);
  for (ts::Shape shp : {ts::Shape{4, 4}, ts::Shape{5, 3}, ts::Shape{3, 5}}) {
    Array m0 = rand_cmat(33, shp, t, 1), dm = rand_cmat(34, shp, t);
    check_jvp("svd values " + ts::shape_str(shp), [](const Array& x) { return la::svdvals(x); }, m0, dm);
    check_jvp("svd vectors " + ts::shape_str(shp), [](const Array& x) {
      auto [u, sv, vh] = la::svd(x, false);
      const std::int64_t k = sv.shape()[0];
      Array w = ts::arange(1.0, double(k) + 1).astype(ts::complex128).reshape({1, k});
      return ts::concatenate({ts::matmul(u * w, mH(u)).reshape({-1}), ts::matmul(mH(vh) * w, vh).reshape({-1})}, 0);
    }, m0, dm);
  }
  // grad of a real function of a complex matrix, JAX's convention (grad |z|^2 = 2 conj(z)): the
  // change along any direction dA is Re(sum(g * dA)). f(A) = Re(det A) through lu.
  auto f = [](const Array& x) { return ts::real(la::det(x)); };
  Array g = ts::grad(f)(a);
  Array dfd = (f(a + da * 1e-6) - f(a - da * 1e-6)) / 2e-6;
  const double lin = ts::real(ts::sum(g * da)).item<double>();
  CHECK(std::fabs(lin - dfd.item<double>()) < 1e-6 * (1 + std::fabs(lin)));
}

// Debian's serial OpenBLAS shares its work buffers between threads unguarded;
// devices that called it at once got wrong factors now and then (a complex
// solve on 8 devices was off by 5 in one CI run). Every call takes
// codegen's blas_lock: the same batch factorised on 8 devices at once, many
// times, gives the one-device bits every time.
bool bits_differ(const Array& x, const Array& y) {
  auto bytes = [](const Array& v) {
    std::vector<std::complex<double>> c = v.astype(ts::complex128).to_vector<std::complex<double>>();
    std::vector<unsigned char> b(c.size() * sizeof(c[0]));
    std::memcpy(b.data(), c.data(), b.size());
    return b;
  };
  return x.dtype() != y.dtype() || x.shape() != y.shape() || bytes(x) != bytes(y);
}

TEST_CASE("LAPACK on every device at once gives the one-device bits (the library is not thread-safe: calls take turns)") {
  const auto all = ts::devices();
  ts::Mesh one(std::vector<ts::Device>(all.begin(), all.begin() + 1), {1}, {"x"});
  ts::Mesh eight(all, {std::int64_t(all.size())}, {"x"});
  for (auto t : {ts::complex128, ts::float64}) {
    CAPTURE(ts::dtype_name(t));
    Array a = rand_cmat(51, {64, 21, 21}, ts::complex128).astype(t);
    auto f = ts::jit([](const Array& x) { return la::lu(x).lu + la::inv(x); });
    const Array want = f(ts::device_put(a, ts::NamedSharding(one, P("x"))));
    const Array a8 = ts::device_put(a, ts::NamedSharding(eight, P("x")));
    int differing = 0;
    for (int rep = 0; rep < 30; ++rep) differing += bits_differ(f(a8), want) ? 1 : 0;
    CHECK(differing == 0);
  }
}
