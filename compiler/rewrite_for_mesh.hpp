// The rewrite-for-mesh pass: a traced program whose constraints, shard_maps
// and collectives name several meshes (of the same devices) is rebuilt over
// their common mesh (tracer/sharding.hpp, unify_meshes), with the requested
// out_shardings added as constraints on its outputs.
#pragma once

#include <optional>
#include <vector>

#include "tracer/ir.hpp"
#include "tracer/sharding.hpp"

namespace tessel::compiler {

// The axes of the common mesh that axes `axes` of `mesh` (one of cm's
// sources) became. ShardingError when mesh is not one of them.
std::vector<int> common_axes(const CommonMesh& cm, const MeshRef& mesh, const std::vector<int>& axes);

// Rebuilds g in a fresh table with constraints moved onto the common mesh
// (shard_maps and the collectives of their bodies too) and outs (already on
// the common mesh) added as constraints on the outputs.
Graph rewrite_for_mesh(const Graph& g, const CommonMesh& cm, const std::vector<std::optional<AxisSharding>>& outs);

}  // namespace tessel::compiler
