// ts::random's distributions (dsl/src/random_dists.cpp) against closed forms:
// known answers derived from the bit-identical primitives (uniform, normal,
// bernoulli, randint, permutation, split) by JAX's formulas; per-element
// references of the rejection loops written as C++ loops over eager draws;
// exact properties (shapes, dtypes, support, determinism); moments of 200k
// draws within 5 standard errors; and a draw sharded over 8 devices.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include <tessel/tessel.hpp>

namespace ts = tessel;
namespace rnd = tessel::random;
using ts::P;

namespace {

constexpr std::int64_t kN = 200000;
constexpr double kEulerGamma = 0.57721566490153286;

struct Moments {
  double mean = 0, var = 0, m4 = 0;  // var and m4 central
};

Moments moments(const std::vector<double>& x) {
  Moments m;
  for (double v : x) m.mean += v;
  m.mean /= double(x.size());
  for (double v : x) {
    double d = (v - m.mean) * (v - m.mean);
    m.var += d;
    m.m4 += d * d;
  }
  m.var /= double(x.size());
  m.m4 /= double(x.size());
  return m;
}

std::vector<double> host(const ts::Array& x) { return x.to_vector<double>(); }

// Mean and variance within 5 standard errors of the closed forms (mean mu,
// variance s2, central fourth moment m4).
std::vector<double> check_moments(const ts::Array& x, double mu, double s2, double m4, const char* what) {
  CAPTURE(what);
  auto v = host(x);
  Moments m = moments(v);
  const double n = double(v.size());
  CAPTURE(m.mean);
  CAPTURE(m.var);
  CHECK(std::fabs(m.mean - mu) <= 5 * std::sqrt(s2 / n));
  CHECK(std::fabs(m.var - s2) <= 5 * std::sqrt((m4 - s2 * s2) / n));
  return v;
}

template <class F>
bool all_of(const std::vector<double>& v, F f) {
  return std::all_of(v.begin(), v.end(), f);
}

template <class T>
bool same(const ts::Array& a, const ts::Array& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.to_vector<T>() == b.to_vector<T>();
}

template <class T>
bool differ(const ts::Array& a, const ts::Array& b) {
  return a.to_vector<T>() != b.to_vector<T>();
}

// Each element of a float array bit for bit.
bool bits_equal(const ts::Array& a, const ts::Array& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  if (a.dtype() == ts::float64) {
    auto x = a.to_vector<double>(), y = b.to_vector<double>();
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
  }
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

ts::Array f32(float v) { return ts::array(v); }

// JAX's threefry_partitionable setting for a scope.
struct Mode {
  explicit Mode(bool on) : saved(ts::config().threefry_partitionable) { ts::config().threefry_partitionable = on; }
  ~Mode() { ts::config().threefry_partitionable = saved; }
  bool saved;
};

// JAX's _gamma_one for one key, as a C++ loop over eager 0-d draws and ops.
float gamma_one_ref(ts::Array key, float alpha_f, bool log_space) {
  using ts::Array;
  Array alpha = f32(alpha_f), zero = f32(0), one = f32(1), third = f32(float(1.0 / 3.0));
  const bool boost = alpha_f >= 1;
  Array a = boost ? alpha : alpha + one;
  Array d = a - third;
  Array c = third / ts::sqrt(d);
  Array ks = rnd::split(key);
  Array k = ks.index({0}), subkey = ks.index({1});
  Array X = zero, V = one, U = f32(2);
  // Multiply-adds run compiled, where they fuse into FMAs (as XLA:CPU's do):
  // eager op-by-op arithmetic would round them twice.
  static auto rejected_of = ts::jit([](Array U, Array X, Array V, Array d) {
    Array one = f32(1), squeeze = f32(0.0331f), half = f32(0.5f);
    return ts::logical_and(U >= one - squeeze * (X * X), ts::log(U) >= X * half + d * ((one - V) + ts::log(V)));
  });
  static auto v_of = ts::jit([](Array x, Array c) { return f32(1) + x * c; });
  auto rejected = [&] { return rejected_of(U, X, V, d).item<bool>(); };
  while (rejected()) {
    Array k3 = rnd::split(k, 3);
    k = k3.index({0});
    Array kk = k3.index({1}), x = zero, v = f32(-1);
    while ((v <= zero).item<bool>()) {
      Array s = rnd::split(kk);
      kk = s.index({0});
      x = rnd::normal(s.index({1}));
      v = v_of(x, c);
    }
    X = x * x;
    V = (v * v) * v;
    U = rnd::uniform(k3.index({2}));
  }
  if (log_space) {
    Array log_samples = -(-ts::log1p(-rnd::uniform(subkey)));
    bool zero_boost = boost || log_samples.item<float>() == 0;
    Array log_boost = zero_boost ? zero : log_samples * (one / alpha);
    return ((ts::log(d) + ts::log(V)) + log_boost).item<float>();
  }
  Array samples = 1 - rnd::uniform(subkey);
  Array bst = boost ? one : ts::pow(samples, one / alpha);
  return ((d * V) * bst).item<float>();
}

}  // namespace

TEST_CASE("random dist: exponential, gumbel, laplace, logistic, cauchy are JAX's formulas of uniform, bit for bit") {
  for (ts::DType dt : {ts::float32, ts::float64}) {
    CAPTURE(ts::dtype_name(dt));
    const bool f64 = dt == ts::float64;
    const double tiny = f64 ? std::numeric_limits<double>::min() : double(std::numeric_limits<float>::min());
    const double eps = f64 ? std::numeric_limits<double>::epsilon() : double(std::numeric_limits<float>::epsilon());
    auto k = rnd::key(42);
    ts::Shape s{3, 257};
    CHECK(bits_equal(rnd::exponential(k, s, dt), -ts::log1p(-rnd::uniform(k, s, dt))));
    CHECK(bits_equal(rnd::gumbel(k, s, dt), -ts::log(-ts::log(rnd::uniform(k, s, dt, tiny, 1.0)))));
    ts::Array ul = rnd::uniform(k, s, dt, -1.0 + eps / 2, 1.0);
    CHECK(bits_equal(rnd::laplace(k, s, dt), ts::sign(ul) * ts::log1p(-ts::abs(ul))));
    ts::Array ug = rnd::uniform(k, s, dt, tiny, 1.0);
    CHECK(bits_equal(rnd::logistic(k, s, dt), ts::log(ug) - ts::log1p(-ug)));
    ts::Array uc = rnd::uniform(k, s, dt, eps, 1.0);
    ts::Array pi = ts::full({}, M_PI, dt), h = ts::full({}, 0.5, dt);
    CHECK(bits_equal(rnd::cauchy(k, s, dt), ts::tan(pi * (uc - h))));
    // inside jit too (the same program inlined)
    auto jitted = ts::jit([s, dt](ts::Array key) { return rnd::exponential(key, s, dt); });
    CHECK(bits_equal(jitted(k), rnd::exponential(k, s, dt)));
  }
}

TEST_CASE("random dist: rademacher, categorical and choice are JAX's formulas, exactly") {
  auto k = rnd::key(3);
  // rademacher: 2 * bernoulli(key, 0.5) - 1
  ts::Array r = rnd::rademacher(k, {1000});
  CHECK(r.dtype() == ts::int32);
  CHECK(same<int>(r, rnd::bernoulli(k, 0.5, {1000}).astype(ts::int32) * 2 - 1));
  CHECK(rnd::rademacher(k, {4}, ts::float32).dtype() == ts::float32);
  for (int v : r.to_vector<int>()) CHECK((v == 1 || v == -1));

  // categorical: argmax(logits + gumbel(key, ...), axis)
  ts::Array logits = ts::log(ts::array(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.5f, 0.4f, 0.3f, 0.2f, 0.1f,
                                                          1.f, 1.f, 1.f, 1.f, 1.f},
                                       {3, 5}));
  ts::Array c = rnd::categorical(k, logits);
  CHECK(c.shape() == ts::Shape{3});
  CHECK(c.dtype() == ts::int32);
  CHECK(same<int>(c, ts::argmax(logits + rnd::gumbel(k, {3, 5}), -1)));
  ts::Array c2 = rnd::categorical(k, logits, -1, ts::Shape{4, 3});
  CHECK(c2.shape() == ts::Shape{4, 3});
  CHECK(same<int>(c2, ts::argmax(ts::expand_dims(logits, 0) + rnd::gumbel(k, {4, 3, 5}), -1)));
  ts::Array lt = ts::transpose(logits);  // (5, 3), categories along axis 0
  ts::Array c3 = rnd::categorical(k, lt, 0);
  CHECK(c3.shape() == ts::Shape{3});
  CHECK(same<int>(c3, ts::argmax(lt + rnd::gumbel(k, {5, 3}), 0)));

