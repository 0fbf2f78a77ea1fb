// ts::remat (jax.checkpoint) with its policies and checkpoint_name (issue
// 40): the value and gradient of a remat'ed function are f's, bit for bit;
// the backward pass keeps only what the policy saves (memory_analysis, and
// the dots the compiled gradient recomputes); remat composes with jit,
// grad, jvp, vmap, scan, shard_map and grad of grad, on 1..8 devices with
// even and uneven splits; the compiled gradient equals the reference
// interpreter's.
#include <doctest/doctest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::Array;
using ts::P;

namespace {

// A residual MLP block as in a transformer (the hidden layer 4x wider).
Array block(const Array& h, const Array& a, const Array& b) {
  return h + ts::matmul(ts::nn::gelu(ts::matmul(h, a), true), b);
}

std::vector<Array> weights(int layers, int d) {
  std::vector<Array> w;
  for (int i = 0; i < layers; ++i) {
    w.push_back(ts::random::normal(ts::random::key(2 * i), {d, 4 * d}) * (1.0 / 8));
    w.push_back(ts::random::normal(ts::random::key(2 * i + 1), {4 * d, d}) * (1.0 / 16));
  }
  return w;
}

template <class Block>
auto mlp_loss(Block blk) {
  return [blk](const std::vector<Array>& w, const Array& x) {
    Array h = x;
    for (std::size_t i = 0; i + 1 < w.size(); i += 2) h = blk(h, w[i], w[i + 1]);
    return ts::sum(h * h);
  };
}

bool bit_equal(const std::vector<Array>& a, const std::vector<Array>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!ts::array_equal(a[i], b[i]).item<bool>()) return false;
  return true;
}

// Dots in the per-device program (its text's `dot(` nodes).
std::size_t dots_in(const std::string& text) {
  static const std::regex dot(R"(= \S+ dot\()");
  return std::size_t(std::distance(std::sregex_iterator(text.begin(), text.end(), dot), std::sregex_iterator()));
}

// Bytes live beside the arguments and the results at the widest point.
std::size_t live_bytes(const ts::MemoryAnalysis& m) {
  return m.peak_memory_in_bytes - m.argument_size_in_bytes - m.output_size_in_bytes;
}

}  // namespace

TEST_CASE("remat: a 16-layer MLP keeps at most a quarter of the activations, gradients bit-equal") {
  const int L = 16, B = 256, D = 64;
  const auto w = weights(L, D);
  const Array x = ts::random::normal(ts::random::key(99), {B, D});
  auto plain = ts::jit(ts::grad(mlp_loss(block)));
  auto remat = ts::jit(ts::grad(mlp_loss(ts::remat(block))));
  const ts::MemoryAnalysis mp = plain.lower(w, x).compile().memory_analysis();
  const ts::MemoryAnalysis mr = remat.lower(w, x).compile().memory_analysis();
  MESSAGE("live bytes at the peak: plain ", live_bytes(mp), ", remat ", live_bytes(mr), " (one activation ",
          B * D * 4, ")");
  CHECK(mr.argument_size_in_bytes == mp.argument_size_in_bytes);
  CHECK(mr.output_size_in_bytes == mp.output_size_in_bytes);
  CHECK(4 * live_bytes(mr) <= live_bytes(mp));
  // Every layer's input is all it keeps: 16 activations and one block's recomputation.
  CHECK(live_bytes(mr) >= std::size_t(L) * B * D * 4);
  CHECK(bit_equal(plain(w, x), remat(w, x)));
  // The value too.
  CHECK(ts::array_equal(ts::jit(mlp_loss(block))(w, x), ts::jit(mlp_loss(ts::remat(block)))(w, x)).item<bool>());
}

