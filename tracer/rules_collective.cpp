// Rules of sharding_constraint (an identity that pins a sharding) and of the
// collectives. Collectives exist only in per-device programs: their shape
// rules work on local shapes; they are evaluated by the SPMD interpreter
// (tracer/interpreter.hpp), which sees every device at once, never alone.
#include <algorithm>

#include "tracer/build.hpp"
#include "tracer/interpreter.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

namespace {

template <class A>
std::int64_t group_size(Op op, const A& p) {
  if (!p.mesh) throw InternalError(cat(op_name(op), " without a mesh"));
  std::int64_t n = 1;
  for (int a : p.axes) {
    if (a < 0 || a >= p.mesh->num_axes()) throw InternalError(cat(op_name(op), ": mesh axis ", a, " out of range"));
    n *= p.mesh->axes()[a].size;
  }
  return n;
}

std::int64_t checked_dim(Op op, const Aval& x, std::int64_t d) {
  if (d < 0 || d >= std::int64_t(x.shape.size()))
    throw ShapeError(cat(op_name(op), " dimension ", d, " is out of range for ", x.str()));
  return d;
}

[[noreturn]] void spmd_only(Op op) {
  throw InternalError(cat(op_name(op), " is evaluated by the SPMD interpreter, across all devices at once"));
}

}  // namespace

Aval Rule<Op::sharding_constraint>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::sharding_constraint, in, 1);
  if (!p.sharding || p.sharding->rank() != int(in[0].shape.size()))
    throw ShardingError(cat("sharding constraint ", p.sharding ? p.sharding->spec_str() : "(none)",
                            " does not fit a value of rank ", in[0].shape.size()));
  return in[0];
}
void Rule<Op::sharding_constraint>::eval(const std::vector<const HostArray*>& in, const A&, const Aval&,
                                         HostArray& out) {
  out = *in[0];
}

Aval Rule<Op::all_gather>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::all_gather, in, 1);
  Aval o = in[0];
  o.shape[checked_dim(Op::all_gather, in[0], p.dimension)] *= group_size(Op::all_gather, p);
  return o;
}
void Rule<Op::all_gather>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  spmd_only(Op::all_gather);
}

Aval Rule<Op::all_reduce>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::all_reduce, in, 1);
  group_size(Op::all_reduce, p);
  if (is_complex(in[0].dtype) && p.reduce_op != Op::add)
    throw TypeError(cat("all-reduce by ", op_name(p.reduce_op), " of ", in[0].str(), ": complex numbers are not ordered"));
  return in[0];
}
void Rule<Op::all_reduce>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  spmd_only(Op::all_reduce);
}

Aval Rule<Op::reduce_scatter>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::reduce_scatter, in, 1);
  if (is_complex(in[0].dtype) && p.reduce_op != Op::add)
    throw TypeError(cat("reduce-scatter by ", op_name(p.reduce_op), " of ", in[0].str(),
                        ": complex numbers are not ordered"));
  Aval o = in[0];
  std::int64_t d = checked_dim(Op::reduce_scatter, in[0], p.dimension);
  std::int64_t n = group_size(Op::reduce_scatter, p);
  if (o.shape[d] % n != 0)
    throw ShapeError(cat("reduce-scatter of ", in[0].str(), " along dimension ", d, " over ", n, " devices"));
  o.shape[d] /= n;
  return o;
}
void Rule<Op::reduce_scatter>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  spmd_only(Op::reduce_scatter);
}

Aval Rule<Op::all_to_all>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::all_to_all, in, 1);
  Aval o = in[0];
  std::int64_t split = checked_dim(Op::all_to_all, in[0], p.split_dimension);
  std::int64_t concat = checked_dim(Op::all_to_all, in[0], p.concat_dimension);
  std::int64_t n = group_size(Op::all_to_all, p);
  if (o.shape[split] % n != 0)
    throw ShapeError(cat("all-to-all of ", in[0].str(), " splits dimension ", split, " over ", n, " devices"));
  o.shape[split] /= n;
  o.shape[concat] *= n;
  return o;
}
void Rule<Op::all_to_all>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  spmd_only(Op::all_to_all);
}

