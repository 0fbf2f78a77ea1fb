// The compile pipeline as a script of named passes (docs/architecture.md,
// principle 6), and the cache of its results:
//
//   traced Graph --unify meshes--> --propagate--> --partition--> --codegen--> Executable
//
// Eager ops and jit share it: an eager op is a one-op graph. Each stage can
// be dumped as text (TESSEL_DUMP_DIR / config().dump_dir).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/sharding.hpp>

#include "runtime/executable.hpp"
#include "tracer/partition.hpp"

namespace tessel::detail {

struct LowerOptions {
  std::string name = "f";                              // for messages: "jit(f)" or "tessel.add"
  bool is_op = false;                                   // an eager op (argument names x1, x2, ...)
  std::vector<std::optional<Sharding>> in_shardings;   // per parameter (flattened)
  std::vector<std::optional<Sharding>> out_shardings;  // per output (flattened)
  double trace_seconds = 0;                             // how long tracing took (the compile log)
  const Key* graph_key = nullptr;                       // fingerprint(graph), when the caller keeps it
};

struct CostAnalysis {
  double flops = 0, transcendentals = 0, bytes_accessed = 0;
};

struct CommStat {
  std::string collective;
  double bytes_per_device = 0;
};

// Everything lowering and compiling one program for one set of argument
// layouts produced; shared by the cache, Lowered and Compiled.
struct Program {
  Graph global;
  std::string global_text;  // traced program with the shardings propagation chose
  CommonMesh common;
  ShardingAssignment assignment;
  PartitionedProgram partitioned;
  std::string local_text;   // the per-device program
  std::string thunks_text;
  std::shared_ptr<rt::Executable> executable;
  std::vector<Sharding> output_user_shardings;
  bool committed_outputs = false;
  CostAnalysis cost;
  std::vector<CommStat> communication;
  std::map<std::string, std::size_t> memory;  // argument, output, temp bytes per device
  std::size_t peak_bytes = 0;                 // most memory a device holds during a run
};

// Lowers and compiles `g` for these arguments (cached by program and layouts).
std::shared_ptr<const Program> lower(const Graph& g, const std::vector<Array>& args, const LowerOptions& opt,
                                     bool compile = true);
// Runs a compiled program on arguments of the layouts it was lowered for (moving them when they differ).
std::vector<Array> run(const Program& p, const std::vector<Array>& args);
// lower + run.
std::vector<Array> execute(const Graph& g, const std::vector<Array>& args, const LowerOptions& opt);

// "[0, 1, 2]" for messages.
std::string ids_str(const std::vector<int>& ids);
// True when a and b put the same elements of an array of `shape` on the same devices.
bool same_placement(const AxisSharding& a, const AxisSharding& b, const Shape& shape);

// Number of programs compiled so far (tests: an eager op is compiled once).
std::size_t compile_count();
// Programs in the compile cache and the bytes they are counted at.
struct CacheStats {
  std::size_t entries = 0, bytes = 0;
};
CacheStats compile_cache_stats();

}  // namespace tessel::detail
