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

namespace {
// The common mesh as the attributes' on_mesh sees it.
class ToCommon final : public MeshRewrite {
 public:
  explicit ToCommon(const CommonMesh& cm) : cm_(cm) {}
  const MeshRef& mesh() const override { return cm_.mesh; }
  std::vector<int> axes(const MeshRef& from, const std::vector<int>& axes) const override {
    return common_axes(cm_, from, axes);
  }
  AxisSharding sharding(const AxisSharding& s) const override { return cm_.rewrite(s); }

 private:
  const CommonMesh& cm_;
};
}  // namespace

// Rebuilds g in a fresh table with every attribute that names a mesh moved
// onto the common mesh (Attrs::on_mesh: constraints, shard_maps and the
// collectives of their bodies) and out_shardings added as constraints on
// the outputs.
Graph rewrite_for_mesh(const Graph& g, const CommonMesh& cm, const std::vector<std::optional<AxisSharding>>& outs) {
  NodeTable t;
  Graph r;
  r.name = g.name;
  for (auto& p : g.params) r.params.push_back(build::with_operands(t, *p, {}));
  const ToCommon to_common(cm);
  auto m = rewrite(g, t, r.params, [&](const Node& n, const std::vector<NodeRef>& in) -> NodeRef {
    Node moved;  // n (its regions rewritten already) with its attributes on the common mesh
    moved.op = n.op;
    moved.aval = n.aval;
    moved.attrs = n.attrs.on_mesh(to_common);
    return build::with_operands(t, moved, in);
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
