// Compiling and running a traced program for user arrays: what the user's
// layer gives the compile driver (compiler/driver.hpp, the pass script) and
// takes back. lower() turns arrays, in_shardings and out_shardings into the
// driver's inputs (the device assignment, each argument's layout) and keeps
// the compile cache; run() moves arrays into the layouts a program wants and
// wraps its results as arrays.
//
// Eager ops and jit share it: an eager op is a one-op graph. Each pass can
// be dumped as text (TESSEL_DUMP_DIR / config().dump_dir).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/sharding.hpp>

#include "compiler/program.hpp"
#include "compiler/program_cache.hpp"

namespace tessel::detail {

struct LowerOptions {
  std::string name = "f";                              // for messages: "jit(f)" or "tessel.add"
  bool is_op = false;                                   // an eager op (argument names x1, x2, ...)
  std::vector<std::optional<Sharding>> in_shardings;   // per parameter (flattened)
  std::vector<std::optional<Sharding>> out_shardings;  // per output (flattened)
  double trace_seconds = 0;                             // how long tracing took (the compile log)
  const Key* graph_key = nullptr;                       // fingerprint(graph), when the caller keeps it
};

using CostAnalysis = compiler::CostAnalysis;
using CommStat = compiler::CommStat;

// A compiled program (compiler/program.hpp) with its outputs' shardings as
// the user sees them; shared by the cache, Lowered and Compiled.
struct Program : compiler::Program {
  std::vector<Sharding> output_user_shardings;
  bool committed_outputs = false;
  // Its first run with donated arguments says which no output could use
  // (run_program; JAX warns when it lowers).
  std::shared_ptr<std::once_flag> donation_checked = std::make_shared<std::once_flag>();
};

// Lowers and compiles `g` for these arguments (cached by program and layouts).
std::shared_ptr<const Program> lower(const Graph& g, const std::vector<Array>& args, const LowerOptions& opt,
                                     bool compile = true);
// Runs a compiled program on arguments of the layouts it was lowered for (moving them when they differ).
// `donated` (empty, or one flag per argument): those arguments are given up
// (JitOptions::donate_argnums): deleted after the launch, their blocks
// reusable for outputs (rt::Executable::launch).
std::vector<Array> run(const Program& p, const std::vector<Array>& args, const std::vector<bool>& donated);
// lower + run.
std::vector<Array> execute(const Graph& g, const std::vector<Array>& args, const LowerOptions& opt);

// "[0, 1, 2]" for messages; whether two shardings place an array's elements alike.
using compiler::ids_str;
using compiler::same_placement;

// Number of programs compiled so far (tests: an eager op is compiled once).
std::size_t compile_count();
// Programs in the compile cache and the bytes they are counted at.
using CacheStats = compiler::CacheStats;
CacheStats compile_cache_stats();

}  // namespace tessel::detail
