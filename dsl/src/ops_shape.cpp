// Shape operations, tril/triu, lax.iota and dynamic slices; indexing (x.index(), x.at[...]): ops_indexing.cpp.
#include <algorithm>

#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tracer/linalg_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/promotion.hpp"

namespace tessel {

using detail::apply1;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;

Array reshape(const Array& x, Shape shape) {
  const std::int64_t n = x.size();
  int infer = -1;
  std::int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ShapeError("reshape: can only specify one unknown dimension, got " + shape_str(shape));
      infer = int(i);
    } else if (shape[i] < 0) {
      throw ShapeError("reshape: negative dimensions are not allowed (other than one -1), got " + shape_str(shape) +
                       " for an array of shape " + shape_str(x.shape()));
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      throw ShapeError("cannot reshape array of shape " + shape_str(x.shape()) + " (size " + std::to_string(n) +
                       ") into shape " + shape_str(shape) + ": its size overflows an int64");
    }
  }
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      throw ShapeError("cannot reshape array of shape " + shape_str(x.shape()) + " (size " + std::to_string(n) +
                       ") into shape " + shape_str(shape));
    shape[infer] = n / known;
  }
  return apply1("tessel.reshape", {x}, [shape](NodeTable& t, const NR& in) { return build::reshape(t, in[0], shape); });
}

Array ravel(const Array& x) { return reshape(x, {x.size()}); }

Array transpose(const Array& x, std::vector<int> perm) {
  if (perm.empty())
    for (int i = x.ndim() - 1; i >= 0; --i) perm.push_back(i);
  std::vector<std::int64_t> p;
  for (int a : perm) p.push_back(c::norm_axis(a, x.ndim(), "tessel.transpose"));
  return apply1("tessel.transpose", {x}, [p](NodeTable& t, const NR& in) { return build::transpose(t, in[0], p); });
}

Array broadcast_to(const Array& x, const Shape& shape) {
  return apply1("tessel.broadcast_to", {x}, [shape](NodeTable& t, const NR& in) { return c::broadcast_to(t, in[0], shape); });
}

Array expand_dims(const Array& x, Axes axis) {
  const int out_rank = x.ndim() + int(axis.all() ? 0 : axis.list().size());
  auto axes = c::norm_axes(axis, out_rank, "tessel.expand_dims");
  Shape s;
  for (int i = 0, k = 0; i < out_rank; ++i)
    s.push_back(std::find(axes.begin(), axes.end(), i) != axes.end() ? 1 : x.shape()[k++]);
  return reshape(x, s);
}

