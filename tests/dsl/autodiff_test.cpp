// Autodiff against finite differences. Every differentiable primitive is
// reached through a small float64 function; its gradient (ts::grad eagerly,
// under jit, and under jit with the inputs sharded over 1..8 devices, uneven
// sizes included) must equal central differences of the function itself,
// and its forward-mode derivative the directional difference.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>

#include <tessel/tessel.hpp>

#include "tests/common/numpy_ref.hpp"

namespace ts = tessel;
namespace numpy_ref = tessel::testing::numpy_ref;
using ts::Array;
using ts::P;
using Inputs = std::vector<Array>;
using Fn = std::function<Array(const Inputs&)>;

namespace {

// sum(y * w) with fixed, distinct weights w: a scalar whose gradient sees every element of y.
Array weigh(const Array& y) {
  Array w = ts::cos(ts::reshape(ts::arange(double(y.size()), ts::float64), y.shape()) * 0.7 + 0.3);
  return ts::sum(y * w);
}

struct Domain {
  double lo = -1, hi = 1;
};

struct GradCase {
  std::string name;
  Fn f;  // scalar float64 result
  std::vector<ts::Shape> shapes;
  std::vector<Domain> domains;  // per input (default [-1, 1])
  double tol = 1e-6;
  int only_devices = 0;  // the sharded check on this many devices only (0: each of 1..8)
};

Inputs make_inputs(const GradCase& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Inputs xs;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Domain d = i < c.domains.size() ? c.domains[i] : Domain{};
    std::uniform_real_distribution<double> u(d.lo, d.hi);
    std::vector<double> v(size_t(ts::numel(c.shapes[i])));
    for (auto& e : v) e = u(rng);
    xs.push_back(ts::array(v, c.shapes[i]));
  }
  return xs;
}

Inputs shard_inputs(const Inputs& xs, int n) {
  std::vector<ts::Device> all = ts::devices();
  ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), "x");
  Inputs out;
  for (auto& x : xs)
    out.push_back(ts::device_put(x, ts::NamedSharding(mesh, x.ndim() > 0 ? P("x") : P())));
  return out;
}

void check_grad(const GradCase& c) {
  CAPTURE(c.name);
  Inputs xs = make_inputs(c, 7);
  auto want = numpy_ref::tessel_differences(c.f, xs, 1e-6);  // central differences
  auto g = ts::grad(c.f);
  CHECK(numpy_ref::compare_grads(g(xs), want, c.tol) == "");
  auto jg = ts::jit(g);
  for (int n = 1; n <= 8; ++n) {
    if (c.only_devices && n != c.only_devices) continue;
    CAPTURE(n);
    CHECK(numpy_ref::compare_grads(jg(shard_inputs(xs, n)), want, c.tol) == "");
  }
  // Forward mode: the derivative along a random direction.
  Inputs dirs = make_inputs(c, 11);
  double want_dir = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    auto d = dirs[i].to_vector<double>();
    for (size_t j = 0; j < d.size(); ++j) want_dir += d[j] * want[i][j];
  }
  auto [y, dy] = ts::jvp(c.f, std::tuple<Inputs>(xs), std::tuple<Inputs>(dirs));
  CHECK(y.item<double>() == doctest::Approx(ts::jit(c.f)(xs).item<double>()).epsilon(1e-12));
  CHECK(dy.item<double>() == doctest::Approx(want_dir).epsilon(c.tol * 10));
}

Fn unary(Array (*op)(const Array&)) {
  return [op](const Inputs& x) { return weigh(op(x[0])); };
}
Fn binary(Array (*op)(const Array&, const Array&)) {
  return [op](const Inputs& x) { return weigh(op(x[0], x[1])); };
}

}  // namespace

