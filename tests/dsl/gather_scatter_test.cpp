// Integer-array indexing: take, take_along_axis, x.index({array}) (gathers)
// and x.at({array}).set/add/multiply/min/max (scatters), against host loops
// that apply JAX's rules (negatives from the end; take fills out of bounds,
// indexing clamps, updates drop; duplicates accumulate), replicated and
// sharded over 1..8 devices, jitted and eager; gradients in closed form and
// by finite differences; no communication where the indexed axis is whole.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

std::vector<double> as_f64(const ts::Array& a) { return a.astype(ts::DType::float64).to_vector<double>(); }

// Same values, NaN equal to NaN.
bool same(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

std::int64_t pos(std::int64_t i, std::int64_t n, bool clip) {
  const std::int64_t k = i < 0 ? i + n : i;
  if (clip) return std::clamp<std::int64_t>(k, 0, n - 1);
  return k < 0 || k >= n ? -1 : k;
}

}  // namespace

TEST_CASE("take, take_along_axis and integer-array indexing against host loops, 1..8 devices") {
  const std::int64_t R = 5, C = 6;
  std::vector<double> host(size_t(R * C));
  for (size_t k = 0; k < host.size(); ++k) host[k] = double(k) - 11;
  const std::vector<std::int32_t> iv = {0, 4, -1, 7, 2, -8};  // in, last, negative, past the end, before the start
  ts::Array idx = ts::array(iv, {3, 2});
  int checked = 0;
  for (int n = 1; n <= 8; ++n) {
    const auto all = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
    for (ts::DType t : {ts::DType::float32, ts::DType::int32, ts::DType::uint32}) {
      CAPTURE(n);
      CAPTURE(ts::dtype_name(t));
      std::vector<double> hv = host;
      if (t == ts::DType::uint32)
        for (auto& v : hv) v += 11;
      ts::Array x0 = ts::array(hv, {R, C}).astype(t);
      const double fill = t == ts::DType::float32 ? std::nan("") : t == ts::DType::int32 ? -2147483648.0 : 4294967295.0;
      for (ts::Array x : {x0, ts::device_put(x0, ts::NamedSharding(mesh, P("x"))),
                          ts::device_put(x0, ts::NamedSharding(mesh, P(ts::None, "x")))}) {
        for (int axis : {0, 1}) {
          const std::int64_t len = axis == 0 ? R : C, other = axis == 0 ? C : R;
          for (const char* mode : {"fill", "clip"}) {
            CAPTURE(axis);
            CAPTURE(std::string(mode));
            const bool clip = std::string(mode) == "clip";
            auto f = ts::jit([&](ts::Array a, ts::Array i) { return ts::take(a, i, axis, mode); });
            std::vector<double> want;
            for (std::int64_t p = 0; p < (axis == 0 ? 6 * C : R * 6); ++p) {
              // axis 0: [3,2,C]; axis 1: [R,3,2]
              const std::int64_t j = axis == 0 ? p / C : p % 6, o = axis == 0 ? p % C : p / 6;
              const std::int64_t k = pos(iv[size_t(j)], len, clip);
              want.push_back(k < 0 ? fill : hv[size_t(axis == 0 ? k * C + o : o * C + k)]);
            }
            (void)other;
            CHECK(same(as_f64(f(x, idx)), want));
            CHECK(same(as_f64(ts::take(x, idx, axis, mode)), want));
            ++checked;
          }
        }
        // Integer-array indexing clamps; in the middle of static items (NumPy's placement).
        std::vector<double> want;
        for (std::int64_t j = 0; j < 6; ++j)
          for (std::int64_t c = 0; c < C; ++c) want.push_back(hv[size_t(pos(iv[size_t(j)], R, true) * C + c)]);
        CHECK(same(as_f64(ts::jit([](ts::Array a, ts::Array i) { return a.index({i}); })(x, idx)), want));
        // take_along_axis: per column, rows picked by an index of shape [2, C].
        std::vector<std::int32_t> along(size_t(2 * C));
        for (size_t k = 0; k < along.size(); ++k) along[k] = std::int32_t(k % 7) - 2;
        ts::Array ai = ts::array(along, {2, C});
        std::vector<double> wa;
        for (std::int64_t r = 0; r < 2; ++r)
          for (std::int64_t c = 0; c < C; ++c) {
            const std::int64_t k = pos(along[size_t(r * C + c)], R, false);
            wa.push_back(k < 0 ? fill : hv[size_t(k * C + c)]);
          }
        CHECK(same(as_f64(ts::jit([](ts::Array a, ts::Array i) { return ts::take_along_axis(a, i, 0); })(x, ai)), wa));
      }
    }
  }
  CHECK(checked == 8 * 3 * 3 * 4);
  // NumPy's placement of the array's dims: with integers apart from it, first.
  ts::Array z = ts::arange(60.0f).reshape({3, 4, 5});
  ts::Array i2 = ts::array({3, 0});
  CHECK(z.index({ts::all, i2}).shape() == ts::Shape{3, 2, 5});
  CHECK(z.index({1, ts::all, i2}).shape() == ts::Shape{2, 4});
  CHECK(z.index({1, ts::all, i2}).to_vector<float>()[1] == 20 + 5 + 3);  // [0][1] = z[1, 1, 3]
  CHECK(z.index({ts::all, 1, i2}).shape() == ts::Shape{3, 2});
  CHECK(z.index({ts::ellipsis, i2}).shape() == ts::Shape{3, 4, 2});
  // Errors.
  CHECK_THROWS_AS(ts::take(z, ts::array({1.0f}), 0), ts::TypeError);
  CHECK_THROWS_AS(ts::take(z, i2, 3), ts::Error);
  CHECK_THROWS_AS(ts::take(z, i2, 0, "bogus"), ts::ValueError);  // "wrap" is supported (numpy_extra_test)
  CHECK_THROWS_AS(ts::take_along_axis(z, i2, 0), ts::ValueError);
}

