// The IR's sub-programs and several results: regions (a node's child graphs,
// here `call`), tuple values and get_tuple_element; every pass reaches them
// through rewrite / for_each_graph; the reference interpreter evaluates them
// directly, and inline_calls must agree with it.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "tracer/autodiff.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/interpreter.hpp"
#include "tracer/rewrite.hpp"

using namespace tessel;

namespace {

HostArray f64(const Shape& s, std::vector<double> v) { return host_array(DType::float64, s, v.data()); }

double at(const HostArray& h, std::int64_t i) { return h.as_double(i); }

// body(x, y) = (x * y + c, sin(x)): two results.
GraphRef make_body(double c, const std::string& name = "body") {
  NodeTable t;
  auto g = std::make_shared<Graph>();
  g->name = name;
  Aval a{DType::float64, {3}};
  NodeRef x = build::parameter(t, 0, a), y = build::parameter(t, 1, a);
  g->params = {x, y};
  NodeRef cc = build::broadcast_in_dim(t, build::scalar(t, DType::float64, c), {3}, {});
  g->outputs = {build::binary(t, Op::add, build::binary(t, Op::mul, x, y), cc), build::unary(t, Op::sin, x)};
  return g;
}

// outer(x, y): (p, q) = body(x, y); r = body(q, p)[0] (a call whose body
// calls too); returns (p + r, q).
Graph make_outer(const GraphRef& body) {
  NodeTable t;
  Graph g;
  g.name = "outer";
  Aval a{DType::float64, {3}};
  NodeRef x = build::parameter(t, 0, a), y = build::parameter(t, 1, a);
  g.params = {x, y};
  // A nested body: inner(u, v) = body(u, v)[0] * 2.
  auto inner = std::make_shared<Graph>();
  inner->name = "inner";
  {
    NodeTable u;
    NodeRef p0 = build::parameter(u, 0, a), p1 = build::parameter(u, 1, a);
    inner->params = {p0, p1};
    NodeRef c = build::call(u, body, {p0, p1});
    NodeRef two = build::broadcast_in_dim(u, build::scalar(u, DType::float64, 2.0), {3}, {});
    inner->outputs = {build::binary(u, Op::mul, build::get_tuple_element(u, c, 0), two)};
  }
  NodeRef c = build::call(t, body, {x, y});
  auto pq = build::results(t, c);
  NodeRef r = build::call(t, inner, {pq[1], pq[0]});  // one result: not a tuple
  g.outputs = {build::binary(t, Op::add, pq[0], r), pq[1]};
  return g;
}

}  // namespace

TEST_CASE("tuple avals and get_tuple_element") {
  NodeTable t;
  NodeRef a = build::parameter(t, 0, Aval{DType::float32, {2}});
  NodeRef b = build::parameter(t, 1, Aval{DType::int32, {}});
  NodeRef tup = build::tuple(t, {a, b});
  CHECK(tup->aval.tuple);
  CHECK(tup->aval.str() == "(f32[2], s32[])");
  CHECK(build::get_tuple_element(t, tup, 1) == b);  // folds, as XLA's simplifier
  CHECK(build::results(t, tup).size() == 2);
  CHECK(build::results(t, a) == std::vector<NodeRef>{a});
  CHECK_THROWS_AS(build::get_tuple_element(t, a, 0), InternalError);  // not a tuple
}

TEST_CASE("call checks its operands against the body's parameters") {
  NodeTable t;
  NodeRef f = build::parameter(t, 0, Aval{DType::float32, {3}});
  NodeRef d = build::parameter(t, 1, Aval{DType::float64, {3}});
  auto body = make_body(1.0);
  CHECK_THROWS_AS(build::call(t, body, {f, f}), TypeError);  // dtypes differ
  CHECK_THROWS_AS(build::call(t, body, {d}), TypeError);     // count differs
  NodeRef c = build::call(t, body, {d, d});
  CHECK(c->aval.str() == "(f64[3], f64[3])");
  CHECK(c->regions().size() == 1);
  CHECK_THROWS_AS(build::get_tuple_element(t, c, 2), InternalError);
}

TEST_CASE("a node's attribute struct is the one its op names") {
  NodeTable t;
  NodeRef x = build::parameter(t, 0, Aval{DType::float32, {4}});
  CHECK_THROWS_AS(t.make(Op::transpose, {x}, x->aval, attr::Slice{{0}, {4}, {1}}), InternalError);
  CHECK_THROWS_AS(x->attr<attr::Slice>(), InternalError);
  CHECK(x->attr<attr::Parameter>().index == 0);
}

TEST_CASE("regions are verified, printed, fingerprinted by structure and bits") {
  Graph g = make_outer(make_body(0.5));
  verify(g);
  const std::string text = to_text(g);
  CHECK(text.find("call(") != std::string::npos);
  CHECK(text.find("to_apply=body") != std::string::npos);
  CHECK(text.find("    func body(") != std::string::npos);  // the region, indented under its node
  CHECK(text.find("func inner(") != std::string::npos);
  CHECK(text.find("get-tuple-element") != std::string::npos);
  // Equal structure, other objects: equal keys, and equal nodes.
  Graph same = make_outer(make_body(0.5));
  CHECK(fingerprint(g) == fingerprint(same));
  // One ulp in a constant inside a region: another program.
  Graph other = make_outer(make_body(std::nextafter(0.5, 1.0)));
  CHECK(!(fingerprint(g) == fingerprint(other)));
  int graphs = 0;
  for_each_graph(g, [&](const Graph&) { ++graphs; });
  CHECK(graphs == 4);  // outer, body (called from outer), inner, body (called from inner)
}

