#include "tracer/build.hpp"

#include <algorithm>
#include <cstring>

#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::build {

namespace {

NodeRef make(NodeTable& t, Op op, std::vector<NodeRef> in, Attrs p, const Aval& declared = {}) {
  std::vector<Aval> avals;
  avals.reserve(in.size());
  for (auto& x : in) avals.push_back(x->aval);
  Aval out = rules(op).infer(avals, p, declared);
  return t.make(op, std::move(in), std::move(out), std::move(p));
}


}  // namespace

NodeRef parameter(NodeTable& t, int index, const Aval& aval) { return make(t, Op::parameter, {}, attr::Parameter{index}, aval); }

NodeRef constant(NodeTable& t, LiteralRef value, bool weak_type) {
  Aval a{value->dtype, value->shape, weak_type};
  return make(t, Op::constant, {}, attr::Constant{std::move(value)}, a);
}

NodeRef scalar(NodeTable& t, DType dtype, double value, bool weak_type) {
  return constant(t, Literal::scalar(dtype, value), weak_type);
}

NodeRef iota(NodeTable& t, DType dtype, const Shape& shape, std::int64_t dim) {
  return make(t, Op::iota, {}, attr::Iota{dim}, Aval{dtype, shape, false});
}

NodeRef unary(NodeTable& t, Op op, const NodeRef& x) {
  TESSEL_CHECK_INTERNAL(op_family(op) == OpFamily::Unary, op_name(op), " is not unary");
  return make(t, op, {x}, attr::None{});
}

NodeRef binary(NodeTable& t, Op op, const NodeRef& a, const NodeRef& b) {
  TESSEL_CHECK_INTERNAL(op_family(op) == OpFamily::Binary || op_family(op) == OpFamily::Compare, op_name(op),
                        " is not binary");
  return make(t, op, {a, b}, attr::None{});
}

NodeRef select(NodeTable& t, const NodeRef& pred, const NodeRef& on_true, const NodeRef& on_false) {
  return make(t, Op::select, {pred, on_true, on_false}, attr::None{});
}

NodeRef convert(NodeTable& t, const NodeRef& x, DType dtype, bool weak_type) {
  if (x->dtype() == dtype && x->aval.weak_type == weak_type) return x;
  return make(t, Op::convert, {x}, attr::None{}, Aval{dtype, {}, weak_type});
}

NodeRef bitcast_convert(NodeTable& t, const NodeRef& x, DType dtype) {
  return make(t, Op::bitcast_convert, {x}, attr::None{}, Aval{dtype, {}, false});
}

NodeRef broadcast_in_dim(NodeTable& t, const NodeRef& x, const Shape& shape, const std::vector<std::int64_t>& dims) {
  if (x->shape() == shape) {
    bool identity = true;
    for (size_t i = 0; i < dims.size(); ++i) identity = identity && dims[i] == std::int64_t(i);
    if (identity && dims.size() == shape.size()) return x;
  }
  return make(t, Op::broadcast_in_dim, {x}, attr::Dimensions{dims}, Aval{x->dtype(), shape, x->aval.weak_type});
}

NodeRef reshape(NodeTable& t, const NodeRef& x, const Shape& shape) {
  if (x->shape() == shape) return x;
  return make(t, Op::reshape, {x}, attr::None{}, Aval{x->dtype(), shape, x->aval.weak_type});
}

NodeRef transpose(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& perm) {
  bool identity = perm.size() == x->shape().size();
  for (size_t i = 0; identity && i < perm.size(); ++i) identity = perm[i] == std::int64_t(i);
  if (identity) return x;
  // The transpose of a dot's result that swaps its lhs-free and rhs-free
  // blocks (batch dims staying in front) is the dot with its operands
  // swapped (XLA's algebraic simplifier does the same): no copy.
  if (x->op == Op::dot_general) {
    const DotDims& d = x->attr<attr::Dot>().dims;
    const std::int64_t nb = std::int64_t(d.lhs_batch.size());
    const std::int64_t nl = x->in[0]->rank() - nb - std::int64_t(d.lhs_contract.size());
    const std::int64_t nr = x->in[1]->rank() - nb - std::int64_t(d.rhs_contract.size());
    std::vector<std::int64_t> swap;
    for (std::int64_t i = 0; i < nb; ++i) swap.push_back(i);
    for (std::int64_t i = 0; i < nr; ++i) swap.push_back(nb + nl + i);
    for (std::int64_t i = 0; i < nl; ++i) swap.push_back(nb + i);
    if (perm == swap) return dot_general(t, x->in[1], x->in[0], {d.rhs_contract, d.lhs_contract, d.rhs_batch, d.lhs_batch});
  }
  return make(t, Op::transpose, {x}, attr::Dimensions{perm});
}