  // choice without p: randint, or a prefix of permutation
  CHECK(same<int>(rnd::choice(k, 10, {6}), rnd::randint(k, {6}, 0, 10)));
  ts::Array perm = rnd::permutation(k, 10);
  CHECK(same<int>(rnd::choice(k, 10, {2, 3}, false), perm.index({ts::slice(0, 6)}).reshape({2, 3})));
  ts::Array a = ts::arange(40).reshape({4, 10});
  ts::Array ca = rnd::choice(k, a, {6}, false, std::nullopt, 1);
  CHECK(ca.shape() == ts::Shape{4, 6});
  CHECK(same<int>(ca, ts::take(a, perm.index({ts::slice(0, 6)}), 1)));
  ts::Array cb = rnd::choice(k, a, {2, 5});
  CHECK(cb.shape() == ts::Shape{2, 5, 10});
  CHECK(same<int>(cb, ts::take(a, rnd::randint(k, {2, 5}, 0, 4), 0)));

  // choice with p, with replacement: searchsorted(cumsum(p), cumsum(p)[-1] * (1 - uniform))
  std::vector<float> pv{0.1f, 0.0f, 0.25f, 0.4f, 0.25f};
  ts::Array p = ts::array(pv);
  std::vector<float> cum(pv.size());
  float acc = 0;
  for (size_t i = 0; i < pv.size(); ++i) cum[i] = acc = acc + pv[i];
  ts::Array rr = f32(cum.back()) * (1 - rnd::uniform(k, {500}));
  std::vector<int> want;
  for (float v : rr.to_vector<float>()) want.push_back(int(std::count_if(cum.begin(), cum.end(), [v](float c) { return c < v; })));
  CHECK(rnd::choice(k, 5, {500}, true, p).to_vector<int>() == want);
  for (int v : want) CHECK(v != 1);  // p = 0 is never drawn

