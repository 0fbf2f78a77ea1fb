// More of jax.random: JAX's formulas over the base draws (checked against
// the same formula written here, eagerly), supports and moments.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include <tessel/tessel.hpp>

namespace ts = tessel;
namespace rnd = ts::random;

namespace {
std::vector<double> host(const ts::Array& x) { return x.astype(ts::float64).to_vector<double>(); }
void close(const ts::Array& got, const ts::Array& want, double tol = 2e-6) {
  auto g = host(got), w = host(want);
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(w[i]).epsilon(tol));
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}
}  // namespace

TEST_CASE("random dist (more): JAX's formulas over the base draws") {
  auto k = rnd::key(42);
  const ts::Shape s{1000};
  close(rnd::lognormal(k, 0.5, s), ts::exp(rnd::normal(k, s) * 0.5f));
  close(rnd::pareto(k, 3.0, s), ts::exp(rnd::exponential(k, s) / 3.0f));
  close(rnd::rayleigh(k, 2.0, s), 2.0f * ts::sqrt(ts::log(rnd::uniform(k, s)) * -2.0f));
  close(rnd::weibull_min(k, 2.0, 1.5, s), ts::power(-ts::log1p(-rnd::uniform(k, s)), 1.0 / 1.5) * 2.0);
  auto u = rnd::uniform(k, s);
  auto geo = rnd::geometric(k, 0.3, s);
  CHECK(geo.dtype() == ts::int32);
  CHECK(host(geo) == host((ts::floor(ts::log(u) / std::log1p(-0.3)) + 1.0).astype(ts::int32)));
  auto ks = rnd::split(k);
  close(rnd::double_sided_maxwell(k, 1.0, 2.0, s),
        rnd::rademacher(ks[1], s, ts::float32) * rnd::maxwell(ks[0], s) * 2.0f + 1.0f);
  close(rnd::maxwell(k, s), ts::linalg::norm(rnd::normal(k, {1000, 3}), std::nullopt, -1));
  close(rnd::chisquare(k, 3.0, s), ts::exp(rnd::loggamma(k, 1.5, s)) * 2.0f, 1e-5);
  CHECK(host(rnd::PRNGKey(42)) == host(k));
  CHECK(rnd::key_impl(k) == "threefry2x32");
  CHECK(host(rnd::wrap_key_data(rnd::key_data(k))) == host(k));
}

TEST_CASE("random dist (more): supports and moments") {
  auto k = rnd::key(7);
  const ts::Shape s{200000};
  auto tri = host(rnd::triangular(k, -1.0, 0.5, 2.0, s));
  for (double x : tri) CHECK_UNARY((x >= -1 && x <= 2));
  CHECK(mean(tri) == doctest::Approx((-1 + 0.5 + 2) / 3.0).epsilon(0.01));
  auto w = host(rnd::wald(k, 1.5, s));
  for (double x : w) CHECK_UNARY(x > 0);
  CHECK(mean(w) == doctest::Approx(1.5).epsilon(0.02));
  auto g = host(rnd::geometric(k, 0.25, s));
  CHECK(mean(g) == doctest::Approx(4.0).epsilon(0.02));
  auto f = host(rnd::f(k, 5.0, 10.0, s));
  CHECK(mean(f) == doctest::Approx(10.0 / 8.0).epsilon(0.03));
  auto gn = host(rnd::generalized_normal(k, 2.0, s));
  double var = 0;
  for (double x : gn) var += x * x;
  CHECK(var / double(gn.size()) == doctest::Approx(0.5).epsilon(0.02));  // p = 2: N(0, 1/2)
  auto b = rnd::ball(k, 3, 2.0, {5000});
  CHECK(b.shape() == ts::Shape{5000, 3});
  for (double r : host(ts::linalg::norm(b, std::nullopt, -1))) CHECK_UNARY(r <= 1.0 + 1e-6);
  CHECK_THROWS_AS(rnd::lognormal(k, 1.0, {2}, ts::int32), ts::TypeError);
}
