// The NumPy-named operations against closed-form values, eager, jitted and
// sharded over 1..8 devices (tests/common/op_check.hpp).
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "tests/common/op_check.hpp"

namespace ts = tessel;
using ts::testing::check_op;
using V = std::vector<double>;

namespace {
ts::Array iota2(std::int64_t r, std::int64_t c, float scale = 1.0f, float shift = 0.0f) {
  std::vector<float> v(r * c);
  for (std::int64_t i = 0; i < r * c; ++i) v[i] = float(i) * scale + shift;
  return ts::array(v, {r, c});
}
V vals(const ts::Array& a) { return a.to_vector<double>(); }
}  // namespace

TEST_CASE("elementwise ops and broadcasting") {
  auto x = iota2(7, 3, 0.5f, -5.0f);
  auto xv = vals(x);
  auto map = [&](auto f) {
    V out;
    for (double v : xv) out.push_back(f(v));
    return out;
  };
  check_op("sin", [](auto& v) { return ts::sin(v[0]); }, {x}, map([](double v) { return std::sin(float(v)); }), {7, 3}, 1e-6);
  check_op("tanh", [](auto& v) { return ts::tanh(v[0]); }, {x}, map([](double v) { return std::tanh(v); }), {7, 3}, 1e-6);
  check_op("exp", [](auto& v) { return ts::exp(v[0]); }, {x}, map([](double v) { return std::exp(v); }), {7, 3}, 1e-6);
  check_op("abs", [](auto& v) { return ts::abs(v[0]); }, {x}, map([](double v) { return std::fabs(v); }), {7, 3});
  check_op("square", [](auto& v) { return ts::square(v[0]); }, {x}, map([](double v) { return v * v; }), {7, 3});
  check_op("sign", [](auto& v) { return ts::sign(v[0]); }, {x}, map([](double v) { return double((v > 0) - (v < 0)); }),
           {7, 3});
  check_op("round half even", [](auto& v) { return ts::round(v[0]); }, {x}, map([](double v) { return std::nearbyint(v); }),
           {7, 3});
  check_op("clip", [](auto& v) { return ts::clip(v[0], -1.0, 2.0); }, {x},
           map([](double v) { return std::min(2.0, std::max(-1.0, v)); }), {7, 3});
  // (7,3) + (3,) broadcasts over rows; (7,1) over columns.
  auto row = ts::array(std::vector<float>{10, 20, 30});
  auto col = iota2(7, 1);
  V want;
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(xv[i * 3 + j] + 10 * (j + 1) + i);
  check_op("broadcast add", [](auto& v) { return v[0] + v[1] + v[2]; }, {x, row, col}, want, {7, 3});
  check_op("where", [](auto& v) { return ts::where(v[0] > 0.0, v[0], -1.0); }, {x},
           map([](double v) { return v > 0 ? v : -1.0; }), {7, 3});
  check_op("maximum scalar", [](auto& v) { return ts::maximum(v[0], 0.0); }, {x}, map([](double v) { return std::max(v, 0.0); }),
           {7, 3});
  check_op("pow int", [](auto& v) { return ts::pow(v[0], 3); }, {x}, map([](double v) { return v * v * v; }), {7, 3});
  check_op("reciprocal", [](auto& v) { return ts::reciprocal(v[0] + 100.0); }, {x},
           map([](double v) { return 1.0 / (v + 100); }), {7, 3}, 1e-6);
}

TEST_CASE("dtype promotion follows JAX: weak scalars, int + float, true division") {
  auto f = ts::ones({3});
  auto i = ts::arange(3);
  CHECK((2 * f).dtype() == ts::float32);
  CHECK_FALSE((2 * f).weak_type());
  CHECK((i + 1).dtype() == ts::int32);
  CHECK((i + 2.5).dtype() == ts::float32);
  CHECK((i + 2.5).weak_type());
  CHECK((i + f).dtype() == ts::float32);
  CHECK((i / 2).dtype() == ts::float32);
  CHECK((i / 2).to_vector<float>() == std::vector<float>{0, 0.5f, 1});
  CHECK((ts::array(std::vector<double>{1, 2}) * 2.0f).dtype() == ts::float64);
  CHECK((ts::array(std::vector<std::uint32_t>{1}) + ts::array(std::vector<int>{1})).dtype() == ts::int64);
  CHECK((i == 1).dtype() == ts::bool_);
  CHECK(ts::sum(i > 0).dtype() == ts::int32);
  CHECK(ts::sin(i).dtype() == ts::float32);
  CHECK(ts::mean(i).dtype() == ts::float32);
}

