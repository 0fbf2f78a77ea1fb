// ts::fft against independent references: a direct DFT in long double on the
// host (every function, norm and length), closed forms (fftfreq, fftshift,
// round trips), the reference interpreter on 1..8 devices, central
// differences for the derivatives, and the notebook's sharded fftn: equal to
// the unsharded result, sharded like its input, with no all-gather.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <numbers>
#include <random>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
namespace fft = tessel::fft;
using ts::Array;
using ts::P;
using C = std::complex<double>;
using LC = std::complex<long double>;

namespace {

std::vector<C> host(const Array& a) {
  if (a.dtype() == ts::complex64) {
    auto v = a.to_vector<std::complex<float>>();
    return std::vector<C>(v.begin(), v.end());
  }
  if (a.dtype() == ts::complex128) return a.to_vector<C>();
  auto v = a.astype(ts::float64).to_vector<double>();
  return std::vector<C>(v.begin(), v.end());
}

std::vector<C> rand_c(std::uint32_t seed, std::size_t n) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<C> v(n);
  for (auto& z : v) z = C(u(rng), u(rng));
  return v;
}

// The direct multi-dimensional DFT over `axes` of x (row-major, shape s), sign -1 or +1.
std::vector<C> dft(const std::vector<C>& x, const ts::Shape& s, const std::vector<int>& axes, int sign) {
  std::vector<LC> v(x.begin(), x.end());
  const auto st = ts::row_major_strides(s);
  for (int a : axes) {
    const std::int64_t n = s[size_t(a)], stride = st[size_t(a)];
    std::vector<LC> out(v.size());
    for (std::int64_t i = 0; i < std::int64_t(v.size()); ++i) {
      const std::int64_t k = (i / stride) % n, base = i - k * stride;
      LC acc = 0;
      for (std::int64_t j = 0; j < n; ++j)
        acc += v[size_t(base + j * stride)] * std::polar(1.0L, sign * 2 * std::numbers::pi_v<long double> * ((j * k) % n) / n);
      out[size_t(i)] = acc;
    }
    v = out;
  }
  return std::vector<C>(v.begin(), v.end());
}

void check_close(const Array& got, const std::vector<C>& want, double tol) {
  auto g = host(got);
  REQUIRE(g.size() == want.size());
  double scale = 1;
  for (auto w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    CAPTURE(g[i]);
    CAPTURE(want[i]);
    CHECK(std::abs(g[i] - want[i]) <= tol * scale);
  }
}

Array carray(const std::vector<C>& v, const ts::Shape& s, ts::DType t) {
  Array a = ts::array(v, s);
  return t == ts::complex128 ? a : a.astype(t);
}

}  // namespace

TEST_CASE("fft, ifft, fftn over axes, with norms, against a direct DFT in long double") {
  for (auto t : {ts::complex64, ts::complex128}) {
    const double tol = t == ts::complex64 ? 2e-6 : 1e-13;
    CAPTURE(ts::dtype_name(t));
    ts::Shape s{4, 3, 5};
    auto v = rand_c(1, 60);
    Array x = carray(v, s, t);
    auto xv = host(x);
    check_close(fft::fft(x), dft(xv, s, {2}, -1), tol);
    check_close(fft::fft(x, std::nullopt, 0), dft(xv, s, {0}, -1), tol);
    check_close(fft::ifft(x, std::nullopt, 1), [&] {
      auto w = dft(xv, s, {1}, 1);
      for (auto& z : w) z /= 3.0;
      return w;
    }(), tol);
    check_close(fft::fftn(x), dft(xv, s, {0, 1, 2}, -1), tol);
    check_close(fft::fft2(x), dft(xv, s, {1, 2}, -1), tol);
    check_close(fft::fftn(x, std::nullopt, std::vector<int>{2, 0}), dft(xv, s, {0, 2}, -1), tol);
    auto w = dft(xv, s, {0, 1, 2}, 1);
    for (auto& z : w) z /= 60.0;
    check_close(fft::ifftn(x), w, tol);
    auto o = dft(xv, s, {0, 1, 2}, -1);
    for (auto& z : o) z /= std::sqrt(60.0);
    check_close(fft::fftn(x, std::nullopt, std::nullopt, "ortho"), o, tol);
    auto f = dft(xv, s, {2}, -1);
    for (auto& z : f) z /= 5.0;
    check_close(fft::fft(x, std::nullopt, -1, "forward"), f, tol);
    // round trips
    check_close(fft::ifftn(fft::fftn(x)), xv, tol * 4);
    check_close(fft::ifft2(fft::fft2(x, std::nullopt, {0, 2}, "ortho"), std::nullopt, {0, 2}, "ortho"), xv, tol * 4);
  }
  // n crops or zero-pads; real input becomes complex
  Array r = ts::array(std::vector<double>{1, 2, 3, 4, 5});
  check_close(fft::fft(r, 3), dft({1, 2, 3}, {3}, {0}, -1), 1e-6);
  check_close(fft::fft(r, 8), dft({1, 2, 3, 4, 5, 0, 0, 0}, {8}, {0}, -1), 1e-13);
  CHECK(fft::fft(r).dtype() == ts::complex128);
  CHECK(fft::fft(ts::arange(4)).dtype() == ts::complex64);
  CHECK_THROWS_AS(fft::fft(r, std::nullopt, -1, "unit"), ts::ValueError);
  CHECK_THROWS_AS(fft::fft(r, std::nullopt, 1), ts::ValueError);
  CHECK_THROWS_AS(fft::rfft(fft::fft(r)), ts::TypeError);
}