Aval Rule<Op::collective_permute>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::collective_permute, in, 1);
  if (!p.mesh) throw InternalError("collective-permute without a mesh");
  for (auto [s, t] : p.pairs)
    if (s < 0 || t < 0 || s >= p.mesh->size() || t >= p.mesh->size())
      throw InternalError(cat("collective-permute pair ", s, "->", t, " outside the mesh"));
  return in[0];
}
void Rule<Op::collective_permute>::eval(const std::vector<const HostArray*>&, const A&, const Aval&,
                                        HostArray&) {
  spmd_only(Op::collective_permute);
}

// axis_index: this device's coordinate along mesh axes (row-major over them),
// an int32 scalar; only per-device programs have it.
Aval Rule<Op::axis_index>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::axis_index, in, 0);
  group_size(Op::axis_index, p);
  return Aval{DType::int32, {}, false};
}
void Rule<Op::axis_index>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {
  spmd_only(Op::axis_index);
}
FactorRule Rule<Op::axis_index>::factors(const Node& n) { return rule_util::leaf_factors(n); }

FactorRule Rule<Op::sharding_constraint>::factors(const Node& n) { return rule_util::elementwise_factors(n); }
// Collectives occur in shard_map bodies; a body with automatic axes is
// propagated and partitioned over them (tracer/partition.cpp). A group runs
// over manual axes, so its members hold the same tile of every automatic
// split: dims a collective keeps pass through; the dims it gathers,
// scatters or exchanges stay whole.
namespace {
FactorRule elementwise_but(const Node& n, std::vector<std::int64_t> whole) {
  FactorRule r;
  const Shape& in = n.in.at(0)->shape();
  std::vector<std::vector<int>> op(in.size()), res(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (std::find(whole.begin(), whole.end(), std::int64_t(d)) != whole.end()) {
      op[d] = {r.add_factor(in[d], false, true)};
      res[d] = {r.add_factor(n.shape()[d], false, true)};
    } else {
      op[d] = res[d] = {r.add_factor(in[d])};
    }
  }
  r.operands.push_back(op);
  r.result = res;
  return r;
}
}  // namespace
FactorRule Rule<Op::all_gather>::factors(const Node& n) { return elementwise_but(n, {attrs_of(n).dimension}); }
FactorRule Rule<Op::all_reduce>::factors(const Node& n) { return rule_util::elementwise_factors(n); }
FactorRule Rule<Op::reduce_scatter>::factors(const Node& n) { return elementwise_but(n, {attrs_of(n).dimension}); }
FactorRule Rule<Op::all_to_all>::factors(const Node& n) {
  return elementwise_but(n, {attrs_of(n).split_dimension, attrs_of(n).concat_dimension});
}
FactorRule Rule<Op::collective_permute>::factors(const Node& n) { return rule_util::elementwise_factors(n); }

bool has_collectives(const Graph& g) {
  bool found = false;
  for_each_graph(g, [&](const Graph& r) {
    for (auto& n : r.topo_order())
      if (collective_axes(*n).mesh && n->op != Op::axis_index && n->op != Op::pvary) found = true;
  });
  return found;
}

CollectiveAxes collective_axes(const Node& n) {
  auto of = [](const auto& a) { return CollectiveAxes{&a.mesh, &a.axes}; };
  switch (n.op) {
    case Op::all_reduce: return of(n.attr<attr::AllReduce>());
    case Op::all_gather: return of(n.attr<attr::AllGather>());
    case Op::reduce_scatter: return of(n.attr<attr::ReduceScatter>());
    case Op::all_to_all: return of(n.attr<attr::AllToAll>());
    case Op::pvary: return of(n.attr<attr::AxisIndex>());
    case Op::axis_index: return of(n.attr<attr::AxisIndex>());
    case Op::collective_permute: return {&n.attr<attr::CollectivePermute>().mesh, nullptr};
    case Op::distributed_lu:
    case Op::distributed_cholesky:
    case Op::distributed_triangular_solve: return of(n.attr<attr::RowBlocked>());  // library routines that meet their group
    default: return {};
  }
}