NodeRef rev(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& dims) {
  if (dims.empty()) return x;
  return make(t, Op::rev, {x}, attr::Dimensions{dims});
}

NodeRef slice(NodeTable& t, const NodeRef& x, const std::vector<std::int64_t>& start,
              const std::vector<std::int64_t>& limit, std::vector<std::int64_t> stride) {
  if (stride.empty()) stride.assign(start.size(), 1);
  return make(t, Op::slice, {x}, attr::Slice{start, limit, std::move(stride)});
}

NodeRef pad(NodeTable& t, const NodeRef& x, const NodeRef& value, const std::vector<std::int64_t>& low,
            const std::vector<std::int64_t>& high, std::vector<std::int64_t> interior) {
  if (interior.empty()) interior.assign(low.size(), 0);
  return make(t, Op::pad, {x, value}, attr::Pad{low, high, std::move(interior)});
}

NodeRef concatenate(NodeTable& t, const std::vector<NodeRef>& xs, std::int64_t dim) {
  if (xs.size() == 1) return xs[0];
  return make(t, Op::concatenate, xs, attr::Dimension{dim});
}

NodeRef dynamic_slice(NodeTable& t, const NodeRef& x, const std::vector<NodeRef>& starts, const Shape& sizes) {
  std::vector<NodeRef> in{x};
  in.insert(in.end(), starts.begin(), starts.end());
  return make(t, Op::dynamic_slice, std::move(in), attr::DynamicSlice{sizes});
}

NodeRef dynamic_update_slice(NodeTable& t, const NodeRef& x, const NodeRef& update,
                             const std::vector<NodeRef>& starts) {
  std::vector<NodeRef> in{x, update};
  in.insert(in.end(), starts.begin(), starts.end());
  return make(t, Op::dynamic_update_slice, std::move(in), attr::None{});
}

NodeRef gather(NodeTable& t, const NodeRef& x, const NodeRef& idx, attr::Indexed how) {
  return make(t, Op::gather, {x, idx}, how);
}
NodeRef scatter(NodeTable& t, const NodeRef& x, const NodeRef& idx, const NodeRef& updates, attr::Indexed how) {
  return make(t, Op::scatter, {x, idx, updates}, how);
}

NodeRef reduce(NodeTable& t, Op op, const NodeRef& x, const std::vector<std::int64_t>& axes) {
  TESSEL_CHECK_INTERNAL(op == Op::reduce_sum || op == Op::reduce_max || op == Op::reduce_min || op == Op::reduce_prod);
  if (axes.empty()) return x;
  return make(t, op, {x}, attr::Dimensions{axes});
}

NodeRef arg_reduce(NodeTable& t, Op op, const NodeRef& x, std::int64_t axis, DType index_dtype) {
  TESSEL_CHECK_INTERNAL(op == Op::argmax || op == Op::argmin);
  return make(t, op, {x}, attr::ArgReduce{axis, index_dtype});
}

NodeRef threefry2x32(NodeTable& t, const NodeRef& k0, const NodeRef& k1, const NodeRef& x0, const NodeRef& x1, int word) {
  return make(t, Op::threefry2x32, {k0, k1, x0, x1}, attr::Word{word});
}

NodeRef fft(NodeTable& t, const NodeRef& x, attr::Fft how) { return make(t, Op::fft, {x}, std::move(how)); }
NodeRef conv(NodeTable& t, const NodeRef& lhs, const NodeRef& rhs, attr::Conv how) {
  return make(t, Op::conv, {lhs, rhs}, std::move(how));
}