TEST_CASE("rfft, irfft, rfftn, irfftn: the real transforms against the direct DFT; odd and even lengths") {
  for (auto t : {ts::float32, ts::float64}) {
    const double tol = t == ts::float32 ? 2e-6 : 1e-13;
    for (std::int64_t n : {8, 7}) {
      CAPTURE(n);
      ts::Shape s{3, n};
      auto v = rand_c(2, size_t(3 * n));
      std::vector<double> re;
      for (auto z : v) re.push_back(z.real());
      Array x = ts::array(re, s).astype(t);
      auto xv = host(x);
      auto full = dft(xv, s, {1}, -1);
      std::vector<C> half;
      for (std::int64_t i = 0; i < 3; ++i)
        for (std::int64_t k = 0; k <= n / 2; ++k) half.push_back(full[size_t(i * n + k)]);
      Array X = fft::rfft(x);
      CHECK(X.shape() == ts::Shape{3, n / 2 + 1});
      check_close(X, half, tol);
      check_close(fft::irfft(X, n), xv, tol * 4);  // the round trip, odd n given explicitly
      auto full2 = dft(xv, s, {0, 1}, -1);
      std::vector<C> half2;
      for (std::int64_t i = 0; i < 3; ++i)
        for (std::int64_t k = 0; k <= n / 2; ++k) half2.push_back(full2[size_t(i * n + k)]);
      Array X2 = fft::rfftn(x);
      check_close(X2, half2, tol);
      check_close(fft::irfftn(X2, std::vector<std::int64_t>{3, n}), xv, tol * 4);
      check_close(fft::irfft2(fft::rfft2(x, std::nullopt, {-2, -1}, "ortho"), std::vector<std::int64_t>{3, n}, {-2, -1}, "ortho"),
                  xv, tol * 4);
    }
  }
  // irfft of a spectrum: the direct sum over the Hermitian extension (imaginary parts of bins 0 and n/2 ignored)
  std::vector<C> spec{{1, 5}, {2, -1}, {0.5, 0.25}, {-1, 3}};  // n = 6
  auto y = host(fft::irfft(ts::array(spec)));
  REQUIRE(y.size() == 6);
  for (int tt = 0; tt < 6; ++tt) {
    double acc = spec[0].real() + spec[3].real() * (tt % 2 ? -1 : 1);
    for (int k = 1; k < 3; ++k) acc += 2 * (spec[size_t(k)] * std::polar(1.0, 2 * std::numbers::pi * k * tt / 6)).real();
    CHECK(y[size_t(tt)].real() == doctest::Approx(acc / 6).epsilon(1e-12));
  }
}

TEST_CASE("fftfreq, rfftfreq, fftshift, ifftshift: closed forms") {
  CHECK(fft::fftfreq(5).to_vector<float>() == std::vector<float>{0, 0.2f, 0.4f, -0.4f, -0.2f});
  CHECK(fft::fftfreq(4, 0.5, ts::float64).to_vector<double>() == std::vector<double>{0, 0.5, -1, -0.5});
  CHECK(fft::rfftfreq(5, 0.1, ts::float64).to_vector<double>() == std::vector<double>{0, 2, 4});
  CHECK(fft::fftshift(ts::arange(5)).to_vector<int>() == std::vector<int>{3, 4, 0, 1, 2});
  CHECK(fft::ifftshift(ts::arange(5)).to_vector<int>() == std::vector<int>{2, 3, 4, 0, 1});
  CHECK(fft::fftshift(ts::arange(6)).to_vector<int>() == std::vector<int>{3, 4, 5, 0, 1, 2});
  CHECK(fft::ifftshift(fft::fftshift(ts::arange(12).reshape({3, 4}))).to_vector<int>() == ts::arange(12).to_vector<int>());
  CHECK(fft::fftshift(ts::arange(6).reshape({2, 3}), std::vector<int>{1}).to_vector<int>() == std::vector<int>{2, 0, 1, 5, 3, 4});
}