// pvary: an identity in value; in a shard_map body it types x as varying
// over its axes (JAX's pvary), so that its transpose sums over them.
Aval Rule<Op::pvary>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::pvary, in, 1);
  group_size(Op::pvary, p);
  return in[0];
}
void Rule<Op::pvary>::eval(const std::vector<const HostArray*>& in, const A&, const Aval&, HostArray& out) {
  out = *in[0];
}
FactorRule Rule<Op::pvary>::factors(const Node& n) { return rule_util::elementwise_factors(n); }
NodeRef Rule<Op::pvary>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                             const NodeRef&) {
  return tx[0] ? build::pvary(t, tx[0], attrs_of(n).mesh, attrs_of(n).axes) : nullptr;
}
void Rule<Op::pvary>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                std::vector<NodeRef>& cts) {
  cts[0] = build::all_reduce(t, ct, attrs_of(n).mesh, attrs_of(n).axes, Op::add);
}
TESSEL_LOCAL_SAME_OP(pvary)

// ------------------------------------------------------------------ autodiff

TESSEL_NO_DERIVATIVE(axis_index)

NodeRef Rule<Op::sharding_constraint>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                           const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::sharding_constraint(t, tx[0], *attrs_of(n).sharding) : nullptr;
}
void Rule<Op::sharding_constraint>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                              std::vector<NodeRef>& cts) {
  cts[0] = build::sharding_constraint(t, ct, *attrs_of(n).sharding);
}

// Collectives are linear (all-reduce when it adds): the tangent takes the
// same collective; transposes swap all-gather and reduce-scatter, reverse
// permutations and all-to-alls, and keep the all-reduce of a sum.
NodeRef Rule<Op::all_gather>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                  const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::all_gather(t, tx[0], attrs_of(n).mesh, attrs_of(n).axes, attrs_of(n).dimension) : nullptr;
}
void Rule<Op::all_gather>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                     std::vector<NodeRef>& cts) {
  cts[0] = build::reduce_scatter(t, ct, attrs_of(n).mesh, attrs_of(n).axes, attrs_of(n).dimension, Op::add);
}

NodeRef Rule<Op::all_reduce>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                  const std::vector<NodeRef>& tx, const NodeRef& y) {
  if (!tx[0]) return nullptr;
  if (attrs_of(n).reduce_op == Op::add) return build::all_reduce(t, tx[0], attrs_of(n).mesh, attrs_of(n).axes, Op::add);
  // pmax / pmin: the tangents where the operand attains the result, averaged.
  NodeRef at = build::convert(t, build::binary(t, Op::eq, x[0], y), x[0]->dtype());
  NodeRef count = build::all_reduce(t, at, attrs_of(n).mesh, attrs_of(n).axes, Op::add);
  NodeRef s = build::all_reduce(t, build::binary(t, Op::mul, tx[0], at), attrs_of(n).mesh, attrs_of(n).axes, Op::add);
  return build::binary(t, Op::div, s, count);
}
void Rule<Op::all_reduce>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                     std::vector<NodeRef>& cts) {
  // A psum in a shard_map body takes a value varying over its axes to an
  // invariant one (operands invariant over some of them were pvary'd first:
  // tracer/shard_map typing); its transpose is pvary, the identity in value
  // (JAX's psum_invariant transpose). Collectives of partitioned programs
  // are never differentiated.
  if (attrs_of(n).reduce_op != Op::add) rule_util::not_linear(n);
  cts[0] = build::pvary(t, ct, attrs_of(n).mesh, attrs_of(n).axes);
}

