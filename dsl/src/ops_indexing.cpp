// Basic and advanced indexing: x.index(), take, take_along_axis and the x.at[...] updates.
#include <algorithm>

#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::apply1;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;

// ---------------------------------------------------------------- indexing

namespace {

// One array dimension's part of an index: start, step and length (numpy's
// normalisation), and whether the dimension is dropped (an integer index).
struct DimIndex {
  std::int64_t start = 0, step = 1, len = 0;
  bool drop = false;
  int dynamic = -1;  // an Array index or start: its place in ParsedIndex::dynamic (the window keeps the whole dim)
  std::int64_t window = 0;  // a dynamic slice's size (not dropped); 0 for a dynamic index (dropped)
};

struct ParsedIndex {
  std::vector<DimIndex> dims;   // per array dim
  Shape result;                 // shape x.index() returns
  Shape kept;                   // the same with dropped dims as 1 (dynamic ones whole) and no new axes
  std::vector<Array> dynamic;   // the Array indices, in dim order
};

ParsedIndex parse_index(const Shape& shape, const std::vector<IndexItem>& items) {
  const int rank = int(shape.size());
  int used = 0, ellipses = 0;
  for (auto& it : items) {
    if (std::holds_alternative<EllipsisTag>(it.v())) ++ellipses;
    else if (!std::holds_alternative<NewAxisTag>(it.v())) ++used;
  }
  if (ellipses > 1) throw ShapeError("an index can only have a single ellipsis");
  if (used > rank)
    throw ShapeError("too many indices for array: array is " + std::to_string(rank) + "-dimensional, but " +
                     std::to_string(used) + " were indexed");
  ParsedIndex p;
  int d = 0;
  auto take = [&](const IndexItem::Variant& v) {
    const std::int64_t n = shape[d];
    DimIndex di;
    if (auto* ds = std::get_if<DynamicSliceItem>(&v)) {
      const Array& a = ds->start;
      if (!is_integral(a.dtype()) || a.dtype() == DType::bool_ || a.ndim() != 0)
        throw TypeError("the start of a dynamic slice must be an integer scalar; got " + aval_str(a.dtype(), a.shape()) +
                        " for axis " + std::to_string(d) + " of shape " + shape_str(shape));
      if (ds->size < 0 || ds->size > n)
        throw ShapeError("a dynamic slice of size " + std::to_string(ds->size) + " does not fit axis " + std::to_string(d) +
                         " of size " + std::to_string(n) + " (shape " + shape_str(shape) + ")");
      di = {0, 1, n, false, int(p.dynamic.size()), ds->size};
      p.dynamic.push_back(a);
      p.dims.push_back(di);
      p.result.push_back(ds->size);
      p.kept.push_back(n);
      ++d;
      return;
    }
    if (auto* a = std::get_if<Array>(&v)) {
      if (!is_integral(a->dtype()) || a->dtype() == DType::bool_)
        throw TypeError("an Array index must hold integers; got " + aval_str(a->dtype(), a->shape()) + " for axis " +
                        std::to_string(d) + " of shape " + shape_str(shape));
      if (a->ndim() != 0)
        throw InternalError("an index array reached parse_index");
      if (n == 0)
        throw ShapeError("index into axis " + std::to_string(d) + " of size 0 (shape " + shape_str(shape) + ")");
      di = {0, 1, n, true, int(p.dynamic.size())};
      p.dynamic.push_back(*a);
      p.dims.push_back(di);
      p.kept.push_back(n);
      ++d;
      return;
    } else if (auto* i = std::get_if<std::int64_t>(&v)) {
      std::int64_t k = *i < 0 ? *i + n : *i;
      if (k < 0 || k >= n)
        throw ShapeError("index " + std::to_string(*i) + " is out of bounds for axis " + std::to_string(d) +
                         " with size " + std::to_string(n));
      di = {k, 1, 1, true};
    } else {
      const SliceItem& s = std::get<SliceItem>(v);
      std::int64_t step = s.step.value_or(1);
      if (step == 0)
        throw ValueError("slice step cannot be zero: step 0 on axis " + std::to_string(d) + " of shape " +
                         shape_str(shape));
      std::int64_t start, stop;
      if (step > 0) {
        start = s.start ? (*s.start < 0 ? *s.start + n : *s.start) : 0;
        stop = s.stop ? (*s.stop < 0 ? *s.stop + n : *s.stop) : n;
        start = std::clamp<std::int64_t>(start, 0, n);
        stop = std::clamp<std::int64_t>(stop, 0, n);
        di.len = stop > start ? ceil_div(stop - start, step) : 0;
      } else {
        start = s.start ? (*s.start < 0 ? *s.start + n : *s.start) : n - 1;
        stop = s.stop ? (*s.stop < 0 ? *s.stop + n : *s.stop) : -1;
        start = std::clamp<std::int64_t>(start, -1, n - 1);
        stop = std::clamp<std::int64_t>(stop, -1, n - 1);
        di.len = start > stop ? ceil_div(start - stop, -step) : 0;
      }
      di.start = start;
      di.step = step;
    }
    p.dims.push_back(di);
    if (!di.drop) p.result.push_back(di.len);
    p.kept.push_back(di.len);
    ++d;
  };
  for (auto& it : items) {
    const auto& v = it.v();
    if (std::holds_alternative<NewAxisTag>(v)) {
      p.result.push_back(1);
    } else if (std::holds_alternative<EllipsisTag>(v)) {
      int fill = rank - used;
      for (int k = 0; k < fill; ++k) take(SliceItem{});
    } else {
      take(v);
    }
  }
  while (d < rank) take(SliceItem{});
  return p;
}

// The Array indices as int32 positions: negative ones count from the end
// (then out of bounds reads clamp in dynamic_slice; updates drop).
std::vector<NodeRef> dynamic_positions(NodeTable& t, const ParsedIndex& p, const NR& idx) {
  std::vector<NodeRef> out;
  for (auto& di : p.dims) {
    if (di.dynamic < 0) continue;
    NodeRef i = c::cast(t, idx[size_t(di.dynamic)], DType::int32, false);
    const std::int64_t n = di.len;
    NodeRef neg = build::binary(t, Op::lt, i, build::scalar(t, DType::int32, 0));
    i = build::select(t, neg, build::binary(t, Op::add, i, build::scalar(t, DType::int32, double(n))), i);
    if (di.window > 0) {  // a window's start, clamped so it fits
      i = build::binary(t, Op::max, i, build::scalar(t, DType::int32, 0));
      i = build::binary(t, Op::min, i, build::scalar(t, DType::int32, double(n - di.window)));
    }
    out.push_back(i);
  }
  return out;
}

// The window of a positive-step view: (low, step, length) per dim, with the
// dims whose step was negative listed for reversal.
struct Window {
  std::vector<std::int64_t> lo, step;
  std::vector<std::int64_t> reversed;
};

Window window(const ParsedIndex& p) {
  Window w;
  for (size_t d = 0; d < p.dims.size(); ++d) {
    const DimIndex& di = p.dims[d];
    if (di.step > 0 || di.len == 0) {
      w.lo.push_back(di.len == 0 ? 0 : di.start);
      w.step.push_back(std::abs(di.step));
    } else {
      // The same positions walked upwards, from the last one taken.
      w.lo.push_back(di.start + (di.len - 1) * di.step);
      w.step.push_back(-di.step);
      w.reversed.push_back(std::int64_t(d));
    }
  }
  return w;
}

}  // namespace