TEST_CASE("grad of elementwise primitives equals finite differences on 1..8 devices") {
  const Domain pos{0.5, 2.0};
  std::vector<GradCase> cases = {
      {"neg", unary(ts::negative), {{5, 3}}},
      {"sin", unary(ts::sin), {{5, 3}}},
      {"cos", unary(ts::cos), {{5, 3}}},
      {"tan", unary(ts::tan), {{5, 3}}},
      {"tanh", unary(ts::tanh), {{5, 3}}},
      {"exp", unary(ts::exp), {{5, 3}}},
      {"expm1", unary(ts::expm1), {{5, 3}}},
      {"log", unary(ts::log), {{5, 3}}, {pos}},
      {"log1p", unary(ts::log1p), {{5, 3}}},
      {"sqrt", unary(ts::sqrt), {{5, 3}}, {pos}},
      {"rsqrt", unary(ts::rsqrt), {{5, 3}}, {pos}},
      {"logistic", unary(ts::nn::sigmoid), {{5, 3}}},
      {"erf", unary(ts::lax::erf), {{5, 3}}},
      {"erf_inv", unary(ts::lax::erf_inv), {{5, 3}}, {{-0.9, 0.9}}},
      {"abs", unary(ts::abs), {{5, 3}}},
      {"sign, floor, ceil, round (zero gradients)",
       [](const Inputs& x) { return weigh(ts::sign(x[0]) + ts::floor(x[0]) + ts::ceil(x[0]) + ts::round(x[0]) + x[0]); },
       {{5, 3}},
       {{0.1, 0.4}}},
      {"add", binary(ts::add), {{5, 3}, {5, 3}}},
      {"sub", binary(ts::subtract), {{5, 3}, {5, 3}}},
      {"mul", binary(ts::multiply), {{5, 3}, {5, 3}}},
      {"div", binary(ts::divide), {{5, 3}, {5, 3}}, {{}, pos}},
      {"rem", binary(ts::remainder), {{5, 3}, {5, 3}}, {{2.1, 2.9}, {0.6, 1.0}}},
      {"pow", binary(ts::power), {{5, 3}, {5, 3}}, {pos, {}}},
      {"max", binary(ts::maximum), {{5, 3}, {5, 3}}},
      {"min", binary(ts::minimum), {{5, 3}, {5, 3}}},
      {"atan2", binary(ts::arctan2), {{5, 3}, {5, 3}}},
      {"select", [](const Inputs& x) { return weigh(ts::where(x[0] > 0.0, x[0] * x[1], ts::sin(x[1]))); },
       {{5, 3}, {5, 3}}},
      {"convert (float64 -> int32: zero gradient)",
       [](const Inputs& x) { return weigh(ts::astype(ts::astype(x[0] * 3.0, ts::int32), ts::float64) + x[0]); },
       {{5, 3}},
       {{0.1, 0.3}}},
      {"broadcasting binary", [](const Inputs& x) { return weigh(x[0] * x[1] + x[1]); }, {{5, 3}, {3}}},
      {"weak scalar", [](const Inputs& x) { return weigh(2.0 * ts::pow(x[0], 3) - 1.0 / (x[0] + 3.0)); }, {{5, 3}}},
  };
  for (auto& c : cases) check_grad(c);
}

TEST_CASE("grad of shape primitives equals finite differences on 1..8 devices") {
  std::vector<GradCase> cases = {
      {"broadcast_in_dim", [](const Inputs& x) { return weigh(ts::broadcast_to(x[0], {6, 3}) * x[1]); },
       {{3}, {6, 3}}},
      {"reshape", [](const Inputs& x) { return weigh(ts::reshape(x[0], {3, 2, 4}) * ts::reshape(x[0], {3, 2, 4})); },
       {{6, 4}}},
      {"transpose", [](const Inputs& x) { return weigh(ts::transpose(x[0]) * x[1]); }, {{5, 3}, {3, 5}}},
      {"rev", [](const Inputs& x) { return weigh(ts::flip(x[0], 0) * x[0]); }, {{7, 2}}},
      {"slice", [](const Inputs& x) { return weigh(x[0].index({ts::slice(1, 6, 2), ts::slice(0, 2)}) * 3.0); },
       {{7, 3}}},
      {"pad", [](const Inputs& x) { return weigh(ts::sin(ts::pad(x[0], {{1, 2}, {0, 1}}, 0.5))); }, {{5, 3}}},
      {"concatenate", [](const Inputs& x) { return weigh(ts::concatenate({x[0], x[1] * x[1], x[0]}, 0)); },
       {{5, 3}, {2, 3}}},
      {"dynamic_slice",
       [](const Inputs& x) {
         return weigh(ts::lax::dynamic_slice(x[0], {ts::array(std::int32_t(2)), ts::array(std::int32_t(1))}, {3, 2}));
       },
       {{6, 3}}},
      {"dynamic_update_slice",
       [](const Inputs& x) {
         return weigh(ts::sin(
             ts::lax::dynamic_update_slice(x[0], x[1] * x[1], {ts::array(std::int32_t(1)), ts::array(std::int32_t(0))})));
       },
       {{6, 3}, {2, 3}}},
      {"at[].set / add / multiply",
       [](const Inputs& x) {
         Array y = x[0].at({1}).set(x[1]);
         y = y.at({ts::slice(2, 4)}).add(2.0 * x[1]);
         return weigh(y.at({0}).multiply(x[1]));
       },
       {{5, 3}, {3}}},
      {"with_sharding_constraint",
       [](const Inputs& x) {
         auto mesh = ts::make_mesh({2}, {"c"});
         return weigh(ts::with_sharding_constraint(ts::sin(x[0]), ts::NamedSharding(mesh, P(ts::None, "c"))));
       },
       {{5, 4}},
       {},
       1e-6,
       2},
  };
  for (auto& c : cases) check_grad(c);
}

