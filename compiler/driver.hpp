// The compile driver as a script of named passes (docs/architecture.md,
// principle 6):
//
//   traced Graph --inline-calls--> --rewrite-for-mesh--> --propagate-->
//     --partition--> --compile (codegen)--> Program with its Executable
//
// each pass logged, timed, verified and dumped by a PassLog. It speaks only
// the compiler's vocabulary (graphs, meshes, AxisShardings); the user's
// layer (dsl/src/pipeline.cpp) turns arrays and their shardings into a
// LowerInputs, assigns the devices, and keeps the compile cache.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "compiler/pass_log.hpp"
#include "compiler/program.hpp"

namespace tessel::compiler {

// How the driver reports and compiles: what the user's configuration says.
struct DriverOptions {
  std::string name = "f";              // the program's name: dumps, the trace, the compile log's record
  std::string title = "jit(f)";        // how the compile log names it: "jit(f)" or "tessel.add"
  std::string dump_dir;                // each pass's text goes there, when not empty
  std::string compilation_cache_dir;   // the kernels' disk cache, when not empty
  int threads_per_device = 1;
  bool log_compiles = false;           // one line on stderr for each program compiled
  double trace_seconds = 0;            // how long tracing took (the compile log)
};

// One parameter of the program, as its argument and in_shardings give it.
struct ParamInput {
  Shape shape;
  std::optional<AxisSharding> committed;  // the argument's layout, when it is committed
  std::optional<AxisSharding> given;      // its in_shardings entry, on its own mesh
  // For the message when the two disagree: the argument ("0 of jit(f)"),
  // its committed sharding and the in_sharding, as the user wrote them.
  std::string what, committed_text, given_text;
};

// What the passes after inline-calls need.
struct LowerInputs {
  std::vector<int> device_ids;  // the devices the program runs on, in order
  MeshRef flat_mesh;            // a flat mesh over device_ids: the mesh when nothing names one
  std::vector<ParamInput> params;                    // one per parameter of the traced program
  std::vector<std::optional<AxisSharding>> outputs;  // out_shardings, on their own meshes
  std::vector<std::string> arg_texts;                // each argument as the compile log prints it
  bool compile = true;                               // false: stop after partition (no executable)
};

// One program through the pass script. The constructor takes the traced
// program and runs inline-calls; run() the rest.
class Driver {
 public:
  Driver(const Graph& traced, DriverOptions opt);
  // The program after inline-calls (the traced one when it has no calls):
  // what device assignment reads.
  const Graph& inlined() const { return calls_ ? inlined_ : traced_; }
  // rewrite-for-mesh, propagate, partition, the analyses and (in.compile)
  // compile, into p; then the compile log and the dump. Returns the bytes of
  // machine code compiled (for the cache's accounting).
  std::size_t run(const LowerInputs& in, Program& p);

 private:
  const Graph& traced_;
  DriverOptions opt_;
  PassLog passes_;
  bool calls_ = false;
  Graph inlined_;
};

// Number of programs compiled so far (tests: an eager op is compiled once).
std::size_t compile_count();

}  // namespace tessel::compiler
