// stop_gradient, the cumulative scans (cumsum, cumprod, cummax, cummin,
// cumlogsumexp) against host loops, sharded along the scanned axis over 1..8
// devices (even and uneven) with only the blocks' totals moving, their
// derivatives against finite differences, and the new operators.
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <numeric>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

// Host scan of each line along axis `ax` of a row-major [rows, cols] array (ax 0 or 1).
std::vector<double> host_scan(const std::vector<double>& x, std::int64_t rows, std::int64_t cols, int ax, bool reverse,
                              const std::function<double(double, double)>& f) {
  std::vector<double> y(x.size());
  const std::int64_t lines = ax == 0 ? cols : rows, len = ax == 0 ? rows : cols;
  for (std::int64_t l = 0; l < lines; ++l) {
    double acc = 0;
    for (std::int64_t k = 0; k < len; ++k) {
      const std::int64_t i = reverse ? len - 1 - k : k;
      const std::int64_t at = ax == 0 ? i * cols + l : l * cols + i;
      acc = k == 0 ? x[std::size_t(at)] : f(acc, x[std::size_t(at)]);
      y[std::size_t(at)] = acc;
    }
  }
  return y;
}

double logaddexp(double a, double b) {
  const double m = std::max(a, b);
  if (std::isinf(m)) return m;
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

std::vector<double> values(std::int64_t n) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(0.5 + 0.25 * double((i * 7) % 9) - (i % 4 == 1 ? 2.0 : 0.0));
  return v;
}

}  // namespace

TEST_CASE("stop_gradient: no derivative flows through it, values unchanged") {
  auto x = ts::array(std::vector<float>{1, 2, 3});
  auto g = ts::grad([](const ts::Array& v) { return ts::sum(v * ts::stop_gradient(v)); })(x);
  CHECK(g.to_vector<float>() == std::vector<float>{1, 2, 3});  // d/dv (v * c) with c = v held fixed
  auto g2 = ts::grad([](const ts::Array& v) { return ts::sum(ts::lax::stop_gradient(v * v)); })(x);
  CHECK(g2.to_vector<float>() == std::vector<float>{0, 0, 0});
  auto y = ts::jit([](const ts::Array& v) { return ts::stop_gradient(v) * 2; })(x);
  CHECK(y.to_vector<float>() == std::vector<float>{2, 4, 6});
  auto [out, tan] = ts::jvp([](const ts::Array& v) { return ts::stop_gradient(v) + v; }, std::make_tuple(x),
                            std::make_tuple(ts::ones({3})));
  CHECK(out.to_vector<float>() == std::vector<float>{2, 4, 6});
  CHECK(tan.to_vector<float>() == std::vector<float>{1, 1, 1});
  // Under vmap and sharded.
  auto mesh = ts::make_mesh({2}, {"x"});
  auto xs = ts::device_put(ts::ones({4, 3}), ts::NamedSharding(mesh, P("x")));
  auto gv = ts::jit(ts::grad([](const ts::Array& v) { return ts::sum(ts::vmap([](const ts::Array& r) { return r * ts::stop_gradient(r * 3); })(v)); }))(xs);
  CHECK(gv.to_vector<float>() == std::vector<float>(12, 3.0f));
}

TEST_CASE("cumulative scans match host loops, sharded along the scanned axis over 1..8 devices") {
  struct Case {
    const char* name;
    std::function<ts::Array(const ts::Array&, int, bool)> f;
    std::function<double(double, double)> op;
  };
  std::vector<Case> cases{
      {"cumsum", [](const ts::Array& x, int a, bool r) { return ts::lax::cumsum(x, a, r); }, [](double a, double b) { return a + b; }},
      {"cumprod", [](const ts::Array& x, int a, bool r) { return ts::lax::cumprod(x, a, r); }, [](double a, double b) { return a * b; }},
      {"cummax", [](const ts::Array& x, int a, bool r) { return ts::lax::cummax(x, a, r); }, [](double a, double b) { return std::max(a, b); }},
      {"cummin", [](const ts::Array& x, int a, bool r) { return ts::lax::cummin(x, a, r); }, [](double a, double b) { return std::min(a, b); }},
      {"cumlogsumexp", [](const ts::Array& x, int a, bool r) { return ts::lax::cumlogsumexp(x, a, r); }, logaddexp},
  };
  for (std::int64_t rows : {13, 16, 7}) {
    const std::int64_t cols = 3;
    auto hv = values(rows * cols);
    std::vector<float> hf(hv.begin(), hv.end());
    std::vector<double> hd(hf.begin(), hf.end());
    auto x = ts::array(hf, {rows, cols});
    for (auto& c : cases)
      for (int ax : {0, 1})
        for (bool rev : {false, true}) {
          CAPTURE(c.name);
          CAPTURE(rows);
          CAPTURE(ax);
          CAPTURE(rev);
          auto want = host_scan(hd, rows, cols, ax, rev, c.op);
          auto check = [&](const ts::Array& got) {
            auto g = got.to_vector<float>();
            REQUIRE(g.size() == want.size());
            for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(want[i]).epsilon(2e-5).scale(1e-5));
          };
          check(c.f(x, ax, rev));
          auto jf = ts::jit([&](const ts::Array& v) { return c.f(v, ax, rev); });
          for (int n : {1, 2, 3, 5, 8}) {
            CAPTURE(n);
            auto every = ts::devices();
            std::vector<ts::Device> devs(every.begin(), every.begin() + n);
            ts::Mesh mesh(devs, "x");
            auto spec = ax == 0 ? P("x") : P(ts::None, "x");
            check(jf(ts::device_put(x, ts::NamedSharding(mesh, spec))));
          }
        }
  }
}