NodeRef reduce_window(NodeTable& t, Op op, const NodeRef& operand, attr::ReduceWindow how,
                      const std::vector<NodeRef>& row_offsets) {
  std::vector<NodeRef> in{operand};
  in.insert(in.end(), row_offsets.begin(), row_offsets.end());
  return make(t, op, std::move(in), std::move(how));
}
NodeRef window_select(NodeTable& t, const NodeRef& operand, attr::SelectWindow how,
                      const std::vector<NodeRef>& row_offsets) {
  std::vector<NodeRef> in{operand};
  in.insert(in.end(), row_offsets.begin(), row_offsets.end());
  return make(t, Op::window_select, std::move(in), std::move(how));
}
NodeRef select_and_gather_add(NodeTable& t, const NodeRef& tangent, const NodeRef& selection, attr::SelectWindow how) {
  return make(t, Op::select_and_gather_add, {tangent, selection}, std::move(how));
}
NodeRef select_and_scatter_add(NodeTable& t, const NodeRef& source, const NodeRef& selection, attr::SelectWindow how) {
  return make(t, Op::select_and_scatter_add, {source, selection}, std::move(how));
}

NodeRef debug_callback(NodeTable& t, const std::vector<NodeRef>& args, attr::DebugCallback how) {
  return make(t, Op::debug_callback, args, std::move(how));
}

NodeRef linalg(NodeTable& t, Op op, const std::vector<NodeRef>& operands, attr::Linalg how) {
  return make(t, op, operands, how);
}

NodeRef sort(NodeTable& t, const NodeRef& keys, const NodeRef& values, std::int64_t dim) {
  return make(t, Op::sort, {keys, values}, attr::Dimension{dim});
}

NodeRef cumulative(NodeTable& t, Op op, const NodeRef& x, std::int64_t dim, bool reverse) {
  TESSEL_CHECK_INTERNAL(op == Op::cumsum || op == Op::cumprod || op == Op::cummax || op == Op::cummin ||
                            op == Op::cumlogsumexp,
                        op_name(op), " is not a cumulative op");
  return make(t, op, {x}, attr::Cumulative{dim, reverse});
}

NodeRef top_k(NodeTable& t, const NodeRef& x, std::int64_t k) { return make(t, Op::top_k, {x}, attr::TopK{k}); }

NodeRef stop_gradient(NodeTable& t, const NodeRef& x) { return make(t, Op::stop_gradient, {x}, attr::None{}); }

NodeRef dot_general(NodeTable& t, const NodeRef& a, const NodeRef& b, const DotDims& dims) {
  return make(t, Op::dot_general, {a, b}, attr::Dot{dims});
}

NodeRef sharding_constraint(NodeTable& t, const NodeRef& x, const AxisSharding& sharding) {
  return make(t, Op::sharding_constraint, {x}, attr::Constraint{std::make_shared<const AxisSharding>(sharding)});
}

NodeRef all_gather(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t dim) {
  return make(t, Op::all_gather, {x}, attr::AllGather{std::move(mesh), std::move(axes), dim});
}

NodeRef distributed_cholesky(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t rows,
                             std::int64_t panel) {
  return make(t, Op::distributed_cholesky, {x}, attr::RowBlocked{std::move(mesh), std::move(axes), rows, panel, false});
}

NodeRef distributed_lu(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t rows,
                       std::int64_t panel) {
  return make(t, Op::distributed_lu, {x}, attr::RowBlocked{std::move(mesh), std::move(axes), rows, panel, false});
}

NodeRef distributed_triangular_solve(NodeTable& t, const NodeRef& a, const NodeRef& b, MeshRef mesh,
                                     std::vector<int> axes, std::int64_t rows, const attr::Linalg& how) {
  attr::RowBlocked p{std::move(mesh), std::move(axes), rows, std::max<std::int64_t>(a->shape()[0], 1), false};
  p.lower = how.lower;
  p.transpose_a = how.transpose_a;
  p.conjugate_a = how.conjugate_a;
  p.unit_diagonal = how.unit_diagonal;
  return make(t, Op::distributed_triangular_solve, {a, b}, std::move(p));
}

NodeRef all_reduce(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, Op reduce_op) {
  return make(t, Op::all_reduce, {x}, attr::AllReduce{std::move(mesh), std::move(axes), reduce_op});
}

NodeRef reduce_scatter(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t dim,
                       Op reduce_op) {
  return make(t, Op::reduce_scatter, {x}, attr::ReduceScatter{std::move(mesh), std::move(axes), dim, reduce_op});
}

NodeRef all_to_all(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes, std::int64_t split_dim,
                   std::int64_t concat_dim) {
  return make(t, Op::all_to_all, {x}, attr::AllToAll{std::move(mesh), std::move(axes), split_dim, concat_dim});
}

