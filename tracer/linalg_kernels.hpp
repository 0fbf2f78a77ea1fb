// The linear-algebra reference kernels (tracer/linalg_kernels.cpp) that the eval rules of rules_linalg.cpp run.
#pragma once

#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

#include "tracer/attrs.hpp"

namespace tessel::linalg_kernels {

using R = long double;
using C = std::complex<R>;
// A dense matrix, row-major, rows x cols, of S: R (real) or C (complex).
template <class S>
struct Mat {
  std::int64_t rows = 0, cols = 0;
  std::vector<S> v;
  Mat() = default;
  Mat(std::int64_t r, std::int64_t c) : rows(r), cols(c), v(std::size_t(r * c), S(0)) {}
  S& operator()(std::int64_t i, std::int64_t j) { return v[std::size_t(i * cols + j)]; }
  S operator()(std::int64_t i, std::int64_t j) const { return v[std::size_t(i * cols + j)]; }
};
// Scalar helpers that read the same for real and complex S.
inline R cj(R x) { return x; }
inline C cj(C x) { return std::conj(x); }
inline R re(R x) { return x; }
inline R re(C x) { return x.real(); }
inline R im(R) { return 0; }
inline R im(C x) { return x.imag(); }
inline R abs2(R x) { return x * x; }
inline R abs2(C x) { return std::norm(x); }
// LAPACK's i?amax magnitude: |x| for reals, |re| + |im| for complex (cabs1).
inline R mag1(R x) { return std::fabs(x); }
inline R mag1(C x) { return std::fabs(x.real()) + std::fabs(x.imag()); }

// The kernels, for S = R and S = C (linalg_kernels.cpp says what each computes).
template <class S>
void triangular_solve_kernel(const attr::Linalg& p, const Mat<S>& a, Mat<S>& b);
template <class S>
void cholesky_kernel(Mat<S>& a);
template <class S>
void lu_kernel(Mat<S>& a, std::vector<std::int64_t>& pivots, std::vector<std::int64_t>& perm);
template <class S>
void qr_kernel(const Mat<S>& a, bool full, Mat<S>& q, Mat<S>& r);
template <class S>
void eigh_kernel(const Mat<S>& a, bool lower, Mat<S>& V, std::vector<R>& w);
template <class S>
void svd_kernel(const Mat<S>& a, bool full, Mat<S>& U, std::vector<R>& s, Mat<S>& V);

}  // namespace tessel::linalg_kernels
