// Every primitive's rules, in one table.
//
// Each op has one `Rule<Op::x>`, declared here for every op of the list and
// defined in the file of its family (tracer/rules_<family>.cpp), holding all
// that op's rules side by side: its shape/dtype rule and its reference
// kernel (later also JVP, transpose, batching and sharding rules). The table
// is built from the op list, so an op whose rules are missing does not link.
#pragma once

#include <functional>
#include <string>
#include <ostream>
#include <vector>

#include "tracer/complex_build.hpp"
#include "tracer/ir.hpp"

namespace tessel {

// Host arrays of the reference interpreter are Literals.
using HostArray = Literal;

// The sharding rule of an op in Shardy's factor form: every dimension of
// every operand and of the result is a list of factors (major to minor), as
// an einsum names its indices. A factor in the operands and the result can be
// split over mesh axes freely; a reduction factor (operands only) split over
// axes leaves the result partial (unreduced) over them; a factor that needs
// replication (a sliced, padded or concatenated dimension) is never split.
struct FactorRule {
  std::vector<std::int64_t> sizes;
  std::vector<std::vector<std::vector<int>>> operands;  // [operand][dim] -> factors
  std::vector<std::vector<int>> result;                 // [dim] -> factors
  // A tuple-valued op's (lu, qr, eigh, svd): per element, [dim] -> factors
  // (`result` is then unused).
  std::vector<std::vector<std::vector<int>>> results;
  std::vector<bool> reduction;
  std::vector<bool> need_replication;
  Op reduce_op = Op::add;  // how partial results combine (add, max, min)
  // Operands the op only waits for (remat_barrier's `after`): propagation
  // takes nothing from them and the partitioner passes them as they are laid
  // out. Empty: none.
  std::vector<bool> unread;
  bool is_unread(std::size_t k) const { return k < unread.size() && unread[k]; }