NodeRef collective_permute(NodeTable& t, const NodeRef& x, MeshRef mesh,
                           std::vector<std::pair<std::int64_t, std::int64_t>> pairs) {
  return make(t, Op::collective_permute, {x}, attr::CollectivePermute{std::move(mesh), std::move(pairs)});
}

NodeRef pvary(NodeTable& t, const NodeRef& x, MeshRef mesh, std::vector<int> axes) {
  if (axes.empty()) return x;
  return make(t, Op::pvary, {x}, attr::AxisIndex{std::move(mesh), std::move(axes)});
}

NodeRef axis_index(NodeTable& t, MeshRef mesh, std::vector<int> axes) {
  return make(t, Op::axis_index, {}, attr::AxisIndex{std::move(mesh), std::move(axes)}, Aval{DType::int32, {}, false});
}

NodeRef tuple(NodeTable& t, const std::vector<NodeRef>& xs) { return make(t, Op::tuple, xs, attr::None{}); }

NodeRef get_tuple_element(NodeTable& t, const NodeRef& x, std::int64_t index) {
  if (x->op == Op::tuple && index >= 0 && index < std::int64_t(x->in.size())) return x->in[size_t(index)];
  return make(t, Op::get_tuple_element, {x}, attr::TupleIndex{index});
}

NodeRef call(NodeTable& t, GraphRef body, const std::vector<NodeRef>& args) {
  return make(t, Op::call, args, attr::Call{std::move(body)});
}
NodeRef custom_jvp_call(NodeTable& t, attr::CustomJvp a, const std::vector<NodeRef>& args) {
  return make(t, Op::custom_jvp_call, args, std::move(a));
}
NodeRef custom_vjp_call(NodeTable& t, attr::CustomVjp a, const std::vector<NodeRef>& args) {
  return make(t, Op::custom_vjp_call, args, std::move(a));
}
NodeRef custom_lin(NodeTable& t, attr::CustomLin a, const std::vector<NodeRef>& args) {
  return make(t, Op::custom_lin, args, std::move(a));
}
NodeRef remat_call(NodeTable& t, attr::Remat a, const std::vector<NodeRef>& args) {
  return make(t, Op::remat_call, args, std::move(a));
}
NodeRef remat_lin(NodeTable& t, attr::RematLin a, const std::vector<NodeRef>& args) {
  return make(t, Op::remat_lin, args, std::move(a));
}
NodeRef remat_barrier(NodeTable& t, const NodeRef& x, const NodeRef& after) {
  return make(t, Op::remat_barrier, {x, after}, attr::None{});
}
NodeRef host_call(NodeTable& t, const std::vector<NodeRef>& args, attr::HostCall a) {
  return make(t, Op::host_call, args, std::move(a));
}
NodeRef checkpoint_name(NodeTable& t, const NodeRef& x, std::string name) {
  return make(t, Op::checkpoint_name, {x}, attr::Name{std::move(name)});
}

NodeRef shard_map(NodeTable& t, attr::ShardMap sm, const std::vector<NodeRef>& args) {
  return make(t, Op::shard_map, args, std::move(sm));
}

NodeRef cond(NodeTable& t, const NodeRef& index, std::vector<GraphRef> branches, const std::vector<NodeRef>& operands) {
  std::vector<NodeRef> in{index};
  in.insert(in.end(), operands.begin(), operands.end());
  return make(t, Op::cond, std::move(in), attr::Cond{std::move(branches)});
}

NodeRef while_loop(NodeTable& t, attr::While w, const std::vector<NodeRef>& operands) {
  return make(t, Op::while_, operands, std::move(w));
}

NodeRef scan(NodeTable& t, attr::Scan s, const std::vector<NodeRef>& operands) {
  return make(t, Op::scan, operands, std::move(s));
}

std::vector<NodeRef> results(NodeTable& t, const NodeRef& x) {
  if (!x->aval.tuple) return {x};
  std::vector<NodeRef> out;
  for (size_t i = 0; i < x->aval.elements.size(); ++i) out.push_back(get_tuple_element(t, x, std::int64_t(i)));
  return out;
}

NodeRef with_operands(NodeTable& t, const Node& n, std::vector<NodeRef> in) {
  return make(t, n.op, std::move(in), n.attrs, n.aval);
}

}  // namespace tessel::build