TEST_CASE("remat: the policies decide which dots the backward pass recomputes") {
  const int L = 3, B = 16, D = 8;
  const auto w = weights(L, D);
  const Array x = ts::random::normal(ts::random::key(5), {B, D});
  auto text = [&](auto blk) { return ts::jit(ts::grad(mlp_loss(blk))).lower(w, x).compile().as_text(); };
  const std::size_t plain = dots_in(text(block));
  CHECK(plain == std::size_t(6 * L - 1));  // 2 forward, 4 backward per block, less the input's cotangent
  namespace cp = ts::checkpoint_policies;
  // Nothing saved: h @ a is recomputed (g @ b is not needed by the backward pass).
  CHECK(dots_in(text(ts::remat(block))) == plain + L);
  CHECK(dots_in(text(ts::remat(block, {.policy = cp::nothing_saveable}))) == plain + L);
  CHECK(dots_in(text(ts::remat(block, {.policy = cp::everything_saveable}))) == plain);
  CHECK(dots_in(text(ts::remat(block, {.policy = cp::dots_saveable}))) == plain);
  CHECK(dots_in(text(ts::remat(block, {.policy = cp::dots_with_no_batch_dims_saveable}))) == plain);
  auto named = [](const Array& h, const Array& a, const Array& b) {
    return h + ts::matmul(ts::nn::gelu(ts::checkpoint_name(ts::matmul(h, a), "hidden"), true), b);
  };
  CHECK(dots_in(text(ts::remat(named, {.policy = cp::save_only_these_names({"hidden"})}))) == plain);
  CHECK(dots_in(text(ts::remat(named, {.policy = cp::save_only_these_names({"other"})}))) == plain + L);
  CHECK(dots_in(text(ts::remat(named, {.policy = cp::save_any_names_but_these({"hidden"})}))) == plain + L);
  CHECK(dots_in(text(ts::remat(named, {.policy = cp::save_any_names_but_these({"other"})}))) == plain);
  // A batched dot (batch dims) is not saved by dots_with_no_batch_dims_saveable.
  auto batched = [](const Array& h, const Array& a) { return ts::sum(ts::tanh(ts::matmul(h, a))); };
  const Array h3 = ts::random::normal(ts::random::key(1), {2, 3, 4}), a3 = ts::random::normal(ts::random::key(2), {2, 4, 5});
  auto t3 = [&](auto f) { return dots_in(ts::jit(ts::value_and_grad(f, 1)).lower(h3, a3).compile().as_text()); };
  const std::size_t p3 = t3(batched);
  CHECK(p3 == 2);
  CHECK(t3(ts::remat(batched)) == p3 + 1);
  CHECK(t3(ts::remat(batched, {.policy = cp::dots_saveable})) == p3);
  CHECK(t3(ts::remat(batched, {.policy = cp::dots_with_no_batch_dims_saveable})) == p3 + 1);
  // Every policy gives the same gradient bits.
  const auto want = ts::jit(ts::grad(mlp_loss(block)))(w, x);
  for (const auto& pol : {cp::nothing_saveable, cp::everything_saveable, cp::dots_saveable,
                          cp::dots_with_no_batch_dims_saveable, cp::save_only_these_names({"hidden"})}) {
    CHECK(bit_equal(ts::jit(ts::grad(mlp_loss(ts::remat(named, {.policy = pol}))))(w, x), want));
  }
  CHECK(bit_equal(ts::jit(ts::grad(mlp_loss(ts::remat(block, {.prevent_cse = false}))))(w, x), want));
  // checkpoint_name is the identity, over pytrees too.
  CHECK(ts::array_equal(ts::checkpoint_name(x, "x"), x).item<bool>());
  auto pair = ts::checkpoint_name(std::pair(x, x + 1), "p");
  CHECK(ts::array_equal(pair.second, x + 1).item<bool>());
}

