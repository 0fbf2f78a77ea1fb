// Dynamic indices: integer scalar Arrays (traced under jit, or concrete) as
// index items of x.index() and x.at(). JAX's rules: a negative index counts
// from the end; out of bounds, a read clamps and an update is dropped.
// Against a host loop that applies those rules, on replicated and sharded
// operands over 1..8 devices, several dtypes; gradients in closed form.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

// JAX's position for index i into a dim of n: negatives from the end, then
// clamped (reads) or dropped (updates: -1 means none).
std::int64_t read_pos(std::int64_t i, std::int64_t n) { return std::clamp<std::int64_t>(i < 0 ? i + n : i, 0, n - 1); }
std::int64_t write_pos(std::int64_t i, std::int64_t n) {
  const std::int64_t k = i < 0 ? i + n : i;
  return k < 0 || k >= n ? -1 : k;
}

}  // namespace

TEST_CASE("dynamic indices: reads clamp, updates drop, on 1..8 devices") {
  const std::int64_t R = 5, C = 6;
  std::vector<double> host(size_t(R * C));
  for (size_t k = 0; k < host.size(); ++k) host[k] = double(k) * 1.5 - 7;
  int checked = 0;
  for (int n = 1; n <= 8; ++n) {
    const auto all = ts::devices();
    std::vector<ts::Device> devs(all.begin(), all.begin() + n);
    ts::Mesh mesh(devs, {n}, {"x"});
    for (ts::DType t : {ts::DType::float32, ts::DType::int32, ts::DType::float64}) {
      CAPTURE(n);
      CAPTURE(ts::dtype_name(t));
      ts::Array x0 = ts::array(host, {R, C}).astype(t);
      for (ts::Array x : {x0, ts::device_put(x0, ts::NamedSharding(mesh, P("x"))),
                          ts::device_put(x0, ts::NamedSharding(mesh, P(ts::None, "x")))}) {
        auto row = ts::jit([](ts::Array a, ts::Array i) { return a.index({i}); });
        auto col = ts::jit([](ts::Array a, ts::Array j) { return a.index({ts::all, j}); });
        auto elem = ts::jit([](ts::Array a, ts::Array i, ts::Array j) { return a.index({i, ts::slice(1, 6, 2)}).index({j}); });
        auto set = ts::jit([](ts::Array a, ts::Array i, ts::Array j) { return a.at({i, j}).set(100.0); });
        auto add_row = ts::jit([](ts::Array a, ts::Array i) { return a.at({i}).add(ts::arange(6.0).astype(a.dtype())); });
        auto mx = ts::jit([](ts::Array a, ts::Array j) { return a.at({ts::all, j}).max(0.0); });
        for (std::int64_t i : {std::int64_t(0), std::int64_t(3), R - 1, R, R + 4, std::int64_t(-1), -R, -R - 2}) {
          CAPTURE(i);
          ts::Array ia = ts::array(std::int32_t(i));
          auto r = row(x, ia).astype(ts::DType::float64).to_vector<double>();
          const std::int64_t rp = read_pos(i, R);
          for (std::int64_t c = 0; c < C; ++c) CHECK(r[size_t(c)] == double(x0.astype(ts::DType::float64).to_vector<double>()[size_t(rp * C + c)]));
          auto cl = col(x, ts::array(std::int64_t(i))).astype(ts::DType::float64).to_vector<double>();
          const std::int64_t cp = read_pos(i, C);
          for (std::int64_t q = 0; q < R; ++q)
            CHECK(cl[size_t(q)] == x0.astype(ts::DType::float64).to_vector<double>()[size_t(q * C + cp)]);
          // A static strided slice, then a dynamic index into it (length 3).
          auto e = elem(x, ia, ia).astype(ts::DType::float64).to_vector<double>();
          CHECK(e.size() == 1);
          CHECK(e[0] == x0.astype(ts::DType::float64).to_vector<double>()[size_t(rp * C + 1 + 2 * read_pos(i, 3))]);
          // Updates: dropped out of bounds.
          auto want = x0.astype(ts::DType::float64).to_vector<double>();
          auto s = set(x, ia, ts::array(std::int32_t(-1))).astype(ts::DType::float64).to_vector<double>();
          auto ws = want;
          if (write_pos(i, R) >= 0) ws[size_t(write_pos(i, R) * C + C - 1)] = 100;
          CHECK(s == ws);
          auto a = add_row(x, ia).astype(ts::DType::float64).to_vector<double>();
          auto wa = want;
          if (write_pos(i, R) >= 0)
            for (std::int64_t c = 0; c < C; ++c) wa[size_t(write_pos(i, R) * C + c)] += double(c);
          CHECK(a == wa);
          auto m = mx(x, ia).astype(ts::DType::float64).to_vector<double>();
          auto wm = want;
          if (write_pos(i, C) >= 0)
            for (std::int64_t q = 0; q < R; ++q) wm[size_t(q * C + write_pos(i, C))] = std::max(wm[size_t(q * C + write_pos(i, C))], 0.0);
          CHECK(m == wm);
          // An update follows the operand's sharding (an elementwise select;
          // propagation splits no dim over more devices than it has elements).
          ts::Array s_arr = set(x, ia, ts::array(std::int32_t(-1)));
          if (n <= R) CHECK(s_arr.sharding().is_equivalent_to(x.sharding(), 2));
          ++checked;
        }
      }
    }
  }
  CHECK(checked == 8 * 3 * 3 * 8);
  // Eagerly too, and the errors.
  ts::Array x = ts::arange(12.0f).reshape({3, 4});
  CHECK(x.index({ts::array(2)}).to_vector<float>() == std::vector<float>{8, 9, 10, 11});
  CHECK(x.at({ts::array(-1), ts::array(0)}).set(-5.0f).to_vector<float>()[8] == -5.0f);
  CHECK_THROWS_AS(x.index({ts::array(1.5f)}), ts::TypeError);
  CHECK_THROWS_AS(x.index({ts::array({1.5f, 2.0f})}), ts::TypeError);
}