TEST_CASE("a scan split over 8 devices moves only the blocks' totals") {
  auto mesh = ts::make_mesh({8}, {"x"});
  auto x = ts::device_put(ts::ones({1024, 4}), ts::NamedSharding(mesh, P("x")));
  auto f = ts::jit([](const ts::Array& v) { return ts::cumsum(v, 0); });
  auto y = f(x);
  CHECK(y.sharding() == ts::Sharding(ts::NamedSharding(mesh, P("x"))));
  auto last = y.to_vector<float>();
  CHECK(last[1023 * 4] == 1024.0f);
  auto c = f.lower(x).compile();
  auto text = c.as_text();
  CHECK(text.find("cumsum") != std::string::npos);
  double moved = 0;
  for (auto& t : c.communication()) moved += t.bytes_per_device;
  // One float per line per device (4 lines, 7 peers), nowhere near the array (16 KiB).
  CHECK(moved <= 4 * 4 * 8);
  CHECK(text.find("all-gather") != std::string::npos);
}

TEST_CASE("jnp cumsum and cumprod: flattened without an axis, booleans in int32") {
  auto x = ts::array(std::vector<int>{1, 2, 3, 4}, {2, 2});
  CHECK(ts::cumsum(x).to_vector<int>() == std::vector<int>{1, 3, 6, 10});
  CHECK(ts::cumprod(x, 0).to_vector<int>() == std::vector<int>{1, 2, 3, 8});
  auto b = ts::array(std::vector<bool>{true, false, true});
  CHECK(ts::cumsum(b).dtype() == ts::int32);
  CHECK(ts::cumsum(b).to_vector<int>() == std::vector<int>{1, 1, 2});
  auto nan = ts::array(std::vector<float>{1, NAN, 2});
  CHECK(ts::nancumsum(nan).to_vector<float>() == std::vector<float>{1, 1, 3});
  CHECK_THROWS_AS(ts::lax::cummax(ts::array(std::vector<std::complex<float>>{{1, 1}})), ts::TypeError);
  CHECK_THROWS_AS(ts::lax::cumsum(x, 2), ts::ShapeError);
}

TEST_CASE("derivatives of the scans against central differences (float64, with zeros and ties)") {
  std::vector<double> base{0.7, -1.3, 0.0, 2.1, 0.0, -0.4, 1.9, 0.3};
  auto fd_check = [&](const char* name, const std::function<ts::Array(const ts::Array&)>& f) {
    CAPTURE(name);
    // A fixed random-looking cotangent makes every output count.
    std::vector<double> w;
    for (size_t i = 0; i < base.size(); ++i) w.push_back(0.3 + 0.1 * double((i * 5) % 7));
    auto wa = ts::array(w);
    auto loss = [&](const ts::Array& x) { return ts::sum(f(x) * wa); };
    auto g = ts::grad(loss)(ts::array(base)).to_vector<double>();
    auto gj = ts::jit(ts::grad(loss))(ts::array(base)).to_vector<double>();
    for (size_t i = 0; i < base.size(); ++i) {
      auto p = base, m = base;
      const double h = 1e-6;
      p[i] += h;
      m[i] -= h;
      const double fd = (loss(ts::array(p)).item<double>() - loss(ts::array(m)).item<double>()) / (2 * h);
      CHECK(g[i] == doctest::Approx(fd).epsilon(1e-5).scale(1e-5));
      CHECK(gj[i] == doctest::Approx(g[i]).epsilon(1e-12));
    }
  };
  fd_check("cumsum", [](const ts::Array& x) { return ts::cumsum(x); });
  fd_check("cumsum reverse", [](const ts::Array& x) { return ts::lax::cumsum(x, 0, true); });
  fd_check("cumprod (zeros)", [](const ts::Array& x) { return ts::cumprod(x); });
  fd_check("cumprod reverse", [](const ts::Array& x) { return ts::lax::cumprod(x, 0, true); });
  fd_check("cummax", [](const ts::Array& x) { return ts::lax::cummax(x); });
  fd_check("cummin reverse", [](const ts::Array& x) { return ts::lax::cummin(x, 0, true); });
  fd_check("cumlogsumexp", [](const ts::Array& x) { return ts::lax::cumlogsumexp(x); });
  fd_check("cumlogsumexp reverse", [](const ts::Array& x) { return ts::lax::cumlogsumexp(x, 0, true); });
  // One zero only: the product's derivative at the zero is the product of the others.
  base = {2.0, 0.0, 3.0};
  fd_check("cumprod one zero", [](const ts::Array& x) { return ts::cumprod(x); });
}

