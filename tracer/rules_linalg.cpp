// Rules of the dense linear-algebra primitives (attr::Linalg): cholesky,
// triangular_solve, lu, qr, eigh, svd. Each works on the two minor dims of
// its operands; the leading dims are a batch, split freely over devices (a
// device factorises the matrices it holds, with no communication); the
// matrix dims are never split (a matrix split over devices is factorised by
// the distributed algorithms of dsl/src/linalg.cpp, built of other ops).
//
// The reference kernels that eval runs are in tracer/linalg_kernels.cpp.
//
// JVP rules are JAX's (jax/_src/lax/linalg.py), written with these
// primitives, dot_general and masks; triangular_solve is linear in b. As
// JAX's, lu's is for square matrices and svd's for reduced factors.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>

#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/linalg_build.hpp"
#include "tracer/linalg_kernels.hpp"
#include "tracer/linalg_rules.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

using namespace linalg_kernels;
using namespace linalg_rules;

using la::eye_like;
using la::mm;
using la::mH;
using la::mT;
using la::tril;
using la::triu;
static NodeRef tsolve(NodeTable& t, const NodeRef& a, const NodeRef& b, attr::Linalg p) { return la::triangular_solve(t, a, b, p); }

// ------------------------------------------------------------------ cholesky

Aval Rule<Op::cholesky>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  expect_arity(Op::cholesky, in, 1);
  expect_matrix(Op::cholesky, in[0], true);
  Aval o = in[0];
  o.weak_type = false;
  return o;
}
void Rule<Op::cholesky>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  const std::int64_t n = aval.shape.back();
  with_scalar(aval.dtype, [&](auto tag) {
    using S = decltype(tag);
    each_matrix(batch_count(aval.shape), [&](std::int64_t b) {
      Mat<S> a = load<S>(aval.dtype, in[0]->bytes.data(), b, n, n);
      cholesky_kernel(a);
      store(aval.dtype, out.bytes.data(), b, a);
    });
  });
}
FactorRule Rule<Op::cholesky>::factors(const Node& n) {
  BatchFactors f(n.shape());
  const std::int64_t m = n.shape().back();
  if (n.rank() == 2) {
    // One matrix: split as it comes (tracer/linalg_distributed.cpp).
    f.r.operands = {{{f.r.add_factor(m)}, {f.r.add_factor(m)}}};
    f.r.result = f.r.operands[0];
    return f.r;
  }
  f.r.operands = {f.dims({m, m})};
  f.r.result = f.dims({m, m});
  return f.r;
}
NodeRef Rule<Op::cholesky>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x,
                                const std::vector<NodeRef>& tx, const NodeRef& y) {
  // L_dot = L phi(L^-1 sym(dA) L^-H), phi: the lower triangle, its diagonal halved.
  if (!tx[0]) return nullptr;
  NodeRef half = ad::scalar_like(t, tx[0], 0.5);
  NodeRef sigma = build::binary(t, Op::mul, build::binary(t, Op::add, tx[0], mH(t, tx[0])), half);
  attr::Linalg right;
  right.left_side = false;
  right.transpose_a = true;
  right.conjugate_a = is_complex(y->dtype());
  NodeRef tmp = tsolve(t, y, sigma, right);        // sigma L^-H
  NodeRef inner = tsolve(t, y, tmp, attr::Linalg{});  // L^-1 sigma L^-H
  NodeRef phi = build::binary(t, Op::mul, tril(t, inner),
                              build::binary(t, Op::sub, ad::scalar_like(t, inner, 1.0),
                                            build::binary(t, Op::mul, eye_like(t, inner), ad::scalar_like(t, inner, 0.5))));
  return mm(t, y, phi);
}
void Rule<Op::cholesky>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                                   std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// ------------------------------------------------------------------ triangular_solve

