// shard_map and the collectives: every collective and option against the
// reference interpreter (which runs the body on every device's blocks at
// once, independently of the partitioner and the runtime's collectives) on
// meshes of 1..8 devices, 1-D and 2-D, subsets of the devices, several
// dtypes; the tutorial's values; JAX's errors.
#include <doctest/doctest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"
#include "tests/common/run_graph.hpp"
#include "tracer/interpreter.hpp"

namespace ts = tessel;
using ts::P;
using ts::testing::check;
using ts::testing::host_of;
using ts::testing::random_array;

// The caller's line in failure messages.
#define CHECK_SM(...)            \
  do {                           \
    INFO("from line ", __LINE__); \
    check(__VA_ARGS__);          \
  } while (0)

TEST_CASE("shard_map: the tutorial's values") {
  auto mesh = ts::make_mesh({8}, {"x"});
  ts::Array x = ts::arange(32.0f);
  // The elementwise function over P('x'), the block shape seen inside.
  ts::Shape seen;
  auto f = ts::shard_map([&](ts::Array b) { seen = b.shape(); return ts::sin(b) * 2.0 + 1.0; }, mesh, P("x"), P("x"));
  ts::Array y = f(x);
  CHECK(seen == ts::Shape{4});
  auto want = (ts::sin(x) * 2.0 + 1.0).to_vector<float>();
  CHECK(y.to_vector<float>() == want);
  CHECK(y.sharding() == ts::Sharding(ts::NamedSharding(mesh, P("x"))));
  // Per-shard sums (keepdims) and the psum version with out_specs P().
  auto sums = ts::shard_map([](ts::Array b) { return ts::sum(b, {0}, true); }, mesh, P("x"), P("x"))(x);
  CHECK(sums.to_vector<float>() == std::vector<float>{6, 22, 38, 54, 70, 86, 102, 118});
  auto total = ts::shard_map([](ts::Array b) { return ts::psum(ts::sum(b), "x"); }, mesh, P("x"), P())(x);
  CHECK(total.to_vector<float>() == std::vector<float>{496});
  CHECK(total.shape().empty());
  // Inside jit, and jit inside it.
  auto inner = ts::jit([](ts::Array b) { return ts::psum(b * 2.0, "x"); });
  auto g = ts::jit([&](ts::Array a) { return ts::shard_map([&](ts::Array b) { return inner(ts::sum(b)); }, mesh, P("x"), P())(a); });
  CHECK(g(x).to_vector<float>() == std::vector<float>{992});
  // The lowered text shows the manual region and its specs; the compiled one names the collective.
  auto lowered = g.lower(x);
  CHECK(lowered.as_text().find("shard-map(") != std::string::npos);
  CHECK(lowered.as_text().find("in_specs=(P('x'))") != std::string::npos);
  CHECK(lowered.compile().as_text().find("all-reduce") != std::string::npos);
  // communication() and explain_sharding cover it.
  auto comm = lowered.compile().communication();
  REQUIRE(comm.size() == 1);
  CHECK(comm[0].collective == "all-reduce");
  CHECK(lowered.explain_sharding().find("shard_map's out_specs") != std::string::npos);
}

