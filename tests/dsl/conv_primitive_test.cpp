// The convolution primitive (issue 42): compiled programs (oneDNN for
// float32, tessel's loops otherwise) against the reference interpreter;
// its sharding rules (batch and output features split with no
// communication, input features split into partial sums); its batching
// rule against a loop of convolutions; complex and 16-bit operands;
// float32 gradients through oneDNN against float64 ones.
#include <doctest/doctest.h>
#include <tessel/tessel.hpp>

#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
namespace lax = tessel::lax;
using ts::Array;
using ts::P;

namespace {

Array randn(std::mt19937& rng, const ts::Shape& s, ts::DType t = ts::float32) {
  std::normal_distribution<double> u(0, 1);
  std::vector<double> v(std::size_t(ts::numel(s)));
  for (auto& e : v) e = u(rng);
  return ts::array(v, s).astype(t);
}

double max_abs_diff(const Array& a, const Array& b) {
  const auto x = a.astype(ts::float64).to_vector<double>(), y = b.astype(ts::float64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

struct Config {
  const char* name;
  ts::Shape x, w;
  std::vector<std::int64_t> strides;
  lax::Padding padding;
  lax::ConvOptions options;
  ts::DType dtype;
  const char* runs;  // what the compiled text names
};

// x and r with their rows (dim 1) split over the first n devices, w replicated.
std::tuple<Array, Array, Array> split_rows(const Array& x, const Array& r, const Array& w, int n) {
  const auto all = ts::devices();
  ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
  return {ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x"))),
          ts::device_put(r, ts::NamedSharding(mesh, P(ts::None, "x"))), ts::device_put(w, ts::NamedSharding(mesh, P()))};
}

// c against the interpreter (eager and under jit); returns its compiled text.
std::string check_config(std::mt19937& rng, const Config& c) {
  Array x = ts::testing::random_array(rng, c.x, c.dtype), w = ts::testing::random_array(rng, c.w, c.dtype);
  auto f = [&](const std::vector<Array>& a) { return lax::conv_general_dilated(a[0], a[1], c.strides, c.padding, c.options); };
  ts::testing::check(f, {x, w});
  auto j = ts::jit([&](const Array& a, const Array& b) { return f({a, b}); });
  return j.lower(x, w).compile().as_text();
}

}  // namespace

TEST_CASE("the convolution primitive: oneDNN for float32, tessel's loops otherwise, equal to the interpreter") {
  std::mt19937 rng(11);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  const std::vector<Config> configs{
      {"NHWC 3x3 SAME", {4, 9, 8, 5}, {3, 3, 5, 6}, {1, 1}, "SAME", {.dimension_numbers = nhwc}, ts::float32, "oneDNN"},
      {"NCHW strided, dilated kernel", {3, 4, 11, 10}, {5, 4, 3, 2}, {2, 3}, "VALID", {.rhs_dilation = {2, 1}}, ts::float32,
       "oneDNN"},
      {"input dilation (an input gradient's form)", {2, 3, 5, 6}, {4, 3, 2, 3}, {1, 1}, {{1, 2}, {0, 1}},
       {.lhs_dilation = {2, 3}}, ts::float32, "backward-data"},
      {"input dilation and strides", {2, 3, 5, 6}, {4, 3, 2, 3}, {2, 1}, {{1, 2}, {0, 1}}, {.lhs_dilation = {2, 3}},
       ts::float32, "input dilated first"},
      {"a kernel larger than the result (a kernel gradient's form)", {3, 4, 9, 8}, {5, 4, 7, 7}, {1, 1}, {{1, 1}, {0, 1}},
       {.rhs_dilation = {1, 1}}, ts::float32, "backward-weights"},
      {"the same with batch groups", {4, 3, 9, 8}, {6, 3, 7, 6}, {1, 1}, {{1, 1}, {0, 1}}, {.batch_group_count = 2},
       ts::float32, "backward-weights"},
      {"negative padding", {2, 3, 9}, {4, 3, 2}, {1}, {{-2, 1}}, {}, ts::float32, "input dilated first"},
      {"feature groups", {2, 9, 7, 6}, {5, 5, 2, 6}, {1, 2}, "SAME", {.dimension_numbers = nhwc, .feature_group_count = 3},
       ts::float32, "oneDNN"},
      {"3-D", {2, 6, 5, 4, 3}, {4, 6, 2, 2, 2}, {1, 2, 1}, "SAME", {}, ts::float32, "oneDNN"},
      {"batch groups", {4, 3, 6, 5}, {6, 3, 2, 2}, {1, 1}, "VALID", {.batch_group_count = 2}, ts::float32, "oneDNN"},
      {"batch groups, int32", {4, 3, 6}, {6, 3, 2}, {2}, "SAME", {.batch_group_count = 2}, ts::int32, "tessel loops"},
      {"float64", {2, 3, 7, 6}, {4, 3, 3, 3}, {2, 1}, "SAME", {}, ts::float64, "tessel loops"},
      {"int32", {2, 3, 7}, {4, 3, 3}, {1}, "SAME", {}, ts::int32, "tessel loops"},
      {"no spatial dims", {5, 3}, {4, 3}, {}, "VALID", {}, ts::float32, "tessel loops"},
  };
  for (const auto& c : configs) {
    const std::string name = c.name;
    CAPTURE(name);
    const std::string text = check_config(rng, c);
    CAPTURE(text);
    CHECK(text.find(c.runs) != std::string::npos);
  }
}

TEST_CASE("a batch of one image is cut into chunks of output rows, each padded only at the image's edges") {
  // Enough work to cut (2^22 flops); SAME, VALID, asymmetric and negative
  // pads, strides and dilations, an input dilation, layouts, 1-D to 3-D, and
  // rows that do not divide evenly; compared with the interpreter.
  std::mt19937 rng(23);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  const std::vector<std::string> nwc{"NWC", "WIO", "NWC"}, ndhwc{"NDHWC", "DHWIO", "NDHWC"};
  const std::vector<Config> configs{
      {"NHWC 3x3 SAME", {1, 33, 32, 16}, {3, 3, 16, 16}, {1, 1}, "SAME", {.dimension_numbers = nhwc}, ts::float32, ""},
      {"strided 5x5, VALID", {1, 45, 30, 16}, {5, 5, 16, 16}, {2, 1}, "VALID", {.dimension_numbers = nhwc}, ts::float32,
       ""},
      {"two images, asymmetric pads, dilated kernel", {2, 37, 24, 16}, {3, 3, 16, 16}, {1, 1}, {{4, 1}, {1, 1}},
       {.rhs_dilation = {3, 1}, .dimension_numbers = nhwc}, ts::float32, ""},
      // A chunk wholly in the pad would read no row: not cut.
      {"pads past the kernel's reach", {1, 20, 40, 16}, {3, 3, 16, 16}, {1, 1}, {{12, 12}, {1, 1}},
       {.dimension_numbers = nhwc}, ts::float32, "uncut"},
      {"pads within the kernel's reach", {1, 20, 40, 16}, {5, 3, 16, 16}, {1, 1}, {{4, 3}, {1, 1}},
       {.dimension_numbers = nhwc}, ts::float32, ""},
      {"negative pad (input prepared first)", {1, 40, 24, 16}, {3, 3, 16, 16}, {1, 1}, {{-2, 3}, {1, 1}},
       {.dimension_numbers = nhwc}, ts::float32, ", input dilated first"},
      {"input dilation and strides", {1, 41, 40, 16}, {3, 3, 16, 16}, {2, 1}, {{1, 2}, {1, 1}},
       {.lhs_dilation = {2, 1}, .dimension_numbers = nhwc}, ts::float32, ", input dilated first"},
      {"1-D", {1, 600, 32}, {5, 32, 32}, {1}, "SAME", {.dimension_numbers = nwc}, ts::float32, ""},
      {"3-D", {1, 17, 12, 12, 8}, {3, 3, 3, 8, 8}, {1, 1, 1}, "SAME", {.dimension_numbers = ndhwc}, ts::float32, ""},
      // NCHW: an image's rows are not outermost, a chunk would not be dense.
      {"NCHW", {1, 16, 33, 32}, {16, 16, 3, 3}, {1, 1}, "SAME", {}, ts::float32, "uncut"},
  };

  for (const auto& c : configs) {
    const std::string name = c.name;
    CAPTURE(name);
    const std::string text = check_config(rng, c);
    CAPTURE(text);
    if (std::string(c.runs) == "uncut") {
      CHECK(text.find(" rows") == std::string::npos);
    } else {
      CHECK(text.find(std::string(" (oneDNN ")) != std::string::npos);
      CHECK(text.find(c.runs) != std::string::npos);
      CHECK(text.find(" rows") != std::string::npos);
    }
  }
}

TEST_CASE("the gradients of one or two images are cut into chunks of rows too: backward-data and backward-weights") {
  // The input gradient of a strided convolution (oneDNN's backward-data) in
  // chunks of its result's rows, each reading the cotangent's rows that
  // reach it; the kernel gradient (backward-weights) in chunks of the
  // cotangent's rows, each a partial gradient, added in chunk order. Against
  // the interpreter; the thunks' texts name the chunks.
  std::mt19937 rng(29);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  const std::vector<std::string> nwc{"NWC", "WIO", "NWC"}, ndhwc{"NDHWC", "DHWIO", "NDHWC"};
  struct Grad {
    Config c;
    bool data_cut, weights_cut;  // whether each gradient runs in chunks of rows
  };
  const std::vector<Grad> grads{
      {{"3x3 SAME stride 2", {1, 64, 32, 16}, {3, 3, 16, 32}, {2, 2}, "SAME", {.dimension_numbers = nhwc}, ts::float32, ""},
       true, true},
      {{"3x3 SAME stride 1 (its input gradient a forward convolution)", {1, 36, 16, 16}, {3, 3, 16, 32}, {1, 1}, "SAME",
        {.dimension_numbers = nhwc}, ts::float32, ""},
       false, true},
      {{"5x5 VALID stride 2 with a dilated kernel", {1, 70, 12, 16}, {5, 5, 16, 32}, {2, 1}, "VALID",
        {.rhs_dilation = {2, 1}, .dimension_numbers = nhwc}, ts::float32, ""},
       true, true},
      {{"two images, stride 3, asymmetric pads", {2, 61, 10, 16}, {4, 3, 16, 24}, {3, 1}, {{2, 1}, {1, 1}},
        {.dimension_numbers = nhwc}, ts::float32, ""},
       true, false},
      {{"1x1 stride 2: result rows no cotangent row reaches", {1, 64, 16, 32}, {1, 1, 32, 128}, {2, 2}, "VALID",
        {.dimension_numbers = nhwc}, ts::float32, ""},
       true, false},
      {{"1-D stride 2", {1, 1000, 32}, {5, 32, 32}, {2}, "SAME", {.dimension_numbers = nwc}, ts::float32, ""}, true, true},
      {{"3-D", {1, 30, 8, 8, 8}, {3, 3, 3, 8, 8}, {1, 1, 1}, "SAME", {.dimension_numbers = ndhwc}, ts::float32, ""},
       false, true},
  };
  for (const auto& [c, data_cut, weights_cut] : grads) {
    const std::string name = c.name;
    CAPTURE(name);
    Array x = ts::testing::random_array(rng, c.x, c.dtype), w = ts::testing::random_array(rng, c.w, c.dtype);
    auto conv = [&](const Array& a, const Array& b) { return lax::conv_general_dilated(a, b, c.strides, c.padding, c.options); };
    const Array g = ts::testing::random_array(rng, conv(x, w).shape(), c.dtype);
    auto dx = [&](const std::vector<Array>& a) { return std::get<0>(ts::vjp(conv, a[0], a[1]).second(a[2])); };
    auto dw = [&](const std::vector<Array>& a) { return std::get<1>(ts::vjp(conv, a[0], a[1]).second(a[2])); };
    ts::testing::check(dx, {x, w, g}, false);
    ts::testing::check(dw, {x, w, g}, false);
    const std::string tx = ts::jit([&](const Array& a, const Array& b, const Array& q) { return dx({a, b, q}); }).lower(x, w, g).compile().as_text();
    const std::string tw = ts::jit([&](const Array& a, const Array& b, const Array& q) { return dw({a, b, q}); }).lower(x, w, g).compile().as_text();
    CAPTURE(tx);
    CAPTURE(tw);
    if (data_cut) CHECK(tx.find("backward-data") != std::string::npos);
    CHECK((tx.find(" rows") != std::string::npos) == (data_cut || c.strides[0] == 1));
    CHECK(tw.find("backward-weights") != std::string::npos);
    CHECK((tw.find(" rows") != std::string::npos) == weights_cut);
  }
}

TEST_CASE("conv sharding: batch and output features split with no communication, input features as partial sums") {
  std::mt19937 rng(12);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  auto conv = ts::jit([&](const Array& a, const Array& b) {
    return lax::conv_general_dilated(a, b, {1, 1}, "SAME", {.dimension_numbers = nhwc});
  });
  const Array x = randn(rng, {6, 7, 5, 8}), w = randn(rng, {3, 3, 8, 6});
  const Array want = conv(x, w);
  for (int n : {2, 3, 4, 8}) {
    CAPTURE(n);
    const auto all = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
    // The batch split (uneven for 4 and 8).
    {
      const Array xs = ts::device_put(x, ts::NamedSharding(mesh, P("x"))), wr = ts::device_put(w, ts::NamedSharding(mesh, P()));
      const Array y = conv(xs, wr);
      CHECK(max_abs_diff(y, want) < 1e-5);
      if (n > 6) continue;  // more devices than images or features: propagation replicates
      CHECK(y.sharding().as_named().spec() == P("x"));
      const std::string text = conv.lower(xs, wr).compile().as_text();
      CHECK(text.find("all-gather") == std::string::npos);
      CHECK(text.find("all-reduce") == std::string::npos);
    }
    // The kernel's output features split: the result's features split alike.
    {
      const Array xr = ts::device_put(x, ts::NamedSharding(mesh, P()));
      const Array ws = ts::device_put(w, ts::NamedSharding(mesh, P(ts::None, ts::None, ts::None, "x")));
      const Array y = conv(xr, ws);
      CHECK(max_abs_diff(y, want) < 1e-5);
      CHECK(y.sharding().as_named().spec() == P(ts::None, ts::None, ts::None, "x"));
      const std::string text = conv.lower(xr, ws).compile().as_text();
      CHECK(text.find("all-gather") == std::string::npos);
      CHECK(text.find("all-reduce") == std::string::npos);
    }
    // The input features split (the input's C and the kernel's I): partial sums, all-reduced.
    if (8 % n == 0) {
      const Array xs = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, ts::None, ts::None, "x")));
      const Array ws = ts::device_put(w, ts::NamedSharding(mesh, P(ts::None, ts::None, "x")));
      const Array y = conv(xs, ws);
      CHECK(max_abs_diff(y, want) < 1e-4);
      const std::string text = conv.lower(xs, ws).compile().as_text();
      CHECK(text.find("all-gather") == std::string::npos);
      CHECK(text.find("all-reduce") != std::string::npos);
    }
  }
}