TEST_CASE("integer division and remainder follow numpy's signs") {
  auto a = ts::array(std::vector<int>{7, -7, 7, -7});
  auto b = ts::array(std::vector<int>{2, 2, -2, -2});
  CHECK(ts::floor_divide(a, b).to_vector<int>() == std::vector<int>{3, -4, -4, 3});
  CHECK(ts::remainder(a, b).to_vector<int>() == std::vector<int>{1, 1, -1, -1});
  auto af = ts::array(std::vector<float>{7, -7, 7, -7});
  auto bf = ts::array(std::vector<float>{2, 2, -2, -2});
  CHECK(ts::floor_divide(af, bf).to_vector<float>() == std::vector<float>{3, -4, -4, 3});
  CHECK(ts::remainder(af, bf).to_vector<float>() == std::vector<float>{1, 1, -1, -1});
}

TEST_CASE("reductions with axes and keepdims") {
  auto x = iota2(9, 4, 1.0f, -10.0f);
  auto xv = vals(x);
  V rows, cols(4, 0), maxc(4, -1e9);
  for (int i = 0; i < 9; ++i) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += xv[i * 4 + j], cols[j] += xv[i * 4 + j], maxc[j] = std::max(maxc[j], xv[i * 4 + j]);
    rows.push_back(s);
  }
  check_op("sum axis 1", [](auto& v) { return ts::sum(v[0], 1); }, {x}, rows, {9});
  check_op("sum axis 0 keepdims", [](auto& v) { return ts::sum(v[0], 0, true); }, {x}, cols, {1, 4});
  check_op("max axis 0", [](auto& v) { return ts::max(v[0], 0); }, {x}, maxc, {4});
  check_op("sum all", [](auto& v) { return ts::sum(v[0]); }, {x}, {std::accumulate(xv.begin(), xv.end(), 0.0)}, {});
  V means;
  for (double s : rows) means.push_back(s / 4);
  check_op("mean axis -1", [](auto& v) { return ts::mean(v[0], -1); }, {x}, means, {9});
  // var of each row of consecutive integers: (n^2 - 1) / 12 = 1.25 for n = 4.
  check_op("var rows", [](auto& v) { return ts::var(v[0], 1); }, {x}, V(9, 1.25), {9});
  check_op("std rows ddof 1", [](auto& v) { return ts::std(v[0], 1, 1); }, {x}, V(9, std::sqrt(5.0 / 3.0)), {9});
  V lse;
  for (int i = 0; i < 9; ++i) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += std::exp(xv[i * 4 + j]);
    lse.push_back(std::log(s));
  }
  check_op("logsumexp", [](auto& v) { return ts::logsumexp(v[0], 1); }, {x}, lse, {9});
  check_op("prod", [](auto& v) { return ts::prod(v[0] * 0.1 + 1.0, 1); }, {x},
           [&] {
             V p;
             for (int i = 0; i < 9; ++i) {
               double q = 1;
               for (int j = 0; j < 4; ++j) q *= xv[i * 4 + j] * 0.1 + 1;
               p.push_back(q);
             }
             return p;
           }(),
           {9}, 1e-5);
}