NodeRef Rule<Op::reduce_scatter>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                      const std::vector<NodeRef>& tx, const NodeRef&) {
  if (!tx[0]) return nullptr;
  if (attrs_of(n).reduce_op != Op::add) throw Error("differentiating a reduce-scatter of max or min is not supported");
  return build::reduce_scatter(t, tx[0], attrs_of(n).mesh, attrs_of(n).axes, attrs_of(n).dimension, Op::add);
}
void Rule<Op::reduce_scatter>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                         std::vector<NodeRef>& cts) {
  cts[0] = build::all_gather(t, ct, attrs_of(n).mesh, attrs_of(n).axes, attrs_of(n).dimension);
}

NodeRef Rule<Op::all_to_all>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                  const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::all_to_all(t, tx[0], attrs_of(n).mesh, attrs_of(n).axes, attrs_of(n).split_dimension, attrs_of(n).concat_dimension) : nullptr;
}
void Rule<Op::all_to_all>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                     std::vector<NodeRef>& cts) {
  cts[0] = build::all_to_all(t, ct, attrs_of(n).mesh, attrs_of(n).axes, attrs_of(n).concat_dimension, attrs_of(n).split_dimension);
}

NodeRef Rule<Op::collective_permute>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                          const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::collective_permute(t, tx[0], attrs_of(n).mesh, attrs_of(n).pairs) : nullptr;
}
void Rule<Op::collective_permute>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                             std::vector<NodeRef>& cts) {
  std::vector<std::pair<std::int64_t, std::int64_t>> inv;
  for (auto [s, d] : attrs_of(n).pairs) inv.push_back({d, s});
  cts[0] = build::collective_permute(t, ct, attrs_of(n).mesh, inv);
}

// ---------------------------------------------------------------- partitioning

TESSEL_LOCAL_SAME_OP(axis_index)
TESSEL_LOCAL_SAME_OP(all_gather)
TESSEL_LOCAL_SAME_OP(all_reduce)
TESSEL_LOCAL_SAME_OP(reduce_scatter)
TESSEL_LOCAL_SAME_OP(all_to_all)
TESSEL_LOCAL_SAME_OP(collective_permute)
// A constraint only pinned the sharding its operand now has.
NodeRef Rule<Op::sharding_constraint>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>& ops,
                                             const std::vector<AxisSharding>&, const AxisSharding&) {
  return ops[0];
}


// ------------------------------------------------------------------ batching
// The batch dimension is one more dimension the collective carries along
// (vmap of a shard_map body); a constraint leaves it unsplit, or split by
// vmap's spmd_axis_name.
NodeRef Rule<Op::sharding_constraint>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                             const std::vector<bool>&, const BatchInfo& b) {
  return build::sharding_constraint(t, x[0], bt::with_batch_dim(*attrs_of(n).sharding, b));
}
NodeRef Rule<Op::all_gather>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                                    const BatchInfo&) {
  const auto& a = attrs_of(n);
  return build::all_gather(t, x[0], a.mesh, a.axes, a.dimension + 1);
}
NodeRef Rule<Op::all_reduce>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                                    const BatchInfo&) {
  const auto& a = attrs_of(n);
  return build::all_reduce(t, x[0], a.mesh, a.axes, a.reduce_op);
}
NodeRef Rule<Op::reduce_scatter>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                        const std::vector<bool>&, const BatchInfo&) {
  const auto& a = attrs_of(n);
  return build::reduce_scatter(t, x[0], a.mesh, a.axes, a.dimension + 1, a.reduce_op);
}
NodeRef Rule<Op::all_to_all>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                                    const BatchInfo&) {
  const auto& a = attrs_of(n);
  return build::all_to_all(t, x[0], a.mesh, a.axes, a.split_dimension + 1, a.concat_dimension + 1);
}
NodeRef Rule<Op::collective_permute>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                            const std::vector<bool>&, const BatchInfo&) {
  const auto& a = attrs_of(n);
  return build::collective_permute(t, x[0], a.mesh, a.pairs);
}
TESSEL_BATCH_NEVER(axis_index)
NodeRef Rule<Op::pvary>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                               const BatchInfo&) {
  const auto& a = attrs_of(n);
  return build::pvary(t, x[0], a.mesh, a.axes);
}