TEST_CASE("sharded fftn keeps the input's sharding, never all-gathers, and equals the unsharded result (the notebook's bonus)") {
  const auto all = ts::devices();
  auto v = rand_c(3, 16 * 16 * 16);
  Array x = ts::array(v, {16, 16, 16}).astype(ts::complex64);
  Array want = fft::fftn(x);
  auto f = ts::jit([](const Array& a) { return fft::fftn(a); });
  struct Layout {
    std::vector<std::int64_t> mesh;
    P spec;
  };
  for (auto& [shape, spec] : std::vector<Layout>{{{4, 2}, P("x", "y")}, {{1, 8}, P(ts::None, "y")}, {{2, 4}, P("y", "x")},
                                                {{8, 1}, P("x")}}) {
    ts::Mesh mesh = ts::make_mesh(shape, {"x", "y"});
    ts::NamedSharding sh(mesh, spec);
    Array xs = ts::device_put(x, sh);
    Array y = f(xs);
    CAPTURE(sh);
    CHECK(y.sharding() == ts::Sharding(sh));
    check_close(y, host(want), 2e-6);
    const std::string text = f.lower(xs).compile().as_text();
    CHECK(text.find("all-gather") == std::string::npos);
    CHECK(text.find("all-to-all") != std::string::npos);
    // rfftn and irfftn of the same layout
    Array r = ts::device_put(ts::real(x), sh);
    auto rf = ts::jit([](const Array& a) { return fft::irfftn(fft::rfftn(a), std::vector<std::int64_t>{16, 16, 16}); });
    Array back = rf(r);
    CHECK(back.sharding() == ts::Sharding(sh));
    check_close(back, host(ts::real(x)), 2e-6);
    CHECK(rf.lower(r).compile().as_text().find("all-gather") == std::string::npos);
  }
}

TEST_CASE("fft programs equal the reference interpreter on 1..8 devices, even and uneven") {
  using Fn = std::function<Array(const std::vector<Array>&)>;
  std::vector<std::pair<std::string, Fn>> fns{
      {"fft along the split axis", [](const std::vector<Array>& x) { return fft::fft(x[0], std::nullopt, 0); }},
      {"fft2", [](const std::vector<Array>& x) { return fft::fft2(x[0]) * 2.0; }},
      {"ifftn ortho", [](const std::vector<Array>& x) { return fft::ifftn(x[0], std::nullopt, std::nullopt, "ortho"); }},
      {"rfft of the real part", [](const std::vector<Array>& x) { return fft::rfft(ts::real(x[0])); }},
      {"irfft along axis 0", [](const std::vector<Array>& x) { return fft::irfft(x[0], 6, 0).astype(x[0].dtype()); }},
      {"cropped and padded", [](const std::vector<Array>& x) { return fft::fft2(x[0], std::vector<std::int64_t>{3, 9}); }},
  };
  const auto all = ts::devices();
  for (auto t : {ts::complex64, ts::complex128})
    for (std::int64_t rows : {8, 6})
      for (int n : {1, 3, 8}) {
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
        Array a = ts::device_put(carray(rand_c(4, size_t(rows * 4)), {rows, 4}, t), ts::NamedSharding(mesh, P("x")));
        for (auto& [name, fn] : fns) {
          CAPTURE(name);
          CAPTURE(n);
          CAPTURE(rows);
          CAPTURE(ts::dtype_name(t));
          ts::testing::check(fn, {a}, false);
        }
      }
}