TEST_CASE("shard_map: every collective against the reference interpreter, 1..8 devices and 2-D meshes") {
  std::mt19937 rng(14);
  struct M {
    ts::Shape shape;
    std::vector<std::string> names;
  };
  std::vector<M> meshes = {{{1}, {"x"}}, {{2}, {"x"}}, {{3}, {"x"}}, {{4}, {"x"}}, {{5}, {"x"}}, {{6}, {"x"}},
                           {{7}, {"x"}}, {{8}, {"x"}}, {{2, 4}, {"x", "y"}}, {{4, 2}, {"x", "y"}}};
  int checked = 0;
  for (auto& ms : meshes) {
    const int n = int(ts::numel(ms.shape));
    auto devs = ts::devices();
    std::shuffle(devs.begin(), devs.end(), rng);  // any subset, any order
    devs.resize(size_t(n), ts::Device(0));
    ts::Mesh mesh(devs, ms.shape, ms.names);
    CAPTURE(mesh.str());
    const bool two = ms.names.size() == 2;
    const std::string ax = ms.names.back();  // the axis the collectives run over
    const int k = int(ms.shape.back());
    ts::AxisName all = two ? ts::AxisName{"x", "y"} : ts::AxisName{"x"};
    ts::PartitionSpec rows = two ? P({"x", "y"}) : P("x");
    for (ts::DType t : {ts::DType::float32, ts::DType::int32, ts::DType::float64, ts::DType::int64, ts::DType::uint32}) {
      const std::string dtype = ts::dtype_name(t);
      CAPTURE(dtype);
      ts::Array a = random_array(rng, {n * 2, 3}, t);
      ts::Array sq = random_array(rng, {n * k, k}, t);
      auto sm = [&](auto body, ts::PartitionSpec in, ts::PartitionSpec out, bool vma = true) {
        return [=](const std::vector<ts::Array>& xs) {
          return ts::shard_map(body, mesh, in, out, {.check_vma = vma})(xs[0]);
        };
      };
      // Reductions over one axis and over all.
      CHECK_SM(sm([&](ts::Array b) { return ts::psum(b, ax); }, rows, two ? P("x") : P()), {a});
      CHECK_SM(sm([&](ts::Array b) { return ts::pmax(b, all); }, rows, P()), {a});
      CHECK_SM(sm([&](ts::Array b) { return ts::pmin(b, all); }, rows, P()), {a});
      if (t != ts::DType::int32) check(sm([&](ts::Array b) { return ts::pmean(b, all); }, rows, P()), {a});
      // all_gather, tiled and stacked, along either dim.
      // (all_gather's result stays varying in JAX's typing: out_spec P() needs check_vma=false)
      CHECK_SM(sm([&](ts::Array b) { return ts::all_gather(b, all, {.axis = 0, .tiled = true}); }, rows, P(), false), {a});
      CHECK_SM(sm([&](ts::Array b) { return ts::all_gather(b, all, {.axis = 1, .tiled = true}); }, rows, P(), false), {a});
      CHECK_SM(sm([&](ts::Array b) { return ts::reshape(ts::all_gather(b, ax, {.axis = 1}), {-1}); }, rows,
               two ? P("x") : P(), false),
            {a}, false);
      // psum_scatter: tiled, and untiled (the scattered dim has the axis size).
      CHECK_SM(sm([&](ts::Array b) { return ts::psum_scatter(b, ax, {.scatter_dimension = 0, .tiled = true}); }, rows,
               two ? P({"x", "y"}) : P("x")),
            {sq});
      CHECK_SM(sm([&](ts::Array b) { return ts::psum_scatter(b, ax, {.scatter_dimension = 1}); }, rows,
               two ? P({"x", "y"}) : P("x")),
            {sq});
      // ppermute: a shift, and a partial permutation (devices without a source get zeros).
      std::vector<std::pair<int, int>> shift, partial;
      for (int i = 0; i < k; ++i) shift.push_back({i, (i + 1) % k});
      if (k > 1) partial.push_back({0, k - 1});
      CHECK_SM(sm([&](ts::Array b) { return ts::ppermute(b, ax, shift); }, rows, rows), {a});
      CHECK_SM(sm([&](ts::Array b) { return ts::ppermute(b, ax, partial); }, rows, rows), {a});
      // all_to_all: tiled and untiled.
      CHECK_SM(sm([&](ts::Array b) { return ts::all_to_all(b, ax, 1, 0, {.tiled = true}); }, rows, rows), {sq});
      CHECK_SM(sm([&](ts::Array b) { return ts::all_to_all(ts::reshape(b, {k, -1}), ax, 0, 1); }, rows, rows), {sq});
      if (t == ts::DType::float32 || t == ts::DType::int64) {
        // 4-D blocks, every split and concat dim (the runtime copies the runs contiguous in both layouts).
        ts::Array cube = random_array(rng, {n * k, 2 * k, 3, k}, t);
        for (int split : {0, 1, 3})
          for (int concat = 0; concat < 4; ++concat) {
            CAPTURE(split);
            CAPTURE(concat);
            CHECK_SM(sm([&](ts::Array b) { return ts::all_to_all(b, ax, split, concat, {.tiled = true}); }, rows, rows),
                     {cube});
          }
      }
      // axis_index, axis_size, pbroadcast.
      CHECK_SM(sm([&](ts::Array b) { return b * ts::axis_index(ax).astype(t) + double(ts::axis_size(all)); }, rows, rows),
            {a});
      CHECK_SM(sm([&](ts::Array b) { return ts::pbroadcast(b, ax, k - 1); }, rows, two ? P("x") : P()), {a});
      checked += 16;
    }
  }
  CHECK(checked == 16 * 5 * 10);
}