TEST_CASE("scatters: x.at({array}).set/add/multiply/min/max, duplicates and drops, 1..8 devices") {
  const std::int64_t R = 6, C = 4;
  const std::vector<std::int32_t> iv = {1, -1, 1, 9, 0, -7};  // a duplicate, negatives, out of bounds both ways
  ts::Array idx = ts::array(iv);
  std::vector<double> upd(6 * C);
  for (size_t k = 0; k < upd.size(); ++k) upd[k] = double(k % 5) - 2;
  for (int n = 1; n <= 8; ++n) {
    const auto all = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
    for (ts::DType t : {ts::DType::float32, ts::DType::int32}) {
      CAPTURE(n);
      ts::Array x0 = ts::arange(double(R * C)).reshape({R, C}).astype(t);
      ts::Array u = ts::array(upd, {6, C}).astype(t);
      for (ts::Array x : {x0, ts::device_put(x0, ts::NamedSharding(mesh, P(ts::None, "x")))}) {
        struct Case {
          const char* name;
          std::function<ts::Array(ts::Array, ts::Array, ts::Array)> f;
          std::function<double(double, double)> combine;
        };
        std::vector<Case> cases = {
            {"set", [](ts::Array a, ts::Array i, ts::Array v) { return a.at({i}).set(v); }, [](double, double b) { return b; }},
            {"add", [](ts::Array a, ts::Array i, ts::Array v) { return a.at({i}).add(v); }, [](double a, double b) { return a + b; }},
            {"multiply", [](ts::Array a, ts::Array i, ts::Array v) { return a.at({i, ts::all}).multiply(v); },
             [](double a, double b) { return a * b; }},
            {"min", [](ts::Array a, ts::Array i, ts::Array v) { return a.at({i}).min(v); }, [](double a, double b) { return std::min(a, b); }},
            {"max", [](ts::Array a, ts::Array i, ts::Array v) { return a.at({i}).max(v); }, [](double a, double b) { return std::max(a, b); }},
        };
        for (auto& c : cases) {
          CAPTURE(std::string(c.name));
          std::vector<double> want = as_f64(x0);
          for (size_t j = 0; j < iv.size(); ++j) {
            const std::int64_t k = pos(iv[j], R, false);
            if (k < 0) continue;
            for (std::int64_t q = 0; q < C; ++q)
              want[size_t(k * C + q)] = c.combine(want[size_t(k * C + q)], upd[j * C + size_t(q)]);
          }
          CHECK(as_f64(ts::jit(c.f)(x, idx, u)) == want);
          CHECK(as_f64(c.f(x, idx, u)) == want);
        }
      }
    }
  }
  // An index array beside an integer: rows 1 and 2 of column 0.
  ts::Array x = ts::zeros({4, 4});
  std::vector<float> w(16, 0.0f);
  w[4] = w[8] = 1.0f;
  CHECK(x.at({ts::array({1, 2}), 0}).set(1.0f).to_vector<float>() == w);
}

