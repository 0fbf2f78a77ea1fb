// Rules of the structural ops: tuple and get_tuple_element (a node with
// several results is one tuple-valued node; each result is an element),
// call (a region: a function applied to the operands) and shard_map (a
// region run per device on blocks; its partitioning is the partitioner's).
//
// Calls are inlined (tracer/rewrite.hpp, inline_calls) before propagation,
// partitioning and autodiff, and tuples fold away with them; the reference
// interpreter evaluates all three directly (tracer/interpreter.cpp), so that
// inlining is tested against it.
#include <algorithm>

#include "tracer/build.hpp"
#include "tracer/autodiff.hpp"
#include "tracer/batching.hpp"
#include "tracer/rewrite.hpp"
#include "tracer/vma.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;

namespace {
[[noreturn]] void structural(Op op) {
  throw InternalError(cat(op_name(op), " is structural: the interpreter evaluates it, and inline_calls removes it "
                                       "before propagation, partitioning and autodiff"));
}
}  // namespace

// ------------------------------------------------------------------ tuple

Aval Rule<Op::tuple>::infer(const std::vector<Aval>& in, const A&, const Aval&) { return Aval::make_tuple(in); }
void Rule<Op::tuple>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  structural(Op::tuple);
}
FactorRule Rule<Op::tuple>::factors(const Node&) { structural(Op::tuple); }
NodeRef Rule<Op::tuple>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                             const std::vector<NodeRef>& tx, const NodeRef&) {
  auto ts = ad::dense_tangents(t, x, tx);
  return ts.empty() ? nullptr : build::tuple(t, ts);
}
void Rule<Op::tuple>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                std::vector<NodeRef>& cts) {
  for (size_t k = 0; k < n.in.size(); ++k)
    if (linear[k]) cts[k] = build::get_tuple_element(t, ct, std::int64_t(k));
}
TESSEL_LOCAL_SAME_OP(tuple)

// ------------------------------------------------------------------ get_tuple_element

Aval Rule<Op::get_tuple_element>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  rule_util::expect_arity(Op::get_tuple_element, in, 1);
  if (!in[0].tuple) throw InternalError(cat("get-tuple-element of a non-tuple ", in[0].str()));
  if (p.index < 0 || p.index >= std::int64_t(in[0].elements.size()))
    throw InternalError(cat("get-tuple-element index ", p.index, " out of range for ", in[0].str()));
  return in[0].elements[size_t(p.index)];
}
void Rule<Op::get_tuple_element>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  structural(Op::get_tuple_element);
}
FactorRule Rule<Op::get_tuple_element>::factors(const Node&) { structural(Op::get_tuple_element); }
NodeRef Rule<Op::get_tuple_element>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                         const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::get_tuple_element(t, tx[0], attrs_of(n).index) : nullptr;
}
void Rule<Op::get_tuple_element>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                            std::vector<NodeRef>& cts) {
  // The cotangent of the tuple: ct at this element, zeros elsewhere.
  const Aval& tup = n.in[0]->aval;
  std::vector<NodeRef> parts;
  for (size_t k = 0; k < tup.elements.size(); ++k) {
    if (std::int64_t(k) == attrs_of(n).index) {
      parts.push_back(ct);
    } else {
      const Aval& e = tup.elements[k];
      parts.push_back(build::broadcast_in_dim(t, build::scalar(t, e.dtype, 0.0), e.shape, {}));
    }
  }
  cts[0] = build::tuple(t, parts);
}
TESSEL_LOCAL_SAME_OP(get_tuple_element)

// ------------------------------------------------------------------ call