  // choice with p, without replacement: the Gumbel top-k
  ts::Array g = rnd::gumbel(k, {5}) + ts::log(p);
  ts::Array top = ts::argsort(-g).index({ts::slice(0, 3)});
  CHECK(same<int>(rnd::choice(k, 5, {3}, false, p), top));
  ts::Array cp = rnd::choice(k, ts::arange(5) * 10, {3}, false, p);
  CHECK(same<int>(cp, top * 10));
}

TEST_CASE("random dist: gamma is the per-element Marsaglia-Tsang loop on split keys") {
  auto k = rnd::key(11);
  std::vector<float> av{0.3f, 0.5f, 1.0f, 1.7f, 3.0f, 9.5f, 0.05f, 40.0f};
  const std::int64_t n = std::int64_t(av.size());
  ts::Array a = ts::array(av);
  for (bool on : {true, false}) {
    Mode mode(on);
    CAPTURE(on);
    ts::Array g = rnd::gamma(k, a);
    ts::Array lg = rnd::loggamma(k, a);
    CHECK(g.shape() == ts::Shape{n});
    CHECK(g.dtype() == ts::float32);
    ts::Array keys = rnd::split(k, n);
    auto gv = g.to_vector<float>(), lgv = lg.to_vector<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK(gv[size_t(i)] == gamma_one_ref(keys.index({i}), av[size_t(i)], false));
      CHECK(lgv[size_t(i)] == gamma_one_ref(keys.index({i}), av[size_t(i)], true));
      CHECK(std::exp(double(lgv[size_t(i)])) == doctest::Approx(gv[size_t(i)]).epsilon(1e-5));
    }
  }
  // each element's loop is its own: in partitionable mode split(k, n)[i]
  // does not depend on n, so a longer draw begins with the shorter one
  Mode mode(true);
  ts::Array g5 = rnd::gamma(k, 2.5, ts::Shape{5}), g9 = rnd::gamma(k, 2.5, ts::Shape{9});
  auto v5 = g5.to_vector<float>(), v9 = g9.to_vector<float>();
  CHECK(std::vector<float>(v9.begin(), v9.begin() + 5) == v5);
  // a broadcast to shape, and shape defaulting to a's
  CHECK(rnd::gamma(k, ts::full({2, 1}, 2.0f), ts::Shape{2, 3}).shape() == ts::Shape{2, 3});
  CHECK(bits_equal(rnd::gamma(k, ts::full({2, 3}, 2.0f)), rnd::gamma(k, 2.0, ts::Shape{2, 3})));
  CHECK(rnd::gamma(k, 2.0, ts::Shape{3}, ts::float64).dtype() == ts::float64);
  CHECK_THROWS_AS(rnd::gamma(k, ts::ones({3}), ts::Shape{4}), ts::ShapeError);   // cannot broadcast
  CHECK_THROWS_AS(rnd::gamma(k, ts::ones({2, 3}), ts::Shape{3}), ts::ValueError);  // broadcasts past shape
  CHECK(rnd::gamma(k, 2.0, ts::Shape{0}).shape() == ts::Shape{0});
}