TEST_CASE("gathers and scatters: gradients, and no communication where the indexed axis is whole") {
  ts::Array x = (ts::arange(12.0).reshape({4, 3}) * 0.5 - 1.0).astype(ts::DType::float64);
  ts::Array idx = ts::array({2, 0, 2, 9, -1});
  ts::Array w = (ts::arange(15.0).reshape({5, 3}) - 4.0).astype(ts::DType::float64);
  // d/dx sum(take(x, idx, 0, fill) * w): each row gets the w rows that read
  // it (duplicates add up; the out-of-bounds one reads nothing).
  auto f = [&](ts::Array a) { return ts::sum(ts::where(ts::isnan(ts::take(a, idx, 0)), 0.0, ts::take(a, idx, 0) * w)); };
  auto g = ts::jit(ts::grad(f))(x).to_vector<double>();
  std::vector<double> want(12, 0.0);
  const std::vector<int> iv = {2, 0, 2, 9, -1};
  auto wv = w.to_vector<double>();
  for (size_t j = 0; j < iv.size(); ++j) {
    const std::int64_t k = pos(iv[j], 4, false);
    if (k >= 0)
      for (int c = 0; c < 3; ++c) want[size_t(k * 3 + c)] += wv[j * 3 + size_t(c)];
  }
  CHECK(g == want);
  // at().set with a duplicate: the update that stays gets the gradient; x's
  // overwritten rows get none. Finite differences on every element.
  auto h = [&](ts::Array a, ts::Array v) { return ts::sum(ts::sin(a.at({idx}).set(v)) * 1.5); };
  ts::Array v = (ts::arange(15.0).reshape({5, 3}) * 0.1).astype(ts::DType::float64);
  ts::Array gx = ts::grad<0>(h)(x, v), gv = ts::jit(ts::grad<1>(h))(x, v);
  auto xv = x.to_vector<double>(), vv = v.to_vector<double>();
  const double e = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    auto p = xv, m = xv;
    p[i] += e, m[i] -= e;
    const double fd = (h(ts::array(p, x.shape()), v).item<double>() - h(ts::array(m, x.shape()), v).item<double>()) / (2 * e);
    CHECK(gx.to_vector<double>()[i] == doctest::Approx(fd).epsilon(1e-6).scale(1));
  }
  for (size_t i = 0; i < vv.size(); ++i) {
    auto p = vv, m = vv;
    p[i] += e, m[i] -= e;
    const double fd = (h(x, ts::array(p, v.shape())).item<double>() - h(x, ts::array(m, v.shape())).item<double>()) / (2 * e);
    CHECK(gv.to_vector<double>()[i] == doctest::Approx(fd).epsilon(1e-6).scale(1));
  }
  // A take along rows of a column-sharded matrix needs no communication, and
  // the result stays column-sharded.
  auto mesh = ts::make_mesh({4}, {"x"});
  ts::Array big = ts::device_put(ts::arange(64.0f).reshape({8, 8}), ts::NamedSharding(mesh, P(ts::None, "x")));
  auto take_rows = ts::jit([](ts::Array a, ts::Array i) { return ts::take(a, i, 0); });
  ts::Array rows = ts::array({7, 1, 3});
  CHECK(take_rows.lower(big, rows).compile().communication().empty());
  ts::Array got = take_rows(big, rows);
  CHECK(got.sharding().is_equivalent_to(ts::NamedSharding(mesh, P(ts::None, "x")), 2));
  CHECK(got.to_vector<float>()[8] == 8.0f);  // row 1, column 0
}

TEST_CASE("boolean masks: where-style updates under jit, concrete masks select") {
  auto mesh = ts::make_mesh({4}, {"x"});
  ts::Array x = ts::device_put(ts::arange(-6.0f, 6.0f).reshape({4, 3}), ts::NamedSharding(mesh, P("x")));
  auto clamp_neg = ts::jit([](ts::Array a) { return a.at({a < 0.0f}).set(0.0f); });
  auto xv = x.to_vector<float>();
  auto got = clamp_neg(x).to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) CHECK(got[i] == std::max(xv[i], 0.0f));
  CHECK(clamp_neg(x).sharding().is_equivalent_to(x.sharding(), 2));
  // A mask over the leading dim, an array value broadcast to x.
  ts::Array rows = ts::array({true, false, false, true});
  auto added = ts::jit([](ts::Array a, ts::Array m) { return a.at({m}).add(ts::array({10.0f, 20.0f, 30.0f})); })(x, rows);
  auto av = added.to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) CHECK(av[i] == xv[i] + ((i / 3 == 0 || i / 3 == 3) ? 10.0f * float(i % 3 + 1) : 0.0f));
  // Reading with a concrete mask: NumPy's result (its length is the count).
  ts::Array sel = x.index({x > 2.0f});
  CHECK(sel.to_vector<float>() == std::vector<float>{3, 4, 5});
  CHECK(x.index({rows}).shape() == ts::Shape{2, 3});
  // Traced: the shape would depend on values.
  CHECK_THROWS_AS(ts::jit([](ts::Array a) { return a.index({a > 0.0f}); })(x), ts::ConcretizationError);
  CHECK_THROWS_AS(x.index({ts::array({true, false})}), ts::ShapeError);
}

