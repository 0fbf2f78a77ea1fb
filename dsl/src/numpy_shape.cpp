// jax.numpy's shape helpers (dsl/tessel/numpy.hpp) and x[i]: compositions
// of slices, concatenations, broadcasts and reshapes, so a sharded operand
// moves only what the partitioner's rules for those move.
#include <numeric>

#include <tessel/numpy.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::staged;
constexpr auto norm = detail::axis_in;
namespace c = detail::compose;
using V = std::vector<Array>;


Array Array::operator[](const IndexItem& item) const { return this->index(std::vector<IndexItem>{item}); }

Array roll(const Array& x, std::int64_t shift, std::optional<int> axis) {
  if (!axis) return reshape(roll(ravel(x), shift, 0), x.shape());
  const int a = norm(*axis, x.ndim(), "roll");
  const std::int64_t n = x.shape()[std::size_t(a)];
  if (n == 0) return x;
  const std::int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  return staged("tessel.roll", {x}, [=](const V& v) {
    return concatenate({detail::along(v[0], a, n - s, n), detail::along(v[0], a, 0, n - s)}, a);
  });
}

Array diff(const Array& x, int n, int axis) {
  if (n < 0) throw ValueError("diff: order must be non-negative but got " + std::to_string(n));
  if (x.ndim() == 0) throw ValueError("diff requires input that is at least one dimensional");
  const int a = norm(axis, x.ndim(), "diff");
  if (n == 0) return x;
  return staged("tessel.diff", {x}, [=](const V& v) {
    Array r = v[0];
    for (int k = 0; k < n; ++k) {
      const std::int64_t len = r.shape()[std::size_t(a)];
      if (len == 0) break;
      Array hi = detail::along(r, a, 1, len), lo = detail::along(r, a, 0, len - 1);
      r = r.dtype() == DType::bool_ ? not_equal(hi, lo) : hi - lo;
    }
    return r;
  });
}

Array repeat(const Array& x, std::int64_t repeats, std::optional<int> axis) {
  if (repeats < 0) throw ValueError("repeat: repeats may not be negative, got " + std::to_string(repeats));
  if (!axis) return repeat(ravel(x), repeats, 0);
  const int a = norm(*axis, x.ndim(), "repeat");
  return staged("tessel.repeat", {x}, [=](const V& v) {
    Shape wide = v[0].shape();
    wide.insert(wide.begin() + a + 1, repeats);
    Shape out = v[0].shape();
    out[std::size_t(a)] *= repeats;
    return reshape(broadcast_to(expand_dims(v[0], a + 1), wide), out);
  });
}

Array tile(const Array& x, const std::vector<std::int64_t>& reps_in) {
  for (auto r : reps_in)
    if (r < 0) throw ValueError("tile: reps may not be negative");
  std::vector<std::int64_t> reps = reps_in;
  Shape s = x.shape();
  while (reps.size() < s.size()) reps.insert(reps.begin(), 1);
  while (s.size() < reps.size()) s.insert(s.begin(), 1);
  return staged("tessel.tile", {x}, [=](const V& v) {
    Shape spread, wide, out;
    for (size_t d = 0; d < s.size(); ++d) {
      spread.push_back(1);
      spread.push_back(s[d]);
      wide.push_back(reps[d]);
      wide.push_back(s[d]);
      out.push_back(reps[d] * s[d]);
    }
    return reshape(broadcast_to(reshape(v[0], spread), wide), out);
  });
}

std::vector<Array> meshgrid(const std::vector<Array>& xs, const std::string& indexing) {
  if (indexing != "xy" && indexing != "ij")
    throw ValueError("meshgrid: indexing must be 'xy' or 'ij', got '" + indexing + "'");
  const std::size_t n = xs.size();
  for (auto& x : xs)
    if (x.ndim() != 1) {
      std::string shapes;
      for (auto& y : xs) shapes += (shapes.empty() ? "" : ", ") + shape_str(y.shape());
      throw ValueError("Arguments to meshgrid must be 1D, got shapes [" + shapes + "]");
    }
  Shape shape;
  for (auto& x : xs) shape.push_back(x.size());
  if (indexing == "xy" && n >= 2) std::swap(shape[0], shape[1]);
  std::vector<Array> out;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t at = i;
    if (indexing == "xy" && n >= 2 && i < 2) at = 1 - i;
    Shape s(n, 1);
    s[at] = xs[i].size();
    out.push_back(broadcast_to(reshape(ravel(xs[i]), s), shape));
  }
  return out;
}

