#include "dsl/src/trace.hpp"

#include "dsl/src/array_impl.hpp"
#include "dsl/src/pipeline.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"

#include <tessel/creation.hpp>

namespace tessel::detail {

namespace {
thread_local std::vector<std::shared_ptr<TraceState>> t_traces;

Array make_tracer(const std::shared_ptr<TraceState>& t, const NodeRef& n) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->dtype = n->dtype();
  impl->shape = n->shape();
  impl->weak_type = n->aval.weak_type;
  impl->trace = t;
  impl->node = n;
  return Array(std::move(impl));
}
}  // namespace

std::shared_ptr<TraceState> begin_trace() {
  auto t = std::make_shared<TraceState>();
  t_traces.push_back(t);
  return t;
}

void end_trace(const std::shared_ptr<TraceState>& t) {
  t->active = false;
  if (!t_traces.empty() && t_traces.back() == t) t_traces.pop_back();
}

Array new_input(const std::shared_ptr<TraceState>& t, const Aval& a) {
  NodeRef p = build::parameter(t->table, int(t->params.size()), a);
  t->params.push_back(p);
  return make_tracer(t, p);
}

NodeRef node_of(TraceState& t, const Array& x) {
  const ArrayImpl& a = impl_of(x);
  if (a.trace) {
    if (a.trace.get() == &t) return a.node;
    if (!a.trace->active)
      throw ConcretizationError("a tracer of shape " + aval_str(a.dtype, a.shape) +
                                " escaped the jit trace that made it (it was stored outside the traced function "
                                "and used later)");
    // A tracer of an enclosing trace (a function traced inside jit closed
    // over it): an input of this trace, like a closed-over concrete array;
    // applying this trace's graph in the enclosing one passes it in.
  }
  auto it = t.captured_node.find(&a);
  if (it != t.captured_node.end()) return it->second;
  if (a.literal) {
    // Baked in: a C++ scalar in an expression.
    HostArray h;
    h.dtype = a.dtype;
    h.shape = a.shape;
    h.bytes.resize(dtype_size(a.dtype));
    gather_to_host(a, h.bytes.data());
    return build::constant(t.table, std::make_shared<Literal>(std::move(h)), a.weak_type);
  }
  NodeRef p = build::parameter(t.table, int(t.params.size()), Aval{a.dtype, a.shape, a.weak_type});
  t.params.push_back(p);
  t.captured.push_back(x);
  t.captured_node[&a] = p;
  return p;
}

Array tracer_for(const std::shared_ptr<TraceState>& t, const NodeRef& n) { return make_tracer(t, n); }

std::shared_ptr<TraceState> current_trace() { return t_traces.empty() ? nullptr : t_traces.back(); }

Array lift(const std::shared_ptr<TraceState>& t, const Array& x) { return make_tracer(t, node_of(*t, x)); }

std::shared_ptr<TraceState> trace_of(const std::vector<Array>& xs) {
  std::shared_ptr<TraceState> found;
  for (auto& x : xs) {
    const ArrayImpl& a = impl_of(x);
    if (!a.trace) continue;
    if (!a.trace->active)
      throw ConcretizationError("a tracer of shape " + aval_str(a.dtype, a.shape) +
                                " escaped the jit trace that made it and was used after the trace ended");
    // The innermost: the one latest on this thread's stack.
    if (!found) {
      found = a.trace;
    } else if (found != a.trace) {
      for (auto it = t_traces.rbegin(); it != t_traces.rend(); ++it) {
        if (*it == found) break;
        if (*it == a.trace) {
          found = a.trace;
          break;
        }
      }
    }
  }
  return found;
}

namespace {

// Runs what `build` makes of the inputs (and the effects it hands back) at
// once, as one program through the pipeline (cached): eager mode.
using BuildEager = std::function<std::vector<NodeRef>(NodeTable&, const std::vector<NodeRef>&, std::vector<NodeRef>&)>;
std::vector<Array> run_eager(const std::string& name, const std::vector<Array>& inputs, const BuildEager& build) {
  NodeTable table;
  Graph g;
  g.name = name;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ArrayImpl& a = impl_of(inputs[i]);
    g.params.push_back(build::parameter(table, int(i), Aval{a.dtype, a.shape, a.weak_type}));
  }
  g.outputs = build(table, g.params, g.effects);
  LowerOptions opt;
  opt.name = name;
  opt.is_op = true;
  return execute(g, inputs, opt);
}

}  // namespace

