// Rules of the calls with custom derivatives (ts::custom_jvp,
// ts::custom_vjp), JAX's custom_jvp_call, custom_vjp_call and custom_lin.
//
// Each call is its `fun` everywhere but in autodiff and batching:
// inline_calls (tracer/rewrite.hpp) replaces it by fun before propagation,
// partitioning and codegen, and the interpreter runs fun. Autodiff and
// batching keep it (inline_calls' keep_custom) and use the rules here:
//  - custom_jvp_call's JVP is its `jvp` region inlined on the primals and
//    their tangents (zeros for the operands without one), so reverse mode
//    transposes what the user's rule computes, and grad-of-grad
//    differentiates the rule;
//  - custom_vjp_call's JVP runs `fwd` inline (its residuals) and gives as the
//    results' tangent a custom_lin of the residuals and the operands'
//    tangents: linear in the tangents, never run, its transpose the user's
//    `bwd`. Forward mode of a custom_vjp function therefore fails where the
//    user asks for it (JAX's error), and only there;
//  - batching batches every region; bwd's cotangents of an operand that was
//    not batched are summed over the batch (JAX's rule).
#include <algorithm>

#include "tracer/batching.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;

namespace {

using rule_util::inlined_first;
using rule_util::pack;
using rule_util::unpack;

// One result: its aval; several: a tuple (as a call's).
Aval pack_avals(const std::vector<Aval>& avals) {
  if (avals.size() == 1) return avals[0];
  return Aval::make_tuple(avals);
}

bool listed(const std::vector<std::int64_t>& v, std::size_t k) {
  return std::find(v.begin(), v.end(), std::int64_t(k)) != v.end();
}

// The operands' tangents for a custom rule: zeros where there is none or the
// operand is not differentiated; empty when no operand has one.
std::vector<NodeRef> rule_tangents(NodeTable& t, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                                   const std::vector<std::int64_t>& nondiff) {
  bool any = false;
  for (std::size_t k = 0; k < x.size(); ++k) any = any || (tx[k] && !listed(nondiff, k));
  if (!any) return {};
  std::vector<NodeRef> out;
  for (std::size_t k = 0; k < x.size(); ++k) {
    out.push_back(tx[k] && !listed(nondiff, k) ? tx[k] : ad::zeros(t, x[k]->aval));
  }
  return out;
}

std::vector<NodeRef> inline_pure(NodeTable& t, const Graph& g, const std::vector<NodeRef>& args) {
  TESSEL_CHECK_INTERNAL(g.effects.empty(), g.name, ": a custom rule's region holds effects");
  return inline_graph(t, g, args);
}

}  // namespace

// ------------------------------------------------------------------ custom_jvp_call

Aval Rule<Op::custom_jvp_call>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.fun || !p.jvp) throw InternalError("custom-jvp-call without its fun or jvp");
  TESSEL_CHECK_INTERNAL(p.jvp->params.size() == 2 * in.size() && p.jvp->outputs.size() == 2 * p.fun->outputs.size(),
                        "custom-jvp-call: the jvp region does not fit fun");
  return rule_util::call_aval(*p.fun, in);
}
void Rule<Op::custom_jvp_call>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  inlined_first(Op::custom_jvp_call);
}
FactorRule Rule<Op::custom_jvp_call>::factors(const Node&) { inlined_first(Op::custom_jvp_call); }
NodeRef Rule<Op::custom_jvp_call>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                       const std::vector<NodeRef>& tx, const NodeRef&) {
  const auto& a = attrs_of(n);
  std::vector<NodeRef> args = x, tan = rule_tangents(t, x, tx, a.nondiff);
  if (tan.empty()) return nullptr;
  args.insert(args.end(), tan.begin(), tan.end());
  const std::vector<NodeRef> outs = inline_pure(t, *a.jvp, args);  // results, then their tangents
  const std::size_t m = a.fun->outputs.size();
  return pack(t, std::vector<NodeRef>(outs.begin() + std::ptrdiff_t(m), outs.end()));
}
void Rule<Op::custom_jvp_call>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                          std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
NodeRef Rule<Op::custom_jvp_call>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                                         const std::vector<AxisSharding>&, const AxisSharding&) {
  inlined_first(Op::custom_jvp_call);
}
// fun and the rule batched alike (a tangent is batched where its primal is).
NodeRef Rule<Op::custom_jvp_call>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                         const std::vector<bool>& batched, const BatchInfo& b) {
  attr::CustomJvp a = attrs_of(n);
  std::vector<bool> both = batched;
  both.insert(both.end(), batched.begin(), batched.end());
  a.fun = std::make_shared<Graph>(batch_graph(*a.fun, batched, b));
  a.jvp = std::make_shared<Graph>(batch_graph(*a.jvp, both, b));
  return build::custom_jvp_call(t, std::move(a), x);
}

