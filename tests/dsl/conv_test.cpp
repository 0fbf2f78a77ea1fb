// Convolutions and reduce_window (issue 42, the first part): against a
// direct loop in double written here from StableHLO's definition, over random
// shapes, layouts, strides, paddings, dilations and groups; gradients
// against central differences; conv_transpose as the input gradient of a
// strided convolution; on 1..8 devices with the batch split.
#include <doctest/doctest.h>
#include <tessel/tessel.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ts = tessel;
namespace lax = tessel::lax;
using ts::P;

namespace {

using Pairs = std::vector<std::pair<std::int64_t, std::int64_t>>;

struct Case {
  int k = 2;                                      // spatial dims
  std::int64_t N = 2, C = 4, O = 6;               // batch, input features, output features
  std::vector<std::int64_t> S, K, s, ld, rd;      // input sizes, kernel sizes, strides, dilations
  Pairs pads;
  std::int64_t G = 1, B = 1;
};

std::int64_t numel(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t(1), std::multiplies<>());
}

// out[n][o][p...] of the canonical layouts X[N][C][S...], W[O][I][K...].
std::vector<double> reference(const Case& c, const std::vector<double>& X, const std::vector<double>& W,
                              std::vector<std::int64_t>& out_shape) {
  const std::int64_t I = c.C / c.G, Nout = c.N / c.B;
  std::vector<std::int64_t> o(std::size_t(c.k));
  for (int d = 0; d < c.k; ++d) {
    const std::int64_t P = (c.S[d] - 1) * c.ld[d] + 1 + c.pads[d].first + c.pads[d].second;
    const std::int64_t eff = (c.K[d] - 1) * c.rd[d] + 1;
    o[d] = P >= eff ? (P - eff) / c.s[d] + 1 : 0;
  }
  out_shape = {Nout, c.O};
  out_shape.insert(out_shape.end(), o.begin(), o.end());
  std::vector<double> out(std::size_t(numel(out_shape)), 0.0);
  const std::int64_t So = numel(o), Ss = numel(c.S), Ks = numel(c.K);
  for (std::int64_t n = 0; n < Nout; ++n)
    for (std::int64_t oc = 0; oc < c.O; ++oc)
      for (std::int64_t p = 0; p < So; ++p) {
        std::vector<std::int64_t> pi(std::size_t(c.k));
        for (int d = c.k - 1, r = int(p); d >= 0; --d) pi[d] = r % o[d], r /= int(o[d]);
        double acc = 0;
        for (std::int64_t i = 0; i < I; ++i)
          for (std::int64_t kk = 0; kk < Ks; ++kk) {
            std::vector<std::int64_t> ki(std::size_t(c.k));
            for (int d = c.k - 1, r = int(kk); d >= 0; --d) ki[d] = r % c.K[d], r /= int(c.K[d]);
            std::int64_t flat = 0;
            bool inside = true;
            for (int d = 0; d < c.k && inside; ++d) {
              const std::int64_t t = pi[d] * c.s[d] + ki[d] * c.rd[d] - c.pads[d].first;
              if (t < 0 || t % c.ld[d] != 0 || t / c.ld[d] >= c.S[d]) inside = false;
              else flat = flat * c.S[d] + t / c.ld[d];
            }
            if (!inside) continue;
            const std::int64_t g = c.G > 1 ? oc / (c.O / c.G) : 0, b = c.B > 1 ? oc / (c.O / c.B) : 0;
            const std::int64_t ch = g * I + i, nn = b * Nout + n;
            acc += X[std::size_t((nn * c.C + ch) * Ss + flat)] * W[std::size_t((oc * I + i) * Ks + kk)];
          }
        out[std::size_t((n * c.O + oc) * So + p)] = acc;
      }
  return out;
}

// A layout string for the canonical (first, second, spatial...) order put
// in a random order: spatial letters "HWD". The kernel's (`keep_spatial`)
// keeps them in that order: JAX numbers spatial dims (strides, padding) in
// the kernel layout's order.
std::string random_layout(char first, char second, int k, std::mt19937& rng, std::vector<int>& canon_to_pos,
                          bool keep_spatial = false) {
  std::vector<char> letters{first, second};
  for (int j = 0; j < k; ++j) letters.push_back("HWD"[j]);
  std::vector<int> pos(letters.size());
  std::iota(pos.begin(), pos.end(), 0);
  std::shuffle(pos.begin(), pos.end(), rng);
  if (keep_spatial) std::sort(pos.begin() + 2, pos.end());
  std::string s(letters.size(), '?');
  for (std::size_t i = 0; i < letters.size(); ++i) s[std::size_t(pos[i])] = letters[i];
  canon_to_pos = pos;
  return s;
}