TEST_CASE("dynamic indices: gradients") {
  ts::Array x = ts::arange(12.0).reshape({3, 4});
  ts::Array w = ts::array({1.0, -2.0, 3.0, 0.5});
  // d/dx sum(x[i] * w) is w on row i; d/dv of x.at[i, j].set(v) * 3 is 3.
  for (int i : {0, 2, -1, 7}) {
    CAPTURE(i);
    auto f = [&](ts::Array a) { return ts::sum(a.index({ts::array(i)}) * w); };
    auto g = ts::jit(ts::grad(f))(x).to_vector<double>();
    const int r = std::clamp(i < 0 ? i + 3 : i, 0, 2);
    for (int q = 0; q < 3; ++q)
      for (int c = 0; c < 4; ++c) CHECK(g[size_t(q * 4 + c)] == (q == r ? w.to_vector<double>()[size_t(c)] : 0.0));
    auto h = [&](ts::Array v) { return ts::sum(x.at({ts::array(i), ts::array(1)}).set(v) * 3.0); };
    const bool in = write_pos(i, 3) >= 0;
    CHECK(ts::grad(h)(ts::array(2.0)).to_vector<double>()[0] == (in ? 3.0 : 0.0));
  }
}

TEST_CASE("dynamic windows: ts::slice(start, size) with a traced start, reads and updates") {
  const std::int64_t R = 5, C = 6;
  ts::Array x = ts::arange(double(R * C)).reshape({R, C}).astype(ts::DType::float64);
  const auto xv = x.to_vector<double>();
  auto mesh = ts::make_mesh({2}, {"x"});
  ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
  auto rows = ts::jit([](ts::Array a, ts::Array i) { return a.index({ts::slice(i, 3)}); });
  auto cols = ts::jit([](ts::Array a, ts::Array j) { return a.index({ts::all, ts::slice(j, 2)}); });
  auto put = ts::jit([](ts::Array a, ts::Array i, ts::Array v) { return a.at({ts::slice(i, 2)}).set(v); });
  auto bump = ts::jit([](ts::Array a, ts::Array i, ts::Array j) { return a.at({ts::slice(i, 2), j}).add(100.0); });
  ts::Array v = ts::arange(12.0).reshape({2, C}).astype(ts::DType::float64) * -1.0;
  for (ts::Array a : {x, xs}) {
    for (std::int64_t i : {std::int64_t(0), std::int64_t(1), std::int64_t(2), std::int64_t(4), std::int64_t(9),
                           std::int64_t(-1), std::int64_t(-9)}) {
      CAPTURE(i);
      const std::int64_t n3 = std::clamp<std::int64_t>(i < 0 ? i + R : i, 0, R - 3);
      const std::int64_t n2 = std::clamp<std::int64_t>(i < 0 ? i + R : i, 0, R - 2);
      const std::int64_t c2 = std::clamp<std::int64_t>(i < 0 ? i + C : i, 0, C - 2);
      ts::Array ia = ts::array(std::int32_t(i));
      ts::Array r = rows(a, ia);
      CHECK(r.shape() == ts::Shape{3, C});
      auto rv = r.to_vector<double>();
      for (std::int64_t q = 0; q < 3; ++q)
        for (std::int64_t c = 0; c < C; ++c) CHECK(rv[size_t(q * C + c)] == xv[size_t((n3 + q) * C + c)]);
      auto cv = cols(a, ia).to_vector<double>();
      for (std::int64_t q = 0; q < R; ++q)
        for (std::int64_t c = 0; c < 2; ++c) CHECK(cv[size_t(q * 2 + c)] == xv[size_t(q * C + c2 + c)]);
      auto pv = put(a, ia, v).to_vector<double>();
      auto want = xv;
      for (std::int64_t q = 0; q < 2; ++q)
        for (std::int64_t c = 0; c < C; ++c) want[size_t((n2 + q) * C + c)] = v.to_vector<double>()[size_t(q * C + c)];
      CHECK(pv == want);
      // A window and a dynamic index together (the index drops out of bounds).
      auto bv = bump(a, ia, ts::array(std::int32_t(i))).to_vector<double>();
      auto wb = xv;
      const std::int64_t jc = (i < 0 ? i + C : i);
      if (jc >= 0 && jc < C)
        for (std::int64_t q = 0; q < 2; ++q) wb[size_t((n2 + q) * C + jc)] += 100;
      CHECK(bv == wb);
    }
  }
  // The gradient of a window read: ones on the window's rows.
  auto g = ts::jit(ts::grad([](ts::Array a) { return ts::sum(a.index({ts::slice(ts::array(3), 3)})); }))(x).to_vector<double>();
  for (std::int64_t q = 0; q < R; ++q) CHECK(g[size_t(q * C)] == (q >= 2 ? 1.0 : 0.0));
  CHECK_THROWS_AS(x.index({ts::slice(ts::array(0), 6)}), ts::ShapeError);
  CHECK_THROWS_AS(x.index({ts::slice(ts::array(0.5), 2)}), ts::TypeError);
}
