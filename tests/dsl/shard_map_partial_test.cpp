// shard_map manual over some mesh axes (axis_names): the others stay
// automatic inside the body, whose values propagation and the partitioner
// split over them like any program's; and shard_maps nested in bodies, each
// manual over axes the enclosing ones left automatic. Against the reference
// interpreter (which runs bodies on every device's blocks at once, knowing
// nothing of automatic axes) and closed forms; gradients against finite
// differences; JAX's errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <type_traits>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::P;
using ts::testing::check;
using ts::testing::random_array;

namespace {

ts::Mesh shuffled_mesh(std::mt19937& rng, const ts::Shape& shape, const std::vector<std::string>& names) {
  auto devs = ts::devices();
  std::shuffle(devs.begin(), devs.end(), rng);
  devs.resize(size_t(ts::numel(shape)), ts::Device(0));
  return ts::Mesh(devs, shape, names);
}

}  // namespace

#define CHECK_SM(...)             \
  do {                            \
    INFO("from line ", __LINE__); \
    check(__VA_ARGS__);           \
  } while (0)

TEST_CASE("partial manual shard_map: automatic axes inside the body, against the interpreter") {
  std::mt19937 rng(22);
  int checked = 0;
  for (ts::Shape ms : {ts::Shape{2, 4}, ts::Shape{4, 2}, ts::Shape{2, 2}, ts::Shape{2, 3}, ts::Shape{1, 2},
                       ts::Shape{2, 1}, ts::Shape{3, 2}}) {
    ts::Mesh mesh = shuffled_mesh(rng, ms, {"x", "y"});
    CAPTURE(mesh.str());
    const int nx = int(ms[0]), ny = int(ms[1]);
    for (ts::DType t : {ts::DType::float32, ts::DType::int32, ts::DType::float64}) {
      CAPTURE(ts::dtype_name(t));
      // Even and uneven (5 columns) along the automatic axis.
      for (std::int64_t cols : {std::int64_t(ny) * 2, std::int64_t(5)}) {
        CAPTURE(cols);
        ts::Array a = random_array(rng, {nx * 2, cols}, t);
        ts::Array w = random_array(rng, {cols, 3}, t);
        // a arrives split over both axes: its columns over the automatic one.
        ts::Array a2 = ts::device_put(a, ts::NamedSharding(mesh, P("x", "y")));
        auto sm = [&](auto body, std::vector<ts::PartitionSpec> in, ts::PartitionSpec out) {
          return [=](const std::vector<ts::Array>& xs) {
            if constexpr (std::is_invocable_v<decltype(body), ts::Array>)
              return ts::shard_map(body, mesh, in, out, {.axis_names = {"x"}})(xs[0]);
            else
              return ts::shard_map(body, mesh, in, out, {.axis_names = {"x"}})(xs[0], xs[1]);
          };
        };
        // A contraction over the automatic split (partial sums over y inside
        // the body), then a psum over the manual axis.
        CHECK_SM(sm([](ts::Array b, ts::Array v) { return ts::psum(ts::matmul(b, v), "x"); }, {P("x"), P()}, P()),
                 {a2, w});
        CHECK_SM(sm([](ts::Array b, ts::Array v) { return ts::matmul(b, v) * ts::axis_index("x").astype(b.dtype()); },
                    {P("x"), P()}, P("x")),
                 {a2, w});
        // A constraint over the automatic axis inside the body.
        CHECK_SM(sm(
                     [&](ts::Array b) {
                       ts::Array c = ts::with_sharding_constraint(b * b, ts::NamedSharding(mesh, P(ts::None, "y")));
                       return ts::sum(c, {1}, true) + c;
                     },
                     {P("x")}, P("x")),
                 {a});
        // Collectives whose groups run over x while the data is split over y.
        CHECK_SM(sm([](ts::Array b) { return ts::all_gather(b, "x", {.axis = 0, .tiled = true}) + 1.0; }, {P("x")},
                    P("x")),
                 {a2});
        std::vector<std::pair<int, int>> shift;
        for (int i = 0; i < nx; ++i) shift.push_back({i, (i + 1) % nx});
        CHECK_SM(sm([&](ts::Array b) { return ts::ppermute(b, "x", shift) - b; }, {P("x")}, P("x")), {a2});
        CHECK_SM(sm([](ts::Array b) { return ts::pmax(ts::max(b, {0}, true), "x"); }, {P("x")}, P()), {a2});
        checked += 6;
      }
    }
  }
  CHECK(checked == 7 * 3 * 2 * 6);
}