TEST_CASE("operators: & | ^ ~ % << >>, compound assignments, x[i]") {
  auto a = ts::array(std::vector<int>{12, -7, 5, 0});
  auto b = ts::array(std::vector<int>{10, 3, -2, 1});
  CHECK((a & b).to_vector<int>() == std::vector<int>{8, 1, 4, 0});
  CHECK((a | b).to_vector<int>() == std::vector<int>{14, -5, -1, 1});
  CHECK((a ^ b).to_vector<int>() == std::vector<int>{6, -6, -5, 1});
  CHECK((~a).to_vector<int>() == std::vector<int>{-13, 6, -6, -1});
  CHECK((a % 5).to_vector<int>() == std::vector<int>{2, 3, 0, 0});  // the divisor's sign, as NumPy
  CHECK((a << 2).to_vector<int>() == std::vector<int>{48, -28, 20, 0});
  CHECK((a >> 1).to_vector<int>() == std::vector<int>{6, -4, 2, 0});  // arithmetic for signed
  auto u = ts::array(std::vector<std::uint32_t>{0x80000000u});
  CHECK((u >> 31).to_vector<std::uint32_t>() == std::vector<std::uint32_t>{1});
  auto t = ts::array(std::vector<bool>{true, false});
  CHECK((~t).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK_THROWS_AS(ts::array(std::vector<float>{1.5f}) & ts::array(std::vector<float>{1.f}), ts::TypeError);
  auto x = ts::arange(4.0);
  auto before = x;
  x += 1;
  x *= 2.0;
  x -= ts::ones({4});
  x /= 2;
  CHECK(x.to_vector<float>() == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f});
  CHECK(before.to_vector<float>() == std::vector<float>{0, 1, 2, 3});  // arrays stay immutable
  auto m = ts::arange(12.0).reshape({3, 4});
  CHECK(m[1].to_vector<float>() == std::vector<float>{4, 5, 6, 7});
  CHECK(m[ts::slice(1, 3)].shape() == ts::Shape{2, 4});
  CHECK(m[-1].to_vector<float>() == std::vector<float>{8, 9, 10, 11});
  auto jm = ts::jit([](const ts::Array& v) { return v[2] * 2; })(m);
  CHECK(jm.to_vector<float>() == std::vector<float>{16, 18, 20, 22});
}

TEST_CASE("odd functions built from |x| keep their derivative at 0 (sinh, arcsinh, i1e, sinc)") {
  auto g = [](const std::function<ts::Array(const ts::Array&)>& f) {
    return ts::grad([&](const ts::Array& x) { return ts::sum(f(x)); })(ts::zeros({1}, ts::float64)).to_vector<double>()[0];
  };
  CHECK(g([](const ts::Array& x) { return ts::sinh(x); }) == doctest::Approx(1.0));
  CHECK(g([](const ts::Array& x) { return ts::arcsinh(x); }) == doctest::Approx(1.0));
  CHECK(g([](const ts::Array& x) { return ts::scipy::special::i1e(x); }) == doctest::Approx(0.5));
  CHECK(g([](const ts::Array& x) { return ts::sinc(x); }) == doctest::Approx(0.0));
  CHECK(g([](const ts::Array& x) { return ts::scipy::special::xlogy(x, ts::full_like(x, 2.0)); }) == doctest::Approx(std::log(2.0)));
}