// The canonical array transposed into a layout (canon_to_pos[i]: where canonical dim i goes).
ts::Array to_layout(const ts::Array& canon, const std::vector<int>& canon_to_pos) {
  std::vector<int> perm(canon_to_pos.size());
  for (std::size_t i = 0; i < canon_to_pos.size(); ++i) perm[std::size_t(canon_to_pos[i])] = int(i);
  return ts::transpose(canon, perm);
}
ts::Array from_layout(const ts::Array& laid, const std::vector<int>& canon_to_pos) {
  return ts::transpose(laid, canon_to_pos);
}

std::vector<double> randoms(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

ts::Array host(const std::vector<double>& v, std::vector<std::int64_t> shape, ts::DType dt) {
  return ts::array(v).reshape(ts::Shape(shape.begin(), shape.end())).astype(dt);
}

std::string close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  if (got.size() != want.size()) return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i]))))
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + " vs " + std::to_string(want[i]);
  return "";
}

}  // namespace

TEST_CASE("conv_general_dilated equals the direct loop: 1-3 spatial dims, layouts, strides, paddings, dilations, groups") {
  std::mt19937 rng(42);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    Case c;
    c.k = 1 + trial % 3;
    std::uniform_int_distribution<int> small(1, 3);
    const int group_kind = trial % 4;  // 0, 1: none; 2: feature groups; 3: batch groups
    c.G = group_kind == 2 ? 2 : 1;
    c.B = group_kind == 3 ? 2 : 1;
    c.N = c.B * small(rng);
    c.C = c.G * small(rng);
    c.O = c.G * c.B * small(rng);
    for (int d = 0; d < c.k; ++d) {
      c.S.push_back(std::uniform_int_distribution<int>(c.k == 3 ? 2 : 3, c.k == 3 ? 5 : 9)(rng));
      c.K.push_back(small(rng));
      c.s.push_back(small(rng));
      c.ld.push_back(trial % 5 == 4 ? 2 : 1);
      c.rd.push_back(trial % 7 == 6 ? 2 : 1);
    }
    // Padding: a string, or pairs (some negative).
    const int pk = trial % 5;
    const char* names[] = {"VALID", "SAME", "SAME_LOWER"};
    lax::Padding padding = "VALID";
    if (pk < 3) {
      padding = names[pk];
      for (int d = 0; d < c.k; ++d) {
        const std::int64_t eff = (c.K[d] - 1) * c.rd[d] + 1, o = (c.S[d] + c.s[d] - 1) / c.s[d];
        const std::int64_t total = std::max<std::int64_t>(0, (o - 1) * c.s[d] + eff - c.S[d]);
        const std::int64_t lo = pk == 0 ? 0 : pk == 1 ? total / 2 : total - total / 2;
        c.pads.push_back(pk == 0 ? std::pair<std::int64_t, std::int64_t>{0, 0} : std::pair{lo, total - lo});
      }
    } else {
      for (int d = 0; d < c.k; ++d) c.pads.push_back({std::uniform_int_distribution<int>(-1, 2)(rng), small(rng) - 1});
      padding = c.pads;
    }
    std::vector<int> lp, rp, op;
    const bool layouts = trial % 2 == 1;
    std::vector<std::string> dn;
    if (layouts) dn = {random_layout('N', 'C', c.k, rng, lp), random_layout('O', 'I', c.k, rng, rp, true), random_layout('N', 'C', c.k, rng, op)};
    std::vector<std::int64_t> xs{c.N, c.C}, ws{c.O, c.C / c.G};
    xs.insert(xs.end(), c.S.begin(), c.S.end());
    ws.insert(ws.end(), c.K.begin(), c.K.end());
    const auto X = randoms(std::size_t(numel(xs)), rng), W = randoms(std::size_t(numel(ws)), rng);
    std::vector<std::int64_t> out_shape;
    const auto want = reference(c, X, W, out_shape);
    const ts::DType dt = trial % 3 == 0 ? ts::float64 : ts::float32;
    ts::Array x = host(X, xs, dt), w = host(W, ws, dt);
    if (layouts) x = to_layout(x, lp), w = to_layout(w, rp);
    ts::Array y = lax::conv_general_dilated(x, w, c.s, padding,
                                            {.lhs_dilation = c.ld, .rhs_dilation = c.rd, .dimension_numbers = dn,
                                             .feature_group_count = c.G, .batch_group_count = c.B});
    if (layouts) y = from_layout(y, op);
    CAPTURE(trial);
    REQUIRE(y.shape() == ts::Shape(out_shape.begin(), out_shape.end()));
    CHECK(close(y.astype(ts::float64).to_vector<double>(), want, dt == ts::float64 ? 1e-12 : 2e-5) == "");
    // Under jit too.
    ts::Array yj = ts::jit([&](ts::Array a, ts::Array b) {
      return lax::conv_general_dilated(a, b, c.s, padding,
                                       {.lhs_dilation = c.ld, .rhs_dilation = c.rd, .dimension_numbers = dn,
                                        .feature_group_count = c.G, .batch_group_count = c.B});
    })(x, w);
    if (layouts) yj = from_layout(yj, op);
    CHECK(close(yj.astype(ts::float64).to_vector<double>(), want, dt == ts::float64 ? 1e-12 : 2e-5) == "");
    ++checked;
  }
  CHECK(checked == 60);
}

