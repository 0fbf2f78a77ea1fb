// tracer/rewrite.hpp: the one graph rewrite.
#include <doctest/doctest.h>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"

TEST_CASE("rewrite rebuilds a graph node by node, replacing what fn replaces, iteratively") {
  using namespace tessel;
  NodeTable t;
  Graph g;
  g.params.push_back(build::parameter(t, 0, Aval{DType::float64, {3}}));
  NodeRef x = g.params[0];
  for (int i = 0; i < 50000; ++i) x = build::unary(t, i % 2 ? Op::sin : Op::neg, x);  // deep
  g.outputs.push_back(x);
  NodeTable u;
  std::vector<NodeRef> params{build::parameter(u, 0, Aval{DType::float64, {3}})};
  // Same graph: every node rebuilt, the same op on the new operands.
  auto same = rewrite(g, u, params);
  CHECK(same.size() == 50001);
  CHECK(same.at(g.outputs[0].get())->op == Op::sin);
  // Replacing sin by cos everywhere.
  int replaced = 0;
  auto m = rewrite(g, u, params, [&](const Node& n, const std::vector<NodeRef>& in) {
    if (n.op != Op::sin) return build::with_operands(u, n, in);
    ++replaced;
    return build::unary(u, Op::cos, in[0]);
  });
  CHECK(replaced == 25000);
  CHECK(m.at(g.outputs[0].get())->op == Op::cos);
  CHECK(m.at(g.outputs[0].get())->in[0]->op == Op::neg);
  CHECK_THROWS_AS(rewrite(g, u, {}), InternalError);  // a parameter for each of g's
}
