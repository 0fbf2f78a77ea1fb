// Pooling's derivative as JAX's primitives (select_and_gather_add, its
// transpose select_and_scatter_add; tracer/rules_window.cpp): compiled
// against the reference interpreter and a direct loop written here, over
// windows, strides, paddings, layouts, ties, NaN and -inf windows; forward
// mode, vmap, grad of grad, bfloat16; on 1..8 devices with the batch or the
// rows split; and reduce_window's init value as XLA's ReduceWindow takes it.
#include <doctest/doctest.h>
#include <tessel/tessel.hpp>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
namespace lax = tessel::lax;
using ts::P;

namespace {

struct Window {
  std::vector<std::int64_t> shape, window, strides;
  std::string padding;  // "SAME" or "VALID"
};

// JAX's padtype_to_pads.
std::vector<std::pair<std::int64_t, std::int64_t>> pads_of(const Window& w) {
  std::vector<std::pair<std::int64_t, std::int64_t>> p;
  for (std::size_t d = 0; d < w.shape.size(); ++d) {
    if (w.padding == "VALID") {
      p.push_back({0, 0});
      continue;
    }
    const std::int64_t out = (w.shape[d] + w.strides[d] - 1) / w.strides[d];
    const std::int64_t total = std::max<std::int64_t>((out - 1) * w.strides[d] + w.window[d] - w.shape[d], 0);
    p.push_back({total / 2, total - total / 2});
  }
  return p;
}

// The gradient of sum(pool(x) * g): each window's weight added at its first
// (row-major) element inside x equal to the window's max (min); none for a
// NaN window. Independent of tessel: plain loops over the windows.
std::vector<double> loop_gradient(const Window& w, const std::vector<double>& x, const std::vector<double>& g,
                                  bool is_max, std::vector<std::int64_t>& out) {
  const auto pads = pads_of(w);
  const std::size_t r = w.shape.size();
  out.assign(r, 0);
  for (std::size_t d = 0; d < r; ++d)
    out[d] = std::max<std::int64_t>((w.shape[d] + pads[d].first + pads[d].second - w.window[d]) / w.strides[d] + 1, 0);
  std::vector<double> dx(x.size(), 0.0);
  std::vector<std::int64_t> o(r, 0);
  std::int64_t taps = 1, nout = 1;
  for (std::size_t d = 0; d < r; ++d) taps *= w.window[d], nout *= out[d];
  for (std::int64_t k = 0; k < nout; ++k) {
    for (std::int64_t rem = k, d = std::int64_t(r) - 1; d >= 0; --d) o[std::size_t(d)] = rem % out[std::size_t(d)], rem /= out[std::size_t(d)];
    double best = 0;
    std::int64_t at = -1;
    bool nan = false;
    for (std::int64_t t = 0; t < taps; ++t) {
      std::int64_t flat = 0, rem = t;
      bool inside = true;
      std::vector<std::int64_t> pos(r);
      for (std::int64_t d = std::int64_t(r) - 1; d >= 0; --d) {
        const auto u = std::size_t(d);
        pos[u] = o[u] * w.strides[u] - pads[u].first + rem % w.window[u];
        rem /= w.window[u];
        inside = inside && pos[u] >= 0 && pos[u] < w.shape[u];
      }
      if (!inside) continue;
      for (std::size_t d = 0; d < r; ++d) flat = flat * w.shape[d] + pos[d];
      const double v = x[std::size_t(flat)];
      if (std::isnan(v)) nan = true;
      if (at < 0 || (is_max ? v > best : v < best)) best = v, at = flat;
    }
    if (at >= 0 && !nan) dx[std::size_t(at)] += g[std::size_t(k)];
  }
  return dx;
}

std::vector<double> ties(std::mt19937& rng, std::size_t n) {
  std::vector<double> v(n);
  for (auto& e : v) e = double(rng() % 4) - 1;  // {-1, 0, 1, 2}: most windows tie
  return v;
}

std::vector<double> weights(std::mt19937& rng, std::size_t n) {
  std::vector<double> v(n);
  for (auto& e : v) e = double(rng() % 9) - 4;  // integers: every sum exact in float32
  return v;
}

// An operand of ties for window w, a cotangent of integer weights, and the
// max pool's gradient by the loop.
struct Drawn {
  ts::Array x, g;
  std::vector<double> want;
};
Drawn draw(std::mt19937& rng, const Window& w) {
  std::int64_t n = 1;
  for (auto d : w.shape) n *= d;
  const auto xv = ties(rng, std::size_t(n));
  std::vector<std::int64_t> out;
  (void)loop_gradient(w, xv, std::vector<double>(xv.size(), 0.0), true, out);
  const auto gv = weights(rng, std::size_t(out[0] * out[1] * out[2] * out[3]));
  Drawn r;
  r.want = loop_gradient(w, xv, gv, true, out);
  r.x = ts::array(xv).reshape(w.shape).astype(ts::float32);
  r.g = ts::array(gv).reshape(out).astype(ts::float32);
  return r;
}

}  // namespace

