// Rules of the reductions (sum, max, min, prod over axes; argmax and argmin
// over one axis) and of dot_general.
//
// The reference kernels accumulate floating sums and products in double and
// round once: the compiled code, which accumulates in the dtype in another
// order, is compared against them with a tolerance.
#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>
#include <set>
#include <type_traits>

#include "tracer/accumulator.hpp"
#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
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

Shape reduced_shape(Op op, const Aval& x, const std::vector<std::int64_t>& axes) {
  std::set<std::int64_t> seen;
  for (auto a : axes)
    if (a < 0 || a >= std::int64_t(x.shape.size()) || !seen.insert(a).second)
      throw ShapeError(cat(op_name(op), " axes ", vec_str(axes), " are out of range or repeated for shape ",
                           shape_str(x.shape)));
  Shape o;
  for (size_t i = 0; i < x.shape.size(); ++i)
    if (!seen.count(std::int64_t(i))) o.push_back(x.shape[i]);
  return o;
}

// Calls f(out_flat, in_flat) for every input element, out_flat being the
// element of the reduced output it folds into.
template <class F>
void for_each_reduced(const Shape& in, const std::vector<std::int64_t>& axes, F&& f) {
  std::vector<bool> reduced(in.size(), false);
  for (auto a : axes) reduced[a] = true;
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!reduced[i]) out.push_back(in[i]);
  auto ost = row_major_strides(out);
  std::vector<std::int64_t> idx(in.size(), 0);
  const std::int64_t n = numel(in);
  for (std::int64_t flat = 0; flat < n; ++flat) {
    std::int64_t o = 0;
    for (size_t i = 0, k = 0; i < in.size(); ++i)
      if (!reduced[i]) o += idx[i] * ost[k++];
    f(o, flat);
    for (int k = int(in.size()) - 1; k >= 0; --k) {
      if (++idx[k] < in[k]) break;
      idx[k] = 0;
    }
  }
}

Aval reduce_infer(Op op, const std::vector<Aval>& in, const attr::Dimensions& p, bool numeric_only) {
  expect_arity(op, in, 1);
  if (numeric_only && is_bool(in[0].dtype))
    throw TypeError(cat(op_name(op), " of a boolean array; convert it first, got ", avals_str(in)));
  if (is_complex(in[0].dtype) && (op == Op::reduce_max || op == Op::reduce_min))
    throw TypeError(cat(op_name(op), " of a complex array: complex numbers are not ordered, got ", avals_str(in)));
  if (op == Op::reduce_sum) check_summable(op, in);
  return Aval{in[0].dtype, reduced_shape(op, in[0], p.dims), in[0].weak_type};
}

}  // namespace

void check_summable(Op op, const std::vector<Aval>& in) {
  for (const Aval& a : in)
    if (a.dtype == DType::float8_e8m0fnu)
      throw TypeError(cat(op_name(op), " of ", avals_str(in), ": float8_e8m0fnu has no zero (0 converts to NaN), ",
                          "so its sums are not defined; convert to float32 first (x.astype(ts::float32))"));
}

std::vector<std::int64_t> reduced_axes(const Node& n) {
  if (n.op == Op::argmax || n.op == Op::argmin) return {n.attr<attr::ArgReduce>().dimension};
  return n.attr<attr::Dimensions>().dims;
}

Literal reduction_identity(Op op, DType t) {
  Literal l;
  l.dtype = t;
  l.bytes.resize(dtype_size(t));
  // Every dtype, the narrow floats too: padding identities are exact per dtype
  // (float8_e4m3fn has no infinity: its max identity is its lowest, -448).
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T v{};
    if constexpr (is_complex_v<T>) {
      switch (op) {
        case Op::reduce_sum: case Op::add: v = T(0); break;
        case Op::reduce_prod: case Op::mul: v = T(1); break;
        default: TESSEL_CHECK_INTERNAL(false, "no reduction identity for ", op_name(op), " of complex values");
      }
    } else {
      using L = std::numeric_limits<T>;
      switch (op) {
        case Op::reduce_sum: case Op::add:
          TESSEL_CHECK_INTERNAL(t != DType::float8_e8m0fnu, "float8_e8m0fnu has no additive identity");
          v = T(0);
          break;
        case Op::reduce_prod: case Op::mul: v = T(1); break;
        case Op::reduce_max: case Op::max: case Op::argmax: v = L::has_infinity ? T(-L::infinity()) : L::lowest(); break;
        case Op::reduce_min: case Op::min: case Op::argmin: v = L::has_infinity ? L::infinity() : L::max(); break;
        default: TESSEL_CHECK_INTERNAL(false, "no reduction identity for ", op_name(op));
      }
    }
    std::memcpy(l.bytes.data(), &v, sizeof(T));
  });
  return l;
}

