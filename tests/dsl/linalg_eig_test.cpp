// linalg::eig and eigvals (LAPACK's ?geev), and the polynomial functions
// built on them (roots, poly of a matrix): residuals A V = V diag(w),
// closed-form eigenvalues, the reference interpreter's own QR iteration on
// 1..8 devices (compared where the order and phase of the results do not
// matter), and the eigenvalues' derivative against closed forms.
#include <doctest/doctest.h>

#include <algorithm>
#include <complex>
#include <random>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
namespace la = ts::linalg;
using ts::Array;
using ts::P;
using cd = std::complex<double>;

namespace {

Array rand_mat(std::uint32_t seed, ts::Shape s, ts::DType t) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> re(size_t(ts::numel(s))), im(re.size());
  for (auto& e : re) e = u(rng);
  for (auto& e : im) e = u(rng);
  if (ts::is_complex(t)) return ts::complex(ts::array(re, s), ts::array(im, s)).astype(t);
  return ts::array(re, s).astype(t);
}
std::vector<cd> values(const Array& a) { return a.astype(ts::complex128).to_vector<cd>(); }
// Sorted by real part, then imaginary (a set of eigenvalues in a fixed order).
std::vector<cd> sorted(std::vector<cd> v) {
  std::sort(v.begin(), v.end(), [](cd x, cd y) { return x.real() != y.real() ? x.real() < y.real() : x.imag() < y.imag(); });
  return v;
}
double tol_of(ts::DType t) { return t == ts::float32 || t == ts::complex64 ? 2e-4 : 1e-11; }

}  // namespace

TEST_CASE("eig: A V = V diag(w) with unit columns, float32/64 and complex64/128, batches and sizes 0..9") {
  for (auto t : {ts::float32, ts::float64, ts::complex64, ts::complex128}) {
    for (std::int64_t n : {0, 1, 2, 3, 5, 9}) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(n);
      Array a = rand_mat(std::uint32_t(7 + n), {3, n, n}, t);
      auto [w, v] = la::eig(a);
      CHECK(w.dtype() == ts::complex_dtype(ts::real_dtype(t)));
      CHECK(w.shape() == ts::Shape{3, n});
      CHECK(v.shape() == ts::Shape{3, n, n});
      if (n == 0) continue;
      Array ac = a.astype(w.dtype());
      const double scale = ts::max(ts::abs(ac)).astype(ts::float64).item<double>();
      Array res = ts::matmul(ac, v) - v * ts::expand_dims(w, -2);
      CHECK(ts::max(ts::abs(res)).astype(ts::float64).item<double>() <= tol_of(t) * scale * double(n));
      Array norms = ts::sqrt(ts::sum(ts::square(ts::abs(v)), -2));
      CHECK(ts::max(ts::abs(norms - 1.0)).astype(ts::float64).item<double>() <= tol_of(t));
      // eigvals gives the same values, in the same order.
      CHECK(values(la::eigvals(a)) == values(w));
    }
  }
}

TEST_CASE("eig: eigenvalues of matrices with closed forms") {
  auto close_sets = [](const Array& w, std::vector<cd> want) {
    auto got = sorted(values(w));
    want = sorted(want);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) < 1e-12);
  };
  // A rotation: +-i.
  close_sets(la::eigvals(ts::array(std::vector<double>{0, -1, 1, 0}, {2, 2})), {{0, 1}, {0, -1}});
  // The cyclic permutation: the cube roots of unity.
  const double h = std::sqrt(3.0) / 2;
  close_sets(la::eigvals(ts::array(std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0}, {3, 3})), {{1, 0}, {-0.5, h}, {-0.5, -h}});
  // Triangular: its diagonal.
  close_sets(la::eigvals(ts::array(std::vector<double>{2, 5, -1, 0, -3, 4, 0, 0, 0.5}, {3, 3})), {{2, 0}, {-3, 0}, {0.5, 0}});
  // A complex diagonal.
  close_sets(la::eigvals(ts::array(std::vector<cd>{{1, 2}, 0, 0, {-3, 0.5}}, {2, 2})), {{1, 2}, {-3, 0.5}});
}

TEST_CASE("eig on 1..8 devices, the batch split evenly and unevenly, equals the reference interpreter's QR iteration") {
  // Compared where order and phase do not matter: the sorted eigenvalues,
  // and V V^H summed over every column (each v v^H is phase-free).
  auto fn = [](const std::vector<Array>& x) {
    auto [w, v] = la::eig(x[0]);
    Array vvh = ts::matmul(v, ts::conj(ts::swapaxes(v, -1, -2)));
    Array ws = ts::sort_complex(w.reshape({-1})).reshape(w.shape());
    return ts::concatenate({vvh, ts::expand_dims(ws, -2)}, -2);
  };
  const auto all = ts::devices();
  for (auto t : {ts::float64, ts::complex128})
    for (int n : {1, 3, 8}) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(n);
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
      // Each matrix is sorted on its own: one matrix per batch entry, 1 x 4 x 4.
      for (std::int64_t batch : {8, 5}) {
        Array a = ts::device_put(rand_mat(21, {batch, 4, 4}, t), ts::NamedSharding(mesh, P("x")));
        ts::testing::check([&](const std::vector<Array>& x) {
          std::vector<Array> per;
          for (std::int64_t b = 0; b < batch; ++b) per.push_back(fn({x[0][b]}));
          return ts::stack(per);
        }, {a}, false);
      }
    }
}

