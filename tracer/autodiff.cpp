#include "tracer/autodiff.hpp"

#include "tracer/rewrite.hpp"

#include <unordered_map>
#include <unordered_set>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

namespace {

struct Linearized {
  NodeTable t;
  std::vector<NodeRef> params;           // primal params (new)
  std::vector<NodeRef> tangent_params;   // per g param: its tangent param, or null
  std::vector<NodeRef> outputs;          // primal outputs (new)
  std::vector<NodeRef> output_tangents;  // null: zero
  std::vector<NodeRef> effects;          // the primal's effects (new): they run once, on primal values
};

// Primal and tangent of every node, tangent params numbered from `first_tangent`.
void linearize(const Graph& g_in, const std::vector<bool>& wrt, int first_tangent, Linearized& L) {
  // Calls first become their bodies: every rule below sees plain primitives.
  const bool calls = has_calls(g_in);
  Graph inlined;
  if (calls) inlined = inline_calls(g_in, /*keep_custom=*/true);
  const Graph& g = calls ? inlined : g_in;
  std::unordered_map<const Node*, NodeRef> primal, tangent;
  int next = first_tangent;
  for (size_t i = 0; i < g.params.size(); ++i) {
    const NodeRef& p = g.params[i];
    NodeRef np = build::parameter(L.t, int(i), p->aval);
    primal[p.get()] = np;
    L.params.push_back(np);
    NodeRef tp;
    if (i < wrt.size() && wrt[i] && is_inexact(p->dtype())) {
      Aval ta = p->aval;
      ta.weak_type = false;
      tp = build::parameter(L.t, next++, ta);
    }
    tangent[np.get()] = tp;
    L.tangent_params.push_back(tp);
  }
  // The primal program, each node's tangent beside it (its op's JVP rule).
  // Tangents are keyed by the new primal nodes (what the callback sees as
  // operands), never by the old node's address.
  // Regions are left as they are: each region op's JVP rule differentiates its own.
  primal = rewrite(g, L.t, L.params, [&](const Node& n, const std::vector<NodeRef>& x) {
    std::vector<NodeRef> tx;
    bool any = false;
    for (auto& xi : x) {
      auto it = tangent.find(xi.get());
      tx.push_back(it == tangent.end() ? nullptr : it->second);
      any = any || tx.back();
    }
    NodeRef y = build::with_operands(L.t, n, x);
    NodeRef ty = any ? rules(n.op).jvp(L.t, *y, x, tx, y) : nullptr;
    if (ty || !tangent.count(y.get())) tangent[y.get()] = ty;
    return y;
  }, /*into_regions=*/false);
  for (auto& e : g.effects) L.effects.push_back(primal.at(e.get()));
  for (auto& o : g.outputs) {
    NodeRef y = primal.at(o.get());
    L.outputs.push_back(y);
    auto it = tangent.find(y.get());
    L.output_tangents.push_back(it == tangent.end() ? nullptr : it->second);
  }
}

}  // namespace

Graph jvp_graph(const Graph& g, const std::vector<bool>& wrt) {
  Linearized L;
  linearize(g, wrt, int(g.params.size()), L);
  Graph out;
  out.name = "jvp(" + g.name + ")";
  out.effects = L.effects;
  out.params = L.params;
  for (auto& tp : L.tangent_params)
    if (tp) out.params.push_back(tp);
  out.outputs = L.outputs;
  for (size_t k = 0; k < L.outputs.size(); ++k) {
    const NodeRef& tn = L.output_tangents[k];
    out.outputs.push_back(tn ? tn : ad::zeros(L.t, L.outputs[k]->aval));
  }
  return out;
}

Graph vjp_graph(const Graph& g, const std::vector<bool>& wrt) {
  Linearized L;
  const int n_params = int(g.params.size()), n_out = int(g.outputs.size());
  // Tangent params come after the cotangent params; they vanish from the result.
  linearize(g, wrt, n_params + n_out, L);
  // The linear part: nodes depending on tangent params, reachable from the output tangents.
  std::unordered_set<const Node*> tangent_inputs;
  for (auto& tp : L.tangent_params)
    if (tp) tangent_inputs.insert(tp.get());
  Graph lin;
  for (auto& tn : L.output_tangents)
    if (tn) lin.outputs.push_back(tn);
  std::vector<NodeRef> order = lin.topo_order();
  std::unordered_set<const Node*> linear;
  for (auto& n : order) {
    bool l = tangent_inputs.count(n.get()) > 0;
    for (auto& in : n->in) l = l || linear.count(in.get());
    if (l) linear.insert(n.get());
  }
  // Cotangents, pushed back through the linear nodes in reverse order.
  std::vector<NodeRef> ct_params;
  std::unordered_map<const Node*, NodeRef> ct;
  for (int k = 0; k < n_out; ++k) {
    Aval a = L.outputs[k]->aval;
    a.weak_type = false;
    NodeRef c = build::parameter(L.t, n_params + k, a);
    ct_params.push_back(c);
    const NodeRef& tn = L.output_tangents[k];
    if (tn && linear.count(tn.get())) ct[tn.get()] = ad::add(L.t, ct[tn.get()], build::convert(L.t, c, tn->dtype()));
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeRef& n = *it;
    if (!linear.count(n.get()) || n->op == Op::parameter) continue;
    auto found = ct.find(n.get());
    if (found == ct.end() || !found->second) continue;
    std::vector<bool> lin_in;
    for (auto& in : n->in) lin_in.push_back(linear.count(in.get()) > 0);
    std::vector<NodeRef> cts(n->in.size());
    rules(n->op).transpose(L.t, *n, found->second, lin_in, cts);
    for (size_t k = 0; k < n->in.size(); ++k)
      if (lin_in[k] && cts[k]) ct[n->in[k].get()] = ad::add(L.t, ct[n->in[k].get()], cts[k]);
  }
  Graph out;
  out.name = "vjp(" + g.name + ")";
  out.effects = L.effects;
  out.params = L.params;
  out.params.insert(out.params.end(), ct_params.begin(), ct_params.end());
  out.outputs = L.outputs;
  for (int i = 0; i < n_params; ++i) {
    if (!(i < int(wrt.size()) && wrt[i])) continue;
    const NodeRef& tp = L.tangent_params[i];
    NodeRef c = tp && ct.count(tp.get()) ? ct.at(tp.get()) : nullptr;
    const Aval& a = g.params[i]->aval;
    if (!c) c = ad::zeros(L.t, a);
    out.outputs.push_back(c);
  }
  return out;
}

}  // namespace tessel