Array diagonal(const Array& x, int offset, int axis1, int axis2) {
  if (x.ndim() < 2) throw ValueError("diagonal requires an array of at least two dimensions, got " + aval_str(x.dtype(), x.shape()));
  const int a1 = norm(axis1, x.ndim(), "diagonal"), a2 = norm(axis2, x.ndim(), "diagonal");
  if (a1 == a2) throw ValueError("diagonal: axis1 and axis2 cannot be the same");
  return staged("tessel.diagonal", {x}, [=](const V& v) {
    std::vector<int> perm;
    for (int d = 0; d < v[0].ndim(); ++d)
      if (d != a1 && d != a2) perm.push_back(d);
    perm.push_back(a1);
    perm.push_back(a2);
    Array m = transpose(v[0], perm);  // [..., rows, cols]
    const std::int64_t rows = m.shape()[m.shape().size() - 2], cols = m.shape().back();
    const std::int64_t r0 = offset < 0 ? -offset : 0, c0 = offset > 0 ? offset : 0;
    const std::int64_t len = std::max<std::int64_t>(0, std::min(rows - r0, cols - c0));
    Shape batch(m.shape().begin(), m.shape().end() - 2);
    // Rows r0 .. r0+len, then in each row the column c0 + i.
    m = detail::along(m, m.ndim() - 2, r0, r0 + len);
    Shape ishape = batch;
    ishape.push_back(len);
    ishape.push_back(1);
    Array idx = broadcast_to(reshape(arange(0, len, 1, DType::int32) + int(c0), {len, 1}), ishape);
    Array d = take_along_axis(m, idx, -1, "clip");
    return squeeze(d, -1);
  });
}

Array diag(const Array& x, int k) {
  if (x.ndim() == 2) return diagonal(x, k);
  if (x.ndim() != 1) throw ValueError("diag: the input must be 1- or 2-D, got " + aval_str(x.dtype(), x.shape()));
  return staged("tessel.diag", {x}, [=](const V& v) {
    const std::int64_t len = v[0].shape()[0], kk = k < 0 ? -k : k, n = len + kk;
    Array p = pad(v[0], {{0, kk}});
    Array row = lax::broadcasted_iota(DType::int32, {n, n}, 0), col = lax::broadcasted_iota(DType::int32, {n, n}, 1);
    Array vals = k >= 0 ? broadcast_to(reshape(p, {n, 1}), {n, n}) : broadcast_to(reshape(p, {1, n}), {n, n});
    return where(col - row == k, vals, zeros_like(vals));
  });
}

Array trace(const Array& x, int offset, int axis1, int axis2) { return sum(diagonal(x, offset, axis1, axis2), -1); }

Array atleast_1d(const Array& x) { return x.ndim() >= 1 ? x : reshape(x, {1}); }
Array atleast_2d(const Array& x) {
  if (x.ndim() >= 2) return x;
  return x.ndim() == 0 ? reshape(x, {1, 1}) : reshape(x, {1, x.shape()[0]});
}
Array atleast_3d(const Array& x) {
  if (x.ndim() >= 3) return x;
  if (x.ndim() == 0) return reshape(x, {1, 1, 1});
  if (x.ndim() == 1) return reshape(x, {1, x.shape()[0], 1});
  return reshape(x, {x.shape()[0], x.shape()[1], 1});
}
Array hstack(const std::vector<Array>& xs) {
  std::vector<Array> v;
  for (auto& x : xs) v.push_back(atleast_1d(x));
  return concatenate(v, !v.empty() && v[0].ndim() == 1 ? 0 : 1);
}
Array vstack(const std::vector<Array>& xs) {
  std::vector<Array> v;
  for (auto& x : xs) v.push_back(atleast_2d(x));
  return concatenate(v, 0);
}
Array row_stack(const std::vector<Array>& xs) { return vstack(xs); }
Array dstack(const std::vector<Array>& xs) {
  std::vector<Array> v;
  for (auto& x : xs) v.push_back(atleast_3d(x));
  return concatenate(v, 2);
}
Array column_stack(const std::vector<Array>& xs) {
  std::vector<Array> v;
  for (auto& x : xs) v.push_back(x.ndim() < 2 ? reshape(x, {x.size(), 1}) : x);
  return concatenate(v, 1);
}