namespace {

// kind: 0 sum, 1 prod, 2 max, 3 min
void reduce_eval(int kind, const HostArray& x, const attr::Dimensions& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  visit_wide_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const std::int64_t n_out = numel(aval.shape);
    std::vector<A> acc(n_out);
    const Literal id = reduction_identity(kind == 0 ? Op::add : kind == 1 ? Op::mul : kind == 2 ? Op::max : Op::min, x.dtype);
    T id_value;
    std::memcpy(&id_value, id.bytes.data(), sizeof(T));
    const A init = A(id_value);
    std::fill(acc.begin(), acc.end(), init);
    const T* v = reinterpret_cast<const T*>(x.bytes.data());
    for_each_reduced(x.shape, p.dims, [&](std::int64_t o, std::int64_t i) {
      A e = A(v[i]);
      if (kind == 0) {
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
          acc[o] = A(wrap_unsigned_t<T>(acc[o]) + wrap_unsigned_t<T>(e));
        else
          acc[o] = A(acc[o] + e);
      } else if (kind == 1) {
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
          acc[o] = A(wrap_unsigned_t<T>(acc[o]) * wrap_unsigned_t<T>(e));
        else
          acc[o] = A(acc[o] * e);
      } else if constexpr (is_complex_v<T>) {
        throw InternalError("max/min of complex values");
      } else {
        bool nan_e = false, nan_a = false;
        if constexpr (std::is_floating_point_v<T>) nan_e = std::isnan(e), nan_a = std::isnan(acc[o]);
        if (nan_a) return;
        if (nan_e || (kind == 2 ? e > acc[o] : e < acc[o])) acc[o] = e;
      }
    });
    T* y = reinterpret_cast<T*>(out.bytes.data());
    for (std::int64_t i = 0; i < n_out; ++i) y[i] = T(acc[i]);
  });
}

Aval arg_infer(Op op, const std::vector<Aval>& in, const attr::ArgReduce& p) {
  expect_arity(op, in, 1);
  if (!is_integral(p.index_dtype)) throw TypeError(cat(op_name(op), " index dtype must be an integer"));
  if (is_complex(in[0].dtype))
    throw TypeError(cat(op_name(op), " of a complex array: complex numbers are not ordered, got ", avals_str(in)));
  return Aval{p.index_dtype, reduced_shape(op, in[0], {p.dimension}), false};
}

// First index of the max (min); NaN counts as the max (min), first NaN wins.
void arg_eval(bool is_max, const HostArray& x, const attr::ArgReduce& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  const std::int64_t axis = p.dimension;
  const std::int64_t stride = row_major_strides(x.shape)[axis];
  visit_wide_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t n_out = numel(aval.shape);
    std::vector<std::int64_t> best(n_out, -1);
    std::vector<T> best_v(n_out);
    const T* v = reinterpret_cast<const T*>(x.bytes.data());
    for_each_reduced(x.shape, {axis}, [&](std::int64_t o, std::int64_t i) {
      T e = v[i];
      std::int64_t k = (i / stride) % x.shape[axis];
      if (best[o] < 0) {
        best[o] = k, best_v[o] = e;
        return;
      }
      if constexpr (is_complex_v<T>) {
        throw InternalError("argmax/argmin of complex values");
      } else {
        bool cur_nan = false, e_nan = false;
        if constexpr (std::is_floating_point_v<T>) cur_nan = std::isnan(best_v[o]), e_nan = std::isnan(e);
        if (cur_nan) return;
        if (e_nan || (is_max ? e > best_v[o] : e < best_v[o])) best[o] = k, best_v[o] = e;
      }
    });
    visit_wide_dtype(aval.dtype, [&](auto itag) {
      using I = decltype(itag);
      I* y = reinterpret_cast<I*>(out.bytes.data());
      for (std::int64_t i = 0; i < n_out; ++i) y[i] = I(std::max<std::int64_t>(best[i], 0));
    });
  });
}

}  // namespace