TEST_CASE("max and min pooling gradients: JAX's select_and_scatter_add against the interpreter and a direct loop") {
  std::mt19937 rng(42);
  const std::vector<Window> cases = {
      {{2, 8, 8, 3}, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"},  // NHWC 2x2/2
      {{2, 7, 9, 3}, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME"},   // overlapping, padded, odd sizes
      {{3, 6, 5}, {1, 3, 3}, {1, 1, 1}, "SAME"},            // stride 1
      {{2, 3, 9, 6}, {1, 1, 2, 3}, {1, 1, 2, 2}, "SAME"},   // NCHW, uneven window
      {{4, 10}, {1, 4}, {1, 3}, "VALID"},                   // 1-D
      {{2, 5, 4, 6, 2}, {1, 2, 2, 2, 1}, {1, 2, 1, 2, 1}, "SAME"},  // 3-D
  };
  for (const ts::DType dt : {ts::float32, ts::float64})
    for (const Window& w : cases)
      for (const bool is_max : {true, false}) {
        std::int64_t n = 1;
        for (auto s : w.shape) n *= s;
        const auto xv = ties(rng, std::size_t(n));
        const ts::Array x = ts::array(xv).reshape(w.shape).astype(dt);
        const std::string op = is_max ? "max" : "min";
        auto pool = [&](const ts::Array& a) {
          return lax::reduce_window(a, is_max ? -INFINITY : INFINITY, op, w.window, w.strides, lax::Padding{w.padding});
        };
        std::vector<std::int64_t> out;
        (void)loop_gradient(w, xv, std::vector<double>(xv.size(), 0.0), is_max, out);
        std::int64_t m = 1;
        for (auto s : out) m *= s;
        const auto gv = weights(rng, std::size_t(m));
        const ts::Array g = ts::array(gv).reshape(out).astype(dt);
        const auto want = loop_gradient(w, xv, gv, is_max, out);
        auto grad = [&](const std::vector<ts::Array>& a) {
          auto [y, back] = ts::vjp(pool, a[0]);
          return std::vector<ts::Array>{std::get<0>(back(a[1]))};
        };
        CAPTURE(ts::dtype_name(dt));
        CAPTURE(ts::shape_str(w.shape));
        CAPTURE(ts::shape_str(w.window));
        CAPTURE(op);
        const ts::Array got = ts::jit([&](ts::Array a, ts::Array c) { return grad({a, c})[0]; })(x, g);
        CHECK(got.astype(ts::float64).to_vector<double>() == want);
        const auto ref = ts::testing::interpret_fn(grad, {x, g});
        CHECK(ts::testing::same_bits(ts::testing::host_of(got), ref[0]) == "");
        // The gradient is the primitive, one fused loop over the input.
        const std::string text = ts::jit([&](ts::Array a, ts::Array c) { return grad({a, c})[0]; }).lower(x, g).as_text();
        CHECK(text.find("select-and-scatter-add") != std::string::npos);
        // Forward mode: the tangent of each window's selected element.
        const auto tv = weights(rng, std::size_t(n));
        const auto [y, dy] = ts::jvp(pool, std::make_tuple(x), std::make_tuple(ts::array(tv).reshape(w.shape).astype(dt)));
        // <dy, g> = <t, dx>: the transpose pair.
        double lhs = 0, rhs = 0;
        const auto dyv = dy.astype(ts::float64).to_vector<double>();
        for (std::size_t i = 0; i < dyv.size(); ++i) lhs += dyv[i] * gv[i];
        for (std::size_t i = 0; i < tv.size(); ++i) rhs += tv[i] * want[i];
        CHECK(lhs == rhs);
      }
}

TEST_CASE("pooling gradients: NaN windows, -inf windows beside padding, and bfloat16") {
  // A NaN window's max is NaN, which no element equals: no gradient there.
  // A window of -inf beside padding selects its first element inside x
  // (padding is never selected).
  const ts::Array x = ts::array(std::vector<float>{1, NAN, 3, 4, -INFINITY, -INFINITY, 2, 2}).reshape({2, 4});
  auto pool = [](const ts::Array& a) { return lax::reduce_window(a, -INFINITY, "max", {1, 2}, {1, 2}, lax::Padding{"VALID"}); };
  const ts::Array g = ts::grad([&](const ts::Array& a) { return ts::sum(pool(a) * ts::array({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2})); })(x);
  CHECK(g.to_vector<float>() == std::vector<float>{0, 0, 0, 2, 3, 0, 4, 0});
  const ts::Array x2 = ts::array(std::vector<float>{-INFINITY, -INFINITY, -INFINITY}).reshape({1, 3});
  auto same = [](const ts::Array& a) { return lax::reduce_window(a, -INFINITY, "max", {1, 2}, {1, 2}, lax::Padding{"SAME"}); };
  // SAME pads (0, 1): windows [x0, x1] and [x2, pad].
  const ts::Array g2 = ts::jit(ts::grad([&](const ts::Array& a) { return ts::sum(same(a) * ts::array({5.0f, 7.0f}).reshape({1, 2})); }))(x2);
  CHECK(g2.to_vector<float>() == std::vector<float>{5, 0, 7});
  // bfloat16: the pick is exact, so the gradient equals float32's rounded.
  std::mt19937 rng(3);
  const auto xv = ties(rng, 2 * 6 * 6 * 4);
  const ts::Array xb = ts::array(xv).reshape({2, 6, 6, 4}).astype(ts::bfloat16);
  auto pool2 = [](const ts::Array& a) { return lax::reduce_window(a, -INFINITY, "max", {1, 3, 3, 1}, {1, 2, 2, 1}, lax::Padding{"SAME"}); };
  auto loss = [&](const ts::Array& a) { return ts::sum(pool2(a).astype(ts::float32) * 0.5f); };
  const ts::Array gb = ts::jit(ts::grad(loss))(xb);
  CHECK(gb.dtype() == ts::bfloat16);
  const ts::Array gf = ts::jit(ts::grad(loss))(xb.astype(ts::float32));
  CHECK(gb.astype(ts::float32).to_vector<float>() == gf.astype(ts::bfloat16).astype(ts::float32).to_vector<float>());
}

TEST_CASE("pooling gradients under vmap, grad of grad, and on 1..8 devices with the batch or the rows split") {
  std::mt19937 rng(8);
  const Window w{{5, 9, 8, 3}, {1, 3, 3, 1}, {1, 2, 2, 1}, "SAME"};
  const auto xv = ties(rng, 5 * 9 * 8 * 3);
  const ts::Array x = ts::array(xv).reshape(w.shape).astype(ts::float32);
  auto pool = [&](const ts::Array& a) { return lax::reduce_window(a, -INFINITY, "max", w.window, w.strides, lax::Padding{"SAME"}); };
  std::vector<std::int64_t> out;
  (void)loop_gradient(w, xv, std::vector<double>(xv.size(), 0.0), true, out);
  const auto gv = weights(rng, std::size_t(out[0] * out[1] * out[2] * out[3]));
  const ts::Array g = ts::array(gv).reshape(out).astype(ts::float32);
  const auto want = loop_gradient(w, xv, gv, true, out);
  auto grad = ts::jit([&](ts::Array a, ts::Array c) {
    auto [y, back] = ts::vjp(pool, a);
    return std::get<0>(back(c));
  });
  // vmap over a leading axis of three copies: each the same gradient.
  const ts::Array xs3 = ts::stack({x, x, x}), gs3 = ts::stack({g, g * 2.0f, g});
  const ts::Array gv3 = ts::vmap([&](ts::Array a, ts::Array c) { return grad(a, c); })(xs3, gs3);
  const auto v3 = gv3.astype(ts::float64).to_vector<double>();
  for (std::size_t i = 0; i < want.size(); ++i) {
    REQUIRE(v3[i] == want[i]);
    REQUIRE(v3[want.size() + i] == 2 * want[i]);
  }
  // Grad of grad: the gradient is linear in g, so d/dg <grad(x, g), v> is
  // the select_and_gather_add of v (the gradient's own transpose).
  const ts::Array v = ts::array(weights(rng, xv.size())).reshape(w.shape).astype(ts::float32);
  const ts::Array gg = ts::grad([&](const ts::Array& c) { return ts::sum(grad(x, c) * v); })(g);
  const auto [y, dy] = ts::jvp(pool, std::make_tuple(x), std::make_tuple(v));
  CHECK(gg.to_vector<float>() == dy.to_vector<float>());
  // Sharded: the batch (5 images: even and uneven) or the rows split, 1..8 devices.
  const auto all = ts::devices();
  for (int n = 1; n <= 8; ++n) {
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
    for (const bool rows : {false, true}) {
      const auto spec = rows ? P(ts::None, "x") : P("x");
      CAPTURE(n);
      CAPTURE(rows);
      const ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, spec));
      const ts::Array gs = ts::device_put(g, ts::NamedSharding(mesh, spec));
      CHECK(grad(xs, gs).astype(ts::float64).to_vector<double>() == want);
    }
    const ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
    const ts::Array gs = ts::device_put(g, ts::NamedSharding(mesh, P("x")));
    const std::string text = grad.lower(xs, gs).compile().as_text();
    CAPTURE(text);
    if (n <= 5) CHECK(text.find("all-gather") == std::string::npos);  // the batch is a free factor
  }
}

