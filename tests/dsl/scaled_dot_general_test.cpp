// jax.nn.scaled_dot_general and get_scaled_dot_general_config (issue 36):
// the configs JAX returns; the quantized product against a double loop over
// the same quantization written here from JAX's description (mxfp8: a
// power-of-two scale per 32 elements, the least one with amax / scale <=
// 448; nvfp4: a float8_e4m3fn scale amax / 6 per 16); the custom gradient
// against the plain product's on data the formats hold exactly (so the
// quantized backward pass is exact), in two layouts; the batch split over
// 1..8 devices; JAX's errors.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::Array;
using ts::P;

namespace {

// Each block of `bs` along the last axis of a row-major [rows, K] matrix,
// quantized as `mode` does it, back in double (value * scale).
std::vector<double> dequantized(const std::vector<double>& x, std::int64_t rows, std::int64_t K, const std::string& mode) {
  const std::int64_t bs = mode == "mxfp8" ? 32 : 16;
  std::vector<double> out(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t b0 = 0; b0 < K; b0 += bs) {
      double amax = 0;
      for (std::int64_t k = b0; k < b0 + bs; ++k) amax = std::max(amax, std::fabs(x[size_t(r * K + k)]));
      double scale;
      if (mode == "mxfp8") {
        scale = std::ldexp(1.0, -127);
        while (amax / 448.0 > scale) scale *= 2;  // the least power of two >= amax / 448
      } else {
        scale = float(ts::float8_e4m3fn_t(std::min(float(amax) / 6.0f, 448.0f)));
      }
      for (std::int64_t k = b0; k < b0 + bs; ++k) {
        const double v = x[size_t(r * K + k)] / scale;
        const double q = mode == "mxfp8" ? double(float(ts::float8_e4m3fn_t(std::clamp(v, -448.0, 448.0))))
                                         : double(float(ts::float4_e2m1fn_t(std::clamp(v, -6.0, 6.0))));
        out[size_t(r * K + k)] = q * scale;
      }
    }
  return out;
}

std::vector<double> random_values(std::mt19937& rng, std::size_t n, double scale) {
  std::normal_distribution<double> d(0, scale);
  std::vector<double> v(n);
  for (auto& e : v) e = float(d(rng));
  return v;
}

}  // namespace

TEST_CASE("scaled_dot_general: the configs are JAX's") {
  const auto mx = ts::nn::get_scaled_dot_general_config("mxfp8");
  CHECK(mx.mode == "mxfp8");
  CHECK(mx.block_size == 32);
  CHECK(mx.data_type == ts::float8_e4m3fn);
  CHECK(mx.scale_type == ts::float8_e8m0fnu);
  CHECK_FALSE(mx.global_scale.has_value());
  CHECK_FALSE(mx.infer_only);
  const auto nv = ts::nn::get_scaled_dot_general_config("nvfp4");
  CHECK(nv.block_size == 16);
  CHECK(nv.data_type == ts::float4_e2m1fn);
  CHECK(nv.scale_type == ts::float8_e4m3fn);
  REQUIRE(nv.global_scale.has_value());
  CHECK(nv.global_scale->shape() == ts::Shape{1});
  CHECK(nv.global_scale->to_vector<float>() == std::vector<float>{1.0f});
  CHECK_THROWS_WITH_AS(ts::nn::get_scaled_dot_general_config("fp6"), "Unsupported mode: fp6", ts::ValueError);
}

