// Rules of debug_callback (attr::DebugCallback): a host function called at
// run time with its operands' values — jax.debug.print and
// jax.debug.callback. Its bool[] token is read by nothing; the graph keeps
// the node among its effects (Graph::effects), and every pass maps effects
// as it maps outputs.
//
// Reference kernel: calls the function with the host arrays.
// Sharding: every operand dim needs replication, so at the top level the
// partitioner gathers the whole values and the local node runs once (on the
// launch's first device); inside shard_map (manual axes) the operands are the
// device's own blocks and the local node runs on every device, as JAX's
// debug.print inside shard_map prints once per device.
// Derivatives: none (the token is not differentiable); under grad the
// callback sees the primal values. Batching: unrolled over the batch, one
// call per element, in order (JAX's rule).
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;

Aval Rule<Op::debug_callback>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.fn) throw InternalError("debug_callback without a function");
  if (p.ordered && (in.empty() || in.back().dtype != DType::bool_ || !in.back().shape.empty()))
    throw InternalError(cat("an ordered debug_callback needs a bool[] token last, got ", avals_str(in)));
  for (auto& a : in)
    if (a.tuple) throw TypeError(cat("debug_callback takes arrays, got ", avals_str(in)));
  return Aval{DType::bool_, {}, false};
}

void Rule<Op::debug_callback>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                    HostArray& out) {
  std::vector<attr::EffectArg> args;
  for (size_t k = 0; k < in.size() - (p.ordered ? 1 : 0); ++k)
    args.push_back(attr::EffectArg{in[k]->dtype, in[k]->shape, in[k]->bytes.data(), -1});
  (*p.fn)(args);
  rule_util::allocate(out, aval);
}

FactorRule Rule<Op::debug_callback>::factors(const Node& n) {
  FactorRule r;
  for (auto& x : n.in) {
    std::vector<std::vector<int>> dims;
    for (auto size : x->shape()) dims.push_back({r.add_factor(size, false, true)});
    r.operands.push_back(std::move(dims));
  }
  return r;  // the token: no dims
}

NodeRef Rule<Op::debug_callback>::jvp(NodeTable&, const Node&, const std::vector<NodeRef>&,
                                      const std::vector<NodeRef>&, const NodeRef&) {
  return nullptr;
}

void Rule<Op::debug_callback>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                         std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

NodeRef Rule<Op::debug_callback>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                        const std::vector<AxisSharding>&, const AxisSharding&) {
  attr::DebugCallback p = attrs_of(n);
  p.every_device = b.in_shard_map();
  return build::debug_callback(b.table(), ops, std::move(p));
}

NodeRef Rule<Op::debug_callback>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                        const std::vector<bool>& batched, const BatchInfo& b) {
  // One call per batch element, each on that element's slices, each kept
  // among the batched graph's effects, each after the one before.
  TESSEL_CHECK_INTERNAL(b.effects, "batching debug_callback outside batch_graph");
  if (b.size == 0) return build::broadcast_in_dim(t, build::scalar(t, DType::bool_, 0), {0}, {});  // no element: no call
  NodeRef token;
  for (std::int64_t i = 0; i < b.size; ++i) {
    std::vector<NodeRef> args;
    attr::DebugCallback how = attrs_of(n);
    for (size_t k = 0; k < x.size(); ++k) args.push_back(batched[k] ? bt::element(t, x[k], i) : x[k]);
    if (token) {
      if (how.ordered) args.back() = token;
      else args.push_back(token), how.ordered = true;
    }
    token = build::debug_callback(t, args, std::move(how));
    b.effects->push_back(token);
  }
  return build::broadcast_in_dim(t, token, {b.size}, {});
}

// ------------------------------------------------------------------ complex expansion, cost

TESSEL_COMPLEX_SAME_OP(debug_callback)  // it prints the packed values as complex (codegen reads the aval)
TESSEL_COST(debug_callback, memory_cost)

}  // namespace tessel
