// Rules of the leaves (parameter, constant, iota) and of the data-movement
// family: broadcast_in_dim, reshape, transpose, slice, pad, concatenate,
// dynamic_slice, dynamic_update_slice. Index semantics are XLA's; dynamic
// starts are clamped so the window stays inside the operand.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/shape_rules.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

namespace {

std::string vec_str(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// Calls f(out_flat, out_index) for every element of `shape`, in row-major order.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  const std::int64_t n = numel(shape);
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t flat = 0; flat < n; ++flat) {
    f(flat, idx);
    for (int k = int(shape.size()) - 1; k >= 0; --k) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}

void copy_elem(const HostArray& from, std::int64_t i, HostArray& to, std::int64_t j) {
  const std::size_t es = dtype_size(to.dtype);
  std::memcpy(to.bytes.data() + j * es, from.bytes.data() + i * es, es);
}

std::int64_t scalar_index(const HostArray& s) { return std::int64_t(s.as_double(0)); }

}  // namespace

// ------------------------------------------------------------------ leaves

Aval Rule<Op::parameter>::infer(const std::vector<Aval>& in, const A& p, const Aval& declared) {
  expect_arity(Op::parameter, in, 0);
  if (p.index < 0) throw InternalError("parameter index is negative");
  return declared;
}
void Rule<Op::parameter>::eval(const std::vector<const HostArray*>&, const A& p, const Aval&, HostArray&) {
  throw InternalError(cat("parameter ", p.index, " is bound by the interpreter, never evaluated"));
}

Aval Rule<Op::constant>::infer(const std::vector<Aval>& in, const A& p, const Aval& declared) {
  expect_arity(Op::constant, in, 0);
  if (!p.value || p.value->dtype != declared.dtype || p.value->shape != declared.shape)
    throw InternalError("constant: the literal does not match the declared aval " + declared.str());
  return declared;
}
void Rule<Op::constant>::eval(const std::vector<const HostArray*>&, const A& p, const Aval&, HostArray& out) {
  out = *p.value;
}

Aval Rule<Op::iota>::infer(const std::vector<Aval>& in, const A& p, const Aval& declared) {
  expect_arity(Op::iota, in, 0);
  if (p.dimension < 0 || p.dimension >= std::int64_t(declared.shape.size()))
    throw ShapeError(cat("iota dimension ", p.dimension, " is out of range for shape ",
                         shape_str(declared.shape)));
  if (is_bool(declared.dtype)) throw TypeError("iota of dtype bool");
  return Aval{declared.dtype, declared.shape, false};
}
void Rule<Op::iota>::eval(const std::vector<const HostArray*>&, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = reinterpret_cast<T*>(out.bytes.data());
    for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) { y[f] = T(idx[p.dimension]); });
  });
}

// ------------------------------------------------------------------ broadcast, reshape, transpose

Aval Rule<Op::broadcast_in_dim>::infer(const std::vector<Aval>& in, const A& p, const Aval& declared) {
  expect_arity(Op::broadcast_in_dim, in, 1);
  const Shape& s = in[0].shape;
  const Shape& o = declared.shape;
  bool ok = p.dims.size() == s.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    std::int64_t d = p.dims[i];
    ok = d >= 0 && d < std::int64_t(o.size()) && (i == 0 || d > p.dims[i - 1]) && (s[i] == 1 || s[i] == o[d]);
  }
  if (!ok)
    throw ShapeError(cat("cannot broadcast shape ", shape_str(s), " to ", shape_str(o), " with dimensions ",
                         vec_str(p.dims)));
  return Aval{in[0].dtype, o, in[0].weak_type};
}
void Rule<Op::broadcast_in_dim>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                      HostArray& out) {
  rule_util::allocate(out, aval);
  const Shape& s = in[0]->shape;
  auto st = row_major_strides(s);
  for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (size_t i = 0; i < s.size(); ++i) src += (s[i] == 1 ? 0 : idx[p.dims[i]]) * st[i];
    copy_elem(*in[0], src, out, f);
  });
}