TEST_CASE("stop_gradient on a pytree stops every leaf") {
  std::map<std::string, ts::Array> p{{"a", ts::array(std::vector<float>{1, 2})}, {"b", ts::array(std::vector<float>{3})}};
  auto g = ts::grad([](const std::map<std::string, ts::Array>& q) {
    auto s = ts::stop_gradient(q);
    return ts::sum(q.at("a") * s.at("a")) + ts::sum(s.at("b") * q.at("b"));
  })(p);
  CHECK(g.at("a").to_vector<float>() == std::vector<float>{1, 2});
  CHECK(g.at("b").to_vector<float>() == std::vector<float>{3});
}

TEST_CASE("top_k split along its axis over 1..8 devices moves k candidates per device, never the array") {
  std::vector<float> v;
  for (int i = 0; i < 3 * 37; ++i) v.push_back(float((i * 29) % 41) - (i % 5 == 0 ? 0.5f : 0.0f));
  v[7] = NAN;  // NaN is the largest, as a descending sort puts it first
  v[40] = v[41];  // a tie: the lower index first
  auto x = ts::array(v, {3, 37});
  for (std::int64_t k : {1, 5, 37}) {
    auto want = ts::lax::top_k(x, k);
    // Against a host sort of each row.
    auto wi = want.indices.to_vector<int>();
    for (int r = 0; r < 3; ++r) {
      std::vector<int> order(37);
      std::iota(order.begin(), order.end(), 0);
      auto row = [&](int i) { return v[size_t(r * 37 + i)]; };
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        if (std::isnan(row(a))) return !std::isnan(row(b));
        if (std::isnan(row(b))) return false;
        return row(a) > row(b);
      });
      for (std::int64_t j = 0; j < k; ++j) CHECK(wi[size_t(r * k + j)] == order[size_t(j)]);
    }
    auto f = ts::jit([k](const ts::Array& a) { return ts::lax::top_k(a, k); });
    auto every = ts::devices();
    for (int n : {1, 2, 3, 5, 8}) {
      CAPTURE(k);
      CAPTURE(n);
      ts::Mesh mesh(std::vector<ts::Device>(every.begin(), every.begin() + n), "x");
      auto xs = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x")));
      auto got = f(xs);
      CHECK(got.indices.to_vector<int>() == wi);
      auto gv = got.values.to_vector<float>(), wv = want.values.to_vector<float>();
      for (size_t i = 0; i < gv.size(); ++i) CHECK(((std::isnan(gv[i]) && std::isnan(wv[i])) || gv[i] == wv[i]));
      if (n == 8) {
        auto c = f.lower(xs).compile();
        double moved = 0;
        for (auto& t : c.communication()) moved += t.bytes_per_device;
        // k candidates (values and indices) per row per device, not the 3 x 37 array.
        CHECK(moved <= double(3 * std::min<std::int64_t>(k, 5) * 8 * 8));
        CHECK(c.as_text().find("top-k") != std::string::npos);
      }
    }
  }
  // Its derivative: the tangent of each chosen element.
  auto g = ts::grad([](const ts::Array& a) { return ts::sum(ts::lax::top_k(a, 2).values * ts::array(std::vector<float>{3, 1})); })(
      ts::array(std::vector<float>{0.5f, 4.0f, 2.0f, 1.0f}));
  CHECK(g.to_vector<float>() == std::vector<float>{0, 3, 1, 0});
}

TEST_CASE("lax.associative_scan over a pytree: a linear recurrence as pairs, forward and reverse, eager, jit, sharded") {
  // h[t] = a[t] h[t-1] + b[t], h[-1] = 0, as the scan of (a, b) with
  // (a1, b1) . (a2, b2) = (a1 a2, a2 b1 + b2): JAX's classic pytree use.
  using Pair = std::pair<ts::Array, ts::Array>;
  auto combine = [](const Pair& x, const Pair& y) { return Pair(x.first * y.first, y.first * x.second + y.second); };
  for (std::int64_t n : {1, 2, 7, 8, 13}) {
    CAPTURE(n);
    std::vector<double> av, bv;
    for (std::int64_t i = 0; i < n; ++i) av.push_back(0.5 + 0.05 * double(i % 7)), bv.push_back(std::sin(double(i)));
    for (bool reverse : {false, true}) {
      CAPTURE(reverse);
      std::vector<double> want(static_cast<std::size_t>(n));
      double h = 0;
      for (std::int64_t s = 0; s < n; ++s) {
        const std::size_t t = std::size_t(reverse ? n - 1 - s : s);
        h = av[t] * h + bv[t];
        want[t] = h;
      }
      ts::Array a = ts::array(av, {n}), b = ts::array(bv, {n});
      ts::lax::AssociativeScanOptions o;
      o.reverse = reverse;
      Pair eager = ts::lax::associative_scan(combine, Pair(a, b), o);
      auto jitted = ts::jit([&](ts::Array x, ts::Array y) { return ts::lax::associative_scan(combine, Pair(x, y), o); });
      ts::Mesh mesh(ts::devices(), {ts::device_count()}, {"x"});
      Pair sharded = jitted(ts::device_put(a, ts::NamedSharding(mesh, P("x"))),
                            ts::device_put(b, ts::NamedSharding(mesh, P("x"))));
      for (const Pair* r : {&eager, &sharded}) {
        auto got = r->second.to_vector<double>();
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
      }
    }
  }
  // Leaves of different lengths along the axis: JAX's ValueError.
  CHECK_THROWS_AS(ts::lax::associative_scan(combine, Pair(ts::ones({3}), ts::ones({4}))), ts::ValueError);
}