TEST_CASE("reduce_window's init value enters every window, as XLA's ReduceWindow (and the padding holds it)") {
  const ts::Array x = ts::array(std::vector<float>{-3, -1, -4, -1, -5, -9}).reshape({1, 6});
  // max from 0: relu of the windows' max.
  CHECK(lax::reduce_window(x, 0.0, "max", {1, 2}, {1, 2}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(lax::reduce_window(x, -2.0, "max", {1, 2}, {1, 2}).to_vector<float>() == std::vector<float>{-1, -1, -2});
  // add from 1 with SAME padding (pads hold 1 too): window [pad?] sums + 1.
  const ts::Array ones = ts::ones({1, 5});
  // SAME, window 2 stride 2 over 5: out 3, pads (0, 1): sums 2, 2, 1 + pad 1; each + init 1.
  CHECK(lax::reduce_window(ones, 1.0, "add", {1, 2}, {1, 2}, lax::Padding{"SAME"}).to_vector<float>() ==
        std::vector<float>{3, 3, 3});
  CHECK(lax::reduce_window(ones * 2.0f, 2.0, "mul", {1, 2}, {1, 2}).to_vector<float>() == std::vector<float>{8, 8});
  // The identities keep the plain pooling.
  CHECK(lax::reduce_window(x, -INFINITY, "max", {1, 2}, {1, 2}).to_vector<float>() == std::vector<float>{-1, -1, -5});
  CHECK(lax::reduce_window(ts::array(std::vector<int>{-3, -1, 4, 2}), double(INT32_MIN), "max", {2}, {2}).to_vector<int>() ==
        std::vector<int>{-1, 4});
  CHECK(lax::reduce_window(ts::array(std::vector<int>{-3, -1, 4, 2}), 0.0, "max", {2}, {2}).to_vector<int>() ==
        std::vector<int>{0, 4});
}

TEST_CASE("pooling gradients with the images split along their rows: halo exchange, never an all-gather") {
  // The gradient of a max pool over images whose rows are split over 1..8
  // devices, against the unsplit gradient (and the loop). Where the windows
  // number the rows over the stride and each device's rows are the stride
  // times its windows (16 rows: 3x3/2 SAME and 2x2/2 VALID on 2, 3, 4, 5
  // and 8 devices, uneven tiles included; 3x3/1 SAME on any), each device
  // takes its neighbours' border rows by collective permutes; elsewhere it
  // takes the rows its windows read from the tiles holding them, also by
  // collective permutes: never an all-gather.
  std::mt19937 rng(11);
  const auto all = ts::devices();
  struct Pool {
    std::int64_t k, s;
    const char* padding;
  };
  for (const Pool& pool : {Pool{3, 2, "SAME"}, Pool{2, 2, "VALID"}, Pool{3, 1, "SAME"}})
    for (const std::int64_t rows : {16, 15}) {
      const Window w{{2, rows, 6, 4}, {1, pool.k, pool.k, 1}, {1, pool.s, pool.s, 1}, pool.padding};
      const auto [x, g, want] = draw(rng, w);
      const std::int64_t out1 = g.shape()[1];
      auto grad = ts::jit([&](ts::Array a, ts::Array c) {
        auto [y, back] = ts::vjp(
            [&](const ts::Array& v) {
              return lax::reduce_window(v, -INFINITY, "max", w.window, w.strides, lax::Padding{w.padding});
            },
            a);
        return std::get<0>(back(c));
      });
      for (int n = 1; n <= 8; ++n) {
        CAPTURE(pool.k);
        CAPTURE(pool.s);
        CAPTURE(rows);
        CAPTURE(n);
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
        const ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x")));
        const ts::Array gs = ts::device_put(g, ts::NamedSharding(mesh, P(ts::None, "x")));
        CHECK(grad(xs, gs).astype(ts::float64).to_vector<double>() == want);
        const std::int64_t ti = (rows + n - 1) / n, to = (out1 + n - 1) / n;
        const bool aligned = to * pool.s == ti;
        if (rows == 16 && pool.s == 2) CHECK(aligned == (n == 1 || n == 2 || n == 3 || n == 4 || n == 5 || n == 8));
        if (n > 1) {
          const std::string text = grad.lower(xs, gs).compile().as_text();
          CAPTURE(text);
          CHECK(text.find("all-gather") == std::string::npos);
          // Aligned 2x2/2 windows never cross a tile's rows: nothing moves.
          CHECK((text.find("collective-permute") != std::string::npos) == (pool.k > pool.s || !aligned));
        }
      }
    }
}

TEST_CASE("pooling primitives: sum, max and min against the interpreter, their derivatives, integers, and SAME padding on split rows") {
  std::mt19937 rng(21);
  const Window w{{2, 9, 7, 3}, {1, 3, 2, 1}, {1, 2, 2, 1}, "SAME"};
  const auto xv = ties(rng, 2 * 9 * 7 * 3);
  const ts::Array x = ts::array(xv).reshape(w.shape).astype(ts::float32);
  for (const std::string op : {"add", "max", "min"}) {
    CAPTURE(op);
    const double init = op == "max" ? -INFINITY : op == "min" ? INFINITY : 0.0;
    auto pool = [&](const std::vector<ts::Array>& a) {
      return std::vector<ts::Array>{lax::reduce_window(a[0], init, op, w.window, w.strides, lax::Padding{"SAME"})};
    };
    const ts::Array y = ts::jit([&](ts::Array a) { return pool({a})[0]; })(x);
    const auto ref = ts::testing::interpret_fn(pool, {x});
    // Small integers: every sum exact, so the bits equal.
    CHECK(ts::testing::same_bits(ts::testing::host_of(y), ref[0]) == "");
    const std::string text = ts::jit([&](ts::Array a) { return pool({a})[0]; }).lower(x).as_text();
    CHECK(text.find("reduce-window-" + std::string(op == "add" ? "sum" : op)) != std::string::npos);
    // The sum's gradient (JAX's transpose: an interior-padded cotangent pooled) against the loop: each element
    // gets the weights of the windows it lies in.
    if (op == "add") {
      std::vector<std::int64_t> out;
      (void)loop_gradient(w, xv, std::vector<double>(xv.size(), 0.0), true, out);
      const auto gv = weights(rng, std::size_t(out[0] * out[1] * out[2] * out[3]));
      const ts::Array g = ts::array(gv).reshape(out).astype(ts::float32);
      const auto pads = pads_of(w);
      std::vector<double> want(xv.size(), 0.0);
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t i = 0; i < out[1]; ++i)
          for (std::int64_t j = 0; j < out[2]; ++j)
            for (std::int64_t c = 0; c < 3; ++c)
              for (std::int64_t di = 0; di < 3; ++di)
                for (std::int64_t dj = 0; dj < 2; ++dj) {
                  const std::int64_t r = i * 2 + di - pads[1].first, q = j * 2 + dj - pads[2].first;
                  if (r < 0 || r >= 9 || q < 0 || q >= 7) continue;
                  want[std::size_t(((b * 9 + r) * 7 + q) * 3 + c)] += gv[std::size_t(((b * out[1] + i) * out[2] + j) * 3 + c)];
                }
      const ts::Array gx = ts::jit([&](ts::Array a, ts::Array c) {
        auto [yy, back] = ts::vjp([&](const ts::Array& v) { return pool({v})[0]; }, a);
        return std::get<0>(back(c));
      })(x, g);
      CHECK(gx.astype(ts::float64).to_vector<double>() == want);
    }
  }
  // Integers: wrapping sums, the dtype's extremes as identities.
  const ts::Array xi = ts::array(std::vector<std::int32_t>{INT32_MAX, 1, -5, 7, INT32_MIN, -1}).reshape({1, 6});
  CHECK(lax::reduce_window(xi, 0.0, "add", {1, 2}, {1, 2}).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{INT32_MIN, 2, INT32_MAX});
  CHECK(lax::reduce_window(xi, double(INT32_MIN), "max", {1, 3}, {1, 1}, lax::Padding{"SAME"}).to_vector<std::int32_t>() ==
        std::vector<std::int32_t>{INT32_MAX, INT32_MAX, 7, 7, 7, -1});
  // -0 is below +0, as the elementwise max and min: the interpreter's bits.
  const ts::Array xz = ts::array(std::vector<float>{-0.0f, 0.0f, 0.0f, -0.0f, -0.0f, -0.0f}).reshape({1, 6});
  for (const std::string op : {"max", "min"}) {
    auto f = [&](const std::vector<ts::Array>& a) {
      return std::vector<ts::Array>{lax::reduce_window(a[0], op == "max" ? -INFINITY : INFINITY, op, {1, 2}, {1, 2})};
    };
    const ts::Array got = ts::jit([&](ts::Array a) { return f({a})[0]; })(xz);
    CHECK(ts::testing::same_bits(ts::testing::host_of(got), ts::testing::interpret_fn(f, {xz})[0]) == "");
    const auto v = got.to_vector<float>();
    CHECK(std::signbit(v[0]) == (op == "min"));
    CHECK(std::signbit(v[1]) == (op == "min"));
    CHECK(std::signbit(v[2]));
  }
  // NaN propagates through the forward max.
  const ts::Array xn = ts::array(std::vector<float>{1, NAN, 3, 4}).reshape({1, 4});
  const auto yn = lax::reduce_window(xn, -INFINITY, "max", {1, 2}, {1, 2}).to_vector<float>();
  CHECK(std::isnan(yn[0]));
  CHECK(yn[1] == 4.0f);
  // SAME pooling with the rows split: the padding is the identity on the
  // first and last devices, the border rows from the neighbours (or the
  // rows from the tiles holding them, where a device's rows are not the
  // stride times its windows); no all-gather.
  const auto all = ts::devices();
  for (const std::int64_t rows : {16, 13}) {
    const ts::Array xr = ts::sin(ts::arange(0.0f, float(2 * rows * 6 * 3)).reshape({2, rows, 6, 3}) * 0.37f) - 2.0f;
    for (const std::string op : {"max", "add", "min"}) {
      const double init = op == "max" ? -INFINITY : op == "min" ? INFINITY : 0.0;
      auto f = ts::jit([&](ts::Array a) { return lax::reduce_window(a, init, op, {1, 3, 3, 1}, {1, 2, 2, 1}, lax::Padding{"SAME"}); });
      const auto want = f(xr).to_vector<float>();
      for (int n = 2; n <= 8; ++n) {
        CAPTURE(rows);
        CAPTURE(op);
        CAPTURE(n);
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
        const ts::Array xs = ts::device_put(xr, ts::NamedSharding(mesh, P(ts::None, "x")));
        const auto got = f(xs).to_vector<float>();
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (op == "add") REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
          else REQUIRE(got[i] == want[i]);
        }
        const std::int64_t out = (rows + 1) / 2, ti = (rows + n - 1) / n, to = (out + n - 1) / n;
        {
          const std::string text = f.lower(xs).compile().as_text();
          CAPTURE(text);
          CHECK(text.find("all-gather") == std::string::npos);
          CHECK(text.find("collective-permute") != std::string::npos);
        }
        if (rows == 16) CHECK((to * 2 == ti) == (n == 2 || n == 3 || n == 4 || n == 5 || n == 8));
      }
    }
  }
  // Rows and columns split on a 2 x 4 mesh: the second exchange carries the
  // corners. The forward and the gradient, no all-gather.
  {
    const ts::Array x2 = ts::sin(ts::arange(0.0f, float(2 * 16 * 16 * 3)).reshape({2, 16, 16, 3}) * 0.71f);
    auto pool = [](const ts::Array& a) { return lax::reduce_window(a, -INFINITY, "max", {1, 3, 3, 1}, {1, 2, 2, 1}, lax::Padding{"SAME"}); };
    auto both = ts::jit([&](ts::Array a, ts::Array c) {
      auto [y, back] = ts::vjp(pool, a);
      return std::make_tuple(y, std::get<0>(back(c)));
    });
    const ts::Array g2 = ts::cos(ts::arange(0.0f, float(2 * 8 * 8 * 3)).reshape({2, 8, 8, 3}));
    const auto [y1, d1] = both(x2, g2);
    ts::Mesh mesh(ts::devices(), {2, 4}, {"a", "b"});
    const ts::Array xs = ts::device_put(x2, ts::NamedSharding(mesh, P(ts::None, "a", "b")));
    const ts::Array gs = ts::device_put(g2, ts::NamedSharding(mesh, P(ts::None, "a", "b")));
    const auto [y8, d8] = both(xs, gs);
    CHECK(y8.to_vector<float>() == y1.to_vector<float>());
    CHECK(d8.to_vector<float>() == d1.to_vector<float>());
    const std::string text = both.lower(xs, gs).compile().as_text();
    CAPTURE(text);
    CHECK(text.find("all-gather") == std::string::npos);
  }
}

