// The order steps run in, within what their data dependencies allow.
//
// Collectives go as late as their first reader allows. A collective is a
// meeting of every device of its group: the early arrivals wait for the
// last one. On a host where devices share cores (8 devices on 2 cores), a
// device's compute between two meetings runs while others wait, so every
// meeting with compute before it leaves cores idle at its tail. Sunk to their
// readers, the data-parallel backward pass's gradient all-reduces (whose only
// readers are the program's outputs) become one run of meetings at the end:
// the devices wait for each other once instead of once per layer. Relative
// order among collectives may change, but every device runs the same
// program, so every device meets in the same order.
#pragma once

#include <vector>

#include "codegen/fusion.hpp"

namespace tessel::codegen {

// Reorders `steps` (a valid execution order) for a lower peak of live
// buffers: a list schedule that, among the steps whose inputs exist, runs
// first one that frees at least as many bytes as it allocates (a gradient's
// dot that is the last reader of an activation and a cotangent, say), and
// otherwise keeps the given order. Without it, a backward pass computed in
// the given (depth-first) order holds every layer's activations and
// cotangents until the last weight gradient runs. `outputs`: the program's
// results, whose buffers are never freed (and cost nothing to allocate).
void schedule_for_memory(std::vector<Step>& steps, const std::vector<NodeRef>& outputs);

// Reorders `steps` (a valid execution order) with each collective moved to
// just before its first reader, or to the end.
void sink_collectives(std::vector<Step>& steps);

}  // namespace tessel::codegen
