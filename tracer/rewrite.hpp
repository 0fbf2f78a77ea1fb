// The one graph rewrite (docs/architecture.md, principle 5): rebuild a graph
// node by node, operands first, into a table, optionally replacing nodes.
// Passes that copy a graph with changes (the pipeline's mesh rewrite,
// autodiff's linearisation, inlining a traced function into another trace,
// inlining calls) use it rather than walking the graph themselves. It
// recurses into regions: a node's child graphs are rewritten first with the
// same callback, and the callback sees the node holding the rewritten regions.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel {

// A node's replacement, from the original and its rebuilt operands.
// For a node with regions, `old` is a copy of it holding the rewritten regions.
using RewriteFn = std::function<NodeRef(const Node& old, const std::vector<NodeRef>& operands)>;

// Rebuilds every node of g into t (iteratively: graphs may be deep), g's
// parameter i becoming params[i]. Without `fn`, each node is the same op on
// its rebuilt operands. Returns the new value of every node of g.
// into_regions=false: regions are not rewritten first; fn sees the original
// node and rebuilds its regions itself (a pass whose state differs per region).
std::unordered_map<const Node*, NodeRef> rewrite(const Graph& g, NodeTable& t, const std::vector<NodeRef>& params,
                                                 const RewriteFn& fn = {}, bool into_regions = true);

// n's op and attributes, `regions` in place of its own, on operands `ops`.
NodeRef with_regions(NodeTable& t, const Node& n, const std::vector<GraphRef>& regions, const std::vector<NodeRef>& ops);

// g's outputs computed on `args` in t (g inlined: parameter i is args[i]);
// g's effects, inlined too, are appended to `effects` (which must be given
// when g has effects: the graph receiving the nodes keeps them).
std::vector<NodeRef> inline_graph(NodeTable& t, const Graph& g, const std::vector<NodeRef>& args,
                                  std::vector<NodeRef>* effects = nullptr);

// g with parameters of `avals` (in a fresh table), g's parameter i becoming
// parameter pos[i] (others unused); its outputs `outputs` of g's (all when
// empty), in that order. How regions are rebuilt with other parameter lists.
GraphRef reparameterize(const Graph& g, const std::vector<Aval>& avals, const std::vector<int>& pos,
                        const std::vector<int>& outputs = {});

// g with every call replaced by its body (nested calls too); a call with
// several results becomes a tuple, whose get_tuple_elements fold to the
// values. The first pass of lower() and of autodiff.
// keep_custom: the custom calls (is_custom_call) stay (autodiff and
// batching apply their own rules); otherwise they become their `fun`.
Graph inline_calls(const Graph& g, bool keep_custom = false);
// g with only its custom calls replaced by their fun (the reference
// interpreter's first step: it runs plain calls itself).
Graph inline_custom_calls(const Graph& g);
// Whether g or any of its regions holds a call or a custom call.
bool has_calls(const Graph& g);
// A call with its own derivative rules (custom_jvp_call, custom_vjp_call,
// and remat's remat_call and remat_lin): its first region is what it computes.
inline bool is_custom_call(Op op) {
  return op == Op::custom_jvp_call || op == Op::custom_vjp_call || op == Op::remat_call || op == Op::remat_lin;
}

}  // namespace tessel