TEST_CASE("partial manual shard_map: the body is partitioned over the automatic axes") {
  auto mesh = ts::make_mesh({2, 4}, {"x", "y"});
  ts::Array a = ts::device_put(ts::arange(64.0f).reshape({8, 8}), ts::NamedSharding(mesh, P("x", "y")));
  auto f = ts::jit([&](ts::Array x) {
    return ts::shard_map([](ts::Array b) { return ts::psum(ts::sin(b), "x"); }, mesh, P("x"), P(),
                         {.axis_names = {"x"}})(x);
  });
  auto c = f.lower(a).compile();
  const std::string text = c.as_text();
  CAPTURE(text);
  // The block is 4x8; its columns stay split over y's 4 devices: sine on 4x2 tiles.
  CHECK(text.find("f32[4,2] sine") != std::string::npos);
  CHECK(text.find("f32[4,8] sine") == std::string::npos);
  CHECK(f.lower(a).as_text().find("manual_axes={x}") != std::string::npos);
  // The value: the sum over x of the two row blocks.
  auto got = f(a).to_vector<float>();
  auto all = ts::sin(ts::arange(64.0f).reshape({8, 8})).to_vector<float>();
  for (int i = 0; i < 32; ++i) CHECK(got[size_t(i)] == doctest::Approx(all[size_t(i)] + all[size_t(i) + 32]));
}

TEST_CASE("nested shard_map: each level manual over its own axes") {
  std::mt19937 rng(23);
  for (ts::Shape ms : {ts::Shape{2, 4}, ts::Shape{4, 2}, ts::Shape{2, 3}, ts::Shape{1, 1}}) {
    ts::Mesh mesh = shuffled_mesh(rng, ms, {"x", "y"});
    CAPTURE(mesh.str());
    const int nx = int(ms[0]), ny = int(ms[1]);
    for (ts::DType t : {ts::DType::float32, ts::DType::int64}) {
      ts::Array a = random_array(rng, {nx * 2, ny * 3}, t);
      // Outer manual over x, inner over y (the rest): collectives over
      // either axis and both inside the inner body.
      auto nested = [&](const std::vector<ts::Array>& xs) {
        return ts::shard_map(
            [&](ts::Array b) {
              ts::Array r = ts::shard_map(
                  [](ts::Array c) {
                    ts::Array i = ts::axis_index("x").astype(c.dtype()), j = ts::axis_index("y").astype(c.dtype());
                    return ts::psum(c * (i + 1.0), "y") + ts::psum(c, ts::AxisName{"x", "y"}) + j;
                  },
                  mesh, P(ts::None, "y"), P(ts::None, "y"))(b);
              return ts::psum(r, "x") + b;
            },
            mesh, P("x"), P("x"), {.axis_names = {"x"}})(xs[0]);
      };
      CHECK_SM(nested, {a});
      // The same program as one shard_map manual over both axes.
      auto flat = [&](const std::vector<ts::Array>& xs) {
        return ts::shard_map(
            [](ts::Array c) {
              ts::Array i = ts::axis_index("x").astype(c.dtype()), j = ts::axis_index("y").astype(c.dtype());
              ts::Array r = ts::psum(c * (i + 1.0), "y") + ts::psum(c, ts::AxisName{"x", "y"}) + j;
              return ts::psum(r, "x") + c;
            },
            mesh, P("x", "y"), P("x", "y"))(xs[0]);
      };
      ts::Array got = ts::jit(nested)(std::vector<ts::Array>{a});
      ts::Array want = flat({a});
      CHECK(ts::testing::compare_arrays(ts::testing::host_of(got), ts::testing::host_of(want), 0, 0) == "");
    }
  }
  // Three levels on a 2x2x2 mesh, the inner ones taking what is left.
  ts::Mesh m3 = ts::make_mesh({2, 2, 2}, {"x", "y", "z"});
  ts::Array a = ts::arange(64.0f).reshape({4, 4, 4});
  auto three = [&](const std::vector<ts::Array>& xs) {
    return ts::shard_map(
        [&](ts::Array b) {
          return ts::shard_map(
              [&](ts::Array c) {
                return ts::shard_map([](ts::Array d) { return ts::psum(d, ts::AxisName{"x", "y", "z"}) * 1.0; }, m3,
                                     P(ts::None, ts::None, "z"), P())(c);
              },
              m3, P(ts::None, "y"), P(), {.axis_names = {"y"}})(b);
        },
        m3, P("x"), P(), {.axis_names = {"x"}})(xs[0]);
  };
  CHECK_SM(three, {a});
  auto s = ts::sum(ts::reshape(a, {2, 2, 2, 2, 2, 2}), {0, 2, 4}).to_vector<float>();
  CHECK(ts::jit(three)(std::vector<ts::Array>{a}).to_vector<float>() == s);
}

