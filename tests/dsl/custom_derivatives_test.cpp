// ts::custom_jvp and ts::custom_vjp (issue 40) with JAX's documentation
// examples and their known values: log1pexp stable at x = 100, gradient
// clipping, a fixed point differentiated implicitly (Newton's sqrt, whose
// derivative is 1 / (2 sqrt(a))); the rules used under grad, jvp, jit, vmap
// (an unbatched operand's cotangent summed over the batch), scan, cond and
// shard_map, on 1..8 devices with even and uneven splits; grad of grad
// through a custom_jvp rule; JAX's errors.
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::Array;
using ts::P;

namespace {

// The naive formula: its own gradient at 100 is exp(100) / (1 + exp(100)) = inf / inf.
Array log1pexp_naive(const Array& x) { return ts::log(1.0 + ts::exp(x)); }

const auto log1pexp = ts::custom_jvp(
    [](const Array& x) { return log1pexp_naive(x); },
    [](const std::tuple<Array>& primals, const std::tuple<Array>& tangents) {
      const auto& [x] = primals;
      const auto& [t] = tangents;
      return std::pair(log1pexp_naive(x), t * (1.0 - 1.0 / (1.0 + ts::exp(x))));
    });

// JAX's clip_gradient(lo, hi, x): the identity whose cotangent is clipped.
const auto clip_gradient = ts::custom_vjp(
    [](double, double, const Array& x) { return x; },
    [](double lo, double hi, const Array& x) { return std::pair(x, std::pair(lo, hi)); },
    [](const std::pair<double, double>& res, const Array& g) { return ts::clip(g, res.first, res.second); });

// x* = f(a, x*) by iteration; its derivative by the implicit function
// theorem: dx*/da = f_a / (1 - f_x) at the fixed point (JAX's fixed_point
// example, with the adjoint iteration solved in closed form).
Array newton_step(const Array& a, const Array& x) { return 0.5 * (x + a / x); }
Array iterate(const Array& a) {
  auto r = ts::lax::fori_loop(0, 40, [&](const Array&, const Array& x) { return newton_step(a, x); }, a);
  return r;
}
const auto newton_sqrt = ts::custom_vjp(
    [](const Array& a) { return iterate(a); },
    [](const Array& a) {
      Array x = iterate(a);
      return std::pair(x, std::pair(a, x));
    },
    [](const std::pair<Array, Array>& res, const Array& g) {
      const auto& [a, x] = res;
      auto f_a = ts::grad([](const Array& a, const Array& x) { return ts::sum(newton_step(a, x)); }, 0)(a, x);
      auto f_x = ts::grad([](const Array& a, const Array& x) { return ts::sum(newton_step(a, x)); }, 1)(a, x);
      return g * f_a / (1.0 - f_x);
    });

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

TEST_CASE("custom_jvp: log1pexp's gradient is finite at 100, under grad, jit, jvp and vmap") {
  auto loss = [](const Array& x) { return ts::sum(log1pexp(x)); };
  Array x = ts::array(std::vector<float>{0.f, 10.f, 100.f});
  // Without the rule the gradient at 100 is NaN (the documented failure).
  CHECK(std::isnan(ts::grad([](const Array& x) { return ts::sum(log1pexp_naive(x)); })(x).to_vector<float>()[2]));
  for (auto g : {ts::grad(loss)(x), ts::jit(ts::grad(loss))(x)}) {
    auto v = g.to_vector<float>();
    CHECK(v[0] == doctest::Approx(0.5));
    CHECK(v[1] == doctest::Approx(sigmoid(10)));
    CHECK(v[2] == doctest::Approx(1.0));
  }
  // Forward mode uses the rule too.
  auto [y, t] = ts::jvp([](const Array& x) { return log1pexp(x); }, x, ts::ones_like(x));
  CHECK(y.to_vector<float>()[0] == doctest::Approx(std::log(2.0)));
  CHECK(t.to_vector<float>()[2] == doctest::Approx(1.0));
  // vmap of grad, and grad of vmap: the batched rule.
  auto per = ts::vmap(ts::grad([](const Array& s) { return log1pexp(s); }))(x);
  CHECK(per.to_vector<float>()[2] == doctest::Approx(1.0));
  auto gv = ts::grad([](const Array& x) { return ts::sum(ts::vmap([](const Array& s) { return log1pexp(s); })(x)); })(x);
  CHECK(gv.to_vector<float>()[2] == doctest::Approx(1.0));
  CHECK(gv.to_vector<float>()[1] == doctest::Approx(sigmoid(10)));
  // The value itself is f's (the rule is only the derivative).
  CHECK(log1pexp(x).to_vector<float>()[1] == doctest::Approx(std::log1p(std::exp(10.0))));
}

TEST_CASE("custom_jvp: grad of grad differentiates the rule") {
  auto d = ts::grad([](const Array& x) { return ts::sum(log1pexp(x)); });
  auto dd = ts::grad([&](const Array& x) { return ts::sum(d(x)); });
  auto v = dd(ts::array(std::vector<double>{0.0, 2.0})).to_vector<double>();
  CHECK(v[0] == doctest::Approx(0.25));                              // sigmoid'(0)
  CHECK(v[1] == doctest::Approx(sigmoid(2) * (1 - sigmoid(2))));  // sigmoid'(2)
}

TEST_CASE("custom_vjp: clip_gradient clips the cotangent, not the value") {
  auto f = [](const Array& x) { return ts::sum(clip_gradient(-0.75, 0.75, 3.0 * x)); };
  Array x = ts::array(std::vector<float>{-2.f, 0.1f, 5.f});
  CHECK(clip_gradient(-0.75, 0.75, x).to_vector<float>() == x.to_vector<float>());
  for (auto g : {ts::grad(f)(x), ts::jit(ts::grad(f))(x)})
    CHECK(g.to_vector<float>() == std::vector<float>{2.25f, 2.25f, 2.25f});  // 3 * clip(1) = 3 * 0.75
  // A cotangent inside the range passes through.
  auto h = ts::grad([](const Array& x) { return ts::sum(0.5 * clip_gradient(-0.75, 0.75, x)); })(x);
  CHECK(h.to_vector<float>() == std::vector<float>{0.5f, 0.5f, 0.5f});
}

TEST_CASE("custom_vjp: a fixed point differentiated implicitly (Newton's sqrt)") {
  Array a = ts::array(std::vector<double>{2.0, 9.0});
  CHECK(newton_sqrt(a).to_vector<double>()[0] == doctest::Approx(std::sqrt(2.0)));
  auto loss = [](const Array& a) { return ts::sum(newton_sqrt(a)); };
  for (auto g : {ts::grad(loss)(a), ts::jit(ts::grad(loss))(a)}) {
    auto v = g.to_vector<double>();
    CHECK(v[0] == doctest::Approx(0.35355339));  // 1 / (2 sqrt 2), JAX's documented value
    CHECK(v[1] == doctest::Approx(1.0 / 6.0));
  }
}

TEST_CASE("custom_vjp: under vmap an unbatched operand's cotangent is summed over the batch") {
  // f(w, x) = w * x with a bwd that doubles w's cotangent (to tell the rule from the derivative).
  auto f = ts::custom_vjp([](const Array& w, const Array& x) { return w * x; },
                          [](const Array& w, const Array& x) { return std::pair(w * x, std::pair(w, x)); },
                          [](const std::pair<Array, Array>& r, const Array& g) {
                            return std::tuple(2.0 * ts::sum(g * r.second), g * r.first);
                          });
  Array w = ts::array(1.5f);
  Array xs = ts::array(std::vector<float>{1.f, 2.f, 3.f, 4.f});
  auto loss = [&](const Array& w, const Array& xs) {
    return ts::sum(ts::vmap([&](const Array& x) { return f(w, x); })(xs));
  };
  auto gw = ts::grad(loss, 0)(w, xs);
  CHECK(gw.item<float>() == doctest::Approx(2 * 10.0));  // 2 * sum(xs), summed over the batch
  auto gx = ts::grad(loss, 1)(w, xs);
  CHECK(gx.to_vector<float>() == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f});
  CHECK(ts::jit(ts::grad(loss, 0))(w, xs).item<float>() == doctest::Approx(20.0));
}

