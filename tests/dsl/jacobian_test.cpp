// ts::jacfwd, jacrev, hessian, linearize (issue 40) against closed forms, in
// float64: vector and matrix arguments, pytree arguments and outputs,
// argnum, under jit and on sharded inputs, and JAX's refusal of integers.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include <tessel/jacobian.hpp>
#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

void check_close(const ts::Array& got, const std::vector<double>& want, const ts::Shape& shape, double tol = 1e-12) {
  REQUIRE(got.shape() == shape);
  const auto g = got.astype(ts::float64).to_vector<double>();
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(want[i]).epsilon(tol));
}

ts::Array vec(std::vector<double> v) { return ts::array(v); }

}  // namespace

TEST_CASE("jacfwd and jacrev of R^3 -> R^3 equal the closed form; hessian of a cubic") {
  auto f = [](const ts::Array& x) {
    return ts::stack({x[0] * x[0] + ts::sin(x[1]), x[0] * x[1], ts::exp(x[2])});
  };
  const double a = 0.7, b = -1.3, c = 0.4;
  ts::Array x = vec({a, b, c});
  const std::vector<double> J = {2 * a, std::cos(b), 0, b, a, 0, 0, 0, std::exp(c)};
  check_close(ts::jacfwd(f)(x), J, {3, 3});
  check_close(ts::jacrev(f)(x), J, {3, 3});
  check_close(ts::jit(ts::jacrev(f))(x), J, {3, 3});
  check_close(ts::jit(ts::jacfwd(f))(x), J, {3, 3});
  auto cubic = [](const ts::Array& x) { return ts::sum(x * x * x) + x[0] * x[1]; };
  check_close(ts::hessian(cubic)(x), {6 * a, 1, 0, 1, 6 * b, 0, 0, 0, 6 * c}, {3, 3});
}

TEST_CASE("jacobian of tanh(W v) with respect to the matrix W: shape out + in, and on a sharded W") {
  const std::int64_t m = 3, n = 4;
  ts::Array W = ts::reshape(ts::linspace(-1, 1, m * n), {m, n}).astype(ts::float64);
  ts::Array v = vec({0.5, -0.25, 1.0, 2.0});
  auto f = [](const ts::Array& W, const ts::Array& v) { return ts::tanh(ts::matmul(W, v)); };
  const auto Wv = W.to_vector<double>();
  std::vector<double> t(m), want;
  for (std::int64_t i = 0; i < m; ++i) {
    double s = 0;
    for (std::int64_t k = 0; k < n; ++k) s += Wv[std::size_t(i * n + k)] * v.to_vector<double>()[std::size_t(k)];
    t[std::size_t(i)] = std::tanh(s);
  }
  const auto vv = v.to_vector<double>();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t k = 0; k < n; ++k) want.push_back(i == j ? (1 - t[std::size_t(i)] * t[std::size_t(i)]) * vv[std::size_t(k)] : 0.0);
  check_close(ts::jacrev(f)(W, v), want, {m, m, n});
  check_close(ts::jacfwd(f)(W, v), want, {m, m, n});
  // With respect to v (argnum 1): d tanh(Wv)_i / dv_k = (1 - t_i^2) W_ik.
  std::vector<double> dv;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t k = 0; k < n; ++k) dv.push_back((1 - t[std::size_t(i)] * t[std::size_t(i)]) * Wv[std::size_t(i * n + k)]);
  check_close(ts::jacrev(f, 1)(W, v), dv, {m, n});
  check_close(ts::jacfwd(f, 1)(W, v), dv, {m, n});
  const auto all = ts::devices();
  ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + 3), {3}, {"x"});
  ts::Array Ws = ts::device_put(W, ts::NamedSharding(mesh, P("x")));
  check_close(ts::jit(ts::jacrev(f))(Ws, v), want, {m, m, n});
}