TEST_CASE("scaled_dot_general: the quantized product, mxfp8 and nvfp4, batched and not") {
  std::mt19937 rng(36);
  const std::int64_t B = 2, M = 3, N = 5, K = 64;
  for (const std::string mode : {"mxfp8", "nvfp4"}) {
    CAPTURE(mode);
    const auto a = random_values(rng, size_t(B * M * K), 3.0), b = random_values(rng, size_t(B * N * K), 0.1);
    const Array lhs = ts::array(a, {B, M, K}).astype(ts::float32), rhs = ts::array(b, {B, N, K}).astype(ts::float32);
    const auto c = ts::nn::get_scaled_dot_general_config(mode);
    const Array out = ts::nn::scaled_dot_general(lhs, rhs, {{2}, {2}, {0}, {0}}, ts::float32, {{c, c, c}});
    REQUIRE(out.shape() == ts::Shape{B, M, N});
    const auto qa = dequantized(a, B * M, K, mode), qb = dequantized(b, B * N, K, mode);
    const auto got = out.to_vector<float>();
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          double s = 0, mag = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            s += qa[size_t((i * M + m) * K + k)] * qb[size_t((i * N + n) * K + k)];
            mag += std::fabs(qa[size_t((i * M + m) * K + k)] * qb[size_t((i * N + n) * K + k)]);
          }
          CHECK(std::fabs(got[size_t((i * M + m) * N + n)] - s) <= 1e-6 * mag + 1e-30);
        }
    // Not the plain product (the quantization shows), but near it: float8's
    // 3 mantissa bits, float4's 1.
    const auto plain = ts::lax::dot_general(lhs, rhs, {{2}, {2}, {0}, {0}}).to_vector<float>();
    double err = 0, ref = 0;
    for (std::size_t i = 0; i < plain.size(); ++i) err += (got[i] - plain[i]) * (got[i] - plain[i]), ref += plain[i] * plain[i];
    CHECK(std::sqrt(err / ref) < (mode == "mxfp8" ? 0.1 : 0.5));
    CHECK(err > 0);
  }
  // No batch dims: JAX adds one and squeezes it; no configs: dot_general.
  const auto a = random_values(rng, 4 * 64, 1.0), b = random_values(rng, 64 * 6, 1.0);
  const Array lhs = ts::array(a, {4, 64}).astype(ts::float32), rhs = ts::array(b, {64, 6}).astype(ts::float32);
  const auto c = ts::nn::get_scaled_dot_general_config("mxfp8");
  const Array out = ts::nn::scaled_dot_general(lhs, rhs, {{1}, {0}, {}, {}}, ts::float32, {{c, c, c}});
  CHECK(out.shape() == ts::Shape{4, 6});
  const Array direct = ts::nn::scaled_dot_general(lhs, rhs, {{1}, {0}, {}, {}});
  CHECK(ts::array_equal(direct, ts::matmul(lhs, rhs)).item<bool>());
  // bfloat16 result.
  CHECK(ts::nn::scaled_dot_general(lhs, rhs, {{1}, {0}, {}, {}}, ts::bfloat16, {{c, c, c}}).dtype() == ts::bfloat16);
}

TEST_CASE("scaled_dot_general: JAX's custom gradient, exact on values the formats hold") {
  // Entries +-{0.5, 1, 2} with every block's amax 2: scale 2^-7, values
  // +-{64, 128, 256} in float8_e4m3fn, all exact; the cotangent (ones)
  // quantizes exactly too: the gradient equals the plain product's.
  std::mt19937 rng(40);
  std::uniform_int_distribution<int> pick(0, 5);
  const double vals[6] = {0.5, 1, 2, -0.5, -1, -2};
  auto exact = [&](std::int64_t n) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (auto& e : v) e = vals[pick(rng)];
    for (std::int64_t i = 0; i < n; i += 16) v[size_t(i)] = 2;  // every block's amax is 2
    return v;
  };
  const auto c = ts::nn::get_scaled_dot_general_config("mxfp8");
  struct Layout {
    ts::Shape l, r;
    ts::lax::DotDimensionNumbers dn;
  };
  // [M, K] x [N, K] contracting the last axes, and [K, M] x [N, K] contracting lhs axis 0.
  for (const Layout& lay : {Layout{{32, 64}, {32, 64}, {{1}, {1}, {}, {}}}, Layout{{64, 32}, {32, 64}, {{0}, {1}, {}, {}}},
                            Layout{{2, 32, 64}, {2, 64, 32}, {{2}, {1}, {0}, {0}}}}) {
    CAPTURE(ts::shape_str(lay.l));
    const Array lhs = ts::array(exact(ts::numel(lay.l)), lay.l).astype(ts::float32);
    const Array rhs = ts::array(exact(ts::numel(lay.r)), lay.r).astype(ts::float32);
    auto quantized = [&](const Array& l, const Array& r) {
      return ts::sum(ts::nn::scaled_dot_general(l, r, lay.dn, ts::float32, {{c, c, c}}));
    };
    auto plain = [&](const Array& l, const Array& r) { return ts::sum(ts::lax::dot_general(l, r, lay.dn)); };
    CHECK(ts::array_equal(ts::grad(quantized, 0)(lhs, rhs), ts::grad(plain, 0)(lhs, rhs)).item<bool>());
    CHECK(ts::array_equal(ts::grad(quantized, 1)(lhs, rhs), ts::grad(plain, 1)(lhs, rhs)).item<bool>());
    CHECK(ts::array_equal(ts::jit(ts::grad(quantized, 0))(lhs, rhs), ts::grad(plain, 0)(lhs, rhs)).item<bool>());
  }
  // On general data the gradient is the quantized one, not the plain one.
  const auto a = random_values(rng, 32 * 64, 1.0), b = random_values(rng, 32 * 64, 1.0);
  const Array lhs = ts::array(a, {32, 64}).astype(ts::float32), rhs = ts::array(b, {32, 64}).astype(ts::float32);
  auto q = [&](const Array& l) { return ts::sum(ts::nn::scaled_dot_general(l, rhs, {{1}, {1}, {}, {}}, ts::float32, {{c, c, c}})); };
  auto p = [&](const Array& l) { return ts::sum(ts::lax::dot_general(l, rhs, {{1}, {1}, {}, {}})); };
  const Array gq = ts::grad(q)(lhs), gp = ts::grad(p)(lhs);
  const auto vq = gq.to_vector<float>(), vp = gp.to_vector<float>();
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < vq.size(); ++i) err += (vq[i] - vp[i]) * (vq[i] - vp[i]), ref += vp[i] * vp[i];
  CHECK(std::sqrt(err / ref) < 0.05);  // float8's 3 mantissa bits: a few percent
  CHECK(err > 0);
}

