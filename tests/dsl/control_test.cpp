// lax.cond / switch / while_loop / fori_loop / scan: closed forms, the
// reference interpreter on 1..8 devices (even and uneven, sharded and
// replicated), JAX's errors, and derivatives against finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <numeric>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::P;
namespace lax = tessel::lax;

namespace {

std::vector<float> vals(const ts::Array& a) { return a.astype(ts::DType::float32).to_vector<float>(); }

void close(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
}

ts::Mesh mesh_of(int n) {
  const auto all = ts::devices();
  return ts::Mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
}

}  // namespace

TEST_CASE("cond picks a branch by a traced predicate, eagerly and under jit") {
  ts::Array x = ts::arange(4.0f);
  auto f = [](ts::Array v) {
    return lax::cond(ts::sum(v) > 3.0f, [](ts::Array a) { return a * 2.0f; }, [](ts::Array a) { return -a; }, v);
  };
  close(vals(f(x)), {0, 2, 4, 6});
  close(vals(f(x - 5.0f)), {5, 4, 3, 2});
  auto jf = ts::jit(f);
  close(vals(jf(x)), {0, 2, 4, 6});
  close(vals(jf(x - 5.0f)), {5, 4, 3, 2});
  // Pytree operands and results; closures over concrete and traced arrays.
  ts::Array k = ts::array({10.0f, 20.0f, 30.0f, 40.0f});
  auto g = ts::jit([&](ts::Array v, ts::Array w) {
    ts::Array scale = ts::max(w);  // traced, closed over by the branches
    auto r = lax::cond(
        v.index({0}) > 0.5f,
        [&](const std::pair<ts::Array, ts::Array>& p) { return std::pair{p.first + k, p.second * scale}; },
        [&](const std::pair<ts::Array, ts::Array>& p) { return std::pair{p.first - k, p.second}; },
        std::pair{v, w});
    return r.first + r.second;
  });
  ts::Array w = ts::array({1.0f, 2.0f, 3.0f, 4.0f});
  close(vals(g(x, w)), {-9, -17, -25, -33});  // v[0] = 0: false branch
  close(vals(g(x + 1.0f, w)), {15, 30, 45, 60});
}

TEST_CASE("switch clamps its index, as lax.switch") {
  std::vector<std::function<ts::Array(ts::Array)>> branches = {
      [](ts::Array a) { return a + 1.0f; }, [](ts::Array a) { return a * 10.0f; }, [](ts::Array a) { return -a; }};
  ts::Array x = ts::array({1.0f, 2.0f});
  for (int i : {-3, 0, 1, 2, 7}) {
    CAPTURE(i);
    ts::Array idx = ts::array(std::int32_t(i));
    const int b = std::clamp(i, 0, 2);
    std::vector<double> want = b == 0 ? std::vector<double>{2, 3} : b == 1 ? std::vector<double>{10, 20} : std::vector<double>{-1, -2};
    close(vals(lax::switch_(idx, branches, x)), want);
    close(vals(ts::jit([&](ts::Array j, ts::Array v) { return lax::switch_(j, branches, v); })(idx, x)), want);
  }
}

TEST_CASE("while_loop and fori_loop run to the closed form") {
  // Halve until below 1, counting steps: a pytree carry.
  using C = std::pair<ts::Array, ts::Array>;
  auto halve = [](ts::Array v) {
    return lax::while_loop([](const C& c) { return ts::sum(c.first) >= 1.0f; },
                           [](const C& c) { return C(c.first * 0.5f, c.second + 1); },
                           C(v, ts::array(std::int32_t(0))));
  };
  auto r = halve(ts::array({3.0f, 5.0f}));
  close(vals(r.first), {0.1875, 0.3125});
  CHECK(r.second.item<std::int32_t>() == 4);
  auto jr = ts::jit([&](ts::Array v) { return halve(v).second; })(ts::array({30.0f, 50.0f}));
  CHECK(jr.item<std::int32_t>() == 7);
  // A loop that never runs returns its init.
  auto z = halve(ts::array({0.25f}));
  CHECK(z.second.item<std::int32_t>() == 0);
  // fori_loop: static bounds (a scan) and traced ones (a while loop).
  auto body = [](ts::Array i, ts::Array acc) { return acc + i.astype(ts::DType::float32) * 2.0f; };
  ts::Array zero = ts::zeros({3});
  close(vals(lax::fori_loop(2, 7, body, zero)), {40, 40, 40});  // 2 * (2+3+4+5+6)
  close(vals(ts::jit([&](ts::Array a) { return lax::fori_loop(0, 100, body, a); })(zero)), {9900, 9900, 9900});
  close(vals(lax::fori_loop(5, 2, body, zero)), {0, 0, 0});
  auto traced = ts::jit([&](ts::Array lo, ts::Array hi, ts::Array a) { return lax::fori_loop(lo, hi, body, a); });
  close(vals(traced(ts::array(std::int32_t(2)), ts::array(std::int32_t(7)), zero)), {40, 40, 40});
}

