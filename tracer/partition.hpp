// The SPMD partitioner: rewrites a global graph, with a sharding for every
// value (tracer/propagate.hpp), into the one per-device program every device
// runs, in local shapes, with collectives where shardings meet.
//
// For each op: each operand is resharded to what the op's factor assignment
// needs (all-gather of axes it must not be split on, a local dynamic slice by
// axis_index for axes it must be split on, all-to-all when one axis moves
// between dims); the op runs on the local pieces; a result left partial by a
// split contraction is all-reduced — or reduce-scattered straight into the
// sharding its value needs — and a result whose value wants another
// sharding is resharded. Uneven dims are padded to whole tiles: before a
// reduction or contraction over a split, uneven dim the padding is masked
// with the reduction's identity, and gathered dims are cut back to size.
#pragma once

#include <vector>

#include "tracer/propagate.hpp"

namespace tessel {

struct PartitionedProgram {
  Graph local;                               // per-device, local (padded tile) shapes
  MeshRef mesh;
  std::vector<AxisSharding> param_shardings;   // how each input must arrive
  std::vector<AxisSharding> output_shardings;  // how each output leaves
};

PartitionedProgram partition(const Graph& g, const ShardingAssignment& a);

}  // namespace tessel
