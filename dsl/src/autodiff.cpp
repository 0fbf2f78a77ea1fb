#include <tessel/autodiff.hpp>

#include <tessel/creation.hpp>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/pipeline.hpp"
#include "dsl/src/trace.hpp"
#include "tracer/autodiff.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"

namespace tessel::detail {

namespace {

const Graph& graph_of(const Traced& t) { return *std::static_pointer_cast<Graph>(t.graph); }

void check_differentiable(const std::vector<Array>& inputs, const std::vector<bool>& wrt) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (wrt[i] && !is_inexact(inputs[i].dtype()))
      throw TypeError("grad requires real- or complex-valued inputs (float32, float64, complex64, complex128), got " +
                      aval_str(inputs[i].dtype(), inputs[i].shape()) +
                      "; convert it, or differentiate with respect to another argument");
}

}  // namespace

std::vector<Array> run_traced(const Traced& t, const std::vector<Array>& inputs) {
  return call_graph(graph_of(t), inputs, "call");
}

std::vector<Array> run_vjp(const Traced& t, const std::vector<Array>& inputs, const std::vector<bool>& wrt,
                           std::vector<Array> cts, bool forward_effects) {
  check_differentiable(inputs, wrt);
  const Graph& g = graph_of(t);
  if (cts.empty()) {
    // grad: one real scalar output, cotangent 1.
    if (g.outputs.size() != 1 || !g.outputs[0]->shape().empty() || !is_floating(g.outputs[0]->dtype()))
      throw TypeError("grad requires a function with one real scalar output, got " +
                      std::to_string(g.outputs.size()) + " output(s)" +
                      (g.outputs.empty() ? std::string()
                                         : ", the first " + aval_str(g.outputs[0]->dtype(), g.outputs[0]->shape())) +
                      "; use vjp for other outputs");
    cts.push_back(full({}, 1.0, g.outputs[0]->dtype()));
  }
  if (cts.size() != g.outputs.size())
    throw TypeError("vjp: " + std::to_string(cts.size()) + " cotangents for " + std::to_string(g.outputs.size()) +
                    " outputs");
  for (size_t k = 0; k < cts.size(); ++k)
    if (cts[k].shape() != g.outputs[k]->shape())
      throw ShapeError("vjp: the cotangent of output " + std::to_string(k) + " has shape " + shape_str(cts[k].shape()) +
                       ", the output " + g.outputs[k]->aval.str());
  Graph v = vjp_graph(typed_for_vjp(g, inputs), wrt);
  if (!forward_effects) v.effects.clear();
  std::vector<Array> args = inputs;
  args.insert(args.end(), cts.begin(), cts.end());
  return call_graph(v, args, "vjp");
}

std::vector<Array> value_and_aux_cotangents(const Traced& t) {
  const Graph& g = graph_of(t);
  if (g.outputs.empty() || !g.outputs[0]->shape().empty() || !is_floating(g.outputs[0]->dtype()))
    throw TypeError("grad with has_aux requires f to return (a real scalar, aux), got " +
                    (g.outputs.empty() ? std::string("no outputs")
                                       : "a first output " + aval_str(g.outputs[0]->dtype(), g.outputs[0]->shape())));
  std::vector<Array> cts = {full({}, 1.0, g.outputs[0]->dtype())};
  for (std::size_t k = 1; k < g.outputs.size(); ++k) cts.push_back(zeros(g.outputs[k]->shape(), g.outputs[k]->dtype()));
  return cts;
}

std::vector<Array> run_jvp(const Traced& t, const std::vector<Array>& inputs, const std::vector<bool>& wrt,
                           const std::vector<Array>& tangents) {
  check_differentiable(inputs, wrt);
  const Graph& g = graph_of(t);
  Graph j = jvp_graph(g, wrt);
  // A custom_vjp function's tangent (custom-lin) only transposes: forward
  // mode through one is JAX's TypeError.
  for_each_graph(j, [](const Graph& r) {
    for (auto& n : r.topo_order())
      if (n->op == Op::custom_lin) throw TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.");
  });
  std::vector<Array> args = inputs;
  size_t k = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!wrt[i]) continue;
    if (k >= tangents.size())
      throw TypeError(cat("jvp: ", tangents.size(), " tangent arrays for more primal arrays; primal and tangent "
                          "arguments must have the same tree structure"));
    if (tangents[k].shape() != inputs[i].shape())
      throw ShapeError("jvp called with different primal and tangent shapes: tangent " + std::to_string(k) +
                       " has shape " + shape_str(tangents[k].shape()) + ", its primal " +
                       aval_str(inputs[i].dtype(), inputs[i].shape()));
    if (tangents[k].dtype() != inputs[i].dtype())
      throw TypeError("primal and tangent arguments to jvp do not match; dtypes must be equal. Got primal " +
                      aval_str(inputs[i].dtype(), inputs[i].shape()) + " and so expected tangent dtype " +
                      dtype_name(inputs[i].dtype()) + ", but got tangent " +
                      aval_str(tangents[k].dtype(), tangents[k].shape()) + " (tangent " + std::to_string(k) + ")");
    args.push_back(tangents[k++]);
  }
  if (k != tangents.size())
    throw TypeError(cat("jvp: ", tangents.size(), " tangent arrays for ", k,
                        " primal arrays; primal and tangent arguments must have the same tree structure"));
  return call_graph(j, args, "jvp");
}

}  // namespace tessel::detail