TEST_CASE("conv under vmap: the input, the kernel or both batched equal a loop of convolutions") {
  std::mt19937 rng(13);
  const Array xs = randn(rng, {3, 2, 4, 6, 5}), ws = randn(rng, {3, 6, 4, 3, 2});
  auto one = [](const Array& x, const Array& w) { return lax::conv(x, w, {1, 2}, "SAME"); };
  auto grouped = [](const Array& x, const Array& w) {
    return lax::conv_general_dilated(x, w, {1, 1}, "VALID", {.feature_group_count = 2});
  };
  const Array wg = randn(rng, {3, 6, 2, 3, 2});
  for (int kind = 0; kind < 4; ++kind) {
    CAPTURE(kind);
    Array got;
    std::vector<Array> want;
    for (std::int64_t b = 0; b < 3; ++b) {
      if (kind == 0) want.push_back(one(xs[b], ws[0]));
      if (kind == 1) want.push_back(one(xs[0], ws[b]));
      if (kind == 2) want.push_back(one(xs[b], ws[b]));
      if (kind == 3) want.push_back(grouped(xs[b], wg[b]));
    }
    if (kind == 0) got = ts::vmap([&](Array x) { return one(x, ws[0]); })(xs);
    if (kind == 1) got = ts::vmap([&](Array w) { return one(xs[0], w); })(ws);
    if (kind == 2) got = ts::vmap(one)(xs, ws);
    if (kind == 3) got = ts::vmap(grouped)(xs, wg);
    CHECK(max_abs_diff(got, ts::stack(want)) < 1e-5);
  }
}

