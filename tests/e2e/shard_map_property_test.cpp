// Property test: random shard_map programs (chains of elementwise ops and
// collectives over random axes of random 1-D and 2-D meshes of 1..8 devices,
// random in_specs and out_specs, three dtypes), compiled and partitioned,
// against the reference interpreter running the body on every device's
// blocks at once. Programs whose out_specs claim a replication the body does
// not prove are rejected at trace time (ShardingError) and counted.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <set>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"
#include "tests/common/run_graph.hpp"
#include "tracer/interpreter.hpp"

namespace ts = tessel;
using ts::P;

namespace {

ts::HostArray host_of(const ts::Array& a) {
  ts::Array f = a.astype(ts::DType::float64);
  auto v = f.to_vector<double>();
  ts::HostArray h = ts::host_array(ts::DType::float64, a.shape(), v.data());
  return h;
}

int pick(std::mt19937& rng, int n) { return int(rng() % unsigned(n)); }

}  // namespace

TEST_CASE("random shard_map programs equal the reference interpreter") {
  std::mt19937 rng(1414);
  struct M {
    ts::Shape shape;
    std::vector<std::string> names;
  };
  std::vector<M> meshes = {{{1}, {"x"}}, {{2}, {"x"}}, {{3}, {"x"}}, {{4}, {"x"}}, {{6}, {"x"}}, {{8}, {"x"}},
                           {{2, 2}, {"x", "y"}}, {{2, 4}, {"x", "y"}}, {{4, 2}, {"x", "y"}}, {{2, 3}, {"x", "y"}}};
  int run = 0, rejected = 0, collectives = 0, partial_run = 0;
  for (int trial = 0; trial < 90; ++trial) {
    const M& ms = meshes[size_t(trial) % meshes.size()];
    auto devs = ts::devices();
    std::shuffle(devs.begin(), devs.end(), rng);
    devs.resize(size_t(ts::numel(ms.shape)), ts::Device(0));
    ts::Mesh mesh(devs, ms.shape, ms.names);
    CAPTURE(trial);
    CAPTURE(mesh.str());
    const ts::DType dt = std::array<ts::DType, 3>{ts::DType::float32, ts::DType::float64, ts::DType::int32}[size_t(trial % 3)];
    // Global shape divisible by every axis product (blocks are even).
    const std::int64_t all = ts::numel(ms.shape);
    ts::Shape shape{all * (1 + pick(rng, 2)), all * (1 + pick(rng, 2))};
    // Every other program on a 2-D mesh is manual over x only: y stays
    // automatic in the body (the operand keeps its y split, constraints and
    // contractions over y inside).
    const bool partial = ms.names.size() == 2 && trial % 2 == 1;
    const std::vector<std::string> manual = partial ? std::vector<std::string>{"x"} : ms.names;
    auto random_spec_over = [&](const std::vector<std::string>& names) {
      std::vector<ts::PartitionSpec::Entry> e(2, ts::PartitionSpec::Entry(ts::None));
      for (auto& name : names) {
        int d = pick(rng, 3);
        if (d == 2) continue;
        auto axes = e[size_t(d)].axes();
        axes.push_back(name);
        e[size_t(d)] = ts::PartitionSpec::Entry::tuple(axes);
      }
      return ts::PartitionSpec::from_entries(e);
    };
    auto random_spec = [&]() { return random_spec_over(manual); };
    ts::PartitionSpec in0 = random_spec(), in1 = random_spec(), out = random_spec();
    // The body: a random chain over the two blocks.
    std::vector<int> code;
    for (int k = 0; k < 6; ++k) code.push_back(pick(rng, 11));
    std::uniform_int_distribution<int> u(-4, 4);
    auto body = [&](ts::Array a, ts::Array b) {
      ts::Array v = a;
      for (int op : code) {
        const std::string ax = manual[size_t(pick(rng, int(manual.size())))];
        const int n = ts::axis_size(ax);
        switch (op) {
          case 0: v = v + b; break;
          case 1: v = v * b - v; break;
          case 2: v = ts::psum(v, ax), ++collectives; break;
          case 3: v = ts::pmax(v, manual.size() == 2 ? ts::AxisName{"x", "y"} : ts::AxisName{"x"}), ++collectives; break;
          case 4: {
            std::vector<std::pair<int, int>> perm;
            for (int i = 0; i < n; ++i) perm.push_back({i, (i + 1 + pick(rng, n)) % n});
            std::vector<std::pair<int, int>> ok;  // keep a permutation: drop repeated targets
            std::set<int> seen;
            for (auto p : perm)
              if (seen.insert(p.second).second) ok.push_back(p);
            v = ts::ppermute(v, ax, ok), ++collectives;
            break;
          }
          case 5:
            if (v.shape()[1] % n == 0) v = ts::all_to_all(v, ax, 1, 0, {.tiled = true}), ++collectives;
            break;
          case 6:
            if (v.shape()[0] % n == 0) v = ts::psum_scatter(v, ax, {.scatter_dimension = 0, .tiled = true}), ++collectives;
            break;
          case 7: v = v + ts::axis_index(ax).astype(v.dtype()); break;
          case 9:  // a constraint over the automatic axis
            if (partial) v = ts::with_sharding_constraint(v * b, ts::NamedSharding(mesh, P(ts::None, "y")));
            break;
          case 10: v = ts::matmul(v, ts::transpose(b)); break;  // a contraction (over y's split, when automatic)
          default: v = ts::maximum(v, b.astype(v.dtype()) * 2) - b; break;
        }
        if (v.shape() != b.shape()) v = b + ts::sum(v, {1}, true).astype(b.dtype()).index({ts::slice(0, 1)});
      }
      return v;
    };
    std::vector<double> av(ts::numel(shape)), bv(ts::numel(shape));
    for (auto& e : av) e = u(rng);
    for (auto& e : bv) e = u(rng);
    ts::Array a = ts::device_put(ts::array(av, shape).astype(dt), ts::NamedSharding(mesh, random_spec_over(ms.names)));
    ts::Array b = ts::array(bv, shape).astype(dt);
    auto fn = [&](const std::vector<ts::Array>& xs) {
      ts::ShardMapOptions opt;
      if (partial) opt.axis_names = {"x"};
      return std::vector<ts::Array>{ts::shard_map(body, mesh, {in0, in1}, out, opt)(xs[0], xs[1])};
    };
    // Trace once with a fixed generator state so the reference and the compiled run see one program.
    const auto state = rng;
    ts::detail::Traced tr;
    try {
      tr = ts::detail::trace("prop", {a, b}, [&](const std::vector<ts::Array>& xs,
                                                 std::function<std::any(const std::vector<ts::Array>&)>&) { return fn(xs); });
    } catch (const ts::ShardingError&) {
      ++rejected;  // the out_spec claims a replication the body does not prove
      continue;
    } catch (const ts::ShapeError&) {
      ++rejected;
      continue;
    }
    const ts::Graph& g = *std::static_pointer_cast<ts::Graph>(tr.graph);
    // The interpreter on the program's own dtype: convert args back.
    std::vector<ts::HostArray> typed;
    for (auto& x : std::vector<ts::Array>{a, b}) {
      switch (dt) {
        case ts::DType::float32: { auto v = x.to_vector<float>(); typed.push_back(ts::host_array(dt, shape, v.data())); break; }
        case ts::DType::float64: { auto v = x.to_vector<double>(); typed.push_back(ts::host_array(dt, shape, v.data())); break; }
        default: { auto v = x.to_vector<std::int32_t>(); typed.push_back(ts::host_array(dt, shape, v.data())); break; }
      }
    }
    auto want = ts::interpret(g, typed);
    rng = state;
    auto jitted = ts::jit([&](ts::Array x, ts::Array y) { return fn({x, y})[0]; });
    ts::Array got = jitted(a, b);
    auto w = want[0];
    ts::HostArray gw = host_of(got);
    ts::HostArray ww;
    {
      std::vector<double> d(size_t(ts::numel(w.shape)));
      for (std::int64_t i = 0; i < ts::numel(w.shape); ++i) d[size_t(i)] = w.as_double(i);
      ww = ts::host_array(ts::DType::float64, w.shape, d.data());
    }
    CHECK(ts::testing::compare_arrays(gw, ww, 1e-5, 1e-4) == "");
    {
      // These small programs run on this thread in lockstep; the same bits
      // in a lockstep launch on the machine's cores (where the devices'
      // threads outnumber them) and on the devices' threads.
      ts::config().inline_cheap_programs = false;
      ts::Array lockstep = jitted(a, b);
      ts::config().lockstep_launches = false;
      ts::Array threaded = jitted(a, b);
      ts::config().inline_cheap_programs = true;
      ts::config().lockstep_launches = true;
      CHECK(ts::testing::compare_arrays(host_of(lockstep), gw, 0, 0) == "");
      CHECK(ts::testing::compare_arrays(host_of(threaded), gw, 0, 0) == "");
      const ts::HostArray whole = ts::testing::host_of(got);  // in the program's dtype, bit for bit
      for (const ts::Array* r : {&got, &lockstep, &threaded}) CHECK(ts::testing::shards_hold(*r, whole) == "");
    }
    ++run;
    partial_run += partial;
  }
  MESSAGE("ran ", run, " programs (", collectives, " collectives traced, ", partial_run,
          " partially manual), rejected ", rejected);
  CHECK(run >= 35);
  CHECK(partial_run >= 6);
}