TEST_CASE("grad of reductions, sort and dot equals finite differences on 1..8 devices") {
  std::vector<GradCase> cases = {
      {"reduce_sum", [](const Inputs& x) { return weigh(ts::sum(ts::sin(x[0]), 1)); }, {{5, 3}}},
      {"reduce_max", [](const Inputs& x) { return weigh(ts::max(x[0], 0)); }, {{5, 3}}},
      {"reduce_min", [](const Inputs& x) { return weigh(ts::min(x[0], 1)); }, {{5, 3}}},
      {"reduce_prod", [](const Inputs& x) { return weigh(ts::prod(x[0], 1)); }, {{5, 3}}},
      {"mean, var, std", [](const Inputs& x) { return weigh(ts::mean(x[0], 0)) + weigh(ts::var(x[0], 1)) + ts::std(x[0]); },
       {{5, 3}}},
      {"sort", [](const Inputs& x) { return weigh(ts::sort(x[0] * x[0], 0) * x[1]); }, {{7, 3}, {7, 3}}},
      {"sort along the last axis", [](const Inputs& x) { return weigh(ts::sort(ts::sin(x[0]))); }, {{5, 4}}},
      {"dot_general (matmul)", [](const Inputs& x) { return weigh(ts::dot(x[0], x[1])); }, {{5, 3}, {3, 4}}},
      {"dot_general (matrix-vector)", [](const Inputs& x) { return weigh(ts::dot(x[0], x[1])); }, {{5, 3}, {3}}},
      {"dot_general (batched einsum)", [](const Inputs& x) { return weigh(ts::einsum("bij,bjk->bik", x[0], x[1])); },
       {{3, 2, 4}, {3, 4, 2}}},
      {"dot_general (contract the leading dim)",
       [](const Inputs& x) { return weigh(ts::einsum("ij,ik->jk", x[0], x[1])); },
       {{5, 3}, {5, 2}}},
      {"nn: softmax, log_softmax, logsumexp, gelu, relu",
       [](const Inputs& x) {
         return weigh(ts::nn::softmax(x[0]) + ts::nn::log_softmax(x[0], 0) + ts::nn::gelu(x[0]) +
                      ts::nn::gelu(x[0], false) + ts::nn::relu(x[0])) +
                ts::logsumexp(x[0]);
       },
       {{5, 3}}},
      {"a two-layer perceptron",
       [](const Inputs& x) {
         Array h = ts::tanh(ts::dot(x[0], x[1]) + x[2]);
         return ts::mean(ts::sum(ts::square(ts::dot(h, x[3]) - 0.5), -1));
       },
       {{6, 4}, {4, 5}, {5}, {5, 2}}},
  };
  for (auto& c : cases) check_grad(c);
}