TEST_CASE("lax.associative_scan along a split axis scans blocks and exchanges their totals, never the array") {
  // A non-commutative combine (the linear recurrence's pairs, as above) on
  // [n, 3] split by rows over 1, 2, 4 and 8 devices, forward and reverse,
  // n a multiple of the device count (blocked) and not (the plain
  // parallel prefix): equal to a host loop; and on 8 devices what moves is
  // a few values per device.
  using Pair = std::pair<ts::Array, ts::Array>;
  auto combine = [](const Pair& x, const Pair& y) { return Pair(x.first * y.first, y.first * x.second + y.second); };
  const auto all = ts::devices();
  for (std::int64_t n : {64, 40, 13}) {
    std::vector<double> av, bv;
    for (std::int64_t i = 0; i < n * 3; ++i) av.push_back(0.6 + 0.04 * double(i % 9)), bv.push_back(std::cos(0.3 * double(i)));
    ts::Array a = ts::array(av, {n, 3}), b = ts::array(bv, {n, 3});
    for (bool reverse : {false, true}) {
      std::vector<double> want(av.size());
      for (std::int64_t c = 0; c < 3; ++c) {
        double h = 0;
        for (std::int64_t s = 0; s < n; ++s) {
          const std::int64_t r = reverse ? n - 1 - s : s;
          h = av[std::size_t(r * 3 + c)] * h + bv[std::size_t(r * 3 + c)];
          want[std::size_t(r * 3 + c)] = h;
        }
      }
      ts::lax::AssociativeScanOptions o;
      o.reverse = reverse;
      auto f = ts::jit([&](ts::Array x, ts::Array y) { return ts::lax::associative_scan(combine, Pair(x, y), o).second; });
      for (int d : {1, 2, 4, 8}) {
        CAPTURE(n);
        CAPTURE(reverse);
        CAPTURE(d);
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + d), {d}, {"x"});
        auto xs = ts::device_put(a, ts::NamedSharding(mesh, P("x"))), ys = ts::device_put(b, ts::NamedSharding(mesh, P("x")));
        auto got = f(xs, ys).to_vector<double>();
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
        if (d == 8 && n == 64) {
          double moved = 0;
          for (auto& t : f.lower(xs, ys).compile().communication()) moved += t.bytes_per_device;
          // Each block's total (a pair of 3 doubles) from 7 peers, not the 2 x 64 x 3 array (3 KiB).
          CHECK(moved <= 2.0 * 3 * 8 * 8);
        }
      }
    }
  }
}