Aval Rule<Op::reshape>::infer(const std::vector<Aval>& in, const A&, const Aval& declared) {
  expect_arity(Op::reshape, in, 1);
  if (numel(in[0].shape) != numel(declared.shape))
    throw ShapeError(cat("cannot reshape an array of shape ", shape_str(in[0].shape), " (", numel(in[0].shape),
                         " elements) into shape ", shape_str(declared.shape), " (", numel(declared.shape),
                         " elements)"));
  return Aval{in[0].dtype, declared.shape, in[0].weak_type};
}
void Rule<Op::reshape>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, HostArray& out) {
  out = *in[0];
  out.shape = aval.shape;
}

Aval Rule<Op::transpose>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::transpose, in, 1);
  const Shape& s = in[0].shape;
  std::vector<std::int64_t> sorted = p.dims;
  std::sort(sorted.begin(), sorted.end());
  bool ok = sorted.size() == s.size();
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == std::int64_t(i);
  if (!ok) throw ShapeError(cat("transpose permutation ", vec_str(p.dims), " does not fit shape ", shape_str(s)));
  Shape o(s.size());
  for (size_t i = 0; i < s.size(); ++i) o[i] = s[p.dims[i]];
  return Aval{in[0].dtype, o, in[0].weak_type};
}
void Rule<Op::transpose>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                               HostArray& out) {
  rule_util::allocate(out, aval);
  auto st = row_major_strides(in[0]->shape);
  for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (size_t i = 0; i < idx.size(); ++i) src += idx[i] * st[p.dims[i]];
    copy_elem(*in[0], src, out, f);
  });
}

// rev: the order of the elements along `dims` reversed.
Aval Rule<Op::rev>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::rev, in, 1);
  std::set<std::int64_t> seen;
  for (auto d : p.dims)
    if (d < 0 || d >= std::int64_t(in[0].shape.size()) || !seen.insert(d).second)
      throw ShapeError(cat("reverse dimensions ", vec_str(p.dims), " do not fit shape ", shape_str(in[0].shape)));
  return in[0];
}
void Rule<Op::rev>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  auto st = row_major_strides(aval.shape);
  for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
      bool r = std::find(p.dims.begin(), p.dims.end(), std::int64_t(i)) != p.dims.end();
      src += (r ? aval.shape[i] - 1 - idx[i] : idx[i]) * st[i];
    }
    copy_elem(*in[0], src, out, f);
  });
}

// ------------------------------------------------------------------ slice, pad, concatenate

Aval Rule<Op::slice>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::slice, in, 1);
  const Shape& s = in[0].shape;
  bool ok = p.start.size() == s.size() && p.limit.size() == s.size() && p.stride.size() == s.size();
  Shape o(s.size());
  for (size_t i = 0; ok && i < s.size(); ++i) {
    ok = 0 <= p.start[i] && p.start[i] <= p.limit[i] && p.limit[i] <= s[i] && p.stride[i] >= 1;
    if (ok) o[i] = ceil_div(p.limit[i] - p.start[i], p.stride[i]);
  }
  if (!ok)
    throw ShapeError(cat("slice start ", vec_str(p.start), ", limit ", vec_str(p.limit), ", stride ", vec_str(p.stride),
                         " does not fit shape ", shape_str(s)));
  return Aval{in[0].dtype, o, in[0].weak_type};
}
void Rule<Op::slice>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                           HostArray& out) {
  rule_util::allocate(out, aval);
  auto st = row_major_strides(in[0]->shape);
  for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (size_t i = 0; i < idx.size(); ++i) src += (p.start[i] + idx[i] * p.stride[i]) * st[i];
    copy_elem(*in[0], src, out, f);
  });
}

