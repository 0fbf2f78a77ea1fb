// jax.numpy's bit functions, unique's extras, functional helpers, put,
// polyfit, promotion and the multi-dimensional histograms, against the C++
// standard library and closed forms, eagerly, under jit and sharded.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <numeric>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {
template <class T>
std::vector<T> host(const ts::Array& x) {
  return x.to_vector<T>();
}
// f eagerly, under jit, and with the first input split over 3 devices.
template <class F>
void each_way(const std::vector<ts::Array>& in, F check, const std::function<ts::Array(const std::vector<ts::Array>&)>& f) {
  check(f(in));
  check(ts::jit(f)(in));
  auto every = ts::devices();
  ts::Mesh mesh(std::vector<ts::Device>(every.begin(), every.begin() + 3), "x");
  std::vector<ts::Array> sh = in;
  if (sh[0].ndim() && sh[0].shape()[0] >= 3) sh[0] = ts::device_put(sh[0], ts::NamedSharding(mesh, P("x")));
  check(ts::jit(f)(sh));
}
}  // namespace

TEST_CASE("gcd, lcm and bitwise_count against the standard library") {
  std::vector<int> a{12, -18, 0, 7, 1 << 20, 0, 35, -1};
  std::vector<int> b{18, 24, 5, 0, 6, 0, -49, 1};
  each_way({ts::array(a), ts::array(b)}, [&](const ts::Array& g) {
    auto v = host<int>(g);
    for (size_t i = 0; i < a.size(); ++i) CHECK(v[i] == std::gcd(a[i], b[i]));
  }, [](const std::vector<ts::Array>& x) { return ts::gcd(x[0], x[1]); });
  each_way({ts::array(a), ts::array(b)}, [&](const ts::Array& l) {
    auto v = host<int>(l);
    for (size_t i = 0; i < a.size(); ++i) CHECK(v[i] == std::lcm(a[i], b[i]));
  }, [](const std::vector<ts::Array>& x) { return ts::lcm(x[0], x[1]); });
  std::vector<std::int64_t> w{0, 1, -1, 255, (std::int64_t(1) << 40) + 3, -(std::int64_t(1) << 62)};
  auto c = host<std::int64_t>(ts::bitwise_count(ts::array(w)));
  for (size_t i = 0; i < w.size(); ++i) CHECK(c[i] == std::popcount(std::uint64_t(w[i] < 0 ? -w[i] : w[i])));
  std::vector<std::uint32_t> u{0xffffffffu, 0x80000001u, 0};
  auto cu = host<int>(ts::bitwise_count(ts::array(u)));
  CHECK(cu == std::vector<int>{32, 2, 0});
  CHECK_THROWS_AS(ts::gcd(ts::ones({2}), ts::ones({2})), ts::TypeError);
}

TEST_CASE("ldexp, frexp, nextafter and spacing bit for bit against <cmath>") {
  std::vector<float> x{1.5f, -3.0f, 0.0f, 1e-40f, 3.0e38f, -0.75f, INFINITY, 6.0f};
  std::vector<int> e{3, -2, 5, 10, 1, -140, 2, -149};
  each_way({ts::array(x), ts::array(e)}, [&](const ts::Array& r) {
    auto v = host<float>(r);
    for (size_t i = 0; i < x.size(); ++i) CHECK(v[i] == std::ldexp(x[i], e[i]));
  }, [](const std::vector<ts::Array>& in) { return ts::ldexp(in[0], in[1]); });
  auto [m, ex] = ts::frexp(ts::array(x));
  auto mv = host<float>(m);
  auto ev = host<int>(ex);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isinf(x[i])) continue;
    int want_e;
    float want_m = std::frexp(x[i], &want_e);
    CHECK(mv[i] == want_m);
    CHECK(ev[i] == want_e);
  }
  std::vector<double> a{1.0, 1.0, 0.0, -0.0, -2.5, 1e308, 5e-324};
  std::vector<double> b{2.0, 0.0, 1.0, -1.0, -2.5, INFINITY, 0.0};
  auto n = host<double>(ts::nextafter(ts::array(a), ts::array(b)));
  for (size_t i = 0; i < a.size(); ++i) CHECK(n[i] == std::nextafter(a[i], b[i]));
  auto s = host<float>(ts::spacing(ts::array(std::vector<float>{1.0f, -1.0f, 1024.0f})));
  CHECK(s[0] == std::nextafter(1.0f, 2.0f) - 1.0f);
  CHECK(s[1] == -(std::nextafter(1.0f, 2.0f) - 1.0f));
  CHECK(s[2] == std::nextafter(1024.0f, 2048.0f) - 1024.0f);
}