Array moveaxis(const Array& x, int source, int destination) {
  const int s = norm(source, x.ndim(), "moveaxis"), d = norm(destination, x.ndim(), "moveaxis");
  std::vector<int> perm;
  for (int i = 0; i < x.ndim(); ++i)
    if (i != s) perm.push_back(i);
  perm.insert(perm.begin() + d, s);
  return transpose(x, perm);
}
Array rollaxis(const Array& x, int axis, int start) {
  const int n = x.ndim();
  const int a = norm(axis, n, "rollaxis");
  if (start < 0) start += n;
  if (start < 0 || start > n)
    throw ShapeError("rollaxis: start " + std::to_string(start) + " is out of bounds for an array of rank " + std::to_string(n));
  if (a < start) --start;
  return moveaxis(x, a, start);
}

Array rot90(const Array& x, int k) {
  if (x.ndim() < 2) throw ValueError("rot90 requires an array of at least two dimensions");
  k = ((k % 4) + 4) % 4;
  std::vector<int> perm(std::size_t(x.ndim()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[0], perm[1]);
  if (k == 0) return x;
  if (k == 1) return transpose(flip(x, 1), perm);
  if (k == 2) return flip(flip(x, 0), 1);
  return flip(transpose(x, perm), 1);
}
Array fliplr(const Array& x) {
  if (x.ndim() < 2) throw ValueError("fliplr requires an array of at least two dimensions");
  return flip(x, 1);
}
Array flipud(const Array& x) {
  if (x.ndim() < 1) throw ValueError("flipud requires an array of at least one dimension");
  return flip(x, 0);
}
Array append(const Array& a, const Array& b, std::optional<int> axis) {
  if (!axis) return concatenate({ravel(a), ravel(b)}, 0);
  return concatenate({a, b}, *axis);
}

Array cross(const Array& a, const Array& b) {
  const std::int64_t na = a.ndim() ? a.shape().back() : 0, nb = b.ndim() ? b.shape().back() : 0;
  if ((na != 2 && na != 3) || (nb != 2 && nb != 3))
    throw ValueError("cross: incompatible dimensions for cross product (dimension must be 2 or 3), got " +
                     shape_str(a.shape()) + " and " + shape_str(b.shape()));
  return staged("tessel.cross", {a, b}, [=](const V& v) {
    auto at = [](const Array& x, std::int64_t i) { return x.index({ellipsis, i}); };
    Array a0 = at(v[0], 0), a1 = at(v[0], 1), b0 = at(v[1], 0), b1 = at(v[1], 1);
    Array z = a0 * b1 - a1 * b0;
    if (na == 2 && nb == 2) return z;
    Array a2 = na == 3 ? at(v[0], 2) : zeros_like(a0), b2 = nb == 3 ? at(v[1], 2) : zeros_like(b0);
    return stack({a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z}, -1);
  });
}

Array kron(const Array& a, const Array& b) {
  return staged("tessel.kron", {a, b}, [](const V& v) {
    Array x = v[0], y = v[1];
    const std::size_t r = std::size_t(std::max(x.ndim(), y.ndim()));
    Shape sx = x.shape(), sy = y.shape();
    while (sx.size() < r) sx.insert(sx.begin(), 1);
    while (sy.size() < r) sy.insert(sy.begin(), 1);
    Shape ex, ey, out;
    for (std::size_t d = 0; d < r; ++d) {
      ex.push_back(sx[d]);
      ex.push_back(1);
      ey.push_back(1);
      ey.push_back(sy[d]);
      out.push_back(sx[d] * sy[d]);
    }
    return reshape(reshape(x, ex) * reshape(y, ey), out);
  });
}

Array vdot(const Array& a, const Array& b) {
  return staged("tessel.vdot", {a, b}, [](const V& v) { return dot(conj(ravel(v[0])), ravel(v[1])); });
}
Array inner(const Array& a, const Array& b) {
  if (a.ndim() == 0 || b.ndim() == 0) return a * b;
  return tensordot(a, b, std::pair<std::vector<int>, std::vector<int>>{{-1}, {-1}});
}

Array tri(std::int64_t n, std::optional<std::int64_t> m, std::int64_t k, DType dtype) {
  const std::int64_t cols = m.value_or(n);
  Array row = lax::broadcasted_iota(DType::int32, {n, cols}, 0), col = lax::broadcasted_iota(DType::int32, {n, cols}, 1);
  return (col - row <= int(k)).astype(dtype);
}

}  // namespace tessel