Aval rule_util::call_aval(const Graph& g, const std::vector<Aval>& in) {
  if (in.size() != g.params.size())
    throw TypeError(cat("call of ", g.name, " with ", in.size(), " arguments; it takes ", g.params.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    const Aval& want = g.params[i]->aval;
    if (in[i].dtype != want.dtype || in[i].shape != want.shape || in[i].tuple != want.tuple)
      throw TypeError(cat("call of ", g.name, ": argument ", i, " is ", in[i].str(), " but the parameter is ",
                          want.str()));
  }
  if (g.outputs.size() == 1) return g.outputs[0]->aval;
  std::vector<Aval> outs;
  for (auto& o : g.outputs) outs.push_back(o->aval);
  return Aval::make_tuple(std::move(outs));
}
NodeRef rule_util::pack(NodeTable& t, const std::vector<NodeRef>& xs) {
  return xs.size() == 1 ? xs[0] : build::tuple(t, xs);
}
std::vector<NodeRef> rule_util::unpack(NodeTable& t, const NodeRef& v, std::size_t m) {
  if (m == 1) return {v};
  std::vector<NodeRef> out;
  for (std::size_t k = 0; k < m; ++k) out.push_back(build::get_tuple_element(t, v, std::int64_t(k)));
  return out;
}
void rule_util::inlined_first(Op op) {
  throw InternalError(cat(op_name(op), " is inlined (its first region) before propagation, partitioning and codegen; "
                                       "the interpreter runs that region"));
}
Aval Rule<Op::call>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.body) throw InternalError("call without a body");
  return rule_util::call_aval(*p.body, in);
}
void Rule<Op::call>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  structural(Op::call);
}
FactorRule Rule<Op::call>::factors(const Node&) { structural(Op::call); }
NodeRef Rule<Op::call>::jvp(NodeTable&, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>&,
                            const NodeRef&) {
  structural(Op::call);
}
void Rule<Op::call>::transpose(NodeTable&, const Node&, const NodeRef&, const std::vector<bool>&,
                               std::vector<NodeRef>&) {
  structural(Op::call);
}
NodeRef Rule<Op::call>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                              const std::vector<AxisSharding>&, const AxisSharding&) {
  structural(Op::call);
}

}  // namespace tessel

namespace tessel {

// ------------------------------------------------------------------ shard_map

namespace {
// A mesh axis a collective of g runs over that is neither in `manual` nor
// made manual by a shard_map nested in g; -1 if none.
int collective_outside(const Graph& g, const std::vector<int>& manual) {
  for (auto& n : g.topo_order()) {
    if (n->op == Op::shard_map) {
      const auto& sm = n->attr<attr::ShardMap>();
      std::vector<int> inner = manual;
      inner.insert(inner.end(), sm.manual.begin(), sm.manual.end());
      if (int a = collective_outside(*sm.body, inner); a >= 0) return a;
      continue;
    }
    std::vector<int> axes;
    if (n->op == Op::collective_permute) {
      axes = permute_axes(*n, **collective_axes(*n).mesh);
    } else if (auto* c = collective_axes(*n).axes) {
      axes = *c;
    }
    for (int a : axes)
      if (std::find(manual.begin(), manual.end(), a) == manual.end()) return a;
  }
  return -1;
}
}  // namespace

namespace {
// The block of a global shape laid out as s (every tiled dim divides).
Shape block_shape(const Shape& global, const AxisSharding& s) {
  Shape b = global;
  for (int d = 0; d < s.rank() && d < int(b.size()); ++d) b[d] = global[d] / s.num_tiles(d);
  return b;
}
}  // namespace

Aval Rule<Op::shard_map>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (!p.body || !p.mesh) throw InternalError("shard_map without a body or a mesh");
  const Graph& g = *p.body;
  if (in.size() != g.params.size() || in.size() != p.in_specs.size())
    throw InternalError(cat("shard_map: ", in.size(), " operands, ", g.params.size(), " body parameters, ",
                            p.in_specs.size(), " in_specs"));
  if (g.outputs.size() != p.out_specs.size())
    throw InternalError(cat("shard_map: ", g.outputs.size(), " body results, ", p.out_specs.size(), " out_specs"));
  for (size_t k = 0; k < in.size(); ++k) {
    const AxisSharding& s = p.in_specs[k];
    if (in[k].tuple || s.rank() != int(in[k].shape.size()))
      throw ShardingError(cat("shard_map: in_spec ", s.spec_str(), " does not fit argument ", k, " of shape ",
                              shape_str(in[k].shape)));
    for (int d = 0; d < s.rank(); ++d)
      if (in[k].shape[d] % s.num_tiles(d) != 0)
        throw ShardingError(cat("shard_map: argument ", k, " of shape ", shape_str(in[k].shape), " with in_spec ",
                                s.spec_str(), ": dimension ", d, " (", in[k].shape[d], ") is not divisible by ",
                                s.num_tiles(d), ", the number of its blocks"));
    const Aval& want = g.params[k]->aval;
    if (want.dtype != in[k].dtype || want.shape != block_shape(in[k].shape, s))
      throw InternalError(cat("shard_map: argument ", k, " ", in[k].str(), " split as ", s.spec_str(),
                              " does not give the body's parameter ", want.str()));
  }
  std::vector<Aval> outs;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    Aval o = g.outputs[k]->aval;
    const AxisSharding& s = p.out_specs[k];
    if (o.tuple || s.rank() != int(o.shape.size()))
      throw ShardingError(cat("shard_map: out_spec ", s.spec_str(), " does not fit result ", k, " ", o.str()));
    for (int d = 0; d < s.rank(); ++d) o.shape[d] *= s.num_tiles(d);
    outs.push_back(o);
  }
  if (outs.size() == 1) return outs[0];
  return Aval::make_tuple(std::move(outs));
}
void Rule<Op::shard_map>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  throw InternalError("shard_map is evaluated by the interpreter across all devices (tracer/interpreter.cpp)");
}
FactorRule Rule<Op::shard_map>::factors(const Node&) {
  throw InternalError("shard_map has no factor rule: propagation pins its results to its out_specs");
}
// JVP: a shard_map of the body's JVP over the operands and their tangents
// (tangents split as their primals), its results the output tangents, split
// as the outputs. Collectives' JVPs are themselves (linear).
NodeRef Rule<Op::shard_map>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                 const std::vector<NodeRef>& tx, const NodeRef&) {
  const auto& sm = attrs_of(n);
  const Graph& body = *sm.body;
  std::vector<bool> wrt(x.size(), false);
  attr::ShardMap j = sm;
  // An explicitly typed body stays so: every multi-operand op's operands
  // already agree in vma, so a tangent and the primals it meets agree too.
  std::vector<NodeRef> ops = x;
  for (size_t k = 0; k < x.size(); ++k)
    if (tx[k] && is_inexact(x[k]->dtype())) {
      wrt[k] = true;
      ops.push_back(tx[k]);
      j.in_specs.push_back(sm.in_specs[k]);
    }
  Graph jg = jvp_graph(body, wrt);  // outputs: the body's, then their tangents
  auto g = std::make_shared<Graph>();
  g->name = "jvp(" + body.name + ")";
  g->params = jg.params;
  g->outputs.assign(jg.outputs.begin() + std::ptrdiff_t(body.outputs.size()), jg.outputs.end());
  j.body = g;
  return build::shard_map(t, std::move(j), ops);  // one tangent, or a tuple of them: the shape of n's value
}

