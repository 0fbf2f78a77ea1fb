// Builders: the only way nodes are made. Each checks its operands with the
// op's shape rule (tracer/rules.hpp) where the node is built, so every later
// pass can trust the IR, and interns the node in a NodeTable.
#pragma once

#include <optional>
#include <vector>

#include "tracer/ir.hpp"

namespace tessel::build {

NodeRef parameter(NodeTable& t, int index, const Aval& aval);
NodeRef constant(NodeTable& t, LiteralRef value, bool weak_type = false);
NodeRef scalar(NodeTable& t, DType dtype, double value, bool weak_type = false);
NodeRef iota(NodeTable& t, DType dtype, const Shape& shape, std::int64_t dim);

NodeRef unary(NodeTable& t, Op op, const NodeRef& x);
NodeRef binary(NodeTable& t, Op op, const NodeRef& a, const NodeRef& b);  // elementwise and compare
NodeRef select(NodeTable& t, const NodeRef& pred, const NodeRef& on_true, const NodeRef& on_false);
NodeRef convert(NodeTable& t, const NodeRef& x, DType dtype, bool weak_type = false);
NodeRef bitcast_convert(NodeTable& t, const NodeRef& x, DType dtype);

NodeRef broadcast_in_dim(NodeTable& t, const NodeRef& x, const Shape& shape, const std::vector<std::int64_t>& dims);
NodeRef reshape(NodeTable& t, const NodeRef& x, const Shape& shape);
NodeRef transpose(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& perm);
NodeRef rev(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& dims);
NodeRef slice(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& start,
              const std::vector<std::int64_t>& limit, std::vector<std::int64_t> stride = {});
NodeRef pad(NodeTable& t, const NodeRef& x, const NodeRef& value, const std::vector<std::int64_t>& low,
            const std::vector<std::int64_t>& high, std::vector<std::int64_t> interior = {});
NodeRef concatenate(NodeTable& t, const std::vector<NodeRef>& xs, std::int64_t dim);
NodeRef dynamic_slice(NodeTable& t, const NodeRef& x, const std::vector<NodeRef>& starts, const Shape& sizes);
NodeRef dynamic_update_slice(NodeTable& t, const NodeRef& x, const NodeRef& update,
                             const std::vector<NodeRef>& starts);

// op: reduce_sum, reduce_max, reduce_min or reduce_prod.
NodeRef reduce(NodeTable& t, Op op, const NodeRef& x, const std::vector<std::int64_t>& axes);
// op: argmax or argmin.
NodeRef arg_reduce(NodeTable& t, Op op, const NodeRef& x, std::int64_t axis, DType index_dtype);
// Word `word` (0 or 1) of Threefry-2x32 of counts (x0, x1) under key (k0, k1).
NodeRef threefry2x32(NodeTable& t, const NodeRef& k0, const NodeRef& k1, const NodeRef& x0, const NodeRef& x1, int word);
// x indexed along an axis by an integer array (attr::Indexed): a gather, and
// a scatter of `updates` into x.
NodeRef gather(NodeTable& t, const NodeRef& x, const NodeRef& idx, attr::Indexed how);
NodeRef scatter(NodeTable& t, const NodeRef& x, const NodeRef& idx, const NodeRef& updates, attr::Indexed how);
// values reordered by a stable sort of keys along dim.
NodeRef sort(NodeTable& t, const NodeRef& keys, const NodeRef& values, std::int64_t dim);
// cumsum, cumprod, cummax, cummin or cumlogsumexp of x along dim.
NodeRef cumulative(NodeTable& t, Op op, const NodeRef& x, std::int64_t dim, bool reverse);
// (values, int32 indices) of the k largest elements along x's last dim.
NodeRef top_k(NodeTable& t, const NodeRef& x, std::int64_t k);
// x, with a zero tangent (lax.stop_gradient).
NodeRef stop_gradient(NodeTable& t, const NodeRef& x);
NodeRef dot_general(NodeTable& t, const NodeRef& a, const NodeRef& b, const DotDims& dims);
// Linear algebra (attr::Linalg): one result for cholesky and
// triangular_solve, a tuple for lu, qr, eigh and svd.
NodeRef linalg(NodeTable& t, Op op, const std::vector<NodeRef>& operands, attr::Linalg how = {});
// A Fourier transform of x over how.axes (attr::Fft).
NodeRef fft(NodeTable& t, const NodeRef& x, attr::Fft how);
NodeRef conv(NodeTable& t, const NodeRef& lhs, const NodeRef& rhs, attr::Conv how);
// The max (min) pooling's derivative (attr::SelectWindow): each window's
// selected tap of the operand (int8, -1 for none); the tangent at each
// window's selected element; its transpose, the source added there.
// Pooling (attr::ReduceWindow): op one of reduce_window_sum, _max, _min.
NodeRef reduce_window(NodeTable& t, Op op, const NodeRef& operand, attr::ReduceWindow how,
                      const std::vector<NodeRef>& row_offsets = {});
NodeRef window_select(NodeTable& t, const NodeRef& operand, attr::SelectWindow how,
                      const std::vector<NodeRef>& row_offsets = {});
NodeRef select_and_gather_add(NodeTable& t, const NodeRef& tangent, const NodeRef& selection, attr::SelectWindow how);
NodeRef select_and_scatter_add(NodeTable& t, const NodeRef& source, const NodeRef& selection, attr::SelectWindow how);
// A call of a host function at run time with args' values (a bool[] token).
NodeRef debug_callback(NodeTable& t, const std::vector<NodeRef>& args, attr::DebugCallback how);

NodeRef sharding_constraint(NodeTable& t, const NodeRef& x, const AxisSharding& sharding);

// Collectives over `axes` of `mesh` (per-device shapes).
NodeRef all_gather(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t dim);
// This device's rows [ceil(rows / tiles), n] of a matrix split by rows over
// axes: a tuple of its rows of lu's factors, the pivots and the permutation.
NodeRef distributed_lu(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t rows,
                       std::int64_t panel);
// This device's rows of the Cholesky factor L of a rows x rows matrix split by rows over axes.
NodeRef distributed_cholesky(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t rows,
                             std::int64_t panel);
// x [rows, k] (the same on every device) solving op(a) x = b from the left,
// for this device's rows [ceil(rows / tiles), rows] of a triangular a split
// by rows over axes: how.lower, transpose_a, conjugate_a, unit_diagonal.
NodeRef distributed_triangular_solve(NodeTable& t, const NodeRef& a, const NodeRef& b, MeshRef mesh,
                                     std::vector<int> axes, std::int64_t rows, const attr::Linalg& how);
NodeRef all_reduce(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, Op reduce_op);
NodeRef reduce_scatter(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t dim,
                       Op reduce_op);
NodeRef all_to_all(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t split_dim,
                   std::int64_t concat_dim);
NodeRef collective_permute(NodeTable& t, const NodeRef& x, MeshRef mesh,
                           std::vector<std::pair<std::int64_t, std::int64_t>> pairs);

// x, typed as varying over `axes` of `mesh` (a shard_map body's typing; the
// value is unchanged). Its transpose is a psum over them.
NodeRef pvary(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes);

// This device's coordinate along `axes` of `mesh` (int32 scalar).
NodeRef axis_index(NodeTable& t, MeshRef mesh, std::vector<int> axes);

// Several values as one (a tuple aval), and element i of a tuple (of a
// `tuple` node: that operand itself, as XLA's simplifier folds it).
NodeRef tuple(NodeTable& t, const std::vector<NodeRef>& xs);
NodeRef get_tuple_element(NodeTable& t, const NodeRef& x, std::int64_t index);
// body applied to args: its one result, or a tuple of its results.
NodeRef call(NodeTable& t, GraphRef body, const std::vector<NodeRef>& args);
// Calls with custom derivative rules (tracer/attrs.hpp: CustomJvp, CustomVjp, CustomLin).
NodeRef custom_jvp_call(NodeTable& t, attr::CustomJvp a, const std::vector<NodeRef>& args);
NodeRef custom_vjp_call(NodeTable& t, attr::CustomVjp a, const std::vector<NodeRef>& args);
NodeRef custom_lin(NodeTable& t, attr::CustomLin a, const std::vector<NodeRef>& args);
// Rematerialization (tracer/attrs.hpp: Remat, RematLin, Name): the call, its
// tangent, the barrier ordering a recomputation after `after` (x itself),
// and a named value.
NodeRef remat_call(NodeTable& t, attr::Remat a, const std::vector<NodeRef>& args);
NodeRef remat_lin(NodeTable& t, attr::RematLin a, const std::vector<NodeRef>& args);
NodeRef remat_barrier(NodeTable& t, const NodeRef& x, const NodeRef& after);
NodeRef checkpoint_name(NodeTable& t, const NodeRef& x, std::string name);
// A host function's call (tracer/attrs.hpp: HostCall): its results as a tuple when it has other than one.
NodeRef host_call(NodeTable& t, const std::vector<NodeRef>& args, attr::HostCall a);
// f over `mesh` on blocks (tracer/attrs.hpp, attr::ShardMap).
NodeRef shard_map(NodeTable& t, attr::ShardMap sm, const std::vector<NodeRef>& args);
// Control flow (tracer/attrs.hpp: attr::Cond, attr::While, attr::Scan);
// each returns a tuple of its results, even of one.
NodeRef cond(NodeTable& t, const NodeRef& index, std::vector<GraphRef> branches, const std::vector<NodeRef>& operands);
NodeRef while_loop(NodeTable& t, attr::While w, const std::vector<NodeRef>& operands);
NodeRef scan(NodeTable& t, attr::Scan s, const std::vector<NodeRef>& operands);
// A node's results as values: itself, or each element of its tuple.
std::vector<NodeRef> results(NodeTable& t, const NodeRef& x);

// Rebuilds node n with new operands (same op and params) in table t.
NodeRef with_operands(NodeTable& t, const Node& n, std::vector<NodeRef> in);

}  // namespace tessel::build
