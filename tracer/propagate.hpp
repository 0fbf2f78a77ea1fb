// Sharding propagation over a traced (global) graph, with each op's factor
// rule (tracer/rules.hpp): computation follows data.
//
// Every value gets an axis sharding over the program's one mesh. Fixed
// shardings — committed inputs, in_shardings, sharding_constraint (and
// out_shardings, which lowering turns into constraints) — never change; the
// rules carry them forward to results and backward to open inputs, to a
// fixpoint. Within one op, participants speak in priority order (fixed ones,
// then operands in order, then the result); a factor on which two speak
// differently stays unsplit, and an axis already given to one factor is not
// given to another. What is still unknown at the end is replicated.
//
// A reduction factor split over axes makes the op's result partial over
// them; the partitioner turns that into an all-reduce (or a reduce-scatter).
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracer/ir.hpp"
#include "tracer/rules.hpp"

namespace tessel {

struct PropagationInput {
  MeshRef mesh;
  std::vector<std::optional<AxisSharding>> params;  // fixed parameter shardings; nullopt: open
};

// How a control-flow op (cond, while_, scan) meets its regions: the
// sharding each operand is resharded to as it enters, and each result's as
// it leaves (a loop's carries: the same on the way in and out, as XLA's
// while; a scan's xs and ys whole along the scanned axis).
struct RegionShardings {
  std::vector<AxisSharding> operands, results;
  // Each region's parameter and output shardings, in Attrs::regions() order.
  std::vector<std::vector<AxisSharding>> params, outputs;
};

struct ShardingAssignment {
  MeshRef mesh;
  std::unordered_map<const Node*, RegionShardings> regions;  // per control-flow op
  std::unordered_map<const Node*, AxisSharding> value;                   // every node's sharding (reduced)
  std::unordered_map<const Node*, std::vector<std::vector<int>>> factor_axes;  // per op: mesh axes per factor
  std::unordered_map<const Node*, std::string> reason;                   // what chose each value's sharding
  std::unordered_map<const Node*, const Node*> via;                      // the op whose rule chose it (if a rule did)
};

ShardingAssignment propagate(const Graph& g, const PropagationInput& in);

// A tuple-valued op whose factor rule shards each element (FactorRule::results): lu, qr, eigh, svd.
bool has_factored_elements(const Node& n);

// The sharding of each dim of a participant from factor axes.
AxisSharding sharding_from_factors(const MeshRef& mesh, const std::vector<std::vector<int>>& dims,
                                   const std::vector<std::vector<int>>& factor_axes);

// The mesh axes of an op's sharded reduction factors: those its result holds partial sums over.
std::vector<int> unreduced_axes(const FactorRule& rule, const std::vector<std::vector<int>>& factor_axes);

// The dim along which `value` splits `natural` further by exactly the
// partial-sum axes `unreduced`, every other dim equal and the split even:
// where one reduce-scatter turns partial sums laid out as `natural` into
// `value`. -1 when there is none.
int reduce_scatter_dim(const AxisSharding& natural, const AxisSharding& value, const std::vector<int>& unreduced,
                       const Shape& shape);

}  // namespace tessel