TEST_CASE("conv_general_dilated: integer operands, preferred_element_type, lax.conv, and JAX's errors") {
  const ts::Array x = ts::arange(std::int64_t(0), std::int64_t(2 * 3 * 5), std::int64_t(1), ts::int32).reshape({2, 3, 5});
  const ts::Array w = (ts::arange(std::int64_t(0), std::int64_t(4 * 3 * 2), std::int64_t(1), ts::int32) - 7).reshape({4, 3, 2});
  const ts::Array yi = lax::conv(x, w, {1}, "VALID");
  CHECK(yi.dtype() == ts::int32);
  const ts::Array yf = lax::conv(x.astype(ts::float64), w.astype(ts::float64), {1}, "VALID");
  CHECK(yi.astype(ts::float64).to_vector<double>() == yf.to_vector<double>());
  const ts::Array x8 = x.astype(ts::int8), w8 = w.astype(ts::int8);
  const ts::Array y32 = lax::conv_general_dilated(x8, w8, {1}, "VALID", {.preferred_element_type = ts::int32});
  CHECK(y32.dtype() == ts::int32);
  CHECK(y32.to_vector<std::int32_t>() == yi.to_vector<std::int32_t>());
  auto message = [](auto f) {
    try {
      f();
    } catch (const ts::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(message([&] { lax::conv(x, w.astype(ts::float32), {1}, "VALID"); })
            .find("requires arguments to have the same dtypes") != std::string::npos);
  CHECK(message([&] { lax::conv_general_dilated(x, w, {1}, "VALID", {.feature_group_count = 2}); })
            .find("feature_group_count must divide lhs feature dimension size, but 2 does not divide 3.") != std::string::npos);
  CHECK(message([&] { lax::conv(x, w, {1}, "FULL"); }).find("Unknown padding type: FULL.") != std::string::npos);
  CHECK(message([&] { lax::conv(x, w, {1, 1}, "VALID"); }).find("window_strides") != std::string::npos);
  CHECK(message([&] { lax::conv_general_dilated(x, w, {1}, "VALID", {.dimension_numbers = {"NCW", "OIW", "NCH"}}); })
            .find("same spatial dimensions") != std::string::npos);
  CHECK(message([&] { lax::conv(x, w, {0}, "VALID"); }).find("window_strides must be positive, got 0") != std::string::npos);
  CHECK(message([&] { lax::reduce_window(x, 0, "xor", {1, 1, 2}); }).find("unsupported reduction 'xor'") != std::string::npos);
  // Zero-size results, as JAX's: a kernel longer than the input (VALID), an empty batch.
  CHECK(lax::conv(ts::ones({2, 3, 2}), ts::ones({4, 3, 5}), {1}, "VALID").shape() == ts::Shape{2, 4, 0});
  CHECK(lax::conv(ts::ones({0, 3, 6}), ts::ones({4, 3, 2}), {1}, "SAME").shape() == ts::Shape{0, 4, 6});
}

TEST_CASE("conv gradients: central differences for the input and the kernel, strided, dilated, grouped") {
  std::mt19937 rng(7);
  const ts::Array x = ts::array(randoms(2 * 4 * 7 * 6, rng)).reshape({2, 7, 6, 4});  // NHWC
  const ts::Array w = ts::array(randoms(3 * 2 * 2 * 6, rng)).reshape({3, 2, 2, 6});  // HWIO, 2 groups
  const ts::Array r = ts::array(randoms(2 * 4 * 3 * 6, rng)).reshape({2, 4, 3, 6});
  auto f = [&](ts::Array a, ts::Array b) {
    return ts::sum(lax::conv_general_dilated(a, b, {2, 2}, "SAME",
                                             {.rhs_dilation = {1, 2}, .dimension_numbers = {"NHWC", "HWIO", "NHWC"},
                                              .feature_group_count = 2}) * r);
  };
  REQUIRE(lax::conv_general_dilated(x, w, {2, 2}, "SAME",
                                    {.rhs_dilation = {1, 2}, .dimension_numbers = {"NHWC", "HWIO", "NHWC"},
                                     .feature_group_count = 2}).shape() == ts::Shape{2, 4, 3, 6});
  const ts::Array gx = ts::grad(f, 0)(x, w), gw = ts::grad(f, 1)(x, w);
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const auto gxv = gx.to_vector<double>(), gwv = gw.to_vector<double>();
  const double h = 1e-5;
  for (std::size_t i = 0; i < xv.size(); i += 13) {
    auto xp = xv, xm = xv;
    xp[i] += h, xm[i] -= h;
    const double fd = (f(ts::array(xp).reshape(x.shape()), w).item<double>() -
                       f(ts::array(xm).reshape(x.shape()), w).item<double>()) / (2 * h);
    CHECK(gxv[i] == doctest::Approx(fd).epsilon(1e-6));
  }
  for (std::size_t i = 0; i < wv.size(); i += 5) {
    auto wp = wv, wm = wv;
    wp[i] += h, wm[i] -= h;
    const double fd = (f(x, ts::array(wp).reshape(w.shape())).item<double>() -
                       f(x, ts::array(wm).reshape(w.shape())).item<double>()) / (2 * h);
    CHECK(gwv[i] == doctest::Approx(fd).epsilon(1e-6));
  }
}

TEST_CASE("conv_transpose is the input gradient of a strided VALID convolution (transpose_kernel)") {
  std::mt19937 rng(3);
  for (std::int64_t s : {1, 2, 3}) {
    const std::int64_t kk = 3, in = kk + 2 * s;  // (in - k) % s == 0, k >= s
    const ts::Array x = ts::array(randoms(std::size_t(2 * in * in * 3), rng)).reshape({2, in, in, 3});
    const ts::Array w = ts::array(randoms(std::size_t(kk * kk * 3 * 4), rng)).reshape({kk, kk, 3, 4});
    auto y = [&](ts::Array a) {
      return lax::conv_general_dilated(a, w, {s, s}, "VALID", {.dimension_numbers = {"NHWC", "HWIO", "NHWC"}});
    };
    const ts::Array g = ts::array(randoms(std::size_t(ts::numel(y(x).shape())), rng)).reshape(y(x).shape());
    const ts::Array want = std::get<0>(ts::vjp(y, x).second(g));
    const ts::Array got = lax::conv_transpose(g, w, {s, s}, "VALID", {.transpose_kernel = true});
    CAPTURE(s);
    REQUIRE(got.shape() == x.shape());
    CHECK(close(got.to_vector<double>(), want.to_vector<double>(), 1e-12) == "");
  }
  // The default layouts are TensorFlow's (NHWC, HWIO): a stride-2 SAME
  // transpose doubles the size.
  const ts::Array z = lax::conv_transpose(ts::ones({1, 4, 4, 2}), ts::ones({3, 3, 2, 5}), {2, 2}, "SAME");
  CHECK(z.shape() == ts::Shape{1, 8, 8, 5});
}

TEST_CASE("reduce_window: max, add and min pooling against a direct loop, strided and padded, with gradients") {
  std::mt19937 rng(5);
  const std::int64_t H = 7, W = 6;
  const auto v = randoms(std::size_t(2 * H * W), rng);
  const ts::Array x = ts::array(v).reshape({2, H, W});
  for (const std::string op : {"max", "add", "min"}) {
    const double init = op == "max" ? -INFINITY : op == "min" ? INFINITY : 0.0;
    const ts::Array y = lax::reduce_window(x, init, op, {1, 3, 2}, {1, 2, 2}, "SAME");
    // SAME: out = ceil(n / s); pads (total / 2, rest).
    const std::int64_t oh = 4, ow = 3, ph = ((oh - 1) * 2 + 3 - H) / 2, pw = ((ow - 1) * 2 + 2 - W) / 2;
    REQUIRE(y.shape() == ts::Shape{2, oh, ow});
    std::vector<double> want;
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double acc = init;
          for (std::int64_t di = 0; di < 3; ++di)
            for (std::int64_t dj = 0; dj < 2; ++dj) {
              const std::int64_t a = i * 2 + di - ph, c = j * 2 + dj - pw;
              const double e = a < 0 || a >= H || c < 0 || c >= W ? init : v[std::size_t((b * H + a) * W + c)];
              acc = op == "max" ? std::max(acc, e) : op == "min" ? std::min(acc, e) : acc + e;
            }
          want.push_back(acc);
        }
    CAPTURE(op);
    CHECK(close(y.to_vector<double>(), want, 1e-12) == "");
  }
  // The gradient of a max pool routes each window's cotangent to its maximum.
  const ts::Array g = ts::grad([](ts::Array a) { return ts::sum(lax::reduce_window(a, -INFINITY, "max", {2, 2}, {2, 2})); })(
      ts::array(std::vector<double>{1, 5, 2, 0, 3, 4, 8, 1}).reshape({2, 4}));
  CHECK(g.to_vector<double>() == std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0});
}