  int add_factor(std::int64_t size, bool reduction = false, bool replicate = false);
};

// What an op's partition rule may use (tracer/partition.cpp implements it).
class LocalBuilder {
 public:
  virtual ~LocalBuilder() = default;
  virtual NodeTable& table() = 0;
  virtual const MeshRef& device_mesh() const = 0;
  // Tiles along `axes` (the product of their sizes).
  virtual std::int64_t tiles(const std::vector<int>& axes) const = 0;
  // This device's tile index along `axes`, times `scale`, as an int32 scalar.
  virtual NodeRef offset(const std::vector<int>& axes, std::int64_t scale) = 0;
  // x, holding an array of global shape G laid out as `from`, laid out as `to`.
  virtual NodeRef reshard(NodeRef x, const Shape& G, const AxisSharding& from, const AxisSharding& to) = 0;
  // x (global shape G, laid out as s) with the padding of split, uneven dims `dims` replaced by `fill`.
  virtual NodeRef mask(NodeRef x, const Shape& G, const AxisSharding& s, const std::vector<int>& dims,
                       const Literal& fill) = 0;
  // Whether the node is in a shard_map body (some mesh axes are manual).
  virtual bool in_shard_map() const = 0;
};

// What a batching rule knows of the vmap it is part of: the batch size, and
// the mesh axis name the batch dimension is split by in constraints and
// shard_map specs (vmap's spmd_axis_name; empty: none).
struct BatchInfo {
  std::int64_t size = 1;
  std::string spmd_axis;
  // Where a rule puts effect nodes (debug_callback) its result does not
  // reach: the batched graph keeps them (batch_graph sets it).
  std::vector<NodeRef>* effects = nullptr;
};

// What running a node once costs, as XLA's cost analysis counts it (a
// region op's own cost: the compile driver adds what its regions run).
struct NodeCost {
  double flops = 0, transcendentals = 0, bytes_accessed = 0;
  // Bytes each device reads from its peers (collectives, distributed linalg),
  // as the shared-memory collectives move them.
  double bytes_moved = 0;
  bool communicates = false;  // it meets peers (listed by communication analysis even when nothing moves)
  // A region op's regions: how many times each runs (a scan's length; a
  // while loop's trip count is known only when it runs, so one trip, as XLA
  // counts), and whether only one of them runs (a cond: the dearest counts).
  double region_runs = 1;
  bool one_region = false;
};



struct OpRules {
  // The result's aval from the operands' (and, for ops whose result type is a
  // parameter — parameter, constant, iota, reshape, broadcast, convert — the
  // declared aval). Throws ShapeError/TypeError for bad operands.
  Aval (*infer)(const std::vector<Aval>& in, const Attrs& p, const Aval& declared);
  // The reference kernel: plain loops over host arrays.
  void (*eval)(const std::vector<const HostArray*>& in, const Attrs& p, const Aval& out_aval, HostArray& out);
  // The sharding rule (tracer/propagate.hpp uses it; so does the partitioner).
  FactorRule (*factors)(const Node& n);
  // Forward-mode rule: the tangent of n's result from its operands' new
  // primals x, their tangents tx (null: zero) and the new primal result y;
  // null when the tangent is zero. Built only of ops linear in tx.
  NodeRef (*jvp)(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                 const NodeRef& y);
  // Transpose of a linear use of n: the cotangents of its linear operands
  // (linear[k]) from the cotangent ct of its result. Throws for ops that are
  // never linear.
  void (*transpose)(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                    std::vector<NodeRef>& cts);
  // The per-device form of global node n: from its operands as the op's
  // sharding rule wants them (ops, laid out as op_sh), the local value laid
  // out as `natural` (the rule's result sharding). Most ops are the same op
  // on local operands; ops with offsets or sizes rewrite them.
  NodeRef (*local)(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                   const std::vector<AxisSharding>& op_sh, const AxisSharding& natural);
  // The batching rule (vmap): n applied to operands x, those with batched[k]
  // carrying a leading batch dimension of size b.size (at least one does);
  // returns the batched result, its batch dimension leading too (a tuple's
  // elements each).
  NodeRef (*batch)(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                   const BatchInfo& b);
  // Complex expansion (codegen/complex.hpp): n, whose operands or result are
  // complex, rebuilt over packed operands `ops` (tracer/complex_build.hpp) in
  // real ops; returns its packed (or real) result. Throws NotImplementedError
  // for an op with no complex form.
  NodeRef (*expand_complex)(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops);
  // The cost of running n once (cost analysis, communication, fusion).
  NodeCost (*cost)(const Node& n);
};

const OpRules& rules(Op op);

template <Op op>
struct Rule;

#define TESSEL_X(e, text, family, cost_class, attrs)                                                                   \
  template <>                                                                                       \
  struct Rule<Op::e> {                                                                              \
    using A = attr::attrs; /* the op's attribute struct */                                          \
    static const A& attrs_of(const Node& n) { return n.attr<A>(); }                                 \
    static Aval infer(const std::vector<Aval>& in, const A& p, const Aval& declared);               \
    static void eval(const std::vector<const HostArray*>& in, const A& p, const Aval& out_aval,      \
                     HostArray& out);                                                               \
    static FactorRule factors(const Node& n);                                                       \
    static NodeRef jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,                  \
                       const std::vector<NodeRef>& tx, const NodeRef& y);                           \
    static void transpose(NodeTable& t, const Node& n, const NodeRef& ct,                           \
                          const std::vector<bool>& linear, std::vector<NodeRef>& cts);              \
    static NodeRef local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,           \
                         const std::vector<AxisSharding>& op_sh, const AxisSharding& natural);     \
    static NodeRef batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,                \
                         const std::vector<bool>& batched, const BatchInfo& b);                     \
    static NodeRef expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops); \
    static NodeCost cost(const Node& n);                                                            \
  };
TESSEL_OPS(TESSEL_X)
#undef TESSEL_X

