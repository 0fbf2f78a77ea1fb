// Rules of rematerialization (ts::remat, jax.checkpoint): remat_call,
// remat_lin, remat_barrier and checkpoint_name.
//
// A remat_call is its `fun` everywhere but in autodiff and batching, like
// the custom calls (inline_calls keeps it for those two). Its JVP runs fun
// inline (the primal pass, computing the values the policy saves too) and
// gives as the results' tangent a remat_lin of the call's operands, the
// saved values and the operands' tangents:
//  - in forward mode remat_lin is its `jvp` region (fun's JVP): inlining it
//    before propagation and codegen gives what differentiating fun gives;
//  - reverse mode transposes it: the transpose recomputes fun (`rec`: fun
//    with the saved values as parameters) from the operands, each passed
//    through a remat_barrier that waits for the results' cotangent, and
//    pulls that cotangent back through the recomputation. So no value of
//    fun other than the saved ones lives from the forward pass to the
//    backward one, and the recomputation runs only when its cotangent
//    exists (the schedule follows data: codegen/fusion.cpp).
// remat_barrier(x, after) is x, computed no earlier than `after`, and never
// the same node as x (so the recomputation is not merged with the forward
// pass's values: JAX's prevent_cse). It reads `after` for ordering only:
// its sharding rule leaves it as it is laid out (FactorRule::unread).
// checkpoint_name(x, name) is x, named for the save_*_names policies.
#include <algorithm>
#include <unordered_set>

#include "tracer/autodiff.hpp"
#include "tracer/batching.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/complex_build.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;

namespace {

using rule_util::inlined_first;
using rule_util::pack;
using rule_util::unpack;

// Whether the policy saves n (a node of fun's top level) for the backward pass.
bool saveable(const Node& n, const attr::Remat& a) {
  if (n.aval.tuple || n.op == Op::parameter || op_family(n.op) == OpFamily::Leaf) return false;
  auto named = [&] {
    return std::find(a.names.begin(), a.names.end(), n.attr<attr::Name>().name) != a.names.end();
  };
  switch (a.policy) {
    case 0: return false;
    case 1: return true;
    case 2: return n.op == Op::dot_general || n.op == Op::conv;  // jax's dots_saveable
    case 3: {
      if (n.op != Op::dot_general) return false;
      const DotDims& d = n.attr<attr::Dot>().dims;
      return d.lhs_batch.empty() && d.rhs_batch.empty();
    }
    case 4: return n.op == Op::checkpoint_name && named();
    case 5: return n.op == Op::checkpoint_name && !named();
    default: throw InternalError(cat("checkpoint: unknown policy ", a.policy));
  }
}

// fun's JVP as a region of (operands, saved values, tangents of the
// differentiable operands) -> result tangents (the saved values unused;
// fun's effects run in the primal call, not in its tangent).
GraphRef jvp_region(const Graph& fun, const std::vector<Aval>& saved, const std::vector<bool>& diff) {
  const Graph j = jvp_graph(fun, diff);  // params: fun's, then the tangents
  const std::size_t nx = fun.params.size(), m = fun.outputs.size();
  std::vector<Aval> avals;
  std::vector<int> pos;
  for (std::size_t i = 0; i < j.params.size(); ++i) {
    avals.push_back(j.params[i]->aval);
    pos.push_back(int(i < nx ? i : i + saved.size()));
  }
  avals.insert(avals.begin() + std::ptrdiff_t(nx), saved.begin(), saved.end());
  std::vector<int> tangents;
  for (std::size_t k = m; k < 2 * m; ++k) tangents.push_back(int(k));
  auto g = std::make_shared<Graph>(*reparameterize(j, avals, pos, tangents));
  g->name = "jvp(" + fun.name + ")";
  g->effects.clear();
  return g;
}

// g's JVP inlined on args (g's operands, then the tangents of those in
// wrt): the results' tangents, packed as g's results.
NodeRef jvp_tangents(NodeTable& t, const Graph& g, const std::vector<bool>& wrt, const std::vector<NodeRef>& args) {
  std::vector<NodeRef> effects;  // g's effects run in the primal call
  const std::vector<NodeRef> outs = inline_graph(t, jvp_graph(g, wrt), args, &effects);
  return pack(t, std::vector<NodeRef>(outs.begin() + std::ptrdiff_t(g.outputs.size()), outs.end()));
}

std::size_t count(const std::vector<std::int64_t>& diff) {
  return std::size_t(std::count(diff.begin(), diff.end(), std::int64_t(1)));
}

}  // namespace

// ------------------------------------------------------------------ remat_call

