// What the compile driver makes for one program: a Program (the traced
// program on its common mesh, its sharding assignment, the per-device program
// and its executable), with its cost, communication and memory; and the two
// placement helpers every stage of the driver shares (ids_str, same_placement).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/executable.hpp"
#include "tracer/partition.hpp"
#include "tracer/sharding.hpp"

namespace tessel::compiler {

struct CostAnalysis {
  double flops = 0, transcendentals = 0, bytes_accessed = 0;
};

struct CommStat {
  std::string collective;
  double bytes_per_device = 0;
};

// Everything lowering and compiling one program for one set of argument
// layouts produced. The user's layer extends it with what users name (its
// outputs' shardings as the user sees them).
struct Program {
  Graph global;
  std::string global_text;  // traced program with the shardings propagation chose
  CommonMesh common;
  ShardingAssignment assignment;
  PartitionedProgram partitioned;
  std::string local_text;   // the per-device program
  std::string thunks_text;
  std::shared_ptr<rt::Executable> executable;
  CostAnalysis cost;
  std::vector<CommStat> communication;
  std::map<std::string, std::size_t> memory;  // argument, output, temp bytes per device
  std::size_t peak_bytes = 0;                 // most memory a device holds during a run
};

// "[0, 1, 2]" for messages.
std::string ids_str(const std::vector<int>& ids);
// True when a and b put the same elements of an array of `shape` on the same devices.
bool same_placement(const AxisSharding& a, const AxisSharding& b, const Shape& shape);

}  // namespace tessel::compiler