TEST_CASE("the interpreter evaluates calls, and inline_calls agrees with it") {
  Graph g = make_outer(make_body(0.5));
  HostArray x = f64({3}, {0.1, -2.0, 3.5}), y = f64({3}, {4.0, 0.25, -1.0});
  auto direct = interpret(g, {x, y});
  // Closed form: p = x*y + .5, q = sin x, r = (q*p + .5) * 2.
  for (int i = 0; i < 3; ++i) {
    double p = at(x, i) * at(y, i) + 0.5, q = std::sin(at(x, i)), r = (q * p + 0.5) * 2;
    CHECK(at(direct[0], i) == doctest::Approx(p + r).epsilon(1e-15));
    CHECK(at(direct[1], i) == doctest::Approx(q).epsilon(1e-15));
  }
  Graph flat = inline_calls(g);
  verify(flat);
  for (auto& n : flat.topo_order())
    CHECK((n->op != Op::call && n->op != Op::tuple && n->op != Op::get_tuple_element));
  CHECK(!has_calls(flat));
  CHECK(has_calls(g));
  auto inlined = interpret(flat, {x, y});
  for (int k = 0; k < 2; ++k) CHECK(std::memcmp(inlined[k].bytes.data(), direct[k].bytes.data(), 24) == 0);
}

TEST_CASE("rewrite recurses into regions with the same callback") {
  Graph g = make_outer(make_body(0.5));
  NodeTable t;
  std::vector<NodeRef> params{build::parameter(t, 0, g.params[0]->aval), build::parameter(t, 1, g.params[1]->aval)};
  int sines = 0;
  auto m = rewrite(g, t, params, [&](const Node& n, const std::vector<NodeRef>& in) {
    if (n.op != Op::sin) return build::with_operands(t, n, in);
    ++sines;
    return build::unary(t, Op::cos, in[0]);
  });
  CHECK(sines == 2);  // the sin of each region copy of body (outer's call, inner's call)
  Graph h;
  h.params = params;
  for (auto& o : g.outputs) h.outputs.push_back(m.at(o.get()));
  verify(h);
  HostArray x = f64({3}, {0.1, -2.0, 3.5}), y = f64({3}, {4.0, 0.25, -1.0});
  auto out = interpret(h, {x, y});
  for (int i = 0; i < 3; ++i) CHECK(at(out[1], i) == doctest::Approx(std::cos(at(x, i))).epsilon(1e-15));
}

TEST_CASE("autodiff through calls equals autodiff of the inlined program") {
  Graph g = make_outer(make_body(0.5));
  Graph flat = inline_calls(g);
  HostArray x = f64({3}, {0.1, -2.0, 3.5}), y = f64({3}, {4.0, 0.25, -1.0});
  HostArray tx = f64({3}, {1.0, 0.5, -0.25}), ty = f64({3}, {0.0, 2.0, 1.0});
  auto a = interpret(jvp_graph(g, {true, true}), {x, y, tx, ty});
  auto b = interpret(jvp_graph(flat, {true, true}), {x, y, tx, ty});
  REQUIRE(a.size() == 4);
  for (size_t k = 0; k < a.size(); ++k) CHECK(std::memcmp(a[k].bytes.data(), b[k].bytes.data(), 24) == 0);
  HostArray c0 = f64({3}, {1, 1, 1}), c1 = f64({3}, {0.5, -1, 2});
  auto va = interpret(vjp_graph(g, {true, true}), {x, y, c0, c1});
  auto vb = interpret(vjp_graph(flat, {true, true}), {x, y, c0, c1});
  for (size_t k = 0; k < va.size(); ++k) CHECK(std::memcmp(va[k].bytes.data(), vb[k].bytes.data(), 24) == 0);
  // And against finite differences of the direct interpretation (central, h = 1e-6).
  const double h = 1e-6;
  for (int i = 0; i < 3; ++i) {
    HostArray xp = x, xm = x;
    double v = at(x, i);
    double vp = v + h, vm = v - h;
    std::memcpy(xp.bytes.data() + 8 * i, &vp, 8);
    std::memcpy(xm.bytes.data() + 8 * i, &vm, 8);
    auto fp = interpret(g, {xp, y}), fm = interpret(g, {xm, y});
    double fd = 0;
    for (int j = 0; j < 3; ++j) fd += (at(fp[0], j) - at(fm[0], j)) / (2 * h) * at(c0, j) +
                                      (at(fp[1], j) - at(fm[1], j)) / (2 * h) * at(c1, j);
    CHECK(at(va[2], i) == doctest::Approx(fd).epsilon(1e-6));
  }
}