TEST_CASE("random dist: t and beta are JAX's compositions of normal and (log)gamma on split keys") {
  auto k = rnd::key(5);
  ts::Array ks = rnd::split(k);
  // t: normal(k0) * sqrt((df / 2) / gamma(k1, df / 2))
  ts::Array tv = rnd::t(k, 4.0, ts::Shape{300});
  ts::Array half = f32(2.0f);
  ts::Array want_t = rnd::normal(ks.index({0}), {300}) * ts::sqrt(half / rnd::gamma(ks.index({1}), 2.0, ts::Shape{300}));
  CHECK(bits_equal(tv, want_t));
  // beta: the two log-gammas normalised by their max
  ts::Array b = rnd::beta(k, 2.0, 3.0, ts::Shape{300});
  ts::Array la = rnd::loggamma(ks.index({0}), 2.0, ts::Shape{300}), lb = rnd::loggamma(ks.index({1}), 3.0, ts::Shape{300});
  ts::Array mx = ts::maximum(la, lb);
  ts::Array ea = ts::exp(la - mx), eb = ts::exp(lb - mx);
  CHECK(bits_equal(b, ea / (ea + eb)));
  // dirichlet: softmax of log-gammas of alpha broadcast to shape + (n,)
  ts::Array alpha = ts::array(std::vector<float>{0.5f, 1.5f, 4.0f});
  ts::Array d = rnd::dirichlet(k, alpha, ts::Shape{7});
  CHECK(d.shape() == ts::Shape{7, 3});
  ts::Array l = rnd::loggamma(k, ts::broadcast_to(alpha, {7, 3}));
  ts::Array e = ts::exp(l - ts::max(l, -1, true));
  CHECK(bits_equal(d, e / ts::sum(e, -1, true)));
}

TEST_CASE("random dist: poisson and binomial follow JAX's whole-array loops") {
  auto k = rnd::key(9);
  // every lam < 10: Knuth's loop alone decides
  ts::Array lam = ts::array(std::vector<float>{0.5f, 2.0f, 7.5f, 9.9f, 0.0f, 3.0f});
  ts::Array got = rnd::poisson(k, lam);
  CHECK(got.dtype() == ts::int32);
  ts::Array rng = k, kk = ts::zeros({6}, ts::int32), lp = ts::zeros({6});
  while (ts::any(lp > -lam).item<bool>()) {
    ts::Array s = rnd::split(rng);
    rng = s.index({0});
    kk = ts::where(lp > -lam, kk + 1, kk);
    lp = lp + ts::log(rnd::uniform(s.index({1}), {6}));
  }
  std::vector<int> want = (kk - 1).to_vector<int>();
  want[4] = 0;  // lam == 0
  CHECK(got.to_vector<int>() == want);
  CHECK(rnd::poisson(k, 3.0, ts::Shape{5}, ts::int64).dtype() == ts::int64);

  // binomial where n * p <= 10 and p < 1/2: the inversion loop alone decides
  ts::Array n = ts::array(std::vector<float>{5, 20, 30, 12});
  ts::Array p = ts::array(std::vector<float>{0.3f, 0.1f, 0.25f, 0.45f});
  ts::Array bn = rnd::binomial(k, n, p);
  CHECK(bn.dtype() == ts::float32);
  auto inversion = [&](const ts::Array& q) {
    ts::Array key = k, num = ts::zeros({4}), sum = ts::zeros({4});
    ts::Array l1 = ts::log1p(-q);
    while (ts::any(sum <= n).item<bool>()) {
      ts::Array s = rnd::split(key);  // subkey, key = split(key)
      key = s.index({1});
      num = ts::where(sum <= n, num + 1, num);
      sum = sum + ts::ceil(ts::log(rnd::uniform(s.index({0}), {4})) / l1);
    }
    return num - 1;
  };
  CHECK(bits_equal(bn, inversion(p)));
  // p > 1/2 counts the failures: n - inversion(n, 1 - p)
  ts::Array pf = 1.0f - p;
  CHECK(bits_equal(rnd::binomial(k, n, pf), n - inversion(1.0f - pf)));
}

