// The reference kernel of the general eigenproblem (eig_kernel.hpp), for the eval rule of rules_eig.cpp.
//
// A textbook algorithm in long double, independent of LAPACK (whose geev the
// compiled code calls, and which this checks): Householder reduction to
// upper Hessenberg form, then complex single-shift QR iteration (Golub & Van
// Loan 7.5: Wilkinson shifts, deflation on negligible subdiagonal entries,
// an exceptional shift every 10 iterations without deflation, as zlahqr's)
// to the Schur form T = Q^H A Q; the eigenvalues are diag(T). Each
// eigenvector is found by back substitution in T (as ztrevc), mapped back by
// Q and normalized as geev's. No balancing: it changes no eigenvector's
// direction, only the rounding.
#include "tracer/eig_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessel/core/errors.hpp"

namespace tessel::linalg_kernels {

namespace {

using I = std::int64_t;
constexpr R kEps = std::numeric_limits<R>::epsilon();

// Reduces H to upper Hessenberg form by Householder reflections P_k = I - f
// v v^H (acting on rows/columns k+1..n-1): H <- P H P, Q <- Q P.
void hessenberg(Mat<C>& H, Mat<C>& Q) {
  const I n = H.rows;
  std::vector<C> v(static_cast<size_t>(n));
  for (I k = 0; k + 2 < n; ++k) {
    R xn2 = 0;
    for (I i = k + 1; i < n; ++i) xn2 += std::norm(H(i, k));
    if (xn2 == std::norm(H(k + 1, k))) continue;  // nothing below the subdiagonal to zero
    const C x0 = H(k + 1, k);
    // P x = beta e1, with beta's phase opposite x0's: no cancellation in v.
    const C beta = -(x0 == C(0) ? C(1) : x0 / std::abs(x0)) * std::sqrt(xn2);
    for (I i = k + 1; i < n; ++i) v[size_t(i)] = H(i, k);
    v[size_t(k + 1)] -= beta;
    R vn2 = 0;
    for (I i = k + 1; i < n; ++i) vn2 += std::norm(v[size_t(i)]);
    const R f = 2 / vn2;
    for (I j = k; j < n; ++j) {  // H <- P H (columns before k are zero in these rows)
      C s = 0;
      for (I i = k + 1; i < n; ++i) s += std::conj(v[size_t(i)]) * H(i, j);
      s *= f;
      for (I i = k + 1; i < n; ++i) H(i, j) -= s * v[size_t(i)];
    }
    for (I i = 0; i < n; ++i) {  // H <- H P, Q <- Q P
      C s = 0, t = 0;
      for (I j = k + 1; j < n; ++j) {
        s += H(i, j) * v[size_t(j)];
        t += Q(i, j) * v[size_t(j)];
      }
      s *= f;
      t *= f;
      for (I j = k + 1; j < n; ++j) {
        H(i, j) -= s * std::conj(v[size_t(j)]);
        Q(i, j) -= t * std::conj(v[size_t(j)]);
      }
    }
    H(k + 1, k) = beta;
    for (I i = k + 2; i < n; ++i) H(i, k) = 0;
  }
}

// A plane rotation G = [c s; -conj(s) c] (c real, unitary) with G [x; y] = [r; 0].
struct Rot {
  R c;
  C s;
};
Rot rotation(C x, C y) {
  if (y == C(0)) return {1, 0};
  const R ax = std::abs(x), ay = std::abs(y);
  if (ax == 0) return {0, std::conj(y) / ay};
  const R nrm = std::hypot(ax, ay);
  return {ax / nrm, (x / ax) * std::conj(y) / nrm};
}

// Complex single-shift QR iteration on the Hessenberg H, down to the upper
// triangular Schur form T (in H), with Q <- Q Z for the rotations Z. Each
// step is an explicit shifted QR step on the active block [lo, hi]: H - mu I
// = G R, H <- R G + mu I, applied to the whole matrix (the rows above the
// block and the columns right of it too) so that H stays Q^H A Q.
void schur(Mat<C>& H, Mat<C>& Q) {
  const I n = H.rows;
  R hnorm = 0;  // the scale of negligible when the local one is zero
  for (const C& x : H.v) hnorm += std::norm(x);
  hnorm = std::sqrt(hnorm);
  const I cap = 30 * std::max<I>(10, n);  // iterations per deflation, as zlahqr's
  std::vector<Rot> rots(static_cast<size_t>(n));
  I its = 0;
  for (I hi = n - 1; hi > 0;) {
    // The active block [lo, hi] ends at the last negligible subdiagonal entry at or above hi.
    I lo = hi;
    for (; lo > 0; --lo) {
      R tst = mag1(H(lo - 1, lo - 1)) + mag1(H(lo, lo));
      if (tst == 0) tst = hnorm;
      if (mag1(H(lo, lo - 1)) <= kEps * tst) {
        H(lo, lo - 1) = 0;
        break;
      }
    }
    if (lo == hi) {  // H(hi, hi) is an eigenvalue: deflate
      --hi;
      its = 0;
      continue;
    }
    if (++its > cap) throw ValueError("eig: the QR iteration did not converge");
    C mu;
    if (its % 10 == 0) {
      // Exceptional shift, at the top of the block then at the bottom: breaks
      // the cycles of shifts that leave H unchanged (e.g. a cyclic permutation,
      // whose Wilkinson shift is 0 and whose QR step is the identity map).
      const I e = its % 20 == 10 ? lo : hi;
      mu = H(e, e) + R(0.75) * std::abs(e == lo ? H(lo + 1, lo) : H(hi, hi - 1));
    } else {
      // Wilkinson's: the eigenvalue of the trailing 2x2 block nearer to d.
      // x = lambda - d solves x^2 - 2 m x - b c = 0; the smaller root is
      // -b c / (the larger), computed so to avoid cancellation.
      const C a = H(hi - 1, hi - 1), b = H(hi - 1, hi), c = H(hi, hi - 1), d = H(hi, hi);
      const C m = (a - d) / R(2), r = std::sqrt(m * m + b * c);
      const C big = std::abs(m + r) >= std::abs(m - r) ? m + r : m - r;
      mu = big == C(0) ? d : d - b * c / big;
    }
    for (I i = lo; i <= hi; ++i) H(i, i) -= mu;
    for (I k = lo; k < hi; ++k) {  // H <- G_k H, zeroing H(k+1, k): R
      const Rot g = rots[size_t(k)] = rotation(H(k, k), H(k + 1, k));
      for (I j = k; j < n; ++j) {
        const C x = H(k, j), y = H(k + 1, j);
        H(k, j) = g.c * x + g.s * y;
        H(k + 1, j) = -std::conj(g.s) * x + g.c * y;
      }
      H(k + 1, k) = 0;
    }
    for (I k = lo; k < hi; ++k) {  // H <- H G_k^H (R is triangular: rows to k+1), Q <- Q G_k^H
      const Rot g = rots[size_t(k)];
      for (I i = 0; i <= k + 1; ++i) {
        const C x = H(i, k), y = H(i, k + 1);
        H(i, k) = g.c * x + std::conj(g.s) * y;
        H(i, k + 1) = -g.s * x + g.c * y;
      }
      for (I i = 0; i < n; ++i) {
        const C x = Q(i, k), y = Q(i, k + 1);
        Q(i, k) = g.c * x + std::conj(g.s) * y;
        Q(i, k + 1) = -g.s * x + g.c * y;
      }
    }
    for (I i = lo; i <= hi; ++i) H(i, i) += mu;
  }
}

// The right eigenvectors of A = Q T Q^H, as columns of V: for each k, y
// solves (T - t_kk I) y = 0 with y_k = 1 and y_j = 0 for j > k (back
// substitution, where a divisor t_jj - t_kk smaller than smin, from a
// repeated or close eigenvalue, is replaced by smin as ztrevc does), then v =
// Q y, normalized as geev's.
void eigenvectors(const Mat<C>& T, const Mat<C>& Q, R anorm, Mat<C>& V) {
  const I n = T.rows;
  const R smin = std::max(kEps * anorm, std::numeric_limits<R>::min());
  const R huge = std::sqrt(std::numeric_limits<R>::max()) * kEps;  // rescale y before it can overflow
  V = Mat<C>(n, n);
  std::vector<C> y(static_cast<size_t>(n));
  for (I k = 0; k < n; ++k) {
    std::fill(y.begin(), y.end(), C(0));
    y[size_t(k)] = 1;
    const C lam = T(k, k);
    for (I j = k - 1; j >= 0; --j) {
      C s = 0;
      for (I m = j + 1; m <= k; ++m) s += T(j, m) * y[size_t(m)];
      C d = T(j, j) - lam;
      if (mag1(d) < smin) d = smin;
      y[size_t(j)] = -s / d;
      const R g = mag1(y[size_t(j)]);
      if (g > huge)
        for (I m = j; m <= k; ++m) y[size_t(m)] /= g;
    }
    R nrm = 0;
    for (I i = 0; i < n; ++i) {
      C s = 0;
      for (I m = 0; m <= k; ++m) s += Q(i, m) * y[size_t(m)];
      V(i, k) = s;
      nrm += std::norm(s);
    }
    // Unit norm, with the first component of largest modulus real and positive.
    I p = 0;
    for (I i = 1; i < n; ++i)
      if (std::norm(V(i, k)) > std::norm(V(p, k))) p = i;
    const C scale = std::conj(V(p, k)) / (std::abs(V(p, k)) * std::sqrt(nrm));
    for (I i = 0; i < n; ++i) V(i, k) *= scale;
    V(p, k) = C(V(p, k).real(), 0);
  }
}

}  // namespace

void eig_kernel(const Mat<C>& a, std::vector<C>& w, Mat<C>* V) {
  if (a.rows != a.cols) throw ShapeError("eig: the matrix is not square");
  const I n = a.rows;
  w.assign(size_t(n), C(0));
  R anorm = 0;
  bool finite = true;
  for (const C& x : a.v) {
    finite = finite && std::isfinite(x.real()) && std::isfinite(x.imag());
    anorm += std::norm(x);
  }
  if (!finite) {  // no iteration would converge: NaN throughout, as LAPACK's result would be
    const C nan(std::numeric_limits<R>::quiet_NaN(), std::numeric_limits<R>::quiet_NaN());
    std::fill(w.begin(), w.end(), nan);
    if (V) {
      *V = Mat<C>(n, n);
      std::fill(V->v.begin(), V->v.end(), nan);
    }
    return;
  }
  anorm = std::sqrt(anorm);
  Mat<C> H = a, Q(n, n);
  for (I i = 0; i < n; ++i) Q(i, i) = 1;
  hessenberg(H, Q);
  schur(H, Q);
  for (I i = 0; i < n; ++i) w[size_t(i)] = H(i, i);
  if (V) eigenvectors(H, Q, anorm, *V);
}

}  // namespace tessel::linalg_kernels