Aval Rule<Op::pad>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::pad, in, 2);
  const Shape& s = in[0].shape;
  if (!in[1].shape.empty() || in[1].dtype != in[0].dtype)
    throw TypeError(cat("pad needs a scalar padding value of the operand's dtype, got ", avals_str(in)));
  bool ok = p.low.size() == s.size() && p.high.size() == s.size() && p.interior.size() == s.size();
  Shape o(s.size());
  for (size_t i = 0; ok && i < s.size(); ++i) {
    ok = p.interior[i] >= 0;
    o[i] = p.low[i] + p.high[i] + s[i] + std::max<std::int64_t>(0, s[i] - 1) * p.interior[i];
    ok = ok && o[i] >= 0;
  }
  if (!ok)
    throw ShapeError(cat("padding low ", vec_str(p.low), ", high ", vec_str(p.high), ", interior ", vec_str(p.interior),
                         " does not fit shape ", shape_str(s)));
  return Aval{in[0].dtype, o, in[0].weak_type};
}
void Rule<Op::pad>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  const Shape& s = in[0]->shape;
  auto st = row_major_strides(s);
  for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    bool inside = true;
    for (size_t i = 0; i < idx.size() && inside; ++i) {
      std::int64_t r = idx[i] - p.low[i];
      std::int64_t period = p.interior[i] + 1;
      if (r < 0 || r % period != 0 || r / period >= s[i]) inside = false;
      else src += (r / period) * st[i];
    }
    if (inside) copy_elem(*in[0], src, out, f);
    else copy_elem(*in[1], 0, out, f);
  });
}

Aval Rule<Op::concatenate>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (in.empty()) throw ShapeError("concatenate needs at least one array");
  const std::int64_t d = p.dimension;
  const Shape& s0 = in[0].shape;
  if (d < 0 || d >= std::int64_t(s0.size()))
    throw ShapeError(cat("concatenate dimension ", d, " is out of range for operands ", avals_str(in)));
  Shape o = s0;
  o[d] = 0;
  bool weak = true;
  for (auto& a : in) {
    bool ok = a.dtype == in[0].dtype && a.shape.size() == s0.size();
    for (size_t i = 0; ok && i < s0.size(); ++i) ok = std::int64_t(i) == d || a.shape[i] == s0[i];
    if (!ok)
      throw ShapeError(cat("concatenate along dimension ", d,
                           " needs operands of one dtype whose other dimensions agree, got ", avals_str(in)));
    o[d] += a.shape[d];
    weak = weak && a.weak_type;
  }
  return Aval{in[0].dtype, o, weak};
}
void Rule<Op::concatenate>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                 HostArray& out) {
  rule_util::allocate(out, aval);
  const std::int64_t d = p.dimension;
  for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t k = idx[d];
    size_t which = 0;
    while (k >= in[which]->shape[d]) k -= in[which++]->shape[d];
    auto st = row_major_strides(in[which]->shape);
    std::int64_t src = 0;
    for (size_t i = 0; i < idx.size(); ++i) src += (std::int64_t(i) == d ? k : idx[i]) * st[i];
    copy_elem(*in[which], src, out, f);
  });
}

// ------------------------------------------------------------------ dynamic slices

Aval Rule<Op::dynamic_slice>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  if (in.empty()) throw InternalError("dynamic_slice needs an operand");
  const Shape& s = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i)
    if (!is_integral(in[i].dtype) || is_bool(in[i].dtype))
      throw TypeError(cat("dynamic_slice start indices must be integers, got ", avals_str(in)));
  bool ok = in.size() == s.size() + 1 && p.sizes.size() == s.size();
  for (size_t i = 0; ok && i < s.size(); ++i)
    ok = in[i + 1].shape.empty() && 0 <= p.sizes[i] && p.sizes[i] <= s[i];
  if (in.size() != s.size() + 1)
    throw ShapeError(cat("dynamic_slice of an array of rank ", s.size(), " needs ", s.size(), " start indices, got ",
                         in.size() - 1, ": ", avals_str(in)));
  if (!ok)
    throw ShapeError(cat("dynamic_slice of sizes ", vec_str(p.sizes), " needs one integer scalar start per dimension of ",
                         shape_str(s), ", got ", avals_str(in)));
  return Aval{in[0].dtype, p.sizes, in[0].weak_type};
}
void Rule<Op::dynamic_slice>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                   HostArray& out) {
  rule_util::allocate(out, aval);
  const Shape& s = in[0]->shape;
  auto st = row_major_strides(s);
  std::vector<std::int64_t> start(s.size());
  for (size_t i = 0; i < s.size(); ++i) start[i] = std::clamp<std::int64_t>(scalar_index(*in[i + 1]), 0, s[i] - p.sizes[i]);
  for_each_index(aval.shape, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (size_t i = 0; i < idx.size(); ++i) src += (start[i] + idx[i]) * st[i];
    copy_elem(*in[0], src, out, f);
  });
}

