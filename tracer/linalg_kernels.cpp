// The linear-algebra reference kernels (rules_linalg.cpp's eval) and the la:: matrix builders (linalg_build.hpp).
//
// The reference kernels are textbook algorithms in long double, independent
// of LAPACK (which the compiled code calls, codegen/library.cpp): unblocked
// LU with partial pivoting (the first largest pivot, as LAPACK's idamax),
// Cholesky by columns, substitution, Householder QR with LAPACK's sign
// convention (so Q and R agree with geqrf's, up to rounding), cyclic Jacobi
// for eigh and one-sided Jacobi for svd (whose vectors agree with LAPACK's
// up to sign).
#include "tracer/linalg_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tracer/build.hpp"
#include "tracer/linalg_build.hpp"
#include "tracer/rules.hpp"

namespace tessel {

namespace linalg_kernels {

// The triangle of a (lower or not) that op(a) reads, as a full matrix T =
// op(tri(a)) (conjugated and/or transposed; unit diagonal when asked); T is
// lower when lower != transpose.
template <class S>
Mat<S> effective(const Mat<S>& a, const attr::Linalg& p) {
  const std::int64_t n = a.rows;
  Mat<S> t(n, n);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const bool in = p.lower ? j <= i : j >= i;
      S v = !in ? S(0) : (i == j && p.unit_diagonal) ? S(1) : p.conjugate_a ? cj(a(i, j)) : a(i, j);
      if (p.transpose_a) t(j, i) = v;
      else t(i, j) = v;
    }
  return t;
}
// Solves T x = y for a triangular T (lower or upper), in place.
template <class S>
void substitute(const Mat<S>& T, bool lower, std::vector<S>& y) {
  const std::int64_t n = T.rows;
  if (lower)
    for (std::int64_t i = 0; i < n; ++i) {
      S s = y[size_t(i)];
      for (std::int64_t k = 0; k < i; ++k) s -= T(i, k) * y[size_t(k)];
      y[size_t(i)] = s / T(i, i);
    }
  else
    for (std::int64_t i = n - 1; i >= 0; --i) {
      S s = y[size_t(i)];
      for (std::int64_t k = i + 1; k < n; ++k) s -= T(i, k) * y[size_t(k)];
      y[size_t(i)] = s / T(i, i);
    }
}

template <class S>
void triangular_solve_kernel(const attr::Linalg& p, const Mat<S>& a, Mat<S>& b) {
  Mat<S> T = effective(a, p);
  bool lower = p.lower != p.transpose_a;
  if (p.left_side) {
    std::vector<S> col(size_t(b.rows));
    for (std::int64_t j = 0; j < b.cols; ++j) {
      for (std::int64_t i = 0; i < b.rows; ++i) col[size_t(i)] = b(i, j);
      substitute(T, lower, col);
      for (std::int64_t i = 0; i < b.rows; ++i) b(i, j) = col[size_t(i)];
    }
  } else {
    // x T = b  <=>  T^T x^T = b^T, row by row.
    Mat<S> Tt(T.cols, T.rows);
    for (std::int64_t i = 0; i < T.rows; ++i)
      for (std::int64_t j = 0; j < T.cols; ++j) Tt(j, i) = T(i, j);
    std::vector<S> row(size_t(b.cols));
    for (std::int64_t i = 0; i < b.rows; ++i) {
      for (std::int64_t j = 0; j < b.cols; ++j) row[size_t(j)] = b(i, j);
      substitute(Tt, !lower, row);
      for (std::int64_t j = 0; j < b.cols; ++j) b(i, j) = row[size_t(j)];
    }
  }
}

// L with L L^H = a (a's lower triangle read, its diagonal's real part); NaN
// everywhere when a is not positive definite (JAX's answer).
template <class S>
void cholesky_kernel(Mat<S>& a) {
  const std::int64_t n = a.rows;
  Mat<S> L(n, n);
  for (std::int64_t j = 0; j < n; ++j) {
    R d = re(a(j, j));
    for (std::int64_t k = 0; k < j; ++k) d -= abs2(L(j, k));
    if (!(d > 0)) {
      std::fill(a.v.begin(), a.v.end(), S(std::numeric_limits<R>::quiet_NaN()));
      return;
    }
    L(j, j) = std::sqrt(d);
    for (std::int64_t i = j + 1; i < n; ++i) {
      S s = a(i, j);
      for (std::int64_t k = 0; k < j; ++k) s -= L(i, k) * cj(L(j, k));
      L(i, j) = s / L(j, j);
    }
  }
  a = L;
}

// In place: a's rows permuted, L (unit, below the diagonal) and U packed.
// The pivot is the first entry of the largest magnitude as LAPACK's i?amax
// measures it (|re| + |im| for complex).
template <class S>
void lu_kernel(Mat<S>& a, std::vector<std::int64_t>& pivots, std::vector<std::int64_t>& perm) {
  const std::int64_t m = a.rows, n = a.cols, k = std::min(m, n);
  pivots.assign(size_t(k), 0);
  perm.resize(size_t(m));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t j = 0; j < k; ++j) {
    std::int64_t p = j;
    for (std::int64_t i = j + 1; i < m; ++i)
      if (mag1(a(i, j)) > mag1(a(p, j))) p = i;
    pivots[size_t(j)] = p;
    if (p != j) {
      for (std::int64_t c = 0; c < n; ++c) std::swap(a(j, c), a(p, c));
      std::swap(perm[size_t(j)], perm[size_t(p)]);
    }
    if (a(j, j) != S(0))
      for (std::int64_t i = j + 1; i < m; ++i) a(i, j) /= a(j, j);
    for (std::int64_t i = j + 1; i < m; ++i)
      for (std::int64_t c = j + 1; c < n; ++c) a(i, c) -= a(i, j) * a(j, c);
  }
}