TEST_CASE("random dist: determinism, distinct keys, shapes, dtypes, vmap and errors") {
  auto k0 = rnd::key(0), k1 = rnd::key(1);
  ts::Array mean = ts::zeros({2}), cov = ts::eye(2);
  ts::Array logits = ts::zeros({6});
  std::vector<std::pair<const char*, std::function<ts::Array(const ts::Array&)>>> draws = {
      {"exponential", [](const ts::Array& k) { return rnd::exponential(k, {64}); }},
      {"gumbel", [](const ts::Array& k) { return rnd::gumbel(k, {64}); }},
      {"laplace", [](const ts::Array& k) { return rnd::laplace(k, {64}); }},
      {"logistic", [](const ts::Array& k) { return rnd::logistic(k, {64}); }},
      {"cauchy", [](const ts::Array& k) { return rnd::cauchy(k, {64}); }},
      {"rademacher", [](const ts::Array& k) { return rnd::rademacher(k, {64}).astype(ts::float32); }},
      {"categorical", [&](const ts::Array& k) { return rnd::categorical(k, logits, -1, ts::Shape{64}).astype(ts::float32); }},
      {"choice", [](const ts::Array& k) { return rnd::choice(k, 1000, {64}).astype(ts::float32); }},
      {"gamma", [](const ts::Array& k) { return rnd::gamma(k, 0.7, ts::Shape{64}); }},
      {"beta", [](const ts::Array& k) { return rnd::beta(k, 0.5, 0.5, ts::Shape{64}); }},
      {"dirichlet", [](const ts::Array& k) { return rnd::dirichlet(k, ts::ones({4}), ts::Shape{16}).reshape({64}); }},
      {"t", [](const ts::Array& k) { return rnd::t(k, 3.0, ts::Shape{64}); }},
      {"poisson", [](const ts::Array& k) { return rnd::poisson(k, 30.0, ts::Shape{64}).astype(ts::float32); }},
      {"binomial", [](const ts::Array& k) { return rnd::binomial(k, 50.0, 0.5, ts::Shape{64}); }},
      {"multivariate_normal", [&](const ts::Array& k) { return rnd::multivariate_normal(k, mean, cov, ts::Shape{32}).reshape({64}); }},
      {"orthogonal", [](const ts::Array& k) { return rnd::orthogonal(k, 8).reshape({64}); }},
  };
  for (auto& [name, f] : draws) {
    CAPTURE(name);
    ts::Array a = f(k0), b = f(k0), c = f(k1);
    CHECK(a.shape() == ts::Shape{64});
    CHECK(bits_equal(a, b));
    CHECK(differ<float>(a, c));
  }
  // batched over keys with vmap: each row is the draw of its key
  ts::Array keys = rnd::split(k0, 3);
  ts::Array vg = ts::vmap([](ts::Array key) { return rnd::gamma(key, 1.5, ts::Shape{4}); })(keys);
  ts::Array ve = ts::vmap([](ts::Array key) { return rnd::exponential(key, {4}); })(keys);
  for (std::int64_t i = 0; i < 3; ++i) {
    CHECK(bits_equal(vg.index({i}), rnd::gamma(keys.index({i}), 1.5, ts::Shape{4})));
    CHECK(bits_equal(ve.index({i}), rnd::exponential(keys.index({i}), {4})));
  }
  // choice without replacement: distinct, with or without p
  for (int trial = 0; trial < 5; ++trial) {
    auto kt = rnd::fold_in(k0, std::uint32_t(trial));
    auto c = rnd::choice(kt, 50, {20}, false).to_vector<int>();
    CHECK(std::set<int>(c.begin(), c.end()).size() == 20);
    auto cp = rnd::choice(kt, 50, {20}, false, ts::linspace(0.01, 1, 50)).to_vector<int>();
    CHECK(std::set<int>(cp.begin(), cp.end()).size() == 20);
  }
  CHECK_THROWS_AS(rnd::choice(k0, 5, {6}, false), ts::ValueError);
  CHECK(rnd::choice(k0, 5, {0}).shape() == ts::Shape{0});
  // float64 draws
  CHECK(rnd::gumbel(k0, {3}, ts::float64).dtype() == ts::float64);
  CHECK(rnd::t(k0, 5.0, ts::Shape{3}, ts::float64).dtype() == ts::float64);
  CHECK(rnd::binomial(k0, 5.0, 0.5, ts::Shape{3}, ts::float64).dtype() == ts::float64);
  CHECK_THROWS_AS(rnd::exponential(k0, {3}, ts::int32), ts::TypeError);
  CHECK_THROWS_AS(rnd::gamma(rnd::split(k0), 1.0), ts::TypeError);
  CHECK_THROWS_AS(rnd::exponential(k0, {-1}), ts::ShapeError);
  CHECK_THROWS_AS(rnd::gamma(k0, 1.0, ts::Shape{-2}), ts::Error);
  CHECK_THROWS_AS(rnd::poisson(k0, 1.0, ts::Shape{3}, ts::float32), ts::TypeError);
  CHECK_THROWS_AS(rnd::multivariate_normal(k0, ts::zeros({3}), ts::eye(2)), ts::ValueError);
  CHECK_THROWS_AS(rnd::categorical(k0, ts::zeros({3}, ts::int32)), ts::TypeError);
  CHECK_THROWS_AS(rnd::choice(k0, 4, {2}, true, ts::ones({5})), ts::ValueError);
}