TEST_CASE("complex and 16-bit convolutions: four real ones, and float32 rounded once") {
  std::mt19937 rng(14);
  const Array xr = randn(rng, {2, 3, 8}), xi = randn(rng, {2, 3, 8}), wr = randn(rng, {4, 3, 3}), wi = randn(rng, {4, 3, 3});
  auto cv = [](const Array& a, const Array& b) { return lax::conv(a, b, {1}, "SAME"); };
  const Array z = cv(ts::complex(xr, xi), ts::complex(wr, wi));
  CHECK(z.dtype() == ts::complex64);
  CHECK(max_abs_diff(ts::real(z), cv(xr, wr) - cv(xi, wi)) < 1e-5);
  CHECK(max_abs_diff(ts::imag(z), cv(xr, wi) + cv(xi, wr)) < 1e-5);
  ts::testing::check([&](const std::vector<Array>& a) { return cv(a[0], a[1]); },
                     {ts::complex(xr, xi).astype(ts::complex128), ts::complex(wr, wi).astype(ts::complex128)});
  for (ts::DType narrow : {ts::bfloat16, ts::float16}) {
    const Array xb = xr.astype(narrow), wb = wr.astype(narrow);
    const Array y = cv(xb, wb);
    CHECK(y.dtype() == narrow);
    CHECK(max_abs_diff(y, cv(xb.astype(ts::float32), wb.astype(ts::float32)).astype(narrow)) == 0);
    const Array yf = lax::conv(xb, wb, {1}, "SAME", ts::float32);
    CHECK(yf.dtype() == ts::float32);
    CHECK(max_abs_diff(yf, cv(xb.astype(ts::float32), wb.astype(ts::float32))) < 1e-5);
  }
}