Array squeeze(const Array& x, Axes axis) {
  std::vector<std::int64_t> axes;
  if (axis.all()) {
    for (int i = 0; i < x.ndim(); ++i)
      if (x.shape()[i] == 1) axes.push_back(i);
  } else {
    axes = c::norm_axes(axis, x.ndim(), "tessel.squeeze");
    for (auto a : axes)
      if (x.shape()[a] != 1)
        throw ShapeError("squeeze: axis " + std::to_string(a) + " of shape " + shape_str(x.shape()) + " is not of size 1");
  }
  Shape s;
  for (int i = 0; i < x.ndim(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) s.push_back(x.shape()[i]);
  return reshape(x, s);
}

Array concatenate(const std::vector<Array>& xs, int axis) {
  if (xs.empty()) throw ValueError("concatenate: need at least one array to concatenate");
  return apply1("tessel.concatenate", xs, [axis](NodeTable& t, const NR& in) {
    // Promote dtypes only (shapes must agree off the axis).
    NR v = in;
    PromotedType pt{v[0]->dtype(), v[0]->aval.weak_type};
    for (size_t i = 1; i < v.size(); ++i) pt = promote_types(pt.dtype, pt.weak, v[i]->dtype(), v[i]->aval.weak_type);
    for (auto& x : v) x = c::cast(t, x, pt.dtype, pt.weak);
    return build::concatenate(t, v, c::norm_axis(axis, v[0]->rank(), "tessel.concatenate"));
  });
}

Array stack(const std::vector<Array>& xs, int axis) {
  if (xs.empty()) throw ValueError("stack: need at least one array to stack");
  std::vector<Array> e;
  for (auto& x : xs) {
    if (x.shape() != xs[0].shape())
      throw ShapeError("stack: all arrays must have the same shape, got " + shape_str(xs[0].shape()) + " and " +
                       shape_str(x.shape()));
    e.push_back(expand_dims(x, axis));
  }
  return concatenate(e, axis);
}

std::vector<Array> split(const Array& x, const std::vector<std::int64_t>& indices, int axis) {
  const std::int64_t ax = c::norm_axis(axis, x.ndim(), "tessel.split");
  std::vector<std::int64_t> cuts{0};
  for (auto i : indices) {
    // As JAX (its pieces' sizes, the differences of the cuts, must not be
    // negative); NumPy would clamp a decreasing cut into an empty piece.
    if (i < cuts.back())
      throw ValueError("split: indices must not decrease, got " + std::to_string(i) + " after " +
                       std::to_string(cuts.back()) + " (a piece of negative size)");
    cuts.push_back(std::min<std::int64_t>(i, x.shape()[ax]));
  }
  cuts.push_back(x.shape()[ax]);
  std::vector<Array> out;
  for (size_t k = 0; k + 1 < cuts.size(); ++k) {
    std::int64_t lo = cuts[k], hi = cuts[k + 1];
    out.push_back(apply1("tessel.split", {x}, [=](NodeTable& t, const NR& in) {
      std::vector<std::int64_t> a(in[0]->rank(), 0), b = in[0]->shape();
      a[ax] = lo;
      b[ax] = hi;
      return build::slice(t, in[0], a, b);
    }));
  }
  return out;
}

std::vector<Array> split(const Array& x, int sections, int axis) {
  const std::int64_t ax = c::norm_axis(axis, x.ndim(), "tessel.split");
  if (sections <= 0)
    throw ValueError("split: number of sections must be larger than 0, got " + std::to_string(sections));
  if (x.shape()[ax] % sections != 0)
    throw ShapeError("split: array split does not result in an equal division: " + std::to_string(x.shape()[ax]) +
                     " into " + std::to_string(sections) + " sections");
  std::vector<std::int64_t> idx;
  for (int k = 1; k < sections; ++k) idx.push_back(k * (x.shape()[ax] / sections));
  return split(x, idx, axis);
}

Array pad(const Array& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, double value) {
  if (widths.size() != size_t(x.ndim()) && widths.size() != 1)
    throw ShapeError("pad: " + std::to_string(widths.size()) + " widths for an array of rank " + std::to_string(x.ndim()));
  return apply1("tessel.pad", {x}, [=](NodeTable& t, const NR& in) {
    std::vector<std::int64_t> lo, hi;
    for (int d = 0; d < in[0]->rank(); ++d) {
      auto w = widths.size() == 1 ? widths[0] : widths[d];
      if (w.first < 0 || w.second < 0)
        throw ShapeError("pad: widths must be non-negative, got (" + std::to_string(w.first) + ", " +
                         std::to_string(w.second) + ") for dimension " + std::to_string(d) + " of shape " +
                         shape_str(in[0]->shape()));
      lo.push_back(w.first);
      hi.push_back(w.second);
    }
    return build::pad(t, in[0], build::scalar(t, in[0]->dtype(), value), lo, hi);
  });
}

Array flip(const Array& x, Axes axis) {
  auto axes = c::norm_axes(axis, x.ndim(), "tessel.flip");
  return apply1("tessel.flip", {x}, [axes](NodeTable& t, const NR& in) { return build::rev(t, in[0], axes); });
}

Array swapaxes(const Array& x, int axis1, int axis2) {
  const std::int64_t a = c::norm_axis(axis1, x.ndim(), "tessel.swapaxes"), b = c::norm_axis(axis2, x.ndim(), "tessel.swapaxes");
  return apply1("tessel.swapaxes", {x}, [a, b](NodeTable& t, const NR& in) {
    std::vector<std::int64_t> perm(size_t(in[0]->rank()));
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = std::int64_t(i);
    std::swap(perm[size_t(a)], perm[size_t(b)]);
    return build::transpose(t, in[0], perm);
  });
}

namespace {
Array triangle(const Array& x, int k, bool lower, const char* what) {
  if (x.ndim() < 2)
    throw ShapeError(detail::cat(what, ": x must have at least 2 dimensions, got shape ", shape_str(x.shape())));
  return apply1(what, {x}, [=](NodeTable& t, const NR& in) {
    return lower ? la::tril(t, in[0], k) : la::triu(t, in[0], k);
  });
}
}  // namespace
Array tril(const Array& x, int k) { return triangle(x, k, true, "tessel.tril"); }
Array triu(const Array& x, int k) { return triangle(x, k, false, "tessel.triu"); }

Array copy(const Array& x) {
  return apply1("tessel.copy", {x}, [](NodeTable&, const NR& in) { return in[0]; });
}

namespace lax {
Array iota(DType dtype, std::int64_t size) {
  return apply1("lax.iota", {}, [=](NodeTable& t, const NR&) { return build::iota(t, dtype, {size}, 0); });
}
Array broadcasted_iota(DType dtype, const Shape& shape, int dimension) {
  return apply1("lax.broadcasted_iota", {}, [=](NodeTable& t, const NR&) {
    return build::iota(t, dtype, shape, c::norm_axis(dimension, int(shape.size()), "lax.broadcasted_iota"));
  });
}
Array dynamic_slice(const Array& x, const std::vector<Array>& starts, const Shape& sizes) {
  std::vector<Array> in{x};
  in.insert(in.end(), starts.begin(), starts.end());
  return apply1("lax.dynamic_slice", in, [sizes](NodeTable& t, const NR& v) {
    return build::dynamic_slice(t, v[0], NR(v.begin() + 1, v.end()), sizes);
  });
}
Array dynamic_update_slice(const Array& x, const Array& update, const std::vector<Array>& starts) {
  std::vector<Array> in{x, update};
  in.insert(in.end(), starts.begin(), starts.end());
  return apply1("lax.dynamic_update_slice", in, [](NodeTable& t, const NR& v) {
    // As lax: the update must have the operand's dtype (a weakly typed scalar takes it).
    NodeRef u = v[1];
    if (u->aval.weak_type) u = c::cast(t, u, v[0]->dtype(), v[0]->aval.weak_type);
    return build::dynamic_update_slice(t, v[0], u,
                                       NR(v.begin() + 2, v.end()));
  });
}
Array rev(const Array& x, const std::vector<int>& dims) { return flip(x, Axes(dims)); }
}  // namespace lax

Array Array::T() const { return transpose(*this); }
Array Array::reshape(Shape shape) const { return tessel::reshape(*this, std::move(shape)); }

}  // namespace tessel
