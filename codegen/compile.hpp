// The code generator's entry: a per-device program (local shapes,
// collectives explicit) to an executable of thunks — fused loop kernels from
// LLVM, matrix products (codegen/gemm.hpp), collectives and constants — over
// buffer slots.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

struct CompileOptions {
  int threads_per_device = 1;
  // The devices of this process that run the program side by side: their
  // results share the host's caches (a large result is streamed out where
  // all of theirs together outgrow them, rt::kStreamBytes).
  int local_devices = 1;
  // Called after each of codegen's own passes over the program (not its
  // regions' compiles): "fold-transposes" with the graph it made,
  // "expand-complex" (and "fold-transposes" after it) with the packed graph
  // as text, "plan-fusion" and "sink-collectives" with the plan's steps as
  // text (graph null: nothing to verify; a packed complex graph's ops read
  // pairs of reals where their rules want complex values). The compile
  // driver logs, times, dumps and verifies them as it does its own passes.
  std::function<void(const char* pass, const Graph* graph, const std::string& text)> on_pass;
  // A region of a control-flow op (a loop body, a branch): its runs bind no
  // block to several positions (no lockstep sharing of results), so an update
  // may write over a dead temporary's block in place.
  bool region = false;
};

struct CompiledProgram {
  std::shared_ptr<rt::Executable> executable;
  std::string thunks_text;  // one line per thunk
  std::size_t code_bytes = 0;  // machine code of its kernels (shared kernels counted in each program)
  // Per output: the parameter whose block the caller may pass as that
  // output's too (the output is an update of the parameter, written in place,
  // and nothing reads the parameter after it), or -1. A loop's carry then
  // stays in one buffer from step to step.
  std::vector<int> in_place;
};

CompiledProgram compile(const Graph& program, const CompileOptions& options);

}  // namespace tessel::codegen