TEST_CASE("scaled_dot_general: the batch split over 1..8 devices gives the unsplit result") {
  std::mt19937 rng(41);
  const auto a = random_values(rng, 8 * 4 * 64, 1.0), b = random_values(rng, 8 * 3 * 64, 1.0);
  const Array lhs = ts::array(a, {8, 4, 64}).astype(ts::float32), rhs = ts::array(b, {8, 3, 64}).astype(ts::float32);
  const auto c = ts::nn::get_scaled_dot_general_config("mxfp8");
  auto f = [&](const Array& l, const Array& r) { return ts::nn::scaled_dot_general(l, r, {{2}, {2}, {0}, {0}}, ts::float32, {{c, c, c}}); };
  const Array want = f(lhs, rhs);
  const auto all = ts::devices();
  for (int k = 1; k <= std::min(8, ts::device_count()); ++k) {
    CAPTURE(k);
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
    const ts::NamedSharding s(mesh, P("x"));
    const Array got = ts::jit(f)(ts::device_put(lhs, s), ts::device_put(rhs, s));
    CHECK(ts::allclose(got, want, 1e-6, 1e-6).item<bool>());
  }
}

TEST_CASE("scaled_dot_general: JAX's errors") {
  const auto c = ts::nn::get_scaled_dot_general_config("mxfp8");
  const Array l = ts::ones({4, 48}), r = ts::ones({6, 48});
  CHECK_THROWS_WITH_AS(ts::nn::scaled_dot_general(l, r, {{1}, {1}, {}, {}}, ts::float32, {{c, c, c}}),
                       doctest::Contains("multiple of the block size 32"), ts::ValueError);
  CHECK_THROWS_WITH_AS(ts::nn::scaled_dot_general(ts::ones({4, 64}), ts::ones({6, 64}), {{1}, {1}, {}, {}}, ts::int32,
                                                  {{c, c, c}}),
                       doctest::Contains("Only support preferred_element_type in (f32, bf16, f16)"), ts::TypeError);
  CHECK_THROWS_AS(ts::nn::scaled_dot_general(ts::ones({4, 64}), ts::ones({6, 64}), {{1}, {1}, {}, {}}, ts::float32, {{c, c}}),
                  ts::ValueError);
  auto bad = c;
  bad.mode = "fp6";
  CHECK_THROWS_WITH_AS(ts::nn::scaled_dot_general(ts::ones({4, 64}), ts::ones({6, 64}), {{1}, {1}, {}, {}}, ts::float32,
                                                  {{bad, c, c}}),
                       "Unrecognized mode: fp6.", ts::ValueError);
}