TEST_CASE("pooling of rows split finer than the windows, or not in step with them: the rows move by collective permutes") {
  // One row a device under 2x2/2 (the CNN sample's --split rows: half the
  // devices hold no window), 9 rows under 2x2/2 (a device's rows are more
  // than the stride times its windows: one tile feeds two devices), 3x3/3
  // of 12 rows over two mesh axes, and 9 rows by 2x2/2 with the batch split
  // on another axis. The forward max and sum and the max's gradient equal
  // one device's bits and the loop's gradient; no all-gather.
  std::mt19937 rng(5);
  const auto all = ts::devices();
  struct Case {
    std::int64_t rows, k, s;
    int n;  // devices; 0: the 2 x 4 mesh
    const char* padding;
  };
  for (const Case c : {Case{8, 2, 2, 8, "VALID"}, Case{8, 2, 2, 3, "VALID"}, Case{9, 2, 2, 2, "VALID"}, Case{9, 2, 2, 4, "VALID"},
                       Case{9, 3, 2, 3, "SAME"}, Case{12, 3, 3, 0, "VALID"}, Case{9, 2, 2, -1, "VALID"}}) {
    CAPTURE(c.rows);
    CAPTURE(c.k);
    CAPTURE(c.n);
    const Window w{{4, c.rows, 5, 3}, {1, c.k, c.k, 1}, {1, c.s, c.s, 1}, c.padding};
    const auto [x, g, want] = draw(rng, w);
    auto f = ts::jit([&](ts::Array a, ts::Array cot) {
      auto [y, back] = ts::vjp(
          [&](const ts::Array& v) { return lax::reduce_window(v, -INFINITY, "max", w.window, w.strides, lax::Padding{w.padding}); }, a);
      return std::make_tuple(y, std::get<0>(back(cot)),
                             lax::reduce_window(a, 0.0f, "add", w.window, w.strides, lax::Padding{w.padding}));
    });
    const auto [y1, d1, s1] = f(x, g);
    CHECK(d1.astype(ts::float64).to_vector<double>() == want);
    std::optional<ts::Mesh> mesh;
    ts::PartitionSpec spec = P(ts::None, "x");
    if (c.n > 0) {
      mesh.emplace(std::vector<ts::Device>(all.begin(), all.begin() + c.n), ts::Shape{c.n}, std::vector<std::string>{"x"});
    } else {
      mesh.emplace(all, ts::Shape{2, 4}, std::vector<std::string>{"a", "b"});
      spec = c.n == 0 ? P(ts::None, {"a", "b"}) : P("a", "b");
    }
    const ts::Array xs = ts::device_put(x, ts::NamedSharding(*mesh, spec));
    const ts::Array gs = ts::device_put(g, ts::NamedSharding(*mesh, spec));
    const auto [y8, d8, s8] = f(xs, gs);
    CHECK(y8.to_vector<float>() == y1.to_vector<float>());
    CHECK(d8.to_vector<float>() == d1.to_vector<float>());
    CHECK(s8.to_vector<float>() == s1.to_vector<float>());  // integers and halves: every sum exact
    const std::string text = f.lower(xs, gs).compile().as_text();
    CAPTURE(text);
    CHECK(text.find("all-gather") == std::string::npos);
    CHECK(text.find("collective-permute") != std::string::npos);
  }
}