TEST_CASE("random dist: orthogonal matrices are orthogonal") {
  auto k = rnd::key(21);
  ts::Array q = rnd::orthogonal(k, 6, {5});
  CHECK(q.shape() == ts::Shape{5, 6, 6});
  ts::Array qtq = ts::matmul(ts::swapaxes(q, -1, -2), q);
  CHECK(ts::allclose(qtq, ts::broadcast_to(ts::eye(6), {5, 6, 6}), 1e-5, 1e-5).item<bool>());
  CHECK(ts::allclose(ts::matmul(q, ts::swapaxes(q, -1, -2)), ts::broadcast_to(ts::eye(6), {5, 6, 6}), 1e-5, 1e-5).item<bool>());
  // JAX's algorithm: q of the QR of normal draws, columns signed by r's diagonal
  ts::Array z = rnd::normal(k, {5, 6, 6});
  auto qr = ts::linalg::qr(z);
  ts::Array d = ts::sum(qr.r * ts::eye(6), -1);
  CHECK(ts::allclose(q, qr.q * ts::expand_dims(ts::sign(d), -2), 0, 0).item<bool>());
  // semi-orthogonal: n < m has orthonormal rows, n > m orthonormal columns
  ts::Array wide = rnd::orthogonal(k, 3, {}, ts::float64, 7);
  CHECK(wide.shape() == ts::Shape{3, 7});
  CHECK(ts::allclose(ts::matmul(wide, wide.T()), ts::eye(3, std::nullopt, 0, ts::float64), 1e-12, 1e-12).item<bool>());
  ts::Array tall = rnd::orthogonal(k, 7, {}, ts::float32, 3);
  CHECK(tall.shape() == ts::Shape{7, 3});
  CHECK(ts::allclose(ts::matmul(tall.T(), tall), ts::eye(3), 1e-5, 1e-5).item<bool>());
  // Haar: the mean of a fixed entry is 0, its variance 1 / n
  ts::Array big = rnd::orthogonal(k, 4, {20000});
  ts::Array e00 = big.index({ts::all, 0, 0});
  check_moments(e00, 0.0, 0.25, 3.0 / 24.0, "orthogonal q[0, 0]");  // E x^4 = 3 / (n (n + 2))
}

