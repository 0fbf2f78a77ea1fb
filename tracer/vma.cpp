#include "tracer/vma.hpp"

#include "tracer/build.hpp"
#include "tracer/errors.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel {

namespace {

// ppermute moves data along the axes where sources and targets differ.
std::vector<int> permute_axes(const Node& n, const DeviceMesh& mesh) {
  AxisSet s;
  for (auto [src, dst] : n.attr<attr::CollectivePermute>().pairs)
    for (int d = 0; d < mesh.num_axes(); ++d)
      if (mesh.coord(src, d) != mesh.coord(dst, d)) s.insert(d);
  return std::vector<int>(s.begin(), s.end());
}

// The vma of n's result from its operands' (already pvary'd where needed).
AxisSet result_vma(const Node& n, const std::vector<const AxisSet*>& in, const DeviceMesh& mesh) {
  AxisSet s;
  for (auto* v : in) s.insert(v->begin(), v->end());
  if (n.op == Op::collective_permute) {
    for (int a : permute_axes(n, mesh)) s.insert(a);
    return s;
  }
  const std::vector<int>* axes = collective_axes(n).axes;
  if (!axes) return s;
  if (n.op == Op::all_reduce) {
    for (int a : *axes) s.erase(a);
  } else {
    s.insert(axes->begin(), axes->end());  // all_gather, psum_scatter, all_to_all, pvary, axis_index
  }
  return s;
}

}  // namespace

AxisSet spec_axes(const AxisSharding& s) {
  AxisSet a;
  for (auto& d : s.dims) a.insert(d.begin(), d.end());
  return a;
}

std::unordered_map<const Node*, AxisSet> varying_axes(const Graph& body, const std::vector<AxisSet>& params,
                                                      const DeviceMesh& mesh) {
  std::unordered_map<const Node*, AxisSet> v;
  for (size_t k = 0; k < body.params.size(); ++k) v[body.params[k].get()] = params.at(k);
  for (auto& n : body.topo_order()) {
    if (n->op == Op::parameter) continue;
    if (op_family(n->op) == OpFamily::Region || op_family(n->op) == OpFamily::Tuple)
      throw NotImplementedError(std::string(op_name(n->op)) + " inside a shard_map body");
    std::vector<const AxisSet*> in;
    for (auto& x : n->in) in.push_back(&v.at(x.get()));
    v[n.get()] = result_vma(*n, in, mesh);
  }
  return v;
}

Graph with_explicit_pvary(const Graph& body, const std::vector<AxisSet>& params, const std::vector<AxisSet>& outs,
                          const MeshRef& mesh) {
  NodeTable t;
  Graph g;
  g.name = body.name;
  std::unordered_map<const Node*, AxisSet> v;  // by new node
  for (size_t k = 0; k < body.params.size(); ++k) {
    g.params.push_back(build::parameter(t, int(k), body.params[k]->aval));
    v[g.params.back().get()] = params.at(k);
  }
  auto raise = [&](NodeRef x, const AxisSet& want) {
    std::vector<int> missing;
    for (int a : want)
      if (!v.at(x.get()).count(a)) missing.push_back(a);
    if (missing.empty()) return x;
    NodeRef y = build::pvary(t, x, mesh, missing);
    AxisSet s = v.at(x.get());
    s.insert(missing.begin(), missing.end());
    v[y.get()] = s;
    return y;
  };
  auto m = rewrite(body, t, g.params, [&](const Node& n, const std::vector<NodeRef>& ops) -> NodeRef {
    std::vector<NodeRef> in = ops;
    if (const std::vector<int>* axes = collective_axes(n).axes; axes && n.op != Op::axis_index && n.op != Op::pvary) {
      in[0] = raise(in[0], AxisSet(axes->begin(), axes->end()));  // JAX's insert_collective_pvary
    } else if (in.size() > 1) {
      AxisSet all;
      for (auto& x : in) all.insert(v.at(x.get()).begin(), v.at(x.get()).end());
      for (auto& x : in) x = raise(x, all);  // JAX's auto_insert_reshard
    }
    NodeRef y = build::with_operands(t, n, in);
    if (!v.count(y.get())) {
      std::vector<const AxisSet*> vin;
      for (auto& x : in) vin.push_back(&v.at(x.get()));
      v[y.get()] = result_vma(*y, vin, *mesh);
    }
    return y;
  });
  for (size_t k = 0; k < body.outputs.size(); ++k) g.outputs.push_back(raise(m.at(body.outputs[k].get()), outs.at(k)));
  return g;
}

}  // namespace tessel