// Householder QR with LAPACK's reflectors (?larfg: beta = -sign(re alpha)
// sqrt(|alpha|^2 + |x|^2), real; tau = (beta - alpha) / beta; H = I - tau v
// v^H; the identity when x = 0 and alpha is real). A = H_0 ... H_{k-1} R.
template <class S>
void qr_kernel(const Mat<S>& a, bool full, Mat<S>& q, Mat<S>& r) {
  const std::int64_t m = a.rows, n = a.cols, k = std::min(m, n);
  Mat<S> w = a;
  std::vector<std::vector<S>> vs;
  std::vector<S> taus;
  for (std::int64_t j = 0; j < k; ++j) {
    const S alpha = w(j, j);
    R xnorm = 0;
    for (std::int64_t i = j + 1; i < m; ++i) xnorm += abs2(w(i, j));
    xnorm = std::sqrt(xnorm);
    std::vector<S> v(size_t(m), S(0));
    S tau = 0;
    v[size_t(j)] = 1;
    if (xnorm != 0 || im(alpha) != 0) {
      const R beta = -std::copysign(std::sqrt(abs2(alpha) + xnorm * xnorm), re(alpha));
      tau = (S(beta) - alpha) / S(beta);
      for (std::int64_t i = j + 1; i < m; ++i) v[size_t(i)] = w(i, j) / (alpha - S(beta));
      // Apply H^H = I - conj(tau) v v^H to the trailing columns.
      for (std::int64_t c = j; c < n; ++c) {
        S s = 0;
        for (std::int64_t i = j; i < m; ++i) s += cj(v[size_t(i)]) * w(i, c);
        for (std::int64_t i = j; i < m; ++i) w(i, c) -= cj(tau) * v[size_t(i)] * s;
      }
      w(j, j) = beta;
      for (std::int64_t i = j + 1; i < m; ++i) w(i, j) = 0;
    }
    vs.push_back(std::move(v));
    taus.push_back(tau);
  }
  const std::int64_t qc = full ? m : k, rr = full ? m : k;
  r = Mat<S>(rr, n);
  for (std::int64_t i = 0; i < rr && i < m; ++i)
    for (std::int64_t j = i; j < n; ++j) r(i, j) = w(i, j);
  // Q = H_0 H_1 ... H_{k-1} applied to the first qc columns of I.
  q = Mat<S>(m, qc);
  for (std::int64_t i = 0; i < std::min(m, qc); ++i) q(i, i) = 1;
  for (std::int64_t j = k - 1; j >= 0; --j) {
    const auto& v = vs[size_t(j)];
    for (std::int64_t c = 0; c < qc; ++c) {
      S s = 0;
      for (std::int64_t i = j; i < m; ++i) s += cj(v[size_t(i)]) * q(i, c);
      for (std::int64_t i = j; i < m; ++i) q(i, c) -= taus[size_t(j)] * v[size_t(i)] * s;
    }
  }
}