TEST_CASE("random dist: moments of 200k draws (continuous)") {
  auto k = rnd::key(1234);
  const double pi2 = M_PI * M_PI;
  CHECK(all_of(check_moments(rnd::exponential(k, {kN}), 1, 1, 9, "exponential"), [](double v) { return v >= 0; }));
  check_moments(rnd::gumbel(k, {kN}), kEulerGamma, pi2 / 6, 2.4 * (pi2 / 6) * (pi2 / 6) + 3 * (pi2 / 6) * (pi2 / 6), "gumbel");
  check_moments(rnd::laplace(k, {kN}), 0, 2, 24, "laplace");
  check_moments(rnd::logistic(k, {kN}), 0, pi2 / 3, (1.2 + 3) * (pi2 / 3) * (pi2 / 3), "logistic");
  check_moments(rnd::exponential(k, {kN}, ts::float64), 1, 1, 9, "exponential f64");
  {  // cauchy has no moments: its median is 0 and P(|x| < 1) = 1/2
    auto v = host(rnd::cauchy(k, {kN}));
    double inside = 0, below = 0;
    for (double x : v) inside += std::fabs(x) < 1, below += x < 0;
    const double se = std::sqrt(0.25 / double(kN));
    CHECK(std::fabs(inside / double(kN) - 0.5) <= 5 * se);
    CHECK(std::fabs(below / double(kN) - 0.5) <= 5 * se);
  }
  for (double a : {0.5, 3.0}) {
    auto v = check_moments(rnd::gamma(k, a, ts::Shape{kN}), a, a, 3 * a * a + 6 * a, "gamma");
    CHECK(all_of(v, [](double x) { return x >= 0 && std::isfinite(x); }));
  }
  {
    ts::Array lg = rnd::loggamma(k, 0.01, ts::Shape{kN});  // log of tiny values: the boost in log space
    auto v = host(ts::exp(lg));
    Moments m = moments(v);
    CHECK(std::fabs(m.mean - 0.01) <= 5 * std::sqrt(0.01 / double(kN)));
  }
  {  // beta(2, 3): mean 2/5, variance 1/25
    const double a = 2, b = 3, mu = a / (a + b), s2 = a * b / ((a + b) * (a + b) * (a + b + 1));
    // the central fourth moment of beta(2, 3), by expanding E[(x - mu)^4] with E[x^k] = prod (a + j) / (a + b + j)
    double raw[5] = {1, 0, 0, 0, 0};
    for (int kk = 1; kk <= 4; ++kk) raw[kk] = raw[kk - 1] * (a + kk - 1) / (a + b + kk - 1);
    const double m4 = raw[4] - 4 * mu * raw[3] + 6 * mu * mu * raw[2] - 3 * mu * mu * mu * mu;
    CHECK(all_of(check_moments(rnd::beta(k, a, b, ts::Shape{kN}), mu, s2, m4, "beta"),
                 [](double x) { return x >= 0 && x <= 1; }));
  }
  {  // t with 10 degrees of freedom: variance 10/8, excess kurtosis 1
    const double s2 = 10.0 / 8.0;
    check_moments(rnd::t(k, 10.0, ts::Shape{kN}), 0, s2, 4 * s2 * s2, "t");
  }
  {  // dirichlet(1, 2, 3): each component beta(alpha_i, sum - alpha_i)
    ts::Array d = rnd::dirichlet(k, ts::array(std::vector<float>{1, 2, 3}), ts::Shape{kN});
    auto dv = d.to_vector<float>();
    bool in_simplex = true;
    for (size_t i = 0; i < dv.size(); i += 3) {
      in_simplex &= std::all_of(dv.begin() + long(i), dv.begin() + long(i) + 3, [](float v) { return v >= 0 && v <= 1; });
      in_simplex &= std::fabs(double(dv[i]) + dv[i + 1] + dv[i + 2] - 1) <= 1e-5;
    }
    CHECK(in_simplex);
    for (int i = 0; i < 3; ++i) {
      const double a = i + 1, b = 6 - a, mu = a / 6, s2 = a * b / (36.0 * 7);
      double raw[5] = {1, 0, 0, 0, 0};
      for (int kk = 1; kk <= 4; ++kk) raw[kk] = raw[kk - 1] * (a + kk - 1) / (a + b + kk - 1);
      const double m4 = raw[4] - 4 * mu * raw[3] + 6 * mu * mu * raw[2] - 3 * mu * mu * mu * mu;
      check_moments(d.index({ts::all, i}), mu, s2, m4, "dirichlet");
    }
  }
}