// ------------------------------------------------------------------ complex expansion, cost

// Packed, the same bytes move.
TESSEL_COMPLEX_NEVER(axis_index)
TESSEL_COMPLEX_IDENTITY(pvary)
TESSEL_COMPLEX_IDENTITY(sharding_constraint)
TESSEL_COMPLEX_SAME_OP(all_gather)
TESSEL_COMPLEX_SAME_OP(reduce_scatter)
TESSEL_COMPLEX_SAME_OP(all_to_all)
TESSEL_COMPLEX_SAME_OP(collective_permute)
// A sum adds the parts; a product gathers every device's value (in the same
// order everywhere) and multiplies them by halves.
NodeRef Rule<Op::all_reduce>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& how = n.attr<attr::AllReduce>();
  if (how.reduce_op == Op::add) return build::with_operands(b.table(), n, ops);
  if (how.reduce_op != Op::mul)
    throw InternalError(cat("an all-reduce by ", op_name(how.reduce_op), " of complex values"));
  Parts x = b.unpack(ops[0]);
  auto gather = [&](const NodeRef& v) {
    Shape s1 = n.shape();
    s1.insert(s1.begin(), 1);
    return build::all_gather(b.table(), build::reshape(b.table(), v, s1), how.mesh, how.axes, 0);
  };
  Parts g = b.prod_along({gather(x.re), gather(x.im)}, 0);
  return b.pack({build::reshape(b.table(), g.re, n.shape()), build::reshape(b.table(), g.im, n.shape())});
}

namespace {
// A collective's bytes and what each device reads from its peers, as the
// shared-memory collectives move them, from its operand's and result's bytes
// and its group's size.
NodeCost collective_cost(const Node& n, double (*moved)(double in, double out, double group)) {
  NodeCost c = rule_util::memory_cost(n);
  const double es = double(dtype_size(n.dtype()));
  double group = 1;
  const CollectiveAxes ca = collective_axes(n);
  if (ca.axes)
    for (int a : *ca.axes) group *= double((*ca.mesh)->axes()[size_t(a)].size);
  c.bytes_moved = moved(double(numel(n.in[0]->shape())) * es, double(numel(n.shape())) * es, group);
  c.communicates = true;
  return c;
}
}  // namespace

NodeCost Rule<Op::all_gather>::cost(const Node& n) {
  return collective_cost(n, [](double in, double out, double) { return out - in; });
}
// A reduce-scatter and an all-gather.
NodeCost Rule<Op::all_reduce>::cost(const Node& n) {
  return collective_cost(n, [](double in, double, double g) { return 2 * (g - 1) / g * in; });
}
NodeCost Rule<Op::reduce_scatter>::cost(const Node& n) {
  return collective_cost(n, [](double, double out, double g) { return (g - 1) * out; });
}
NodeCost Rule<Op::all_to_all>::cost(const Node& n) {
  return collective_cost(n, [](double in, double, double g) { return in * (g - 1) / g; });
}
NodeCost Rule<Op::collective_permute>::cost(const Node& n) {
  return collective_cost(n, [](double in, double, double) { return in; });
}
TESSEL_COST(axis_index, no_cost)
TESSEL_COST(pvary, no_cost)
TESSEL_COST(sharding_constraint, no_cost)

// ------------------------------------------------------------------ reference kernels over groups
// (GroupEval, run by the interpreter per group of members, in group order.)