TEST_CASE("unique_all, unique_counts, unique_inverse (with size under jit)") {
  auto x = ts::array(std::vector<int>{3, 1, 3, 2, 1, 3}, {2, 3});
  auto u = ts::unique_all(x);
  CHECK(host<int>(u.values) == std::vector<int>{1, 2, 3});
  CHECK(host<int>(u.counts) == std::vector<int>{2, 1, 3});
  CHECK(host<int>(u.indices) == std::vector<int>{1, 3, 0});
  CHECK(u.inverse_indices.shape() == ts::Shape{2, 3});
  CHECK(host<int>(u.inverse_indices) == std::vector<int>{2, 0, 2, 1, 0, 2});
  auto j = ts::jit([](const ts::Array& v) { return ts::unique_counts(v, {.size = 4}); })(x);
  CHECK(host<int>(j.values) == std::vector<int>{1, 2, 3, 1});
  CHECK(host<int>(j.counts) == std::vector<int>{2, 1, 3, 0});
  CHECK(host<int>(ts::unique_inverse(x).inverse_indices) == std::vector<int>{2, 0, 2, 1, 0, 2});
  CHECK_THROWS_AS(ts::jit([](const ts::Array& v) { return ts::unique_counts(v).counts; })(x), ts::ConcretizationError);
}

TEST_CASE("apply_along_axis, apply_over_axes, fromfunction, piecewise, ix_, put, put_along_axis") {
  auto a = ts::arange(24.0).reshape({2, 3, 4});
  auto r = ts::apply_along_axis([](const ts::Array& v) { return ts::cumsum(v) * 2; }, 1, a);
  CHECK(host<float>(r) == host<float>(ts::cumsum(a, 1) * 2));
  auto s = ts::apply_along_axis([](const ts::Array& v) { return ts::sum(v); }, 2, a);
  CHECK(host<float>(s) == host<float>(ts::sum(a, 2)));
  auto o = ts::apply_over_axes([](const ts::Array& v, int ax) { return ts::sum(v, ax); }, a, {0, 2});
  CHECK(o.shape() == ts::Shape{1, 3, 1});
  CHECK(host<float>(o) == host<float>(ts::sum(a, {0, 2}, true)));
  auto f = ts::fromfunction([](const std::vector<ts::Array>& i) { return i[0] * 10 + i[1]; }, {2, 3});
  CHECK(host<float>(f) == std::vector<float>{0, 1, 2, 10, 11, 12});
  auto x = ts::array(std::vector<float>{-2, -0.5, 0, 0.5, 2});
  auto pw = ts::piecewise(x, {x < 0, x > 1}, {[](const ts::Array& v) { return -v; }, [](const ts::Array& v) { return v * 10; },
                                              [](const ts::Array& v) { return v * 0 + 7; }});
  CHECK(host<float>(pw) == std::vector<float>{2, 0.5, 7, 7, 20});
  auto ix = ts::ix_({ts::array(std::vector<int>{0, 1}), ts::array(std::vector<int>{2, 0, 1})});
  CHECK(ix[0].shape() == ts::Shape{2, 1});
  CHECK(ix[1].shape() == ts::Shape{1, 3});
  auto m = ts::arange(6.0).reshape({2, 3});
  CHECK(host<float>(ts::put(m, ts::array(std::vector<int>{0, 5}), ts::array(std::vector<float>{-1, -2}))) ==
        std::vector<float>{-1, 1, 2, 3, 4, -2});
  auto pa = ts::put_along_axis(m, ts::array(std::vector<int>{2, 0}, {2, 1}), ts::full({2, 1}, 9.0f), 1);
  CHECK(host<float>(pa) == std::vector<float>{0, 1, 9, 9, 4, 5});
  CHECK(ts::isscalar(ts::array(1.0f)));
  CHECK(ts::array_repr(ts::array(std::vector<float>{1, 2})) == "Array([1., 2.], dtype=float32)");
}