TEST_CASE("random dist: moments of 200k draws (discrete, multivariate)") {
  auto k = rnd::key(77);
  {  // rademacher: mean 0 (its variance 1 - mean^2 is exact)
    Moments m = moments(host(rnd::rademacher(k, {kN})));
    CHECK(std::fabs(m.mean) <= 5 * std::sqrt(1.0 / double(kN)));
  }
  for (double lam : {3.5, 25.0}) {  // Knuth's and the rejection sampler
    auto v = check_moments(rnd::poisson(k, lam, ts::Shape{kN}), lam, lam, lam * (1 + 3 * lam), "poisson");
    CHECK(all_of(v, [](double x) { return x >= 0; }));
  }
  for (auto [n, p] : {std::pair{20.0, 0.3}, std::pair{100.0, 0.4}, std::pair{60.0, 0.85}}) {  // inversion, BTRS, flipped
    const double s2 = n * p * (1 - p);
    auto v = check_moments(rnd::binomial(k, n, p, ts::Shape{kN}), n * p, s2, s2 * (1 + (3 * n - 6) * p * (1 - p)), "binomial");
    CHECK(all_of(v, [n = n](double x) { return x >= 0 && x <= n && x == std::floor(x); }));
  }
  {  // categorical and choice with p: frequencies
    std::vector<float> pv{0.1f, 0.2f, 0.3f, 0.4f};
    auto freq_ok = [&](const std::vector<int>& draws, const char* what) {
      CAPTURE(what);
      for (int c = 0; c < 4; ++c) {
        double f = double(std::count(draws.begin(), draws.end(), c)) / double(draws.size());
        CHECK(std::fabs(f - pv[size_t(c)]) <= 5 * std::sqrt(pv[size_t(c)] * (1 - pv[size_t(c)]) / double(draws.size())));
      }
    };
    freq_ok(rnd::categorical(k, ts::log(ts::array(pv)), -1, ts::Shape{kN}).to_vector<int>(), "categorical");
    freq_ok(rnd::choice(k, 4, {kN}, true, ts::array(pv)).to_vector<int>(), "choice");
  }
  {  // multivariate normal: mean and covariance, each method
    ts::Array mean = ts::array(std::vector<float>{1.0f, -2.0f});
    ts::Array cov = ts::array(std::vector<float>{2.0f, 0.6f, 0.6f, 1.0f}, {2, 2});
    const double c[2][2] = {{2.0, 0.6}, {0.6, 1.0}};
    for (const char* method : {"cholesky", "eigh", "svd"}) {
      CAPTURE(method);
      ts::Array x = rnd::multivariate_normal(k, mean, cov, ts::Shape{kN}, std::nullopt, method);
      CHECK(x.shape() == ts::Shape{kN, 2});
      auto v = x.to_vector<double>();
      double m[2] = {0, 0}, s[2][2] = {{0, 0}, {0, 0}};
      for (std::int64_t i = 0; i < kN; ++i)
        for (int a = 0; a < 2; ++a) m[a] += v[size_t(2 * i + a)] / double(kN);
      for (std::int64_t i = 0; i < kN; ++i)
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) s[a][b] += (v[size_t(2 * i + a)] - m[a]) * (v[size_t(2 * i + b)] - m[b]) / double(kN);
      CHECK(std::fabs(m[0] - 1.0) <= 5 * std::sqrt(c[0][0] / double(kN)));
      CHECK(std::fabs(m[1] + 2.0) <= 5 * std::sqrt(c[1][1] / double(kN)));
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)  // var of x_a x_b for a normal: c_aa c_bb + c_ab^2
          CHECK(std::fabs(s[a][b] - c[a][b]) <= 5 * std::sqrt((c[a][a] * c[b][b] + c[a][b] * c[a][b]) / double(kN)));
    }
    // cholesky: mean + L z with JAX's normal draws
    ts::Array z = rnd::normal(k, {3, 2});
    ts::Array L = ts::linalg::cholesky(cov);
    ts::Array want = mean + ts::matmul(z, L.T());
    CHECK(ts::allclose(rnd::multivariate_normal(k, mean, cov, ts::Shape{3}), want, 1e-6, 1e-6).item<bool>());
    CHECK(rnd::multivariate_normal(k, mean, cov).shape() == ts::Shape{2});
    CHECK(rnd::multivariate_normal(k, mean, cov, std::nullopt, ts::float64).dtype() == ts::float64);
    CHECK_THROWS_AS(rnd::multivariate_normal(k, mean, cov, std::nullopt, std::nullopt, "qr"), ts::ValueError);
  }
}

TEST_CASE("random dist: a draw sharded over 8 devices inside jit equals the unsharded one") {
  auto k = rnd::key(8);
  auto mesh = ts::make_mesh({8}, {"x"});
  ts::NamedSharding sh(mesh, P("x"));
  auto plain = [](ts::Array key) {
    return std::vector<ts::Array>{rnd::exponential(key, {64}), rnd::gumbel(key, {64}), rnd::gamma(key, 1.5, ts::Shape{64}),
                                  rnd::poisson(key, 4.0, ts::Shape{64}).astype(ts::float32)};
  };
  auto want = plain(k);
  auto f = ts::jit(plain, {.out_shardings = {ts::Sharding(sh)}});
  auto got = f(k);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].sharding() == ts::Sharding(sh));
    CHECK(got[i].addressable_shards().size() == 8);
    CHECK(bits_equal(got[i], want[i]));
  }
}