Aval Rule<Op::remat_call>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.fun) throw InternalError("checkpoint without its fun");
  return rule_util::call_aval(*p.fun, in);
}
void Rule<Op::remat_call>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  inlined_first(Op::remat_call);
}
FactorRule Rule<Op::remat_call>::factors(const Node&) { inlined_first(Op::remat_call); }
NodeRef Rule<Op::remat_call>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                  const std::vector<NodeRef>& tx, const NodeRef&) {
  const auto& a = attrs_of(n);
  const Graph& fun = *a.fun;
  std::vector<bool> diff;
  std::vector<std::int64_t> diff_flags;
  std::vector<NodeRef> tan;
  bool any = false;
  for (std::size_t k = 0; k < x.size(); ++k) {
    diff.push_back(is_inexact(x[k]->dtype()));
    diff_flags.push_back(diff.back() ? 1 : 0);
    any = any || (tx[k] && diff.back());
    if (diff.back()) tan.push_back(tx[k] ? tx[k] : ad::zeros(t, x[k]->aval));
  }
  if (!any) return nullptr;
  if (a.policy == 1) {  // everything saveable: nothing to recompute, fun's own JVP
    std::vector<NodeRef> args = x;
    args.insert(args.end(), tan.begin(), tan.end());
    return jvp_tangents(t, fun, diff, args);
  }
  // The values the policy saves, computed by the primal pass (fun inline:
  // it merges with the call's own results once the call is inlined too).
  std::vector<NodeRef> saved_nodes;
  for (auto& v : fun.topo_order())
    if (saveable(*v, a)) saved_nodes.push_back(v);
  Graph ext;
  ext.name = fun.name;
  ext.params = fun.params;
  ext.outputs = fun.outputs;
  ext.outputs.insert(ext.outputs.end(), saved_nodes.begin(), saved_nodes.end());
  const std::vector<NodeRef> fo = inline_graph(t, ext, x);
  std::vector<NodeRef> ops = x;
  ops.insert(ops.end(), fo.begin() + std::ptrdiff_t(fun.outputs.size()), fo.end());
  ops.insert(ops.end(), tan.begin(), tan.end());
  std::vector<Aval> saved_avals;
  for (auto& s : saved_nodes) saved_avals.push_back(s->aval);
  attr::RematLin lin{jvp_region(fun, saved_avals, diff), std::make_shared<Graph>(ext), diff_flags,
                     std::int64_t(saved_nodes.size()), a.prevent_cse};
  return build::remat_lin(t, std::move(lin), ops);
}
void Rule<Op::remat_call>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                     std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
NodeRef Rule<Op::remat_call>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                                    const std::vector<AxisSharding>&, const AxisSharding&) {
  inlined_first(Op::remat_call);
}
NodeRef Rule<Op::remat_call>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                    const std::vector<bool>& batched, const BatchInfo& b) {
  attr::Remat a = attrs_of(n);
  a.fun = std::make_shared<Graph>(batch_graph(*a.fun, batched, b));
  return build::remat_call(t, std::move(a), x);
}

// ------------------------------------------------------------------ remat_lin