TEST_CASE("several index arrays broadcast together, with NumPy's placement, jitted and on sharded arrays") {
  // x[4, 5, 6]; a reference by hand.
  ts::Array x = ts::arange(120.0f).reshape({4, 5, 6});
  auto at = [](std::int64_t i, std::int64_t j, std::int64_t k) { return float(i * 30 + j * 6 + k); };
  ts::Array i = ts::array(std::vector<std::int32_t>{0, 3, -1}), j = ts::array(std::vector<std::int32_t>{1, 4, 9}, {3, 1});
  // x[i, j]: [3, 3, 6] (j clamped to 4, -1 is 3).
  auto norm = [](std::int64_t v, std::int64_t n) { return std::clamp<std::int64_t>(v < 0 ? v + n : v, 0, n - 1); };
  const std::vector<std::int64_t> iv{0, 3, -1}, jv{1, 4, 9};
  auto f = ts::jit([](ts::Array a, ts::Array p, ts::Array q) { return a.index({p, q}); });
  for (const ts::Array& xs : {x, ts::device_put(x, ts::NamedSharding(ts::Mesh(ts::devices(), "d"), P(ts::None, ts::None, "d")))}) {
    for (ts::Array got : {x.index({i, j}), f(xs, i, j)}) {
      REQUIRE(got.shape() == ts::Shape{3, 3, 6});
      auto g = got.to_vector<float>();
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 3; ++b)
          for (int k = 0; k < 6; ++k)
            CHECK(g[size_t((a * 3 + b) * 6 + k)] == at(norm(iv[size_t(b)], 4), norm(jv[size_t(a)], 5), k));
    }
  }
  // x[:, i, j2] with j2 [3]: adjacent arrays after a slice: [4, 3].
  ts::Array j2 = ts::array(std::vector<std::int32_t>{0, 2, 5});
  ts::Array r = x.index({ts::all, ts::array(std::vector<std::int32_t>{1, 2, 3}), j2});
  REQUIRE(r.shape() == ts::Shape{4, 3});
  CHECK(r.to_vector<float>()[size_t(2 * 3 + 1)] == at(2, 2, 2));
  // x[i, :, j2]: separated by a slice: the broadcast dims go first: [3, 5].
  ts::Array s = x.index({i, ts::all, j2});
  REQUIRE(s.shape() == ts::Shape{3, 5});
  CHECK(s.to_vector<float>()[size_t(1 * 5 + 4)] == at(3, 4, 2));
  CHECK_THROWS_AS(x.index({i, ts::array(std::vector<std::int32_t>{0, 1})}), ts::ShapeError);
}

TEST_CASE("updates with several index arrays, or arrays beside slices and integers; out of bounds dropped") {
  ts::Array x = ts::zeros({4, 5});
  // L.at[[1, 3], :2].set(...) — the notebook's row swap restricted to the first columns.
  ts::Array rows = ts::array(std::vector<std::int32_t>{1, 3});
  ts::Array r = x.at({rows, ts::slice(0, 2)}).set(ts::array(std::vector<float>{1, 2, 3, 4}, {2, 2}));
  std::vector<float> want(20, 0.0f);
  want[5] = 1, want[6] = 2, want[15] = 3, want[16] = 4;
  CHECK(r.to_vector<float>() == want);
  // x.at[i, j].add(1) with repeated and out-of-bounds pairs: repeats accumulate, (7, 0) and (0, -9) dropped.
  ts::Array i = ts::array(std::vector<std::int32_t>{0, 2, 2, 7, 0, -1}), j = ts::array(std::vector<std::int32_t>{1, 3, 3, 0, -9, -1});
  auto f = ts::jit([](ts::Array a, ts::Array p, ts::Array q) { return a.at({p, q}).add(1.0f); });
  for (ts::Array got : {x.at({i, j}).add(1.0f), f(x, i, j),
                        f(ts::device_put(x, ts::NamedSharding(ts::Mesh(ts::devices(), "d"), P("d"))), i, j)}) {
    std::vector<float> w(20, 0.0f);
    w[1] = 1, w[13] = 2, w[19] = 1;
    CHECK(got.to_vector<float>() == w);
  }
  // An integer beside an array: x.at[2, cols].set(5).
  ts::Array c = x.at({2, ts::array(std::vector<std::int32_t>{0, 4})}).set(5.0f);
  std::vector<float> w2(20, 0.0f);
  w2[10] = 5, w2[14] = 5;
  CHECK(c.to_vector<float>() == w2);
}