TEST_CASE("float32 conv gradients through oneDNN equal float64 ones: strided, padded, grouped, NHWC") {
  std::mt19937 rng(15);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  for (int groups : {1, 2}) {
    CAPTURE(groups);
    const Array x = randn(rng, {4, 9, 8, 4}, ts::float64), w = randn(rng, {3, 3, 4 / groups, 6}, ts::float64);
    const Array r = randn(rng, {4, 5, 4, 6}, ts::float64);
    auto loss = [&](Array a, Array b) {
      return ts::sum(lax::conv_general_dilated(a, b, {2, 2}, "SAME",
                                               {.dimension_numbers = nhwc, .feature_group_count = groups}) *
                     r.astype(a.dtype()));
    };
    auto gx = ts::jit(ts::grad(loss, 0)), gw = ts::jit(ts::grad(loss, 1));
    const Array x32 = x.astype(ts::float32), w32 = w.astype(ts::float32);
    CHECK(max_abs_diff(gx(x32, w32), gx(x, w)) < 1e-4);
    CHECK(max_abs_diff(gw(x32, w32), gw(x, w)) < 1e-3);
    // Both gradients run as oneDNN's backward primitives.
    CHECK(gx.lower(x32, w32).compile().as_text().find("oneDNN backward-data") != std::string::npos);
    CHECK(gw.lower(x32, w32).compile().as_text().find("oneDNN backward-weights") != std::string::npos);
  }
}