// Cyclic Jacobi: a (Hermitian, its `lower` triangle read) = V diag(w) V^H,
// w ascending, V's columns the vectors. Each step is the unitary D J: D
// turns a_pq real (a_pq / |a_pq| on column q), J the real rotation that
// zeroes it.
template <class S>
void eigh_kernel(const Mat<S>& a, bool lower, Mat<S>& V, std::vector<R>& w) {
  const std::int64_t n = a.rows;
  Mat<S> A(n, n);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      A(i, j) = i == j ? S(re(a(i, i))) : (lower ? j < i : j > i) ? a(i, j) : cj(a(j, i));
  V = Mat<S>(n, n);
  for (std::int64_t i = 0; i < n; ++i) V(i, i) = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    R off = 0, total = 0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) (i == j ? total : off) += abs2(A(i, j));
    if (!(off > std::numeric_limits<R>::epsilon() * std::numeric_limits<R>::epsilon() * (total + off)) ||
        !std::isfinite(double(off)))
      break;
    for (std::int64_t p = 0; p < n; ++p)
      for (std::int64_t q = p + 1; q < n; ++q) {
        if (A(p, q) == S(0)) continue;
        const R g = std::sqrt(abs2(A(p, q)));
        const S e = A(p, q) / S(g);  // the phase of a_pq (its sign for reals)
        const R theta = (re(A(q, q)) - re(A(p, p))) / (2 * g);
        const R t = std::copysign(R(1), theta) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const R c = 1 / std::sqrt(t * t + 1), s = t * c;
        const S se = S(s) * cj(e), sE = S(s) * e;
        for (std::int64_t k = 0; k < n; ++k) {  // A <- A D J
          const S akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - se * akq;
          A(k, q) = s * akp + c * cj(e) * akq;
        }
        for (std::int64_t k = 0; k < n; ++k) {  // A <- (D J)^H A
          const S apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - sE * aqk;
          A(q, k) = s * apk + c * e * aqk;
        }
        for (std::int64_t k = 0; k < n; ++k) {
          const S vkp = V(k, p), vkq = V(k, q);
          V(k, p) = c * vkp - se * vkq;
          V(k, q) = s * vkp + c * cj(e) * vkq;
        }
      }
  }
  std::vector<std::int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return re(A(x, x)) < re(A(y, y)); });
  Mat<S> Vs(n, n);
  w.resize(size_t(n));
  for (std::int64_t c = 0; c < n; ++c) {
    w[size_t(c)] = re(A(order[size_t(c)], order[size_t(c)]));
    for (std::int64_t i = 0; i < n; ++i) Vs(i, c) = V(i, order[size_t(c)]);
  }
  V = Vs;
}

// Columns c of m made orthonormal to the earlier ones (Gram-Schmidt twice),
// replaced by a unit vector when they vanish: completes a basis.
template <class S>
void complete_basis(Mat<S>& m, std::int64_t from) {
  const std::int64_t rows = m.rows;
  std::int64_t next_unit = 0;
  for (std::int64_t c = from; c < m.cols; ++c) {
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) {
        for (std::int64_t i = 0; i < rows; ++i) m(i, c) = 0;
        m(next_unit++ % rows, c) = 1;
      }
      for (int pass = 0; pass < 2; ++pass)
        for (std::int64_t d = 0; d < c; ++d) {
          S s = 0;
          for (std::int64_t i = 0; i < rows; ++i) s += cj(m(i, d)) * m(i, c);
          for (std::int64_t i = 0; i < rows; ++i) m(i, c) -= s * m(i, d);
        }
      R nrm = 0;
      for (std::int64_t i = 0; i < rows; ++i) nrm += abs2(m(i, c));
      nrm = std::sqrt(nrm);
      if (nrm > R(1e-6)) {
        for (std::int64_t i = 0; i < rows; ++i) m(i, c) /= nrm;
        break;
      }
      if (attempt > rows + 1) break;
    }
  }
}

