// Property test: random programs of 20+ ops over the primitive set, with
// random input shardings and constraints on random meshes of 1..8 devices,
// even and uneven shapes. Compiled and partitioned results must equal the
// reference interpreter run on the traced (global) program; eager results
// too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <random>

#include <tessel/tessel.hpp>

#include "dsl/src/array_impl.hpp"
#include "tests/common/golden.hpp"
#include "tests/common/random_program.hpp"
#include "tests/common/run_graph.hpp"
#include "tracer/interpreter.hpp"

namespace ts = tessel;
using ts::P;

using namespace tessel::random_program;

namespace {

ts::HostArray host_of(const ts::Array& a) {
  if (a.dtype() == ts::int32) {  // captured loop bounds
    auto v = a.to_vector<std::int32_t>();
    return ts::host_array(ts::DType::int32, a.shape(), v.data());
  }
  auto v = a.to_vector<float>();
  return ts::host_array(ts::DType::float32, a.shape(), v.data());
}

std::string compare(const ts::Array& got, const ts::HostArray& want) {
  if (got.shape() != want.shape) return "shape " + ts::shape_str(got.shape()) + " vs " + ts::shape_str(want.shape);
  auto g = got.to_vector<float>();
  double scale = 0;
  for (std::int64_t i = 0; i < ts::numel(want.shape); ++i) scale = std::max(scale, std::fabs(want.as_double(i)));
  for (std::int64_t i = 0; i < ts::numel(want.shape); ++i) {
    double w = want.as_double(i);
    if (std::fabs(g[i] - w) > 1e-4 * scale + 1e-3 * std::fabs(w) + 1e-5)
      return "element " + std::to_string(i) + ": got " + std::to_string(g[i]) + ", want " + std::to_string(w);
  }
  return "";
}

// Every device's shard holds the reference's values at the index its
// sharding gives it: the layout the compiler reports is the one in memory.
std::string shards_hold_their_slices(const ts::Array& got, const ts::HostArray& want) {
  const ts::Shape& shape = want.shape;
  std::vector<std::int64_t> stride(shape.size(), 1);
  for (int d = int(shape.size()) - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  for (auto& shard : got.addressable_shards()) {
    const ts::Index& index = shard.index();
    ts::Shape local;
    for (auto& sl : index) local.push_back(sl.stop - sl.start);
    auto data = shard.data().to_vector<float>();
    if (std::int64_t(data.size()) != ts::numel(local))
      return "shard on " + ts::to_string(shard.device()) + ": " + std::to_string(data.size()) + " values for " +
             ts::shape_str(local);
    for (std::int64_t i = 0; i < ts::numel(local); ++i) {
      std::int64_t rest = i, flat = 0;
      for (int d = int(local.size()) - 1; d >= 0; --d) {
        flat += (index[d].start + rest % local[d]) * stride[d];
        rest /= local[d];
      }
      double w = want.as_double(flat);
      if (std::fabs(data[i] - w) > 1e-3 * std::fabs(w) + 1e-3)
        return "shard on " + ts::to_string(shard.device()) + ", local element " + std::to_string(i) + ": got " +
               std::to_string(data[i]) + ", want " + std::to_string(w);
    }
  }
  return "";
}

}  // namespace

TEST_CASE("random programs: partitioned and compiled results equal the reference interpreter") {
  struct MeshSpec {
    ts::Shape shape;
    std::vector<std::string> names;
  };
  const std::vector<MeshSpec> meshes = {{{1}, {"x"}},    {{2}, {"x"}},       {{3}, {"x"}},
                                        {{4}, {"x"}},    {{5}, {"x"}},       {{2, 2}, {"x", "y"}},
                                        {{6}, {"x"}},    {{7}, {"x"}},       {{8}, {"x"}},
                                        {{4, 2}, {"x", "y"}}, {{2, 2, 2}, {"x", "y", "z"}}, {{3, 2}, {"x", "y"}}};
  std::mt19937 rng(2026);
  int programs = 0, ops = 0, constrained_outputs = 0, control = 0;
  for (int trial = 0; trial < 36; ++trial) {
    const MeshSpec& ms = meshes[trial % meshes.size()];
    std::vector<ts::Device> devs = ts::devices();
    std::shuffle(devs.begin(), devs.end(), rng);
    devs.resize(ts::numel(ms.shape), ts::Device(0));
    ts::Mesh mesh(devs, ms.shape, ms.names);
    Program prog = generate(rng, 20 + pick(rng, 10), ms.names);
    ops += int(prog.code.size());
    for (auto& in : prog.code) control += in.kind == K::Loop || in.kind == K::Branch || in.kind == K::ScanRows;
    CAPTURE(trial);
    CAPTURE(mesh.str());
    // Inputs: random values, random shardings on the mesh (some uncommitted).
    std::vector<ts::Array> inputs, plain;
    std::uniform_real_distribution<float> u(-2, 2);
    for (auto& s : prog.inputs) {
      std::vector<float> v(ts::numel(s));
      for (auto& e : v) e = u(rng);
      ts::Array a = ts::array(v, s);
      plain.push_back(a);
      std::vector<ts::PartitionSpec::Entry> e(s.size(), ts::PartitionSpec::Entry(ts::None));
      for (auto& name : ms.names) {
        int d = pick(rng, int(s.size()) + 1);
        if (d == int(s.size())) continue;
        auto axes = e[d].axes();
        axes.push_back(name);
        e[d] = ts::PartitionSpec::Entry::tuple(axes);
      }
      inputs.push_back(pick(rng, 4) == 0 ? a : ts::device_put(a, ts::NamedSharding(mesh, ts::PartitionSpec::from_entries(e))));
    }
    // The reference: the traced global program in the reference interpreter.
    ts::detail::Traced tr = ts::detail::trace(
        "random", plain, [&](const std::vector<ts::Array>& tracers, std::function<std::any(const std::vector<ts::Array>&)>&) {
          return replay(prog, tracers, mesh);
        });
    const ts::Graph& g = *std::static_pointer_cast<ts::Graph>(tr.graph);
    std::vector<ts::HostArray> args;
    for (auto& a : plain) args.push_back(host_of(a));
    for (auto& a : tr.captured) args.push_back(host_of(a));
    auto want = ts::interpret(g, args);
    // Compiled, partitioned.
    auto jitted = ts::jit([&](const std::vector<ts::Array>& xs) { return replay(prog, xs, mesh); });
    auto got = jitted(inputs);
    for (int k = 0; k < 3; ++k) {
      CAPTURE(k);
      CHECK(compare(got[k], want[k]) == "");
      CHECK(shards_hold_their_slices(got[k], want[k]) == "");
      // An output made by with_sharding_constraint has exactly that sharding.
      const int made_by = prog.outputs[k] - int(prog.inputs.size());
      if (made_by >= 0 && prog.code[made_by].kind == K::Constraint) {
        CHECK(got[k].sharding().is_equivalent_to(ts::NamedSharding(mesh, prog.code[made_by].spec), got[k].ndim()));
        ++constrained_outputs;
      }
      // Committed inputs put the program on their mesh (a constraint does too when it is live).
      if (std::any_of(inputs.begin(), inputs.end(), [](const ts::Array& a) { return a.committed(); })) {
        auto mesh_list = mesh.devices();
        CHECK(got[k].devices() == std::set<ts::Device>(mesh_list.begin(), mesh_list.end()));
      }
    }
    // Eager: every op its own program, through the same pipeline.
    if (trial % 6 == 0) {
      auto eager = replay(prog, inputs, mesh);
      for (int k = 0; k < 3; ++k) CHECK(compare(eager[k], want[k]) == "");
    }
    ++programs;
  }
  CHECK(programs == 36);
  CHECK(constrained_outputs > 0);
  CHECK(ops >= 36 * 20);
  CHECK(control >= 36);  // loops, branches and scans among them
}