TEST_CASE("jacobians over pytrees: a map argument gives a map (the gradient for a scalar), a pair output gives a pair") {
  using Params = std::map<std::string, ts::Array>;
  Params p = {{"w", vec({1.0, 2.0})}, {"b", vec({0.5})}};
  auto loss = [](const Params& p) { return ts::sum(p.at("w") * p.at("w")) * p.at("b")[0]; };
  Params jr = ts::jacrev(loss)(p), jf = ts::jacfwd(loss)(p), g = ts::grad(loss)(p);
  check_close(jr.at("w"), {2 * 1.0 * 0.5, 2 * 2.0 * 0.5}, {2});
  check_close(jr.at("b"), {5.0}, {1});
  check_close(jf.at("w"), g.at("w").to_vector<double>(), {2});
  check_close(jf.at("b"), g.at("b").to_vector<double>(), {1});
  // Arguments of different types: the argument named at compile time.
  auto fit = [](const Params& p, const ts::Array& x) { return ts::sum(p.at("w") * x) + p.at("b")[0] * ts::sum(x * x); };
  ts::Array xs = vec({3.0, -1.0});
  Params jp = ts::jacrev(fit)(p, xs);
  check_close(jp.at("w"), {3.0, -1.0}, {2});
  check_close(jp.at("b"), {10.0}, {1});
  check_close(ts::jacfwd<1>(fit)(p, xs), {1.0 + 2 * 0.5 * 3.0, 2.0 + 2 * 0.5 * -1.0}, {2});
  check_close(ts::jacrev<1>(fit)(p, xs), {1.0 + 2 * 0.5 * 3.0, 2.0 + 2 * 0.5 * -1.0}, {2});
  check_close(ts::hessian<1>(fit)(p, xs), {1.0, 0, 0, 1.0}, {2, 2});
  auto two = [](const ts::Array& x) { return std::make_pair(x * 3.0, ts::sum(x * x)); };
  ts::Array x = vec({1.0, -2.0});
  auto [j1, j2] = ts::jacfwd(two)(x);
  check_close(j1, {3, 0, 0, 3}, {2, 2});
  check_close(j2, {2.0, -4.0}, {2});
  auto [r1, r2] = ts::jacrev(two)(x);
  check_close(r1, {3, 0, 0, 3}, {2, 2});
  check_close(r2, {2.0, -4.0}, {2});
}

TEST_CASE("linearize gives f(x) and its jvp; integer arguments are refused as JAX refuses them") {
  auto f = [](const ts::Array& x) { return ts::sin(x) * x; };
  ts::Array x = vec({0.3, 1.1});
  auto [y, f_jvp] = ts::linearize(f, x);
  check_close(y, {std::sin(0.3) * 0.3, std::sin(1.1) * 1.1}, {2});
  check_close(f_jvp(vec({1.0, 2.0})), {std::cos(0.3) * 0.3 + std::sin(0.3), 2 * (std::cos(1.1) * 1.1 + std::sin(1.1))}, {2});
  CHECK_THROWS_WITH_AS(ts::jacrev(f)(ts::array(std::vector<int>{1, 2})), doctest::Contains("jacrev requires real- or complex-valued"),
                       ts::TypeError);
}

TEST_CASE("jacfwd and jacrev with has_aux: the Jacobian of the first result, the aux as f gives it") {
  auto f = [](const ts::Array& x) {
    ts::Array out = ts::stack({x[0] * x[1], ts::sin(x[2])});
    return std::make_pair(out, std::make_pair(ts::sum(x), 7));  // aux: any pytree, scalars kept
  };
  const double a = 1.5, b = -0.5, c = 0.25;
  ts::Array x = vec({a, b, c});
  const std::vector<double> J = {b, a, 0, 0, 0, std::cos(c)};
  {
    auto [jac, aux] = ts::jacrev(f, ts::has_aux)(x);
    check_close(jac, J, {2, 3});
    check_close(aux.first, {a + b + c}, {});
    CHECK(aux.second == 7);
  }
  {
    auto [jac, aux] = ts::jacfwd(f, ts::has_aux)(x);
    check_close(jac, J, {2, 3});
    check_close(aux.first, {a + b + c}, {});
  }
  {
    auto [jac, aux] = ts::jit(ts::jacrev(f, ts::has_aux))(x);
    check_close(jac, J, {2, 3});
    check_close(aux.first, {a + b + c}, {});
  }
  // With respect to argument 1, named at compile time and at run time.
  auto g = [](const ts::Array& w, const ts::Array& v) { return std::make_pair(w * v, ts::max(v)); };
  ts::Array w = vec({2.0, 3.0}), v = vec({5.0, -1.0});
  auto [j1, m1] = ts::jacrev<1>(g, ts::has_aux)(w, v);
  check_close(j1, {2, 0, 0, 3}, {2, 2});
  check_close(m1, {5.0}, {});
  auto [j2, m2] = ts::jacfwd(g, 1, ts::has_aux)(w, v);
  check_close(j2, {2, 0, 0, 3}, {2, 2});
  check_close(m2, {5.0}, {});
}