TEST_CASE("custom rules on 1..8 devices, even and uneven, inside scan, cond and shard_map") {
  const int max_devices = std::min(8, ts::device_count());
  for (std::int64_t n : {8, 7}) {
    std::vector<float> v;
    for (std::int64_t i = 0; i < n; ++i) v.push_back(float(i * 15 - 20));
    Array xh = ts::array(v);
    for (int k = 1; k <= max_devices; ++k) {
      CAPTURE(n);
      CAPTURE(k);
      const auto all = ts::devices();
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
      Array x = ts::device_put(xh, ts::NamedSharding(mesh, P("x")));
      auto g = ts::jit(ts::grad([](const Array& x) { return ts::sum(log1pexp(x)); }))(x);
      auto gv = g.to_vector<float>();
      for (std::int64_t i = 0; i < n; ++i) CHECK(gv[size_t(i)] == doctest::Approx(sigmoid(v[size_t(i)])).epsilon(1e-5));
      // Laid out as the plain gradient is (the rule changes no layout).
      auto plain = ts::jit(ts::grad([](const Array& x) { return ts::sum(log1pexp_naive(x)); }))(x);
      CHECK(g.sharding().is_equivalent_to(plain.sharding(), 1));
      // Inside a scan and a cond.
      auto in_scan = ts::grad([](const Array& x) {
        auto [c, ys] = ts::lax::scan([](const Array& c, const Array& s) { return std::pair(c + log1pexp(s), c); },
                                     ts::array(0.f), x);
        return c;
      })(x);
      auto sv = in_scan.to_vector<float>();
      for (std::int64_t i = 0; i < n; ++i) CHECK(sv[size_t(i)] == doctest::Approx(sigmoid(v[size_t(i)])).epsilon(1e-5));
      auto in_cond = ts::grad([](const Array& x) {
        return ts::lax::cond(ts::array(true), [](const Array& y) { return ts::sum(log1pexp(y)); },
                             [](const Array& y) { return ts::sum(y); }, x);
      })(x);
      CHECK(in_cond.to_vector<float>().back() == doctest::Approx(sigmoid(v.back())).epsilon(1e-5));
      // Inside a shard_map body: each device differentiates its block.
      if (n % k == 0) {
        auto sm = ts::jit(ts::grad([&](const Array& x) {
          return ts::sum(ts::shard_map([](const Array& b) { return log1pexp(b); }, mesh, P("x"), P("x"))(x));
        }))(x);
        auto mv = sm.to_vector<float>();
        for (std::int64_t i = 0; i < n; ++i) CHECK(mv[size_t(i)] == doctest::Approx(sigmoid(v[size_t(i)])).epsilon(1e-5));
      }
      // A custom_vjp on the split array.
      auto cg = ts::jit(ts::grad([](const Array& x) { return ts::sum(clip_gradient(-0.5, 0.5, x * x)); }))(x);
      auto cv = cg.to_vector<float>();
      for (std::int64_t i = 0; i < n; ++i) CHECK(cv[size_t(i)] == doctest::Approx(v[size_t(i)]));  // 2x * 0.5
    }
  }
}