TEST_CASE("scan: carries, stacked ys, reverse, pytree xs, length without xs") {
  ts::Array xs = ts::arange(1.0f, 6.0f);  // 1..5
  auto cumsum = [](ts::Array c, ts::Array x) { return std::pair{c + x, c + x}; };
  auto [last, ys] = lax::scan(cumsum, ts::array(0.0f), xs);
  CHECK(last.item<float>() == 15.0f);
  close(vals(ys), {1, 3, 6, 10, 15});
  lax::ScanOptions rev;
  rev.reverse = true;
  auto [rlast, rys] = lax::scan(cumsum, ts::array(0.0f), xs, rev);
  CHECK(rlast.item<float>() == 15.0f);
  close(vals(rys), {15, 14, 12, 9, 5});
  // xs a pair of a vector and a matrix; ys a pair too.
  ts::Array m = ts::arange(10.0f).reshape({5, 2});
  auto step = [](ts::Array c, const std::pair<ts::Array, ts::Array>& x) {
    ts::Array nc = c * x.first + ts::sum(x.second);
    return std::pair{nc, std::pair{nc, x.second * 2.0f}};
  };
  auto jstep = ts::jit([&](ts::Array c0, ts::Array a, ts::Array b) { return lax::scan(step, c0, std::pair{a, b}).second.first; });
  std::vector<double> want;
  double c = 1;
  for (int i = 0; i < 5; ++i) {
    c = c * (i + 1) + (4 * i + 1);
    want.push_back(c);
  }
  close(vals(jstep(ts::array(1.0f), xs, m)), want);
  close(vals(lax::scan(step, ts::array(1.0f), std::pair{xs, m}).second.second), {0, 2, 4, 6, 8, 10, 12, 14, 16, 18});
  lax::ScanOptions len;
  len.length = 4;
  auto counted = lax::scan([](ts::Array c, const std::vector<ts::Array>&) { return std::pair{c * 2.0f, c}; },
                           ts::array(1.0f), std::vector<ts::Array>{}, len);
  CHECK(counted.first.item<float>() == 16.0f);
  close(vals(counted.second), {1, 2, 4, 8});
}