Aval Rule<Op::triangular_solve>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::triangular_solve, in, 2);
  expect_matrix(Op::triangular_solve, in[0], true);
  expect_matrix(Op::triangular_solve, in[1], false);
  const Shape &a = in[0].shape, &b = in[1].shape;
  const std::int64_t m = a.back();
  const std::int64_t bm = p.left_side ? b[b.size() - 2] : b.back();
  if (in[0].dtype != in[1].dtype || a.size() != b.size() || batch_of(a) != batch_of(b) || bm != m)
    throw ShapeError(cat("triangular_solve needs a [..., m, m] and b [..., m, n] (", p.left_side ? "left" : "right",
                         " side: b [..., n, m]) of one dtype and batch, got ", avals_str(in)));
  Aval o = in[1];
  o.weak_type = false;
  return o;
}
void Rule<Op::triangular_solve>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval,
                                      HostArray& out) {
  rule_util::allocate(out, aval);
  const std::int64_t m = in[0]->shape.back(), r = aval.shape[aval.shape.size() - 2], c = aval.shape.back();
  with_scalar(aval.dtype, [&](auto tag) {
    using S = decltype(tag);
    each_matrix(batch_count(aval.shape), [&](std::int64_t b) {
      Mat<S> a = load<S>(aval.dtype, in[0]->bytes.data(), b, m, m);
      Mat<S> x = load<S>(aval.dtype, in[1]->bytes.data(), b, r, c);
      triangular_solve_kernel(p, a, x);
      store(aval.dtype, out.bytes.data(), b, x);
    });
  });
}
FactorRule Rule<Op::triangular_solve>::factors(const Node& n) {
  BatchFactors f(n.shape());
  const bool left = attrs_of(n).left_side;
  const std::int64_t m = n.in[0]->shape().back();
  const std::int64_t k = left ? n.shape().back() : n.shape()[n.shape().size() - 2];
  // One matrix solved from the left: a's rows may stay split (tracer/linalg_distributed.cpp).
  auto a = n.rank() == 2 && left ? std::vector<std::vector<int>>{{f.r.add_factor(m)}, {f.r.add_factor(m, false, true)}}
                                 : f.dims({m, m});
  const int shared = f.r.add_factor(m, false, true), free = f.r.add_factor(k);
  auto b = f.batch;
  if (left) b.push_back({shared}), b.push_back({free});
  else b.push_back({free}), b.push_back({shared});
  f.r.operands = {a, b};
  f.r.result = b;
  return f.r;
}
NodeRef Rule<Op::triangular_solve>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,
                                        const std::vector<NodeRef>& tx, const NodeRef& y) {
  const attr::Linalg& p = attrs_of(n);
  NodeRef r = tx[1] ? tsolve(t, x[0], tx[1], p) : nullptr;
  if (tx[0]) {
    // d(op(a)^-1 b) = -op(a)^-1 op(da) x (left); -x op(da) op(a)^-1 (right),
    // da read as the solve reads a (its triangle, no unit diagonal).
    const std::int64_t k = p.unit_diagonal ? 1 : 0;
    NodeRef ga = p.lower ? tril(t, tx[0], -k) : triu(t, tx[0], k);
    if (p.conjugate_a) ga = la::conj(t, ga);
    if (p.transpose_a) ga = mT(t, ga);
    NodeRef prod = p.left_side ? mm(t, ga, y) : mm(t, y, ga);
    r = ad::add(t, r, ad::neg(t, tsolve(t, x[0], prod, p)));
  }
  return r;
}
void Rule<Op::triangular_solve>::transpose(NodeTable& t, const Node& n, const NodeRef& ct,
                                           const std::vector<bool>& linear, std::vector<NodeRef>& cts) {
  if (linear[0]) throw Error("triangular_solve is not linear in its matrix a");
  attr::Linalg p = attrs_of(n);
  p.transpose_a = !p.transpose_a;
  cts[1] = tsolve(t, n.in[0], ct, p);
}

// ------------------------------------------------------------------ lu