// Transpose, with respect to the linear operands: a shard_map of the body's
// VJP (JAX's typing made explicit first, so that implicit pvarys transpose
// to psums and psums to pvarys) over the other operands and the output
// cotangents (split as the outputs), its results the cotangents of the
// linear operands, split as they are. Linear operands enter as zeros: the
// body is linear in them, so their values do not matter.
void Rule<Op::shard_map>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                    std::vector<NodeRef>& cts) {
  const auto& sm = attrs_of(n);
  const Graph& body = *sm.body;
  std::vector<AxisSet> in_vma, out_vma;
  for (auto& s : sm.in_specs) in_vma.push_back(spec_axes(s));
  for (auto& s : sm.out_specs) out_vma.push_back(spec_axes(s));
  // The manual axes a spec leaves out.
  auto unmentioned = [&](const AxisSet& named) {
    std::vector<int> out;
    for (int a : sm.manual)
      if (!named.count(a)) out.push_back(a);
    return out;
  };
  // check_vma: JAX's typing made explicit. Without it (JAX's check_vma=False):
  // every psum transposes to a psum (a pvary before it), output cotangents
  // are divided by the size of the axes their out_spec leaves out, and input
  // cotangents summed over the axes their in_spec leaves out.
  Graph typed;
  if (sm.explicit_vma) {
    typed = body;  // typed by an enclosing shard_map's transpose, over every axis
  } else if (sm.check_vma) {
    // Typing from the in_specs alone is complete only when the body's
    // collectives run over this shard_map's axes (and nested ones').
    if (auto a = collective_outside(body, sm.manual); a >= 0)
      throw NotImplementedError(cat("the transpose of a nested shard_map whose body has a collective over mesh axis '",
                                    sm.mesh->axes()[size_t(a)].name,
                                    "' of an enclosing shard_map, outside that shard_map's own transpose (take the "
                                    "gradient of the enclosing shard_map instead)"));
    typed = with_explicit_pvary(body, in_vma, out_vma, sm.mesh);
  } else {
    typed = with_untyped_psums(body);
  }
  Graph vb = vjp_graph(typed, linear);  // params: the body's, then output cotangents; outputs: the body's, then cts
  auto g = std::make_shared<Graph>();
  g->name = "transpose(" + body.name + ")";
  g->params = vb.params;
  g->outputs.assign(vb.outputs.begin() + std::ptrdiff_t(body.outputs.size()), vb.outputs.end());
  if (!sm.check_vma) {
    NodeTable u;
    size_t r = 0;
    for (size_t k = 0; k < n.in.size(); ++k) {
      if (!linear[k]) continue;
      auto axes = unmentioned(in_vma[k]);
      if (!axes.empty()) g->outputs[r] = build::all_reduce(u, g->outputs[r], sm.mesh, axes, Op::add);
      ++r;
    }
  }
  attr::ShardMap tr = sm;
  tr.body = g;
  std::vector<NodeRef> ops;
  for (size_t k = 0; k < n.in.size(); ++k) {
    const Aval& a = n.in[k]->aval;
    ops.push_back(linear[k] ? build::broadcast_in_dim(t, build::scalar(t, a.dtype, 0), a.shape, {}) : n.in[k]);
  }
  const size_t m = body.outputs.size();
  for (size_t i = 0; i < m; ++i) {
    NodeRef c = m == 1 ? ct : build::get_tuple_element(t, ct, std::int64_t(i));
    if (!sm.check_vma) {
      double d = 1;
      for (int a : unmentioned(out_vma[i])) d *= double(sm.mesh->axes()[size_t(a)].size);
      if (d != 1 && is_inexact(c->dtype()))
        c = build::binary(t, Op::div, c, build::broadcast_in_dim(t, build::scalar(t, c->dtype(), d), c->shape(), {}));
    }
    ops.push_back(c);
    tr.in_specs.push_back(sm.out_specs[i]);
  }
  tr.out_specs.clear();
  for (size_t k = 0; k < n.in.size(); ++k)
    if (linear[k]) tr.out_specs.push_back(sm.in_specs[k]);
  if (tr.out_specs.empty()) return;
  auto results = build::results(t, build::shard_map(t, std::move(tr), ops));
  size_t r = 0;
  for (size_t k = 0; k < n.in.size(); ++k)
    if (linear[k]) cts[k] = results.at(r++);
}
// A shard_map's body is propagated and partitioned over the axes it leaves
// automatic by the partitioner itself (tracer/partition.cpp, emit_shard_map).
NodeRef Rule<Op::shard_map>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                                   const std::vector<AxisSharding>&, const AxisSharding&) {
  throw InternalError("shard_map is partitioned by the partitioner's emit_shard_map");
}