TEST_CASE("shard_map: collectives' closed forms") {
  auto mesh = ts::make_mesh({4, 2}, {"x", "y"});
  ts::Array x = ts::arange(8.0f).reshape({8, 1});
  // Untiled all_gather stacks; psum over a tuple of names sums all 8.
  auto g = ts::shard_map([](ts::Array b) { return ts::all_gather(b, "y"); }, mesh, P({"x", "y"}), P("x"),
                         {.check_vma = false})(x);
  CHECK(g.shape() == ts::Shape{8, 1, 1});
  auto s = ts::shard_map([](ts::Array b) { return ts::psum(b, {"x", "y"}); }, mesh, P({"x", "y"}), P())(x);
  CHECK(s.to_vector<float>() == std::vector<float>{28});
  // axis_index over (x, y) is row-major: device k of the flattened mesh has index k.
  auto idx = ts::shard_map([](ts::Array b) { return ts::axis_index({"x", "y"}).reshape({1}); }, mesh,
                           P({"x", "y"}), P({"x", "y"}))(x);
  CHECK(idx.to_vector<int>() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // No arguments at all: the program runs on the shard_map's mesh.
  auto ids = ts::shard_map([] { return ts::axis_index("x").reshape({1}); }, ts::make_mesh({8}, {"x"}),
                           std::vector<ts::PartitionSpec>{}, P("x"))();
  CHECK(ids.to_vector<int>() == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // A ring shift along y.
  auto r = ts::shard_map([](ts::Array b) { return ts::ppermute(b, "y", {{0, 1}, {1, 0}}); }, mesh, P({"x", "y"}),
                         P({"x", "y"}))(x);
  CHECK(r.to_vector<float>() == std::vector<float>{1, 0, 3, 2, 5, 4, 7, 6});
}

TEST_CASE("shard_map: collectives whose results outgrow the caches, against closed forms") {
  // 4 MiB per device: each collective's results over 8 devices pass
  // rt::kStreamBytes (32 MiB), so psum and all_gather take their one-pass
  // paths with streamed stores, all_to_all and ppermute stream too; an odd
  // element count leaves unaligned pieces and tails.
  const std::int64_t n = ts::device_count();
  auto mesh = ts::make_mesh({n}, {"x"});
  for (std::int64_t per : {std::int64_t(1) << 20, (std::int64_t(1) << 20) + 5}) {
    INFO("elements per device: ", per);
    // Small integers: every sum is exact in float32, in any order.
    std::vector<float> host(std::size_t(per * n));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i % 1021);
    ts::Array x = ts::device_put(ts::array(host), ts::NamedSharding(mesh, P("x")));
    auto run = [&](auto body, ts::PartitionSpec out) {
      return ts::jit(ts::shard_map(body, mesh, P("x"), out, {.check_vma = false}))(x).template to_vector<float>();
    };
    std::vector<float> sum(std::size_t(per), 0.0f);
    for (std::int64_t d = 0; d < n; ++d)
      for (std::int64_t i = 0; i < per; ++i) sum[std::size_t(i)] += host[std::size_t(d * per + i)];
    CHECK(run([](ts::Array b) { return ts::psum(b, "x"); }, P()) == sum);
    CHECK(run([](ts::Array b) { return ts::all_gather(b, "x", {.tiled = true}); }, P()) == host);
    std::vector<float> shifted(host.size());
    for (std::int64_t d = 0; d < n; ++d)
      std::copy_n(host.begin() + std::ptrdiff_t(((d + n - 1) % n) * per), per, shifted.begin() + std::ptrdiff_t(d * per));
    std::vector<std::pair<int, int>> shift;
    for (int i = 0; i < n; ++i) shift.push_back({i, int((i + 1) % n)});
    CHECK(run([&](ts::Array b) { return ts::ppermute(b, "x", shift); }, P("x")) == shifted);
    if (per % n == 0) {
      // Device r's result: chunk r of every device's block, in device order.
      const std::int64_t c = per / n;
      std::vector<float> swapped;
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t k = 0; k < n; ++k)
          swapped.insert(swapped.end(), host.begin() + std::ptrdiff_t(k * per + r * c),
                         host.begin() + std::ptrdiff_t(k * per + (r + 1) * c));
      CHECK(run([](ts::Array b) { return ts::all_to_all(b, "x", 0, 0, {.tiled = true}); }, P("x")) == swapped);
    }
  }
}

