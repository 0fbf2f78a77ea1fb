// Your own C++ kernel inside a compiled, sharded program (issue 40's sample):
// a small GEMM written by hand, called per device on the blocks of a
// P('x', 'y') array through ts::ffi::call, with the sharding rule
// "i k, k j -> i j": rows stay split over x (no gather), the contracted k
// split over y gives partial products that are all-reduced. Its gradient
// comes from the same kernel, transposed, through ts::custom_vjp. Each
// result is checked against the same computation in tessel ops.
#include <tessel/tessel.hpp>

#include <cmath>
#include <cstdio>
#include <span>

namespace ts = tessel;
using ts::Array;
using ts::P;
using Buf = ts::ffi::Buffer;

namespace {

// C = op(A) op(B) on this device's row-major float32 blocks, op a transpose
// when asked. A cache-friendly i-k-j loop: the user's code, not tessel's.
template <bool TA, bool TB>
void gemm(std::span<const Buf> in, std::span<Buf> out) {
  const ts::Shape& a = in[0].shape();
  const ts::Shape& b = in[1].shape();
  const std::int64_t m = TA ? a[1] : a[0], k = TA ? a[0] : a[1], n = TB ? b[0] : b[1];
  const float* A = in[0].typed_data<float>();
  const float* B = in[1].typed_data<float>();
  float* C = out[0].typed_data<float>();
  for (std::int64_t i = 0; i < m * n; ++i) C[i] = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) {
      const float aip = TA ? A[p * m + i] : A[i * k + p];
      for (std::int64_t j = 0; j < n; ++j) C[i * n + j] += aip * (TB ? B[j * k + p] : B[p * n + j]);
    }
}

ts::ShapeDtypeStruct f32(std::int64_t r, std::int64_t c) { return {{r, c}, ts::float32, std::nullopt}; }

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

int main() {
  const std::int64_t M = 64, K = 48, N = 32;
  // A @ B, and the two products its gradient needs, each with its rule.
  auto ab = ts::ffi::call(gemm<false, false>, f32(M, N), {.sharding_rule = "i k, k j -> i j", .name = "my_gemm"});
  auto abt = ts::ffi::call(gemm<false, true>, f32(M, K), {.sharding_rule = "i j, k j -> i k", .name = "my_gemm_nt"});
  auto atb = ts::ffi::call(gemm<true, false>, f32(K, N), {.sharding_rule = "k i, k j -> i j", .name = "my_gemm_tn"});
  auto product = ts::custom_vjp([&](const Array& a, const Array& b) { return ab(a, b); },
                                [&](const Array& a, const Array& b) { return std::pair(ab(a, b), std::pair(a, b)); },
                                [&](const std::pair<Array, Array>& r, const Array& g) {
                                  return std::tuple(abt(g, r.second), atb(r.first, g));
                                });

  const auto all = ts::devices();
  const int d = std::min(8, int(all.size()));
  const int x = d >= 8 ? 4 : d, y = d >= 8 ? 2 : 1;
  ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + x * y), {x, y}, {"x", "y"});
  const Array ah = ts::random::normal(ts::random::key(0), {M, K}), bh = ts::random::normal(ts::random::key(1), {K, N});
  const Array a = ts::device_put(ah, ts::NamedSharding(mesh, P("x", "y")));
  const Array b = ts::device_put(bh, ts::NamedSharding(mesh, P("y", ts::None)));

  auto f = ts::jit([&](const Array& a, const Array& b) { return product(a, b); });
  const std::string text = f.lower(a, b).compile().as_text();
  const Array c = f(a, b);
  const double err = ts::max(ts::abs(c - ts::matmul(ah, bh))).item<double>();
  std::printf("my_gemm on %dx%d devices, A %s on P('x', 'y'): C %s laid out as %s\n", x, y, ts::shape_str(a.shape()).c_str(),
              ts::shape_str(c.shape()).c_str(), c.sharding().str().c_str());
  std::printf("  compiled: %zu custom-call, %zu all-gather, %zu all-reduce; max |C - A @ B| = %.2e\n",
              count(text, "custom-call my_gemm"), count(text, "all-gather"), count(text, "all-reduce"), err);

  auto loss = [&](const Array& a, const Array& b) { return ts::sum(ts::square(product(a, b))); };
  auto ref = [](const Array& a, const Array& b) { return ts::sum(ts::square(ts::matmul(a, b))); };
  const Array ga = ts::jit(ts::grad(loss, 0))(a, b), gb = ts::jit(ts::grad(loss, 1))(a, b);
  const Array ra = ts::grad(ref, 0)(ah, bh), rb = ts::grad(ref, 1)(ah, bh);
  const double ea = ts::max(ts::abs(ga - ra)).item<double>() / ts::max(ts::abs(ra)).item<double>();
  const double eb = ts::max(ts::abs(gb - rb)).item<double>() / ts::max(ts::abs(rb)).item<double>();
  const std::string gtext = ts::jit(ts::grad(loss, 0)).lower(a, b).compile().as_text();
  std::printf("  gradient through custom_vjp (the kernel transposed): relative error dA %.2e, dB %.2e; %zu all-gather\n",
              ea, eb, count(gtext, "all-gather"));

  const bool ok = err < 1e-4 && ea < 1e-5 && eb < 1e-5 && count(text, "all-gather") == 0 && count(gtext, "all-gather") == 0;
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