namespace {
attr::IndexMode index_mode(const std::string& mode, const char* what) {
  if (mode == "fill") return attr::IndexMode::fill;
  if (mode == "clip") return attr::IndexMode::clip;
  throw ValueError(std::string(what) + ": mode must be \"fill\" or \"clip\"" +
                   (std::string(what) == "take" ? " or \"wrap\"" : "") + ", got \"" + mode + "\"");
}
void check_index_array(const Array& i, const char* what) {
  if (!is_integral(i.dtype()) || i.dtype() == DType::bool_)
    throw TypeError(std::string(what) + ": indices must be integers, got " + aval_str(i.dtype(), i.shape()));
}
// Where item k's dim lands in x indexed by `items` with every index array
// of rank >= 1 replaced by a whole slice (integers drop their dims).
int result_dim(const Array& x, const std::vector<IndexItem>& items, int k) {
  int dim = 0;
  for (int j = 0; j < k; ++j) {
    const auto& v = items[size_t(j)].v();
    if (std::holds_alternative<NewAxisTag>(v) || std::holds_alternative<SliceItem>(v) ||
        std::holds_alternative<DynamicSliceItem>(v) || (std::holds_alternative<Array>(v) && std::get<Array>(v).ndim() > 0)) {
      ++dim;
    } else if (std::holds_alternative<EllipsisTag>(v)) {
      int used = 0;
      for (auto& it : items)
        if (!std::holds_alternative<NewAxisTag>(it.v()) && !std::holds_alternative<EllipsisTag>(it.v())) ++used;
      dim += x.ndim() - used;
    }
  }
  return dim;
}

// The items holding index arrays of rank >= 1.
std::vector<int> array_items(const std::vector<IndexItem>& items) {
  std::vector<int> found;
  for (size_t k = 0; k < items.size(); ++k)
    if (auto* a = std::get_if<Array>(&items[k].v()); a && a->ndim() > 0 && a->dtype() != DType::bool_)
      found.push_back(int(k));
  return found;
}
// The item holding an index array of rank >= 1, if any (one at most: updates
// take one array).
int array_item(const std::vector<IndexItem>& items, const char* what = "indexing") {
  auto found = array_items(items);
  if (found.size() > 1)
    throw NotImplementedError(std::string(what) + " with more than one integer array (broadcast together) is not "
                              "supported; update with one array at a time");
  return found.empty() ? -1 : found[0];
}
// A boolean mask item: the only item, its shape x's leading dims.
const Array* mask_item(const Array& x, const std::vector<IndexItem>& items) {
  const Array* mask = nullptr;
  for (auto& it : items)
    if (auto* a = std::get_if<Array>(&it.v()); a && a->dtype() == DType::bool_) mask = a;
  if (!mask) return nullptr;
  if (items.size() != 1)
    throw NotImplementedError("indexing with a boolean mask and other items; index with the mask alone");
  const Shape& m = mask->shape();
  if (m.size() > x.shape().size() || !std::equal(m.begin(), m.end(), x.shape().begin()))
    throw ShapeError("boolean index " + aval_str(mask->dtype(), m) + " does not match the leading dims of " +
                     aval_str(x.dtype(), x.shape()));
  return mask;
}

// The mask broadcast over x's trailing dims.
NodeRef mask_like(NodeTable& t, const NodeRef& mask, const Shape& shape) {
  std::vector<std::int64_t> dims;
  for (int d = 0; d < mask->rank(); ++d) dims.push_back(d);
  return build::broadcast_in_dim(t, mask, shape, dims);
}
}  // namespace