// One-sided Jacobi: a = U diag(s) V^H, s descending. U is m x uc, V n x vc.
// A pair of columns (p, q) with gamma = w_p^H w_q = |gamma| e is rotated as
// the real pair (w_p, w_q conj(e)).
template <class S>
void svd_kernel(const Mat<S>& a, bool full, Mat<S>& U, std::vector<R>& s, Mat<S>& V) {
  const bool wide = a.rows < a.cols;
  // Work on the tall one: a or a^H.
  Mat<S> W(wide ? a.cols : a.rows, wide ? a.rows : a.cols);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j) (wide ? W(j, i) : W(i, j)) = wide ? cj(a(i, j)) : a(i, j);
  const std::int64_t m = W.rows, n = W.cols;
  Mat<S> Vw(n, n);
  for (std::int64_t i = 0; i < n; ++i) Vw(i, i) = 1;
  for (int sweep = 0; sweep < 100; ++sweep) {
    bool rotated = false;
    for (std::int64_t p = 0; p < n; ++p)
      for (std::int64_t q = p + 1; q < n; ++q) {
        R alpha = 0, beta = 0;
        S gamma = 0;
        for (std::int64_t i = 0; i < m; ++i) {
          alpha += abs2(W(i, p));
          beta += abs2(W(i, q));
          gamma += cj(W(i, p)) * W(i, q);
        }
        const R g = std::sqrt(abs2(gamma));
        if (!(g > std::numeric_limits<R>::epsilon() * std::sqrt(alpha * beta))) continue;
        rotated = true;
        const S e = gamma / S(g);
        const R zeta = (beta - alpha) / (2 * g);
        const R t = std::copysign(R(1), zeta) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        const R c = 1 / std::sqrt(1 + t * t), sn = c * t;
        const S sne = S(sn) * cj(e), snE = S(sn) * e;
        for (std::int64_t i = 0; i < m; ++i) {
          const S x = W(i, p), y = W(i, q);
          W(i, p) = c * x - sne * y;
          W(i, q) = snE * x + c * y;
        }
        for (std::int64_t i = 0; i < n; ++i) {
          const S x = Vw(i, p), y = Vw(i, q);
          Vw(i, p) = c * x - sne * y;
          Vw(i, q) = snE * x + c * y;
        }
      }
    if (!rotated) break;
  }
  std::vector<R> sv(static_cast<size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) {
    R t = 0;
    for (std::int64_t i = 0; i < m; ++i) t += abs2(W(i, j));
    sv[size_t(j)] = std::sqrt(t);
  }
  std::vector<std::int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return sv[size_t(x)] > sv[size_t(y)]; });
  // Left vectors of the tall problem: m x (full ? m : n); right: n x n.
  Mat<S> Ut(m, full ? m : n), Vt(n, n);
  s.resize(size_t(n));
  std::int64_t nonzero = 0;
  for (std::int64_t c = 0; c < n; ++c) {
    const std::int64_t j = order[size_t(c)];
    s[size_t(c)] = sv[size_t(j)];
    for (std::int64_t i = 0; i < n; ++i) Vt(i, c) = Vw(i, j);
    if (sv[size_t(j)] > 0 && nonzero == c) {
      for (std::int64_t i = 0; i < m; ++i) Ut(i, c) = W(i, j) / S(sv[size_t(j)]);
      ++nonzero;
    }
  }
  complete_basis(Ut, nonzero);
  if (wide) {
    // a^H = Ut S Vt^H  =>  a = Vt S Ut^H: U is Vt (n_a rows = a.rows), V is Ut.
    U = Vt;
    V = Ut;
  } else {
    U = Ut;
    V = Vt;
  }
}

