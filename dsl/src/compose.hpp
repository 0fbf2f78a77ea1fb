// NumPy semantics at the level of IR nodes: broadcasting, dtype promotion,
// axis normalisation. The DSL's ops are written with these inside apply().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <tessel/ops.hpp>

#include "tracer/build.hpp"

namespace tessel::detail::compose {

// NumPy's broadcast of two shapes; ShapeError naming both when they clash.
Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& what);
// x broadcast (right-aligned) to `shape`.
NodeRef broadcast_to(NodeTable& t, const NodeRef& x, const Shape& shape, const std::string& what = "broadcast_to");
NodeRef cast(NodeTable& t, const NodeRef& x, DType dtype, bool weak);
// Promotes dtypes (JAX's lattice) and broadcasts shapes of all operands.
std::vector<NodeRef> promote(NodeTable& t, std::vector<NodeRef> xs, const std::string& what);
// Integers and booleans to float32 (weakness kept), floats unchanged.
NodeRef to_inexact(NodeTable& t, const NodeRef& x);
// A scalar of x's dtype broadcast to x's shape.
NodeRef full_like(NodeTable& t, const NodeRef& x, double v);
// Elementwise op after promotion and broadcasting.
NodeRef binary(NodeTable& t, Op op, const NodeRef& a, const NodeRef& b, const std::string& what);
// Axes in [0, rank): negatives wrapped, default all, repeats and range checked.
std::vector<std::int64_t> norm_axes(const Axes& axis, int rank, const std::string& what);
std::int64_t norm_axis(int axis, int rank, const std::string& what);
// Reduction with keepdims.
NodeRef reduce(NodeTable& t, Op op, const NodeRef& x, const std::vector<std::int64_t>& axes, bool keepdims);

}  // namespace tessel::detail::compose
