#include "dsl/src/compose.hpp"

#include <algorithm>
#include <set>

#include "tessel/core/errors.hpp"
#include "tracer/promotion.hpp"

namespace tessel::detail::compose {

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    std::int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    std::int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (x != y && x != 1 && y != 1)
      throw ShapeError(what + ": shapes " + shape_str(a) + " and " + shape_str(b) + " cannot be broadcast together");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

NodeRef broadcast_to(NodeTable& t, const NodeRef& x, const Shape& shape, const std::string& what) {
  const Shape& s = x->shape();
  if (s == shape) return x;
  if (s.size() > shape.size()) throw ShapeError(what + ": cannot broadcast shape " + shape_str(s) + " to " + shape_str(shape));
  std::vector<std::int64_t> dims;
  const size_t off = shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != 1 && s[i] != shape[off + i])
      throw ShapeError(what + ": cannot broadcast shape " + shape_str(s) + " to " + shape_str(shape));
    dims.push_back(std::int64_t(off + i));
  }
  return build::broadcast_in_dim(t, x, shape, dims);
}

NodeRef cast(NodeTable& t, const NodeRef& x, DType dtype, bool weak) { return build::convert(t, x, dtype, weak); }

std::vector<NodeRef> promote(NodeTable& t, std::vector<NodeRef> xs, const std::string& what) {
  if (xs.empty()) return xs;
  PromotedType pt{xs[0]->dtype(), xs[0]->aval.weak_type};
  Shape shape = xs[0]->shape();
  for (size_t i = 1; i < xs.size(); ++i) {
    pt = promote_types(pt.dtype, pt.weak, xs[i]->dtype(), xs[i]->aval.weak_type);
    shape = broadcast_shapes(shape, xs[i]->shape(), what);
  }
  for (auto& x : xs) x = broadcast_to(t, cast(t, x, pt.dtype, pt.weak), shape, what);
  return xs;
}

NodeRef to_inexact(NodeTable& t, const NodeRef& x) {
  if (is_inexact(x->dtype())) return x;
  return cast(t, x, DType::float32, x->aval.weak_type);
}

NodeRef full_like(NodeTable& t, const NodeRef& x, double v) {
  return build::broadcast_in_dim(t, build::scalar(t, x->dtype(), v, x->aval.weak_type), x->shape(), {});
}

NodeRef binary(NodeTable& t, Op op, const NodeRef& a, const NodeRef& b, const std::string& what) {
  auto v = promote(t, {a, b}, what);
  return build::binary(t, op, v[0], v[1]);
}

std::int64_t norm_axis(int axis, int rank, const std::string& what) {
  if (axis < -rank || axis >= rank)
    throw ShapeError(what + ": axis " + std::to_string(axis) + " is out of bounds for an array of rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<std::int64_t> norm_axes(const Axes& axis, int rank, const std::string& what) {
  std::vector<std::int64_t> out;
  if (axis.all()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  std::set<std::int64_t> seen;
  for (int a : axis.list()) {
    std::int64_t n = norm_axis(a, rank, what);
    if (!seen.insert(n).second) throw ShapeError(what + ": repeated axis " + std::to_string(a));
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

NodeRef reduce(NodeTable& t, Op op, const NodeRef& x, const std::vector<std::int64_t>& axes, bool keepdims) {
  NodeRef r = build::reduce(t, op, x, axes);
  if (!keepdims) return r;
  Shape kept = x->shape();
  for (auto a : axes) kept[a] = 1;
  return build::reshape(t, r, kept);
}

}  // namespace tessel::detail::compose