Aval Rule<Op::dynamic_update_slice>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  if (in.size() < 2) throw InternalError("dynamic_update_slice needs an operand and an update");
  const Shape& s = in[0].shape;
  const Shape& u = in[1].shape;
  if (in[0].dtype != in[1].dtype)
    throw TypeError(cat("dynamic_update_slice update must have the operand's dtype, got ", avals_str(in)));
  for (size_t i = 2; i < in.size(); ++i)
    if (!is_integral(in[i].dtype) || is_bool(in[i].dtype))
      throw TypeError(cat("dynamic_update_slice start indices must be integers, got ", avals_str(in)));
  bool ok = in.size() == s.size() + 2 && u.size() == s.size();
  for (size_t i = 0; ok && i < s.size(); ++i) ok = u[i] <= s[i] && in[i + 2].shape.empty();
  if (!ok)
    throw ShapeError(cat("dynamic_update_slice needs an update no larger than the operand, of its dtype, and one "
                         "integer scalar start per dimension, got ",
                         avals_str(in)));
  return Aval{in[0].dtype, s, in[0].weak_type};
}
void Rule<Op::dynamic_update_slice>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval,
                                          HostArray& out) {
  out = *in[0];
  out.shape = aval.shape;
  const Shape& s = in[0]->shape;
  const Shape& u = in[1]->shape;
  auto st = row_major_strides(s);
  std::vector<std::int64_t> start(s.size());
  for (size_t i = 0; i < s.size(); ++i) start[i] = std::clamp<std::int64_t>(scalar_index(*in[i + 2]), 0, s[i] - u[i]);
  for_each_index(u, [&](std::int64_t f, const std::vector<std::int64_t>& idx) {
    std::int64_t dst = 0;
    for (size_t i = 0; i < idx.size(); ++i) dst += (start[i] + idx[i]) * st[i];
    copy_elem(*in[1], f, out, dst);
  });
}

// ------------------------------------------------------------------ sharding rules

FactorRule Rule<Op::parameter>::factors(const Node& n) { return rule_util::leaf_factors(n); }
FactorRule Rule<Op::constant>::factors(const Node& n) { return rule_util::leaf_factors(n); }
FactorRule Rule<Op::iota>::factors(const Node& n) { return rule_util::leaf_factors(n); }

FactorRule Rule<Op::broadcast_in_dim>::factors(const Node& n) {
  FactorRule r;
  for (auto d : n.shape()) r.result.push_back({r.add_factor(d)});
  std::vector<std::vector<int>> op;
  const Shape& s = n.in[0]->shape();
  for (size_t i = 0; i < s.size(); ++i)
    op.push_back(s[i] == n.shape()[attrs_of(n).dims[i]] ? std::vector<int>{int(attrs_of(n).dims[i])} : std::vector<int>{});
  r.operands.push_back(op);
  return r;
}

FactorRule Rule<Op::transpose>::factors(const Node& n) {
  FactorRule r;
  for (auto d : n.shape()) r.result.push_back({r.add_factor(d)});
  std::vector<std::vector<int>> op(n.rank());
  for (int i = 0; i < n.rank(); ++i) op[attrs_of(n).dims[i]] = {i};
  r.operands.push_back(op);
  return r;
}

// A reshape as splits and merges of common factors; when the dims do not
// nest (e.g. (2, 3) -> (3, 2)) every dim must be replicated.
FactorRule Rule<Op::reshape>::factors(const Node& n) {
  const Shape& in = n.in[0]->shape();
  const Shape& out = n.shape();
  // An empty array has nothing to split (and its zero sizes divide nothing).
  if (numel(in) == 0 || numel(out) == 0) return rule_util::replicated_factors(n);
  FactorRule r;
  std::vector<std::vector<int>> op(in.size());
  r.result.assign(out.size(), {});
  size_t i = 0, j = 0;
  std::int64_t ri = 0, rj = 0;
  auto next = [](const Shape& s, size_t& k, std::int64_t& rem) {
    while (k < s.size() && s[k] == 1) ++k;
    rem = k < s.size() ? s[k] : 0;
  };
  next(in, i, ri);
  next(out, j, rj);
  while (i < in.size() && j < out.size()) {
    std::int64_t f;
    if (ri == rj) f = ri;
    else if (ri < rj && rj % ri == 0) f = ri;
    else if (rj < ri && ri % rj == 0) f = rj;
    else return rule_util::replicated_factors(n);
    int id = r.add_factor(f);
    op[i].push_back(id);
    r.result[j].push_back(id);
    ri /= f;
    rj /= f;
    if (ri == 1) ++i, next(in, i, ri);
    if (rj == 1) ++j, next(out, j, rj);
  }
  r.operands.push_back(op);
  return r;
}