TEST_CASE("arrays with fewer rows than devices stay split: the CNN sample's two blocks over 8 devices, no all-gather") {
  // 8 rows over 8 devices: a 3x3 convolution, 2x2/2 max pooling (4 rows,
  // half the devices hold no row), a second 3x3 convolution of those 4 rows
  // and a second pooling (2 rows), with both gradients. Propagation splits a
  // dim over more tiles than it has rows (tiles of padding only): the
  // second block moves rows by collective permutes where it gathered its
  // 4 rows before. 5 rows over 8 devices likewise.
  std::mt19937 rng(9);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  for (std::int64_t rows : {8, 5}) {
    CAPTURE(rows);
    std::normal_distribution<float> u(0, 1);
    auto draw_array = [&](ts::Shape s) {
      std::vector<float> v(std::size_t(ts::numel(s)));
      for (auto& e : v) e = u(rng);
      return ts::array(v, s);
    };
    const ts::Array x = draw_array({4, rows, 8, 1}), w1 = draw_array({3, 3, 1, 4}), w2 = draw_array({3, 3, 4, 6});
    auto block = [&](const ts::Array& a, const ts::Array& k) {
      ts::Array y = ts::nn::relu(lax::conv_general_dilated(a, k, {1, 1}, "SAME", {.dimension_numbers = nhwc}));
      return lax::reduce_window(y, -INFINITY, "max", {1, 2, 2, 1}, {1, 2, 2, 1}, lax::Padding{"VALID"});
    };
    auto loss = [&](std::vector<ts::Array> k, ts::Array a) { return ts::sum(ts::sin(block(block(a, k[0]), k[1]))); };
    auto f = ts::jit([&](ts::Array a, ts::Array k1, ts::Array k2) {
      auto [value, g] = ts::value_and_grad(loss)(std::vector<ts::Array>{k1, k2}, a);
      return std::make_tuple(value, g[0], g[1]);
    });
    const auto [v1, g1, h1] = f(x, w1, w2);
    ts::Mesh mesh = ts::make_mesh({8}, {"x"});
    const ts::NamedSharding rep(mesh, P());
    const ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x")));
    const ts::Array k1 = ts::device_put(w1, rep), k2 = ts::device_put(w2, rep);
    const auto [v8, g8, h8] = f(xs, k1, k2);
    CHECK(v8.item<float>() == doctest::Approx(v1.item<float>()).epsilon(1e-5));
    const auto a1 = g1.to_vector<float>(), a8 = g8.to_vector<float>(), b1 = h1.to_vector<float>(), b8 = h8.to_vector<float>();
    for (std::size_t i = 0; i < a1.size(); ++i) CHECK(a8[i] == doctest::Approx(a1[i]).epsilon(1e-4).scale(1));
    for (std::size_t i = 0; i < b1.size(); ++i) CHECK(b8[i] == doctest::Approx(b1[i]).epsilon(1e-4).scale(1));
    const std::string text = f.lower(xs, k1, k2).compile().as_text();
    CAPTURE(text);
    CHECK(text.find("all-gather") == std::string::npos);
    CHECK(text.find("collective-permute") != std::string::npos);
  }
}

