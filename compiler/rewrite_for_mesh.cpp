// The rewrite-for-mesh pass (compiler/rewrite_for_mesh.hpp).
#include "compiler/rewrite_for_mesh.hpp"

#include "tessel/core/errors.hpp"
#include "tracer/build.hpp"
#include "tracer/rewrite.hpp"

namespace tessel::compiler {

// The axes of the common mesh that axes `axes` of `mesh` (one of cm's
// sources) became.
std::vector<int> common_axes(const CommonMesh& cm, const MeshRef& mesh, const std::vector<int>& axes) {
  for (size_t s = 0; s < cm.sources.size(); ++s) {
    if (!(cm.sources[s] == mesh || *cm.sources[s] == *mesh)) continue;
    std::vector<int> out;
    for (int a : axes) out.insert(out.end(), cm.atoms_of[s][a].begin(), cm.atoms_of[s][a].end());
    return out;
  }
  throw ShardingError("shard_map over " + mesh->str() + " inside a computation over " + cm.mesh->str() +
                      ": their devices differ");
}

// Rebuilds g in a fresh table with constraints moved onto the common mesh
// (shard_maps and the collectives of their bodies too) and out_shardings
// added as constraints on the outputs.
Graph rewrite_for_mesh(const Graph& g, const CommonMesh& cm, const std::vector<std::optional<AxisSharding>>& outs) {
  NodeTable t;
  Graph r;
  r.name = g.name;
  for (auto& p : g.params) r.params.push_back(build::with_operands(t, *p, {}));
  auto m = rewrite(g, t, r.params, [&](const Node& n, const std::vector<NodeRef>& in) -> NodeRef {
    switch (n.op) {
      case Op::sharding_constraint:
        return build::sharding_constraint(t, in[0], cm.rewrite(*n.attr<attr::Constraint>().sharding));
      case Op::shard_map: {
        attr::ShardMap sm = n.attr<attr::ShardMap>();  // its body is rewritten already
        sm.manual = common_axes(cm, sm.mesh, sm.manual);
        for (auto& s : sm.in_specs) s = cm.rewrite(s);
        for (auto& s : sm.out_specs) s = cm.rewrite(s);
        sm.mesh = cm.mesh;
        return build::shard_map(t, std::move(sm), in);
      }
      case Op::axis_index: {
        const auto& a = n.attr<attr::AxisIndex>();
        return build::axis_index(t, cm.mesh, common_axes(cm, a.mesh, a.axes));
      }
      case Op::pvary: {
        const auto& a = n.attr<attr::AxisIndex>();
        return build::pvary(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes));
      }
      case Op::all_reduce: {
        const auto& a = n.attr<attr::AllReduce>();
        return build::all_reduce(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.reduce_op);
      }
      case Op::all_gather: {
        const auto& a = n.attr<attr::AllGather>();
        return build::all_gather(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.dimension);
      }
      case Op::reduce_scatter: {
        const auto& a = n.attr<attr::ReduceScatter>();
        return build::reduce_scatter(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.dimension, a.reduce_op);
      }
      case Op::all_to_all: {
        const auto& a = n.attr<attr::AllToAll>();
        return build::all_to_all(t, in[0], cm.mesh, common_axes(cm, a.mesh, a.axes), a.split_dimension,
                                 a.concat_dimension);
      }
      case Op::collective_permute:  // positions in the whole mesh: the same on the common one
        return build::collective_permute(t, in[0], cm.mesh, n.attr<attr::CollectivePermute>().pairs);
      default: return build::with_operands(t, n, in);
    }
  });
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    NodeRef o = m.at(g.outputs[i].get());
    if (i < outs.size() && outs[i]) o = build::sharding_constraint(t, o, *outs[i]);
    r.outputs.push_back(o);
  }
  for (auto& e : g.effects) r.effects.push_back(m.at(e.get()));
  return r;
}

}  // namespace tessel::compiler