TEST_CASE("control flow equals the interpreter on 1..8 devices, sharded and replicated, even and uneven") {
  std::mt19937 rng(7);
  int checked = 0;
  for (int n = 1; n <= 8; ++n) {
    ts::Mesh mesh = mesh_of(n);
    for (std::int64_t len : {8, 5}) {
      for (ts::DType t : {ts::DType::float32, ts::DType::int32}) {
        CAPTURE(n);
        CAPTURE(len);
        CAPTURE(ts::dtype_name(t));
        ts::Array x0 = ts::testing::random_array(rng, {len, 3}, t);
        for (ts::Array x : {x0, ts::device_put(x0, ts::NamedSharding(mesh, P("x"))),
                            ts::device_put(x0, ts::NamedSharding(mesh, P(ts::None, "x")))}) {
          // A loop whose body reduces over the (sharded) data.
          ts::testing::check(
              [](const std::vector<ts::Array>& a) {
                return lax::fori_loop(0, 3, [](ts::Array i, ts::Array v) { return v * 2 - ts::sum(v, 0) + i; }, a[0]);
              },
              {x});
          // A branch on a reduction of sharded data.
          ts::testing::check(
              [](const std::vector<ts::Array>& a) {
                return lax::cond(
                    ts::sum(a[0]) > 0, [](ts::Array v) { return v * 2 + ts::sum(v, 0); },
                    [](ts::Array v) { return v - ts::max(v, 1, true); }, a[0]);
              },
              {x});
          // A while loop with a data-dependent trip count.
          ts::testing::check(
              [](const std::vector<ts::Array>& a) {
                using C = std::pair<ts::Array, ts::Array>;
                return lax::while_loop([](const C& c) { return ts::logical_and(c.second < 4, ts::max(ts::abs(c.first)) < 100); },
                                       [](const C& c) { return C(c.first * 3 + 1, c.second + 1); },
                                       C(a[0], ts::array(std::int32_t(0))))
                    .first;
              },
              {x});
          // A scan over rows, carrying a row, stacking rows.
          ts::testing::check(
              [](const std::vector<ts::Array>& a) {
                auto r = lax::scan([](ts::Array c, ts::Array row) { return std::pair{c + row, c * row}; },
                                   ts::zeros_like(a[0].index({0})), a[0]);
                return r.second + r.first;
              },
              {x});
          checked += 4;
        }
      }
    }
  }
  CHECK(checked == 8 * 2 * 2 * 3 * 4);
}

TEST_CASE("a loop's carry keeps its type: TypeError naming the leaf and both types") {
  using C = std::pair<ts::Array, ts::Array>;
  ts::Array x = ts::zeros({3});
  try {
    lax::while_loop([](const C& c) { return c.second < 3; },
                    [](const C& c) { return C(ts::concatenate({c.first, c.first}), c.second + 1); },
                    C(x, ts::array(std::int32_t(0))));
    FAIL("no error");
  } catch (const ts::TypeError& e) {
    const std::string m = e.what();
    CHECK(m.find("[0]") != std::string::npos);
    CHECK(m.find("f32[3]") != std::string::npos);
    CHECK(m.find("f32[6]") != std::string::npos);
  }
  CHECK_THROWS_AS(lax::fori_loop(0, 3, [](ts::Array, ts::Array v) { return v.astype(ts::DType::int32); }, x),
                  ts::TypeError);
  CHECK_THROWS_AS(lax::scan([](ts::Array c, ts::Array v) { return std::pair{c.index({0}), v}; }, x, ts::zeros({2, 3})),
                  ts::TypeError);
  // A weakly typed init takes the body's dtype, as JAX retraces it.
  auto r = lax::fori_loop(0, 3, [](ts::Array i, ts::Array v) { return v + 0.5f; }, ts::array(0.0f) * 0 + 1);
  CHECK(r.item<float>() == 2.5f);
  CHECK_THROWS_AS(lax::while_loop([](ts::Array c) { return c; }, [](ts::Array c) { return c; }, x), ts::TypeError);
  CHECK_THROWS_AS(lax::cond(ts::array(true), [](ts::Array v) { return v; }, [](ts::Array v) { return v.index({0}); }, x),
                  ts::TypeError);
  CHECK_THROWS_AS(lax::cond(x > 0, [](ts::Array v) { return v; }, [](ts::Array v) { return v; }, x), ts::TypeError);
  CHECK_THROWS_AS(lax::scan([](ts::Array c, ts::Array v) { return std::pair{c, v}; }, x, ts::zeros({})), ts::ValueError);
  lax::ScanOptions len;
  len.length = 3;
  CHECK_THROWS_AS(lax::scan([](ts::Array c, ts::Array v) { return std::pair{c, v}; }, x, ts::zeros({2, 3}), len),
                  ts::ValueError);
}

