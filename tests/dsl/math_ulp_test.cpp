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

// f compiled, on the floats v.
template <class F>
std::vector<float> jitted(F f, const std::vector<float>& v) {
  return ts::jit(f)(ts::array(v)).template to_vector<float>();
}

}  // namespace

TEST_CASE("float32 expm1, log1p and erf: within a few ulp of double precision, boundaries and signed zeros included") {
  const std::vector<float> xs = samples();
  float at = 0;
  auto run = [&](auto f) { return jitted(f, xs); };
  auto em = run([](const ts::Array& a) { return ts::expm1(a); });
  CHECK(worst_ulp(xs, em, [](double v) { return std::expm1(v); }, &at) <= 2.0);
  CAPTURE(at);
  CHECK(std::signbit(em[xs.size() - 24]));  // expm1(-0) = -0
  std::vector<float> pos;  // log1p's domain
  for (float v : xs)
    if (v >= -1) pos.push_back(v);
  auto lp = jitted([](const ts::Array& a) { return ts::log1p(a); }, pos);
  CHECK(worst_ulp(pos, lp, [](double v) { return std::log1p(v); }, &at) <= 3.0);
  // erf is XLA:CPU's rational interpolant, JAX's accuracy on CPU: up to 4.6 ulp
  // (near |x| = 3.79, where erf is within 1e-7 of 1), +-1 from |x| = 3.8325.
  auto er = run([](const ts::Array& a) { return ts::scipy::special::erf(a); });
  CHECK(worst_ulp(xs, er, [](double v) { return std::erf(v); }, &at) <= 5.0);
  const float nan = std::nanf("");
  auto special = jitted([](const ts::Array& a) { return ts::stack({ts::expm1(a), ts::scipy::special::erf(a)}); }, {nan});
  CHECK(std::isnan(special[0]));
  CHECK(std::isnan(special[1]));
}

TEST_CASE("float32 exp, log, tanh and logistic: within a few ulp of double precision, their limits exact") {
  // exp: Cephes' polynomial, 2^n as two exact powers of two (subnormal
  // results round once); tanh: XLA:CPU's rational function (3 ulp, JAX's
  // CPU tanh); logistic = 1 / (1 + exp(-x)), as XLA expands it.
  std::vector<float> xs = samples();
  for (float v : {-87.3f, -87.34f, -88.0f, -95.5f, -103.9f, -103.98f, -150.0f, 88.72f, 88.7228f, 88.72284f, 88.7229f,
                  0.0004f, 0.00039999f, -0.0004f, 7.9988f, 7.99882f, 8.5f, 19.99f, 20.0f, -20.5f, 1e-40f, -1e-40f})
    xs.push_back(v);
  float at = 0;
  auto run = [&](auto f) { return jitted(f, xs); };
  auto ex = run([](const ts::Array& a) { return ts::exp(a); });
  CHECK(worst_ulp(xs, ex, [](double v) { return std::exp(v); }, &at) <= 1.5);
  CAPTURE(at);
  // XLA's tanh: 4.1 ulp at most (at the bottom of binades near |x| = 0.06).
  auto th = run([](const ts::Array& a) { return ts::tanh(a); });
  CHECK(worst_ulp(xs, th, [](double v) { return std::tanh(v); }, &at) <= 4.5);
  // logistic where exp(-x) is finite; below x = -88.72 it is 0, as JAX's.
  std::vector<float> fin;
  for (float v : xs)
    if (!(v < -88.72f)) fin.push_back(v);
  auto lg = jitted([](const ts::Array& a) { return ts::nn::sigmoid(a); }, fin);
  CHECK(worst_ulp(fin, lg, [](double v) { return 1 / (1 + std::exp(-v)); }, &at) <= 3.0);
  std::vector<float> pos;  // log's domain, subnormals included
  for (float v : xs)
    if (v > 0) pos.push_back(v);
  for (float v : {1e-45f, 3e-39f, 1.17549435e-38f, 0.70710677f, 0.70710683f, 1.4142135f, 3.4e38f}) pos.push_back(v);
  auto lo = jitted([](const ts::Array& a) { return ts::log(a); }, pos);
  CHECK(worst_ulp(pos, lo, [](double v) { return std::log(v); }, &at) <= 1.5);
  // The limits: exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(-1) = NaN,
  // log(inf) = inf, tanh(+-inf) = +-1, tanh(-0) = -0, NaN stays NaN.
  const float inf = INFINITY, nan = std::nanf("");
  auto e = jitted([](const ts::Array& a) { return ts::exp(a); }, {-inf, inf, nan, -0.0f});
  CHECK(e[0] == 0.0f);
  CHECK(e[1] == inf);
  CHECK(std::isnan(e[2]));
  CHECK(e[3] == 1.0f);
  auto l = jitted([](const ts::Array& a) { return ts::log(a); }, {0.0f, -0.0f, -1.0f, inf, nan, -inf});
  CHECK(l[0] == -inf);
  CHECK(l[1] == -inf);
  CHECK(std::isnan(l[2]));
  CHECK(l[3] == inf);
  CHECK(std::isnan(l[4]));
  CHECK(std::isnan(l[5]));
  auto t = jitted([](const ts::Array& a) { return ts::tanh(a); }, {inf, -inf, -0.0f, nan});
  CHECK(t[0] == 1.0f);
  CHECK(t[1] == -1.0f);
  CHECK((t[2] == 0.0f && std::signbit(t[2])));
  CHECK(std::isnan(t[3]));
  auto s = jitted([](const ts::Array& a) { return ts::nn::sigmoid(a); }, {inf, -inf, nan, -88.8f});
  CHECK(s[0] == 1.0f);
  CHECK(s[1] == 0.0f);
  CHECK(std::isnan(s[2]));
  CHECK(s[3] == 0.0f);
}
