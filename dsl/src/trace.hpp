// Tracing: inside ts::jit an Array is a tracer standing for a node of the
// graph being built. Every op of the DSL goes through apply(): with a tracer
// among its inputs it adds nodes to that trace; with concrete inputs only it
// runs at once as a one-op program through the same pipeline (eager mode).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <tessel/array.hpp>

#include "tracer/ir.hpp"

namespace tessel::detail {

struct TraceState {
  NodeTable table;
  std::vector<NodeRef> params;   // explicit inputs first, then captured arrays
  std::vector<Array> captured;   // concrete arrays the traced code closed over
  std::unordered_map<const void*, NodeRef> captured_node;
  std::vector<NodeRef> effects;  // nodes kept for their effects (Graph::effects): debug_callbacks, regions holding some
  NodeRef last_token;            // the latest debug_callback's token: the next one comes after it
  bool active = true;
};

// Starts a trace on this thread (nested traces stack); end it with end_trace.
std::shared_ptr<TraceState> begin_trace();
void end_trace(const std::shared_ptr<TraceState>& t);
// A tracer for a new explicit input of aval `a`.
Array new_input(const std::shared_ptr<TraceState>& t, const Aval& a);
// The node of x in trace t: its own node for a tracer of t, a captured
// input (or, for scalar literals, a constant) for a concrete array.
NodeRef node_of(TraceState& t, const Array& x);
// The innermost active trace on this thread, or null.
std::shared_ptr<TraceState> current_trace();
// The tracer of trace t standing for node n.
Array tracer_for(const std::shared_ptr<TraceState>& t, const NodeRef& n);
// x as a tracer of trace t (a concrete array is captured as an input).
Array lift(const std::shared_ptr<TraceState>& t, const Array& x);
// The innermost active trace among xs' tracers, or null.
std::shared_ptr<TraceState> trace_of(const std::vector<Array>& xs);

// fn traced on fresh inputs of avals `in`: its graph (parameters: the
// inputs, then the arrays it closed over, concrete or of an enclosing trace)
// and the ended trace (its table, its captured arrays).
struct TracedGraph {
  Graph g;
  std::shared_ptr<TraceState> trace;
};
TracedGraph trace_graph(const std::string& name, const std::vector<Aval>& in,
                        const std::function<std::vector<Array>(const std::vector<Array>&)>& fn);

using BuildMany = std::function<std::vector<NodeRef>(NodeTable&, const std::vector<NodeRef>&)>;
using BuildOne = std::function<NodeRef(NodeTable&, const std::vector<NodeRef>&)>;

// Runs `build` over the inputs' nodes: traced, or eagerly as a one-op program.
std::vector<Array> apply(const std::string& name, const std::vector<Array>& inputs, const BuildMany& build);
Array apply1(const std::string& name, const std::vector<Array>& inputs, const BuildOne& build);
// A region op (cond, while, scan, shard_map) built by `make` over the
// inputs' nodes, its results returned. When `effects` (its regions hold
// some), it is staged in the code's innermost trace (not hoisted to the
// inputs') and kept among that trace's effects, so it runs though nothing
// reads its results.
std::vector<Array> apply_region(const std::string& name, const std::vector<Array>& inputs, bool effects,
                                const BuildOne& make);
// Whether any of the graphs holds effects.
bool any_effects(const std::vector<GraphRef>& graphs);
// g run on args: inlined into the innermost trace when any argument is a
// tracer, else as one compiled program through the pipeline.
std::vector<Array> call_graph(const Graph& g, const std::vector<Array>& args, const std::string& name);

// A C++ scalar as an operand: a weakly typed (per its C++ type) 0-d array
// that a trace bakes in as a constant.
Array scalar_literal(double value, DType dtype, bool weak);

// Inside a shard_map body, a sharding constraint may name automatic axes
// only (dsl/src/shard_map.cpp): a ShardingError otherwise.
void check_constraint_in_body(const AxisSharding& s);

// g (traced from inputs) ready for reverse mode inside a shard_map body:
// JAX's implicit pvarys made explicit from its inputs' typing (or, with
// check_vma=false, JAX's untyped psums); g itself outside any body.
Graph typed_for_vjp(const Graph& g, const std::vector<Array>& inputs);

}  // namespace tessel::detail