TEST_CASE("eigvals' derivative: sum(w^3) = trace(A^3), whose gradient is 3 (A^2)^T; eigenvectors have none (JAX's)") {
  Array a = rand_mat(5, {4, 4}, ts::float64);
  auto loss = [](const Array& x) { return ts::real(ts::sum(ts::power(la::eigvals(x), 3))); };
  Array want = 3.0 * ts::swapaxes(ts::matmul(a, a), 0, 1);
  for (const Array& g : {ts::grad(loss)(a), ts::jit(ts::grad(loss))(a)}) {
    CHECK(ts::max(ts::abs(g - want)).item<double>() < 1e-9);
  }
  // The value itself: trace(A^3).
  CHECK(loss(a).item<double>() == doctest::Approx(ts::trace(ts::matmul(a, ts::matmul(a, a))).item<double>()).epsilon(1e-12));
  CHECK_THROWS_AS(ts::grad([](const Array& x) { return ts::real(ts::sum(la::eig(x).eigenvectors)); })(a),
                  ts::NotImplementedError);
  CHECK_THROWS_AS(la::eig(a, true), ts::NotImplementedError);
  CHECK_THROWS_AS(la::eig(ts::ones({2, 3})), ts::ShapeError);
  CHECK_THROWS_AS(la::eigvals(ts::ones({3})), ts::ShapeError);
  // Integers are computed as float32 (JAX's promotion), complex64 results.
  CHECK(la::eigvals(ts::array(std::vector<int>{2, 0, 0, 3}, {2, 2})).dtype() == ts::complex64);
}

TEST_CASE("roots and poly of a matrix: the companion matrix's and the characteristic polynomial, against closed forms") {
  auto close_sets = [](const Array& w, std::vector<cd> want, double tol) {
    auto got = sorted(values(w));
    want = sorted(want);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) < tol);
  };
  // (x - 1)(x - 2)(x - 3) = x^3 - 6x^2 + 11x - 6.
  close_sets(ts::roots(ts::array(std::vector<double>{1, -6, 11, -6})), {1, 2, 3}, 1e-12);
  // x^2 + 1, with a leading zero stripped and a trailing zero a root at 0: 0 x^4 + x^3 + x.
  close_sets(ts::roots(ts::array(std::vector<double>{0, 1, 0, 1, 0})), {{0, 1}, {0, -1}, 0}, 1e-12);
  // A linear polynomial and a constant: one root, none.
  close_sets(ts::roots(ts::array(std::vector<double>{2, -3})), {1.5}, 1e-15);
  CHECK(ts::roots(ts::array(std::vector<double>{4})).size() == 0);
  // Under jit, strip_zeros=false (JAX's rule): the same roots.
  auto r = ts::jit([](const Array& p) { return ts::roots(p, false); })(ts::array(std::vector<double>{1, -6, 11, -6}));
  close_sets(r, {1, 2, 3}, 1e-12);
  CHECK_THROWS_AS(ts::jit([](const Array& p) { return ts::roots(p); })(ts::array(std::vector<double>{1, 2})),
                  ts::ConcretizationError);
  // poly of [[a, b], [c, d]]: x^2 - (a + d) x + (ad - bc); of a rotation: x^2 + 1.
  auto c = values(ts::poly(ts::array(std::vector<double>{2, 1, -4, 3}, {2, 2})));
  REQUIRE(c.size() == 3);
  CHECK(std::abs(c[0] - cd(1)) < 1e-12);
  CHECK(std::abs(c[1] - cd(-5)) < 1e-12);
  CHECK(std::abs(c[2] - cd(10)) < 1e-12);
  // roots(poly(z)) gives z back.
  close_sets(ts::roots(ts::real(ts::poly(ts::array(std::vector<double>{0.5, -2, 3.25})))), {0.5, -2, 3.25}, 1e-10);
}

TEST_CASE("a packed complex linalg node survives folding a transpose into a dot (eig and a complex eigh beside a @ a.T)") {
  // The fold-transposes pass rebuilt every node by re-inferring its aval,
  // which turned eig's packed results (f32[3, 2]) back into c64[3] ("slice
  // ... does not fit shape (3,)", the first two checks, before the fix).
  Array x = rand_mat(3, {3, 3}, ts::float32);
  auto f = [](const Array& a) { return ts::sum(ts::matmul(a, a.T())) + ts::sum(ts::real(la::eigvals(a))); };
  CHECK(ts::jit(f)(x).item<float>() == doctest::Approx(f(x).item<float>()).epsilon(1e-5));
  CHECK(ts::vmap(f)(ts::stack({x, x * 2.0f})).shape() == ts::Shape{2});
  Array c = rand_mat(4, {3, 3}, ts::complex64);
  auto g = [](const Array& a) {
    Array h = a + ts::conj(a.T());
    return ts::sum(ts::real(ts::matmul(a, a.T()))) + ts::sum(la::eigvalsh(h));
  };
  CHECK(ts::jit(g)(c).item<float>() == doctest::Approx(g(c).item<float>()).epsilon(1e-4));
}