Aval Rule<Op::remat_lin>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.jvp || !p.rec) throw InternalError("checkpoint-lin without its regions");
  const std::size_t nx = p.diff.size(), s = std::size_t(p.saved), nt = count(p.diff);
  if (in.size() != nx + s + nt || p.rec->params.size() != nx || p.rec->outputs.size() < s ||
      p.jvp->params.size() != nx + s + nt)
    throw InternalError(cat("checkpoint-lin: ", in.size(), " operands for ", nx, " operands, ", s, " saved values and ",
                            nt, " tangents"));
  std::vector<Aval> outs;
  for (std::size_t k = 0; k + s < p.rec->outputs.size(); ++k) {
    outs.push_back(p.rec->outputs[k]->aval);
    outs.back().weak_type = false;
  }
  return outs.size() == 1 ? outs[0] : Aval::make_tuple(outs);
}
void Rule<Op::remat_lin>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  inlined_first(Op::remat_lin);
}
FactorRule Rule<Op::remat_lin>::factors(const Node&) { inlined_first(Op::remat_lin); }
// Forward mode over the tangent (jacfwd of a jvp): the jvp region's own JVP.
NodeRef Rule<Op::remat_lin>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                 const std::vector<NodeRef>& tx, const NodeRef&) {
  const Graph& j = *attrs_of(n).jvp;
  std::vector<bool> wrt;
  std::vector<NodeRef> args = x;
  bool any = false;
  for (std::size_t k = 0; k < x.size(); ++k) {
    wrt.push_back(is_inexact(x[k]->dtype()));
    any = any || (tx[k] && wrt.back());
  }
  if (!any) return nullptr;
  for (std::size_t k = 0; k < x.size(); ++k)
    if (wrt[k]) args.push_back(tx[k] ? tx[k] : ad::zeros(t, x[k]->aval));
  return jvp_tangents(t, j, wrt, args);
}
// The backward pass: fun's VJP on the operands (each behind a barrier
// waiting for the cotangent), with the saved values in place of their
// recomputation. (The VJP is built over fresh parameters in a table of its
// own, where fun's saved nodes recomputed are the same nodes as the VJP's
// primal ones: those are then replaced by the saved values, which are the
// same bits.)
void Rule<Op::remat_lin>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                    std::vector<NodeRef>& cts) {
  const auto& a = attrs_of(n);
  const std::size_t nx = a.diff.size(), s = std::size_t(a.saved);
  for (std::size_t k = 0; k < nx + s; ++k)
    if (linear[k]) rule_util::not_linear(n);
  const Graph& rec = *a.rec;  // fun, the saved values as its last outputs
  const std::size_t m = rec.outputs.size() - s;
  Graph fun;
  fun.name = rec.name;
  fun.params = rec.params;
  fun.outputs.assign(rec.outputs.begin(), rec.outputs.begin() + std::ptrdiff_t(m));
  fun.effects = rec.effects;
  std::vector<bool> wrt(nx, false);
  for (std::size_t k = 0; k < nx; ++k) wrt[k] = a.diff[k] != 0;
  // VJP(x, saved, cotangents) -> the differentiable operands' cotangents.
  NodeTable u;
  Graph back;
  back.name = "remat_vjp(" + rec.name + ")";
  int i = 0;
  for (std::size_t k = 0; k < nx; ++k) back.params.push_back(build::parameter(u, i++, n.in[k]->aval));
  for (std::size_t k = nx; k < nx + s; ++k) back.params.push_back(build::parameter(u, i++, n.in[k]->aval));
  const std::vector<NodeRef> px(back.params.begin(), back.params.begin() + std::ptrdiff_t(nx));
  std::vector<NodeRef> vargs = px;
  for (std::size_t k = 0; k < m; ++k) {
    Aval c = rec.outputs[k]->aval;
    c.weak_type = false;
    back.params.push_back(build::parameter(u, i++, c));
    vargs.push_back(back.params.back());
  }
  std::vector<NodeRef> dropped;  // fun's effects ran in the primal call
  const std::vector<NodeRef> recomputed = inline_graph(u, rec, px, &dropped);
  const std::vector<NodeRef> vo = inline_graph(u, vjp_graph(fun, wrt), vargs, &dropped);
  back.outputs.assign(vo.begin() + std::ptrdiff_t(m), vo.end());
  std::unordered_map<const Node*, NodeRef> given;
  for (std::size_t k = 0; k < s; ++k) given.emplace(recomputed[m + k].get(), back.params[nx + k]);
  NodeTable w;
  std::vector<NodeRef> wp;
  for (std::size_t k = 0; k < back.params.size(); ++k) wp.push_back(build::parameter(w, int(k), back.params[k]->aval));
  auto mapped = rewrite(back, w, wp, [&](const Node& old, const std::vector<NodeRef>& ops) {
    auto it = given.find(&old);
    return it != given.end() ? wp.at(std::size_t(it->second->attr<attr::Parameter>().index))
                             : build::with_operands(w, old, ops);
  }, /*into_regions=*/false);
  Graph cut;
  cut.params = wp;
  for (auto& o : back.outputs) cut.outputs.push_back(mapped.at(o.get()));
  // Inlined on the operands behind their barriers, the saved values and the cotangents.
  const std::vector<NodeRef> c = unpack(t, ct, m);
  std::vector<NodeRef> args;
  for (std::size_t k = 0; k < nx; ++k) args.push_back(a.prevent_cse ? build::remat_barrier(t, n.in[k], c[0]) : n.in[k]);
  for (std::size_t k = nx; k < nx + s; ++k) args.push_back(n.in[k]);
  for (std::size_t k = 0; k < m; ++k) args.push_back(build::convert(t, c[k], wp[nx + s + k]->dtype()));
  const std::vector<NodeRef> outs = inline_graph(t, cut, args);
  std::size_t j = 0;
  for (std::size_t k = 0, slot = nx + s; k < nx; ++k) {
    if (!a.diff[k]) continue;
    if (linear[slot]) cts[slot] = build::convert(t, outs[j], n.in[slot]->dtype());
    ++slot;
    ++j;
  }
}
NodeRef Rule<Op::remat_lin>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                                   const std::vector<AxisSharding>&, const AxisSharding&) {
  inlined_first(Op::remat_lin);
}
// Every operand batched (the unbatched ones broadcast), both regions batched.
NodeRef Rule<Op::remat_lin>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                   const std::vector<bool>& batched, const BatchInfo& b) {
  attr::RematLin a = attrs_of(n);
  const std::size_t nx = a.diff.size();
  a.jvp = std::make_shared<Graph>(batch_graph(*a.jvp, std::vector<bool>(x.size(), true), b));
  a.rec = std::make_shared<Graph>(batch_graph(*a.rec, std::vector<bool>(nx, true), b));
  return build::remat_lin(t, std::move(a), bt::all_batched(t, x, batched, b));
}