namespace {
// Central finite differences of scalar f at x, element by element (float64).
std::vector<double> fd(const std::function<ts::Array(ts::Array)>& f, const ts::Array& x) {
  auto h = x.astype(ts::DType::float64).to_vector<double>();
  std::vector<double> g;
  for (size_t i = 0; i < h.size(); ++i) {
    auto up = h, dn = h;
    up[i] += 1e-6;
    dn[i] -= 1e-6;
    double fu = f(ts::array(up, x.shape())).item<double>(), fdn = f(ts::array(dn, x.shape())).item<double>();
    g.push_back((fu - fdn) / 2e-6);
  }
  return g;
}
void check_grad(const std::function<ts::Array(ts::Array)>& f, const ts::Array& x) {
  auto want = fd(f, x);
  auto got = ts::grad(f)(x).to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  auto jgot = ts::jit(ts::grad(f))(x).to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(jgot[i] == doctest::Approx(want[i]).epsilon(1e-6));
}
}  // namespace

TEST_CASE("grad through cond, scan and fori_loop against finite differences; jvp through while_loop") {
  ts::Array x = ts::array(std::vector<double>{0.3, -1.2, 0.7, 2.0});
  check_grad(
      [](ts::Array v) {
        return ts::sum(lax::cond(ts::sum(v) > 1.0, [](ts::Array a) { return ts::sin(a) * a; },
                                 [](ts::Array a) { return a * a * a; }, v));
      },
      x);
  check_grad(
      [](ts::Array v) {
        return ts::sum(lax::cond(ts::sum(v) > 100.0, [](ts::Array a) { return ts::sin(a) * a; },
                                 [](ts::Array a) { return a * a * a; }, v));
      },
      x);
  // scan: a carry multiplied by each x, a y of sin(carry); and a closed-over constant.
  check_grad(
      [](ts::Array v) {
        ts::Array w = v * 0.5;
        auto r = lax::scan([&](ts::Array c, ts::Array e) { return std::pair{c * e + w.index({1}), ts::sin(c)}; },
                           ts::array(1.0), v);
        return r.first + ts::sum(r.second);
      },
      x);
  lax::ScanOptions rev;
  rev.reverse = true;
  check_grad(
      [&](ts::Array v) {
        auto r = lax::scan([](ts::Array c, ts::Array e) { return std::pair{ts::tanh(c + e), c * e}; }, v.index({0}), v, rev);
        return r.first * 3.0 + ts::sum(r.second);
      },
      x);
  check_grad(
      [](ts::Array v) {
        return ts::sum(lax::fori_loop(0, 4, [](ts::Array i, ts::Array a) { return ts::sin(a) * (i.astype(ts::DType::float64) + 1.0); }, v));
      },
      x);
  // jvp through a while loop (forward mode).
  auto wf = [](ts::Array v) {
    using C = std::pair<ts::Array, ts::Array>;
    return lax::while_loop([](const C& c) { return c.second < 3; },
                           [](const C& c) { return C(ts::sin(c.first) * 2.0, c.second + 1); },
                           C(v, ts::array(std::int32_t(0))))
        .first;
  };
  ts::Array dir = ts::array(std::vector<double>{1.0, 0.5, -1.0, 0.25});
  auto [y, dy] = ts::jvp(wf, std::tuple{x}, std::tuple{dir});
  auto yd = dy.to_vector<double>();
  auto xv = x.to_vector<double>(), dv = dir.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    double a = xv[i], d = dv[i];
    for (int k = 0; k < 3; ++k) d = 2 * std::cos(a) * d, a = 2 * std::sin(a);
    CHECK(yd[i] == doctest::Approx(d).epsilon(1e-9));
  }
  // Reverse mode through a while loop: JAX's error.
  CHECK_THROWS_AS(ts::grad([&](ts::Array v) { return ts::sum(wf(v)); })(x), ts::ValueError);
}