TEST_CASE("lax.reduce over a pytree: an argmax as (value, index) pairs, eager, jit and sharded, against a host loop") {
  // (v1, i1) . (v2, i2): the larger value, the lower index on ties, as
  // JAX's argmax reduction; init (-inf, 0).
  using Pair = std::pair<ts::Array, ts::Array>;
  auto combine = [](const Pair& x, const Pair& y) {
    ts::Array take_y = (y.first > x.first) | ((y.first == x.first) & (y.second < x.second));
    return Pair(ts::where(take_y, y.first, x.first), ts::where(take_y, y.second, x.second));
  };
  const Pair init(ts::array(-INFINITY), ts::array(0));
  for (std::int64_t rows : {1, 5, 8}) {
    for (std::int64_t cols : {1, 6, 13}) {
      CAPTURE(rows);
      CAPTURE(cols);
      std::vector<float> v;
      std::vector<std::int32_t> idx;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) v.push_back(float((r * 7 + c * 5) % 9)), idx.push_back(std::int32_t(c));
      std::vector<float> want_v(std::size_t(rows), -INFINITY);
      std::vector<std::int32_t> want_i(std::size_t(rows), 0);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = cols - 1; c >= 0; --c)
          if (v[std::size_t(r * cols + c)] >= want_v[std::size_t(r)])
            want_v[std::size_t(r)] = v[std::size_t(r * cols + c)], want_i[std::size_t(r)] = std::int32_t(c);
      Pair xs(ts::array(v, {rows, cols}), ts::array(idx, {rows, cols}));
      Pair eager = ts::lax::reduce(xs, init, combine, {1});
      auto jitted = ts::jit([&](ts::Array a, ts::Array b) { return ts::lax::reduce(Pair(a, b), init, combine, {1}); });
      ts::Mesh mesh(ts::devices(), {ts::device_count()}, {"x"});
      for (auto spec : {P("x"), P(ts::None, "x")}) {
        Pair sharded = jitted(ts::device_put(xs.first, ts::NamedSharding(mesh, spec)),
                              ts::device_put(xs.second, ts::NamedSharding(mesh, spec)));
        CHECK(sharded.first.to_vector<float>() == want_v);
        CHECK(sharded.second.to_vector<std::int32_t>() == want_i);
      }
      CHECK(eager.first.to_vector<float>() == want_v);
      CHECK(eager.second.to_vector<std::int32_t>() == want_i);
      // The argmax it computes is jnp.argmax's.
      CHECK(eager.second.to_vector<std::int32_t>() == ts::argmax(xs.first, 1).to_vector<std::int32_t>());
    }
  }
  // One init value per operand, scalars, one shape.
  auto same = [](const std::vector<ts::Array>& a, const std::vector<ts::Array>&) { return a; };
  CHECK_THROWS_AS(ts::lax::reduce({ts::ones({3}), ts::ones({3})}, {ts::array(0.0f)}, same, {0}), ts::ValueError);
  CHECK_THROWS_AS(ts::lax::reduce({ts::ones({3}), ts::ones({4})}, {ts::array(0.0f), ts::array(0.0f)}, same, {0}),
                  ts::ShapeError);
  CHECK_THROWS_AS(ts::lax::reduce({ts::ones({3})}, {ts::ones({2})}, same, {0}), ts::ShapeError);
}

TEST_CASE("cumlogsumexp's derivative takes O(n) memory per line, and matches the O(n^2) sum it stands for") {
  // d/dx[j] of sum_i w[i] y[i] is sum over i >= j of w[i] exp(x[j] - y[i]):
  // summed directly on the host in long double (O(n^2)), on a long line with
  // large and very negative values (weights that underflow).
  const std::int64_t rows = 16, n = 2048;
  std::vector<float> xv;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < n; ++i) xv.push_back(float(40.0 * std::sin(0.013 * double(i * (r + 1))) + 0.01 * double(i)));
  auto x = ts::array(xv, {rows, n});
  auto loss = [](const ts::Array& a) {
    auto w = 1.0f + 0.5f * ts::cos(ts::arange(0.0, double(a.shape()[1]), 1.0, ts::float32));  // positive: no cancellation
    return ts::sum(ts::lax::cumlogsumexp(a, 1) * w);
  };
  auto g = ts::jit(ts::grad(loss));
  const auto mem = g.lower(x).compile().memory_analysis();
  const double line = double(rows * n * 4);
  MESSAGE("cumlogsumexp gradient, f32[16, 2048]: peak ", mem.peak_memory_in_bytes, " bytes = ",
          double(mem.peak_memory_in_bytes) / line, " arrays of the input's size (n^2 weights would be ", double(n), ")");
  CHECK(double(mem.peak_memory_in_bytes) < 16 * line);
  auto got = g(x).to_vector<float>();
  for (std::int64_t r : {std::int64_t(0), std::int64_t(7), rows - 1}) {
    std::vector<long double> y(static_cast<std::size_t>(n));
    long double acc = -INFINITY;
    for (std::int64_t i = 0; i < n; ++i) {
      const long double v = xv[std::size_t(r * n + i)];
      const long double m = std::max(acc, v);
      acc = m + std::log(std::exp(acc - m) + std::exp(v - m));
      y[std::size_t(i)] = acc;
    }
    for (std::int64_t j : {std::int64_t(0), std::int64_t(1), std::int64_t(500), n - 2, n - 1}) {
      long double want = 0;
      for (std::int64_t i = j; i < n; ++i)
        want += (1.0L + 0.5L * std::cos((long double)(float(i)))) * std::exp((long double)xv[std::size_t(r * n + j)] - y[std::size_t(i)]);
      CAPTURE(r);
      CAPTURE(j);
      CHECK(got[std::size_t(r * n + j)] == doctest::Approx(double(want)).epsilon(2e-3).scale(1e-6));
    }
  }
  // The first element's tangent is its own, even at -inf (JAX's scan leaves it).
  auto jv = ts::jvp([](const ts::Array& a) { return ts::lax::cumlogsumexp(a); }, ts::array(std::vector<double>{-INFINITY, 1.0}),
                    ts::array(std::vector<double>{3.0, 5.0}));
  CHECK(jv.second.to_vector<double>() == std::vector<double>{3.0, 5.0});
}