Aval Rule<Op::lu>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  expect_arity(Op::lu, in, 1);
  expect_matrix(Op::lu, in[0], false);
  const Shape& s = in[0].shape;
  const std::int64_t m = s[s.size() - 2], n = s.back();
  Aval a = in[0];
  a.weak_type = false;
  return Aval::make_tuple({a, Aval{DType::int32, with(batch_of(s), {std::min(m, n)}), false},
                           Aval{DType::int32, with(batch_of(s), {m}), false}});
}
void Rule<Op::lu>::eval(const std::vector<const HostArray*>& in, const A&, const Aval& aval, HostArray& out) {
  const Aval& a = aval.elements[0];
  const std::int64_t m = a.shape[a.shape.size() - 2], n = a.shape.back();
  HostArray lu, piv, perm;
  rule_util::allocate(lu, a);
  rule_util::allocate(piv, aval.elements[1]);
  rule_util::allocate(perm, aval.elements[2]);
  with_scalar(a.dtype, [&](auto tag) {
    using S = decltype(tag);
    each_matrix(batch_count(a.shape), [&](std::int64_t b) {
      Mat<S> x = load<S>(a.dtype, in[0]->bytes.data(), b, m, n);
      std::vector<std::int64_t> pv, pm;
      lu_kernel(x, pv, pm);
      store(a.dtype, lu.bytes.data(), b, x);
      store_ints(piv.bytes.data(), b, pv);
      store_ints(perm.bytes.data(), b, pm);
    });
  });
  rule_util::pack_tuple(out, {&lu, &piv, &perm});
}
FactorRule Rule<Op::lu>::factors(const Node& n) {
  const Shape& s = n.in[0]->shape();
  BatchFactors f(s);
  const std::int64_t m = s[s.size() - 2], c = s.back();
  if (s.size() == 2) {
    // One matrix: split as it comes (tracer/linalg_distributed.cpp); pivots and permutation whole.
    f.r.operands = {{{f.r.add_factor(m)}, {f.r.add_factor(c)}}};
    f.r.results = {f.r.operands[0], f.dims({std::min(m, c)}), f.dims({m})};
    return f.r;
  }
  f.r.operands = {f.dims({m, c})};
  f.r.results = {f.dims({m, c}), f.dims({std::min(m, c)}), f.dims({m})};
  return f.r;
}
NodeRef Rule<Op::lu>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                          const NodeRef& y) {
  if (!tx[0]) return nullptr;
  const Shape& s = x[0]->shape();
  if (s[s.size() - 2] != s.back())
    throw NotImplementedError(cat("the derivative of lu of non-square matrices, got ", x[0]->aval.str()));
  // JAX's rule: with P a = L U, L^-1 P da U^-1 = L^-1 dL + dU U^-1 splits
  // into its strictly lower and upper parts.
  NodeRef lu = build::get_tuple_element(t, y, 0), perm = build::get_tuple_element(t, y, 2);
  NodeRef pda = la::permute_rows(t, tx[0], perm);
  NodeRef l = build::binary(t, Op::add, tril(t, lu, -1), eye_like(t, lu));
  NodeRef u = triu(t, lu);
  attr::Linalg unit_lower;
  unit_lower.unit_diagonal = true;
  NodeRef la = tsolve(t, l, pda, unit_lower);
  attr::Linalg upper_right;
  upper_right.lower = false;
  upper_right.left_side = false;
  NodeRef lau = tsolve(t, u, la, upper_right);
  NodeRef dlu = build::binary(t, Op::add, mm(t, l, tril(t, lau, -1)), mm(t, triu(t, lau), u));
  return build::tuple(t, {dlu, ad::zeros_like(t, build::get_tuple_element(t, y, 1)), ad::zeros_like(t, perm)});
}
void Rule<Op::lu>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// ------------------------------------------------------------------ distributed_lu
// One device's part of the LU of a matrix whose rows are split over a mesh's
// axes (made only by lu's partition rule): its rows [r, n] in, its rows of
// the factors, the pivots and the permutation (the same on every device)
// out. Codegen runs it as ScaLAPACK's blocked right-looking algorithm
// (codegen/lapack_distributed.cpp). The interpreter never sees it: it runs traced
// programs, where this is lu (the reference the tests compare with).

// The rules of an op that exists only in partitioned programs (made by
// SOURCE's partition rule, run by codegen): the interpreter, autodiff and
// vmap see SOURCE instead, and no later partitioning splits it again.
#define TESSEL_ONLY_AFTER_PARTITIONING(OP, SOURCE)                                                                    \
  void Rule<Op::OP>::eval(const std::vector<const HostArray*>&, const A&, const Aval&, HostArray&) {                \
    throw InternalError(cat(op_name(Op::OP), " exists only in partitioned programs; the interpreter evaluates " \
                            SOURCE));                                                                                \
  }                                                                                                                 \
  FactorRule Rule<Op::OP>::factors(const Node& n) { return rule_util::replicated_factors(n); }                      \
  NodeRef Rule<Op::OP>::jvp(NodeTable&, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>&,   \
                            const NodeRef&) {                                                                       \
    throw InternalError(cat(op_name(n.op), " exists only after partitioning; differentiate " SOURCE));              \
  }                                                                                                                 \
  void Rule<Op::OP>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,                 \
                               std::vector<NodeRef>&) {                                                             \
    throw InternalError(cat(op_name(n.op), " exists only after partitioning; transpose " SOURCE));                  \
  }                                                                                                                 \
  NodeRef Rule<Op::OP>::batch(NodeTable&, const Node& n, const std::vector<NodeRef>&, const std::vector<bool>&,    \
                              const BatchInfo&) {                                                                   \
    throw InternalError(cat(op_name(n.op), " exists only after partitioning; batch " SOURCE));                      \
  }                                                                                                                 \
  TESSEL_LOCAL_SAME_OP(OP)

// The row tiles a RowBlocked matrix is split into (1 without a mesh).
static std::int64_t row_tiles(const attr::RowBlocked& p) {
  std::int64_t tiles = 1;
  if (p.mesh)
    for (int a : p.axes) tiles *= p.mesh->axes()[size_t(a)].size;
  return tiles;
}

Aval Rule<Op::distributed_lu>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::distributed_lu, in, 1);
  expect_matrix(Op::distributed_lu, in[0], false);
  const Shape& s = in[0].shape;
  if (s.size() != 2 || !p.mesh || p.axes.empty() || p.panel < 1 || p.rows < 0)
    throw InternalError(cat("distributed_lu of ", in[0].str(), " with rows=", p.rows, " panel=", p.panel));
  const std::int64_t tiles = row_tiles(p);
  if (s[0] != ceil_div(p.rows, tiles))
    throw InternalError(cat("distributed_lu: ", in[0].str(), " is not one of ", tiles, " row tiles of ", p.rows, " rows"));
  Aval a = in[0];
  a.weak_type = false;
  return Aval::make_tuple({a, Aval{DType::int32, {std::min(p.rows, s[1])}, false}, Aval{DType::int32, {p.rows}, false}});
}
TESSEL_ONLY_AFTER_PARTITIONING(distributed_lu, "lu")