TEST_CASE("reduce_window max and min: ties send the cotangent to the window's first extreme, as JAX's select_and_scatter_add") {
  // Values from {0, 1, 2}: most windows tie. Overlapping windows (3 x 2,
  // strides 1 x 2, SAME). The reference: for each window, the first element
  // (row-major in the window) equal to the result takes the window's weight.
  std::mt19937 rng(17);
  const std::int64_t B = 2, H = 5, W = 6;
  std::vector<double> v(std::size_t(B * H * W));
  for (auto& e : v) e = double(rng() % 3);
  const ts::Array x = ts::array(v).reshape({B, H, W});
  for (const std::string op : {"max", "min"}) {
    const double init = op == "max" ? -INFINITY : INFINITY;
    auto pool = [op, init](const ts::Array& a) { return lax::reduce_window(a, init, op, {1, 3, 2}, {1, 1, 2}, "SAME"); };
    const std::int64_t oh = H, ow = W / 2, ph = 1, pw = 0;
    std::vector<double> wts(std::size_t(B * oh * ow));
    for (auto& e : wts) e = double(rng() % 7) - 3;
    const ts::Array w = ts::array(wts).reshape({B, oh, ow});
    std::vector<double> want(v.size(), 0.0);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double best = init;
          std::int64_t at = -1;
          for (std::int64_t di = 0; di < 3; ++di)
            for (std::int64_t dj = 0; dj < 2; ++dj) {
              const std::int64_t a = i + di - ph, c = j * 2 + dj - pw;
              if (a < 0 || a >= H || c < 0 || c >= W) continue;
              const double e = v[std::size_t((b * H + a) * W + c)];
              if (at < 0 || (op == "max" ? e > best : e < best)) best = e, at = (b * H + a) * W + c;
            }
          want[std::size_t(at)] += wts[std::size_t((b * oh + i) * ow + j)];
        }
    auto loss = [&](const ts::Array& a) { return ts::sum(pool(a) * w); };
    CAPTURE(op);
    CHECK(ts::grad(loss)(x).to_vector<double>() == want);
    CHECK(ts::jit(ts::grad(loss))(x).to_vector<double>() == want);
    // Forward mode: the tangent is the chosen element's.
    const auto [y, dy] = ts::jvp(pool, std::make_tuple(x), std::make_tuple(ts::array(v).reshape({B, H, W}) * 10.0));
    CHECK(close(dy.to_vector<double>(), (y * 10.0).to_vector<double>(), 0) == "");
    // The batch split over 8 devices: the same gradient.
    ts::Mesh mesh(ts::devices(), {int(ts::devices().size())}, {"x"});
    const ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
    CHECK(ts::jit(ts::grad(loss))(xs).to_vector<double>() == want);
  }
  // A global pool of 25 taps (the running-mask form past 16): the first 1 of each image.
  std::vector<double> u(50, 0.0);
  u[7] = u[12] = u[30] = u[41] = 1.0;
  const ts::Array gx = ts::grad([](const ts::Array& a) {
    return ts::sum(lax::reduce_window(a, -INFINITY, "max", {1, 5, 5}, {1, 1, 1}, "VALID") * ts::array({2.0, 3.0}).reshape({2, 1, 1}));
  })(ts::array(u).reshape({2, 5, 5}));
  std::vector<double> gw(50, 0.0);
  gw[7] = 2.0, gw[30] = 3.0;
  CHECK(gx.to_vector<double>() == gw);
}