namespace {
// Dims that keep their full extent share a factor; others are replicated.
// split_window: the operand's dims that are not whole may stay split (the
// partition rule gathers only the window: slice's).
FactorRule windowed(const Node& n, const std::vector<bool>& whole, bool split_window = false) {
  FactorRule r;
  std::vector<std::vector<int>> op;
  for (int d = 0; d < n.rank(); ++d) {
    if (whole[d]) {
      int f = r.add_factor(n.shape()[d]);
      op.push_back({f});
      r.result.push_back({f});
    } else {
      op.push_back({r.add_factor(n.in[0]->shape()[d], false, !split_window)});
      r.result.push_back({r.add_factor(n.shape()[d], false, true)});
    }
  }
  r.operands.push_back(op);
  return r;
}
void scalar_operands(FactorRule& r, const Node& n, size_t from) {
  for (size_t k = from; k < n.in.size(); ++k) r.operands.push_back({});
}
}  // namespace

FactorRule Rule<Op::rev>::factors(const Node& n) {
  std::vector<bool> whole(n.rank(), true);
  for (auto d : attrs_of(n).dims) whole[d] = false;
  return windowed(n, whole);
}

// A slice's dim that keeps most of the operand's (stride 1, at least half):
// a shift, whose result stays split like its operand (its factor is
// shared; the partition rule brings each tile's missing rows from the next
// device: a halo exchange). Likewise a strided slice taking every s-th row
// from one of the first 2s rows over at least half the dim, into at least 8
// rows (a pooling window's tap): where each tile holds s times the result's,
// a device's result rows come from its own tile and the next tile's first rows.
bool slice_dim_shifted(const Node& n, int d) {
  const auto& p = n.attr<attr::Slice>();
  const std::size_t u = std::size_t(d);
  const std::int64_t len = n.in[0]->shape()[u], s = p.stride[u], k = p.limit[u] - p.start[u];
  if (s == 1) return k < len && 2 * k >= len;
  const std::int64_t rows = n.shape()[u];
  // At least 8 result rows: a short dim (a parallel prefix's block totals,
  // one row a device) rarely lines up, and gathering it whole keeps what
  // follows replicated (associative_scan moved 504 bytes a device, not 384).
  return s <= 8 && p.start[u] < 2 * s && rows >= 8 && 2 * rows * s >= len;
}


FactorRule Rule<Op::slice>::factors(const Node& n) {
  std::vector<bool> whole(n.rank());
  for (int d = 0; d < n.rank(); ++d) whole[d] = attrs_of(n).start[d] == 0 && attrs_of(n).limit[d] == n.in[0]->shape()[d] && attrs_of(n).stride[d] == 1;
  FactorRule r = windowed(n, whole, true);
  for (int d = 0; d < n.rank(); ++d)
    if (slice_dim_shifted(n, d)) {
      const int f = r.add_factor(n.shape()[std::size_t(d)]);  // the smaller side bounds the split
      r.operands[0][std::size_t(d)] = {f};
      r.result[std::size_t(d)] = {f};
    }
  return r;
}

FactorRule Rule<Op::pad>::factors(const Node& n) {
  std::vector<bool> whole(n.rank());
  for (int d = 0; d < n.rank(); ++d) whole[d] = attrs_of(n).low[d] == 0 && attrs_of(n).high[d] == 0 && attrs_of(n).interior[d] == 0;
  FactorRule r = windowed(n, whole);
  scalar_operands(r, n, 1);
  return r;
}

FactorRule Rule<Op::dynamic_slice>::factors(const Node& n) {
  std::vector<bool> whole(n.rank());
  for (int d = 0; d < n.rank(); ++d) whole[d] = n.shape()[d] == n.in[0]->shape()[d];
  FactorRule r = windowed(n, whole);
  scalar_operands(r, n, 1);
  return r;
}