// ------------------------------------------------------------------ custom_vjp_call

Aval Rule<Op::custom_vjp_call>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.fun || !p.fwd || (!p.bwd && p.bwd_error_kind == 0))
    throw InternalError("custom-vjp-call without its fun, fwd or bwd");
  rule_util::call_aval(*p.fwd, in);  // fwd takes the operands too
  TESSEL_CHECK_INTERNAL(p.fwd->outputs.size() >= p.fun->outputs.size() && (!p.bwd || p.bwd->outputs.size() == in.size()),
                        "custom-vjp-call: fwd or bwd does not fit fun");
  return rule_util::call_aval(*p.fun, in);
}
void Rule<Op::custom_vjp_call>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  inlined_first(Op::custom_vjp_call);
}
FactorRule Rule<Op::custom_vjp_call>::factors(const Node&) { inlined_first(Op::custom_vjp_call); }
// fwd inline for the residuals; the results' tangent a custom_lin over them.
NodeRef Rule<Op::custom_vjp_call>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                       const std::vector<NodeRef>& tx, const NodeRef&) {
  const auto& a = attrs_of(n);
  const std::vector<NodeRef> tan = rule_tangents(t, x, tx, a.nondiff);
  if (tan.empty()) return nullptr;
  switch (a.bwd_error_kind) {  // the error tracing bwd raised
    case 0: break;
    case 1: throw TypeError(a.bwd_error);
    case 2: throw ValueError(a.bwd_error);
    case 3: throw ShapeError(a.bwd_error);
    default: throw Error(a.bwd_error);
  }
  const std::vector<NodeRef> fo = inline_pure(t, *a.fwd, x);  // results, then residuals
  std::vector<NodeRef> ops(fo.begin() + std::ptrdiff_t(a.fun->outputs.size()), fo.end());
  const auto residuals = std::int64_t(ops.size());
  ops.insert(ops.end(), tan.begin(), tan.end());
  return build::custom_lin(t, attr::CustomLin{a.bwd, residuals}, ops);
}
void Rule<Op::custom_vjp_call>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                          std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
NodeRef Rule<Op::custom_vjp_call>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                                         const std::vector<AxisSharding>&, const AxisSharding&) {
  inlined_first(Op::custom_vjp_call);
}
// fun and fwd batched (every result and residual then batched), bwd batched
// on all of them; the cotangent of an operand that is not batched summed
// over the batch.
NodeRef Rule<Op::custom_vjp_call>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                         const std::vector<bool>& batched, const BatchInfo& b) {
  attr::CustomVjp a = attrs_of(n);
  a.fun = std::make_shared<Graph>(batch_graph(*a.fun, batched, b));
  a.fwd = std::make_shared<Graph>(batch_graph(*a.fwd, batched, b));
  if (!a.bwd) return build::custom_vjp_call(t, std::move(a), x);  // its error stays
  const Graph bb = batch_graph(*a.bwd, std::vector<bool>(a.bwd->params.size(), true), b);
  auto g = std::make_shared<Graph>();
  g->name = bb.name;
  NodeTable u;
  for (std::size_t i = 0; i < bb.params.size(); ++i) g->params.push_back(build::parameter(u, int(i), bb.params[i]->aval));
  g->outputs = inline_pure(u, bb, g->params);
  for (std::size_t k = 0; k < g->outputs.size(); ++k)
    if (!batched[k]) g->outputs[k] = build::reduce(u, Op::reduce_sum, g->outputs[k], {0});
  a.bwd = g;
  return build::custom_vjp_call(t, std::move(a), x);
}