TEST_CASE("conv on 1..8 devices with the batch split, even and uneven: the loop's values, the batch kept split") {
  std::mt19937 rng(9);
  for (int n = 1; n <= 8; ++n) {
    for (std::int64_t N : {8, 5}) {
      const auto all = ts::devices();
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
      Case c;
      c.k = 2, c.N = N, c.C = 3, c.O = 4, c.S = {6, 5}, c.K = {3, 2}, c.s = {1, 2}, c.ld = {1, 1}, c.rd = {1, 1};
      c.pads = {{1, 1}, {0, 1}};
      const auto X = randoms(std::size_t(N * 3 * 30), rng), W = randoms(std::size_t(4 * 3 * 6), rng);
      std::vector<std::int64_t> out_shape;
      const auto want = reference(c, X, W, out_shape);
      const ts::Array x = ts::device_put(host(X, {N, 3, 6, 5}, ts::float32), ts::NamedSharding(mesh, P("x")));
      const ts::Array w = ts::device_put(host(W, {4, 3, 3, 2}, ts::float32), ts::NamedSharding(mesh, P()));
      const ts::Array y = ts::jit([&](ts::Array a, ts::Array b) { return lax::conv(a, b, c.s, c.pads); })(x, w);
      CAPTURE(n);
      CAPTURE(N);
      CHECK(close(y.astype(ts::float64).to_vector<double>(), want, 2e-5) == "");
      // (More devices than images: the result comes out replicated.)
      REQUIRE(y.sharding().is_named());
      if (n <= N) CHECK(y.sharding().as_named().spec() == P("x"));
    }
  }
}