// The identity of a reduction, exactly for dtype t (never through a double):
// 0 for reduce_sum/add, 1 for reduce_prod/mul, the dtype's lowest value
// (-inf for floats, false for bool) for reduce_max/max/argmax and its highest
// (+inf, true) for reduce_min/min/argmin. The one place identities live: the
// reference kernels, the partitioner's padding masks and codegen read it.
Literal reduction_identity(Op op, DType t);
// TypeError for a sum (reduce-sum, cumsum, dot) of float8_e8m0fnu, which has
// no zero to start it from or to pad uneven splits with.
void check_summable(Op op, const std::vector<Aval>& in);

// The mesh and axes a collective, pvary or axis_index runs over (axes null
// for collective_permute, whose pairs name whole-mesh positions; both null
// for other ops).
struct CollectiveAxes {
  const MeshRef* mesh = nullptr;
  const std::vector<int>* axes = nullptr;
};
CollectiveAxes collective_axes(const Node& n);

// The reference kernel of an op that runs over groups of devices (the
// collectives and axis_index): each member's result from each member's
// operand (null for axis_index), in group order. The interpreter forms the
// groups (collective_axes; collective_permute's: the whole mesh) and runs it
// per group. group_eval(op) is null for every other op.
using GroupEval = void (*)(const Node& n, const std::vector<const HostArray*>& members, std::vector<HostArray>& out);
GroupEval group_eval(Op op);

// Whether g or a region in it holds a collective (axis_index and pvary,
// which move no data, aside): devices must then run it in step.
bool has_collectives(const Graph& g);

// The axes a Reduce-family node (reduce_*, argmax, argmin) reduces.
std::vector<std::int64_t> reduced_axes(const Node& n);

// One Threefry-2x32 block (the reference kernel; tests use it for known answers).
void threefry2x32_block(std::uint32_t k0, std::uint32_t k1, std::uint32_t& x0, std::uint32_t& x1);

// The cumulative ops' kernel, shared by the interpreter and the compiled
// thunk: each line of `in` along dim scanned (from its end when reverse).
void cumulative_lines(Op op, DType dtype, const Shape& shape, std::int64_t dim, bool reverse, const void* in, void* out);

// The top_k kernel, shared by the interpreter and the compiled thunk: per
// line along the last dim of `shape`, the k largest values, descending (NaNs
// largest), ties by lower index, and their int32 indices.
void top_k_lines(DType dtype, const Shape& shape, std::int64_t k, const void* in, void* values, void* indices);

// JAX's fill value of an out-of-bounds gather (mode fill): NaN for floats,
// the lowest signed and the highest unsigned integer, true.
Literal gather_fill(DType t);

// The scatter primitive's kernel, shared by the interpreter and the compiled
// thunk: out = x with each update combined into its place (updates in row-
// major order; a later one combines into an earlier one's result).
void scatter_kernel(const attr::Indexed& how, DType dtype, const Shape& x_shape, DType idx_dtype, const Shape& idx_shape,
                    const void* x, const void* idx, const void* updates, void* out);

// The sort primitive's kernel, shared by the interpreter and the compiled
// thunk: each line of `values` along dim, reordered by a stable sort of the
// same line of `keys` (NaNs last, as JAX). `shape` is both operands'. The
// lines are numbered row-major over the other dims (sort_line_count of
// them); the second form sorts lines [first, last) only, so that a caller
// may spread them over threads.
void sort_lines(DType key_dtype, DType value_dtype, const Shape& shape, std::int64_t dim, const void* keys,
                const void* values, void* out);
std::int64_t sort_line_count(const Shape& shape, std::int64_t dim);
void sort_lines(DType key_dtype, DType value_dtype, const Shape& shape, std::int64_t dim, const void* keys,
                const void* values, void* out, std::int64_t first, std::int64_t last);

