// jax.nn.scaled_matmul (issue 36): the block-scaled product against a plain
// double loop over the same float8 / bfloat16 values (every product and
// scale exact in double), JAX's docstring example, eagerly, under jit and
// with the batch split over 1..8 devices, and JAX's shape errors.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

// a[B, M, K] * rep(as)[B, M, K] . b[B, N, K] * rep(bs)[B, N, K] over K, in double.
std::vector<double> reference(const ts::Array& a, const ts::Array& b, const ts::Array& as, const ts::Array& bs) {
  const auto av = a.astype(ts::float64).to_vector<double>(), bv = b.astype(ts::float64).to_vector<double>();
  const auto asv = as.astype(ts::float64).to_vector<double>(), bsv = bs.astype(ts::float64).to_vector<double>();
  const std::int64_t B = a.shape()[0], M = a.shape()[1], K = a.shape()[2], N = b.shape()[1];
  const std::int64_t Ka = as.shape()[2], Kb = bs.shape()[2];
  std::vector<double> out(std::size_t(B * M * N));
  for (std::int64_t i = 0; i < B; ++i)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k)
          s += av[(i * M + m) * K + k] * asv[(i * M + m) * Ka + k / (K / Ka)] * bv[(i * N + n) * K + k] *
               bsv[(i * N + n) * Kb + k / (K / Kb)];
        out[std::size_t((i * M + m) * N + n)] = s;
      }
  return out;
}

ts::Array random_in(std::mt19937& rng, const ts::Shape& s, ts::DType t, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(std::size_t(ts::numel(s)));
  for (auto& x : v) x = u(rng);
  return ts::array(v, s).astype(t);
}

}  // namespace

TEST_CASE("nn::scaled_matmul: JAX's docstring example") {
  ts::Array a = ts::reshape(ts::array(std::vector<int>{1, 2, 3}), {1, 1, 3});
  ts::Array b = ts::reshape(ts::array(std::vector<int>{4, 5, 6}), {1, 1, 3});
  ts::Array s = ts::reshape(ts::array(std::vector<double>{0.5}), {1, 1, 1});
  ts::Array r = ts::nn::scaled_matmul(a, b, s, s);
  CHECK(r.dtype() == ts::float32);
  CHECK(r.shape() == ts::Shape{1, 1, 1});
  CHECK(r.item<float>() == 8.0f);
}

TEST_CASE("nn::scaled_matmul: float8 and bfloat16 data, blocks of 32 and 16, against a double loop, eager, jit and 1..8 devices") {
  std::mt19937 rng(7);
  const std::int64_t B = 5, M = 6, N = 3, K = 64;
  for (ts::DType data : {ts::float8_e4m3fn, ts::float8_e5m2, ts::bfloat16}) {
    CAPTURE(ts::dtype_name(data));
    ts::Array a = random_in(rng, {B, M, K}, data, -4, 4), b = random_in(rng, {B, N, K}, data, -4, 4);
    // Powers of two as scales (mxfp8's e8m0 scales are), blocks of 32 (mxfp8's) or 16 (nvfp4's).
    const std::int64_t block = data == ts::float8_e4m3fn ? 32 : 16;
    auto pow2 = [&](const ts::Shape& s) { return ts::exp2(ts::floor(random_in(rng, s, ts::float32, -6, 6))); };
    ts::Array as = pow2({B, M, K / block}).astype(ts::bfloat16), bs = pow2({B, N, K / block}).astype(ts::bfloat16);
    const auto want = reference(a, b, as, bs);
    auto f = [](const ts::Array& a, const ts::Array& b, const ts::Array& as, const ts::Array& bs) {
      return ts::nn::scaled_matmul(a, b, as, bs);
    };
    auto check = [&](const ts::Array& r) {
      REQUIRE(r.shape() == ts::Shape{B, M, N});
      CHECK(r.dtype() == ts::float32);
      const auto got = r.to_vector<float>();
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    };
    check(f(a, b, as, bs));
    check(ts::jit(f)(a, b, as, bs));
    const auto all = ts::devices();
    for (int k = 1; k <= int(all.size()); ++k) {
      CAPTURE(k);
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
      auto put = [&](const ts::Array& x) { return ts::device_put(x, ts::NamedSharding(mesh, P("x"))); };
      check(ts::jit(f)(put(a), put(b), put(as), put(bs)));
    }
    // Into bfloat16: the float32 products rounded once at the end.
    ts::Array r16 = ts::nn::scaled_matmul(a, b, as, bs, ts::bfloat16);
    CHECK(r16.dtype() == ts::bfloat16);
    const auto g16 = r16.astype(ts::float64).to_vector<double>();
    for (std::size_t i = 0; i < g16.size(); ++i) CHECK(g16[i] == doctest::Approx(want[i]).epsilon(1.0 / 128));
  }
}

TEST_CASE("nn::scaled_matmul: JAX's shape errors") {
  ts::Array a = ts::zeros({2, 3, 8}), b = ts::zeros({2, 4, 8});
  ts::Array as = ts::ones({2, 3, 2}), bs = ts::ones({2, 4, 2});
  CHECK_THROWS_AS(ts::nn::scaled_matmul(ts::zeros({3, 8}), b, as, bs), ts::ValueError);
  CHECK_THROWS_WITH_AS(ts::nn::scaled_matmul(a, ts::zeros({2, 4, 6}), as, bs),
                       doctest::Contains("matching batch (B) and contract (K)"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ts::nn::scaled_matmul(a, b, as, ts::ones({2, 4, 4})),
                       doctest::Contains("scales to have matching batch"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ts::nn::scaled_matmul(a, b, ts::ones({2, 5, 2}), bs),
                       doctest::Contains("non-contract dimensions"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ts::nn::scaled_matmul(a, b, ts::ones({2, 3, 3}), ts::ones({2, 4, 3})),
                       doctest::Contains("must divide"), ts::ValueError);
}