TEST_CASE("shard_map: JAX's errors") {
  auto mesh = ts::make_mesh({4}, {"x"});
  ts::Array x = ts::arange(10.0f);
  // Blocks that do not divide: the argument, its shape and the spec.
  try {
    ts::shard_map([](ts::Array b) { return b; }, mesh, P("x"), P("x"))(x);
    FAIL("no error");
  } catch (const ts::ShardingError& e) {
    std::string m = e.what();
    CHECK(m.find("float32[10]") != std::string::npos);
    CHECK(m.find("P('x')") != std::string::npos);
    CHECK(m.find("not evenly divisible") != std::string::npos);
  }
  ts::Array y = ts::arange(8.0f);
  // An out_spec claiming replication of a varying value; check_vma=false (and check_rep) turn it off.
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return b; }, mesh, P("x"), P())(y), ts::ShardingError);
  CHECK(ts::shard_map([](ts::Array b) { return b; }, mesh, P("x"), P(), {.check_vma = false})(y).shape() ==
        ts::Shape{2});
  CHECK(ts::shard_map([](ts::Array b) { return b; }, mesh, P("x"), P(), {.check_rep = false})(y).shape() ==
        ts::Shape{2});
  // psum makes it invariant: fine.
  CHECK(ts::shard_map([](ts::Array b) { return ts::psum(b, "x"); }, mesh, P("x"), P())(y).shape() == ts::Shape{2});
  // Collectives outside a shard_map, or over an axis it does not bind.
  CHECK_THROWS_AS(ts::psum(y, "x"), ts::NameError);
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return ts::psum(b, "z"); }, mesh, P("x"), P())(y), ts::NameError);
  CHECK_THROWS_AS(ts::axis_index("x"), ts::NameError);
  // Specs of the wrong count or rank; bad collective arguments.
  CHECK_THROWS_AS(ts::shard_map([](ts::Array a, ts::Array b) { return a + b; }, mesh, {P("x")}, P("x"))(y, y),
                  ts::ValueError);
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return b; }, mesh, P("x", "x"), P("x"))(y), ts::ShardingError);
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return ts::psum_scatter(b, "x"); }, mesh, P("x"), P("x"))(y),
                  ts::ShapeError);
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return ts::ppermute(b, "x", {{0, 4}}); }, mesh, P("x"), P("x"))(y),
                  ts::ValueError);
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return ts::ppermute(b, "x", {{0, 1}, {2, 1}}); }, mesh, P("x"),
                                P("x"))(y),
                  ts::ValueError);
  // JAX's typing: all_gather's result varies, so out_specs P() is rejected.
  CHECK_THROWS_AS(ts::shard_map([](ts::Array b) { return ts::all_gather(b, "x", {.tiled = true}); }, mesh, P("x"),
                                P())(y),
                  ts::ShardingError);
}

TEST_CASE("shard_map: closed-over arrays are replicated inputs; the sigmoid layer three ways agree") {
  auto mesh = ts::make_mesh({8}, {"x"});
  std::mt19937 rng(3);
  ts::Array w = random_array(rng, {16, 4}, ts::DType::float32);
  ts::Array b = random_array(rng, {4}, ts::DType::float32);
  ts::Array x = random_array(rng, {32, 16}, ts::DType::float32);
  auto layer = [&](ts::Array xs) { return ts::nn::sigmoid(ts::matmul(xs, w) + b); };
  ts::Array plain = ts::jit(layer)(ts::device_put(x, ts::NamedSharding(mesh, P("x"))));
  ts::Array constrained = ts::jit([&](ts::Array xs) {
    return layer(ts::with_sharding_constraint(xs, ts::NamedSharding(mesh, P("x"))));
  })(x);
  ts::Array manual = ts::shard_map(layer, mesh, P("x"), P("x"))(x);  // w and b closed over
  CHECK(ts::testing::compare_arrays(host_of(manual), host_of(plain)) == "");
  CHECK(ts::testing::compare_arrays(host_of(constrained), host_of(plain)) == "");
  CHECK(manual.sharding() == plain.sharding());
}