TEST_CASE("truth reductions: all, any, isclose, allclose (numpy's definitions)") {
  auto x = ts::array(std::vector<float>{1, 0, 2, 3, 4, 5, 0, 0, 0}, {3, 3});
  check_op("all axis 1", [](auto& v) { return ts::astype(ts::all(v[0], 1), ts::float32); }, {x}, V{0, 1, 0}, {3});
  check_op("any axis 1", [](auto& v) { return ts::astype(ts::any(v[0], 1), ts::float32); }, {x}, V{1, 1, 0}, {3});
  check_op("any axis 0 keepdims", [](auto& v) { return ts::astype(ts::any(v[0], 0, true), ts::float32); }, {x},
           V{1, 1, 1}, {1, 3});
  CHECK(ts::all(x).dtype() == ts::bool_);
  CHECK_FALSE(ts::all(x).item<bool>());
  CHECK(ts::any(x).item<bool>());
  CHECK(ts::all(ts::ones({0})).item<bool>());   // empty: all true, any false
  CHECK_FALSE(ts::any(ts::ones({0})).item<bool>());
  auto a = ts::array(std::vector<float>{1.0f, 100.0f, INFINITY, NAN, -INFINITY, 0.0f});
  auto b = ts::array(std::vector<float>{1.000005f, 100.002f, INFINITY, NAN, INFINITY, 1e-9f});
  // |a-b| <= 1e-8 + 1e-5 |b|: 5e-6 <= 1e-5 yes; 2e-3 <= 1e-3 no; equal infs yes; NaN no; opposite infs no.
  CHECK(ts::isclose(a, b).to_vector<bool>() == std::vector<bool>{true, false, true, false, false, true});
  CHECK_FALSE(ts::allclose(a, b).item<bool>());
  CHECK_FALSE(ts::allclose(a, a).item<bool>());  // NaN is never close, not even to itself
  auto s = ts::astype(ts::arange(10), ts::float32);
  CHECK(ts::allclose(s, s + 0.01f, 0.0, 0.02).item<bool>());
  CHECK_FALSE(ts::allclose(s, s + 0.03f, 0.0, 0.02).item<bool>());
  CHECK(ts::allclose(ts::arange(5), ts::arange(5)).item<bool>());  // integers are finite
  CHECK_FALSE(ts::allclose(ts::arange(5), ts::arange(5) + 1).item<bool>());
}

TEST_CASE("argmax and argmin: first of ties, NaN wins") {
  auto x = ts::array(std::vector<float>{1, 5, 5, 2, 0, 0, 9, 9, NAN, 3, NAN, 1}, {3, 4});
  CHECK(ts::argmax(x, 1).to_vector<int>() == std::vector<int>{1, 2, 0});
  CHECK(ts::argmin(x, 1).to_vector<int>() == std::vector<int>{0, 0, 0});
  CHECK(ts::argmax(x).item<int>() == 8);
  CHECK(ts::argmax(x, 0, true).shape() == ts::Shape{1, 4});
  auto y = iota2(5, 3);
  check_op("argmax axis 0", [](auto& v) { return ts::astype(ts::argmax(v[0], 0), ts::float32); }, {y}, V(3, 4), {3});
}

TEST_CASE("shape ops") {
  auto x = iota2(6, 4);
  auto xv = vals(x);
  check_op("reshape", [](auto& v) { return v[0].reshape({3, -1}); }, {x}, xv, {3, 8});
  V t;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 6; ++i) t.push_back(xv[i * 4 + j]);
  check_op("transpose", [](auto& v) { return v[0].T(); }, {x}, t, {4, 6});
  check_op("expand+squeeze", [](auto& v) { return ts::squeeze(ts::expand_dims(v[0], 1), 1); }, {x}, xv, {6, 4});
  check_op("broadcast_to", [](auto& v) { return ts::broadcast_to(v[0].index({0}), {2, 4}); }, {x}, {0, 1, 2, 3, 0, 1, 2, 3},
           {2, 4});
  V cat = xv;
  cat.insert(cat.end(), xv.begin(), xv.end());
  check_op("concatenate", [](auto& v) { return ts::concatenate({v[0], v[0]}, 0); }, {x}, cat, {12, 4});
  check_op("stack", [](auto& v) { return ts::stack({v[0], v[0]}, 0); }, {x}, cat, {2, 6, 4});
  auto parts = ts::split(x, 3, 0);
  REQUIRE(parts.size() == 3);
  CHECK(parts[1].to_vector<float>() == std::vector<float>{8, 9, 10, 11, 12, 13, 14, 15});
  auto uneven = ts::split(x, std::vector<std::int64_t>{1, 5}, 0);
  CHECK(uneven[1].shape() == ts::Shape{4, 4});
  V padded;
  for (int i = -1; i < 7; ++i)
    for (int j = 0; j < 5; ++j) padded.push_back(i < 0 || i >= 6 || j >= 4 ? -1.0 : xv[i * 4 + j]);
  check_op("pad", [](auto& v) { return ts::pad(v[0], {{1, 1}, {0, 1}}, -1.0); }, {x}, padded, {8, 5});
  V flipped;
  for (int i = 5; i >= 0; --i)
    for (int j = 0; j < 4; ++j) flipped.push_back(xv[i * 4 + j]);
  check_op("flip axis 0", [](auto& v) { return ts::flip(v[0], 0); }, {x}, flipped, {6, 4});
}