// ------------------------------------------------------------------ custom_lin

Aval Rule<Op::custom_lin>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.bwd) throw InternalError("custom-lin without its bwd");
  const Graph& bwd = *p.bwd;
  const auto r = std::size_t(p.residuals);
  if (r > bwd.params.size() || in.size() != r + bwd.outputs.size())
    throw InternalError(cat("custom-lin: ", in.size(), " operands for ", r, " residuals and ", bwd.outputs.size(),
                            " tangents"));
  for (std::size_t k = 0; k < r; ++k)
    if (in[k].dtype != bwd.params[k]->aval.dtype || in[k].shape != bwd.params[k]->aval.shape)
      throw InternalError(cat("custom-lin: residual ", k, " is ", in[k].str(), ", bwd takes ", bwd.params[k]->aval.str()));
  std::vector<Aval> outs;
  for (std::size_t k = r; k < bwd.params.size(); ++k) {
    outs.push_back(bwd.params[k]->aval);
    outs.back().weak_type = false;
  }
  return pack_avals(outs);
}
void Rule<Op::custom_lin>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  throw InternalError("custom-lin is never run: reverse mode transposes it to its bwd");
}
FactorRule Rule<Op::custom_lin>::factors(const Node&) {
  throw InternalError("custom-lin is never partitioned: reverse mode transposes it to its bwd");
}
NodeRef Rule<Op::custom_lin>::jvp(NodeTable&, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>&,
                                  const NodeRef&) {
  throw TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.");
}
// The user's bwd on the residuals and the results' cotangents; its outputs
// are the cotangents of the call's operands (here, their tangents).
void Rule<Op::custom_lin>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                     std::vector<NodeRef>& cts) {
  const auto& a = attrs_of(n);
  const auto r = std::size_t(a.residuals);
  for (std::size_t k = 0; k < r; ++k)
    if (linear[k]) rule_util::not_linear(n);
  const Graph& bwd = *a.bwd;
  const std::size_t m = bwd.params.size() - r;
  std::vector<NodeRef> args(n.in.begin(), n.in.begin() + std::ptrdiff_t(r));
  for (const NodeRef& c : unpack(t, ct, m))
    args.push_back(build::convert(t, c, bwd.params[args.size()]->dtype()));
  const std::vector<NodeRef> outs = inline_pure(t, bwd, args);
  for (std::size_t k = 0; k < outs.size(); ++k)
    if (linear[r + k]) cts[r + k] = build::convert(t, outs[k], n.in[r + k]->dtype());
}
NodeRef Rule<Op::custom_lin>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                                    const std::vector<AxisSharding>&, const AxisSharding&) {
  throw InternalError("custom-lin is never partitioned: reverse mode transposes it to its bwd");
}
NodeRef Rule<Op::custom_lin>::batch(NodeTable&, const Node&, const std::vector<NodeRef>&, const std::vector<bool>&,
                                    const BatchInfo&) {
  throw InternalError("custom-lin is never batched: reverse mode transposes it to its bwd first");
}

TESSEL_COMPLEX_NEVER(custom_jvp_call)
TESSEL_COMPLEX_NEVER(custom_vjp_call)
TESSEL_COMPLEX_NEVER(custom_lin)
TESSEL_COST(custom_jvp_call, memory_cost)
TESSEL_COST(custom_vjp_call, memory_cost)
TESSEL_COST(custom_lin, no_cost)

}  // namespace tessel