Array take(const Array& a, const Array& indices, std::optional<int> axis, const std::string& mode) {
  check_index_array(indices, "take");
  attr::Indexed how;
  // "wrap": the indices modulo the axis's length (floor modulo, as JAX's
  // jnp.take), then every one is in range.
  how.mode = index_mode(mode == "wrap" ? "clip" : mode, "take");
  Array src = a;
  if (!axis) {
    src = reshape(a, {-1});
    how.axis = 0;
  } else {
    how.axis = c::norm_axis(*axis, a.ndim(), "take");
  }
  Array idx = indices;
  if (mode == "wrap") {
    const std::int64_t n = src.shape()[std::size_t(how.axis)];
    if (n == 0) throw ValueError("take: mode \"wrap\" on an axis of length 0");
    idx = remainder(indices, full_like(indices, double(n)));
  }
  return apply1("tessel.take", {src, idx},
                [how](NodeTable& t, const NR& in) { return build::gather(t, in[0], in[1], how); });
}

Array take_along_axis(const Array& a, const Array& indices, int axis, const std::string& mode) {
  check_index_array(indices, "take_along_axis");
  if (indices.ndim() != a.ndim())
    throw ValueError("take_along_axis: indices " + aval_str(indices.dtype(), indices.shape()) + " and array " +
                     aval_str(a.dtype(), a.shape()) + " must have the same number of dimensions");
  attr::Indexed how;
  how.mode = index_mode(mode, "take_along_axis");
  how.along = true;
  how.axis = c::norm_axis(axis, a.ndim(), "take_along_axis");
  // Broadcast against each other in every dim but the axis.
  Shape as = a.shape(), is = indices.shape();
  for (int d = 0; d < a.ndim(); ++d) {
    if (d == how.axis) continue;
    if (as[d] != is[d] && as[d] != 1 && is[d] != 1)
      throw ShapeError("take_along_axis: indices " + shape_str(indices.shape()) + " and array " + shape_str(a.shape()) +
                       " do not broadcast in dimension " + std::to_string(d));
    as[d] = is[d] = std::max(as[d], is[d]);
  }
  return apply1("tessel.take_along_axis", {a, indices}, [how, as, is](NodeTable& t, const NR& in) {
    return build::gather(t, c::broadcast_to(t, in[0], as), c::broadcast_to(t, in[1], is), how);
  });
}