Aval Rule<Op::reduce_sum>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  return reduce_infer(Op::reduce_sum, in, p, true);
}
void Rule<Op::reduce_sum>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& a, HostArray& out) {
  reduce_eval(0, *in[0], p, a, out);
}
Aval Rule<Op::reduce_prod>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  return reduce_infer(Op::reduce_prod, in, p, true);
}
void Rule<Op::reduce_prod>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& a,
                                 HostArray& out) {
  reduce_eval(1, *in[0], p, a, out);
}
Aval Rule<Op::reduce_max>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  return reduce_infer(Op::reduce_max, in, p, false);
}
void Rule<Op::reduce_max>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& a, HostArray& out) {
  reduce_eval(2, *in[0], p, a, out);
}
Aval Rule<Op::reduce_min>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  return reduce_infer(Op::reduce_min, in, p, false);
}
void Rule<Op::reduce_min>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& a, HostArray& out) {
  reduce_eval(3, *in[0], p, a, out);
}
Aval Rule<Op::argmax>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  return arg_infer(Op::argmax, in, p);
}
void Rule<Op::argmax>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& a, HostArray& out) {
  arg_eval(true, *in[0], p, a, out);
}
Aval Rule<Op::argmin>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  return arg_infer(Op::argmin, in, p);
}
void Rule<Op::argmin>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& a, HostArray& out) {
  arg_eval(false, *in[0], p, a, out);
}

// ------------------------------------------------------------------ sharding rules of reductions

namespace {
// Kept dims are common factors; reduced dims are reduction factors (partial
// results combine with `combine`), or replicated when they cannot combine.
FactorRule reduce_factors(const Node& n, bool combinable, Op combine) {
  FactorRule r;
  const Shape& s = n.in[0]->shape();
  std::vector<std::vector<int>> op;
  for (int d = 0; d < int(s.size()); ++d) {
    const auto axes = reduced_axes(n);
    bool red = std::find(axes.begin(), axes.end(), d) != axes.end();
    int f = r.add_factor(s[d], red && combinable, red && !combinable);
    op.push_back({f});
    if (!red) r.result.push_back({f});
  }
  r.operands.push_back(op);
  r.reduce_op = combine;
  return r;
}
}  // namespace

FactorRule Rule<Op::reduce_sum>::factors(const Node& n) { return reduce_factors(n, true, Op::add); }
FactorRule Rule<Op::reduce_max>::factors(const Node& n) { return reduce_factors(n, true, Op::max); }
FactorRule Rule<Op::reduce_min>::factors(const Node& n) { return reduce_factors(n, true, Op::min); }
// A product of partial products would be right, but there is no product collective.
FactorRule Rule<Op::reduce_prod>::factors(const Node& n) { return reduce_factors(n, false, Op::mul); }
FactorRule Rule<Op::argmax>::factors(const Node& n) { return reduce_factors(n, false, Op::max); }
FactorRule Rule<Op::argmin>::factors(const Node& n) { return reduce_factors(n, false, Op::min); }

// ------------------------------------------------------------------ sort

// sort(keys, values): values reordered along dims[0] as a stable sort of the
// keys orders them (lax.sort_key_val's values).
Aval Rule<Op::sort>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::sort, in, 2);
  if (in[0].shape != in[1].shape) throw ShapeError(cat("sort needs keys and values of one shape, got ", avals_str(in)));
  if (is_complex(in[0].dtype))
    throw NotImplementedError(cat("sorting by complex keys is not implemented, got ", avals_str(in)));
  if (p.dimension < 0 || p.dimension >= std::int64_t(in[0].shape.size()))
    throw ShapeError(cat("sort dimension out of range for ", avals_str(in)));
  return in[1];
}

void Rule<Op::sort>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  sort_lines(in[0]->dtype, aval.dtype, aval.shape, p.dimension, in[0]->bytes.data(), in[1]->bytes.data(), out.bytes.data());
}
// Every dim a factor shared by keys, values and result, the sorted one too:
// a split of it is handled by the partition rule below.
FactorRule Rule<Op::sort>::factors(const Node& n) {
  FactorRule r;
  std::vector<std::vector<int>> dims;
  for (int d = 0; d < n.rank(); ++d) dims.push_back({r.add_factor(n.shape()[d])});
  r.operands = {dims, dims};
  r.result = dims;
  return r;
}

// ------------------------------------------------------------------ dot_general

namespace {
// Free (neither batch nor contracting) dims of an operand of rank r, in order.
std::vector<std::int64_t> free_dims(int r, const std::vector<std::int64_t>& batch,
                                    const std::vector<std::int64_t>& contract) {
  std::vector<std::int64_t> f;
  for (std::int64_t i = 0; i < r; ++i)
    if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
        std::find(contract.begin(), contract.end(), i) == contract.end())
      f.push_back(i);
  return f;
}
}  // namespace

