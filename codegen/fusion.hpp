// Fusion: which values of a per-device program get a buffer, and which
// loop nest computes each.
//
// A value is materialised when something needs it in memory: program inputs
// and outputs, reductions (each is the root of its own loop nest),
// dot_general and collectives and their operands, non-scalar constants, and
// values used more than once whose recomputation would cost more than a few
// cheap operations. Every other value is inlined, as an expression evaluated
// at the index its consumer asks for, into the loop nest of each
// materialised value that uses it: elementwise chains, broadcasts, reshapes,
// transposes, slices, pads and concatenations all fuse this way.
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel::codegen {

enum class StepKind {
  Loop,        // a loop nest computing a materialised value from inlined expressions
  Reduce,      // a loop nest computing a reduction (its operand inlined)
  Dot,         // a library matmul
  Collective,  // a runtime collective
  Constant,    // a non-scalar literal copied into its buffer
  AxisIndex,   // the device's coordinate along mesh axes
  Library,     // a library routine on whole arrays (codegen/library.hpp)
  Control,     // cond, while, scan: their regions run as executables of their own
  Update,      // dynamic_update_slice of a small window: the operand copied (or written over, when dead), then the window
  Transpose,   // a large transpose moving the last dim, copied by blocks from its operand in memory (codegen/transpose.hpp)
};

struct Step {
  StepKind kind;
  NodeRef node;                 // the value computed (a control op: its tuple, whose elements get the buffers)
  std::vector<NodeRef> reads;   // materialised values it reads, in a fixed order
};

struct FusionPlan {
  std::vector<Step> steps;  // in execution order
  std::unordered_set<const Node*> materialized;
};

// The deepest expression one kernel inlines; deeper chains are cut into
// materialised steps of at most this depth.
inline constexpr int kMaxFusedDepth = 128;

FusionPlan plan_fusion(const Graph& g);

// The materialised values an inlined expression rooted at `n` reads.
std::vector<NodeRef> leaves_of(const NodeRef& n, const std::unordered_set<const Node*>& materialized);

}  // namespace tessel::codegen