TEST_CASE("partial manual and nested shard_map: gradients against finite differences") {
  std::mt19937 rng(24);
  for (ts::Shape ms : {ts::Shape{2, 4}, ts::Shape{4, 2}, ts::Shape{2, 3}}) {
    ts::Mesh mesh = shuffled_mesh(rng, ms, {"x", "y"});
    CAPTURE(mesh.str());
    const int nx = int(ms[0]), ny = int(ms[1]);
    ts::Array x = ts::device_put(random_array(rng, {nx * 2, ny * 2}, ts::DType::float64) + 0.5,
                                 ts::NamedSharding(mesh, P("x", "y")));
    ts::Array w = random_array(rng, {ny * 2, 3}, ts::DType::float64) + 0.25;
    using F = std::function<ts::Array(ts::Array, ts::Array)>;
    std::vector<std::pair<const char*, F>> cases = {
        {"partial manual: a contraction over the automatic axis, psum over x",
         [&](ts::Array xs, ts::Array ws) {
           ts::Array y = ts::shard_map([](ts::Array b, ts::Array v) { return ts::psum(ts::tanh(ts::matmul(b, v)), "x"); },
                                       mesh, {P("x"), P()}, P(), {.axis_names = {"x"}})(xs, ws);
           return ts::sum(y * y);
         }},
        {"nested: inner psum over y of an outer-varying value, outer psum over x",
         [&](ts::Array xs, ts::Array ws) {
           ts::Array y = ts::shard_map(
               [&](ts::Array b, ts::Array v) {
                 ts::Array r = ts::shard_map(
                     [](ts::Array c, ts::Array u) {
                       return ts::psum(ts::matmul(ts::sin(c), u), "y") * ts::psum(ts::sum(c), ts::AxisName{"x", "y"});
                     },
                     mesh, {P(ts::None, "y"), P("y")}, P())(b, v);
                 return ts::psum(r * r, "x");
               },
               mesh, {P("x"), P()}, P(), {.axis_names = {"x"}})(xs, ws);
           return ts::sum(y);
         }},
        {"nested: a psum over x, in the inner body, of a value invariant over x (its transpose is a psum)",
         [&](ts::Array xs, ts::Array ws) {
           ts::Array y = ts::shard_map(
               [&](ts::Array b, ts::Array v) {
                 return ts::shard_map(
                     [](ts::Array c, ts::Array u) {
                       ts::Array inv = ts::psum(ts::psum(ts::sum(ts::sin(u)), "x"), "y");
                       return inv * inv + ts::psum(ts::sum(c * c), ts::AxisName{"x", "y"});
                     },
                     mesh, {P(ts::None, "y"), P("y")}, P())(b, v);
               },
               mesh, {P("x"), P()}, P(), {.axis_names = {"x"}})(xs, ws);
           return ts::sum(y);
         }},
    };
    for (auto& [label, f] : cases) {
      const std::string name = label;
      CAPTURE(name);
      ts::Array gx = ts::jit(ts::grad<0>(f))(x, w);
      ts::Array gw = ts::grad<1>(f)(x, w);
      auto gxv = gx.to_vector<double>(), gwv = gw.to_vector<double>();
      auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
      const double h = 1e-6;
      auto fd = [&](std::vector<double> xx, std::vector<double> ww) {
        return f(ts::array(xx, x.shape()), ts::array(ww, w.shape())).to_vector<double>()[0];
      };
      for (size_t i = 0; i < xv.size(); i += 3) {
        auto xp = xv, xm = xv;
        xp[i] += h, xm[i] -= h;
        CHECK(gxv[i] == doctest::Approx((fd(xp, wv) - fd(xm, wv)) / (2 * h)).epsilon(1e-5).scale(1));
      }
      for (size_t i = 0; i < wv.size(); i += 2) {
        auto wp = wv, wm = wv;
        wp[i] += h, wm[i] -= h;
        CHECK(gwv[i] == doctest::Approx((fd(xv, wp) - fd(xv, wm)) / (2 * h)).epsilon(1e-5).scale(1));
      }
    }
  }
}