template <Op op>
struct GroupRule;  // defined for the ops that run over groups

namespace {
// The members' values combined with op, in group order (the compiled
// collectives' left fold: the same bits).
HostArray fold(Op op, const std::vector<const HostArray*>& members) {
  HostArray acc = *members.at(0);
  for (size_t r = 1; r < members.size(); ++r)
    acc = host_eval(op, attr::None{}, Aval{acc.dtype, acc.shape, false}, {&acc, members[r]});
  return acc;
}
}  // namespace

template <>
struct GroupRule<Op::axis_index> {
  static void eval(const Node&, const std::vector<const HostArray*>& members, std::vector<HostArray>& out) {
    for (size_t r = 0; r < members.size(); ++r) {
      const std::int32_t i = std::int32_t(r);
      out[r] = host_array(DType::int32, {}, &i);
    }
  }
};
template <>
struct GroupRule<Op::all_reduce> {
  static void eval(const Node& n, const std::vector<const HostArray*>& members, std::vector<HostArray>& out) {
    const HostArray acc = fold(n.attr<attr::AllReduce>().reduce_op, members);
    for (auto& o : out) o = acc;
  }
};
template <>
struct GroupRule<Op::all_gather> {
  static void eval(const Node& n, const std::vector<const HostArray*>& members, std::vector<HostArray>& out) {
    std::vector<HostArray> parts;
    for (auto* m : members) parts.push_back(*m);
    const HostArray all = host_concat(parts, n.attr<attr::AllGather>().dimension);
    for (auto& o : out) o = all;
  }
};
template <>
struct GroupRule<Op::reduce_scatter> {
  static void eval(const Node& n, const std::vector<const HostArray*>& members, std::vector<HostArray>& out) {
    const auto& a = n.attr<attr::ReduceScatter>();
    const HostArray acc = fold(a.reduce_op, members);
    for (size_t r = 0; r < out.size(); ++r) out[r] = host_chunk(acc, a.dimension, std::int64_t(r), std::int64_t(out.size()));
  }
};
template <>
struct GroupRule<Op::all_to_all> {
  static void eval(const Node& n, const std::vector<const HostArray*>& members, std::vector<HostArray>& out) {
    const auto& a = n.attr<attr::AllToAll>();
    const std::int64_t m = std::int64_t(members.size());
    for (std::int64_t r = 0; r < m; ++r) {
      std::vector<HostArray> parts;
      for (std::int64_t k = 0; k < m; ++k) parts.push_back(host_chunk(*members[size_t(k)], a.split_dimension, r, m));
      out[size_t(r)] = host_concat(parts, a.concat_dimension);
    }
  }
};
// The group is the whole mesh in position order; a position no pair sends to gets zeros.
template <>
struct GroupRule<Op::collective_permute> {
  static void eval(const Node& n, const std::vector<const HostArray*>& members, std::vector<HostArray>& out) {
    for (size_t pos = 0; pos < out.size(); ++pos) {
      out[pos] = *members[pos];
      std::fill(out[pos].bytes.begin(), out[pos].bytes.end(), 0);
    }
    for (auto [src, dst] : n.attr<attr::CollectivePermute>().pairs) out.at(size_t(dst)) = *members.at(size_t(src));
  }
};

namespace {
template <Op op, OpFamily family>
constexpr GroupEval group_entry() {
  if constexpr (family == OpFamily::Collective || op == Op::axis_index)
    return &GroupRule<op>::eval;
  else
    return nullptr;
}
const GroupEval kGroupEvals[] = {
#define TESSEL_X(e, text, family, cost_class, attrs) group_entry<Op::e, OpFamily::family>(),
    TESSEL_OPS(TESSEL_X)
#undef TESSEL_X
};
}  // namespace

GroupEval group_eval(Op op) { return kGroupEvals[int(op)]; }

}  // namespace tessel