// ------------------------------------------------------------------ distributed_cholesky
// One device's rows of the Cholesky factor of a matrix whose rows are split
// over a mesh's axes (made only by cholesky's partition rule): its rows
// [r, n] in, its rows of L out (codegen/lapack_distributed.cpp). As distributed_lu, the
// interpreter never sees it.

Aval Rule<Op::distributed_cholesky>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::distributed_cholesky, in, 1);
  expect_matrix(Op::distributed_cholesky, in[0], false);
  const Shape& s = in[0].shape;
  if (s.size() != 2 || !p.mesh || p.axes.empty() || p.panel < 1 || s[1] != p.rows || s[0] != ceil_div(p.rows, row_tiles(p)))
    throw InternalError(cat("distributed_cholesky of ", in[0].str(), " with rows=", p.rows, " panel=", p.panel));
  Aval a = in[0];
  a.weak_type = false;
  return a;
}
TESSEL_ONLY_AFTER_PARTITIONING(distributed_cholesky, "cholesky")

// ------------------------------------------------------------------ distributed_triangular_solve
// x solving op(a) x = b from the left, for a triangular matrix a whose rows
// are split over a mesh's axes (made only by triangular_solve's partition
// rule): this device's rows [r, n] of a and all of b [n, k] in, all of x
// out, the same on every device (codegen/lapack_distributed.cpp). As distributed_lu,
// the interpreter never sees it.

Aval Rule<Op::distributed_triangular_solve>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::distributed_triangular_solve, in, 2);
  expect_matrix(Op::distributed_triangular_solve, in[0], false);
  expect_matrix(Op::distributed_triangular_solve, in[1], false);
  const Shape &a = in[0].shape, &b = in[1].shape;
  const std::int64_t tiles = row_tiles(p);
  if (a.size() != 2 || b.size() != 2 || !p.mesh || p.axes.empty() || a[1] != p.rows || a[0] != ceil_div(p.rows, tiles) ||
      b[0] != p.rows || p.panel != std::max<std::int64_t>(a[0], 1) || in[0].dtype != in[1].dtype)
    throw InternalError(cat("distributed_triangular_solve of ", avals_str(in), " with rows=", p.rows, " over ", tiles,
                            " tiles"));
  Aval o = in[1];
  o.weak_type = false;
  return o;
}
TESSEL_ONLY_AFTER_PARTITIONING(distributed_triangular_solve, "triangular_solve")

// ------------------------------------------------------------------ qr

Aval Rule<Op::qr>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::qr, in, 1);
  expect_matrix(Op::qr, in[0], false);
  const Shape& s = in[0].shape;
  const std::int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
  const DType t = in[0].dtype;
  return Aval::make_tuple({Aval{t, with(batch_of(s), {m, p.full_matrices ? m : k}), false},
                           Aval{t, with(batch_of(s), {p.full_matrices ? m : k, n}), false}});
}
void Rule<Op::qr>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  const Shape& s = in[0]->shape;
  const std::int64_t m = s[s.size() - 2], n = s.back();
  HostArray q, r;
  rule_util::allocate(q, aval.elements[0]);
  rule_util::allocate(r, aval.elements[1]);
  with_scalar(in[0]->dtype, [&](auto tag) {
    using S = decltype(tag);
    each_matrix(batch_count(s), [&](std::int64_t b) {
      Mat<S> a = load<S>(in[0]->dtype, in[0]->bytes.data(), b, m, n), Q, Rm;
      qr_kernel(a, p.full_matrices, Q, Rm);
      store(in[0]->dtype, q.bytes.data(), b, Q);
      store(in[0]->dtype, r.bytes.data(), b, Rm);
    });
  });
  rule_util::pack_tuple(out, {&q, &r});
}
FactorRule Rule<Op::qr>::factors(const Node& n) {
  const Shape& s = n.in[0]->shape();
  BatchFactors f(s);
  f.r.operands = {f.dims({s[s.size() - 2], s.back()})};
  for (auto& e : n.aval.elements) f.r.results.push_back(f.dims({e.shape[e.shape.size() - 2], e.shape.back()}));
  return f.r;
}
NodeRef Rule<Op::qr>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                          const NodeRef& y) {
  if (!tx[0]) return nullptr;
  const Shape& s = x[0]->shape();
  const std::int64_t m = s[s.size() - 2], c = s.back();
  if (m < c || (attrs_of(n).full_matrices && m != c))
    throw NotImplementedError(cat("the derivative of qr needs m >= n and full_matrices=false (or square), got ",
                                  x[0]->aval.str()));
  // JAX's rule: dx = dq r + q dr; with C = q^H dx r^-1, domega = tril(C, -1) - tril(C, -1)^H
  // (plus i Im(diag C) for complex), dq = q (domega - C) + dx r^-1, dr = (C - domega) r.
  NodeRef q = build::get_tuple_element(t, y, 0), r = build::get_tuple_element(t, y, 1);
  attr::Linalg upper_right;
  upper_right.lower = false;
  upper_right.left_side = false;
  NodeRef dx_rinv = tsolve(t, r, tx[0], upper_right);
  NodeRef qt_dx_rinv = mm(t, mH(t, q), dx_rinv);
  NodeRef low = tril(t, qt_dx_rinv, -1);
  NodeRef domega = build::binary(t, Op::sub, low, mH(t, low));
  if (is_complex(q->dtype())) {
    NodeRef re = build::convert(t, build::unary(t, Op::real, qt_dx_rinv), q->dtype());
    domega = build::binary(t, Op::add, domega, build::binary(t, Op::mul, eye_like(t, qt_dx_rinv), build::binary(t, Op::sub, qt_dx_rinv, re)));
  }
  NodeRef dq = build::binary(t, Op::add, mm(t, q, build::binary(t, Op::sub, domega, qt_dx_rinv)), dx_rinv);
  NodeRef dr = mm(t, build::binary(t, Op::sub, qt_dx_rinv, domega), r);
  return build::tuple(t, {dq, dr});
}
void Rule<Op::qr>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// ------------------------------------------------------------------ eigh