TEST_CASE("partial manual and nested shard_map: JAX's errors") {
  auto mesh = ts::make_mesh({2, 2}, {"x", "y"});
  ts::Array a = ts::zeros({4, 4});
  auto id = [](ts::Array b) { return b; };
  // A spec naming an automatic axis.
  CHECK_THROWS_AS(ts::shard_map(id, mesh, P("x", "y"), P("x"), {.axis_names = {"x"}})(a), ts::ValueError);
  CHECK_THROWS_AS(ts::shard_map(id, mesh, P("x"), P(ts::None, "y"), {.axis_names = {"x"}})(a), ts::ValueError);
  CHECK_THROWS_AS(ts::shard_map(id, mesh, P("x"), P("x"), {.axis_names = {"w"}})(a), ts::ValueError);
  // Collectives over an automatic axis: unbound.
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return ts::psum(b, "y"); }, mesh, P("x"), P("x"),
                                {.axis_names = {"x"}})(a),
                  ts::NameError);
  // A constraint naming a manual axis inside the body.
  CHECK_THROWS_AS(ts::shard_map([&](ts::Array b) { return ts::with_sharding_constraint(b, ts::NamedSharding(mesh, P("x"))); },
                                mesh, P("x"), P("x"), {.axis_names = {"x"}})(a),
                  ts::ShardingError);
  // Nesting: over an axis already manual, with none left, over another mesh.
  CHECK_THROWS_AS(ts::shard_map([&](ts::Array b) { return ts::shard_map(id, mesh, P("x"), P("x"), {.axis_names = {"x"}})(b); },
                                mesh, P("x"), P("x"), {.axis_names = {"x"}})(a),
                  ts::ValueError);
  CHECK_THROWS_AS(ts::shard_map([&](ts::Array b) { return ts::shard_map(id, mesh, P(), P())(b); }, mesh, P("x"), P("x"))(a),
                  ts::ValueError);
  auto other = ts::make_mesh({4}, {"z"});
  CHECK_THROWS_AS(ts::shard_map([&](ts::Array b) { return ts::shard_map(id, other, P(), P())(b); }, mesh, P("x"), P("x"),
                                {.axis_names = {"x"}})(a),
                  ts::ValueError);
  // The inner out_spec's replication claim is checked over the inner axes.
  CHECK_THROWS_AS(
      ts::shard_map([&](ts::Array b) { return ts::shard_map(id, mesh, P(ts::None, "y"), P())(b); }, mesh, P("x"), P("x"),
                    {.axis_names = {"x"}})(a),
      ts::ShardingError);
}

TEST_CASE("gradients taken inside a shard_map body follow JAX's typing") {
  auto mesh = ts::make_mesh({4}, {"x"});
  ts::Array u = ts::array({3.0f});
  ts::Array b = ts::arange(1.0f, 5.0f);
  // A psum of an invariant value is 4u^2: its gradient is 8u (a pvary before the psum).
  auto inv = ts::shard_map([](ts::Array v) { return ts::grad([](ts::Array w) { return ts::sum(ts::psum(w * w, "x")); })(v); },
                           mesh, P(), P());
  CHECK(inv(u).to_vector<float>() == std::vector<float>{24});
  // A varying value: typed, the psum transposes to a pvary (2b); untyped
  // (check_vma=false), to a psum (4 * 2b), as JAX.
  auto body = [](ts::Array v) { return ts::grad([](ts::Array w) { return ts::sum(ts::psum(w * w, "x")); })(v); };
  CHECK(ts::shard_map(body, mesh, P("x"), P("x"))(b).to_vector<float>() == std::vector<float>{2, 4, 6, 8});
  CHECK(ts::shard_map(body, mesh, P("x"), P("x"), {.check_vma = false})(b).to_vector<float>() ==
        std::vector<float>{8, 16, 24, 32});
  // An invariant value meeting a varying one: its gradient sums over the devices.
  auto mixed = ts::shard_map(
      [](ts::Array v, ts::Array w) { return ts::grad([&](ts::Array z) { return ts::sum(z * w); })(v); }, mesh,
      {P(), P("x")}, P());
  CHECK(mixed(u, b).to_vector<float>() == std::vector<float>{10});
}