// Helpers the family files share.
namespace rule_util {
// "f32[4,8] and s32[4,8]" style operand lists for messages.
std::string avals_str(const std::vector<Aval>& in);
void expect_arity(Op op, const std::vector<Aval>& in, size_t n);
// A fresh host array of `aval` (zeroed).
void allocate(HostArray& out, const Aval& aval);
// A tuple-valued op's reference result: its elements' bytes one after the
// other in one host array (the interpreter splits it by the tuple's avals).
void pack_tuple(HostArray& out, const std::vector<const HostArray*>& elements);
// Factor rules shared by families.
FactorRule elementwise_factors(const Node& n);    // every operand dim i and result dim i: factor i
FactorRule replicated_factors(const Node& n);     // every dim its own factor, none splittable
FactorRule leaf_factors(const Node& n);           // result dims free factors, no operands
[[noreturn]] void not_linear(const Node& n);
// The result of a call of `body` on operands `in` (its one output's aval, or
// a tuple of them); TypeError when the operands are not what body takes.
// Rule<Op::call> and the custom calls' rules (rules_structure.cpp).
Aval call_aval(const Graph& body, const std::vector<Aval>& in);
// Several values as a call's result (one: itself; else a tuple), and back.
NodeRef pack(NodeTable& t, const std::vector<NodeRef>& xs);
std::vector<NodeRef> unpack(NodeTable& t, const NodeRef& v, std::size_t m);
// The rules a custom call (tracer/rewrite.hpp, is_custom_call) never runs:
// it is inlined as its first region before propagation, partitioning and
// codegen, and the interpreter runs that region.
[[noreturn]] void inlined_first(Op op);
// Complex expansion: NotImplementedError for an op with no complex form;
// InternalError for one the pass never hands a rule (regions, parameters).
[[noreturn]] void no_complex_form(const Node& n);
[[noreturn]] void complex_never_reaches(const Node& n);
// Cost rules shared by families: elementwise (a flop or a transcendental per
// element, by the op list's cost class), data movement (bytes only), none
// (leaves, annotations, tuples), a reduction (a flop per operand element).
NodeCost elementwise_cost(const Node& n);
NodeCost memory_cost(const Node& n);
NodeCost no_cost(const Node& n);
NodeCost reduce_cost(const Node& n);
// The bytes n reads and writes (its operands and result).
double bytes_accessed(const Node& n);
// "{0,1,2}"
std::string ints(const std::vector<std::int64_t>& v);
}  // namespace rule_util

// The partition rule of a primitive whose per-device op is the same op on
// the local operands (elementwise ops, transposes, reductions, dots, ...).
#define TESSEL_LOCAL_SAME_OP(OP)                                                                         \
  NodeRef Rule<Op::OP>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,         \
                              const std::vector<AxisSharding>&, const AxisSharding&) {                \
    return build::with_operands(b.table(), n, ops);                                                    \
  }
// The autodiff rules of a primitive with no derivative to carry: its tangent
// is zero (piecewise constant, integer-valued, or a leaf of the graph) and it
// is not linear, so it has no transpose.
#define TESSEL_NO_DERIVATIVE(OP)                                                                              \
  NodeRef Rule<Op::OP>::jvp(NodeTable&, const Node&, const std::vector<NodeRef>&, const std::vector<NodeRef>&, \
                            const NodeRef&) {                                                                  \
    return nullptr;                                                                                            \
  }                                                                                                            \
  void Rule<Op::OP>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,            \
                               std::vector<NodeRef>&) {                                                        \
    rule_util::not_linear(n);                                                                                  \
  }

// Complex-expansion rules shared by ops: no complex form; never reached by
// the pass; the same op on the packed operands (the same bytes move or are
// read); the identity (annotations).
#define TESSEL_COMPLEX_NONE(OP)                                                                          \
  NodeRef Rule<Op::OP>::expand_complex(ComplexBuilder&, const Node& n, const std::vector<NodeRef>&) {     \
    rule_util::no_complex_form(n);                                                                       \
  }
#define TESSEL_COMPLEX_NEVER(OP)                                                                         \
  NodeRef Rule<Op::OP>::expand_complex(ComplexBuilder&, const Node& n, const std::vector<NodeRef>&) {     \
    rule_util::complex_never_reaches(n);                                                                 \
  }