TEST_CASE("polyfit recovers a polynomial; promote_types and result_type follow JAX's lattice") {
  auto x = ts::linspace(-2, 2, 9, true, ts::float64);
  auto y = ts::polyval(ts::array(std::vector<double>{0.5, -1.0, 2.0, 3.0}), x);
  auto c = host<double>(ts::polyfit(x, y, 3));
  std::vector<double> want{0.5, -1.0, 2.0, 3.0};
  for (size_t i = 0; i < 4; ++i) CHECK(c[i] == doctest::Approx(want[i]).epsilon(1e-10));
  CHECK(ts::promote_types(ts::int32, ts::float32) == ts::float32);
  CHECK(ts::promote_types(ts::float32, ts::float64) == ts::float64);
  CHECK(ts::promote_types(ts::uint32, ts::int32) == ts::int64);
  CHECK(ts::promote_types(ts::bool_, ts::int32) == ts::int32);
  CHECK(ts::result_type({ts::ones({2}), ts::array(2)}) == ts::float32);  // a weak int does not widen
}

TEST_CASE("histogram2d and histogramdd count against a host loop, split over devices") {
  std::vector<float> xs, ys;
  for (int i = 0; i < 37; ++i) {
    xs.push_back(float((i * 7) % 11) / 10.0f);
    ys.push_back(float((i * 5) % 13) / 12.0f);
  }
  std::vector<float> want(16, 0.0f);
  for (size_t i = 0; i < xs.size(); ++i) {
    int bx = std::min(3, int(xs[i] / 0.25f)), by = std::min(3, int(ys[i] / 0.25f));
    want[size_t(bx * 4 + by)] += 1;
  }
  auto [h, ex, ey] = ts::histogram2d(ts::array(xs), ts::array(ys), 4, std::vector<std::pair<double, double>>{{0, 1}, {0, 1}});
  CHECK(host<float>(h) == want);
  CHECK(host<float>(ex) == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1});
  auto sample = ts::stack({ts::array(xs), ts::array(ys)}, 1);
  auto mesh = ts::make_mesh({8}, {"x"});
  auto sh = ts::device_put(sample, ts::NamedSharding(mesh, P("x")));
  auto [hd, edges] = ts::histogramdd(sh, 4, std::vector<std::pair<double, double>>{{0, 1}, {0, 1}});
  CHECK(host<float>(hd) == want);
  CHECK(edges.size() == 2);
}

TEST_CASE("take with mode 'wrap' (floor modulo, as jnp.take); frexp, nextafter and spacing of integers as floats") {
  ts::Array x = ts::arange(5.0);
  // np.take(np.arange(5.), [-1, 5, 7, -6], mode='wrap') == [4, 0, 2, 4]
  CHECK(ts::take(x, ts::array({-1, 5, 7, -6}), 0, "wrap").to_vector<double>() == std::vector<double>{4, 0, 2, 4});
  CHECK(ts::jit([](ts::Array a, ts::Array i) { return ts::take(a, i, std::nullopt, "wrap"); })(
            ts::arange(6.0).reshape({2, 3}), ts::array({6, -1}))
            .to_vector<double>() == std::vector<double>{0, 5});
  CHECK_THROWS_AS(ts::take(x, ts::array({0}), 0, "wrapped"), ts::ValueError);
  // np.frexp(np.array([8, -3], np.int32)) == ([0.5, -0.75], [4, 2]), as float32
  auto [m, e] = ts::frexp(ts::array({8, -3}));
  CHECK(m.dtype() == ts::float32);
  CHECK(m.to_vector<float>() == std::vector<float>{0.5f, -0.75f});
  CHECK(e.to_vector<std::int32_t>() == std::vector<std::int32_t>{4, 2});
  CHECK(ts::nextafter(ts::array({1}), ts::array({2})).to_vector<float>()[0] == std::nextafter(1.0f, 2.0f));
  CHECK(ts::spacing(ts::array({1})).to_vector<float>()[0] == std::nextafter(1.0f, 2.0f) - 1.0f);
}

TEST_CASE("indices of no dimensions is an empty array of shape (0,), as jnp.indices(()) and np.indices(())") {
  ts::Array e = ts::indices({});
  CHECK(e.shape() == ts::Shape{0});
  CHECK(e.dtype() == ts::int32);
  CHECK(ts::indices({}, ts::float32).dtype() == ts::float32);
  ts::Array two = ts::indices({2, 3});
  CHECK(two.shape() == ts::Shape{2, 2, 3});
  CHECK(two.to_vector<int>() == std::vector<int>{0, 0, 0, 1, 1, 1, 0, 1, 2, 0, 1, 2});
}
