// ts::linalg: jnp.linalg and lax.linalg. Every function works on the two
// minor dims and batches over the leading ones, for float32, float64,
// complex64 and complex128 (LAPACK's s, d, c and z routines); a batch split over devices
// stays split, each device factorising its own matrices (LAPACK on its own
// thread), with no communication.
#pragma once

#include <optional>
#include <string>

#include <boost/hana/adapt_struct.hpp>

#include <tessel/array.hpp>
#include <tessel/ops.hpp>

namespace tessel::linalg {

// lax.linalg.lu: P a = L U with L unit lower (below lu's diagonal), U upper
// (on and above it); pivots[i]: the row swapped with row i at step i;
// permutation: a[permutation] = L U. int32 pivots and permutation.
struct LU {
  Array lu, pivots, permutation;
};
LU lu(const Array& a);
// jax.scipy.linalg.lu_factor / lu_solve (trans 0: a x = b, 1: a^T x = b,
// 2: a^H x = b).
struct LUFactor {
  Array lu, pivots;
};
LUFactor lu_factor(const Array& a);
Array lu_solve(const LUFactor& lu_and_pivots, const Array& b, int trans = 0);
// jnp.linalg.solve: b is a vector when 1-D, else a batch of matrices [..., n, k].
Array solve(const Array& a, const Array& b);
Array inv(const Array& a);
Array det(const Array& a);
struct SlogDet {
  Array sign, logabsdet;
};
SlogDet slogdet(const Array& a);
// jnp.linalg.cholesky: L (lower) with L L^H = a, or L^H with upper; NaNs
// when a is not positive definite. a is symmetrised first ((a + a^H) / 2)
// unless symmetrize_input is false (then its lower triangle is read): a
// matrix split 2-D over devices is factorised without being transposed.
Array cholesky(const Array& a, bool upper = false, bool symmetrize_input = true);
// jnp.linalg.qr: mode "reduced" (q [..., m, k], r [..., k, n]), "complete"
// (q square) or "r" (r only; q left empty).
struct QR {
  Array q, r;
};
QR qr(const Array& a, const std::string& mode = "reduced");
// jnp.linalg.eigh: ascending eigenvalues (real, also for a complex Hermitian
// a) and the eigenvectors (columns).
struct Eigh {
  Array eigenvalues, eigenvectors;
};
Eigh eigh(const Array& a, const std::string& UPLO = "L", bool symmetrize_input = true);
Array eigvalsh(const Array& a, const std::string& UPLO = "L");
// jnp.linalg.svd: a = u diag(s) vh, s descending (real, also for complex a).
// The eigenvalues and right eigenvectors (columns, unit norm) of general
// square matrices, complex for any input, as jnp.linalg.eig (LAPACK's
// ?geev; CPU only in JAX too). Their order is the algorithm's. Only the
// eigenvalues have a derivative (as JAX's).
struct Eig {
  Array eigenvalues, eigenvectors;
};
Eig eig(const Array& a, bool compute_left_eigenvectors = false, bool compute_right_eigenvectors = true);
Array eigvals(const Array& a);

struct SVD {
  Array u, s, vh;
};
SVD svd(const Array& a, bool full_matrices = true);
Array svdvals(const Array& a);
// lax.linalg.triangular_solve (its defaults: right side, upper triangle);
// conjugate_a solves with conj(a) (a^H with transpose_a).
struct TriangularSolveOptions {
  bool left_side = false, lower = false, transpose_a = false, unit_diagonal = false;
  bool conjugate_a = false;
};
Array triangular_solve(const Array& a, const Array& b, TriangularSolveOptions options = {});
// jnp.linalg.norm: ord none (2-norm / Frobenius), a number (inf: INFINITY),
// or "fro" / "nuc"; axis none (all of a vector or matrix), one axis (vector
// norms) or two (matrix norms).
Array norm(const Array& x, std::optional<double> ord = std::nullopt, Axes axis = {}, bool keepdims = false);
Array norm(const Array& x, const std::string& ord, Axes axis = {}, bool keepdims = false);

}  // namespace tessel::linalg

// The result structs are pytrees (JAX's results are namedtuples): they work
// wherever a pytree does (jit, grad, vmap, device_put, tree::map).
BOOST_HANA_ADAPT_STRUCT(tessel::linalg::LU, lu, pivots, permutation);
BOOST_HANA_ADAPT_STRUCT(tessel::linalg::LUFactor, lu, pivots);
BOOST_HANA_ADAPT_STRUCT(tessel::linalg::SlogDet, sign, logabsdet);
BOOST_HANA_ADAPT_STRUCT(tessel::linalg::QR, q, r);
BOOST_HANA_ADAPT_STRUCT(tessel::linalg::Eigh, eigenvalues, eigenvectors);
BOOST_HANA_ADAPT_STRUCT(tessel::linalg::SVD, u, s, vh);
BOOST_HANA_ADAPT_STRUCT(tessel::linalg::Eig, eigenvalues, eigenvectors);