Aval Rule<Op::eigh>::infer(const std::vector<Aval>& in, const A&, const Aval&) {
  expect_arity(Op::eigh, in, 1);
  expect_matrix(Op::eigh, in[0], true);
  const Shape& s = in[0].shape;
  Aval v = in[0];
  v.weak_type = false;
  return Aval::make_tuple({v, Aval{real_dtype(v.dtype), with(batch_of(s), {s.back()}), false}});
}
void Rule<Op::eigh>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  const Aval& a = aval.elements[0];
  const std::int64_t n = a.shape.back();
  HostArray v, w;
  rule_util::allocate(v, a);
  rule_util::allocate(w, aval.elements[1]);
  with_scalar(a.dtype, [&](auto tag) {
    using S = decltype(tag);
    each_matrix(batch_count(a.shape), [&](std::int64_t b) {
      Mat<S> x = load<S>(a.dtype, in[0]->bytes.data(), b, n, n), V;
      std::vector<R> ws;
      eigh_kernel(x, p.lower, V, ws);
      store(a.dtype, v.bytes.data(), b, V);
      store(real_dtype(a.dtype), w.bytes.data(), b, row_of(ws));
    });
  });
  rule_util::pack_tuple(out, {&v, &w});
}
FactorRule Rule<Op::eigh>::factors(const Node& n) {
  const Shape& s = n.in[0]->shape();
  BatchFactors f(s);
  const std::int64_t m = s.back();
  f.r.operands = {f.dims({m, m})};
  f.r.results = {f.dims({m, m}), f.dims({m})};
  return f.r;
}
NodeRef Rule<Op::eigh>::jvp(NodeTable& t, const Node&, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                            const NodeRef& y) {
  if (!tx[0]) return nullptr;
  // JAX's rule: with V^H dA V = M, dw = Re diag(M), dV = V (F o M), F_ij = 1 / (w_j - w_i) off the diagonal.
  NodeRef v = build::get_tuple_element(t, y, 0), w = build::get_tuple_element(t, y, 1);
  const Shape& s = v->shape();
  const std::int64_t r = std::int64_t(s.size());
  NodeRef M = mm(t, mH(t, v), mm(t, tx[0], v));
  NodeRef eye = eye_like(t, build::broadcast_in_dim(t, build::scalar(t, w->dtype(), 0), s, {}));  // real
  auto dims_without = [&](std::int64_t skip) {
    std::vector<std::int64_t> d;
    for (std::int64_t i = 0; i < r; ++i)
      if (i != skip) d.push_back(i);
    return d;
  };
  NodeRef wj = build::broadcast_in_dim(t, w, s, dims_without(r - 2));  // w[..., None, :]
  NodeRef wi = build::broadcast_in_dim(t, w, s, dims_without(r - 1));  // w[..., :, None]
  NodeRef F = build::binary(t, Op::sub,
                            build::binary(t, Op::div, ad::scalar_like(t, eye, 1.0),
                                          build::binary(t, Op::add, eye, build::binary(t, Op::sub, wj, wi))),
                            eye);
  NodeRef dv = mm(t, v, build::binary(t, Op::mul, build::convert(t, F, v->dtype()), M));
  NodeRef diagM = build::reduce(t, Op::reduce_sum, build::binary(t, Op::mul, M, build::convert(t, eye, v->dtype())), {r - 1});
  NodeRef dw = is_complex(v->dtype()) ? build::unary(t, Op::real, diagM) : diagM;
  return build::tuple(t, {dv, dw});
}
void Rule<Op::eigh>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&,
                               std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// ------------------------------------------------------------------ svd

