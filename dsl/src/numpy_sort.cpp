// Sorting, searching, counting, set functions and order statistics
// (dsl/tessel/sorting.hpp), as compositions of sort, gather, scatter,
// cumulative sums and fused compare-and-reduce loops.
#include <algorithm>
#include <cmath>
#include <optional>
#include <limits>

#include <tessel/numpy.hpp>
#include <tessel/sorting.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/staged.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::along;

using detail::staged;
constexpr auto norm = detail::axis_in;
namespace c = detail::compose;
using V = std::vector<Array>;

namespace {


// The value a traced x has no concrete form of: JAX's error for shape-dependent results.
void need_concrete(const Array& x, const char* what, const char* arg) {
  if (x.is_tracer())
    throw ConcretizationError(std::string(what) + ": the size of the result depends on the values of a traced array (" +
                              aval_str(x.dtype(), x.shape()) + "); pass a static `" + arg + "` (" + what + "(x, {." +
                              arg + " = n})) to use it inside jit, as in JAX");
}

// a < b in sort's total order: NaNs after every number.
Array total_less(const Array& a, const Array& b) {
  if (!is_floating(a.dtype()) && !is_floating(b.dtype())) return a < b;
  return logical_or(a < b, logical_and(isnan(b), logical_not(isnan(a))));
}

}  // namespace

// ---------------------------------------------------------------- sort
Array sort(const Array& x, int axis, SortOptions o) {
  if (!o.descending) return sort(x, axis);
  const int a = norm(axis, x.ndim(), "sort");
  return flip(sort(x, a), a);
}
Array argsort(const Array& x, int axis, SortOptions o) {
  if (!o.descending) return argsort(x, axis);
  const int a = norm(axis, x.ndim(), "argsort");
  const std::int64_t n = x.shape()[std::size_t(a)];
  // Stable and descending: argsort the reversed array, reverse, map i -> n-1-i.
  return staged("tessel.argsort", {x}, [=](const V& v) { return (int(n) - 1) - flip(argsort(flip(v[0], a), a), a); });
}

