// dynamic_update_slice of a small window (StepKind::Update): the operand's
// bytes copied into the result, unless the result's block is the operand's
// (a dead operand written over: a loop carry, a chain of updates), then the
// update's bytes into the window at the clamped starts. O(window) when in
// place: a fori_loop doing x.at[i].set(v) on a large array costs O(1) a step.
#pragma once

#include <memory>
#include <vector>

#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

// reads: the operand's slot, the update's, then one integer scalar slot per
// dimension (the starts); out: the result's slot (may be the operand's).
std::unique_ptr<rt::Thunk> make_update_thunk(const Node& n, std::vector<int> reads, int out);

}  // namespace tessel::codegen
