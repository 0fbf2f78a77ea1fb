// Programs with regions through the whole pipeline: calls (nested, with
// several results, a sharding constraint inside a body) compiled and
// partitioned over meshes of 1..8 devices, even and uneven shapes, against
// the reference interpreter evaluating the calls directly. And lower() as a
// script of named passes, each dumped under TESSEL_DUMP_DIR.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/pipeline.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "tests/common/run_graph.hpp"
#include "tracer/build.hpp"
#include "tracer/interpreter.hpp"

namespace ts = tessel;

namespace {

// body(x, y) = (x * y + 1, constrained(tanh(x)) summed over rows, broadcast back).
ts::GraphRef make_body(const ts::Shape& s, const ts::Mesh& mesh) {
  ts::NodeTable t;
  auto g = std::make_shared<ts::Graph>();
  g->name = "body";
  ts::Aval a{ts::DType::float32, s};
  ts::NodeRef x = ts::build::parameter(t, 0, a), y = ts::build::parameter(t, 1, a);
  g->params = {x, y};
  ts::NodeRef one = ts::build::broadcast_in_dim(t, ts::build::scalar(t, ts::DType::float32, 1.0), s, {});
  ts::NodeRef th = ts::build::unary(t, ts::Op::tanh, x);
  th = ts::build::sharding_constraint(
      t, th, ts::detail::axis_sharding(ts::NamedSharding(mesh, ts::P(ts::None, "x")), s));
  ts::NodeRef rows = ts::build::reduce(t, ts::Op::reduce_sum, th, {0});
  g->outputs = {ts::build::binary(t, ts::Op::add, ts::build::binary(t, ts::Op::mul, x, y), one),
                ts::build::broadcast_in_dim(t, rows, s, {1})};
  return g;
}

ts::Graph make_program(const ts::Shape& s, const ts::Mesh& mesh) {
  auto body = make_body(s, mesh);
  ts::NodeTable t;
  ts::Graph g;
  g.name = "calls";
  ts::Aval a{ts::DType::float32, s};
  ts::NodeRef x = ts::build::parameter(t, 0, a), y = ts::build::parameter(t, 1, a);
  g.params = {x, y};
  auto inner = std::make_shared<ts::Graph>();
  inner->name = "inner";
  {
    ts::NodeTable u;
    ts::NodeRef p0 = ts::build::parameter(u, 0, a), p1 = ts::build::parameter(u, 1, a);
    inner->params = {p0, p1};
    auto r = ts::build::results(u, ts::build::call(u, body, {p1, p0}));
    inner->outputs = {ts::build::binary(u, ts::Op::sub, r[0], r[1])};
  }
  auto pq = ts::build::results(t, ts::build::call(t, body, {x, y}));
  ts::NodeRef r = ts::build::call(t, inner, {pq[0], pq[1]});
  g.outputs = {ts::build::binary(t, ts::Op::mul, pq[0], r), pq[1]};
  return g;
}

ts::HostArray host_of(const ts::Array& a) {
  auto v = a.to_vector<float>();
  return ts::host_array(ts::DType::float32, a.shape(), v.data());
}

}  // namespace

TEST_CASE("calls compile and partition on 1..8 devices and equal the interpreter's direct evaluation") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  int runs = 0;
  for (int nd = 1; nd <= 8; ++nd) {
    for (ts::Shape s : {ts::Shape{8, 16}, ts::Shape{5, 7}}) {
      CAPTURE(nd);
      CAPTURE(ts::shape_str(s));
      const auto all = ts::devices();
      std::vector<ts::Device> devs(all.begin(), all.begin() + nd);
      ts::Mesh mesh(devs, {nd}, {"x"});
      ts::Graph g = make_program(s, mesh);
      std::vector<float> xv(ts::numel(s)), yv(ts::numel(s));
      for (auto& e : xv) e = u(rng);
      for (auto& e : yv) e = u(rng);
      ts::Array x = ts::device_put(ts::array(xv, s), ts::NamedSharding(mesh, ts::P("x")));
      ts::Array y = ts::array(yv, s);
      auto want = ts::interpret(g, {host_of(x), host_of(y)});
      ts::detail::LowerOptions opt;
      opt.name = "calls";
      auto got = ts::detail::execute(g, {x, y}, opt);
      REQUIRE(got.size() == 2);
      for (int k = 0; k < 2; ++k) CHECK(ts::testing::compare_arrays(host_of(got[k]), want[k]) == "");
      ++runs;
    }
  }
  CHECK(runs == 16);
}

TEST_CASE("lower() is a script of named passes, each dumped under TESSEL_DUMP_DIR") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessel_dump_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string saved = ts::config().dump_dir;
  ts::config().dump_dir = dir.string();
  const auto all = ts::devices();
  std::vector<ts::Device> devs(all.begin(), all.begin() + 2);
  ts::Mesh mesh(devs, {2}, {"x"});
  ts::Graph g = make_program({4, 6}, mesh);
  ts::detail::LowerOptions opt;
  opt.name = "dumped";
  std::vector<float> v(24, 0.5f);
  ts::Array x = ts::array(v, {4, 6});
  ts::detail::execute(g, {x, x}, opt);
  ts::config().dump_dir = saved;
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  auto find = [&](const std::string& suffix) -> std::string {
    for (auto& n : names)
      if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) return n;
    return "";
  };
  auto read = [&](const std::string& name) {
    std::ifstream f(dir / name);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  // codegen's own passes too (no complex values here: no expand-complex).
  const char* passes[] = {"1-trace.txt",           "2-inline-calls.txt", "3-rewrite-for-mesh.txt",
                          "4-propagate.txt",       "5-partition.txt",    "6-fold-transposes.txt",
                          "7-plan-fusion.txt",     "8-schedule-for-memory.txt", "9-sink-collectives.txt",
                          "10-compile.txt"};
  for (const char* p : passes) {
    CAPTURE(p);
    REQUIRE(find(std::string(".dumped.") + p) != "");
  }
  CHECK(read(find(".dumped.1-trace.txt")).find("call(") != std::string::npos);
  CHECK(read(find(".dumped.1-trace.txt")).find("func inner(") != std::string::npos);
  CHECK(read(find(".dumped.2-inline-calls.txt")).find("call(") == std::string::npos);
  CHECK(read(find(".dumped.4-propagate.txt")).find("sharding=") != std::string::npos);
  CHECK(read(find(".dumped.7-plan-fusion.txt")).find("s0 = ") != std::string::npos);
  CHECK(!read(find(".dumped.10-compile.txt")).empty());
  fs::remove_all(dir);
}