// The kernels for the eval rules (linalg_kernels.hpp), for S = R and S = C.
template void triangular_solve_kernel<R>(const attr::Linalg&, const Mat<R>&, Mat<R>&);
template void cholesky_kernel<R>(Mat<R>&);
template void lu_kernel<R>(Mat<R>&, std::vector<std::int64_t>&, std::vector<std::int64_t>&);
template void qr_kernel<R>(const Mat<R>&, bool, Mat<R>&, Mat<R>&);
template void eigh_kernel<R>(const Mat<R>&, bool, Mat<R>&, std::vector<R>&);
template void svd_kernel<R>(const Mat<R>&, bool, Mat<R>&, std::vector<R>&, Mat<R>&);
template void triangular_solve_kernel<C>(const attr::Linalg&, const Mat<C>&, Mat<C>&);
template void cholesky_kernel<C>(Mat<C>&);
template void lu_kernel<C>(Mat<C>&, std::vector<std::int64_t>&, std::vector<std::int64_t>&);
template void qr_kernel<C>(const Mat<C>&, bool, Mat<C>&, Mat<C>&);
template void eigh_kernel<C>(const Mat<C>&, bool, Mat<C>&, std::vector<R>&);
template void svd_kernel<C>(const Mat<C>&, bool, Mat<C>&, std::vector<R>&, Mat<C>&);

}  // namespace linalg_kernels

namespace {

std::vector<std::int64_t> iota_dims(std::int64_t n) {
  std::vector<std::int64_t> d(static_cast<size_t>(n));
  std::iota(d.begin(), d.end(), 0);
  return d;
}
NodeRef band(NodeTable& t, const NodeRef& x, bool lower, std::int64_t k) {
  const Shape& s = x->shape();
  const std::int64_t r = std::int64_t(s.size());
  NodeRef row = build::iota(t, DType::int32, s, r - 2), col = build::iota(t, DType::int32, s, r - 1);
  NodeRef diff = build::binary(t, Op::sub, col, row);
  NodeRef kk = build::broadcast_in_dim(t, build::scalar(t, DType::int32, double(k)), s, {});
  NodeRef keep = build::binary(t, lower ? Op::le : Op::ge, diff, kk);
  return build::select(t, keep, x, ad::zeros_like(t, x));
}

}  // namespace

namespace la {
NodeRef mT(NodeTable& t, const NodeRef& x) {
  auto perm = iota_dims(x->rank());
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return build::transpose(t, x, perm);
}
NodeRef mH(NodeTable& t, const NodeRef& x) { return conj(t, mT(t, x)); }
NodeRef conj(NodeTable& t, const NodeRef& x) { return is_complex(x->dtype()) ? build::unary(t, Op::conj, x) : x; }
NodeRef mm(NodeTable& t, const NodeRef& a, const NodeRef& b) {
  const std::int64_t r = a->rank();
  DotDims d;
  d.lhs_batch = d.rhs_batch = iota_dims(r - 2);
  d.lhs_contract = {r - 1};
  d.rhs_contract = {r - 2};
  return build::dot_general(t, a, b, d);
}
NodeRef tril(NodeTable& t, const NodeRef& x, std::int64_t k) { return band(t, x, true, k); }
NodeRef triu(NodeTable& t, const NodeRef& x, std::int64_t k) { return band(t, x, false, k); }
NodeRef eye_like(NodeTable& t, const NodeRef& x) {
  const Shape& s = x->shape();
  const std::int64_t r = std::int64_t(s.size());
  NodeRef e = build::binary(t, Op::eq, build::iota(t, DType::int32, s, r - 2), build::iota(t, DType::int32, s, r - 1));
  return build::convert(t, e, x->dtype());
}
NodeRef permute_rows(NodeTable& t, const NodeRef& x, const NodeRef& perm) {
  const std::int64_t r = x->rank();
  NodeRef idx = build::broadcast_in_dim(t, perm, x->shape(), iota_dims(r - 1));
  return build::gather(t, x, idx, attr::Indexed{r - 2, true, attr::IndexMode::clip, Op::add});
}
NodeRef triangular_solve(NodeTable& t, const NodeRef& a, const NodeRef& b, attr::Linalg how) {
  return build::linalg(t, Op::triangular_solve, {a, b}, how);
}
}  // namespace la

}  // namespace tessel