TEST_CASE("basic indexing: ints, slices with steps (negative too), newaxis, ellipsis") {
  auto x = iota2(6, 5);
  CHECK(x.index({2}).to_vector<float>() == std::vector<float>{10, 11, 12, 13, 14});
  CHECK(x.index({-1, -1}).item<float>() == 29);
  CHECK(x.index({ts::all, 1}).to_vector<float>() == std::vector<float>{1, 6, 11, 16, 21, 26});
  CHECK(x.index({ts::slice(1, 5, 2), ts::slice(std::nullopt, std::nullopt, -2)}).to_vector<float>() ==
        std::vector<float>{9, 7, 5, 19, 17, 15});
  CHECK(x.index({ts::slice(4, 0, -3)}).shape() == ts::Shape{2, 5});
  CHECK(x.index({ts::slice(4, 0, -3), 0}).to_vector<float>() == std::vector<float>{20, 5});
  CHECK(x.index({ts::ellipsis, 0}).to_vector<float>() == std::vector<float>{0, 5, 10, 15, 20, 25});
  CHECK(x.index({ts::newaxis, ts::slice(0, 1)}).shape() == ts::Shape{1, 1, 5});
  CHECK(x.index({ts::slice(10, 20)}).shape() == ts::Shape{0, 5});
  CHECK_THROWS_WITH_AS(x.index({6}), doctest::Contains("out of bounds for axis 0 with size 6"), ts::ShapeError);
  CHECK_THROWS_AS(x.index({0, 0, 0}), ts::ShapeError);
  check_op("index under jit", [](auto& v) { return v[0].index({ts::slice(1, std::nullopt, 2), ts::slice(std::nullopt, 3)}); },
           {x}, {5, 6, 7, 15, 16, 17, 25, 26, 27}, {3, 3});
}

