// ts::linalg: jnp.linalg's functions over the linear-algebra primitives
// (tracer/rules_linalg.cpp), each traced as one program (one compile when
// called eagerly), with JAX's compositions: solve and inv through lu and two
// triangular solves, det and slogdet through lu's diagonal and pivots.
#include <tessel/creation.hpp>
#include <tessel/lax.hpp>
#include <tessel/linalg.hpp>

#include <cmath>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/linalg_build.hpp"
#include "tracer/promotion.hpp"

namespace tessel::linalg {

namespace {

using NR = std::vector<NodeRef>;
namespace c = detail::compose;
using detail::cat;

// a as a float array of matrices (rank >= 2; square when asked).
NodeRef matrices(NodeTable& t, const NodeRef& a, const char* what, bool square) {
  if (a->rank() < 2)
    throw ShapeError(cat(what, ": a must be a matrix or a batch of matrices (rank >= 2), got an array of shape ",
                         shape_str(a->shape())));
  if (square && a->shape()[size_t(a->rank() - 1)] != a->shape()[size_t(a->rank() - 2)])
    throw ShapeError(cat(what, ": a must be a square matrix (or a batch of them), got shape ", shape_str(a->shape())));
  return c::to_inexact(t, a);
}
// The dtype two operands of a solve are computed in: their promoted type,
// float32 for integers (complex ones stay complex).
DType solve_dtype(const NodeRef& a, bool a_weak, const NodeRef& b) {
  PromotedType pt = promote_types(a->dtype(), a_weak, b->dtype(), b->aval.weak_type);
  return is_inexact(pt.dtype) ? pt.dtype : DType::float32;
}
std::int64_t dim(const NodeRef& x, std::int64_t d) { return x->shape()[size_t(d < 0 ? x->rank() + d : d)]; }
Shape batch_of(const NodeRef& x) { return Shape(x->shape().begin(), x->shape().end() - 2); }
Shape with(Shape batch, std::initializer_list<std::int64_t> minor) {
  batch.insert(batch.end(), minor);
  return batch;
}
// (a + a^H) / 2.
NodeRef sym(NodeTable& t, const NodeRef& a) {
  return build::binary(t, Op::mul, build::binary(t, Op::add, a, la::mH(t, a)), c::full_like(t, a, 0.5));
}
// The diagonal of each matrix: [..., n].
NodeRef diagonal(NodeTable& t, const NodeRef& a) {
  return build::reduce(t, Op::reduce_sum, build::binary(t, Op::mul, a, la::eye_like(t, a)), {a->rank() - 1});
}
attr::Linalg how(bool left, bool lower, bool transpose, bool unit, bool conjugate = false) {
  attr::Linalg p;
  p.left_side = left;
  p.lower = lower;
  p.transpose_a = transpose;
  p.unit_diagonal = unit;
  p.conjugate_a = conjugate;
  return p;
}
// The inverse of a permutation along its last dim.
NodeRef inverse_permutation(NodeTable& t, const NodeRef& perm) {
  const std::int64_t d = perm->rank() - 1;
  return build::sort(t, perm, build::iota(t, DType::int32, perm->shape(), d), d);
}
// a x = b (trans 0), a^T x = b (trans 1) or a^H x = b (trans 2) for matrices b, from lu and its permutation.
NodeRef lu_solve_nodes(NodeTable& t, const NodeRef& lu, const NodeRef& perm, const NodeRef& b, int trans) {
  if (trans == 0) {
    NodeRef x = la::permute_rows(t, b, perm);
    x = la::triangular_solve(t, lu, x, how(true, true, false, true));
    return la::triangular_solve(t, lu, x, how(true, false, false, false));
  }
  const bool conj = trans == 2 && is_complex(lu->dtype());
  NodeRef x = la::triangular_solve(t, lu, b, how(true, false, true, false, conj));
  x = la::triangular_solve(t, lu, x, how(true, true, true, true, conj));
  return la::permute_rows(t, x, inverse_permutation(t, perm));
}
// b as matrices [..., n, k] matching a's batch (a vector b: one column),
// both broadcast to one batch; `vector` says to drop the column after.
struct SolveOperands {
  NodeRef a, b;
  bool vector = false;
};
SolveOperands solve_operands(NodeTable& t, NodeRef a, NodeRef b, const char* what) {
  a = matrices(t, a, what, true);
  if (b->rank() < 1) throw ShapeError(cat(what, ": b must have rank >= 1, got a scalar"));
  if (a->rank() >= 3 && b->rank() == a->rank() - 1)
    throw ShapeError(cat(what, ": a has shape ", shape_str(a->shape()), " and b has shape ", shape_str(b->shape()),
                         ", one rank less: batched vector right-hand sides are ambiguous and refused, as in JAX; use "
                         "solve(a, b[..., None]) and squeeze the last axis (ts::squeeze(ts::linalg::solve(a, "
                         "ts::expand_dims(b, -1)), -1))"));
  const DType dt = solve_dtype(a, a->aval.weak_type, b);
  a = c::cast(t, a, dt, false);
  b = c::cast(t, b, dt, false);
  const std::int64_t n = dim(a, -1);
  SolveOperands r;
  r.vector = b->rank() == 1;
  if (r.vector) b = build::reshape(t, b, {b->shape()[0], 1});
  if (dim(b, -2) != n)
    throw ShapeError(cat(what, ": a has shape ", shape_str(a->shape()), " and b ", r.vector ? "(a vector) " : "",
                         "has shape ", shape_str(r.vector ? Shape{b->shape()[0]} : b->shape()), ": b's ",
                         r.vector ? "length" : "rows (dim -2)", " must equal a's size ", n));
  Shape batch = c::broadcast_shapes(batch_of(a), batch_of(b), what);
  r.a = c::broadcast_to(t, a, with(batch, {n, n}), what);
  r.b = c::broadcast_to(t, b, with(batch, {n, dim(b, -1)}), what);
  return r;
}
NodeRef finish_solve(NodeTable& t, const NodeRef& x, bool vector) {
  if (!vector) return x;
  Shape s(x->shape().begin(), x->shape().end() - 1);
  return build::reshape(t, x, s);
}
NodeRef lu_of(NodeTable& t, const NodeRef& a) { return build::linalg(t, Op::lu, {a}); }
NodeRef element(NodeTable& t, const NodeRef& x, std::int64_t k) { return build::get_tuple_element(t, x, k); }

// Moves axes (a, b) of x to the end, in that order.
NodeRef axes_last(NodeTable& t, const NodeRef& x, std::int64_t a, std::int64_t b) {
  std::vector<std::int64_t> perm;
  for (std::int64_t d = 0; d < x->rank(); ++d)
    if (d != a && d != b) perm.push_back(d);
  perm.push_back(a);
  perm.push_back(b);
  return build::transpose(t, x, perm);
}

}  // namespace

LU lu(const Array& a) {
  auto r = detail::apply("tessel.linalg.lu", {a}, [](NodeTable& t, const NR& in) {
    return build::results(t, lu_of(t, matrices(t, in[0], "lu", false)));
  });
  return {r[0], r[1], r[2]};
}

LUFactor lu_factor(const Array& a) {
  auto r = detail::apply("tessel.linalg.lu_factor", {a}, [](NodeTable& t, const NR& in) {
    NodeRef f = lu_of(t, matrices(t, in[0], "lu_factor", true));
    return NR{element(t, f, 0), element(t, f, 1)};
  });
  return {r[0], r[1]};
}

Array lu_solve(const LUFactor& f, const Array& b, int trans) {
  if (trans != 0 && trans != 1 && trans != 2)
    throw ValueError(cat("lu_solve: trans must be 0 (a x = b), 1 (a^T x = b) or 2 (a^H x = b), got ", trans));
  if (!f.lu.valid() || !f.pivots.valid()) throw ValueError("lu_solve: lu_and_pivots holds no arrays");
  if (f.pivots.dtype() != DType::int32 || f.pivots.ndim() < 1 || f.lu.ndim() < 2 ||
      f.pivots.shape().back() != std::min(f.lu.shape()[size_t(f.lu.ndim() - 2)], f.lu.shape().back()))
    throw ShapeError(cat("lu_solve: pivots must be int32 [..., min(m, n)] for lu of shape ", shape_str(f.lu.shape()),
                         ", got ", dtype_name(f.pivots.dtype()), shape_str(f.pivots.shape())));
  // The permutation the pivots' swaps make (lax.linalg.lu_pivots_to_permutation).
  const std::int64_t m = f.lu.shape()[size_t(f.lu.ndim() - 2)];
  const Shape pb(f.pivots.shape().begin(), f.pivots.shape().end() - 1);
  Shape ps = pb;
  ps.push_back(m);
  Array perm0 = broadcast_to(arange(std::int64_t(0), m, std::int64_t(1), DType::int32), ps);
  const int last = int(ps.size()) - 1;
  Array perm = lax::fori_loop(0, int(f.pivots.shape().back()), [&](const Array& i, const Array& p) {
    Array pos = expand_dims(take(f.pivots, i, last), last);  // the row swapped with row i
    Array ii = broadcast_to(i.astype(DType::int32).reshape({}), pos.shape());
    Array at_i = take_along_axis(p, ii, last, "clip"), at_j = take_along_axis(p, pos, last, "clip");
    Array cols = broadcast_to(arange(std::int64_t(0), m, std::int64_t(1), DType::int32), ps);
    return where(equal(cols, ii), at_j, where(equal(cols, pos), at_i, p));
  }, perm0);
  return detail::apply1("tessel.linalg.lu_solve", {f.lu, perm, b}, [trans](NodeTable& t, const NR& in) {
    SolveOperands s = solve_operands(t, in[0], in[2], "lu_solve");
    NodeRef p = c::broadcast_to(t, in[1], with(batch_of(s.a), {dim(s.a, -1)}), "lu_solve");
    return finish_solve(t, lu_solve_nodes(t, s.a, p, s.b, trans), s.vector);
  });
}

Array solve(const Array& a, const Array& b) {
  return detail::apply1("tessel.linalg.solve", {a, b}, [](NodeTable& t, const NR& in) {
    SolveOperands s = solve_operands(t, in[0], in[1], "solve");
    NodeRef f = lu_of(t, s.a);
    return finish_solve(t, lu_solve_nodes(t, element(t, f, 0), element(t, f, 2), s.b, 0), s.vector);
  });
}

Array inv(const Array& a) {
  return detail::apply1("tessel.linalg.inv", {a}, [](NodeTable& t, const NR& in) {
    NodeRef x = matrices(t, in[0], "inv", true);
    NodeRef f = lu_of(t, x);
    return lu_solve_nodes(t, element(t, f, 0), element(t, f, 2), la::eye_like(t, x), 0);
  });
}

namespace {
// (sign, log|det|, det) from lu's diagonal and pivots.
struct DetParts {
  NodeRef sign, logabs, det;
};
DetParts det_parts(NodeTable& t, const NodeRef& a, const char* what) {
  NodeRef x = matrices(t, a, what, true);
  NodeRef f = lu_of(t, x);
  NodeRef d = diagonal(t, element(t, f, 0)), piv = element(t, f, 1);
  const std::int64_t last = piv->rank() - 1;
  NodeRef swaps = build::convert(t, build::binary(t, Op::ne, piv, build::iota(t, DType::int32, piv->shape(), last)),
                                 DType::int32);
  NodeRef parity = build::binary(t, Op::rem, build::reduce(t, Op::reduce_sum, swaps, {last}),
                                 build::broadcast_in_dim(t, build::scalar(t, DType::int32, 2), batch_of(x), {}));
  NodeRef odd = build::binary(t, Op::eq, parity, build::broadcast_in_dim(t, build::scalar(t, DType::int32, 1), batch_of(x), {}));
  NodeRef one = build::broadcast_in_dim(t, build::scalar(t, x->dtype(), 1), batch_of(x), {});
  NodeRef real_one = build::broadcast_in_dim(t, build::scalar(t, real_dtype(x->dtype()), 1), batch_of(x), {});
  NodeRef perm_sign = build::select(t, odd, build::unary(t, Op::neg, one), one);
  DetParts p;
  p.det = build::binary(t, Op::mul, perm_sign, build::reduce(t, Op::reduce_prod, d, {last}));
  NodeRef zero = c::full_like(t, d, 0);
  NodeRef d_zero = build::binary(t, Op::eq, d, zero);
  NodeRef is_zero = build::reduce(t, Op::reduce_max, build::convert(t, d_zero, DType::int32), {last});
  NodeRef singular = build::binary(t, Op::gt, is_zero, build::broadcast_in_dim(t, build::scalar(t, DType::int32, 0), batch_of(x), {}));
  // Each pivot's sign: d / |d| for complex (differentiable, as JAX's slogdet, where sign's own derivative is 0).
  NodeRef unit = is_complex(d->dtype())
                     ? build::binary(t, Op::div, d,
                                     build::convert(t, build::unary(t, Op::abs, build::select(t, d_zero, c::full_like(t, d, 1), d)), d->dtype()))
                     : build::unary(t, Op::sign, d);
  NodeRef sign = build::binary(t, Op::mul, perm_sign, build::reduce(t, Op::reduce_prod, unit, {last}));
  p.sign = build::select(t, singular, c::full_like(t, one, 0), sign);
  NodeRef logabs = build::reduce(t, Op::reduce_sum, build::unary(t, Op::log, build::unary(t, Op::abs, d)), {last});
  p.logabs = build::select(t, singular, c::full_like(t, real_one, -INFINITY), logabs);
  return p;
}
}  // namespace

Array det(const Array& a) {
  return detail::apply1("tessel.linalg.det", {a}, [](NodeTable& t, const NR& in) { return det_parts(t, in[0], "det").det; });
}

SlogDet slogdet(const Array& a) {
  auto r = detail::apply("tessel.linalg.slogdet", {a}, [](NodeTable& t, const NR& in) {
    DetParts p = det_parts(t, in[0], "slogdet");
    return NR{p.sign, p.logabs};
  });
  return {r[0], r[1]};
}

Array cholesky(const Array& a, bool upper, bool symmetrize_input) {
  return detail::apply1("tessel.linalg.cholesky", {a}, [upper, symmetrize_input](NodeTable& t, const NR& in) {
    NodeRef x = matrices(t, in[0], "cholesky", true);
    NodeRef l = build::linalg(t, Op::cholesky, {symmetrize_input ? sym(t, x) : x});
    return upper ? la::mH(t, l) : l;
  });
}

QR qr(const Array& a, const std::string& mode) {
  if (mode != "reduced" && mode != "complete" && mode != "r")
    throw ValueError(cat("qr: mode must be 'reduced', 'complete' or 'r', got '", mode, "'"));
  auto r = detail::apply("tessel.linalg.qr", {a}, [mode](NodeTable& t, const NR& in) {
    attr::Linalg p;
    p.full_matrices = mode == "complete";
    NodeRef f = build::linalg(t, Op::qr, {matrices(t, in[0], "qr", false)}, p);
    if (mode == "r") return NR{element(t, f, 1)};
    return NR{element(t, f, 0), element(t, f, 1)};
  });
  if (mode == "r") return {Array(), r[0]};
  return {r[0], r[1]};
}

Eigh eigh(const Array& a, const std::string& UPLO, bool symmetrize_input) {
  if (UPLO != "L" && UPLO != "U") throw ValueError(cat("eigh: UPLO must be 'L' or 'U', got '", UPLO, "'"));
  auto r = detail::apply("tessel.linalg.eigh", {a}, [UPLO, symmetrize_input](NodeTable& t, const NR& in) {
    NodeRef x = matrices(t, in[0], "eigh", true);
    if (symmetrize_input) x = sym(t, x);
    attr::Linalg p;
    p.lower = UPLO == "L";
    NodeRef f = build::linalg(t, Op::eigh, {x}, p);
    return NR{element(t, f, 1), element(t, f, 0)};
  });
  return {r[0], r[1]};
}

Array eigvalsh(const Array& a, const std::string& UPLO) { return eigh(a, UPLO).eigenvalues; }

Eig eig(const Array& a, bool compute_left_eigenvectors, bool compute_right_eigenvectors) {
  if (compute_left_eigenvectors)
    throw NotImplementedError("eig: left eigenvectors are not computed yet (compute_left_eigenvectors=true); the left "
                              "eigenvectors of a are the conjugated right eigenvectors of a^H");
  auto r = detail::apply("tessel.linalg.eig", {a}, [compute_right_eigenvectors](NodeTable& t, const NR& in) {
    attr::Linalg p;
    p.compute_uv = compute_right_eigenvectors;
    NodeRef f = build::linalg(t, Op::eig, {matrices(t, in[0], "eig", true)}, p);
    return compute_right_eigenvectors ? NR{element(t, f, 0), element(t, f, 1)} : NR{element(t, f, 0)};
  });
  return {r[0], compute_right_eigenvectors ? r[1] : Array()};
}

Array eigvals(const Array& a) { return eig(a, false, false).eigenvalues; }

SVD svd(const Array& a, bool full_matrices) {
  auto r = detail::apply("tessel.linalg.svd", {a}, [full_matrices](NodeTable& t, const NR& in) {
    attr::Linalg p;
    p.full_matrices = full_matrices;
    NodeRef f = build::linalg(t, Op::svd, {matrices(t, in[0], "svd", false)}, p);
    return NR{element(t, f, 1), element(t, f, 0), element(t, f, 2)};
  });
  return {r[0], r[1], r[2]};
}

Array svdvals(const Array& a) {
  return detail::apply1("tessel.linalg.svdvals", {a}, [](NodeTable& t, const NR& in) {
    attr::Linalg p;
    p.compute_uv = false;
    return element(t, build::linalg(t, Op::svd, {matrices(t, in[0], "svdvals", false)}, p), 0);
  });
}

Array triangular_solve(const Array& a, const Array& b, TriangularSolveOptions o) {
  return detail::apply1("tessel.linalg.triangular_solve", {a, b}, [o](NodeTable& t, const NR& in) {
    NodeRef x = matrices(t, in[0], "triangular_solve", true);
    const DType dt = solve_dtype(x, false, in[1]);
    return la::triangular_solve(t, c::cast(t, x, dt, false), c::cast(t, in[1], dt, false),
                                how(o.left_side, o.lower, o.transpose_a, o.unit_diagonal, o.conjugate_a && is_complex(dt)));
  });
}

namespace {

enum class NormKind { none, number, fro, nuc };

Array norm_impl(const Array& x, NormKind kind, double ord, Axes axis, bool keepdims) {
  return detail::apply1("tessel.linalg.norm", {x}, [=](NodeTable& t, const NR& in) {
    NodeRef v = c::to_inexact(t, in[0]);
    const int r = int(v->rank());
    std::vector<std::int64_t> axes = c::norm_axes(axis, r, "norm");
    if (axis.all() && kind != NormKind::none && r != 1 && r != 2)
      throw ValueError(cat("norm: improper number of dimensions to norm: an ord needs a vector or matrix, got shape ",
                           shape_str(v->shape()), "; pass axis"));
    if (!axis.all() && axes.size() > 2)
      throw ValueError(cat("norm: improper number of axes to norm (", axes.size(), "): one for a vector norm, two for a matrix norm"));
    NodeRef ax = build::unary(t, Op::abs, v);
    auto sq_sum = [&](const std::vector<std::int64_t>& over) {
      // |v|^2 (for reals, v * v exactly; a complex vector's norm is real)
      return build::unary(t, Op::sqrt, build::reduce(t, Op::reduce_sum, build::binary(t, Op::mul, ax, ax), over));
    };
    NodeRef out;
    if (kind == NormKind::none && (axis.all() || axes.size() == 1 || axes.size() == 2)) {
      out = sq_sum(axes);  // 2-norm of a vector, Frobenius of a matrix, of everything when axis is none
    } else if (axes.size() == 1) {
      if (kind != NormKind::number) throw ValueError("norm: 'fro' and 'nuc' are matrix norms; pass two axes");
      const std::vector<std::int64_t> over = axes;
      if (std::isinf(ord)) out = build::reduce(t, ord > 0 ? Op::reduce_max : Op::reduce_min, ax, over);
      else if (ord == 0)
        out = build::reduce(t, Op::reduce_sum,
                            build::convert(t, build::binary(t, Op::ne, v, c::full_like(t, v, 0)), ax->dtype()), over);
      else if (ord == 1) out = build::reduce(t, Op::reduce_sum, ax, over);
      else if (ord == 2) out = sq_sum(over);
      else
        out = build::binary(t, Op::pow, build::reduce(t, Op::reduce_sum, build::binary(t, Op::pow, ax, c::full_like(t, ax, ord)), over),
                            c::full_like(t, build::reduce(t, Op::reduce_sum, ax, over), 1.0 / ord));
    } else {
      const std::int64_t r0 = axes[0], r1 = axes[1];
      if (kind == NormKind::fro) out = sq_sum(axes);
      else if (kind == NormKind::nuc || (kind == NormKind::number && std::fabs(ord) == 2)) {
        attr::Linalg p;
        p.compute_uv = false;
        NodeRef s = element(t, build::linalg(t, Op::svd, {axes_last(t, v, r0, r1)}, p), 0);
        const std::int64_t last = s->rank() - 1;
        out = kind == NormKind::nuc ? build::reduce(t, Op::reduce_sum, s, {last})
                                    : build::reduce(t, ord > 0 ? Op::reduce_max : Op::reduce_min, s, {last});
      } else if (ord == 1 || ord == -1 || std::isinf(ord)) {
        // 1: the largest column sum (sum over rows, then max over columns); inf: the largest row sum.
        const bool cols = ord == 1 || ord == -1;
        const std::int64_t sum_ax = cols ? r0 : r1, other = cols ? r1 : r0;
        NodeRef sums = build::reduce(t, Op::reduce_sum, ax, {sum_ax});
        out = build::reduce(t, ord > 0 ? Op::reduce_max : Op::reduce_min, sums, {other > sum_ax ? other - 1 : other});
      } else {
        throw ValueError(cat("norm: invalid ord ", ord, " for a matrix norm (1, -1, 2, -2, inf, -inf, 'fro', 'nuc')"));
      }
    }
    if (keepdims) {
      Shape ks = v->shape();
      for (auto a : axes) ks[size_t(a)] = 1;
      out = build::reshape(t, out, ks);
    }
    return out;
  });
}

}  // namespace

Array norm(const Array& x, std::optional<double> ord, Axes axis, bool keepdims) {
  if (!ord) return norm_impl(x, NormKind::none, 2, axis, keepdims);
  if (axis.all() && x.ndim() == 2) {
    return norm_impl(x, NormKind::number, *ord, Axes{0, 1}, keepdims);
  }
  if (axis.all() && x.ndim() == 1) return norm_impl(x, NormKind::number, *ord, Axes{0}, keepdims);
  return norm_impl(x, NormKind::number, *ord, axis, keepdims);
}

Array norm(const Array& x, const std::string& ord, Axes axis, bool keepdims) {
  if (ord != "fro" && ord != "nuc") throw ValueError(cat("norm: invalid ord '", ord, "' (a number, 'fro' or 'nuc')"));
  if (axis.all()) {
    if (x.ndim() != 2)
      throw ValueError(cat("norm: '", ord, "' needs a matrix, got shape ", shape_str(x.shape()), "; pass two axes"));
    axis = Axes{0, 1};
  }
  return norm_impl(x, ord == "fro" ? NormKind::fro : NormKind::nuc, 0, axis, keepdims);
}

}  // namespace tessel::linalg