Aval Rule<Op::svd>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::svd, in, 1);
  expect_matrix(Op::svd, in[0], false);
  const Shape& s = in[0].shape;
  const std::int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
  const DType t = in[0].dtype;
  std::vector<Aval> e{Aval{real_dtype(t), with(batch_of(s), {k}), false}};
  if (p.compute_uv) {
    e.push_back(Aval{t, with(batch_of(s), {m, p.full_matrices ? m : k}), false});
    e.push_back(Aval{t, with(batch_of(s), {p.full_matrices ? n : k, n}), false});
  }
  return Aval::make_tuple(e);
}
void Rule<Op::svd>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  const Shape& s = in[0]->shape;
  const std::int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
  const DType t = in[0]->dtype;
  std::vector<HostArray> res(aval.elements.size());
  for (size_t i = 0; i < res.size(); ++i) rule_util::allocate(res[i], aval.elements[i]);
  with_scalar(t, [&](auto tag) {
    using S = decltype(tag);
    each_matrix(batch_count(s), [&](std::int64_t b) {
      Mat<S> a = load<S>(t, in[0]->bytes.data(), b, m, n), U, V;
      std::vector<R> sv;
      svd_kernel(a, p.full_matrices, U, sv, V);
      store(real_dtype(t), res[0].bytes.data(), b, row_of(std::vector<R>(sv.begin(), sv.begin() + k)));
      if (!p.compute_uv) return;
      const std::int64_t uc = p.full_matrices ? m : k, vr = p.full_matrices ? n : k;
      Mat<S> Uo(m, uc), Vh(vr, n);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < uc; ++j) Uo(i, j) = U(i, j);
      for (std::int64_t i = 0; i < vr; ++i)
        for (std::int64_t j = 0; j < n; ++j) Vh(i, j) = cj(V(j, i));
      store(t, res[1].bytes.data(), b, Uo);
      store(t, res[2].bytes.data(), b, Vh);
    });
  });
  std::vector<const HostArray*> parts;
  for (auto& r : res) parts.push_back(&r);
  rule_util::pack_tuple(out, parts);
}
FactorRule Rule<Op::svd>::factors(const Node& n) {
  const Shape& s = n.in[0]->shape();
  BatchFactors f(s);
  f.r.operands = {f.dims({s[s.size() - 2], s.back()})};
  f.r.results.push_back(f.dims({n.aval.elements[0].shape.back()}));
  for (size_t i = 1; i < n.aval.elements.size(); ++i) {
    const Shape& e = n.aval.elements[i].shape;
    f.r.results.push_back(f.dims({e[e.size() - 2], e.back()}));
  }
  return f.r;
}
NodeRef Rule<Op::svd>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef& y) {
  if (!tx[0]) return nullptr;
  const attr::Linalg& p = attrs_of(n);
  const Shape& sh = x[0]->shape();
  const std::int64_t m = sh[sh.size() - 2], c = sh.back(), r = std::int64_t(sh.size());
  if (p.compute_uv && p.full_matrices && m != c)
    throw NotImplementedError(cat("the derivative of svd with full_matrices=true of non-square matrices (as JAX), got ",
                                  x[0]->aval.str()));
  // JAX's rule, on the reduced factors (computed here when y has none).
  NodeRef f = y;
  if (!p.compute_uv) {
    attr::Linalg q = p;
    q.compute_uv = true;
    q.full_matrices = false;
    f = build::linalg(t, Op::svd, {x[0]}, q);
  }
  NodeRef s = build::get_tuple_element(t, f, 0), U = build::get_tuple_element(t, f, 1), Vt = build::get_tuple_element(t, f, 2);
  const DType dt = U->dtype();
  auto as_dt = [&](const NodeRef& real) { return build::convert(t, real, dt); };  // real -> the matrices' dtype
  NodeRef V = mH(t, Vt);
  Shape ks = sh;  // [..., k, k]
  ks[sh.size() - 2] = ks[sh.size() - 1] = std::min(m, c);
  std::vector<std::int64_t> lead(static_cast<size_t>(r - 1));
  std::iota(lead.begin(), lead.end(), 0);
  std::vector<std::int64_t> row_dims = lead;  // s[..., None, :]
  row_dims.back() = r - 1;
  std::vector<std::int64_t> col_dims = lead;  // s[..., :, None]
  NodeRef s_row = build::broadcast_in_dim(t, s, ks, row_dims), s_col = build::broadcast_in_dim(t, s, ks, col_dims);
  NodeRef dS = mm(t, mH(t, U), mm(t, tx[0], V));
  NodeRef eye = eye_like(t, s_row);  // real
  NodeRef diag = build::reduce(t, Op::reduce_sum, build::binary(t, Op::mul, dS, as_dt(eye)), {r - 1});
  NodeRef ds = is_complex(dt) ? build::unary(t, Op::real, diag) : diag;
  if (!p.compute_uv) return build::tuple(t, {ds});
  NodeRef diffs = build::binary(t, Op::mul, build::binary(t, Op::add, s_row, s_col), build::binary(t, Op::sub, s_row, s_col));
  NodeRef F = as_dt(build::binary(t, Op::sub, build::binary(t, Op::div, ad::scalar_like(t, eye, 1.0), build::binary(t, Op::add, diffs, eye)), eye));
  NodeRef dSS = build::binary(t, Op::mul, as_dt(s_row), dS), SdS = build::binary(t, Op::mul, as_dt(s_col), dS);
  NodeRef zero = ad::zeros_like(t, s);
  NodeRef s_zeros = build::convert(t, build::binary(t, Op::eq, s, zero), s->dtype());
  NodeRef s_inv = build::binary(t, Op::sub, build::binary(t, Op::div, ad::scalar_like(t, s, 1.0), build::binary(t, Op::add, s, s_zeros)), s_zeros);
  NodeRef s_inv_mat = as_dt(build::binary(t, Op::mul, build::broadcast_in_dim(t, s_inv, ks, row_dims), eye));
  NodeRef dUdV_diag = build::binary(t, Op::mul, build::binary(t, Op::mul, ad::scalar_like(t, dS, 0.5), build::binary(t, Op::sub, dS, mH(t, dS))), s_inv_mat);
  NodeRef dU = mm(t, U, build::binary(t, Op::add, build::binary(t, Op::mul, F, build::binary(t, Op::add, dSS, mH(t, dSS))), dUdV_diag));
  NodeRef dV = mm(t, V, build::binary(t, Op::mul, F, build::binary(t, Op::add, SdS, mH(t, SdS))));
  if (m > c) {
    NodeRef dAV = mm(t, tx[0], V);
    Shape us = U->shape();
    NodeRef s_u = as_dt(build::broadcast_in_dim(t, s, us, row_dims));
    dU = build::binary(t, Op::add, dU, build::binary(t, Op::div, build::binary(t, Op::sub, dAV, mm(t, U, mm(t, mH(t, U), dAV))), s_u));
  }
  if (c > m) {
    NodeRef dAHU = mm(t, mH(t, tx[0]), U);
    Shape vs = V->shape();
    NodeRef s_v = as_dt(build::broadcast_in_dim(t, s, vs, row_dims));
    dV = build::binary(t, Op::add, dV, build::binary(t, Op::div, build::binary(t, Op::sub, dAHU, mm(t, V, mm(t, Vt, dAHU))), s_v));
  }
  return build::tuple(t, {ds, dU, mH(t, dV)});
}
void Rule<Op::svd>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}