TEST_CASE("conv with the images split spatially: border rows by collective permute, never an all-gather") {
  std::mt19937 rng(16);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  struct Spatial {
    std::int64_t H;
    std::vector<std::int64_t> strides;
    std::int64_t K;
    const char* padding;
  };
  for (const auto& c : std::vector<Spatial>{{16, {1, 1}, 3, "SAME"},
                                            {13, {1, 1}, 3, "SAME"},
                                            {16, {2, 2}, 3, "SAME"},
                                            {16, {2, 2}, 1, "VALID"},
                                            {12, {1, 1}, 5, "SAME"},
                                            // Tiles not in step with the result's: rows from other tiles.
                                            {13, {2, 2}, 3, "SAME"},
                                            {15, {2, 2}, 3, "VALID"},
                                            {10, {1, 1}, 3, "VALID"}}) {
    CAPTURE(c.H);
    CAPTURE(c.K);
    CAPTURE(c.strides[0]);
    const Array x = randn(rng, {2, c.H, 10, 3}), w = randn(rng, {c.K, c.K, 3, 4});
    auto conv = ts::jit([&](const Array& a, const Array& b) {
      return lax::conv_general_dilated(a, b, c.strides, c.padding, {.dimension_numbers = nhwc});
    });
    const Array want = conv(x, w);
    for (int n : {2, 3, 4, 6, 7, 8}) {
      CAPTURE(n);
      const auto all = ts::devices();
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
      const Array xs = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x")));
      const Array wr = ts::device_put(w, ts::NamedSharding(mesh, P()));
      const Array y = conv(xs, wr);
      CHECK(max_abs_diff(y, want) < 1e-5);
      CHECK(y.sharding().as_named().spec() == P(ts::None, "x"));
      const std::string text = conv.lower(xs, wr).compile().as_text();
      CHECK(text.find("all-gather") == std::string::npos);
      if (c.K > 1) CHECK(text.find("collective-permute") != std::string::npos);
      // A one-row window at a stride reads every stride-th row: only those
      // are taken, and the device convolves them at stride 1 along the rows.
      if (c.K == 1 && c.strides[0] > 1) CHECK(text.find("window={stride=1x" + std::to_string(c.strides[1])) != std::string::npos);
    }
  }
  // Both spatial dims split on a 2 x 4 mesh: the corners come with the second exchange.
  const Array x = randn(rng, {2, 12, 10, 3}), w = randn(rng, {3, 3, 3, 4});
  auto conv = ts::jit([&](const Array& a, const Array& b) {
    return lax::conv_general_dilated(a, b, {1, 1}, "SAME", {.dimension_numbers = nhwc});
  });
  const Array want = conv(x, w);
  ts::Mesh mesh = ts::make_mesh({2, 4}, {"x", "y"});
  const Array xs = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x", "y")));
  const Array wr = ts::device_put(w, ts::NamedSharding(mesh, P()));
  CHECK(max_abs_diff(conv(xs, wr), want) < 1e-5);
  CHECK(conv.lower(xs, wr).compile().as_text().find("all-gather") == std::string::npos);
  // Gradients with the images split spatially: the same values.
  const Array r = randn(rng, {2, 12, 10, 4});
  auto loss = [&](Array a, Array b) {
    return ts::sum(lax::conv_general_dilated(a, b, {1, 1}, "SAME", {.dimension_numbers = nhwc}) * r);
  };
  auto gx = ts::jit(ts::grad(loss, 0)), gw = ts::jit(ts::grad(loss, 1));
  CHECK(max_abs_diff(gx(xs, wr), gx(x, w)) < 1e-4);
  CHECK(max_abs_diff(gw(xs, wr), gw(x, w)) < 1e-3);
}