Aval Rule<Op::dot_general>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::dot_general, in, 2);
  const auto& d = p.dims;
  const Shape &a = in[0].shape, &b = in[1].shape;
  auto bad = [&](const std::string& why) {
    return ShapeError(cat("dot_general ", why, ": lhs ", aval_str(in[0].dtype, in[0].shape), ", rhs ",
                          aval_str(in[1].dtype, in[1].shape), ", contracting ",
                          vec_str(d.lhs_contract), " x ", vec_str(d.rhs_contract), ", batch ", vec_str(d.lhs_batch),
                          " x ", vec_str(d.rhs_batch)));
  };
  if (in[0].dtype != in[1].dtype) throw TypeError(cat("dot_general needs operands of one dtype, got ", avals_str(in)));
  if (is_bool(in[0].dtype)) throw TypeError(cat("dot_general of boolean operands ", avals_str(in)));
  check_summable(Op::dot_general, in);
  if (d.lhs_contract.size() != d.rhs_contract.size() || d.lhs_batch.size() != d.rhs_batch.size())
    throw bad(cat("dimension lists differ in length (", d.lhs_contract.size(), " and ", d.rhs_contract.size(),
                  " contracting, ", d.lhs_batch.size(), " and ", d.rhs_batch.size(), " batch)"));
  std::set<std::int64_t> ls, rs;
  auto check = [&](std::int64_t i, int r, std::set<std::int64_t>& s) {
    if (i < 0 || i >= r || !s.insert(i).second) throw bad("a dimension is out of range or repeated");
  };
  for (size_t i = 0; i < d.lhs_contract.size(); ++i) {
    check(d.lhs_contract[i], int(a.size()), ls);
    check(d.rhs_contract[i], int(b.size()), rs);
    if (a[d.lhs_contract[i]] != b[d.rhs_contract[i]]) throw bad("contracting dimensions differ in size");
  }
  for (size_t i = 0; i < d.lhs_batch.size(); ++i) {
    check(d.lhs_batch[i], int(a.size()), ls);
    check(d.rhs_batch[i], int(b.size()), rs);
    if (a[d.lhs_batch[i]] != b[d.rhs_batch[i]]) throw bad("batch dimensions differ in size");
  }
  Shape o;
  for (auto i : d.lhs_batch) o.push_back(a[i]);
  for (auto i : free_dims(int(a.size()), d.lhs_batch, d.lhs_contract)) o.push_back(a[i]);
  for (auto i : free_dims(int(b.size()), d.rhs_batch, d.rhs_contract)) o.push_back(b[i]);
  return Aval{in[0].dtype, o, in[0].weak_type && in[1].weak_type};
}

void Rule<Op::dot_general>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                 HostArray& out) {
  rule_util::allocate(out, aval);
  const auto& d = p.dims;
  const Shape &a = in[0]->shape, &b = in[1]->shape;
  auto ast = row_major_strides(a), bst = row_major_strides(b);
  auto lfree = free_dims(int(a.size()), d.lhs_batch, d.lhs_contract);
  auto rfree = free_dims(int(b.size()), d.rhs_batch, d.rhs_contract);
  Shape cshape;
  for (auto i : d.lhs_contract) cshape.push_back(a[i]);
  const std::int64_t nc = numel(cshape);
  visit_wide_dtype(aval.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* x = reinterpret_cast<const T*>(in[0]->bytes.data());
    const T* y = reinterpret_cast<const T*>(in[1]->bytes.data());
    T* z = reinterpret_cast<T*>(out.bytes.data());
    std::vector<std::int64_t> oidx(aval.shape.size(), 0);
    const std::int64_t n = numel(aval.shape);
    for (std::int64_t f = 0; f < n; ++f) {
      std::int64_t abase = 0, bbase = 0;
      size_t k = 0;
      for (size_t i = 0; i < d.lhs_batch.size(); ++i, ++k)
        abase += oidx[k] * ast[d.lhs_batch[i]], bbase += oidx[k] * bst[d.rhs_batch[i]];
      for (auto i : lfree) abase += oidx[k++] * ast[i];
      for (auto i : rfree) bbase += oidx[k++] * bst[i];
      A acc = A(0);
      std::vector<std::int64_t> cidx(cshape.size(), 0);
      for (std::int64_t c = 0; c < nc; ++c) {
        std::int64_t ao = abase, bo = bbase;
        for (size_t i = 0; i < cshape.size(); ++i) ao += cidx[i] * ast[d.lhs_contract[i]], bo += cidx[i] * bst[d.rhs_contract[i]];
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
          acc = A(wrap_unsigned_t<T>(acc) + wrap_unsigned_t<T>(x[ao]) * wrap_unsigned_t<T>(y[bo]));
        else
          acc = A(acc + A(x[ao]) * A(y[bo]));
        for (int i = int(cshape.size()) - 1; i >= 0; --i) {
          if (++cidx[i] < cshape[i]) break;
          cidx[i] = 0;
        }
      }
      z[f] = T(acc);
      for (int i = int(oidx.size()) - 1; i >= 0; --i) {
        if (++oidx[i] < aval.shape[i]) break;
        oidx[i] = 0;
      }
    }
  });
}