// One matrix split over devices: its rows split over every axis that
// splits it (a 2-D split becomes a row split by one all-to-all), then the
// distributed algorithm, then back to the split it came in.
namespace {
struct MatrixSplit {
  std::vector<int> axes;
  AxisSharding rows;
};
std::optional<MatrixSplit> matrix_split(const Node& n, const AxisSharding& s) {
  if (n.in[0]->rank() != 2 || (s.dims[0].empty() && s.dims[1].empty())) return std::nullopt;
  MatrixSplit m;
  m.axes = s.dims[0];
  m.axes.insert(m.axes.end(), s.dims[1].begin(), s.dims[1].end());
  m.rows = s;
  m.rows.dims = {m.axes, {}};
  return m;
}
}  // namespace

NodeRef Rule<Op::lu>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                            const std::vector<AxisSharding>& op_sh, const AxisSharding&) {
  auto split = matrix_split(n, op_sh[0]);
  if (!split) return build::with_operands(b.table(), n, ops);
  const Shape& G = n.in[0]->shape();
  NodeRef r = la::distributed_lu(b, b.reshard(ops[0], G, op_sh[0], split->rows), G, split->axes);
  NodeTable& t = b.table();
  return build::tuple(t, {b.reshard(build::get_tuple_element(t, r, 0), G, split->rows, op_sh[0]),
                          build::get_tuple_element(t, r, 1), build::get_tuple_element(t, r, 2)});
}
NodeRef Rule<Op::cholesky>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                  const std::vector<AxisSharding>& op_sh, const AxisSharding&) {
  auto split = matrix_split(n, op_sh[0]);
  if (!split) return build::with_operands(b.table(), n, ops);
  const Shape& G = n.in[0]->shape();
  NodeRef l = la::distributed_cholesky(b, b.reshard(ops[0], G, op_sh[0], split->rows), G, split->axes);
  return b.reshard(l, G, split->rows, op_sh[0]);
}
NodeRef Rule<Op::triangular_solve>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                          const std::vector<AxisSharding>& op_sh, const AxisSharding&) {
  auto split = matrix_split(n, op_sh[0]);
  if (!split) return build::with_operands(b.table(), n, ops);
  return la::distributed_triangular_solve(b, ops[0], n.in[0]->shape(), split->axes, ops[1], attrs_of(n));
}
TESSEL_LOCAL_SAME_OP(qr)
TESSEL_LOCAL_SAME_OP(eigh)
TESSEL_LOCAL_SAME_OP(svd)