TEST_CASE("a convolution of rows split over devices reads the tile and its border rows as parts: no concatenation made") {
  // conv_reads_parts (codegen/conv.hpp): each block of images copies its
  // rows of the parts into its thread's buffer; the values are the unsplit
  // ones, in float32 and bfloat16, for blocks of images and for one image
  // cut into chunks of rows, even and uneven splits.
  std::mt19937 rng(18);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  struct Split {
    std::int64_t N, H, K;
    int devices;
    ts::DType dtype;
  };
  for (const auto& c : std::vector<Split>{{32, 16, 3, 8, ts::float32},
                                          {6, 13, 3, 3, ts::float32},
                                          {1, 56, 3, 2, ts::float32},
                                          {2, 40, 5, 2, ts::float32},
                                          {4, 14, 3, 4, ts::bfloat16},
                                          {1, 48, 3, 2, ts::bfloat16}}) {
    CAPTURE(c.N);
    CAPTURE(c.H);
    CAPTURE(c.devices);
    CAPTURE(ts::dtype_name(c.dtype));
    const Array x = randn(rng, {c.N, c.H, 12, 8}, c.dtype), w = randn(rng, {c.K, c.K, 8, 16}, c.dtype);
    auto conv = ts::jit([&](const Array& a, const Array& b) {
      return lax::conv_general_dilated(a, b, {1, 1}, "SAME", {.dimension_numbers = nhwc});
    });
    const Array want = conv(x, w);
    const auto all = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + c.devices), {c.devices}, {"x"});
    const Array xs = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x")));
    const Array wr = ts::device_put(w, ts::NamedSharding(mesh, P()));
    const double tol = c.dtype == ts::bfloat16 ? 0.5 : 1e-4;  // bfloat16: an ulp of the largest sums (about 40); a border row wrong moves them by units
    CHECK(max_abs_diff(conv(xs, wr), want) < tol);
    const std::string text = conv.lower(xs, wr).compile().as_text();
    CHECK(text.find("parts by block") != std::string::npos);
    CHECK(text.find("root=concatenate") == std::string::npos);
    CHECK(text.find("all-gather") == std::string::npos);
    // Forward and both gradients: the forward and the kernel's gradient
    // (backward-weights) read the same parts, the input's gradient the
    // cotangent's.
    const Array r = randn(rng, {c.N, c.H, 12, 16}, c.dtype);
    auto fwd_bwd = ts::jit([&](Array a, Array b, Array t) {
      auto [y, pullback] = ts::vjp([&](Array p, Array q) {
        return lax::conv_general_dilated(p, q, {1, 1}, "SAME", {.dimension_numbers = nhwc});
      }, a, b);
      auto [ga, gb] = pullback(t);
      return std::make_tuple(y, ga, gb);
    });
    const auto [y1, gx1, gw1] = fwd_bwd(x, w, r);
    const Array rs = ts::device_put(r, ts::NamedSharding(mesh, P(ts::None, "x")));
    const auto [y8, gx8, gw8] = fwd_bwd(xs, wr, rs);
    CHECK(max_abs_diff(y8, y1) < tol);
    CHECK(max_abs_diff(gx8, gx1) < tol);
    // The kernel gradient sums N * H * 12 products: bfloat16 sums reach about 100 (an ulp of 0.5).
    CHECK(max_abs_diff(gw8, gw1) < (c.dtype == ts::bfloat16 ? 1.0 : 1e-5 * double(c.N * c.H * 12)));
    const std::string grads = fwd_bwd.lower(xs, wr, rs).compile().as_text();
    CHECK(grads.find("backward-weights") != std::string::npos);
    CHECK(grads.find("root=concatenate") == std::string::npos);
    CHECK(grads.find("all-gather") == std::string::npos);
  }
  // (Both spatial dims split on a 2 x 4 mesh: the test above.) No spatial
  // dims: a concatenation of features is no image's rows, read whole; the
  // product of the features.
  const Array a = randn(rng, {4, 3}), c = randn(rng, {4, 5}), w = randn(rng, {6, 8});
  auto flat = ts::jit([&](const Array& p, const Array& q, const Array& k) {
    return lax::conv_general_dilated(ts::concatenate({p, q}, 1), k, {}, "VALID");
  });
  CHECK(max_abs_diff(flat(a, c, w), ts::matmul(ts::concatenate({a, c}, 1), w.T())) < 1e-5);
}