// Batch factors (lhs, rhs, result), free factors (one side and the result),
// contracting factors (reduction: a contraction split over axes leaves the
// result a partial sum over them).
FactorRule Rule<Op::dot_general>::factors(const Node& n) {
  FactorRule r;
  const auto& d = attrs_of(n).dims;
  const Shape &a = n.in[0]->shape(), &b = n.in[1]->shape();
  std::vector<std::vector<int>> lhs(a.size()), rhs(b.size());
  for (size_t i = 0; i < d.lhs_batch.size(); ++i) {
    int f = r.add_factor(a[d.lhs_batch[i]]);
    lhs[d.lhs_batch[i]] = {f};
    rhs[d.rhs_batch[i]] = {f};
    r.result.push_back({f});
  }
  for (auto i : free_dims(int(a.size()), d.lhs_batch, d.lhs_contract)) {
    int f = r.add_factor(a[i]);
    lhs[i] = {f};
    r.result.push_back({f});
  }
  for (auto i : free_dims(int(b.size()), d.rhs_batch, d.rhs_contract)) {
    int f = r.add_factor(b[i]);
    rhs[i] = {f};
    r.result.push_back({f});
  }
  for (size_t i = 0; i < d.lhs_contract.size(); ++i) {
    int f = r.add_factor(a[d.lhs_contract[i]], true);
    lhs[d.lhs_contract[i]] = {f};
    rhs[d.rhs_contract[i]] = {f};
  }
  r.operands = {lhs, rhs};
  r.reduce_op = Op::add;
  return r;
}

// ------------------------------------------------------------------ autodiff

namespace {
// Broadcast a reduced value back over the reduced axes.
NodeRef expand(NodeTable& t, const NodeRef& v, const Node& n) {
  std::vector<std::int64_t> kept;
  const auto axes = reduced_axes(n);
  for (int d = 0; d < n.in[0]->rank(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
  return build::broadcast_in_dim(t, v, n.in[0]->shape(), kept);
}
// max and min: the mean of the tangents where the operand attains the result.
NodeRef extremum_jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                     const NodeRef& y) {
  if (!tx[0] || !is_floating(x[0]->dtype())) return nullptr;
  NodeRef at = build::convert(t, build::binary(t, Op::eq, x[0], expand(t, y, n)), x[0]->dtype());
  NodeRef count = build::reduce(t, Op::reduce_sum, at, reduced_axes(n));
  NodeRef s = build::reduce(t, Op::reduce_sum, build::binary(t, Op::mul, tx[0], at), reduced_axes(n));
  return build::binary(t, Op::div, s, count);
}
}  // namespace

NodeRef Rule<Op::reduce_sum>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&,
                                  const std::vector<NodeRef>& tx, const NodeRef&) {
  return tx[0] ? build::reduce(t, Op::reduce_sum, tx[0], attrs_of(n).dims) : nullptr;
}
void Rule<Op::reduce_sum>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                                     std::vector<NodeRef>& cts) {
  cts[0] = expand(t, ct, n);
}