// The operand and the result share every dim's factor: a split dim stays
// split (the partition rule writes each tile's part of the window). The
// update shares the dims it covers whole; its others are replicated.
FactorRule Rule<Op::dynamic_update_slice>::factors(const Node& n) {
  FactorRule r;
  std::vector<std::vector<int>> op, upd;
  for (int d = 0; d < n.rank(); ++d) {
    const int f = r.add_factor(n.shape()[std::size_t(d)]);
    op.push_back({f});
    r.result.push_back({f});
    const std::int64_t u = n.in[1]->shape()[std::size_t(d)];
    upd.push_back(u == n.shape()[std::size_t(d)] ? std::vector<int>{f} : std::vector<int>{r.add_factor(u, false, true)});
  }
  r.operands.push_back(op);
  r.operands.push_back(upd);
  scalar_operands(r, n, 2);
  return r;
}

FactorRule Rule<Op::concatenate>::factors(const Node& n) {
  FactorRule r;
  const std::int64_t cd = attrs_of(n).dimension;
  for (int d = 0; d < n.rank(); ++d) r.result.push_back({r.add_factor(n.shape()[d], false, d == cd)});
  for (auto& x : n.in) {
    std::vector<std::vector<int>> op;
    for (int d = 0; d < n.rank(); ++d)
      op.push_back(d == cd ? std::vector<int>{r.add_factor(x->shape()[d], false, true)} : r.result[d]);
    r.operands.push_back(op);
  }
  return r;
}

// ------------------------------------------------------------------ autodiff

TESSEL_NO_DERIVATIVE(parameter)
TESSEL_NO_DERIVATIVE(constant)
TESSEL_NO_DERIVATIVE(iota)

// Data movement is linear: the tangent moves the same way; the transpose
// moves cotangents back.
NodeRef Rule<Op::broadcast_in_dim>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                        const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::broadcast_in_dim(t, tx[0], n.shape(), attrs_of(n).dims) : nullptr;
}
void Rule<Op::broadcast_in_dim>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                           std::vector<NodeRef>& cts) {
  cts[0] = ad::unbroadcast(t, ct, n.in[0]->shape(), attrs_of(n).dims);
}

NodeRef Rule<Op::reshape>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                               const NodeRef&) {
  return tx[0] ? build::reshape(t, tx[0], n.shape()) : nullptr;
}
void Rule<Op::reshape>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                  std::vector<NodeRef>& cts) {
  cts[0] = build::reshape(t, ct, n.in[0]->shape());
}

NodeRef Rule<Op::transpose>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                 const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::transpose(t, tx[0], attrs_of(n).dims) : nullptr;
}
void Rule<Op::transpose>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                    std::vector<NodeRef>& cts) {
  std::vector<std::int64_t> inv(attrs_of(n).dims.size());
  for (size_t i = 0; i < inv.size(); ++i) inv[attrs_of(n).dims[i]] = std::int64_t(i);
  cts[0] = build::transpose(t, ct, inv);
}

NodeRef Rule<Op::rev>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return tx[0] ? build::rev(t, tx[0], attrs_of(n).dims) : nullptr;
}
void Rule<Op::rev>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                              std::vector<NodeRef>& cts) {
  cts[0] = build::rev(t, ct, attrs_of(n).dims);
}

NodeRef Rule<Op::slice>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                             const NodeRef&) {
  return tx[0] ? build::slice(t, tx[0], attrs_of(n).start, attrs_of(n).limit, attrs_of(n).stride) : nullptr;
}
void Rule<Op::slice>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                std::vector<NodeRef>& cts) {
  // Zeros around the slice, and between its strided elements.
  const Shape& s = n.in[0]->shape();
  std::vector<std::int64_t> lo = attrs_of(n).start, hi(s.size()), interior(s.size());
  for (size_t d = 0; d < s.size(); ++d) {
    std::int64_t len = n.shape()[d];
    std::int64_t last = len ? attrs_of(n).start[d] + (len - 1) * attrs_of(n).stride[d] : attrs_of(n).start[d] - 1;
    hi[d] = s[d] - 1 - last;
    interior[d] = attrs_of(n).stride[d] - 1;
    if (len == 0) lo[d] = 0, hi[d] = s[d], interior[d] = 0;
  }
  cts[0] = build::pad(t, ct, build::scalar(t, ct->dtype(), 0), lo, hi, interior);
}