TEST_CASE("conv gradients with the images split spatially: kernel gradients as partial sums, all-reduced; input gradients of strided convolutions by rows; no all-gather") {
  std::mt19937 rng(17);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  for (std::int64_t H : {16, 13}) {
    for (std::int64_t stride : {1, 2}) {
      CAPTURE(H);
      CAPTURE(stride);
      const Array x = randn(rng, {2, H, 10, 3}), w = randn(rng, {3, 3, 3, 4});
      auto f = [&](const Array& a, const Array& b) {
        return lax::conv_general_dilated(a, b, {stride, stride}, "SAME", {.dimension_numbers = nhwc});
      };
      const Array r = randn(rng, f(x, w).shape());
      auto gw = ts::jit([&](const Array& a, const Array& b, const Array& c) {
        return std::get<1>(ts::vjp(f, a, b).second(c));
      });
      auto gx = ts::jit([&](const Array& a, const Array& b, const Array& c) {
        return std::get<0>(ts::vjp(f, a, b).second(c));
      });
      const Array want = gw(x, w, r), want_x = gx(x, w, r);
      for (int n : {2, 3, 4, 6, 8}) {
        CAPTURE(n);
        const auto [xs, rs, wr] = split_rows(x, r, w, n);
        CHECK(max_abs_diff(gw(xs, wr, rs), want) < 1e-4);
        const std::string text = gw.lower(xs, wr, rs).compile().as_text();
        // Each device sums over its own rows of the cotangent, reading the input rows they
        // meet (its neighbours' border rows, or rows of other tiles where the tiles are not in
        // step: 16 rows at stride 2 on 6 devices, tiles of 3 rows against kernel tiles of
        // 2 x 2; 13 rows at stride 2); the partial sums all-reduced, nothing gathered.
        CHECK(text.find("all-reduce") != std::string::npos);
        CHECK(text.find("all-gather") == std::string::npos);
        // The input gradient (at stride 2 a convolution of the cotangent dilated by 2): each
        // device makes its own rows from the cotangent rows that reach them (those before a
        // row whose window starts on a cotangent row made too, then cut off).
        const Array dx = gx(xs, wr, rs);
        CHECK(max_abs_diff(dx, want_x) < 1e-4);
        CHECK(dx.sharding().as_named().spec() == P(ts::None, "x"));
        const std::string tx = gx.lower(xs, wr, rs).compile().as_text();
        CAPTURE(tx);
        CHECK(tx.find("all-gather") == std::string::npos);
      }
    }
  }
  // A 1x1 stride-2 layer (16 and 13 rows): its kernel gradient reads every
  // other row of the input, its sum runs over them undilated; the input
  // gradient's values too.
  for (std::int64_t H : {16, 13}) {
    const Array x = randn(rng, {2, H, 6, 3}), w = randn(rng, {1, 1, 3, 4});
    auto f = [&](const Array& a, const Array& b) {
      return lax::conv_general_dilated(a, b, {2, 2}, "VALID", {.dimension_numbers = nhwc});
    };
    const Array r = randn(rng, f(x, w).shape());
    auto g = ts::jit([&](const Array& a, const Array& b, const Array& c) { return ts::vjp(f, a, b).second(c); });
    const auto [want_x, want_w] = g(x, w, r);
    for (int n : {2, 3, 4, 8}) {
      CAPTURE(H);
      CAPTURE(n);
      const auto [xs, rs, wr] = split_rows(x, r, w, n);
      const auto [dx, dw] = g(xs, wr, rs);
      CHECK(max_abs_diff(dx, want_x) < 1e-4);
      CHECK(max_abs_diff(dw, want_w) < 1e-4);
      const std::string text = g.lower(xs, wr, rs).compile().as_text();
      CHECK(text.find("all-gather") == std::string::npos);
      CHECK(text.find("rhs_dilate=2x") == std::string::npos);  // the sum undilated along the split rows
    }
  }
  // Tiny images: a cotangent with no more rows than the kernel (4 rows and a
  // 4 x 4 kernel, 3 rows and 3 x 3). The transpose marks the kernel's
  // gradient (kernel_gradient), which is split as a sum over the
  // cotangent's rows at any size: before, such a cotangent was gathered.
  for (const auto& [H, K, n] : std::vector<std::tuple<std::int64_t, std::int64_t, int>>{{4, 4, 2}, {3, 3, 3}, {6, 4, 3}}) {
    CAPTURE(H);
    CAPTURE(K);
    CAPTURE(n);
    const Array x = randn(rng, {2, H, 5, 3}), w = randn(rng, {K, K, 3, 4});
    auto f = [&](const Array& a, const Array& b) {
      return lax::conv_general_dilated(a, b, {1, 1}, "SAME", {.dimension_numbers = nhwc});
    };
    const Array r = randn(rng, f(x, w).shape());
    auto gw = ts::jit([&](const Array& a, const Array& b, const Array& c) {
      return std::get<1>(ts::vjp(f, a, b).second(c));
    });
    const Array want = gw(x, w, r);
    const auto [xs, rs, wr] = split_rows(x, r, w, n);
    CHECK(max_abs_diff(gw(xs, wr, rs), want) < 1e-4);
    const std::string text = gw.lower(xs, wr, rs).compile().as_text();
    CHECK(text.find("kernel_gradient") != std::string::npos);
    CHECK(text.find("all-reduce") != std::string::npos);
    CHECK(text.find("all-gather") == std::string::npos);
  }
}

