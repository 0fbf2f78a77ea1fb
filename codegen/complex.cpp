#include "codegen/complex.hpp"

#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

bool is_cx(const Aval& a) {
  if (a.tuple) {
    for (auto& e : a.elements)
      if (is_cx(e)) return true;
    return false;
  }
  return is_complex(a.dtype);
}

// The pass: each node that touches a complex value rebuilt by its op's
// rule (Rule<op>::expand_complex, in the op's rules file); regions expanded
// on their own, their parameters and results packed like the operands and
// results they meet.
class Expander {
 public:
  explicit Expander(NodeTable& t) : t_(t), b_(t) {}

  GraphRef expand(const Graph& g) {
    auto out = std::make_shared<Graph>();
    out->name = g.name;
    for (size_t i = 0; i < g.params.size(); ++i)
      out->params.push_back(build::parameter(t_, int(i), packed_aval(g.params[i]->aval)));
    auto m = rewrite(
        g, t_, out->params, [this](const Node& n, const std::vector<NodeRef>& ops) { return node(n, ops); },
        /*into_regions=*/false);
    for (auto& o : g.outputs) out->outputs.push_back(m.at(o.get()));
    for (auto& e : g.effects) out->effects.push_back(m.at(e.get()));
    return out;
  }

 private:
  NodeTable& t_;
  ComplexBuilder b_;

  NodeRef node(const Node& n, const std::vector<NodeRef>& ops) {
    if (!n.regions().empty()) {
      std::vector<GraphRef> rs;
      for (auto& r : n.regions()) rs.push_back(expand(*r));
      return with_regions(t_, n, rs, ops);
    }
    bool touches = is_cx(n.aval);
    for (auto& x : n.in) touches = touches || is_cx(x->aval);
    if (!touches) return build::with_operands(t_, n, ops);
    return rules(n.op).expand_complex(b_, n, ops);
  }
};

}  // namespace

bool has_complex(const Graph& g) {
  bool any = false;
  for_each_graph(g, [&](const Graph& r) {
    for (auto& n : r.topo_order()) any = any || is_cx(n->aval);
  });
  return any;
}

Graph expand_complex(const Graph& g) {
  NodeTable t;
  Expander e(t);
  return *e.expand(g);
}

}  // namespace tessel::codegen