TEST_CASE("fft derivatives against central differences (fft^T = fft; rfft, irfft as JAX)") {
  using Fn = std::function<Array(const Array&)>;
  std::vector<std::pair<const char*, Fn>> fns{
      {"|fft|^2 weighted", [](const Array& x) {
         Array y = fft::fft(ts::complex(x, x * x));
         return ts::sum(ts::abs(y) * ts::abs(y) * ts::arange(6.0).astype(ts::float64));
       }},
      {"rfft", [](const Array& x) { return ts::sum(ts::real(fft::rfft(x) * std::complex<double>(0.3, 2))); }},
      {"irfft", [](const Array& x) {
         Array spec = ts::complex(x.index({ts::slice(0, 4)}), x.index({ts::slice(2, 6)}));
         return ts::sum(fft::irfft(spec) * ts::arange(6.0).astype(ts::float64));
       }},
      {"irfft odd", [](const Array& x) {
         Array spec = ts::complex(x.index({ts::slice(0, 3)}), x.index({ts::slice(3, 6)}));
         return ts::sum(ts::sin(fft::irfft(spec, 5)));
       }},
      {"ifftn ortho of a 2-D", [](const Array& x) {
         Array z = ts::complex(x, ts::cos(x)).reshape({2, 3});
         return ts::sum(ts::imag(fft::ifftn(z, std::nullopt, std::nullopt, "ortho")) * ts::real(z));
       }},
  };
  std::vector<double> v{0.3, -0.7, 1.1, 0.2, -0.4, 0.9};
  for (auto& [name, f] : fns) {
    CAPTURE(name);
    auto g = ts::jit(ts::grad(f))(ts::array(v)).to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) {
      auto p = v, m = v;
      p[i] += 1e-6, m[i] -= 1e-6;
      double fd = (ts::jit(f)(ts::array(p)).item<double>() - ts::jit(f)(ts::array(m)).item<double>()) / 2e-6;
      CAPTURE(i);
      CHECK(g[i] == doctest::Approx(fd).epsilon(1e-6));
    }
  }
}

TEST_CASE("large transforms run in blocks and passes on the device's threads, against the direct DFT") {
  // At least 2^15 elements: the transform is cut into blocks of its loops, and
  // an fftn over every axis into two passes (codegen/fft.cpp). On one device.
  auto one = ts::make_mesh({1}, {"d"});
  auto on_one = [&](const Array& a) { return ts::device_put(a, ts::NamedSharding(one, P())); };
  auto passes = [](const auto& f, const Array& x) { return f.lower(x).compile().as_text(); };
  for (auto t : {ts::complex64, ts::complex128}) {
    const double tol = t == ts::complex64 ? 4e-6 : 1e-13;
    CAPTURE(ts::dtype_name(t));
    {
      ts::Shape s{32, 32, 32};
      Array x = on_one(carray(rand_c(11, 32768), s, t));
      auto xv = host(x);
      auto f = ts::jit([](const Array& a) { return fft::fftn(a); });
      CHECK(passes(f, x).find("2 passes") != std::string::npos);
      check_close(f(x), dft(xv, s, {0, 1, 2}, -1), tol);
      auto g = ts::jit([](const Array& a) { return fft::ifftn(a, std::nullopt, std::vector<int>{2, 0, 1}); });
      auto w = dft(xv, s, {0, 1, 2}, 1);
      for (auto& z : w) z /= 32768.0;
      check_close(g(x), w, tol);
    }
    {
      ts::Shape s{256, 160};
      Array x = on_one(carray(rand_c(12, 256 * 160), s, t));
      auto f = ts::jit([](const Array& a) { return fft::fft(a, std::nullopt, 0); });  // strided, a loop of 160
      CHECK(passes(f, x).find("in blocks") != std::string::npos);
      check_close(f(x), dft(host(x), s, {0}, -1), tol);
    }
  }
  for (auto t : {ts::float32, ts::float64}) {
    const double tol = t == ts::float32 ? 4e-6 : 1e-13;
    CAPTURE(ts::dtype_name(t));
    ts::Shape s{64, 48, 12};
    auto v = rand_c(13, 64 * 48 * 12);
    std::vector<double> re;
    for (auto z : v) re.push_back(z.real());
    Array x = on_one(ts::array(re, s).astype(t));
    auto xv = host(x);
    auto full = dft(xv, s, {0, 1, 2}, -1);
    std::vector<C> half;
    for (std::int64_t i = 0; i < 64 * 48; ++i)
      for (std::int64_t k = 0; k <= 6; ++k) half.push_back(full[size_t(i * 12 + k)]);
    auto f = ts::jit([](const Array& a) { return fft::rfftn(a); });
    CHECK(passes(f, x).find("2 passes") != std::string::npos);
    Array X = f(x);
    check_close(X, half, tol);
    auto g = ts::jit([](const Array& a) { return fft::irfftn(a, std::vector<std::int64_t>{64, 48, 12}); });
    CHECK(passes(g, X).find("2 passes") != std::string::npos);
    check_close(g(X), xv, tol * 4);
  }
}