namespace {
// oneDNN's bfloat16 kernels named in a compiled text: its AVX512_BF16 ones
// (`jit_bf16:avx512_core_bf16`) and, where the CPU has AMX (Sapphire and
// Emerald Rapids), its tile ones (`...:avx512_core_amx`), which it prefers.
std::size_t native_bf16_convs(const std::string& text) {
  std::size_t n = 0;
  for (const char* isa : {"avx512_core_bf16", "avx512_core_amx"})
    for (std::size_t at = text.find(isa); at != std::string::npos; at = text.find(isa, at + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("bfloat16 convolutions run on oneDNN's bfloat16 kernels where the CPU has AVX512_BF16: within one rounding") {
  // ts::lax convolves bfloat16 as the float32 convolution of its converts;
  // codegen gives oneDNN the bfloat16 operands instead (each product is exact
  // in float32 either way; the sums differ in order only). A bfloat16 result
  // is then within one bfloat16 step of the exact sum rounded once, and a
  // float32 one (preferred_element_type) within float32 accumulation error.
  std::mt19937 rng(16);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  const Array x = randn(rng, {4, 20, 20, 32}).astype(ts::bfloat16), w = randn(rng, {3, 3, 32, 48}).astype(ts::bfloat16);
  auto conv = [&](std::optional<ts::DType> pet) {
    return ts::jit([&, pet](const Array& a, const Array& b) {
      return lax::conv_general_dilated(a, b, {1, 1}, "SAME", {.dimension_numbers = nhwc, .preferred_element_type = pet});
    });
  };
  const Array exact = lax::conv_general_dilated(x.astype(ts::float64), w.astype(ts::float64), {1, 1}, "SAME",
                                                {.dimension_numbers = nhwc});
  const auto ex = exact.to_vector<double>();
  for (bool as_f32 : {false, true}) {
    CAPTURE(as_f32);
    auto f = conv(as_f32 ? std::optional<ts::DType>(ts::float32) : std::nullopt);
    const Array y = f(x, w);
    CHECK(y.dtype() == (as_f32 ? ts::float32 : ts::bfloat16));
    const auto got = y.astype(ts::float64).to_vector<double>();
    // Within the result's rounding (a bfloat16 step at the exact value) plus float32
    // accumulation error, relative to the largest sum.
    double scale = 0, worst = 0;
    for (double e : ex) scale = std::max(scale, std::fabs(e));
    for (std::size_t i = 0; i < ex.size(); ++i) {
      const double step = as_f32 ? 0.0 : std::ldexp(1.0, std::ilogb(std::max(std::fabs(ex[i]), 1e-30)) - 7);
      worst = std::max(worst, (std::fabs(got[i] - ex[i]) - step) / scale);
    }
    CHECK(worst <= 1e-5);
    const std::string text = f.lower(x, w).compile().as_text();
    std::ifstream cpu("/proc/cpuinfo");
    const std::string info((std::istreambuf_iterator<char>(cpu)), std::istreambuf_iterator<char>());
    CAPTURE(text);
    if (info.find(" avx512_bf16") != std::string::npos) CHECK(native_bf16_convs(text) >= 1);
    else CHECK((text.find("bf16") == std::string::npos && text.find("amx") == std::string::npos));
  }
}

TEST_CASE("bfloat16 convolution gradients on oneDNN's bfloat16 backward kernels: within one rounding of the exact ones") {
  // The gradients of a bfloat16 convolution are convolutions of bfloat16
  // converts too (the input's with the kernel reversed, in bfloat16 here;
  // strided: oneDNN's backward-data; the kernel's: backward-weights).
  std::mt19937 rng(17);
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  std::ifstream cpu("/proc/cpuinfo");
  const bool native = std::string((std::istreambuf_iterator<char>(cpu)), std::istreambuf_iterator<char>()).find(" avx512_bf16") !=
                      std::string::npos;
  for (std::int64_t stride : {1, 2}) {
    CAPTURE(stride);
    const Array x = randn(rng, {4, 16, 16, 32}).astype(ts::bfloat16), w = randn(rng, {3, 3, 32, 40}).astype(ts::bfloat16);
    const std::int64_t o = (16 + stride - 1) / stride;
    const Array r = randn(rng, {4, o, o, 40}).astype(ts::bfloat16);  // the cotangent, exact in bfloat16
    auto loss = [&](const Array& a, const Array& b) {
      const Array y = lax::conv_general_dilated(a, b, {stride, stride}, "SAME", {.dimension_numbers = nhwc});
      return ts::sum(y.astype(ts::float32) * r.astype(a.dtype() == ts::float64 ? ts::float64 : ts::float32));
    };
    auto grads = [&](const Array& a, const Array& b) {
      auto [y, pullback] = ts::vjp(loss, a, b);
      auto [ga, gb] = pullback(ts::ones({}, y.dtype()));
      return std::vector<Array>{ga, gb};
    };
    auto g = ts::jit(grads);
    const auto got = g(x, w);
    const auto exact = grads(x.astype(ts::float64), w.astype(ts::float64));
    for (int k = 0; k < 2; ++k) {
      CAPTURE(k);
      CHECK(got[size_t(k)].dtype() == ts::bfloat16);
      const auto a = got[size_t(k)].astype(ts::float64).to_vector<double>(), ex = exact[size_t(k)].to_vector<double>();
      double scale = 0, worst = 0;
      for (double e : ex) scale = std::max(scale, std::fabs(e));
      for (std::size_t i = 0; i < ex.size(); ++i) {
        const double step = std::ldexp(1.0, std::ilogb(std::max(std::fabs(ex[i]), 1e-30)) - 7);
        worst = std::max(worst, (std::fabs(a[i] - ex[i]) - step) / scale);
      }
      CHECK(worst <= 1e-5);
    }
    const std::string text = g.lower(x, w).compile().as_text();
    CAPTURE(text);
    CHECK(native_bf16_convs(text) == (native ? 2u : 0u));  // the input's gradient and the kernel's (the forward is dead)
    if (native && stride == 2) {  // strided: oneDNN's backward-data primitive, on a bfloat16 kernel
      const std::size_t at = text.find("backward-data ");
      REQUIRE(at != std::string::npos);
      CHECK(native_bf16_convs(text.substr(at, text.find(')', at) - at)) == 1);
    }
  }
}