TEST_CASE("control flow inside shard_map bodies: collectives in loops and branches, vma typing, gradients") {
  std::mt19937 rng(3);
  for (int n : {1, 2, 3, 4, 8}) {
    CAPTURE(n);
    ts::Mesh mesh = mesh_of(n);
    ts::Array x = ts::testing::random_array(rng, {std::int64_t(2 * n), 3}, ts::DType::float32);
    // A loop whose body all-reduces each step; a branch on a psum (the
    // same on every device) whose branches hold collectives.
    ts::testing::check(
        [&](const std::vector<ts::Array>& a) {
          return ts::shard_map(
              [](ts::Array b) {
                b = lax::fori_loop(0, 3, [](ts::Array, ts::Array v) { return v * 0.5f + ts::psum(v, "x"); }, b);
                return lax::cond(ts::psum(ts::sum(b), "x") > 0, [](ts::Array v) { return ts::pmax(v, "x") - v; },
                                 [](ts::Array v) { return ts::ppermute(v, "x", {{0, 1 % ts::axis_size("x")}}); }, b);
              },
              mesh, P("x"), P("x"))(a[0]);
        },
        {x});
    // A branch on a varying predicate without collectives; a scan shifting rows around the ring.
    ts::testing::check(
        [&](const std::vector<ts::Array>& a) {
          return ts::shard_map(
              [](ts::Array b) {
                ts::Array c = lax::cond(ts::axis_index("x") == 0, [](ts::Array v) { return v * 10.0f; },
                                        [](ts::Array v) { return v - 1.0f; }, b);
                const int k = ts::axis_size("x");
                std::vector<std::pair<int, int>> ring;
                for (int i = 0; i < k; ++i) ring.push_back({i, (i + 1) % k});
                auto r = lax::scan([&](ts::Array carry, ts::Array row) {
                  ts::Array next = ts::ppermute(carry, "x", ring) + row;
                  return std::pair{next, next * 2.0f};
                }, ts::zeros({3}), c);
                return r.second + r.first;
              },
              mesh, P("x"), P("x"))(a[0]);
        },
        {x});
    // A varying predicate with collectives in the branches: rejected, never a hang.
    CHECK_THROWS_AS(ts::shard_map(
                        [](ts::Array b) {
                          return lax::cond(ts::axis_index("x") == 0, [](ts::Array v) { return ts::psum(v, "x"); },
                                           [](ts::Array v) { return v; }, b);
                        },
                        mesh, P("x"), P("x"))(x),
                    ts::NotImplementedError);
    // Gradient of a shard_map with a scan and a psum in it, against finite differences.
    ts::Array xd = x.astype(ts::DType::float64);
    auto loss = [&](ts::Array v) {
      return ts::sum(ts::shard_map(
          [](ts::Array b) {
            auto r = lax::scan([](ts::Array c, ts::Array row) { return std::pair{ts::sin(c) + row, c * row}; },
                               ts::zeros({3}, ts::DType::float64), b);
            return ts::psum(r.second, "x") + r.first;
          },
          mesh, P("x"), P("x"))(v));
    };
    auto want = fd(loss, xd);
    auto got = ts::grad(loss)(xd).to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  }
}

TEST_CASE("a scan over xs split along the scanned axis fetches one row per step, never the whole stack") {
  for (int n : {2, 3, 4}) {
    CAPTURE(n);
    ts::Mesh mesh = mesh_of(n);
    for (std::int64_t len : {8, 7}) {
      CAPTURE(len);
      ts::Array xs0 = ts::arange(double(len * 4)).reshape({len, 4}).astype(ts::DType::float32) - 9.5f;
      ts::Array xs = ts::device_put(xs0, ts::NamedSharding(mesh, P("x")));
      auto f = ts::jit([](ts::Array c0, ts::Array s) {
        auto r = lax::scan([](ts::Array c, ts::Array row) { return std::pair{c * 0.5f + row, -c}; }, c0, s);
        return std::pair{r.first, r.second};
      });
      auto [last, ys] = f(ts::zeros({4}), xs);
      auto h = xs0.to_vector<float>();
      std::vector<float> c(4, 0.0f), want_ys;
      for (std::int64_t i = 0; i < len; ++i) {
        for (int j = 0; j < 4; ++j) want_ys.push_back(-c[size_t(j)]);
        for (int j = 0; j < 4; ++j) c[size_t(j)] = c[size_t(j)] * 0.5f + h[size_t(i * 4 + j)];
      }
      CHECK(last.to_vector<float>() == c);
      CHECK(ys.to_vector<float>() == want_ys);
      const std::string text = f.lower(ts::zeros({4}), xs).compile().as_text();
      CHECK(text.find("all-gather") == std::string::npos);
      CHECK(text.find("all-reduce") != std::string::npos);
    }
  }
}