#define TESSEL_COMPLEX_SAME_OP(OP)                                                                       \
  NodeRef Rule<Op::OP>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) { \
    return build::with_operands(b.table(), n, ops);                                                      \
  }
#define TESSEL_COMPLEX_IDENTITY(OP)                                                                      \
  NodeRef Rule<Op::OP>::expand_complex(ComplexBuilder&, const Node&, const std::vector<NodeRef>& ops) {   \
    return ops[0];                                                                                       \
  }
// A cost rule shared by a family (rule_util::*_cost).
#define TESSEL_COST(OP, FN) \
  NodeCost Rule<Op::OP>::cost(const Node& n) { return rule_util::FN(n); }

// Helpers for the batching rules (tracer/batching.cpp).
namespace bt {
// x with a leading batch dimension: itself when batched, else broadcast.
NodeRef batched(NodeTable& t, const NodeRef& x, bool is_batched, const BatchInfo& b);
std::vector<NodeRef> all_batched(NodeTable& t, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                                 const BatchInfo& b);
// Element i of batched x (its leading dim sliced off).
NodeRef element(NodeTable& t, const NodeRef& x, std::int64_t i);
// Dims shifted past the batch dimension (+1 each).
std::vector<std::int64_t> shifted(const std::vector<std::int64_t>& dims);
// n on every operand batched, the same op (elementwise ops).
NodeRef same_op(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                const BatchInfo& b);
// The rule of last resort, always right: a scan over the batch applying n to
// each example (lax.map), for operands no closed rule covers.
NodeRef by_map(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
               const BatchInfo& b);
// A sharding of rank r + 1: the batch dimension leading, split by b.spmd_axis when given.
AxisSharding with_batch_dim(const AxisSharding& s, const BatchInfo& b);
}  // namespace bt

#define TESSEL_BATCH_SAME_OP(OP)                                                                              \
  NodeRef Rule<Op::OP>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,                      \
                              const std::vector<bool>& batched, const BatchInfo& b) {                          \
    return bt::same_op(t, n, x, batched, b);                                                                   \
  }
#define TESSEL_BATCH_BY_MAP(OP)                                                                               \
  NodeRef Rule<Op::OP>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,                      \
                              const std::vector<bool>& batched, const BatchInfo& b) {                          \
    return bt::by_map(t, n, x, batched, b);                                                                    \
  }
#define TESSEL_BATCH_NEVER(OP)                                                                                \
  NodeRef Rule<Op::OP>::batch(NodeTable&, const Node& n, const std::vector<NodeRef>&, const std::vector<bool>&, \
                              const BatchInfo&) {                                                              \
    throw InternalError(std::string(op_name(n.op)) + " has no operands to batch");                             \
  }

// Builders for the autodiff rules: zero-aware arithmetic on tangents and
// cotangents (null means zero).
namespace ad {
NodeRef add(NodeTable& t, const NodeRef& a, const NodeRef& b);  // null-aware
NodeRef neg(NodeTable& t, const NodeRef& a);
NodeRef mul(NodeTable& t, const NodeRef& a, const NodeRef& b);  // b a primal coefficient
NodeRef div(NodeTable& t, const NodeRef& a, const NodeRef& b);
NodeRef scalar_like(NodeTable& t, const NodeRef& like, double v);  // v broadcast to like's shape and dtype
NodeRef zeros_like(NodeTable& t, const NodeRef& like);
NodeRef zeros(NodeTable& t, const Aval& a);  // zeros of a's dtype and shape, strongly typed
// The tangents tx of operands x with zeros for the null ones; empty when all are null.
std::vector<NodeRef> dense_tangents(NodeTable& t, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx);
// Sums ct down to `shape` over the dims a broadcast_in_dim(dims) added or stretched.
NodeRef unbroadcast(NodeTable& t, const NodeRef& ct, const Shape& shape, const std::vector<std::int64_t>& dims);
}  // namespace ad

}  // namespace tessel