// ------------------------------------------------------------------ batching

NodeRef Rule<Op::tuple>::batch(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                               const BatchInfo& b) {
  return build::tuple(t, bt::all_batched(t, x, batched, b));
}
NodeRef Rule<Op::get_tuple_element>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                           const std::vector<bool>&, const BatchInfo&) {
  return build::get_tuple_element(t, x[0], attrs_of(n).index);
}
NodeRef Rule<Op::call>::batch(NodeTable&, const Node&, const std::vector<NodeRef>&, const std::vector<bool>&,
                              const BatchInfo&) {
  structural(Op::call);
}
// A shard_map of the batched body: batched operands and every result carry
// the batch dimension, unsplit (or split by spmd_axis_name) in the specs.
NodeRef Rule<Op::shard_map>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                   const std::vector<bool>& batched, const BatchInfo& b) {
  attr::ShardMap sm = attrs_of(n);
  BatchInfo inner = b;
  if (!b.spmd_axis.empty()) {
    const int a = sm.mesh->axis_index(b.spmd_axis);
    if (a < 0) throw ValueError("vmap: spmd_axis_name '" + b.spmd_axis + "' is not an axis of " + sm.mesh->str());
    inner.size = b.size / sm.mesh->axes()[size_t(a)].size;
    if (b.size % sm.mesh->axes()[size_t(a)].size != 0)
      throw ShardingError("vmap: the batch of " + std::to_string(b.size) + " does not divide over mesh axis '" +
                          b.spmd_axis + "' of " + sm.mesh->str());
  }
  for (size_t k = 0; k < x.size(); ++k)
    if (batched[k]) sm.in_specs[k] = bt::with_batch_dim(sm.in_specs[k], b);
  for (auto& s : sm.out_specs) s = bt::with_batch_dim(s, b);
  sm.body = std::make_shared<Graph>(batch_graph(*sm.body, batched, inner));
  return build::shard_map(t, std::move(sm), x);
}

// ------------------------------------------------------------------ complex expansion, cost

TESSEL_COMPLEX_SAME_OP(tuple)
TESSEL_COMPLEX_SAME_OP(get_tuple_element)
// Inlined before codegen.
TESSEL_COMPLEX_NEVER(call)
TESSEL_COMPLEX_NEVER(shard_map)
TESSEL_COST(tuple, no_cost)
TESSEL_COST(get_tuple_element, no_cost)
TESSEL_COST(call, memory_cost)
TESSEL_COST(shard_map, memory_cost)

}  // namespace tessel