TEST_CASE("functional updates: at().set, .add, .multiply") {
  auto x = ts::zeros({4, 5});
  auto y = x.at({1, ts::slice(0, 5, 2)}).set(7.0);
  CHECK(y.to_vector<float>() == std::vector<float>{0, 0, 0, 0, 0, 7, 0, 7, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  auto z = ts::ones({3}).at({ts::slice(std::nullopt, std::nullopt, -1)}).add(ts::array(std::vector<float>{1, 2, 3}));
  CHECK(z.to_vector<float>() == std::vector<float>{4, 3, 2});
  auto w = ts::full({2, 2}, 3.0).at({ts::all, 1}).multiply(ts::array(std::vector<float>{2, 10}));
  CHECK(w.to_vector<float>() == std::vector<float>{3, 6, 3, 30});
  CHECK(x.to_vector<float>() == std::vector<float>(20, 0));  // unchanged
  check_op("at.set jitted", [](auto& v) { return v[0].at({ts::slice(2, 6)}).set(-1.0); }, {iota2(7, 2)},
           {0, 1, 2, 3, -1, -1, -1, -1, -1, -1, -1, -1, 12, 13}, {7, 2});
}

TEST_CASE("linear algebra: dot, matmul, tensordot, outer, einsum") {
  auto a = iota2(5, 3, 0.5f, -1.0f), b = iota2(3, 4, 0.25f, 0.5f);
  auto av = vals(a), bv = vals(b);
  V mm;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += av[i * 3 + k] * bv[k * 4 + j];
      mm.push_back(s);
    }
  check_op("dot", [](auto& v) { return ts::dot(v[0], v[1]); }, {a, b}, mm, {5, 4});
  check_op("matmul", [](auto& v) { return ts::matmul(v[0], v[1]); }, {a, b}, mm, {5, 4});
  check_op("einsum ij,jk->ik", [](auto& v) { return ts::einsum("ij,jk->ik", v[0], v[1]); }, {a, b}, mm, {5, 4});
  check_op("tensordot 1", [](auto& v) { return ts::tensordot(v[0], v[1], 1); }, {a, b}, mm, {5, 4});
  V mmt;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 5; ++i) mmt.push_back(mm[i * 4 + j]);
  check_op("einsum to transposed", [](auto& v) { return ts::einsum("ij,jk->ki", v[0], v[1]); }, {a, b}, mmt, {4, 5});
  check_op("einsum implicit", [](auto& v) { return ts::einsum("ij,jk", v[0], v[1]); }, {a, b}, mm, {5, 4});
  double tr = 0;
  auto sq = iota2(4, 4);
  for (int i = 0; i < 4; ++i) tr += vals(sq)[i * 5];
  check_op("einsum trace", [](auto& v) { return ts::einsum("ii->", v[0]); }, {sq}, {tr}, {});
  check_op("einsum sum", [](auto& v) { return ts::einsum("ij->j", v[0]); }, {a},
           [&] {
             V s(3, 0);
             for (int i = 0; i < 5; ++i)
               for (int k = 0; k < 3; ++k) s[k] += av[i * 3 + k];
             return s;
           }(),
           {3});
  V outer;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) outer.push_back(double(i + 1) * double(j + 4));
  check_op("outer", [](auto& v) { return ts::outer(v[0], v[1]); },
           {ts::array(std::vector<float>{1, 2, 3}), ts::array(std::vector<float>{4, 5})}, outer, {3, 2});
  // Batched matmul with a broadcast batch: (2,5,3) @ (3,4).
  auto batch = ts::stack({a, a}, 0);
  V bm = mm;
  bm.insert(bm.end(), mm.begin(), mm.end());
  check_op("batched matmul", [](auto& v) { return ts::matmul(v[0], v[1]); }, {batch, b}, bm, {2, 5, 4});
  check_op("einsum batched", [](auto& v) { return ts::einsum("bij,jk->bik", v[0], v[1]); }, {batch, b}, bm, {2, 5, 4});
  // Vector cases of numpy.dot.
  auto v1 = ts::array(std::vector<float>{1, 2, 3});
  CHECK(ts::dot(v1, v1).item<float>() == 14);
  CHECK(ts::dot(a, v1).shape() == ts::Shape{5});
  CHECK_THROWS_WITH_AS(ts::dot(a, a), doctest::Contains("not aligned"), ts::ShapeError);
  // float64 and int32 through the loop kernel.
  auto ai = ts::astype(iota2(3, 3), ts::int32);
  CHECK(ts::matmul(ai, ai).to_vector<int>() == std::vector<int>{15, 18, 21, 42, 54, 66, 69, 90, 111});
  auto ad = ts::astype(iota2(2, 2), ts::float64);
  CHECK(ts::matmul(ad, ad).to_vector<double>() == std::vector<double>{2, 3, 6, 11});
}

TEST_CASE("nn: relu, sigmoid, softmax, log_softmax, gelu, one_hot") {
  auto x = iota2(4, 6, 0.5f, -3.0f);
  auto xv = vals(x);
  V relu, sig, gel, gele;
  for (double v : xv) {
    relu.push_back(std::max(v, 0.0));
    sig.push_back(1 / (1 + std::exp(-v)));
    gel.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    gele.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
  }
  check_op("relu", [](auto& v) { return ts::nn::relu(v[0]); }, {x}, relu, {4, 6});
  check_op("sigmoid", [](auto& v) { return ts::nn::sigmoid(v[0]); }, {x}, sig, {4, 6}, 1e-6);
  check_op("gelu", [](auto& v) { return ts::nn::gelu(v[0]); }, {x}, gel, {4, 6}, 1e-6);
  check_op("gelu exact", [](auto& v) { return ts::nn::gelu(v[0], false); }, {x}, gele, {4, 6}, 1e-6);
  V sm, lsm;
  for (int i = 0; i < 4; ++i) {
    double m = -1e9, s = 0;
    for (int j = 0; j < 6; ++j) m = std::max(m, xv[i * 6 + j]);
    for (int j = 0; j < 6; ++j) s += std::exp(xv[i * 6 + j] - m);
    for (int j = 0; j < 6; ++j) sm.push_back(std::exp(xv[i * 6 + j] - m) / s), lsm.push_back(xv[i * 6 + j] - m - std::log(s));
  }
  check_op("softmax", [](auto& v) { return ts::nn::softmax(v[0]); }, {x}, sm, {4, 6}, 1e-6);
  check_op("log_softmax", [](auto& v) { return ts::nn::log_softmax(v[0]); }, {x}, lsm, {4, 6}, 1e-6);
  auto labels = ts::array(std::vector<int>{2, 0, 1});
  CHECK(ts::nn::one_hot(labels, 3).to_vector<float>() == std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0});
}