TEST_CASE("random convolutions and poolings with their gradients, the rows split over 2..8 devices: the unsplit values") {
  // Random heights, windows, strides, kernel dilations and paddings, on 1-D
  // meshes and 2-D ones (the batch on the other axis); each a sum of the
  // forward and both gradients, against one device. Tiles in step or not,
  // uneven, and rows fewer than the devices (a single row, or a window's
  // single result row, still gathers: nothing checked of the text).
  std::mt19937 rng(7);
  const auto all = ts::devices();
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  int cases = 0;
  while (cases < 14) {
    const int n = 2 + int(rng() % 7);
    const std::int64_t H = 1 + std::int64_t(rng() % 23), W = 3 + std::int64_t(rng() % 5);
    const std::int64_t k = 1 + std::int64_t(rng() % 4), s = 1 + std::int64_t(rng() % 3), dil = 1 + std::int64_t(rng() % 2);
    const bool same = rng() % 2, is_conv = rng() % 2, two_d = rng() % 3 == 0 && n % 2 == 0;
    const std::string pad = same ? "SAME" : "VALID";
    if (!same && (dil * (k - 1) + 1 > H || k > W)) continue;
    if (!is_conv && k < s) continue;
    ++cases;
    CAPTURE(n);
    CAPTURE(H);
    CAPTURE(k);
    CAPTURE(s);
    CAPTURE(dil);
    CAPTURE(pad);
    CAPTURE(is_conv);
    CAPTURE(two_d);
    const ts::Array x = ts::random::normal(ts::random::key(std::uint32_t(cases)), {2, H, W, 3});
    const ts::Array w = ts::random::normal(ts::random::key(std::uint32_t(100 + cases)), {k, k, 3, 4});
    auto f = ts::jit([&](ts::Array a, ts::Array b) {
      if (is_conv) {
        auto conv = [&](const ts::Array& u, const ts::Array& v) {
          return lax::conv_general_dilated(u, v, {s, 1}, lax::Padding{pad}, {.rhs_dilation = {dil, 1}, .dimension_numbers = nhwc});
        };
        auto [y, back] = ts::vjp(conv, a, b);
        auto [ga, gb] = back(ts::sin(y));
        return ts::sum(y * y) + ts::sum(ga * ga) + ts::sum(gb * gb) * 0.001f;
      }
      auto pool = [&](const ts::Array& u) { return lax::reduce_window(u, -INFINITY, "max", {1, k, 2, 1}, {1, s, 1, 1}, lax::Padding{pad}); };
      auto [y, back] = ts::vjp(pool, a);
      const ts::Array g = std::get<0>(back(ts::cos(y)));
      return ts::sum(y * 1.5f) + ts::sum(g * g) +
             ts::sum(lax::reduce_window(a, 0.0f, "add", {1, k, 1, 1}, {1, s, 1, 1}, lax::Padding{pad}));
    });
    const double want = f(x, w).item<float>();
    std::optional<ts::Mesh> mesh;
    ts::PartitionSpec spec = P(ts::None, "x");
    const std::vector<ts::Device> devs(all.begin(), all.begin() + n);
    if (two_d) {
      mesh.emplace(devs, ts::Shape{n / 2, 2}, std::vector<std::string>{"x", "y"});
      spec = P("y", "x");
    } else {
      mesh.emplace(devs, ts::Shape{n}, std::vector<std::string>{"x"});
    }
    const ts::Array xs = ts::device_put(x, ts::NamedSharding(*mesh, spec)), ws = ts::device_put(w, ts::NamedSharding(*mesh, P()));
    CHECK(double(f(xs, ws).item<float>()) == doctest::Approx(want).epsilon(1e-4));
  }
}
