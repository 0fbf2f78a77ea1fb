// What a program costs: its flops and bytes (each op's cost rule), the
// collectives it runs, whether a run is cheap enough for the caller's thread,
// what it costs to keep in the compile cache, and whether it fits the host's
// memory.
#pragma once

#include <cstddef>
#include <vector>

#include "compiler/program.hpp"

namespace tessel::compiler {

// What a per-device program computes and reads (Rule<op>::cost); a region op
// adds what its regions run, as often as they run (a cond: the dearest).
CostAnalysis cost_of(const Graph& local);
// The nodes that meet peers, with the bytes each device reads; a region op's
// as often as its regions run.
std::vector<CommStat> communication_of(const Graph& local);
// Whether a run costs less than waking its devices (rt::Executable::cheap).
bool is_cheap(const Program& p, const rt::Executable& e);
// What a cached program costs to keep: its texts and its kernels' code
// (object_bytes: the size of the program object the cache keeps).
std::size_t program_bytes(const Program& p, std::size_t code_bytes, std::size_t object_bytes = sizeof(Program));
// RESOURCE_EXHAUSTED before any device allocates, when a run needs more than
// the host's memory on all its devices together.
void check_memory(const Program& p);

}  // namespace tessel::compiler