NodeRef Rule<Op::pad>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  if (!tx[0] && !tx[1]) return nullptr;
  NodeRef op = tx[0] ? tx[0] : ad::zeros_like(t, x[0]);
  NodeRef val = tx[1] ? tx[1] : build::scalar(t, x[1]->dtype(), 0);
  return build::pad(t, op, val, attrs_of(n).low, attrs_of(n).high, attrs_of(n).interior);
}
void Rule<Op::pad>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                              std::vector<NodeRef>& cts) {
  // Undo negative padding with zeros, then take the operand's elements.
  const int r = n.rank();
  std::vector<std::int64_t> plo(r, 0), phi(r, 0), lo(r), hi(r), step(r);
  for (int d = 0; d < r; ++d) {
    plo[d] = std::max<std::int64_t>(0, -attrs_of(n).low[d]);
    phi[d] = std::max<std::int64_t>(0, -attrs_of(n).high[d]);
  }
  NodeRef c = build::pad(t, ct, build::scalar(t, ct->dtype(), 0), plo, phi);
  for (int d = 0; d < r; ++d) {
    lo[d] = std::max<std::int64_t>(0, attrs_of(n).low[d]);
    step[d] = attrs_of(n).interior[d] + 1;
    hi[d] = lo[d] + (n.in[0]->shape()[d] - 1) * step[d] + 1;
    if (n.in[0]->shape()[d] == 0) hi[d] = lo[d];
  }
  NodeRef op_ct = build::slice(t, c, lo, hi, step);
  if (linear[0]) cts[0] = op_ct;
  if (linear[1]) {
    std::vector<std::int64_t> all(r);
    for (int d = 0; d < r; ++d) all[d] = d;
    NodeRef total = build::reduce(t, Op::reduce_sum, ct, all);
    NodeRef inner = build::reduce(t, Op::reduce_sum, op_ct, all);
    cts[1] = build::binary(t, Op::sub, total, inner);
  }
}

NodeRef Rule<Op::concatenate>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                   const std::vector<NodeRef>& tx, const NodeRef&) {
  auto parts = ad::dense_tangents(t, x, tx);
  return parts.empty() ? nullptr : build::concatenate(t, parts, attrs_of(n).dimension);
}
void Rule<Op::concatenate>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                      std::vector<NodeRef>& cts) {
  const std::int64_t d = attrs_of(n).dimension;
  std::int64_t off = 0;
  for (size_t k = 0; k < n.in.size(); ++k) {
    std::int64_t len = n.in[k]->shape()[d];
    if (linear[k]) {
      std::vector<std::int64_t> lo(n.rank(), 0), hi = ct->shape();
      lo[d] = off;
      hi[d] = off + len;
      cts[k] = build::slice(t, ct, lo, hi);
    }
    off += len;
  }
}

NodeRef Rule<Op::dynamic_slice>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                     const std::vector<NodeRef>& tx, const NodeRef&) {
  if (!tx[0]) return nullptr;
  return build::dynamic_slice(t, tx[0], std::vector<NodeRef>(x.begin() + 1, x.end()), attrs_of(n).sizes);
}
void Rule<Op::dynamic_slice>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                        std::vector<NodeRef>& cts) {
  cts[0] = build::dynamic_update_slice(t, ad::zeros_like(t, n.in[0]), ct,
                                       std::vector<NodeRef>(n.in.begin() + 1, n.in.end()));
}

NodeRef Rule<Op::dynamic_update_slice>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x,
                                            const std::vector<NodeRef>& tx, const NodeRef&) {
  if (!tx[0] && !tx[1]) return nullptr;
  return build::dynamic_update_slice(t, tx[0] ? tx[0] : ad::zeros_like(t, x[0]), tx[1] ? tx[1] : ad::zeros_like(t, x[1]),
                                     std::vector<NodeRef>(x.begin() + 2, x.end()));
}
void Rule<Op::dynamic_update_slice>::transpose(NodeTable& t, const Node& n, const NodeRef& ct,
                                               const std::vector<bool>& linear, std::vector<NodeRef>& cts) {
  std::vector<NodeRef> starts(n.in.begin() + 2, n.in.end());
  if (linear[0]) cts[0] = build::dynamic_update_slice(t, ct, ad::zeros_like(t, n.in[1]), starts);
  if (linear[1]) cts[1] = build::dynamic_slice(t, ct, starts, n.in[1]->shape());
}


