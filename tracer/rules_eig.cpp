// Rules of the eig primitive (attr::Linalg): the eigenvalues, and with
// compute_uv the right eigenvectors, of general square matrices, as
// jax.lax.linalg.eig (compute_left_eigenvectors=False). The result is a
// tuple (w) or (w, v), complex of the input's precision for any input; v's
// columns have unit norm (LAPACK's geev). Run by LAPACK's ?geev
// (codegen/lapack_eig.cpp); the reference kernel (tracer/eig_kernel.cpp) is
// a Hessenberg QR iteration of its own. The order of the eigenvalues is the
// algorithm's (JAX's is LAPACK's too): compare them as sets.
//
// Sharding: the batch dims split freely; the matrix dims are never split.
// Derivatives: JAX's. The eigenvalues' tangent is diag(V^-1 dA V); the
// eigenvectors have none (JAX raises NotImplementedError, and so does this).
#include <complex>
#include <limits>

#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tracer/eig_kernel.hpp"
#include "tracer/linalg_build.hpp"
#include "tracer/linalg_rules.hpp"

namespace tessel {

using rule_util::expect_arity;
using namespace linalg_kernels;
using namespace linalg_rules;

Aval Rule<Op::eig>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::eig, in, 1);
  expect_matrix(Op::eig, in[0], true);
  const Shape& s = in[0].shape;
  const DType c = complex_dtype(real_dtype(in[0].dtype));
  std::vector<Aval> e{Aval{c, with(batch_of(s), {s.back()}), false}};
  if (p.compute_uv) e.push_back(Aval{c, s, false});
  return Aval::make_tuple(e);
}
void Rule<Op::eig>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  const Aval& wa = aval.elements[0];
  const DType t = in[0]->dtype;
  const std::int64_t n = wa.shape.back();
  HostArray w, v;
  rule_util::allocate(w, wa);
  if (p.compute_uv) rule_util::allocate(v, aval.elements[1]);
  each_matrix(batch_count(in[0]->shape), [&](std::int64_t b) {
    Mat<C> a(n, n);
    if (is_complex(t)) {
      a = load<C>(t, in[0]->bytes.data(), b, n, n);
    } else {
      Mat<R> r = load<R>(t, in[0]->bytes.data(), b, n, n);
      for (std::size_t i = 0; i < r.v.size(); ++i) a.v[i] = C(r.v[i], 0);
    }
    std::vector<C> ws;
    Mat<C> V;
    try {
      eig_kernel(a, ws, &V);  // V always: the eigenvalues then come from one path (as codegen's)
    } catch (const ValueError&) {
      // Not converged: NaN, as LAPACK's thunk gives.
      const R nan = std::numeric_limits<R>::quiet_NaN();
      ws.assign(std::size_t(n), C(nan, nan));
      V = Mat<C>(n, n);
      for (auto& e : V.v) e = C(nan, nan);
    }
    Mat<C> row(1, n);
    row.v = ws;
    store(wa.dtype, w.bytes.data(), b, row);
    if (p.compute_uv) store(wa.dtype, v.bytes.data(), b, V);
  });
  if (p.compute_uv) rule_util::pack_tuple(out, {&w, &v});
  else rule_util::pack_tuple(out, {&w});
}
FactorRule Rule<Op::eig>::factors(const Node& n) {
  const Shape& s = n.in[0]->shape();
  BatchFactors f(s);
  const std::int64_t m = s.back();
  f.r.operands = {f.dims({m, m})};
  f.r.results = {f.dims({m})};
  if (attrs_of(n).compute_uv) f.r.results.push_back(f.dims({m, m}));
  return f.r;
}
NodeRef Rule<Op::eig>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  if (!tx[0]) return nullptr;
  if (attrs_of(n).compute_uv)
    throw NotImplementedError(
        "The derivatives of eigenvectors are not implemented, only eigenvalues (as JAX's eig): differentiate "
        "linalg::eigvals, or linalg::eig(a, false, false)");
  // dw = diag(V^-1 dA V) (JAX's rule), V^-1 through V's LU factors.
  attr::Linalg with_v;
  with_v.compute_uv = true;
  NodeRef e = build::linalg(t, Op::eig, {x[0]}, with_v);
  NodeRef v = build::get_tuple_element(t, e, 1);
  NodeRef da = build::convert(t, tx[0], v->dtype());
  NodeRef f = build::linalg(t, Op::lu, {v});
  NodeRef lu = build::get_tuple_element(t, f, 0), perm = build::get_tuple_element(t, f, 2);
  NodeRef rhs = la::permute_rows(t, la::mm(t, da, v), perm);
  attr::Linalg lower;
  lower.lower = true;
  lower.unit_diagonal = true;
  attr::Linalg upper;
  upper.lower = false;
  NodeRef m = la::triangular_solve(t, lu, la::triangular_solve(t, lu, rhs, lower), upper);
  NodeRef eye = la::eye_like(t, m);
  const std::int64_t r = std::int64_t(m->shape().size());
  return build::tuple(t, {build::reduce(t, Op::reduce_sum, build::binary(t, Op::mul, m, eye), {r - 1})});
}
void Rule<Op::eig>::transpose(NodeTable&, const Node& n, const NodeRef&, const std::vector<bool>&, std::vector<NodeRef>&) {
  rule_util::not_linear(n);
}
TESSEL_LOCAL_SAME_OP(eig)
// The batch dimension leads; the matrix dims stay minor.
NodeRef Rule<Op::eig>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>& batched,
                             const BatchInfo& b) {
  return build::linalg(t, Op::eig, bt::all_batched(t, x, batched, b), attrs_of(n));
}
// LAPACK reads a complex input, and writes the complex results, packed as
// they are (codegen/lapack_eig.cpp tells a packed input by its rank).
NodeRef Rule<Op::eig>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  attr::Linalg p = attrs_of(n);
  p.packed_complex = true;
  return b.table().make(n.op, ops, packed_aval(n.aval), p);
}
TESSEL_COST(eig, memory_cost)

}  // namespace tessel