NodeRef Rule<Op::reduce_max>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                  const std::vector<NodeRef>& tx, const NodeRef& y) {
  return extremum_jvp(t, n, x, tx, y);
}
void Rule<Op::reduce_max>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                     std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
NodeRef Rule<Op::reduce_min>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                  const std::vector<NodeRef>& tx, const NodeRef& y) {
  return extremum_jvp(t, n, x, tx, y);
}
void Rule<Op::reduce_min>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                     std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
NodeRef Rule<Op::reduce_prod>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                   const std::vector<NodeRef>& tx, const NodeRef&) {
  // d(prod x) = sum(dx_i * prod_{j != i} x_j). The product of the others is
  // prod/x_i without zeros; with one zero in the line it is the product of
  // the non-zeros at the zero and 0 elsewhere; with more, 0 everywhere.
  // (Complex products too: the rule is the same.)
  if (!tx[0] || !is_inexact(x[0]->dtype())) return nullptr;
  const DType dt = x[0]->dtype();
  NodeRef zero = build::broadcast_in_dim(t, build::scalar(t, dt, 0), x[0]->shape(), {});
  NodeRef one = build::broadcast_in_dim(t, build::scalar(t, dt, 1), x[0]->shape(), {});
  NodeRef is_zero = build::binary(t, Op::eq, x[0], zero);
  NodeRef nonzero = build::select(t, is_zero, one, x[0]);
  NodeRef prod_nonzero = expand(t, build::reduce(t, Op::reduce_prod, nonzero, attrs_of(n).dims), n);
  NodeRef zeros = expand(t, build::reduce(t, Op::reduce_sum, build::convert(t, is_zero, dt), attrs_of(n).dims), n);
  NodeRef others = build::select(
      t, build::binary(t, Op::eq, zeros, zero), build::binary(t, Op::div, prod_nonzero, nonzero),
      build::select(t, build::binary(t, Op::and_, is_zero, build::binary(t, Op::eq, zeros, one)), prod_nonzero, zero));
  return build::reduce(t, Op::reduce_sum, build::binary(t, Op::mul, tx[0], others), attrs_of(n).dims);
}
void Rule<Op::reduce_prod>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                      std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

TESSEL_NO_DERIVATIVE(argmax)
TESSEL_NO_DERIVATIVE(argmin)

NodeRef Rule<Op::sort>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                            const NodeRef&) {
  // The values' tangents move with them.
  return tx[1] ? build::sort(t, x[0], tx[1], attrs_of(n).dimension) : nullptr;
}
void Rule<Op::sort>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                              std::vector<NodeRef>& cts) {
  if (linear[0]) throw Error("sort is not linear in its keys");
  // The values moved by the permutation p (output i came from p[i]); its
  // transpose sends ct[i] back to p[i]: sort ct by p.
  const std::int64_t d = attrs_of(n).dimension;
  NodeRef p = build::sort(t, n.in[0], build::iota(t, DType::int32, n.shape(), d), d);
  cts[1] = build::sort(t, p, ct, d);
}

NodeRef Rule<Op::dot_general>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                   const std::vector<NodeRef>& tx, const NodeRef&) {
  NodeRef a = tx[0] ? build::dot_general(t, tx[0], x[1], attrs_of(n).dims) : nullptr;
  NodeRef b = tx[1] ? build::dot_general(t, x[0], tx[1], attrs_of(n).dims) : nullptr;
  return ad::add(t, a, b);
}

namespace {
// JAX's _dot_general_transpose_lhs: the cotangent of the lhs from ct and the rhs.
NodeRef dot_transpose_lhs(NodeTable& t, const NodeRef& ct, const NodeRef& y, const Shape& x_shape, const DotDims& d,
                          bool swap) {
  const int x_rank = int(x_shape.size()), y_rank = y->rank();
  const auto& x_contract = swap ? d.rhs_contract : d.lhs_contract;
  const auto& y_contract = swap ? d.lhs_contract : d.rhs_contract;
  const auto& x_batch = swap ? d.rhs_batch : d.lhs_batch;
  const auto& y_batch = swap ? d.lhs_batch : d.rhs_batch;
  auto free_of = [](int rank, const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    std::vector<std::int64_t> f;
    for (std::int64_t i = 0; i < rank; ++i)
      if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end()) f.push_back(i);
    return f;
  };
  const auto x_kept = free_of(x_rank, x_contract, x_batch);
  const auto y_kept = free_of(y_rank, y_contract, y_batch);
  // ct dims: batch, then lhs free, then rhs free (of the original dot).
  const std::int64_t nb = std::int64_t(x_batch.size());
  std::vector<std::int64_t> ct_batch, ct_ykept;
  for (std::int64_t i = 0; i < nb; ++i) ct_batch.push_back(i);
  const std::int64_t lhs_free = swap ? std::int64_t(y_kept.size()) : std::int64_t(x_kept.size());
  const std::int64_t y_free_start = swap ? nb : nb + lhs_free;
  for (size_t i = 0; i < y_kept.size(); ++i) ct_ykept.push_back(y_free_start + std::int64_t(i));
  DotDims dd{ct_ykept, y_kept, ct_batch, y_batch};
  NodeRef r = build::dot_general(t, ct, y, dd);  // dims: batch, x kept (in ct order), y contracting (in y order)
  // Permute into x's dim order.
  std::vector<std::int64_t> r_dims;  // for each r dim, the x dim it is
  r_dims.insert(r_dims.end(), x_batch.begin(), x_batch.end());
  r_dims.insert(r_dims.end(), x_kept.begin(), x_kept.end());
  // y's contracting dims appear in y order; their x counterparts:
  std::vector<std::int64_t> yc_sorted = y_contract;
  std::sort(yc_sorted.begin(), yc_sorted.end());
  for (auto yc : yc_sorted) {
    size_t k = size_t(std::find(y_contract.begin(), y_contract.end(), yc) - y_contract.begin());
    r_dims.push_back(x_contract[k]);
  }
  std::vector<std::int64_t> perm(x_rank);
  for (int i = 0; i < x_rank; ++i) perm[r_dims[i]] = i;
  return build::transpose(t, r, perm);
}
}  // namespace

