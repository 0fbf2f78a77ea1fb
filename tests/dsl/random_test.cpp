// ts::random against values measured from JAX 0.11.2 (tests/data/jax/prng*.json),
// in both threefry modes, and sharded over 1..8 devices.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/common/golden.hpp"
#include "tracer/rules.hpp"

namespace ts = tessel;
using ts::P;
using ts::testing::jax_fact;

namespace {

struct Mode {
  explicit Mode(bool on) : saved(ts::config().threefry_partitionable) { ts::config().threefry_partitionable = on; }
  ~Mode() { ts::config().threefry_partitionable = saved; }
  bool saved;
};

std::vector<double> doubles(const nlohmann::json& j) { return j.get<std::vector<double>>(); }

// Equal within `ulps` units in the last place of float32 (exact when 0).
std::string close_f32(const std::vector<float>& got, const std::vector<double>& want, int ulps) {
  if (got.size() != want.size()) return "sizes differ";
  for (size_t i = 0; i < got.size(); ++i) {
    float w = float(want[i]);
    float tol = ulps * std::max(std::fabs(std::nextafter(w, INFINITY) - w), 1e-30f);
    if (!(std::fabs(got[i] - w) <= tol))
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(w);
  }
  return "";
}

std::vector<std::uint32_t> u32s(const ts::Array& a) { return a.to_vector<std::uint32_t>(); }

}  // namespace

TEST_CASE("threefry2x32 known answers") {
  std::uint32_t x0 = 0, x1 = 0;
  ts::threefry2x32_block(0, 0, x0, x1);
  CHECK(x0 == 0x6b200159u);
  CHECK(x1 == 0x99ba4efeu);
  x0 = 0x243f6a88u, x1 = 0x85a308d3u;
  ts::threefry2x32_block(0x13198a2eu, 0x03707344u, x0, x1);
  CHECK(x0 == 0xc4923a9cu);
  CHECK(x1 == 0x483df7a0u);
}

TEST_CASE("keys, split and fold_in equal JAX's in both modes") {
  auto facts = jax_fact("prng.json");
  for (bool on : {false, true}) {
    Mode m(on);
    auto f = facts[on ? "on" : "off"];
    CAPTURE(on);
    CHECK(u32s(ts::random::key_data(ts::random::key(0))) == f["key_data_key0"].get<std::vector<std::uint32_t>>());
    CHECK(u32s(ts::random::key(42)) == f["key_data_key42"].get<std::vector<std::uint32_t>>());
    std::vector<std::uint32_t> s2, s5;
    for (auto& r : f["split2"]) for (auto& v : r) s2.push_back(v);
    for (auto& r : f["split5"]) for (auto& v : r) s5.push_back(v);
    CHECK(u32s(ts::random::split(ts::random::key(0))) == s2);
    CHECK(ts::random::split(ts::random::key(0), 5).shape() == ts::Shape{5, 2});
    CHECK(u32s(ts::random::split(ts::random::key(0), 5)) == s5);
    CHECK(u32s(ts::random::fold_in(ts::random::key(0), 7)) == f["fold_in_7"].get<std::vector<std::uint32_t>>());
  }
}

TEST_CASE("bits, uniform and normal equal JAX's for every measured shape") {
  auto facts = jax_fact("prng.json");
  for (bool on : {false, true}) {
    Mode m(on);
    auto f = facts[on ? "on" : "off"];
    auto k = ts::random::key(0);
    for (ts::Shape shape : std::vector<ts::Shape>{{1}, {2}, {3}, {7}, {4, 4}, {3, 5}, {1025}, {2, 3, 4}}) {
      std::string s;
      for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
      CAPTURE(on);
      CAPTURE(s);
      CHECK(u32s(ts::random::bits(k, shape)) == f["bits_" + s].get<std::vector<std::uint32_t>>());
      CHECK(close_f32(ts::random::uniform(k, shape).to_vector<float>(), doubles(f["uniform_" + s]), 0) == "");
      // normal goes through erf_inv: a few ulp where log1p differs from XLA's.
      CHECK(close_f32(ts::random::normal(k, shape).to_vector<float>(), doubles(f["normal_" + s]), 8) == "");
    }
  }
}

TEST_CASE("the reference's facts: normal(key(0), (4, 4)) with partitionable on") {
  Mode m(true);
  std::vector<double> want = {1.622642159,  2.025264740,  -0.433594435, -0.078617349, 0.176090896, -0.972089231,
                              -0.495298743, 0.494378597,  0.664349318,  -0.950163484, 2.179530382, -1.955150604,
                              0.358570725,  0.157795131,  1.277084708,  1.510464788};
  CHECK(close_f32(ts::random::normal(ts::random::key(0), {4, 4}).to_vector<float>(), want, 8) == "");
}