TEST_CASE("sort along a split axis moves the split to another dim by all-to-all, never gathering the array") {
  const auto all = ts::devices();
  auto count = [](const std::string& text, const std::string& what) {
    int k = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++k;
    return k;
  };
  struct Case {
    std::int64_t rows, cols;
    int devices;
    int axis;  // sorted (and split) axis
  };
  for (const Case& c : {Case{64, 24, 8, 0}, Case{24, 64, 8, 1}, Case{13, 10, 3, 0}, Case{40, 6, 4, 0}, Case{7, 9, 2, 1}}) {
    CAPTURE(c.rows);
    CAPTURE(c.cols);
    CAPTURE(c.devices);
    CAPTURE(c.axis);
    std::vector<float> v;
    for (std::int64_t i = 0; i < c.rows * c.cols; ++i) v.push_back(float((i * 37 + 11) % 101) - 50.0f);
    auto x = ts::array(v, {c.rows, c.cols});
    // Host reference: each line along the axis sorted (and its argsort, stable).
    std::vector<float> want = v;
    std::vector<int> want_idx(v.size());
    const std::int64_t lines = c.axis == 0 ? c.cols : c.rows, len = c.axis == 0 ? c.rows : c.cols;
    for (std::int64_t l = 0; l < lines; ++l) {
      auto at = [&](std::int64_t i) { return std::size_t(c.axis == 0 ? i * c.cols + l : l * c.cols + i); };
      std::vector<int> order(static_cast<std::size_t>(len));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int p, int q) { return v[at(p)] < v[at(q)]; });
      for (std::int64_t i = 0; i < len; ++i) want[at(i)] = v[at(order[std::size_t(i)])], want_idx[at(i)] = order[std::size_t(i)];
    }
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + c.devices), {c.devices}, {"x"});
    auto xs = ts::device_put(x, ts::NamedSharding(mesh, c.axis == 0 ? P("x") : P(ts::None, "x")));
    const int axis = c.axis;
    auto f = ts::jit([axis](const ts::Array& a) { return ts::sort(a, axis); });
    auto g = ts::jit([axis](const ts::Array& a) { return ts::argsort(a, axis); });
    CHECK(f(xs).to_vector<float>() == want);
    CHECK(g(xs).to_vector<int>() == want_idx);
    if (c.devices == 8) {
      const auto text = f.lower(xs).compile().as_text();
      CHECK(count(text, "all-gather") == 0);
      CHECK(count(text, "all-to-all(") == 2);  // there and back (the program's lines, not the thunks' list)
      double moved = 0;
      for (auto& t : f.lower(xs).compile().communication()) moved += t.bytes_per_device;
      // Each way, a device keeps 1/8 of its block and receives 7/8 of a block: 2 x 7/8 x 768 bytes.
      CHECK(moved <= 2 * 0.875 * double(c.rows * c.cols * 4 / 8) + 1);
    }
  }
}