void Rule<Op::dot_general>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>& linear,
                                      std::vector<NodeRef>& cts) {
  if (linear[0] && linear[1]) rule_util::not_linear(n);
  if (linear[0]) cts[0] = dot_transpose_lhs(t, ct, n.in[1], n.in[0]->shape(), attrs_of(n).dims, false);
  if (linear[1]) cts[1] = dot_transpose_lhs(t, ct, n.in[0], n.in[1]->shape(), attrs_of(n).dims, true);
}

// ---------------------------------------------------------------- partitioning

// Reduced factors split over axes leave partial results; the partitioner
// combines them after the local op (tracer/partition.cpp).
TESSEL_LOCAL_SAME_OP(reduce_sum)
TESSEL_LOCAL_SAME_OP(reduce_max)
TESSEL_LOCAL_SAME_OP(reduce_min)
TESSEL_LOCAL_SAME_OP(reduce_prod)
TESSEL_LOCAL_SAME_OP(argmax)
TESSEL_LOCAL_SAME_OP(argmin)
// A sorted dim that is split: its mesh axes move to another dim by one
// all-to-all (the largest dim whose tiles they split evenly, else the
// largest), the lines sort where they are, and the result moves back: the
// array crosses the mesh once each way and no device holds more than its
// share, where gathering the dim would give each device every line whole.
// A 1-D array has no other dim: it is gathered, as before.
NodeRef Rule<Op::sort>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                              const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  const auto d = std::size_t(attrs_of(n).dimension);
  const AxisSharding& from = op_sh[0];
  if (from.dims[d].empty()) return build::with_operands(b.table(), n, ops);
  const Shape& G = n.shape();
  const std::int64_t moved = b.tiles(from.dims[d]);
  int dst = -1;
  bool dst_even = false;
  for (int e = 0; e < int(G.size()); ++e) {
    if (std::size_t(e) == d) continue;
    const bool even = G[std::size_t(e)] % (b.tiles(from.dims[std::size_t(e)]) * moved) == 0;
    if (dst < 0 || (even && !dst_even) || (even == dst_even && G[std::size_t(e)] > G[std::size_t(dst)])) dst = e, dst_even = even;
  }
  AxisSharding to = from;
  if (dst >= 0) to.dims[std::size_t(dst)].insert(to.dims[std::size_t(dst)].end(), from.dims[d].begin(), from.dims[d].end());
  to.dims[d].clear();
  NodeRef keys = b.reshard(ops[0], G, from, to), values = b.reshard(ops[1], G, op_sh[1], to);
  NodeRef r = build::with_operands(b.table(), n, {keys, values});
  return b.reshard(r, G, to, natural);
}
TESSEL_LOCAL_SAME_OP(dot_general)


// ------------------------------------------------------------------ batching

// A reduction over the same axes, shifted past the batch dimension.
#define TESSEL_BATCH_REDUCE(OP)                                                                                 \
  NodeRef Rule<Op::OP>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&, \
                              const BatchInfo&) {                                                                \
    return build::reduce(t, Op::OP, x[0], bt::shifted(attrs_of(n).dims));                                         \
  }
TESSEL_BATCH_REDUCE(reduce_sum)
TESSEL_BATCH_REDUCE(reduce_prod)
TESSEL_BATCH_REDUCE(reduce_max)
TESSEL_BATCH_REDUCE(reduce_min)
#undef TESSEL_BATCH_REDUCE
#define TESSEL_BATCH_ARG_REDUCE(OP)                                                                             \
  NodeRef Rule<Op::OP>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&, \
                              const BatchInfo&) {                                                                \
    return build::arg_reduce(t, Op::OP, x[0], attrs_of(n).dimension + 1, attrs_of(n).index_dtype);               \
  }