TEST_CASE("shard_map: concurrent programs from several host threads on overlapping devices") {
  // Each thread runs its own collective program on its own (overlapping) set
  // of devices, many times; every result must be its own, exactly.
  auto all = ts::devices();
  struct Job {
    std::vector<int> devs;
    int kind;
  };
  std::vector<Job> jobs = {{{0, 1, 2, 3}, 0}, {{2, 3, 4, 5}, 1}, {{0, 1, 2, 3, 4, 5, 6, 7}, 2}, {{5, 4, 7, 6}, 0}};
  // Small programs: with inline runs allowed, a thread whose devices are idle
  // runs its program itself in lockstep while the others queue theirs (all
  // paths at once); without, every run is queued, as a lockstep launch
  // (where the devices' threads outnumber the cores) or on the devices'
  // threads.
  for (const auto& [inline_runs, lockstep] : {std::pair{true, true}, std::pair{false, true}, std::pair{false, false}}) {
    CAPTURE(inline_runs);
    CAPTURE(lockstep);
    ts::config().inline_cheap_programs = inline_runs;  // before the threads start
    ts::config().lockstep_launches = lockstep;
    std::vector<std::string> failures(jobs.size());
    std::vector<std::thread> threads;
    for (size_t j = 0; j < jobs.size(); ++j) {
      threads.emplace_back([&, j] {
        try {
          std::vector<ts::Device> d;
          for (int i : jobs[j].devs) d.push_back(all[size_t(i)]);
          const int n = int(d.size());
          ts::Mesh mesh(d, {n}, {"x"});
          for (int rep = 0; rep < 25; ++rep) {
            const float base = float(j * 1000 + rep);
            ts::Array x = ts::arange(float(n * 4)) + base;
            std::vector<float> got, want;
            if (jobs[j].kind == 0) {
              got = ts::shard_map([](ts::Array b) { return ts::psum(b, "x"); }, mesh, P("x"), P())(x).to_vector<float>();
              for (int i = 0; i < 4; ++i) {
                float s = 0;
                for (int k = 0; k < n; ++k) s += float(k * 4 + i) + base;
                want.push_back(s);
              }
            } else if (jobs[j].kind == 1) {
              got = ts::shard_map([](ts::Array b) { return ts::all_gather(b, "x", {.tiled = true}); }, mesh, P("x"), P(),
                                  {.check_vma = false})(x)
                        .to_vector<float>();
              want = x.to_vector<float>();
            } else {
              std::vector<std::pair<int, int>> shift;
              for (int k = 0; k < n; ++k) shift.push_back({k, (k + 1) % n});
              got = ts::shard_map([&](ts::Array b) { return ts::ppermute(b, "x", shift); }, mesh, P("x"), P("x"))(x)
                        .to_vector<float>();
              auto v = x.to_vector<float>();
              for (int k = 0; k < n; ++k)
                for (int i = 0; i < 4; ++i) want.push_back(v[size_t(((k + n - 1) % n) * 4 + i)]);
            }
            if (got != want) {
              failures[j] = "job " + std::to_string(j) + " rep " + std::to_string(rep) + " got a wrong result";
              return;
            }
          }
        } catch (const std::exception& e) {
          failures[j] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (auto& f : failures) CHECK(f == "");
  }
  ts::config().inline_cheap_programs = true;
  ts::config().lockstep_launches = true;
}

TEST_CASE("shard_map: gradients through collectives against finite differences, 1..8 devices") {
  std::mt19937 rng(5);
  int checked = 0;
  for (int n = 1; n <= 8; ++n) {
    auto devs = ts::devices();
    std::shuffle(devs.begin(), devs.end(), rng);
    devs.resize(size_t(n), ts::Device(0));
    ts::Mesh mesh(devs, {n}, {"x"});
    CAPTURE(mesh.str());
    std::vector<std::pair<int, int>> shift;
    for (int i = 0; i < n; ++i) shift.push_back({i, (i + 1) % n});
    ts::Array x = random_array(rng, {2 * n, n}, ts::DType::float64) + 0.5;
    ts::Array w = random_array(rng, {n}, ts::DType::float64) + 0.25;
    using Body = std::function<ts::Array(ts::Array, ts::Array)>;
    struct Case {
      const char* name;
      Body body;
      ts::PartitionSpec out;
    };
    std::vector<Case> cases = {
        {"psum of a product with a replicated weight", [](ts::Array b, ts::Array v) { return ts::psum(ts::sin(b) * v, "x"); }, P()},
        {"pmean then a product", [](ts::Array b, ts::Array v) { return ts::pmean(b * b, "x") * v; }, P()},
        {"psum of an invariant value (n times it)", [](ts::Array b, ts::Array v) { return ts::psum(v * v, "x") + ts::sum(b); }, P("x")},
        {"all_gather", [](ts::Array b, ts::Array v) { return ts::all_gather(b * v, "x", {.tiled = true}) * 2.0; }, P("x")},
        {"psum_scatter", [](ts::Array b, ts::Array v) { return ts::psum_scatter(ts::tanh(b) * v, "x", {.scatter_dimension = 1, .tiled = true}); }, P("x")},
        {"ppermute", [&](ts::Array b, ts::Array v) { return ts::ppermute(b * b, "x", shift) * v; }, P("x")},
        {"all_to_all", [](ts::Array b, ts::Array v) {
           ts::Array y = ts::all_to_all(b * v, "x", 1, 0, {.tiled = true});
           return ts::sin(y) * y;
         }, P("x")},
        {"axis_index", [](ts::Array b, ts::Array v) { return b * ts::axis_index("x").astype(ts::DType::float64) * v; }, P("x")},
    };
    for (int k = 0; k < 2 * int(cases.size()); ++k) {
      // Each case with JAX's typing (check_vma) and without it.
      const Case& c = cases[size_t(k) / 2];
      const bool vma = k % 2 == 0;
      const std::string name = c.name;
      CAPTURE(name);
      CAPTURE(vma);
      auto f = [&](ts::Array xs, ts::Array ws) {
        ts::Array y = ts::shard_map(c.body, mesh, {P("x"), P()}, c.out, {.check_vma = vma})(xs, ws);
        return ts::sum(y * y);
      };
      ts::Array gx = ts::jit(ts::grad<0>(f))(x, w);
      ts::Array gw = ts::grad<1>(f)(x, w);  // eagerly too
      auto gxv = gx.to_vector<double>(), gwv = gw.to_vector<double>();
      auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
      const double h = 1e-6;
      auto fd = [&](std::vector<double> xx, std::vector<double> ww) {
        return f(ts::array(xx, x.shape()), ts::array(ww, w.shape())).to_vector<double>()[0];
      };
      for (int i : {0, int(xv.size()) / 2, int(xv.size()) - 1}) {
        auto xp = xv, xm = xv;
        xp[size_t(i)] += h, xm[size_t(i)] -= h;
        const double want = (fd(xp, wv) - fd(xm, wv)) / (2 * h);
        CHECK(gxv[size_t(i)] == doctest::Approx(want).epsilon(1e-5).scale(1));
      }
      for (int i : {0, int(wv.size()) - 1}) {
        auto wp = wv, wm = wv;
        wp[size_t(i)] += h, wm[size_t(i)] -= h;
        const double want = (fd(xv, wp) - fd(xv, wm)) / (2 * h);
        CHECK(gwv[size_t(i)] == doctest::Approx(want).epsilon(1e-5).scale(1));
      }
      // Forward mode agrees with reverse mode: <grad, t> = jvp(f)(t).
      ts::Array tx = random_array(rng, x.shape(), ts::DType::float64);
      ts::Array tw = random_array(rng, w.shape(), ts::DType::float64);
      auto [primal, tangent] = ts::jvp(f, std::make_tuple(x, w), std::make_tuple(tx, tw));
      const double dot = ts::sum(gx * tx).to_vector<double>()[0] + ts::sum(gw * tw).to_vector<double>()[0];
      CHECK(tangent.to_vector<double>()[0] == doctest::Approx(dot).epsilon(1e-9).scale(1));
      ++checked;
    }
  }
  CHECK(checked == 8 * 8 * 2);
}

namespace {

// Every addressable shard's own buffer against `want`, the global float32
// values (row-major).
void check_every_shard(const ts::Array& a, const std::vector<float>& want) {
  CHECK(ts::testing::shards_hold(a, ts::host_array(ts::DType::float32, a.shape(), want.data())) == "");
}

}  // namespace

TEST_CASE("shard_map: a replicated collective result is written once per group in lockstep runs") {
  if (ts::device_count() < 8) return;
  // An all-reduce's or all-gather's result is the same on every member of
  // its group: in a lockstep run inside one process (a cheap program on idle
  // devices always; a larger one where the devices' threads outnumber the
  // cores) the group's devices hold one block. Every device's result is
  // checked, the shared blocks counted, and the results consumed by later
  // work that differs per device (a shared temporary).
  const bool share_cores =
      std::int64_t(ts::device_count()) * ts::threads_per_device() > std::int64_t(std::thread::hardware_concurrency());
  auto mesh = ts::make_mesh({2, 4}, {"x", "y"});
  for (std::int64_t cols : {std::int64_t(8), std::int64_t(1) << 17}) {  // cheap; 4 MiB per device
    CAPTURE(cols);
    const std::int64_t rows = 4;
    std::vector<float> host(std::size_t(rows * cols));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i % 1021);  // every sum exact in float32
    ts::Array x = ts::device_put(ts::array(host).reshape({rows, cols}), ts::NamedSharding(mesh, P("x", "y")));
    for (const bool lockstep : {true, false}) {
      CAPTURE(lockstep);
      ts::config().lockstep_launches = lockstep;
      ts::config().inline_cheap_programs = lockstep;
      const bool shares = lockstep && (cols == 8 || share_cores);
      // psum over y: row block r of the result is the sum of row block r's
      // column blocks, the same on the 4 devices of mesh row r.
      const std::int64_t cb = cols / 4;
      std::vector<float> sum(std::size_t(rows * cb), 0.0f);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) sum[std::size_t(r * cb + c % cb)] += host[std::size_t(r * cols + c)];
      ts::Array s = ts::jit(ts::shard_map([](ts::Array b) { return ts::psum(b, "y"); }, mesh, P("x", "y"), P("x"),
                                          {.check_vma = false}))(x);
      check_every_shard(s, sum);
      // all_gather over x: every device of mesh column c holds column block c whole.
      ts::Array g = ts::jit(ts::shard_map([](ts::Array b) { return ts::all_gather(b, "x", {.tiled = true}); }, mesh,
                                          P("x", "y"), P(ts::None, "y"), {.check_vma = false}))(x);
      check_every_shard(g, host);
      std::set<std::uintptr_t> s_blocks, g_blocks;
      for (const auto& sh : s.addressable_shards()) s_blocks.insert(sh.unsafe_buffer_pointer());
      for (const auto& sh : g.addressable_shards()) g_blocks.insert(sh.unsafe_buffer_pointer());
      if (shares) {
        CHECK(s_blocks.size() == 2);  // one per mesh row
        CHECK(g_blocks.size() == 4);  // one per mesh column
      }
      // A shared sum read by work that differs per device: (y index + 1) x
      // the row sum, then all-gathered over y; and the sum kept as a second
      // result after the first is dropped.
      std::vector<float> scaled(std::size_t(rows * cols));
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          scaled[std::size_t(r * cols + c)] = sum[std::size_t(r * cb + c % cb)] * float(c / cb + 1);
      auto both = ts::jit(ts::shard_map(
          [](ts::Array b) {
            ts::Array t = ts::psum(b, "y");
            ts::Array k = (ts::axis_index("y") + 1).astype(ts::float32);
            return std::vector<ts::Array>{t * k, t};
          },
          mesh, P("x", "y"), std::vector<P>{P("x", "y"), P("x")}, {.check_vma = false}))(x);
      ts::Array kept = both[1];
      both.clear();
      check_every_shard(kept, sum);
      check_every_shard(ts::jit(ts::shard_map(
                            [](ts::Array b) {
                              ts::Array t = ts::psum(b, "y");
                              return t * (ts::axis_index("y") + 1).astype(ts::float32);
                            },
                            mesh, P("x", "y"), P("x", "y"), {.check_vma = false}))(x),
                        scaled);
    }
  }
  ts::config().lockstep_launches = true;
  ts::config().inline_cheap_programs = true;
}

TEST_CASE("jit: work on a replicated value is done once per process in lockstep runs, and every device's result is right") {
  if (ts::device_count() < 8) return;
  // device_put gives the devices that hold the same box of an array one
  // block; a pure kernel or dot whose operands are the same blocks on
  // several devices runs once for them in a lockstep run inside one process
  // (always for a cheap program on idle devices; for a larger one where the
  // devices' threads outnumber the cores). Work that depends on the device
  // (axis_index) stays per device. Every device's result is checked.
  const bool share_cores =
      std::int64_t(ts::device_count()) * ts::threads_per_device() > std::int64_t(std::thread::hardware_concurrency());
  auto mesh = ts::make_mesh({4, 2}, {"batch", "model"});
  for (std::int64_t k : {std::int64_t(4), std::int64_t(256)}) {  // cheap; not cheap
    CAPTURE(k);
    const std::int64_t rows = 8;
    std::vector<float> xs(std::size_t(rows * k)), ws(std::size_t(k * k)), bs(static_cast<std::size_t>(k));
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = float(int(i % 7) - 3);
    for (std::size_t i = 0; i < ws.size(); ++i) ws[i] = float(int(i % 5) - 2);
    for (std::size_t i = 0; i < bs.size(); ++i) bs[i] = float(int(i % 3) - 1);
    ts::Array x = ts::device_put(ts::array(xs).reshape({rows, k}), ts::NamedSharding(mesh, P("batch", ts::None)));
    ts::Array w = ts::device_put(ts::array(ws).reshape({k, k}), ts::NamedSharding(mesh, P()));
    ts::Array bias = ts::device_put(ts::array(bs), ts::NamedSharding(mesh, P()));
    // The replicas of a box share one block.
    std::set<std::uintptr_t> x_blocks, w_blocks;
    for (const auto& s : x.addressable_shards()) x_blocks.insert(s.unsafe_buffer_pointer());
    for (const auto& s : w.addressable_shards()) w_blocks.insert(s.unsafe_buffer_pointer());
    CHECK(x_blocks.size() == 4);
    CHECK(w_blocks.size() == 1);
    // relu(x w + b) + 1: exact in float32 (small integers). The bias's
    // broadcast tiles without the device's index (a tile of a broadcast is a
    // broadcast), so a batch row's two devices share it.
    std::vector<float> want(std::size_t(rows * k));
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < k; ++j) {
        float acc = bs[std::size_t(j)];
        for (std::int64_t l = 0; l < k; ++l) acc += xs[std::size_t(i * k + l)] * ws[std::size_t(l * k + j)];
        want[std::size_t(i * k + j)] = std::max(acc, 0.0f) + 1;
      }
    for (const bool lockstep : {true, false}) {
      CAPTURE(lockstep);
      ts::config().lockstep_launches = lockstep;
      ts::config().inline_cheap_programs = lockstep;
      ts::Array y =
          ts::jit([](ts::Array a, ts::Array b, ts::Array c) { return ts::nn::relu(ts::matmul(a, b) + c) + 1.0f; },
                  {.out_shardings = {ts::NamedSharding(mesh, P("batch", ts::None))}})(x, w, bias);
      check_every_shard(y, want);
      std::set<std::uintptr_t> y_blocks;
      for (const auto& s : y.addressable_shards()) y_blocks.insert(s.unsafe_buffer_pointer());
      if (lockstep && (k == 4 || share_cores)) CHECK(y_blocks.size() == 4);  // one per batch block
      // The same work plus the device's model index: per device, and right.
      ts::Array z = ts::jit(ts::shard_map(
          [](ts::Array a, ts::Array b, ts::Array c) {
            return ts::nn::relu(ts::matmul(a, b) + c) + 1.0f + ts::axis_index("model").astype(ts::float32);
          },
          mesh, std::vector<P>{P("batch", ts::None), P(), P()}, P("batch", "model"), {.check_vma = false}))(x, w, bias);
      std::vector<float> want_z;
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t m = 0; m < 2; ++m)
          for (std::int64_t j = 0; j < k; ++j) want_z.push_back(want[std::size_t(i * k + j)] + float(m));
      check_every_shard(z, want_z);
    }
  }
  ts::config().lockstep_launches = true;
  ts::config().inline_cheap_programs = true;
}