TEST_CASE("pooling with the images split along their rows: strided taps by halo exchange, never an all-gather where tiles align") {
  // Forward max and sum pooling of an image split over its rows, on 1..8
  // devices, against the same pooling unsplit. Where each device's rows are
  // the stride times its result rows (2x2/2 and 3x3/2 of 32 rows on 2, 4
  // and 8 devices), the taps are local slices plus, for 3x3, one row from
  // the next device by a collective permute; elsewhere the window is
  // gathered, and the values are the same.
  const auto all = ts::devices();
  struct Pool {
    const char* name;
    std::int64_t k, s;
  };
  for (const Pool& pool : {Pool{"2x2/2", 2, 2}, Pool{"3x3/2", 3, 2}, Pool{"3x3/1", 3, 1}, Pool{"4x4/4", 4, 4}}) {
    for (std::int64_t rows : {32, 30, 27}) {
      const ts::Array x = ts::sin(ts::arange(0.0f, float(2 * rows * 12 * 3)).reshape({2, rows, 12, 3}) * 0.37f);
      for (const char* op : {"max", "add"}) {
        auto f = ts::jit([&](ts::Array a) {
          return lax::reduce_window(a, std::string(op) == "max" ? -INFINITY : 0.0, op, {1, pool.k, pool.k, 1},
                                    {1, pool.s, pool.s, 1}, lax::Padding{"VALID"});
        });
        const std::vector<float> want = f(x).to_vector<float>();
        for (int n = 1; n <= 8; ++n) {
          CAPTURE(std::string(pool.name));
          CAPTURE(rows);
          CAPTURE(std::string(op));
          CAPTURE(n);
          ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
          const ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, ts::P(ts::None, "x")));
          const std::vector<float> got = f(xs).to_vector<float>();
          REQUIRE(got.size() == want.size());
          for (std::size_t i = 0; i < got.size(); ++i) {
            CAPTURE(i);
            if (std::string(op) == "max") CHECK(got[i] == want[i]);
            else CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
          }
          const bool aligned = rows == 32 && (n == 2 || n == 4 || n == 8) && (pool.s == 1 || 32 / n >= pool.s);
          if (aligned && pool.s > 1 && !(pool.s == 4 && n == 8)) {
            const std::string text = f.lower(xs).compile().as_text();
            CAPTURE(text);
            CHECK(text.find("all-gather") == std::string::npos);
            CHECK((text.find("collective-permute") != std::string::npos) == (pool.k > pool.s));
          }
        }
      }
    }
  }
}