TEST_CASE("shape and dtype errors name the shapes") {
  auto a = ts::zeros({3, 4}), b = ts::zeros({5});
  CHECK_THROWS_WITH_AS(a + b, doctest::Contains("(3, 4) and (5,) cannot be broadcast"), ts::ShapeError);
  CHECK_THROWS_WITH_AS(a.reshape({5, 3}), doctest::Contains("(3, 4)"), ts::ShapeError);
  CHECK_THROWS_AS(ts::sum(a, 2), ts::ShapeError);
  CHECK_THROWS_AS(ts::transpose(a, {0, 0}), ts::ShapeError);
  CHECK_THROWS_WITH_AS(ts::concatenate({a, b}), doctest::Contains("float32[3,4]"), ts::ShapeError);
  CHECK_THROWS_AS(ts::abs(ts::array(true)), ts::TypeError);
}

TEST_CASE("einsum contracts in JAX's order (opt_einsum's optimal path up to four operands, greedy beyond), einsum_path") {
  // A [n, 2] B [2, n] C [n, 2]: left to right builds an n x n intermediate
  // (2 n^2 + 2 n^2 multiply-adds); B C first is 2 x 2 (4 n + 4 n).
  const std::int64_t n = 300;
  std::vector<double> av, bv, cv;
  for (std::int64_t i = 0; i < 2 * n; ++i)
    av.push_back(std::sin(0.1 * double(i))), bv.push_back(std::cos(0.07 * double(i))), cv.push_back(0.01 * double(i % 17));
  auto a = ts::array(av, {n, 2}), b = ts::array(bv, {2, n}), c = ts::array(cv, {n, 2});
  auto [path, info] = ts::einsum_path("ij,jk,kl->il", {a, b, c});
  CHECK(path == std::vector<std::vector<int>>{{1, 2}, {0, 1}});
  CHECK(info.find("jk,kl->jl") != std::string::npos);
  // The same numbers as the left-to-right product, computed on the host in long double.
  auto got = ts::einsum("ij,jk,kl->il", a, b, c).to_vector<double>();
  for (std::int64_t i = 0; i < n; i += 37)
    for (std::int64_t l = 0; l < 2; ++l) {
      long double want = 0;
      for (std::int64_t k = 0; k < n; ++k) {
        long double ab = 0;
        for (std::int64_t j = 0; j < 2; ++j) ab += (long double)av[size_t(i * 2 + j)] * bv[size_t(j * n + k)];
        want += ab * cv[size_t(k * 2 + l)];
      }
      CHECK(got[size_t(i * 2 + l)] == doctest::Approx(double(want)).epsilon(1e-12));
    }
  // The compiled program does the cheap order's work, not n^2's.
  auto f = ts::jit([](const ts::Array& x, const ts::Array& y, const ts::Array& z) { return ts::einsum("ij,jk,kl->il", x, y, z); });
  const double flops = f.lower(a, b, c).compile().cost_analysis().at("flops");
  CHECK(flops < 0.1 * 2.0 * double(n * n * 2));
  // Greedy beyond four operands: a chain of five matrices with one cheap end.
  auto m = [&](std::int64_t r, std::int64_t k) { return ts::ones({r, k}, ts::float64); };
  auto [gpath, ginfo] = ts::einsum_path("ab,bc,cd,de,ef->af", {m(50, 50), m(50, 50), m(50, 50), m(50, 2), m(2, 50)});
  CHECK(gpath.size() == 4);
  CHECK(gpath[0] == std::vector<int>{2, 3});  // cd,de->ce removes the most memory
  CHECK(ts::einsum("ab,bc,cd,de,ef->af", {m(50, 50), m(50, 50), m(50, 50), m(50, 2), m(2, 50)})
            .to_vector<double>()[0] == doctest::Approx(50.0 * 50 * 50 * 2));
  // One operand: opt_einsum's (0,); greedy and optimal by name; others are not planned.
  CHECK(ts::einsum_path("ii->i", {m(3, 3)}).first == std::vector<std::vector<int>>{{0}});
  CHECK(ts::einsum_path("ij,jk,kl->il", {a, b, c}, "greedy").first.size() == 2);
  CHECK_THROWS_AS(ts::einsum_path("ij,jk->ik", {a, b}, "dp"), ts::NotImplementedError);
}
