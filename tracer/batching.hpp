// Batching (vmap) as a graph transformation, JAX's way: each primitive's
// batching rule (tracer/rules.hpp, OpRules::batch) rewrites it for operands
// carrying a leading batch dimension; values that depend on no batched
// input stay unbatched.
#pragma once

#include <vector>

#include "tracer/ir.hpp"
#include "tracer/rules.hpp"

namespace tessel {

// g with parameter i given a leading batch dimension of size b.size where
// batched[i]; every output carries one (broadcast where it does not depend
// on a batched input).
// out_batched (optional): which outputs depend on a batched input.
Graph batch_graph(const Graph& g, const std::vector<bool>& batched, const BatchInfo& b,
                  std::vector<bool>* out_batched = nullptr);

}  // namespace tessel