Array index(const Array& x, const std::vector<IndexItem>& items) {
  if (const Array* mask = mask_item(x, items)) {
    // The result's length is the mask's count: the mask must be concrete.
    if (mask->is_tracer())
      throw ConcretizationError("Array boolean indices must be concrete; got " + aval_str(mask->dtype(), mask->shape()) +
                                " (the result's shape would depend on its values). Use ts::where, or x.at({mask}).set(...)");
    auto m = mask->astype(DType::int32).to_vector<std::int32_t>();
    std::vector<std::int32_t> where;
    for (size_t i = 0; i < m.size(); ++i)
      if (m[i]) where.push_back(std::int32_t(i));
    Shape flat{std::int64_t(m.size())};
    flat.insert(flat.end(), x.shape().begin() + mask->ndim(), x.shape().end());
    return take(reshape(x, flat), array(where, {std::int64_t(where.size())}), 0, "clip");
  }
  if (auto arrays = array_items(items); arrays.size() > 1) {
    // Several index arrays, broadcast together (NumPy): the other items
    // first, the arrays' dims kept whole; those dims then moved to the front
    // and flattened into one, indexed by the arrays' flat (row-major)
    // combination, each clamped into its dim first (JAX's reads clamp).
    std::vector<IndexItem> rest = items;
    std::vector<Array> idx;
    Shape common;
    for (int k : arrays) {
      const Array& a = std::get<Array>(items[size_t(k)].v());
      check_index_array(a, "index");
      idx.push_back(a);
      rest[size_t(k)] = IndexItem(SliceItem{});
    }
    try {
      common = idx[0].shape();
      for (size_t j = 1; j < idx.size(); ++j) common = c::broadcast_shapes(common, idx[j].shape(), "index");
    } catch (const ShapeError&) {
      std::string shapes;
      for (auto& a : idx) shapes += (shapes.empty() ? "" : " ") + shape_str(a.shape());
      throw ShapeError("shape mismatch: indexing arrays could not be broadcast together with shapes " + shapes);
    }
    // Where each array's dim lands in x.index(rest).
    auto dim_of = [&](int k) { return result_dim(x, items, k); };
    Array y = index(x, rest);
    std::vector<int> dims, perm;
    for (int k : arrays) dims.push_back(dim_of(k));
    perm = dims;
    for (int d = 0; d < y.ndim(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
    y = transpose(y, perm);
    Shape flat_shape{1};
    Array flat = zeros(common, DType::int32);
    for (size_t j = 0; j < idx.size(); ++j) {
      const std::int64_t n = y.shape()[j];
      Array i = idx[j].astype(DType::int32);
      const Array size = array(std::int32_t(n)), zero = array(std::int32_t(0)),
                  last = array(std::int32_t(std::max<std::int64_t>(n - 1, 0)));
      i = maximum(minimum(where(i < zero, i + size, i), last), zero);
      flat = flat * size + broadcast_to(i, common);
      flat_shape[0] *= n;
    }
    flat_shape.insert(flat_shape.end(), y.shape().begin() + std::ptrdiff_t(idx.size()), y.shape().end());
    Array r = take(reshape(y, flat_shape), flat, 0, "clip");
    // NumPy's placement: where the first advanced index stood when the
    // advanced indices (arrays and integers) sit side by side, else first.
    std::vector<int> advanced;
    for (size_t j = 0; j < items.size(); ++j) {
      const auto& v = items[j].v();
      if (std::holds_alternative<std::int64_t>(v) || std::holds_alternative<Array>(v)) advanced.push_back(int(j));
    }
    const bool gap = advanced.back() - advanced.front() + 1 != int(advanced.size());
    const int at = dims[0];
    if (!gap && at > 0) {
      std::vector<int> p;
      const int nb = int(common.size());
      for (int d = 0; d < at; ++d) p.push_back(nb + d);
      for (int d = 0; d < nb; ++d) p.push_back(d);
      for (int d = nb + at; d < r.ndim(); ++d) p.push_back(d);
      r = transpose(r, p);
    }
    return r;
  }
  if (int k = array_item(items); k >= 0) {
    // The other items first, the array's dim kept whole; then a gather
    // (clamped) along where that dim went. NumPy puts the array's dims where
    // it stood, or first when integers and the array are not side by side.
    std::vector<IndexItem> rest = items;
    rest[size_t(k)] = IndexItem(SliceItem{});
    const int dim = result_dim(x, items, k);  // where the array's dim lands in x.index(rest)
    // NumPy's advanced indices here: the array and the integers. Not side by
    // side, their dims go first.
    std::vector<int> advanced;
    for (size_t j = 0; j < items.size(); ++j) {
      const auto& v = items[j].v();
      if (std::holds_alternative<std::int64_t>(v) || std::holds_alternative<Array>(v)) advanced.push_back(int(j));
    }
    const bool gap = advanced.back() - advanced.front() + 1 != int(advanced.size());
    const Array& idx = std::get<Array>(items[size_t(k)].v());
    check_index_array(idx, "index");
    Array r = take(index(x, rest), idx, dim, "clip");
    if (gap && dim > 0) {
      // Integer indices apart from the array: its dims go first (NumPy).
      std::vector<int> perm;
      for (int j = 0; j < idx.ndim(); ++j) perm.push_back(dim + j);
      for (int j = 0; j < r.ndim(); ++j)
        if (j < dim || j >= dim + idx.ndim()) perm.push_back(j);
      r = transpose(r, perm);
    }
    return r;
  }
  ParsedIndex p = parse_index(x.shape(), items);
  Window w = window(p);
  std::vector<Array> in{x};
  in.insert(in.end(), p.dynamic.begin(), p.dynamic.end());
  return apply1("tessel.index", in, [p, w](NodeTable& t, const NR& in) {
    std::vector<std::int64_t> lo = w.lo, hi(lo.size()), step = w.step;
    for (size_t d = 0; d < lo.size(); ++d) hi[d] = p.dims[d].len == 0 ? 0 : lo[d] + (p.dims[d].len - 1) * step[d] + 1;
    NodeRef v = build::slice(t, in[0], lo, hi, step);
    v = build::rev(t, v, w.reversed);
    if (!p.dynamic.empty()) {
      // One element along each dynamically indexed dim (dynamic_slice clamps).
      auto pos = dynamic_positions(t, p, NR(in.begin() + 1, in.end()));
      std::vector<NodeRef> starts;
      Shape sizes = v->shape();
      size_t k = 0;
      for (size_t d = 0; d < p.dims.size(); ++d) {
        if (p.dims[d].dynamic >= 0) {
          starts.push_back(pos[k++]);
          sizes[d] = std::max<std::int64_t>(p.dims[d].window, 1);
        } else {
          starts.push_back(build::scalar(t, DType::int32, 0));
        }
      }
      v = build::dynamic_slice(t, v, starts, sizes);
    }
    return build::reshape(t, v, p.result);
  });
}

namespace {
// The update v placed at the index positions of an array of shape `shape`:
// (padded value, mask of the positions).
std::pair<NodeRef, NodeRef> scatter_window(NodeTable& t, const NodeRef& v_in, DType dtype, const Shape& shape,
                                           const ParsedIndex& p, const Window& w, const NR& idx) {
  NodeRef v = c::broadcast_to(t, c::cast(t, v_in, dtype, false), p.result, "at[].set");
  // Dynamically indexed dims: one element, spread along the whole dim;
  // dynamic windows: placed at their start in zeros of the whole dim.
  Shape one = p.kept;
  for (size_t d = 0; d < p.dims.size(); ++d)
    if (p.dims[d].dynamic >= 0) one[d] = std::max<std::int64_t>(p.dims[d].window, 1);
  v = build::reshape(t, v, one);
  std::vector<NodeRef> pos;
  if (!p.dynamic.empty()) pos = dynamic_positions(t, p, idx);
  if (one != p.kept) {
    Shape spread = p.kept;  // windows whole, indices still 1
    bool windows = false;
    std::vector<NodeRef> starts;
    size_t k = 0;
    for (size_t d = 0; d < p.dims.size(); ++d) {
      const bool dyn = p.dims[d].dynamic >= 0;
      if (dyn && p.dims[d].window == 0) spread[d] = 1;
      windows = windows || (dyn && p.dims[d].window > 0);
      starts.push_back(dyn ? pos[k++] : build::scalar(t, DType::int32, 0));
    }
    if (windows) v = build::dynamic_update_slice(t, build::broadcast_in_dim(t, build::scalar(t, dtype, 0), spread, {}), v, starts);
    std::vector<std::int64_t> all(one.size());
    for (size_t d = 0; d < all.size(); ++d) all[d] = std::int64_t(d);
    if (spread != p.kept) v = build::broadcast_in_dim(t, v, p.kept, all);
  }
  v = build::rev(t, v, w.reversed);
  std::vector<std::int64_t> lo = w.lo, hi(lo.size()), interior(lo.size());
  for (size_t d = 0; d < lo.size(); ++d) {
    std::int64_t len = p.dims[d].len;
    std::int64_t last = len == 0 ? lo[d] - 1 : lo[d] + (len - 1) * w.step[d];
    hi[d] = shape[d] - 1 - last;
    interior[d] = w.step[d] - 1;
    if (len == 0) lo[d] = 0, hi[d] = shape[d], interior[d] = 0;
  }
  NodeRef placed = build::pad(t, v, build::scalar(t, dtype, 0), lo, hi, interior);
  NodeRef ones = build::broadcast_in_dim(t, build::scalar(t, DType::bool_, 1), p.kept, {});
  NodeRef mask = build::pad(t, ones, build::scalar(t, DType::bool_, 0), lo, hi, interior);
  // A dynamic index selects its position along the dim; out of bounds it
  // selects none, so the update is dropped (JAX's scatter).
  if (!p.dynamic.empty()) {
    size_t k = 0;
    for (size_t d = 0; d < p.dims.size(); ++d) {
      if (p.dims[d].dynamic < 0) continue;
      NodeRef io = build::iota(t, DType::int32, shape, std::int64_t(d));
      NodeRef lo = build::broadcast_in_dim(t, pos[k++], shape, {});
      NodeRef at;
      if (p.dims[d].window == 0) {
        at = build::binary(t, Op::eq, io, lo);
      } else {
        NodeRef hi = build::binary(t, Op::add, lo,
                                   build::broadcast_in_dim(t, build::scalar(t, DType::int32, double(p.dims[d].window)), shape, {}));
        at = build::binary(t, Op::and_, build::binary(t, Op::ge, io, lo), build::binary(t, Op::lt, io, hi));
      }
      mask = build::binary(t, Op::and_, mask, at);
    }
  }
  return {placed, mask};
}
}  // namespace

namespace {
// Whether the index selects one box of unit steps (integers, static slices of
// step 1, Array indices, dynamic slices), none of it empty: an update there
// is a dynamic_update_slice of the box, which codegen writes in place where
// its operand is dead (a fori_loop's carry: O(box) per step, not O(x)).
bool unit_window(const ParsedIndex& p, const Window& w) {
  if (!w.reversed.empty()) return false;
  for (size_t d = 0; d < p.dims.size(); ++d)
    if (w.step[d] != 1 || p.dims[d].len == 0) return false;
  return true;
}

// x with the box updated: old = x's box, u = combine(old, v); a dynamic
// index out of bounds (after negative ones count from the end) keeps old, as
// JAX's scatter drops such updates (dynamic_update_slice would clamp).
template <class Combine>
NodeRef update_window(NodeTable& t, const NodeRef& x, const NodeRef& v_in, const ParsedIndex& p, const Window& w,
                      const NR& idx, const Combine& combine) {
  const DType dtype = x->dtype();
  Shape box;
  for (auto& di : p.dims) box.push_back(di.dynamic >= 0 ? std::max<std::int64_t>(di.window, 1) : di.len);
  NodeRef v = build::reshape(t, c::broadcast_to(t, c::cast(t, v_in, dtype, false), p.result, "at[].set"), box);
  std::vector<NodeRef> pos;
  if (!p.dynamic.empty()) pos = dynamic_positions(t, p, idx);
  std::vector<NodeRef> starts;
  NodeRef inside;
  for (size_t d = 0, k = 0; d < p.dims.size(); ++d) {
    const DimIndex& di = p.dims[d];
    if (di.dynamic < 0) {
      starts.push_back(build::scalar(t, DType::int32, double(w.lo[d])));
      continue;
    }
    NodeRef i = pos[k++];
    starts.push_back(i);
    if (di.window > 0) continue;  // a window's start, clamped already
    NodeRef in = build::binary(t, Op::and_, build::binary(t, Op::ge, i, build::scalar(t, DType::int32, 0)),
                               build::binary(t, Op::lt, i, build::scalar(t, DType::int32, double(di.len))));
    inside = inside ? build::binary(t, Op::and_, inside, in) : in;
  }
  const NodeRef old = build::dynamic_slice(t, x, starts, box);
  NodeRef u = combine(t, old, v);
  if (inside) u = build::select(t, build::broadcast_in_dim(t, inside, box, {}), u, old);
  return build::dynamic_update_slice(t, x, u, starts);
}

Array update(const char* name, const Array& x, const std::vector<IndexItem>& items, const Array& v, Op op);
// Updates with index arrays among other items (several arrays broadcast
// together, arrays beside slices and integers): the flat position in x of
// every element the index selects, found by indexing an iota of x's
// positions with the same items, then one scatter into x flattened. An
// array entry out of bounds points into a padding row holding numel(x), a
// position the scatter drops (JAX drops out-of-bounds updates).
Array update_general(const char* name, const Array& x, const std::vector<IndexItem>& items, const std::vector<int>& arrays,
                     const Array& v, Op op) {
  // The dim of x each item indexes.
  std::vector<int> x_dim(items.size(), -1);
  int used = 0;
  for (auto& it : items)
    if (!std::holds_alternative<NewAxisTag>(it.v()) && !std::holds_alternative<EllipsisTag>(it.v())) ++used;
  for (size_t j = 0, d = 0; j < items.size(); ++j) {
    const auto& it = items[j].v();
    if (std::holds_alternative<NewAxisTag>(it)) continue;
    if (std::holds_alternative<EllipsisTag>(it)) {
      d += size_t(x.ndim() - used);
      continue;
    }
    if (std::holds_alternative<DynamicSliceItem>(it))
      throw NotImplementedError(std::string(name) + " with an index array beside a dynamic slice");
    x_dim[j] = int(d++);
  }
  const std::int64_t total = numel(x.shape());
  if (total >= std::int64_t(1) << 31) throw NotImplementedError(std::string(name) + ": more than 2^31 elements");
  std::vector<std::pair<std::int64_t, std::int64_t>> widths(size_t(x.ndim()), {0, 0});
  std::vector<IndexItem> fixed = items;
  for (int k : arrays) {
    const Array& a = std::get<Array>(items[size_t(k)].v());
    check_index_array(a, name);
    const std::int64_t n = x.shape()[size_t(x_dim[size_t(k)])];
    widths[size_t(x_dim[size_t(k)])].second = 1;
    const Array i = a.astype(DType::int32), size = array(std::int32_t(n)), zero = array(std::int32_t(0));
    const Array valid = logical_and(i >= -std::int32_t(n), i < size);
    fixed[size_t(k)] = IndexItem(where(valid, where(i < zero, i + size, i), size));
  }
  const Array positions = pad(arange(std::int64_t(0), total, std::int64_t(1), DType::int32).reshape(x.shape()), widths,
                              double(total));
  const Array pos = index(positions, fixed);
  const Array flat = update(name, reshape(x, {total}), {pos}, broadcast_to(v.astype(x.dtype()), pos.shape()), op);
  return reshape(flat, x.shape());
}

// x with v combined into the indexed positions by `op` (add, mul, min, max;
// select: v replaces what is there) — the scatter's combine, and the same
// elementwise where the update is a mask.
Array update(const char* name, const Array& x, const std::vector<IndexItem>& items, const Array& v, Op op) {
  auto combine = [op](NodeTable& t, const NodeRef& old, const NodeRef& u) {
    return op == Op::select ? u : build::binary(t, op, old, u);
  };
  if (mask_item(x, items)) {
    // where-style: the value broadcast to x, combined where the mask is set.
    const Array& mask = std::get<Array>(items[0].v());
    return apply1(name, {x, mask, v}, [combine, name](NodeTable& t, const NR& in) {
      NodeRef u = c::broadcast_to(t, c::cast(t, in[2], in[0]->dtype(), false), in[0]->shape(), name);
      return build::select(t, mask_like(t, in[1], in[0]->shape()), combine(t, in[0], u), in[0]);
    });
  }
  if (auto arrays = array_items(items); !arrays.empty()) {
    bool simple = arrays.size() == 1;
    for (size_t j = 0; j < items.size() && simple; ++j) {
      const auto& it = items[j].v();
      if (int(j) == arrays[0] || std::holds_alternative<EllipsisTag>(it)) continue;
      auto* sl = std::get_if<SliceItem>(&it);
      simple = sl && !sl->start && !sl->stop && !sl->step;
    }
    if (!simple) return update_general(name, x, items, arrays, v, op);
  }
  if (int k = array_item(items, name); k >= 0) {
    // A scatter along the array's dim (updates out of bounds dropped); the
    // other items must leave their dims whole.
    int dim = -1, d = 0;
    for (size_t j = 0; j < items.size(); ++j) {
      const auto& it = items[j].v();
      if (int(j) == k) {
        dim = d++;
      } else if (std::holds_alternative<EllipsisTag>(it)) {
        d += x.ndim() - (int(items.size()) - 1);
      } else if (auto* s = std::get_if<SliceItem>(&it); s && !s->start && !s->stop && !s->step) {
        ++d;
      } else {
        throw NotImplementedError(std::string(name) +
                                  " with an index array: the other index items must be ts::all or ts::ellipsis");
      }
    }
    const Array& idx = std::get<Array>(items[size_t(k)].v());
    check_index_array(idx, name);
    attr::Indexed how;
    how.axis = dim;
    how.mode = attr::IndexMode::fill;  // dropped out of bounds
    how.combine = op;
    Shape us(x.shape().begin(), x.shape().begin() + dim);
    us.insert(us.end(), idx.shape().begin(), idx.shape().end());
    us.insert(us.end(), x.shape().begin() + dim + 1, x.shape().end());
    return apply1(name, {x, idx, v}, [how, us, name](NodeTable& t, const NR& in) {
      NodeRef u = c::broadcast_to(t, c::cast(t, in[2], in[0]->dtype(), false), us, name);
      return build::scatter(t, in[0], in[1], u, how);
    });
  }
  ParsedIndex p = parse_index(x.shape(), items);
  Window w = window(p);
  std::vector<Array> in{x, v};
  in.insert(in.end(), p.dynamic.begin(), p.dynamic.end());
  if (unit_window(p, w))
    return apply1(name, in, [p, w, combine](NodeTable& t, const NR& in) {
      return update_window(t, in[0], in[1], p, w, NR(in.begin() + 2, in.end()), combine);
    });
  return apply1(name, in, [p, w, combine](NodeTable& t, const NR& in) {
    auto [placed, mask] = scatter_window(t, in[1], in[0]->dtype(), in[0]->shape(), p, w, NR(in.begin() + 2, in.end()));
    return build::select(t, mask, combine(t, in[0], placed), in[0]);
  });
}
}  // namespace

Array IndexUpdate::set(const Array& v) const { return update("tessel.at.set", x_, items_, v, Op::select); }
Array IndexUpdate::add(const Array& v) const { return update("tessel.at.add", x_, items_, v, Op::add); }
Array IndexUpdate::multiply(const Array& v) const { return update("tessel.at.multiply", x_, items_, v, Op::mul); }
Array IndexUpdate::min(const Array& v) const { return update("tessel.at.min", x_, items_, v, Op::min); }
Array IndexUpdate::max(const Array& v) const { return update("tessel.at.max", x_, items_, v, Op::max); }

Array Array::index(const std::vector<IndexItem>& items) const { return tessel::index(*this, items); }
IndexUpdate Array::at(const std::vector<IndexItem>& items) const { return IndexUpdate(*this, items); }

}  // namespace tessel