TEST_CASE("reduce_prod's gradient with zeros in a line") {
  // d/dx_i prod(x) = prod of the others, also where some x_j are zero.
  Array x = ts::array({2.0, 0.0, 3.0, 0.0, 0.0, 5.0, 1.0, 4.0, 0.5}, {3, 3});
  auto g = ts::grad([](const Array& x) { return ts::sum(ts::prod(x, 1)); })(x);
  CHECK(g.to_vector<double>() == std::vector<double>{0, 6, 0, 0, 0, 0, 2, 0.5, 4});
  auto gj = ts::jit(ts::grad([](const Array& x) { return ts::sum(ts::prod(x, 1)); }))(shard_inputs({x}, 2)[0]);
  CHECK(gj.to_vector<double>() == std::vector<double>{0, 6, 0, 0, 0, 0, 2, 0.5, 4});
}

TEST_CASE("grad, value_and_grad, vjp and jvp: argnums, pytrees, composition with jit") {
  auto f = [](const Array& x, const Array& y) { return ts::sum(ts::sin(x) * y); };
  Array x = ts::array({0.1, 0.2, 0.3}), y = ts::array({1.0, 2.0, 3.0});
  // Closed form: df/dx = cos(x) * y, df/dy = sin(x).
  auto gx = ts::grad(f)(x, y).to_vector<double>();
  auto gy = ts::grad(f, 1)(x, y).to_vector<double>();
  auto gy2 = ts::grad<1>(f)(x, y).to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    double xi = 0.1 * (i + 1), yi = i + 1.0;
    CHECK(gx[i] == doctest::Approx(std::cos(xi) * yi).epsilon(1e-14));
    CHECK(gy[i] == doctest::Approx(std::sin(xi)).epsilon(1e-14));
    CHECK(gy2[i] == gy[i]);
  }
  auto [v, g] = ts::value_and_grad(f)(x, y);
  CHECK(v.item<double>() == doctest::Approx(std::sin(0.1) + 2 * std::sin(0.2) + 3 * std::sin(0.3)).epsilon(1e-14));
  CHECK(g.to_vector<double>() == gx);
  // grad of jit, jit of grad, grad of grad.
  CHECK(ts::grad(ts::jit(f))(x, y).to_vector<double>() == gx);
  CHECK(ts::jit(ts::grad(f))(x, y).to_vector<double>() == gx);
  auto d2 = ts::grad([](const Array& x) { return ts::sum(ts::grad([](const Array& z) { return ts::sum(ts::sin(z)); })(x)); });
  auto d2v = d2(x).to_vector<double>();
  for (int i = 0; i < 3; ++i) CHECK(d2v[i] == doctest::Approx(-std::sin(0.1 * (i + 1))).epsilon(1e-14));
  // Pytree arguments: the gradient has the argument's structure.
  using Params = std::vector<std::pair<Array, Array>>;
  Params params = {{ts::array({1.0, 2.0}), ts::array(3.0)}, {ts::array({4.0}), ts::array(5.0)}};
  auto pg = ts::grad([](const Params& p) {
    return ts::sum(p[0].first * p[0].second) + ts::sum(p[1].first * p[1].first) * p[1].second;
  })(params);
  REQUIRE(pg.size() == 2);
  CHECK(pg[0].first.to_vector<double>() == std::vector<double>{3, 3});
  CHECK(pg[0].second.item<double>() == 3);
  CHECK(pg[1].first.to_vector<double>() == std::vector<double>{40});
  CHECK(pg[1].second.item<double>() == 16);
  // Captured arrays are constants.
  Array c = ts::array({2.0, 2.0, 2.0});
  CHECK(ts::grad([&](const Array& x) { return ts::sum(x * c); })(x).to_vector<double>() == std::vector<double>{2, 2, 2});
  // vjp of a non-scalar function; jvp.
  auto [out, back] = ts::vjp([](const Array& x) { return ts::sin(x); }, x);
  CHECK(out.to_vector<double>() == ts::sin(x).to_vector<double>());
  auto [ct] = back(ts::array({1.0, 10.0, 100.0}));
  for (int i = 0; i < 3; ++i)
    CHECK(ct.to_vector<double>()[i] == doctest::Approx(std::pow(10.0, i) * std::cos(0.1 * (i + 1))).epsilon(1e-14));
  auto [p, t] = ts::jvp([](const Array& x) { return ts::exp(x); }, x, ts::array({1.0, 0.0, 2.0}));
  CHECK(t.to_vector<double>()[2] == doctest::Approx(2 * std::exp(0.3)).epsilon(1e-14));
  CHECK(t.to_vector<double>()[1] == 0);
  (void)p;
  // convert is linear: the gradient through float32 comes back as float64.
  auto gc = ts::grad([](const Array& x) { return ts::sum(ts::astype(ts::astype(x, ts::float32) * 3.0, ts::float64)); })(x);
  CHECK(gc.dtype() == ts::float64);
  CHECK(gc.to_vector<double>() == std::vector<double>{3, 3, 3});
  // float32 stays float32.
  CHECK(ts::grad([](const Array& x) { return ts::sum(x * x); })(ts::array({1.0f, 2.0f})).dtype() == ts::float32);
}