// ------------------------------------------------------------------ batching
// The batch dimension leads; each rule shifts its dims past it.

TESSEL_BATCH_NEVER(parameter)
TESSEL_BATCH_NEVER(constant)
TESSEL_BATCH_NEVER(iota)

NodeRef Rule<Op::broadcast_in_dim>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                          const std::vector<bool>&, const BatchInfo& b) {
  Shape s = n.shape();
  s.insert(s.begin(), b.size);
  std::vector<std::int64_t> dims{0};
  for (auto d : attrs_of(n).dims) dims.push_back(d + 1);
  return build::broadcast_in_dim(t, x[0], s, dims);
}
NodeRef Rule<Op::reshape>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                                 const BatchInfo& b) {
  Shape s = n.shape();
  s.insert(s.begin(), b.size);
  return build::reshape(t, x[0], s);
}
NodeRef Rule<Op::transpose>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                   const std::vector<bool>&, const BatchInfo&) {
  std::vector<std::int64_t> perm{0};
  for (auto d : attrs_of(n).dims) perm.push_back(d + 1);
  return build::transpose(t, x[0], perm);
}
NodeRef Rule<Op::rev>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                             const BatchInfo&) {
  return build::rev(t, x[0], bt::shifted(attrs_of(n).dims));
}
NodeRef Rule<Op::slice>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                               const BatchInfo& b) {
  const auto& a = attrs_of(n);
  std::vector<std::int64_t> start{0}, limit{b.size}, stride{1};
  start.insert(start.end(), a.start.begin(), a.start.end());
  limit.insert(limit.end(), a.limit.begin(), a.limit.end());
  stride.insert(stride.end(), a.stride.begin(), a.stride.end());
  return build::slice(t, x[0], start, limit, stride);
}
NodeRef Rule<Op::pad>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                             const BatchInfo& b) {
  if (batched[1]) return bt::by_map(t, n, x, batched, b);  // a padding value per example
  const auto& a = attrs_of(n);
  std::vector<std::int64_t> low{0}, high{0}, interior{0};
  low.insert(low.end(), a.low.begin(), a.low.end());
  high.insert(high.end(), a.high.begin(), a.high.end());
  interior.insert(interior.end(), a.interior.begin(), a.interior.end());
  return build::pad(t, x[0], x[1], low, high, interior);
}
NodeRef Rule<Op::concatenate>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                     const std::vector<bool>& batched, const BatchInfo& b) {
  return build::concatenate(t, bt::all_batched(t, x, batched, b), attrs_of(n).dimension + 1);
}
NodeRef Rule<Op::dynamic_slice>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                       const std::vector<bool>& batched, const BatchInfo& b) {
  for (size_t k = 1; k < x.size(); ++k)
    if (batched[k]) return bt::by_map(t, n, x, batched, b);  // a start per example
  std::vector<NodeRef> starts{build::scalar(t, x.size() > 1 ? x[1]->dtype() : DType::int32, 0)};
  starts.insert(starts.end(), x.begin() + 1, x.end());
  Shape sizes = attrs_of(n).sizes;
  sizes.insert(sizes.begin(), b.size);
  return build::dynamic_slice(t, x[0], starts, sizes);
}
NodeRef Rule<Op::dynamic_update_slice>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                              const std::vector<bool>& batched, const BatchInfo& b) {
  for (size_t k = 2; k < x.size(); ++k)
    if (batched[k]) return bt::by_map(t, n, x, batched, b);
  std::vector<NodeRef> starts{build::scalar(t, x.size() > 2 ? x[2]->dtype() : DType::int32, 0)};
  starts.insert(starts.end(), x.begin() + 2, x.end());
  return build::dynamic_update_slice(t, bt::batched(t, x[0], batched[0], b), bt::batched(t, x[1], batched[1], b), starts);
}

}  // namespace tessel