TEST_CASE("check_vma=false: a psum inside a loop transposes as JAX's untyped psum, like the same body unrolled") {
  ts::Mesh mesh = mesh_of(4);
  ts::Array x = ts::arange(24.0).reshape({8, 3}) * 0.1;
  auto scanned = [&](ts::Array v) {
    return ts::sum(ts::shard_map(
        [](ts::Array a) {
          return lax::scan([](ts::Array c, ts::Array r) { return std::pair{c + ts::psum(ts::sum(r * r), "x"), c}; },
                           ts::zeros({}, ts::DType::float64), a)
              .first;
        },
        mesh, P("x"), P(), {.check_vma = false})(v));
  };
  auto unrolled = [&](ts::Array v) {
    return ts::sum(ts::shard_map(
        [](ts::Array a) {
          ts::Array c = ts::zeros({}, ts::DType::float64);
          for (std::int64_t i = 0; i < a.shape()[0]; ++i) c = c + ts::psum(ts::sum(a.index({i}) * a.index({i})), "x");
          return c;
        },
        mesh, P("x"), P(), {.check_vma = false})(v));
  };
  auto a = ts::grad(scanned)(x).to_vector<double>(), b = ts::grad(unrolled)(x).to_vector<double>();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
}

TEST_CASE("a carry initialised without a sharding takes the one its body gives it: no communication in the loop") {
  ts::Mesh mesh = mesh_of(4);
  ts::Array x = ts::device_put(ts::arange(32.0f).reshape({8, 4}), ts::NamedSharding(mesh, P("x")));
  auto f = ts::jit([](ts::Array v) {
    ts::Array acc = lax::fori_loop(0, 5, [&](ts::Array, ts::Array a) { return a + v * 2.0f; }, ts::zeros({8, 4}));
    auto s = lax::scan([&](ts::Array c, ts::Array) { return std::pair{c * 0.5f + v, c}; }, ts::zeros({8, 4}),
                       ts::zeros({3, 1}));
    return acc + s.first;
  });
  ts::Array y = f(x);
  CHECK(y.sharding().is_equivalent_to(ts::NamedSharding(mesh, P("x")), 2));
  const std::string text = f.lower(x).compile().as_text();
  CHECK(text.find("all-gather") == std::string::npos);
  CHECK(text.find("all-reduce") == std::string::npos);
  auto h = ts::arange(32.0f).to_vector<float>();
  auto g = y.to_vector<float>();
  for (size_t i = 0; i < h.size(); ++i) {
    float c = 0;
    for (int k = 0; k < 3; ++k) c = c * 0.5f + h[i];
    CHECK(g[i] == doctest::Approx(10 * h[i] + c));
  }
}