TEST_CASE("a slice of a split dim gathers only the devices' windows of it, not the dim (x[0], x[-1], strided, median)") {
  const auto all = ts::devices();
  struct Case {
    std::int64_t rows;
    int devices;
    std::int64_t start, limit, stride;
  };
  for (const Case& c : {Case{64, 8, 0, 1, 1}, Case{64, 8, 63, 64, 1}, Case{64, 8, 3, 50, 7}, Case{13, 3, 2, 13, 5},
                        Case{13, 8, 12, 13, 1}, Case{40, 4, 9, 31, 1}, Case{5, 8, 1, 5, 2}}) {
    CAPTURE(c.rows);
    CAPTURE(c.devices);
    CAPTURE(c.start);
    CAPTURE(c.stride);
    std::vector<float> v;
    for (std::int64_t i = 0; i < c.rows * 6; ++i) v.push_back(float(i) * 0.5f - 7.0f);
    auto x = ts::array(v, {c.rows, 6});
    std::vector<float> want;
    for (std::int64_t r = c.start; r < c.limit; r += c.stride)
      for (std::int64_t j = 0; j < 6; ++j) want.push_back(v[std::size_t(r * 6 + j)]);
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + c.devices), {c.devices}, {"x"});
    auto xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
    auto f = ts::jit([c](const ts::Array& a) { return a.index({ts::slice(c.start, c.limit, c.stride)}) * 2.0f; });
    auto got = f(xs).to_vector<float>();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i] * 2.0f);
    if (c.rows == 64 && c.stride == 1) {
      double moved = 0;
      for (auto& t : f.lower(xs).compile().communication()) moved += t.bytes_per_device;
      // One row's window from each of 7 peers (6 floats each), not the 64 x 6 array.
      CHECK(moved <= 7.0 * 6 * 4);
    }
  }
  // The median along a split axis: the sort moves the split away and back
  // (two all-to-alls), then the middle rows are windows, not the array.
  auto mesh = ts::make_mesh({8}, {"x"});
  std::vector<float> v;
  for (int i = 0; i < 1024 * 8; ++i) v.push_back(float((i * 7919) % 1000) * 0.01f);
  auto x = ts::array(v, {1024, 8});
  auto xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
  auto med = ts::jit([](const ts::Array& a) { return ts::median(a, 0); });
  CHECK(med(xs).to_vector<float>() == ts::median(x, 0).to_vector<float>());
  double moved = 0;
  for (auto& t : med.lower(xs).compile().communication()) moved += t.bytes_per_device;
  // The array is 32 KiB (gathering the axis: 28 KiB a device). The two
  // all-to-alls move 7/8 of a device's 4 KiB each; the two middle rows come
  // as windows (a row from each of 7 peers); the NaN count is one all-reduce.
  CHECK(moved <= 2 * 0.875 * 4096 + 2 * 7 * 8 * 4 + 8 * 4 * 2);
}

TEST_CASE("a shifted slice of a split dim (x[1:], x[:-1], diff) stays split: each device gets its next tile's first rows") {
  const auto all = ts::devices();
  for (std::int64_t rows : {64, 13, 9, 40}) {
    for (int devices : {2, 3, 8}) {
      for (auto [start, limit] : {std::pair<std::int64_t, std::int64_t>{1, rows}, {0, rows - 1}, {2, rows}, {1, rows - 1}}) {
        CAPTURE(rows);
        CAPTURE(devices);
        CAPTURE(start);
        CAPTURE(limit);
        std::vector<float> v;
        for (std::int64_t i = 0; i < rows * 5; ++i) v.push_back(float(i % 23) * 0.25f - 2.0f);
        auto x = ts::array(v, {rows, 5});
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + devices), {devices}, {"x"});
        auto xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
        auto f = ts::jit([start, limit](const ts::Array& a) { return a.index({ts::slice(start, limit)}) * 3.0f; });
        auto got = f(xs).to_vector<float>();
        std::vector<float> want;
        for (std::int64_t r = start; r < limit; ++r)
          for (std::int64_t j = 0; j < 5; ++j) want.push_back(v[std::size_t(r * 5 + j)] * 3.0f);
        CHECK(got == want);
        // diff: x[1:] - x[:-1].
        auto df = ts::jit([](const ts::Array& a) { return ts::diff(a, 1, 0); });
        CHECK(df(xs).to_vector<float>() == ts::diff(x, 1, 0).to_vector<float>());
        if (rows == 64 && devices == 8) {
          double moved = 0;
          for (auto& t : f.lower(xs).compile().communication()) moved += t.bytes_per_device;
          // At most `start` rows (5 floats each) from the next device, not the 64 x 5 array.
          CHECK(moved <= double(start * 5 * 4));
          double dmoved = 0;
          for (auto& t : df.lower(xs).compile().communication()) dmoved += t.bytes_per_device;
          CHECK(dmoved <= 5 * 4);
          // The result stays split.
          CHECK(f(xs).sharding() == ts::Sharding(ts::NamedSharding(mesh, P("x"))));
        }
      }
    }
  }
  // A 2-D mesh: rows split over 'x', columns over 'y'; the stencil x[2:] - 2 x[1:-1] + x[:-2].
  auto mesh2 = ts::make_mesh({4, 2}, {"x", "y"});
  std::vector<float> v;
  for (int i = 0; i < 32 * 6; ++i) v.push_back(float((i * 13) % 17) - 8.0f);
  auto x = ts::array(v, {32, 6});
  auto lap = [](const ts::Array& a) {
    return a.index({ts::slice(2, 32)}) - 2.0f * a.index({ts::slice(1, 31)}) + a.index({ts::slice(0, 30)});
  };
  auto xs = ts::device_put(x, ts::NamedSharding(mesh2, P("x", "y")));
  CHECK(ts::jit(lap)(xs).to_vector<float>() == lap(x).to_vector<float>());
}