// ------------------------------------------------------------------ remat_barrier

Aval Rule<Op::remat_barrier>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  rule_util::expect_arity(Op::remat_barrier, in, 2);
  if (in[0].tuple || in[1].tuple) throw InternalError("remat-barrier of a tuple");
  return in[0];
}
void Rule<Op::remat_barrier>::eval(const std::vector<const HostArray*>& in, const A&, const Aval&, HostArray& out) {
  out = *in[0];
}
FactorRule Rule<Op::remat_barrier>::factors(const Node& n) {
  FactorRule r;
  std::vector<std::vector<int>> dims;
  for (auto size : n.shape()) dims.push_back({r.add_factor(size)});
  r.operands.push_back(dims);
  r.result = dims;
  r.operands.push_back(std::vector<std::vector<int>>(n.in[1]->shape().size()));
  r.unread = {false, true};
  return r;
}
// The tangent waits as the value does; `after` has no derivative to give.
NodeRef Rule<Op::remat_barrier>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x,
                                     const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::remat_barrier(t, tx[0], x[1]) : nullptr;
}
void Rule<Op::remat_barrier>::transpose(NodeTable&, const Node&, const NodeRef& ct, const std::vector<bool>& linear,
                                        std::vector<NodeRef>& cts) {
  if (linear[0]) cts[0] = ct;
}
NodeRef Rule<Op::remat_barrier>::local(LocalBuilder& b, const Node&, const std::vector<NodeRef>& ops,
                                       const std::vector<AxisSharding>&, const AxisSharding&) {
  return build::remat_barrier(b.table(), ops[0], ops[1]);
}
NodeRef Rule<Op::remat_barrier>::batch(NodeTable& t, const Node&, const std::vector<NodeRef>& x,
                                       const std::vector<bool>& batched, const BatchInfo& b) {
  return build::remat_barrier(t, bt::batched(t, x[0], batched[0], b), x[1]);
}
NodeRef Rule<Op::remat_barrier>::expand_complex(ComplexBuilder& b, const Node&, const std::vector<NodeRef>& ops) {
  return build::remat_barrier(b.table(), ops[0], ops[1]);
}

// ------------------------------------------------------------------ checkpoint_name

Aval Rule<Op::checkpoint_name>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  rule_util::expect_arity(Op::checkpoint_name, in, 1);
  return in[0];
}
void Rule<Op::checkpoint_name>::eval(const std::vector<const HostArray*>& in, const A&, const Aval&, HostArray& out) {
  out = *in[0];
}
FactorRule Rule<Op::checkpoint_name>::factors(const Node& n) { return rule_util::elementwise_factors(n); }
// Names the primal only (JAX's name_p): the tangent passes through.
NodeRef Rule<Op::checkpoint_name>::jvp(NodeTable&, const Node&, const std::vector<NodeRef>&,
                                       const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0];
}
void Rule<Op::checkpoint_name>::transpose(NodeTable&, const Node&, const NodeRef& ct, const std::vector<bool>& linear,
                                          std::vector<NodeRef>& cts) {
  if (linear[0]) cts[0] = ct;
}
NodeRef Rule<Op::checkpoint_name>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>& ops,
                                         const std::vector<AxisSharding>&, const AxisSharding&) {
  return ops[0];
}
NodeRef Rule<Op::checkpoint_name>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                         const std::vector<bool>&, const BatchInfo&) {
  return build::checkpoint_name(t, x[0], attrs_of(n).name);
}

TESSEL_COMPLEX_NEVER(remat_call)
TESSEL_COMPLEX_NEVER(remat_lin)
TESSEL_COMPLEX_IDENTITY(checkpoint_name)
TESSEL_COST(remat_call, memory_cost)
TESSEL_COST(remat_lin, no_cost)
TESSEL_COST(remat_barrier, no_cost)
TESSEL_COST(checkpoint_name, no_cost)

}  // namespace tessel