TEST_CASE("remat: closed forms under grad, jvp, vmap, grad of grad, hessian and eagerly") {
  // f(x) = sum(sin(x) * x): f' = cos(x) x + sin(x), f'' = 2 cos(x) - x sin(x).
  auto f = [](const Array& x) { return ts::sum(ts::sin(x) * x); };
  auto rf = ts::remat(f);
  const std::vector<float> v = {-1.5f, -0.25f, 0.f, 0.5f, 2.f};
  const Array x = ts::array(v);
  auto check_close = [&](const Array& got, auto want) {
    auto g = got.to_vector<float>();
    REQUIRE(g.size() == v.size());
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(g[i] == doctest::Approx(want(double(v[i]))).epsilon(1e-5));
  };
  auto d1 = [](double t) { return std::cos(t) * t + std::sin(t); };
  auto d2 = [](double t) { return 2 * std::cos(t) - t * std::sin(t); };
  check_close(ts::grad(rf)(x), d1);              // eagerly
  check_close(ts::jit(ts::grad(rf))(x), d1);     // under jit
  // Forward mode: jvp along e_i is the gradient's entry i.
  auto [y, t] = ts::jvp(rf, std::tuple(x), std::tuple(ts::ones_like(x)));
  CHECK(y.item<float>() == doctest::Approx(f(x).item<float>()));
  double sum_d1 = 0;
  for (float e : v) sum_d1 += d1(e);
  CHECK(t.item<float>() == doctest::Approx(sum_d1).epsilon(1e-5));
  // grad of grad: the diagonal of the Hessian, elementwise here.
  auto g2 = ts::grad([&](const Array& x) { return ts::sum(ts::grad(rf)(x)); });
  check_close(g2(x), d2);
  check_close(ts::jit(g2)(x), d2);
  // hessian (jacfwd of jacrev): diagonal.
  auto h = ts::jit(ts::hessian(rf))(x).to_vector<float>();
  for (std::size_t i = 0; i < v.size(); ++i)
    for (std::size_t j = 0; j < v.size(); ++j)
      CHECK(h[i * v.size() + j] == doctest::Approx(i == j ? d2(v[i]) : 0.0).epsilon(1e-5));
  // vmap of grad, and grad of a vmapped remat.
  const Array xs = ts::stack({x, x * 2});
  auto vg = ts::jit(ts::vmap(ts::grad(rf)))(xs).to_vector<float>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    CHECK(vg[i] == doctest::Approx(d1(v[i])).epsilon(1e-5));
    CHECK(vg[v.size() + i] == doctest::Approx(d1(2.0 * v[i])).epsilon(1e-5));
  }
  auto gv = ts::grad([&](const Array& xs) { return ts::sum(ts::vmap(rf)(xs)); })(xs).to_vector<float>();
  for (std::size_t i = 0; i < v.size(); ++i) CHECK(gv[v.size() + i] == doctest::Approx(d1(2.0 * v[i])).epsilon(1e-5));
  // A closed-over array is differentiated too (JAX converts checkpoint's closures).
  auto closure = [&](const Array& s) {
    return ts::remat([&](const Array& u) { return ts::sum(ts::sin(u) * s); })(x);
  };
  CHECK(ts::grad(closure)(ts::array(2.f)).item<float>() == doctest::Approx(ts::sum(ts::sin(x)).item<float>()));
  // Inside scan: the body's remat, carried through the loop.
  auto scanned = [&](const Array& x) {
    auto [c, ys] = ts::lax::scan([&](const Array& c, const Array& s) { return std::pair(c + rf(s * x), c); },
                                 ts::array(0.f), ts::array(std::vector<float>{1.f, 2.f}));
    return c;
  };
  // d/dx [f(x) + f(2x)] = f'(x) + 2 f'(2x).
  check_close(ts::jit(ts::grad(scanned))(x), [&](double t) { return d1(t) + 2 * d1(2 * t); });
}

TEST_CASE("remat on 1..8 devices, even and uneven, in shard_map, against the interpreter") {
  const int max_devices = std::min(8, ts::device_count());
  const int D = 4;
  const auto w = weights(2, D);
  auto loss = mlp_loss(ts::remat(block));
  for (std::int64_t rows : {8, 7}) {
    const Array xh = ts::random::normal(ts::random::key(int(rows)), {rows, D});
    const auto want = tessel::testing::interpret_fn(
        [&](const std::vector<Array>& a) {
          return ts::grad(loss)(std::vector<Array>(a.begin(), a.end() - 1), a.back());
        },
        [&] {
          auto a = w;
          a.push_back(xh);
          return a;
        }());
    const auto plain = ts::jit(ts::grad(mlp_loss(block)))(w, xh);
    for (int k = 1; k <= max_devices; ++k) {
      CAPTURE(rows);
      CAPTURE(k);
      const auto all = ts::devices();
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
      const Array x = ts::device_put(xh, ts::NamedSharding(mesh, P("x")));
      const auto got = ts::jit(ts::grad(loss))(w, x);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i)
        CHECK(tessel::testing::compare_arrays(tessel::testing::host_of(got[i]), want[i], 1e-5, 1e-5) == "");
      if (k == 1) CHECK(bit_equal(got, plain));
      // The split batch's gradient: its text shows the barrier and one all-reduce per weight.
      const std::string text = ts::jit(ts::grad(loss)).lower(w, x).compile().as_text();
      CHECK(text.find("remat-barrier") != std::string::npos);
      // Inside a shard_map body: each device differentiates its block.
      if (rows % k == 0) {
        auto sm = ts::jit(ts::grad([&](const Array& x) {
          return ts::sum(ts::shard_map([&](const Array& b) { return ts::remat(block)(b, w[0], w[1]); }, mesh, P("x"),
                                       P("x"))(x));
        }))(x);
        auto ref = ts::jit(ts::grad([&](const Array& x) { return ts::sum(block(x, w[0], w[1])); }))(xh);
        CHECK(ts::allclose(sm, ref, 1e-5, 1e-6).item<bool>());
      }
    }
  }
}