namespace lax {
TopK top_k(const Array& x, std::int64_t k) {
  if (x.ndim() == 0) throw ShapeError("top_k: the operand must have at least one dimension, got a scalar");
  const std::int64_t n = x.shape().back();
  if (k < 0 || k > n)
    throw ValueError("top_k: k must be in [0, " + std::to_string(n) + "] for " + aval_str(x.dtype(), x.shape()) +
                     ", got " + std::to_string(k));
  // The top_k primitive: split along the last axis, each device's k candidates move, never the array.
  auto r = detail::apply("lax.top_k", {x}, [k](NodeTable& t, const std::vector<NodeRef>& in) {
    NodeRef y = build::top_k(t, in[0], k);
    return std::vector<NodeRef>{build::get_tuple_element(t, y, 0), build::get_tuple_element(t, y, 1)};
  });
  return {r[0], r[1]};
}

std::vector<Array> sort(const std::vector<Array>& ops, int dimension, int num_keys) {
  if (ops.empty()) throw ValueError("lax.sort: no operands");
  if (num_keys < 1 || num_keys > int(ops.size()))
    throw ValueError("lax.sort: num_keys " + std::to_string(num_keys) + " must be in [1, " + std::to_string(ops.size()) + "]");
  for (auto& o : ops)
    if (o.shape() != ops[0].shape())
      throw ShapeError("lax.sort: operands must have one shape, got " + shape_str(ops[0].shape()) + " and " +
                       shape_str(o.shape()));
  const int d = norm(dimension, ops[0].ndim(), "lax.sort");
  return detail::staged_many("lax.sort", ops, [=](const V& v) {
    // Stable sorts from the last key to the first give the lexicographic order.
    Array perm = lax::broadcasted_iota(DType::int32, v[0].shape(), d);
    for (int k = num_keys - 1; k >= 0; --k) {
      Array key = take_along_axis(v[std::size_t(k)], perm, d, "clip");
      perm = take_along_axis(perm, argsort(key, d), d, "clip");
    }
    V out;
    for (auto& o : v) out.push_back(take_along_axis(o, perm, d, "clip"));
    return out;
  });
}

std::vector<Array> associative_scan(
    const std::function<std::vector<Array>(const std::vector<Array>&, const std::vector<Array>&)>& fn,
    const std::vector<Array>& elems, AssociativeScanOptions o) {
  if (elems.empty()) throw ValueError("lax.associative_scan: elems has no arrays");
  const int a = norm(o.axis, elems[0].ndim(), "associative_scan");
  for (auto& e : elems) {
    if (e.ndim() <= a || e.shape()[std::size_t(a)] != elems[0].shape()[std::size_t(a)])
      throw ValueError("lax.associative_scan: array inputs to associative_scan must have the same first dimension "
                       "(along axis " + std::to_string(o.axis) + "): got shapes " + shape_str(elems[0].shape()) +
                       " and " + shape_str(e.shape()));
  }
  // t[start:stop:step] along axis ax.
  auto part = [](const Array& t, int ax, std::int64_t start, std::optional<std::int64_t> stop, std::int64_t step) {
    std::vector<IndexItem> items;
    for (int d = 0; d < ax; ++d) items.push_back(all);
    items.push_back(slice(start, stop, step));
    return t.index(items);
  };
  auto parts = [&](const V& t, int ax, std::int64_t start, std::optional<std::int64_t> stop, std::int64_t step) {
    V out;
    for (auto& x : t) out.push_back(part(x, ax, start, stop, step));
    return out;
  };
  auto combine = [&](const V& x, const V& y) {
    V r = fn(x, y);
    if (r.size() != x.size())
      throw TypeError("lax.associative_scan: fn returned " + std::to_string(r.size()) + " arrays for elems of " +
                      std::to_string(x.size()));
    return r;
  };
  // JAX's parallel prefix along axis ax (O(log n) levels of strided slices).
  std::function<V(const V&, int)> scan = [&](const V& e, int ax) -> V {
    const std::int64_t n = e[0].shape()[std::size_t(ax)];
    if (n < 2) return e;
    // Pairs combined, scanned recursively: the results at odd positions.
    V odd = scan(combine(parts(e, ax, 0, n - 1, 2), parts(e, ax, 1, n, 2)), ax);
    // Even positions: the odd result before each, combined with the element.
    const std::int64_t no = odd[0].shape()[std::size_t(ax)];
    V rest = n % 2 == 0 ? combine(parts(odd, ax, 0, no - 1, 1), parts(e, ax, 2, n, 2)) : combine(odd, parts(e, ax, 2, n, 2));
    V out;
    for (std::size_t k = 0; k < e.size(); ++k) {
      Array even = concatenate({part(e[k], ax, 0, 1, 1), rest[k]}, ax);
      // Interleave: even[0], odd[0], even[1], odd[1], ...
      const std::int64_t ne = even.shape()[std::size_t(ax)];
      Array oddp = no < ne ? concatenate({odd[k], part(even, ax, 0, 1, 1)}, ax) : odd[k];  // a placeholder, sliced off below
      Array both = stack({even, oddp}, ax + 1);
      Shape s = even.shape();
      s[std::size_t(ax)] = 2 * ne;
      out.push_back(part(reshape(both, s), ax, 0, n, 1));
    }
    return out;
  };
  auto flipped = [](const V& v, int ax) {
    V r;
    for (auto& x : v) r.push_back(flip(x, ax));
    return r;
  };
  // The scan along ax, reversed (later elements first) or not.
  auto scan_dir = [&](const V& v, int ax) { return o.reverse ? flipped(scan(flipped(v, ax), ax), ax) : scan(v, ax); };
  // In blocks, so that an axis split over devices is never gathered: the
  // axis as [B, n/B] (B the device count), each block scanned on its own
  // (on the device that holds it), the blocks' totals (one slice each)
  // scanned, and each block combined with the total of the blocks before it
  // (after it, reversed). Any split of the axis over B or fewer devices
  // keeps whole blocks on each device.
  const std::int64_t n = elems[0].shape()[std::size_t(a)], B = device_count();
  const bool blocked = B > 1 && n % B == 0 && n / B >= 2;
  return detail::staged_many("lax.associative_scan", elems, [&](const V& v) {
    if (!blocked) return scan_dir(v, a);
    const std::int64_t m = n / B;
    V blocks;
    for (auto& x : v) {
      Shape s = x.shape();
      s[std::size_t(a)] = m;
      s.insert(s.begin() + a, B);
      blocks.push_back(reshape(x, s));
    }
    V inner = scan_dir(blocks, a + 1);
    // Each block's total: its last scanned element (its first, reversed).
    V tot = scan_dir(o.reverse ? parts(inner, a + 1, 0, 1, 1) : parts(inner, a + 1, m - 1, m, 1), a);
    // The total before block b (after it, reversed); the end block's is a
    // placeholder (any valid value: its own total), masked below.
    V before;
    for (auto& t : tot)
      before.push_back(o.reverse ? concatenate({part(t, a, 1, B, 1), part(t, a, B - 1, B, 1)}, a)
                                 : concatenate({part(t, a, 0, 1, 1), part(t, a, 0, B - 1, 1)}, a));
    V wide;
    for (std::size_t k = 0; k < v.size(); ++k) wide.push_back(broadcast_to(before[k], inner[k].shape()));
    V comb = combine(wide, inner);
    V out;
    for (std::size_t k = 0; k < v.size(); ++k) {
      Shape bs(inner[k].shape().size(), 1);
      bs[std::size_t(a)] = B;
      Array first = reshape(arange(0, B, 1, DType::int32), bs) == (o.reverse ? double(B - 1) : 0.0);
      out.push_back(reshape(where(first, inner[k], comb[k]), v[k].shape()));
    }
    return out;
  });
}

Array associative_scan(const std::function<Array(const Array&, const Array&)>& fn, const Array& x,
                       AssociativeScanOptions o) {
  return associative_scan([&](const V& p, const V& q) { return V{fn(p[0], q[0])}; }, V{x}, o)[0];
}

std::vector<Array> reduce(const std::vector<Array>& operands, const std::vector<Array>& init_values,
                          const std::function<std::vector<Array>(const std::vector<Array>&, const std::vector<Array>&)>& fn,
                          const std::vector<int>& dimensions) {
  if (operands.empty()) throw ValueError("lax.reduce: no operands");
  if (init_values.size() != operands.size())
    throw ValueError("lax.reduce: " + std::to_string(operands.size()) + " operands and " +
                     std::to_string(init_values.size()) + " init_values (one each)");
  const Shape shape = operands[0].shape();
  for (std::size_t k = 0; k < operands.size(); ++k) {
    if (operands[k].shape() != shape)
      throw ShapeError("lax.reduce: operands must have one shape, got " + aval_str(operands[0].dtype(), shape) + " and " +
                       aval_str(operands[k].dtype(), operands[k].shape()));
    if (init_values[k].ndim() != 0)
      throw ShapeError("lax.reduce: init_values must be scalars, got " +
                       aval_str(init_values[k].dtype(), init_values[k].shape()));
  }
  std::vector<int> dims;
  for (int d : dimensions) dims.push_back(norm(d, int(shape.size()), "lax.reduce"));
  const std::size_t m = operands.size();
  V in = operands;
  in.insert(in.end(), init_values.begin(), init_values.end());
  auto checked = [&](std::vector<Array> r, const char* where) {
    if (r.size() != m)
      throw ValueError(std::string("lax.reduce: computation returned ") + std::to_string(r.size()) + " arrays for " +
                       std::to_string(m) + " operands (" + where + ")");
    return r;
  };
  return detail::staged_many("lax.reduce", in, [&](const V& v) {
    // Reduced dims last, flattened into one, halved pairwise down to one.
    std::vector<int> perm;
    for (int d = 0; d < int(shape.size()); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
    Shape kept;
    for (int d : perm) kept.push_back(shape[std::size_t(d)]);
    for (int d : dims) perm.push_back(d);
    std::int64_t n = 1;
    for (int d : dims) n *= shape[std::size_t(d)];
    Shape flat = kept;
    flat.push_back(n);
    V r, acc;
    for (std::size_t k = 0; k < m; ++k) {
      r.push_back(reshape(transpose(v[k], perm), flat));
      acc.push_back(broadcast_to(v[m + k].astype(v[k].dtype()), kept));
    }
    if (n == 0) return acc;
    const int last = int(flat.size()) - 1;
    auto part = [&](const V& t, std::int64_t start, std::int64_t stop) {
      V p;
      for (auto& a : t) p.push_back(a.index({ellipsis, slice(start, stop)}));
      return p;
    };
    while (n > 1) {
      const std::int64_t h = n / 2;
      V folded = checked(fn(part(r, 0, h), part(r, h, 2 * h)), "pairs");
      if (n % 2) {
        V rest = part(r, 2 * h, n);
        for (std::size_t k = 0; k < m; ++k) folded[k] = concatenate({folded[k], rest[k]}, last);
      }
      r = folded;
      n = r[0].shape().back();
    }
    V whole;
    for (auto& a : r) whole.push_back(squeeze(a, last));
    return checked(fn(acc, whole), "with init_values");
  });
}
Array reduce(const Array& x, double init, const std::function<Array(const Array&, const Array&)>& fn,
             const std::vector<int>& dimensions) {
  return reduce(std::vector<Array>{x}, std::vector<Array>{full({}, init, x.dtype())},
                [&](const V& a, const V& b) { return V{fn(a[0], b[0])}; }, dimensions)[0];
}
}  // namespace lax

// ---------------------------------------------------------------- search
Array searchsorted(const Array& a, const Array& v, const std::string& side) {
  if (a.ndim() != 1) throw ShapeError("searchsorted: a must be 1-D, got " + aval_str(a.dtype(), a.shape()));
  if (side != "left" && side != "right")
    throw ValueError("searchsorted: side must be 'left' or 'right', got '" + side + "'");
  const bool left = side == "left";
  return staged("tessel.searchsorted", {a, v}, [=](const V& in) {
    Array av = in[0], vv = in[1];
    Array aa = reshape(av, Shape{av.shape()[0]}), ve = expand_dims(vv, -1);  // [..., 1] against [n]
    // left: how many a[i] < v; right: how many a[i] <= v (not v < a[i]).
    Array hit = left ? total_less(aa, ve) : logical_not(total_less(ve, aa));
    return sum(hit, -1).astype(DType::int32);
  });
}
Array digitize(const Array& x, const Array& bins, bool right) {
  if (bins.ndim() != 1) throw ShapeError("digitize: bins must be 1-D, got " + aval_str(bins.dtype(), bins.shape()));
  return searchsorted(bins, x, right ? "left" : "right");
}

// ---------------------------------------------------------------- counting
Array bincount(const Array& x, BincountOptions o) {
  if (x.ndim() != 1) throw ShapeError("bincount: x must be 1-D, got " + aval_str(x.dtype(), x.shape()));
  if (is_inexact(x.dtype()) || x.dtype() == DType::bool_)
    throw TypeError("bincount: x must be an integer array, got " + aval_str(x.dtype(), x.shape()));
  if (o.minlength < 0) throw ValueError("bincount: minlength must be non-negative, got " + std::to_string(o.minlength));
  if (o.length && *o.length < 0) throw ValueError("bincount: length must be non-negative, got " + std::to_string(*o.length));
  std::int64_t length;
  if (o.length) {
    length = *o.length;
  } else {
    need_concrete(x, "bincount", "length");
    length = std::max<std::int64_t>(o.minlength, x.size() ? max(x).astype(DType::int64).item<std::int64_t>() + 1 : 0);  // with a length, minlength is ignored (JAX)
  }
  const bool weighted = bool(o.weights);
  if (weighted && o.weights->shape() != x.shape())
    throw ShapeError("bincount: weights of shape " + shape_str(o.weights->shape()) + " for x of shape " +
                     shape_str(x.shape()));
  V in{x};
  if (weighted) in.push_back(*o.weights);
  return staged("tessel.bincount", in, [=](const V& v) {
    Array idx = maximum(v[0], 0);  // negative values count in bin 0, as JAX
    Array w = weighted ? v[1] : ones(v[0].shape(), DType::int32);
    if (length <= 1024) {
      // A fused compare-and-sum over x: split over devices, each counts its part and one all-reduce adds them.
      Array bins = arange(0, length, 1, DType::int32);
      Array hit = expand_dims(idx, -1) == bins;  // [n, length]
      return sum(where(hit, expand_dims(w, -1), zeros_like(expand_dims(w, -1))), 0);
    }
    return zeros({length}, w.dtype()).at({idx}).add(w);
  });
}

namespace {
std::pair<double, double> concrete_range(const Array& x, std::optional<std::pair<double, double>> range) {
  if (range) {
    if (!(range->first <= range->second))
      throw ValueError("histogram: max must be larger than min in range, got (" + std::to_string(range->first) + ", " +
                       std::to_string(range->second) + ")");
    return *range;
  }
  need_concrete(x, "histogram", "range");
  if (x.size() == 0) return {0.0, 1.0};
  double lo = min(x).astype(DType::float64).item<double>(), hi = max(x).astype(DType::float64).item<double>();
  return {lo, hi};
}
}  // namespace

Array histogram_bin_edges(const Array& x, int bins, std::optional<std::pair<double, double>> range) {
  if (bins < 1) throw ValueError("histogram: bins must be positive, got " + std::to_string(bins));
  auto [lo, hi] = concrete_range(x, range);
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  const DType dt = is_floating(x.dtype()) ? x.dtype() : DType::float32;
  return linspace(lo, hi, bins + 1, true, dt);
}
std::pair<Array, Array> histogram(const Array& x, const Array& edges) {
  if (edges.ndim() != 1 || edges.size() < 2)
    throw ShapeError("histogram: bin edges must be 1-D with at least 2 entries, got " + shape_str(edges.shape()));
  const std::int64_t nb = edges.size() - 1;
  Array counts = staged("tessel.histogram", {x, edges}, [=](const V& v) {
    Array a = ravel(v[0]);
    Array e = v[1].astype(is_floating(a.dtype()) ? a.dtype() : DType::float32);
    Array af = a.astype(e.dtype());
    Array hi = e[nb];
    // The bin of each element (right-closed last bin); outside the edges: none.
    Array b = searchsorted(e, af, "right") - 1;
    b = where(af == hi, full_like(b, double(nb - 1)), b);
    Array inside = logical_and(af >= e[0], af <= hi);
    Array bins = arange(0, nb, 1, DType::int32);
    Array hit = logical_and(expand_dims(b, -1) == bins, expand_dims(inside, -1));
    return sum(hit, 0).astype(DType::float32);
  });
  return {counts, edges};
}
std::pair<Array, Array> histogram(const Array& x, int bins, std::optional<std::pair<double, double>> range) {
  return histogram(x, histogram_bin_edges(x, bins, range));
}

Array isin(const Array& element, const Array& test_elements, bool invert) {
  return staged("tessel.isin", {element, test_elements}, [=](const V& v) {
    Array r = any(expand_dims(v[0], -1) == ravel(v[1]), -1);
    return invert ? logical_not(r) : r;
  });
}

// ---------------------------------------------------------------- order statistics
namespace {
enum class Method { linear, lower, higher, nearest, midpoint };
Method method_of(const std::string& m) {
  if (m == "linear") return Method::linear;
  if (m == "lower") return Method::lower;
  if (m == "higher") return Method::higher;
  if (m == "nearest") return Method::nearest;
  if (m == "midpoint") return Method::midpoint;
  throw ValueError("quantile: method must be one of linear, lower, higher, nearest, midpoint; got '" + m + "'");
}

// q's quantile of a along axis (sorted there); ignore_nan: over each slice's
// numbers only. The result: q's dims, then a's with the axis reduced.
Array quantile_impl(const Array& a, const Array& q, std::optional<int> axis, Method m, bool keepdims, bool ignore_nan,
                    const char* what) {
  if (is_complex(a.dtype())) throw TypeError(std::string(what) + " of a complex array");
  if (a.size() == 0) throw ValueError(std::string(what) + " of an empty array");
  // A concrete scalar q (median, a fixed percentile) without NaNs to skip:
  // its two positions are known now, so they are read by static slices,
  // which a split axis serves from the devices' windows (the positions'
  // arithmetic below stays the graph's, in x's dtype, bit for bit).
  std::optional<double> q_now;
  if (!ignore_nan && !q.is_tracer() && q.ndim() == 0) q_now = q.astype(DType::float64).item<double>();
  return staged(what, {a, q}, [=](const V& v) {
    Array x = is_inexact(v[0].dtype()) ? v[0] : v[0].astype(DType::float32);
    const Shape orig = x.shape();
    int ax = 0;
    if (!axis) x = ravel(x);
    else ax = norm(*axis, x.ndim(), what);
    const std::int64_t n = x.shape()[std::size_t(ax)];
    Array s = sort(x, ax);
    Shape one = s.shape();
    one[std::size_t(ax)] = 1;
    Array count = ignore_nan ? sum(logical_not(isnan(x)), ax, true).astype(x.dtype()) : full(one, double(n), x.dtype());
    const Shape qs = v[1].shape();
    auto cat = [](Shape a1, const Shape& b) {
      a1.insert(a1.end(), b.begin(), b.end());
      return a1;
    };
    const Shape ones_q(qs.size(), 1);
    const Shape out = cat(qs, one);
    Array qf = broadcast_to(reshape(v[1].astype(x.dtype()), cat(qs, Shape(one.size(), 1))), out);
    Array cf = broadcast_to(reshape(count, cat(ones_q, one)), out);
    Array pos = qf * maximum(cf - 1.0, zeros_like(cf));
    Array lo = floor(pos), hi = ceil(pos);
    Array sb = broadcast_to(reshape(s, cat(ones_q, s.shape())), cat(qs, s.shape()));
    const int sax = int(qs.size()) + ax;
    auto at = [&](const Array& i) { return take_along_axis(sb, i.astype(DType::int32), sax, "clip"); };
    Array vlo, vhi;
    if (q_now && (x.dtype() == DType::float32 || x.dtype() == DType::float64)) {
      // pos = q * max(n - 1, 0) in x's dtype, as the graph computes it.
      std::int64_t ilo, ihi;
      if (x.dtype() == DType::float32) {
        const float p = float(*q_now) * std::max(float(n) - 1.0f, 0.0f);
        ilo = std::int64_t(std::floor(p)), ihi = std::int64_t(std::ceil(p));
      } else {
        const double p = *q_now * std::max(double(n) - 1.0, 0.0);
        ilo = std::int64_t(std::floor(p)), ihi = std::int64_t(std::ceil(p));
      }
      ilo = std::clamp<std::int64_t>(ilo, 0, n - 1), ihi = std::clamp<std::int64_t>(ihi, 0, n - 1);
      vlo = along(sb, sax, ilo, ilo + 1), vhi = along(sb, sax, ihi, ihi + 1);
    } else {
      vlo = at(lo), vhi = at(hi);
    }
    Array r;
    switch (m) {
      case Method::linear: r = where(vlo == vhi, vlo, vlo + (vhi - vlo) * (pos - lo)); break;  // inf stays inf
      case Method::lower: r = vlo; break;
      case Method::higher: r = vhi; break;
      case Method::nearest: r = where(pos - lo <= 0.5, vlo, vhi); break;  // JAX's: a tie takes the lower
      case Method::midpoint: r = where(vlo == vhi, vlo, (vlo + vhi) * 0.5); break;
    }
    Array bad = ignore_nan ? (cf == 0) : broadcast_to(reshape(any(isnan(x), ax, true), cat(ones_q, one)), out);
    r = where(bad, full_like(r, NAN), r);
    if (keepdims) {
      Shape k = orig;
      if (!axis) k.assign(orig.size(), 1);
      else k[std::size_t(ax)] = 1;
      return reshape(r, cat(qs, k));
    }
    return squeeze(r, sax);
  });
}
}  // namespace

Array quantile(const Array& a, const Array& q, std::optional<int> axis, const std::string& method, bool keepdims) {
  return quantile_impl(a, q, axis, method_of(method), keepdims, false, "tessel.quantile");
}
Array quantile(const Array& a, double q, std::optional<int> axis, const std::string& method, bool keepdims) {
  if (!(q >= 0 && q <= 1)) throw ValueError("quantile: q must be in [0, 1], got " + std::to_string(q));
  return quantile(a, array(q), axis, method, keepdims);
}
Array percentile(const Array& a, double q, std::optional<int> axis, const std::string& method, bool keepdims) {
  if (!(q >= 0 && q <= 100)) throw ValueError("percentile: q must be in [0, 100], got " + std::to_string(q));
  return quantile(a, array(q / 100.0), axis, method, keepdims);
}
Array median(const Array& a, std::optional<int> axis, bool keepdims) { return quantile(a, 0.5, axis, "midpoint", keepdims); }
Array nanquantile(const Array& a, double q, std::optional<int> axis, const std::string& method, bool keepdims) {
  if (!(q >= 0 && q <= 1)) throw ValueError("nanquantile: q must be in [0, 1], got " + std::to_string(q));
  return quantile_impl(a, array(q), axis, method_of(method), keepdims, true, "tessel.nanquantile");
}
Array nanpercentile(const Array& a, double q, std::optional<int> axis, const std::string& method, bool keepdims) {
  if (!(q >= 0 && q <= 100)) throw ValueError("nanpercentile: q must be in [0, 100], got " + std::to_string(q));
  return nanquantile(a, q / 100.0, axis, method, keepdims);
}
Array nanmedian(const Array& a, std::optional<int> axis, bool keepdims) {
  return quantile_impl(a, array(0.5), axis, Method::midpoint, keepdims, true, "tessel.nanmedian");
}

// ---------------------------------------------------------------- sets and indices
Array unique(const Array& x, UniqueOptions o) {
  if (!o.size) need_concrete(x, "unique", "size");
  if (o.size && *o.size < 0) throw ValueError("unique: size must be non-negative, got " + std::to_string(*o.size));
  const std::int64_t n = x.size();
  std::int64_t size;
  if (o.size) {
    size = *o.size;
  } else {
    Array s = sort(ravel(x), 0);
    size = n == 0 ? 0 : sum(detail::run_starts(s)).item<std::int64_t>();
  }
  return staged("tessel.unique", {x}, [=](const V& v) {
    Array s = sort(ravel(v[0]), 0);
    if (n == 0) return zeros({size}, v[0].dtype());
    Array f = detail::run_starts(s);
    Array slot = cumsum(f) - 1;
    Array where_to = where(f, slot, full_like(slot, double(size)));  // repeats go past the end: dropped
    Array fill = o.fill_value ? full({size}, *o.fill_value, s.dtype()) : broadcast_to(s[0], {size});
    return fill.at({where_to}).set(s);
  });
}
Array unique_values(const Array& x, UniqueOptions o) { return unique(x, o); }

std::vector<Array> nonzero(const Array& x, NonzeroOptions o) {
  if (x.ndim() == 0)
    throw ValueError("Calling nonzero on 0d arrays is not allowed. Use atleast_1d(scalar) first: nonzero(atleast_1d(x))");
  if (!o.size) need_concrete(x, "nonzero", "size");
  const std::int64_t n = x.size();
  const std::int64_t size = o.size ? *o.size : (n == 0 ? 0 : count_nonzero(x).item<std::int64_t>());
  const Shape shape = x.shape();
  const std::int64_t fill = o.fill_value;
  return detail::staged_many("tessel.nonzero", {x}, [=](const V& v) {
    Array m = ravel(v[0]) != 0;
    V out;
    if (n == 0) {
      for (size_t d = 0; d < std::max<size_t>(1, shape.size()); ++d) out.push_back(zeros({size}, DType::int32));
      return out;
    }
    Array slot = cumsum(m) - 1;
    Array where_to = where(m, slot, full_like(slot, double(size)));
    Array flat = full({size}, -1.0, DType::int32).at({where_to}).set(arange(0, n, 1, DType::int32));
    Array missing = flat < 0;
    // Row-major flat index -> one index per dim.
    std::int64_t stride = 1;
    std::vector<std::int64_t> strides(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= shape[d];
    }
    if (shape.empty()) {
      out.push_back(where(missing, full_like(flat, double(fill)), zeros_like(flat)));
      return out;
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      Array i = floor_divide(flat, int(strides[d])) % int(shape[d]);
      out.push_back(where(missing, full_like(i, double(fill)), i));
    }
    return out;
  });
}
Array argwhere(const Array& x, NonzeroOptions o) {
  auto idx = nonzero(x.ndim() == 0 ? reshape(x, {1}) : x, o);
  return stack(idx, -1);
}
Array flatnonzero(const Array& x, NonzeroOptions o) { return nonzero(ravel(x), o)[0]; }

}  // namespace tessel