// Batching: the batch dimension leads, the matrix dims stay minor, so the
// op itself is already batched.
#define TESSEL_BATCH_LINALG(OP)                                                                                   \
  NodeRef Rule<Op::OP>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x,                          \
                              const std::vector<bool>& batched, const BatchInfo& b) {                              \
    return build::linalg(t, Op::OP, bt::all_batched(t, x, batched, b), attrs_of(n));                               \
  }
TESSEL_BATCH_LINALG(cholesky)
TESSEL_BATCH_LINALG(triangular_solve)
TESSEL_BATCH_LINALG(lu)
TESSEL_BATCH_LINALG(qr)
TESSEL_BATCH_LINALG(eigh)
TESSEL_BATCH_LINALG(svd)
#undef TESSEL_BATCH_LINALG
#undef TESSEL_ONLY_AFTER_PARTITIONING

// ------------------------------------------------------------------ complex expansion, cost

// LAPACK's complex routines read and write the packed arrays as they are (codegen/lapack.cpp).
#define TESSEL_COMPLEX_PACKED(OP, ATTR)                                                                        \
  NodeRef Rule<Op::OP>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {    \
    attr::ATTR p = n.attr<attr::ATTR>();                                                                       \
    p.packed_complex = true;                                                                                   \
    return b.table().make(n.op, ops, packed_aval(n.aval), p);                                                  \
  }
TESSEL_COMPLEX_PACKED(cholesky, Linalg)
TESSEL_COMPLEX_PACKED(triangular_solve, Linalg)
TESSEL_COMPLEX_PACKED(lu, Linalg)
TESSEL_COMPLEX_PACKED(qr, Linalg)
TESSEL_COMPLEX_PACKED(eigh, Linalg)
TESSEL_COMPLEX_PACKED(svd, Linalg)
TESSEL_COMPLEX_PACKED(distributed_lu, RowBlocked)
TESSEL_COMPLEX_PACKED(distributed_cholesky, RowBlocked)
TESSEL_COMPLEX_PACKED(distributed_triangular_solve, RowBlocked)
#undef TESSEL_COMPLEX_PACKED

TESSEL_COST(cholesky, memory_cost)
TESSEL_COST(triangular_solve, memory_cost)
TESSEL_COST(lu, memory_cost)
TESSEL_COST(qr, memory_cost)
TESSEL_COST(eigh, memory_cost)
TESSEL_COST(svd, memory_cost)

// The distributed factorisations: what each device reads from its peers.
namespace {
double element_bytes(const Node& n) {
  return double(dtype_size(n.dtype())) * (n.attr<attr::RowBlocked>().packed_complex ? 2 : 1);
}
// Per panel step: the panel's active rows (nb columns), and for lu 2 nb rows, as a device reads them.
NodeCost panel_cost(const Node& n, bool lu) {
  NodeCost c = rule_util::memory_cost(n);
  const auto& a = n.attr<attr::RowBlocked>();
  const std::int64_t cols = n.in[0]->shape()[1], kmax = std::min(a.rows, cols);
  for (std::int64_t c0 = 0; c0 < kmax; c0 += a.panel) {
    const double w = double(std::min(a.panel, kmax - c0));
    c.bytes_moved += (double(a.rows - c0) * w + (lu ? 2 * w * double(cols) : 0)) * element_bytes(n);
  }
  c.communicates = true;
  return c;
}
}  // namespace
NodeCost Rule<Op::distributed_lu>::cost(const Node& n) { return panel_cost(n, true); }
NodeCost Rule<Op::distributed_cholesky>::cost(const Node& n) { return panel_cost(n, false); }
// Per block: x's block as a device reads it, and for op(a) = a^T the owner's partial sums.
NodeCost Rule<Op::distributed_triangular_solve>::cost(const Node& n) {
  NodeCost c = rule_util::memory_cost(n);
  const auto& a = n.attr<attr::RowBlocked>();
  c.bytes_moved = double(a.rows) * double(n.shape()[1]) * element_bytes(n) * (a.transpose_a ? 2 : 1);
  c.communicates = true;
  return c;
}

}  // namespace tessel
