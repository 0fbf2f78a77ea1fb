// float32 expm1, log1p and erf in compiled code against double precision
// (std::expm1, std::log1p, std::erf rounded), over exponents from 2^-40 to
// 2^6 of both signs, and at their boundaries (codegen/math.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include <tessel/tessel.hpp>
#include <tessel/special.hpp>

namespace ts = tessel;

namespace {

// The largest error in ulp of float32 results `got` against `want` (double).
double worst_ulp(const std::vector<float>& xs, const std::vector<float>& got, double (*want)(double), float* at) {
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double w = want(double(xs[i]));
    if (std::isnan(w)) {
      CHECK(std::isnan(got[i]));
      continue;
    }
    if (std::fabs(w) > 3.4028234663852886e38) {
      CHECK(got[i] == float(w > 0 ? INFINITY : -INFINITY));
      continue;
    }
    const float wf = float(w);
    const double ulp = std::fabs(double(std::nextafter(wf, INFINITY)) - double(wf));
    const double e = std::fabs(double(got[i]) - w) / ulp;
    if (e > worst) worst = e, *at = xs[i];
  }
  return worst;
}

std::vector<float> samples() {
  std::mt19937 rng(5);
  std::vector<float> xs;
  for (int i = 0; i < 400000; ++i) {
    const float m = std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), std::uniform_int_distribution<int>(-40, 6)(rng));
    xs.push_back(i % 2 ? m : -m);
  }
  for (float v : {0.0f, -0.0f, 0.3466f, -0.3466f, 1.0397f, -17.33f, -17.34f, -18.0f, -30.0f, -104.0f, 88.37f, 88.4f, 88.7f,
                  88.722f, 88.7229f, 88.73f, 1e-30f, -1e-30f, 1e-45f, -0.999999f, 3.8325f, -3.8325f, 3.83f, INFINITY, -INFINITY})
    xs.push_back(v);
  return xs;
}

}  // namespace

TEST_CASE("float32 expm1, log1p and erf: within a few ulp of double precision, boundaries and signed zeros included") {
  const std::vector<float> xs = samples();
  const ts::Array x = ts::array(xs);
  float at = 0;
  auto run = [&](auto f) { return ts::jit(f)(x).template to_vector<float>(); };
  auto em = run([](const ts::Array& a) { return ts::expm1(a); });
  CHECK(worst_ulp(xs, em, [](double v) { return std::expm1(v); }, &at) <= 2.0);
  CAPTURE(at);
  CHECK(std::signbit(em[xs.size() - 24]));  // expm1(-0) = -0
  std::vector<float> pos;  // log1p's domain
  for (float v : xs)
    if (v >= -1) pos.push_back(v);
  auto lp = ts::jit([](const ts::Array& a) { return ts::log1p(a); })(ts::array(pos)).to_vector<float>();
  CHECK(worst_ulp(pos, lp, [](double v) { return std::log1p(v); }, &at) <= 3.0);
  // erf is XLA:CPU's rational interpolant, JAX's accuracy on CPU: up to 4.6 ulp
  // (near |x| = 3.79, where erf is within 1e-7 of 1), +-1 from |x| = 3.8325.
  auto er = run([](const ts::Array& a) { return ts::scipy::special::erf(a); });
  CHECK(worst_ulp(xs, er, [](double v) { return std::erf(v); }, &at) <= 5.0);
  const float nan = std::nanf("");
  auto special = ts::jit([](const ts::Array& a) { return ts::stack({ts::expm1(a), ts::scipy::special::erf(a)}); })(
                     ts::array(std::vector<float>{nan}))
                     .to_vector<float>();
  CHECK(std::isnan(special[0]));
  CHECK(std::isnan(special[1]));
}
