// JAX's varying-manual-axes typing of shard_map bodies (check_vma).
//
// Every value of a body varies over a set of the mesh's manual axes: a
// parameter over the axes its in_spec splits it by, axis_index over its
// axes; psum, pmax and pmin make a value invariant over theirs (it is equal
// on every device along them); all_gather, psum_scatter, all_to_all, ppermute
// and pvary keep or add theirs; constants are invariant; every other op
// varies where any operand does. An out_spec that leaves out an axis claims
// the value is invariant over it, which the shard_map checks at trace time.
//
// Autodiff needs the typing in the graph: JAX inserts pvary implicitly
// before a collective over axes its operand does not vary over, on operands
// of an op whose others vary more, and on outputs whose out_spec names axes
// they do not vary over. with_explicit_pvary makes those pvarys nodes, whose
// transposes are psums (tracer/rules_collective.cpp).
#pragma once

#include <set>
#include <unordered_map>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel {

using AxisSet = std::set<int>;

// The mesh axes a collective_permute moves data along (where its sources
// and targets differ).
std::vector<int> permute_axes(const Node& n, const DeviceMesh& mesh);

// The mesh axes a sharding splits some dimension by.
AxisSet spec_axes(const AxisSharding& s);

// The axes each value of `body` varies over, its parameters varying over `params`.
// automatic_axes: the body's shard_map leaves mesh axes automatic (control
// flow whose path varies between devices is then refused: partitioning its
// regions may add collectives).
std::unordered_map<const Node*, AxisSet> varying_axes(const Graph& body, const std::vector<AxisSet>& params,
                                                      const DeviceMesh& mesh, bool automatic_axes = false);

// body with JAX's implicit pvarys as nodes; `outs`: the axes each output's
// out_spec names.
Graph with_explicit_pvary(const Graph& body, const std::vector<AxisSet>& params, const std::vector<AxisSet>& outs,
                          const MeshRef& mesh);

// body with every psum preceded by a pvary over its axes: JAX's untyped
// (check_vma=false) rule, under which a psum transposes to a psum. Nested
// shard_maps keep their bodies (their own transposes apply their rules).
Graph with_untyped_psums(const Graph& body);

}  // namespace tessel