TESSEL_BATCH_ARG_REDUCE(argmax)
TESSEL_BATCH_ARG_REDUCE(argmin)
#undef TESSEL_BATCH_ARG_REDUCE
NodeRef Rule<Op::sort>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                              const BatchInfo& b) {
  auto xs = bt::all_batched(t, x, batched, b);
  return build::sort(t, xs[0], xs[1], attrs_of(n).dimension + 1);
}
// A batched operand's batch dimension: a batch dimension of the product when
// both are batched, else a free dimension moved to the front of the result.
NodeRef Rule<Op::dot_general>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                     const std::vector<bool>& batched, const BatchInfo&) {
  DotDims d = attrs_of(n).dims;
  auto shift = [](std::vector<std::int64_t>& v) {
    for (auto& e : v) e += 1;
  };
  if (batched[0]) shift(d.lhs_batch), shift(d.lhs_contract);
  if (batched[1]) shift(d.rhs_batch), shift(d.rhs_contract);
  if (batched[0] && batched[1]) {
    d.lhs_batch.insert(d.lhs_batch.begin(), 0);
    d.rhs_batch.insert(d.rhs_batch.begin(), 0);
    return build::dot_general(t, x[0], x[1], d);
  }
  NodeRef y = build::dot_general(t, x[0], x[1], d);
  // Result dims: batch dims, lhs free dims (in order), rhs free dims.
  std::int64_t at = std::int64_t(d.lhs_batch.size());
  if (batched[1]) at += x[0]->rank() - std::int64_t(d.lhs_batch.size() + d.lhs_contract.size());
  if (at == 0) return y;
  std::vector<std::int64_t> perm{at};
  for (std::int64_t i = 0; i < y->rank(); ++i)
    if (i != at) perm.push_back(i);
  return build::transpose(t, y, perm);
}

// ------------------------------------------------------------------ complex expansion, cost

NodeRef Rule<Op::reduce_sum>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& dims = n.attr<attr::Dimensions>().dims;
  Parts x = b.unpack(ops[0]);
  return b.pack({build::reduce(b.table(), Op::reduce_sum, x.re, dims), build::reduce(b.table(), Op::reduce_sum, x.im, dims)});
}
// Complex products along each reduced dim, by halves (ComplexBuilder::prod_along).
NodeRef Rule<Op::reduce_prod>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  Parts x = b.unpack(ops[0]);
  for (auto d : n.attr<attr::Dimensions>().dims) x = b.prod_along(x, d);
  return b.pack({build::reshape(b.table(), x.re, n.shape()), build::reshape(b.table(), x.im, n.shape())});
}
TESSEL_COMPLEX_NONE(reduce_max)
TESSEL_COMPLEX_NONE(reduce_min)
TESSEL_COMPLEX_NONE(argmax)
TESSEL_COMPLEX_NONE(argmin)
// Complex values (not keys) sorted part by part by the same real keys.
NodeRef Rule<Op::sort>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  if (is_complex(n.in[0]->dtype())) throw NotImplementedError("sorting by complex keys");
  const std::int64_t d = n.attr<attr::Dimension>().dimension;
  Parts v = b.unpack(ops[1]);
  return b.pack({build::sort(b.table(), ops[0], v.re, d), build::sort(b.table(), ops[0], v.im, d)});
}
// (a + bi)(c + di) summed: four real dots.
NodeRef Rule<Op::dot_general>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  const auto& dd = n.attr<attr::Dot>().dims;
  Parts x = b.unpack(ops[0]), y = b.unpack(ops[1]);
  auto dot = [&](const NodeRef& l, const NodeRef& r) { return build::dot_general(b.table(), l, r, dd); };
  return b.pack({b.sub(dot(x.re, y.re), dot(x.im, y.im)), b.add(dot(x.re, y.im), dot(x.im, y.re))});
}

TESSEL_COST(reduce_sum, reduce_cost)
TESSEL_COST(reduce_max, reduce_cost)
TESSEL_COST(reduce_min, reduce_cost)
TESSEL_COST(reduce_prod, reduce_cost)
TESSEL_COST(argmax, reduce_cost)
TESSEL_COST(argmin, reduce_cost)
TESSEL_COST(sort, memory_cost)
// Two flops (a multiply and an add) per result element and contracted index.
NodeCost Rule<Op::dot_general>::cost(const Node& n) {
  NodeCost c = rule_util::memory_cost(n);
  double k = 1;
  for (auto d : n.attr<attr::Dot>().dims.lhs_contract) k *= double(n.in[0]->shape()[size_t(d)]);
  c.flops = 2 * double(numel(n.shape())) * k;
  return c;
}

}  // namespace tessel
