#include "tracer/rewrite.hpp"

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

namespace {

// The region r rebuilt with the same callback: fresh parameters of the same
// avals, every node through fn.
GraphRef rewrite_region(const Graph& r, NodeTable& t, const RewriteFn& fn) {
  std::vector<NodeRef> params;
  for (size_t i = 0; i < r.params.size(); ++i) params.push_back(build::parameter(t, int(i), r.params[i]->aval));
  auto m = rewrite(r, t, params, fn);
  auto g = std::make_shared<Graph>();
  g->name = r.name;
  g->params = params;
  for (auto& o : r.outputs) g->outputs.push_back(m.at(o.get()));
  for (auto& e : r.effects) g->effects.push_back(m.at(e.get()));
  return g;
}

}  // namespace

std::unordered_map<const Node*, NodeRef> rewrite(const Graph& g, NodeTable& t, const std::vector<NodeRef>& params,
                                                 const RewriteFn& fn, bool into_regions) {
  TESSEL_CHECK_INTERNAL(params.size() == g.params.size(), "rewrite: ", params.size(), " parameters for a graph of ",
                        g.params.size());
  std::unordered_map<const Node*, NodeRef> m;
  std::vector<NodeRef> copies;  // nodes holding rebuilt regions, alive while fn may keep their address
  for (size_t i = 0; i < g.params.size(); ++i) m[g.params[i].get()] = params[i];
  for (auto& n : g.topo_order()) {
    if (m.count(n.get())) continue;  // a parameter
    std::vector<NodeRef> ops;
    ops.reserve(n->in.size());
    for (auto& x : n->in) ops.push_back(m.at(x.get()));
    auto regions = n->regions();
    if (regions.empty() || !into_regions) {
      m[n.get()] = fn ? fn(*n, ops) : build::with_operands(t, *n, ops);
      continue;
    }
    // Regions first, with the same callback; the callback then sees the node
    // holding the rewritten regions.
    std::vector<GraphRef> rebuilt;
    for (auto& r : regions) rebuilt.push_back(rewrite_region(*r, t, fn));
    auto copy = std::make_shared<Node>();
    copy->op = n->op;
    copy->in = n->in;
    copy->aval = n->aval;
    copy->attrs = n->attrs.with_regions(rebuilt);
    copies.push_back(copy);
    m[n.get()] = fn ? fn(*copy, ops) : build::with_operands(t, *copy, ops);
  }
  return m;
}

NodeRef with_regions(NodeTable& t, const Node& n, const std::vector<GraphRef>& regions, const std::vector<NodeRef>& ops) {
  Node copy;
  copy.op = n.op;
  copy.in = n.in;
  copy.aval = n.aval;
  copy.attrs = n.attrs.with_regions(regions);
  return build::with_operands(t, copy, ops);
}

std::vector<NodeRef> inline_graph(NodeTable& t, const Graph& g, const std::vector<NodeRef>& args,
                                  std::vector<NodeRef>* effects) {
  auto m = rewrite(g, t, args);
  std::vector<NodeRef> outs;
  for (auto& o : g.outputs) outs.push_back(m.at(o.get()));
  TESSEL_CHECK_INTERNAL(effects || g.effects.empty(), "inlining ", g.name, " would drop its effects");
  if (effects)
    for (auto& e : g.effects) effects->push_back(m.at(e.get()));
  return outs;
}

GraphRef reparameterize(const Graph& g, const std::vector<Aval>& avals, const std::vector<int>& pos,
                        const std::vector<int>& outputs) {
  TESSEL_CHECK_INTERNAL(pos.size() == g.params.size(), "reparameterize: ", pos.size(), " positions for ", g.params.size(),
                        " parameters");
  NodeTable t;
  auto r = std::make_shared<Graph>();
  r->name = g.name;
  for (size_t i = 0; i < avals.size(); ++i) r->params.push_back(build::parameter(t, int(i), avals[i]));
  std::vector<NodeRef> mapped;
  for (int p : pos) mapped.push_back(r->params.at(size_t(p)));
  auto m = rewrite(g, t, mapped);
  if (outputs.empty()) {
    for (auto& o : g.outputs) r->outputs.push_back(m.at(o.get()));
  } else {
    for (int k : outputs) r->outputs.push_back(m.at(g.outputs.at(size_t(k)).get()));
  }
  for (auto& e : g.effects) r->effects.push_back(m.at(e.get()));
  return r;
}

bool has_calls(const Graph& g) {
  bool found = false;
  for_each_graph(g, [&](const Graph& r) {
    for (auto& n : r.topo_order())
      if (n->op == Op::call || is_custom_call(n->op)) found = true;
  });
  return found;
}

namespace {
Graph inline_some(const Graph& g, bool plain, bool custom);
}  // namespace

Graph inline_calls(const Graph& g, bool keep_custom) { return inline_some(g, true, !keep_custom); }
Graph inline_custom_calls(const Graph& g) { return inline_some(g, false, true); }

namespace {
Graph inline_some(const Graph& g, bool plain, bool custom) {
  NodeTable t;
  std::vector<NodeRef> params;
  for (size_t i = 0; i < g.params.size(); ++i) params.push_back(build::parameter(t, int(i), g.params[i]->aval));
  // Each graph of the region tree is inlined by its own call of this
  // function, so the effects of an inlined body join the graph it lands in.
  std::vector<NodeRef> inlined_effects;
  RewriteFn fn = [&](const Node& n, const std::vector<NodeRef>& ops) -> NodeRef {
    if (n.op == Op::get_tuple_element) return build::get_tuple_element(t, ops[0], n.attr<attr::TupleIndex>().index);
    if ((n.op == Op::call && plain) || (is_custom_call(n.op) && custom)) {
      const Graph body = inline_some(*n.regions().at(0), plain, custom);  // a call's body, a custom call's fun
      std::vector<NodeRef> outs = inline_graph(t, body, ops, &inlined_effects);
      return outs.size() == 1 ? outs[0] : build::tuple(t, outs);
    }
    auto regions = n.regions();
    if (regions.empty()) return build::with_operands(t, n, ops);
    std::vector<GraphRef> rebuilt;
    for (auto& r : regions) rebuilt.push_back(std::make_shared<Graph>(inline_some(*r, plain, custom)));
    return with_regions(t, n, rebuilt, ops);
  };
  auto m = rewrite(g, t, params, fn, /*into_regions=*/false);
  Graph out;
  out.name = g.name;
  out.params = params;
  for (auto& o : g.outputs) out.outputs.push_back(m.at(o.get()));
  for (auto& e : g.effects) out.effects.push_back(m.at(e.get()));
  out.effects.insert(out.effects.end(), inlined_effects.begin(), inlined_effects.end());
  return out;
}
}  // namespace

}  // namespace tessel