TEST_CASE("grad errors name what is wrong") {
  Array x = ts::array({1.0, 2.0});
  CHECK_THROWS_WITH_AS(ts::grad([](const Array& x) { return x * 2.0; })(x),
                       doctest::Contains("one real scalar output, got 1 output(s), the first float64[2]"), ts::TypeError);
  CHECK_THROWS_WITH_AS(ts::grad([](const Array& x) { return ts::sum(ts::astype(x, ts::float32)); })(ts::array({1, 2})),
                       doctest::Contains("real- or complex-valued inputs (float32, float64, complex64, complex128), got int32[2]"), ts::TypeError);
  CHECK_THROWS_AS(ts::grad([](const Array& x) { return ts::sum(x); }, 3)(x), ts::TypeError);
  CHECK_THROWS_WITH_AS(ts::jvp([](const Array& x) { return x; }, x, ts::array({1.0, 2.0, 3.0})),
                       doctest::Contains("tangent 0 has shape (3,), its primal float64[2]"), ts::ShapeError);
}

TEST_CASE("grad and value_and_grad with ts::has_aux: the aux pytree comes back beside the gradient, undifferentiated") {
  // aux: a float array and an integer scalar (its zero cotangent is an integer's).
  auto f = [](const ts::Array& x) {
    ts::Array y = ts::sin(x);
    return std::make_pair(ts::sum(y * y), std::make_pair(y, ts::argmax(x, 0)));
  };
  const std::vector<double> xs = {0.1, 0.7, -0.4};
  ts::Array x = ts::array(xs);
  auto check = [&](const ts::Array& g, const std::pair<ts::Array, ts::Array>& aux) {
    const auto gv = g.to_vector<double>(), yv = aux.first.to_vector<double>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      CHECK(gv[i] == doctest::Approx(2 * std::sin(xs[i]) * std::cos(xs[i])));
      CHECK(yv[i] == doctest::Approx(std::sin(xs[i])));
    }
    CHECK(aux.second.item<int>() == 1);
  };
  auto [g, aux] = ts::grad(f, ts::has_aux)(x);
  check(g, aux);
  auto [g_jit, aux_jit] = ts::jit(ts::grad(f, ts::has_aux))(x);
  check(g_jit, aux_jit);
  auto [value_aux, g2] = ts::value_and_grad(f, ts::has_aux)(x);
  double want = 0;
  for (double v : xs) want += std::sin(v) * std::sin(v);
  CHECK(value_aux.first.item<double>() == doctest::Approx(want));
  check(g2, value_aux.second);
  // With respect to argument 1, at run time and at compile time.
  auto h = [](const ts::Array& w, const ts::Array& x) { return std::make_pair(ts::sum(w * x * x), ts::max(x)); };
  auto [gx, mx] = ts::grad(h, 1, ts::has_aux)(ts::array(std::vector<double>{2.0, 3.0}), ts::array(std::vector<double>{1.0, -1.0}));
  CHECK(gx.to_vector<double>() == std::vector<double>{4.0, -6.0});
  CHECK(mx.item<double>() == 1.0);
  auto [gx1, mx1] = ts::grad<1>(h, ts::has_aux)(ts::array(std::vector<double>{2.0, 3.0}), ts::array(std::vector<double>{1.0, -1.0}));
  CHECK(gx1.to_vector<double>() == gx.to_vector<double>());
  // The value must be a real scalar.
  auto bad = [](const ts::Array& x) { return std::make_pair(x * 2.0, x); };
  CHECK_THROWS_WITH_AS(ts::grad(bad, ts::has_aux)(x), doctest::Contains("has_aux requires f to return (a real scalar, aux)"),
                       ts::TypeError);
}