std::vector<Array> apply(const std::string& name, const std::vector<Array>& inputs, const BuildMany& build) {
  if (auto t = trace_of(inputs)) {
    std::vector<NodeRef> nodes;
    for (auto& x : inputs) nodes.push_back(node_of(*t, x));
    std::vector<Array> out;
    for (auto& n : build(t->table, nodes)) out.push_back(make_tracer(t, n));
    return out;
  }
  return run_eager(name, inputs, [&](NodeTable& table, const std::vector<NodeRef>& params, std::vector<NodeRef>&) {
    return build(table, params);
  });
}

TracedGraph trace_graph(const std::string& name, const std::vector<Aval>& in,
                        const std::function<std::vector<Array>(const std::vector<Array>&)>& fn) {
  auto t = begin_trace();
  std::vector<NodeRef> outs;
  try {
    std::vector<Array> tracers;
    for (auto& a : in) tracers.push_back(new_input(t, a));
    for (auto& r : fn(tracers)) outs.push_back(node_of(*t, r));
  } catch (...) {
    end_trace(t);
    throw;
  }
  end_trace(t);
  TracedGraph r;
  r.g.name = name;
  r.g.params = t->params;
  r.g.outputs = std::move(outs);
  r.g.effects = t->effects;
  r.trace = t;
  return r;
}

std::vector<Array> call_graph(const Graph& g, const std::vector<Array>& args, const std::string& name) {
  TESSEL_CHECK_INTERNAL(g.params.size() == args.size(), "call_graph: ", g.params.size(), " params, ", args.size(), " args");
  std::shared_ptr<TraceState> t = g.effects.empty() ? nullptr : current_trace();
  if (!t) t = trace_of(args);
  if (t) {
    // Inlined into the trace (with effects, the code's innermost); g's effects become the trace's.
    std::vector<NodeRef> nodes;
    for (auto& x : args) nodes.push_back(node_of(*t, x));
    std::vector<Array> out;
    for (auto& n : inline_graph(t->table, g, nodes, &t->effects)) out.push_back(make_tracer(t, n));
    return out;
  }
  return run_eager(name, args, [&](NodeTable& table, const std::vector<NodeRef>& params, std::vector<NodeRef>& effects) {
    return inline_graph(table, g, params, &effects);  // one program with g's effects
  });
}

std::vector<Array> apply_region(const std::string& name, const std::vector<Array>& inputs, bool effects,
                                const BuildOne& make) {
  std::shared_ptr<TraceState> t = effects ? current_trace() : nullptr;
  if (!t) t = trace_of(inputs);
  if (t) {
    std::vector<NodeRef> nodes;
    for (auto& x : inputs) nodes.push_back(node_of(*t, x));
    NodeRef n = make(t->table, nodes);
    if (effects) t->effects.push_back(n);
    std::vector<Array> out;
    for (auto& r : build::results(t->table, n)) out.push_back(make_tracer(t, r));
    return out;
  }
  return apply(name, inputs, [&](NodeTable& table, const std::vector<NodeRef>& in) {
    return build::results(table, make(table, in));  // its results are the program's outputs: it runs
  });
}

bool any_effects(const std::vector<GraphRef>& graphs) {
  for (auto& g : graphs)
    if (g && !g->effects.empty()) return true;
  return false;
}

Array apply1(const std::string& name, const std::vector<Array>& inputs, const BuildOne& build) {
  return apply(name, inputs, [&](NodeTable& t, const std::vector<NodeRef>& in) {
    return std::vector<NodeRef>{build(t, in)};
  })[0];
}

Array scalar_literal(double value, DType dtype, bool weak) {
  Array a = full_weak({}, value, dtype, weak);
  a.impl()->literal = true;
  return a;
}

Array scalar_literal_c(std::complex<double> value, DType dtype, bool weak) {
  Array a = scalar_array_c(value, dtype, weak);
  a.impl()->literal = true;
  return a;
}

}  // namespace tessel::detail