TEST_CASE("loops and branches run alike in lockstep and on the devices' threads: collectives per step, trip counts that differ") {
  // Where the devices' threads outnumber the cores a launch runs in
  // lockstep (one thread for every device), control flow included: a loop's
  // collectives then meet no one. The same programs with lockstep launches
  // off run on the devices' threads, meeting every step: the same bits.
  std::mt19937 rng(11);
  for (int n : {2, 3, 8}) {
    CAPTURE(n);
    ts::Mesh mesh = mesh_of(n);
    ts::Array x = ts::device_put(ts::testing::random_array(rng, {std::int64_t(4 * n), 3}, ts::DType::float32),
                                 ts::NamedSharding(mesh, P("x")));
    std::vector<std::function<ts::Array(ts::Array)>> programs = {
        // jit: a psum per step where propagation puts it (mean of a split array).
        ts::jit([](ts::Array v) {
          return lax::fori_loop(0, 40, [](ts::Array, ts::Array y) { return y * 0.5f + ts::mean(y); }, v);
        }),
        // A while loop whose trip count differs between devices (no collective in it), then a psum.
        ts::jit([&](ts::Array v) {
          return ts::shard_map(
              [](ts::Array b) {
                using C = std::pair<ts::Array, ts::Array>;
                auto r = lax::while_loop([](const C& c) { return c.first <= ts::axis_index("x"); },
                                         [](const C& c) { return C(c.first + 1, c.second * 2.0f + 1.0f); },
                                         C(ts::array(std::int32_t(0)), b));
                return ts::psum(r.second, "x");
              },
              mesh, P("x"), P("x"))(v);
        }),
        // Branches that differ between devices, and a scan around the ring.
        ts::jit([&](ts::Array v) {
          return ts::shard_map(
              [](ts::Array b) {
                ts::Array c = lax::cond(ts::axis_index("x") % 2 == 0, [](ts::Array u) { return u * 10.0f; },
                                        [](ts::Array u) { return u - 1.0f; }, b);
                const int k = ts::axis_size("x");
                std::vector<std::pair<int, int>> ring;
                for (int i = 0; i < k; ++i) ring.push_back({i, (i + 1) % k});
                auto r = lax::scan(
                    [&](ts::Array carry, ts::Array row) {
                      ts::Array next = ts::ppermute(carry, "x", ring) + row;
                      return std::pair{next, ts::pmax(next, "x")};
                    },
                    ts::zeros({3}), c);
                return r.second + r.first;
              },
              mesh, P("x"), P("x"))(v);
        }),
    };
    for (std::size_t k = 0; k < programs.size(); ++k) {
      CAPTURE(k);
      const ts::HostArray lockstep = ts::testing::host_of(programs[k](x));
      ts::config().lockstep_launches = false;
      ts::HostArray threads;
      try {
        threads = ts::testing::host_of(programs[k](x));
      } catch (...) {
        ts::config().lockstep_launches = true;
        throw;
      }
      ts::config().lockstep_launches = true;
      CHECK(ts::testing::compare_arrays(lockstep, threads, 0, 0) == "");
    }
    // The while loop's closed form: device d runs d + 1 steps of 2v + 1.
    std::vector<float> xs = x.to_vector<float>(), want(3 * 4, 0.0f);
    for (int d = 0; d < n; ++d)
      for (int i = 0; i < 12; ++i) {
        double v = xs[std::size_t(d * 12 + i)];
        for (int s = 0; s <= d; ++s) v = v * 2 + 1;
        want[std::size_t(i)] += float(v);
      }
    const std::vector<float> got = programs[1](x).to_vector<float>();
    for (int d = 0; d < n; ++d)
      for (int i = 0; i < 12; ++i) CHECK(got[std::size_t(d * 12 + i)] == doctest::Approx(want[std::size_t(i)]).epsilon(1e-5));
  }
}

TEST_CASE("cost and communication count a loop's body as often as it runs, a cond's dearest branch") {
  ts::Mesh mesh = mesh_of(4);
  ts::Array x = ts::device_put(ts::ones({16}), ts::NamedSharding(mesh, P("x")));
  auto body = [](ts::Array y) { return ts::sin(y) + ts::mean(y); };
  auto step = [&](ts::Array, ts::Array y) { return body(y); };
  auto once = ts::jit(body).lower(x).compile();
  for (int steps : {1, 7}) {
    CAPTURE(steps);
    auto loop = ts::jit([&](ts::Array v) { return lax::fori_loop(0, steps, step, v); }).lower(x).compile();
    // sin of 4 elements per device per step: the transcendentals are exact.
    CHECK(loop.cost_analysis().at("transcendentals") == 4.0 * steps);
    CHECK(once.cost_analysis().at("transcendentals") == 4.0);
    CHECK(loop.cost_analysis().at("flops") >= steps * once.cost_analysis().at("flops"));
    // One all-reduce of a scalar per step.
    double moved = 0, moved_once = 0;
    for (auto& t : loop.communication()) moved += t.bytes_per_device;
    for (auto& t : once.communication()) moved_once += t.bytes_per_device;
    CHECK(moved_once > 0);
    CHECK(moved == doctest::Approx(steps * moved_once));
  }
  // A cond: the dearer branch (sin of every element against none).
  auto branch = ts::jit([](ts::Array v) {
                  return lax::cond(ts::sum(v) > 0, [](ts::Array u) { return ts::sin(u); }, [](ts::Array u) { return u; }, v);
                }).lower(x).compile();
  CHECK(branch.cost_analysis().at("transcendentals") == 4.0);
}