TEST_CASE("randint, bernoulli, permutation, truncated_normal and the seed's draw") {
  auto facts = jax_fact("prng.json");
  for (bool on : {false, true}) {
    Mode m(on);
    auto f = facts[on ? "on" : "off"];
    auto k = ts::random::key(42);
    CAPTURE(on);
    CHECK(close_f32(ts::random::uniform(k, {10}, ts::float32, -2.0, 3.0).to_vector<float>(), doubles(f["uniform_minmax_10"]), 0) == "");
    CHECK(ts::random::randint(k, {20}, 0, 10).to_vector<int>() == f["randint_0_10_20"].get<std::vector<int>>());
    CHECK(ts::random::randint(k, {9}, -5, 1000).to_vector<int>() == f["randint_m5_1000_9"].get<std::vector<int>>());
    CHECK(ts::random::bernoulli(k, 0.3, {16}).to_vector<bool>() == f["bernoulli_p3_16"].get<std::vector<bool>>());
    CHECK(ts::random::permutation(k, 10).to_vector<int>() == f["permutation_10"].get<std::vector<int>>());
    CHECK(ts::random::permutation(k, ts::arange(6.0)).to_vector<double>() == doubles(f["permutation_arr"]));
    CHECK(close_f32(ts::random::truncated_normal(k, -1.0, 2.0, {8}).to_vector<float>(), doubles(f["truncated_normal_8"]), 16) == "");
    CHECK(close_f32((ts::arange(24) + ts::random::uniform(k, {24})).to_vector<float>(), doubles(f["seed_f_key42_arange24"]), 0) == "");
    auto keys = ts::random::split(ts::random::key(0), 4);
    for (int i = 0; i < 4; ++i)
      CHECK(close_f32(ts::random::normal(keys.index({i}), {3}).to_vector<float>(), doubles(f["split4_then_normal"][i]), 8) == "");
  }
}

TEST_CASE("float64 draws and 64 random bits equal JAX's (x64)") {
  auto facts = jax_fact("prng_f64.json");
  for (bool on : {false, true}) {
    Mode m(on);
    auto f = facts[on ? "on" : "off"];
    auto k = ts::random::key(0);
    CAPTURE(on);
    CHECK(ts::random::uniform(k, {7}, ts::float64).to_vector<double>() == doubles(f["uniform_f64_7"]));
    auto n = ts::random::normal(k, {7}, ts::float64).to_vector<double>();
    auto want = doubles(f["normal_f64_7"]);
    for (size_t i = 0; i < 7; ++i) CHECK(n[i] == doctest::Approx(want[i]).epsilon(1e-13));
    auto b = ts::random::bits(k, {5}, ts::int64).to_vector<std::int64_t>();
    auto wb = f["bits64_5"].get<std::vector<std::uint64_t>>();
    for (size_t i = 0; i < 5; ++i) CHECK(std::uint64_t(b[i]) == wb[i]);
  }
}

TEST_CASE("float64 erf_inv near +-1 and the normal draw that met it: finite, and erf(erf_inv(x)) = x") {
  // Within 2^-25 of +-1 a float64 rounds to +-1 in float32, where the
  // polynomial's start is infinite: this returned NaN (one float64 normal draw
  // in about 3e7: normal(key(5), (3000, 3000)) held one).
  std::vector<double> xs;
  for (int k = 2; k <= 53; ++k) {
    xs.push_back(1 - std::ldexp(1.0, -k));
    xs.push_back(-(1 - std::ldexp(1.0, -k)));
  }
  xs.push_back(0.99999998488519026);
  const ts::Array x = ts::array(xs);
  for (bool jitted : {false, true}) {
    CAPTURE(jitted);
    auto f = [](const ts::Array& a) { return ts::lax::erf_inv(a); };
    auto y = (jitted ? ts::jit(f)(x) : f(x)).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(xs[i]);
      REQUIRE(std::isfinite(y[i]));
      CHECK(std::signbit(y[i]) == std::signbit(xs[i]));
      // erfc(|y|) equals 1 - |x| to within y's rounding (which moves erfc
      // by 2 y^2 ulp, relatively) and a few ulp of erfc's own.
      const double t = 1 - std::fabs(xs[i]);
      CHECK(std::fabs(std::erfc(std::fabs(y[i])) - t) <= (2 * y[i] * y[i] + 4) * 2.3e-16 * t);
    }
  }
  CHECK(ts::lax::erf_inv(ts::array(std::vector<double>{1.0, -1.0})).to_vector<double>() == std::vector<double>{INFINITY, -INFINITY});
  auto n = ts::random::normal(ts::random::key(5), {3000 * 3000}, ts::float64);
  CHECK_FALSE(ts::any(ts::isnan(n)).item<bool>());
  const double drawn = n.index({7147849}).item<double>();  // sqrt(2) erf_inv(u), u = 0.99999998488519026
  CHECK(std::fabs(std::erfc(drawn / std::sqrt(2.0)) - (1 - 0.99999998488519026)) <= 1e-14 * (1 - 0.99999998488519026));
}

TEST_CASE("a sharded draw equals the unsharded one, on 1..8 devices, even and uneven") {
  for (bool on : {false, true}) {
    Mode m(on);
    auto k = ts::random::key(7);
    auto f = ts::jit([](ts::Array key, ts::Array x) { return x + ts::random::uniform(key, x.shape()); });
    for (std::int64_t n : {24, 29}) {
      auto x = ts::zeros({n, 3});
      auto want = f(k, x).to_vector<float>();
      auto all = ts::devices();
      for (int d : {1, 2, 3, 5, 8}) {
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + d), "x");
        auto xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
        auto got = f(k, xs);
        CAPTURE(on);
        CAPTURE(n);
        CAPTURE(d);
        CHECK(got.to_vector<float>() == want);
        CHECK(got.sharding() == xs.sharding());
        std::string text = f.lower(k, xs).compile().as_text();
        bool communicates = text.find("collective-permute(") != std::string::npos ||
                            text.find("all-gather(") != std::string::npos || text.find("all-to-all(") != std::string::npos;
        if (on) CHECK_FALSE(communicates);
      }
    }
  }
}

TEST_CASE("bad keys are TypeErrors") {
  CHECK_THROWS_AS(ts::random::uniform(ts::zeros({2})), ts::TypeError);
  CHECK_THROWS_AS(ts::random::normal(ts::random::split(ts::random::key(0))), ts::TypeError);
}
