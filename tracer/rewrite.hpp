// The one graph rewrite (STYLE.md 5): rebuild a graph node by node, operands
// first, into a table, optionally replacing nodes. Passes that copy a graph
// with changes (the pipeline's mesh rewrite, autodiff's linearisation,
// inlining a traced function into another trace) use it rather than walking
// the graph themselves; when nodes get regions, this is where a rewrite will
// recurse into them.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel {

// A node's replacement, from the original and its rebuilt operands.
using RewriteFn = std::function<NodeRef(const Node& old, const std::vector<NodeRef>& operands)>;

// Rebuilds every node of g into t (iteratively: graphs may be deep), g's
// parameter i becoming params[i]. Without `fn`, each node is the same op on
// its rebuilt operands. Returns the new value of every node of g.
std::unordered_map<const Node*, NodeRef> rewrite(const Graph& g, NodeTable& t, const std::vector<NodeRef>& params,
                                                 const RewriteFn& fn = {});

}  // namespace tessel