TEST_CASE("custom rules: nondiff_argnums, closures as constants, and JAX's errors") {
  // nondiff_argnums: no derivative flows to y.
  auto f = ts::custom_jvp([](const Array& x, const Array& y) { return x * y; },
                          [](const std::tuple<Array, Array>& p, const std::tuple<Array, Array>& t) {
                            const auto& [x, y] = p;
                            const auto& [tx, ty] = t;
                            return std::pair(x * y, tx * y + ty * x);
                          },
                          {.nondiff_argnums = {1}});
  Array x = ts::array(3.f), y = ts::array(4.f);
  CHECK(ts::grad([&](const Array& x, const Array& y) { return f(x, y); }, 0)(x, y).item<float>() == 4.f);
  CHECK(ts::grad([&](const Array& x, const Array& y) { return f(x, y); }, 1)(x, y).item<float>() == 0.f);
  // jvp of a custom_vjp function: JAX's TypeError.
  CHECK_THROWS_WITH_AS(ts::jvp([](const Array& x) { return clip_gradient(-1, 1, x); }, x, ts::ones_like(x)),
                       "can't apply forward-mode autodiff (jvp) to a custom_vjp function.", ts::TypeError);
  // A rule whose tangent does not match the primal output.
  auto bad = ts::custom_jvp([](const Array& x) { return x; },
                            [](const std::tuple<Array>& p, const std::tuple<Array>& t) {
                              return std::pair(std::get<0>(p), ts::stack({std::get<0>(t), std::get<0>(t)}));
                            });
  CHECK_THROWS_WITH_AS(bad(ts::ones({3})), doctest::Contains("corresponding shapes and dtypes"), ts::TypeError);
  // A bwd giving the wrong shape.
  auto bad_bwd = ts::custom_vjp([](const Array& x) { return x; },
                                [](const Array& x) { return std::pair(x, std::tuple<>{}); },
                                [](std::tuple<>, const Array& g) { return ts::sum(g); });
  CHECK_THROWS_AS(ts::grad([&](const Array& x) { return ts::sum(bad_bwd(x)); })(ts::ones({3})), ts::ValueError);
}
