// Internal to codegen/lapack*.cpp: the LAPACK/BLAS declarations, their wrappers and shared helpers.
#pragma once

#include <algorithm>
#include <complex>
#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>

#include "codegen/lapack.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/ir.hpp"

// LAPACK's and BLAS's Fortran interface (LP64: 32-bit integers), with the
// hidden lengths of character arguments gfortran appends.
extern "C" {
int openblas_get_parallel();
void spotrf_(const char*, const int*, float*, const int*, int*, std::size_t);
void dpotrf_(const char*, const int*, double*, const int*, int*, std::size_t);
void strsm_(const char*, const char*, const char*, const char*, const int*, const int*, const float*, const float*,
            const int*, float*, const int*, std::size_t, std::size_t, std::size_t, std::size_t);
void dtrsm_(const char*, const char*, const char*, const char*, const int*, const int*, const double*, const double*,
            const int*, double*, const int*, std::size_t, std::size_t, std::size_t, std::size_t);
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
            const float*, const int*, const float*, float*, const int*, std::size_t, std::size_t);
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*, const int*,
            const double*, const int*, const double*, double*, const int*, std::size_t, std::size_t);
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void sgeqrf_(const int*, const int*, float*, const int*, float*, float*, const int*, int*);
void dgeqrf_(const int*, const int*, double*, const int*, double*, double*, const int*, int*);
void sorgqr_(const int*, const int*, const int*, float*, const int*, const float*, float*, const int*, int*);
void dorgqr_(const int*, const int*, const int*, double*, const int*, const double*, double*, const int*, int*);
void ssyevd_(const char*, const char*, const int*, float*, const int*, float*, float*, const int*, int*, const int*,
             int*, std::size_t, std::size_t);
void dsyevd_(const char*, const char*, const int*, double*, const int*, double*, double*, const int*, int*,
             const int*, int*, std::size_t, std::size_t);
void sgesdd_(const char*, const int*, const int*, float*, const int*, float*, float*, const int*, float*, const int*,
             float*, const int*, int*, int*, std::size_t);
void dgesdd_(const char*, const int*, const int*, double*, const int*, double*, double*, const int*, double*,
             const int*, double*, const int*, int*, int*, std::size_t);
// The complex routines (Fortran COMPLEX is std::complex's layout).
using cf = std::complex<float>;
using cd = std::complex<double>;
void cpotrf_(const char*, const int*, cf*, const int*, int*, std::size_t);
void zpotrf_(const char*, const int*, cd*, const int*, int*, std::size_t);
void ctrsm_(const char*, const char*, const char*, const char*, const int*, const int*, const cf*, const cf*,
            const int*, cf*, const int*, std::size_t, std::size_t, std::size_t, std::size_t);
void ztrsm_(const char*, const char*, const char*, const char*, const int*, const int*, const cd*, const cd*,
            const int*, cd*, const int*, std::size_t, std::size_t, std::size_t, std::size_t);
void cgemm_(const char*, const char*, const int*, const int*, const int*, const cf*, const cf*, const int*, const cf*,
            const int*, const cf*, cf*, const int*, std::size_t, std::size_t);
void zgemm_(const char*, const char*, const int*, const int*, const int*, const cd*, const cd*, const int*, const cd*,
            const int*, const cd*, cd*, const int*, std::size_t, std::size_t);
void cgetrf_(const int*, const int*, cf*, const int*, int*, int*);
void zgetrf_(const int*, const int*, cd*, const int*, int*, int*);
void cgeqrf_(const int*, const int*, cf*, const int*, cf*, cf*, const int*, int*);
void zgeqrf_(const int*, const int*, cd*, const int*, cd*, cd*, const int*, int*);
void cungqr_(const int*, const int*, const int*, cf*, const int*, const cf*, cf*, const int*, int*);
void zungqr_(const int*, const int*, const int*, cd*, const int*, const cd*, cd*, const int*, int*);
void cheevd_(const char*, const char*, const int*, cf*, const int*, float*, cf*, const int*, float*, const int*, int*,
             const int*, int*, std::size_t, std::size_t);
void zheevd_(const char*, const char*, const int*, cd*, const int*, double*, cd*, const int*, double*, const int*,
             int*, const int*, int*, std::size_t, std::size_t);
void sgeev_(const char*, const char*, const int*, float*, const int*, float*, float*, float*, const int*, float*,
            const int*, float*, const int*, int*, std::size_t, std::size_t);
void dgeev_(const char*, const char*, const int*, double*, const int*, double*, double*, double*, const int*, double*,
            const int*, double*, const int*, int*, std::size_t, std::size_t);
void cgeev_(const char*, const char*, const int*, cf*, const int*, cf*, cf*, const int*, cf*, const int*, cf*,
            const int*, float*, int*, std::size_t, std::size_t);
void zgeev_(const char*, const char*, const int*, cd*, const int*, cd*, cd*, const int*, cd*, const int*, cd*,
            const int*, double*, int*, std::size_t, std::size_t);
void cgesdd_(const char*, const int*, const int*, cf*, const int*, float*, cf*, const int*, cf*, const int*, cf*,
             const int*, float*, int*, int*, std::size_t);
void zgesdd_(const char*, const int*, const int*, cd*, const int*, double*, cd*, const int*, cd*, const int*, cd*,
             const int*, double*, int*, int*, std::size_t);
}

namespace tessel::codegen::lapack_internal {

// dst (c x r, row-major) = the transpose of src (r x c, row-major), by
// square tiles copied through a buffer in L1: rows of the tile are read
// whole and written whole. (Reading a column of a tile straight from the
// matrix touches one cache line per row at a power-of-two stride, which
// maps them onto the same few cache sets: at 4096 x 4096 float32 that
// transpose took 220-320 ms, this one 17 ms.)
// With row strides: src's rows lds apart, dst's ldd.
template <class T>
void transpose(const T* src, std::int64_t r, std::int64_t c, std::int64_t lds, T* dst, std::int64_t ldd) {
  constexpr std::int64_t B = sizeof(T) <= 4 ? 64 : 32;  // a buffer of at most 16 KiB
  T tile[B][B];
  for (std::int64_t i0 = 0; i0 < r; i0 += B)
    for (std::int64_t j0 = 0; j0 < c; j0 += B) {
      const std::int64_t h = std::min(B, r - i0), w = std::min(B, c - j0);
      for (std::int64_t i = 0; i < h; ++i) std::copy(src + (i0 + i) * lds + j0, src + (i0 + i) * lds + j0 + w, tile[i]);
      for (std::int64_t j = 0; j < w; ++j) {
        T* out = dst + (j0 + j) * ldd + i0;
        for (std::int64_t i = 0; i < h; ++i) out[i] = tile[i][j];
      }
    }
}

// The single, double, complex and double complex routines under one name
// (orgqr is ungqr for complex; syevd is heevd, with its real workspace).
struct Lapack {
  static void potrf(char u, int n, float* a, int lda, int& info) { spotrf_(&u, &n, a, &lda, &info, 1); }
  static void potrf(char u, int n, double* a, int lda, int& info) { dpotrf_(&u, &n, a, &lda, &info, 1); }
  static void potrf(char u, int n, cf* a, int lda, int& info) { cpotrf_(&u, &n, a, &lda, &info, 1); }
  static void potrf(char u, int n, cd* a, int lda, int& info) { zpotrf_(&u, &n, a, &lda, &info, 1); }
  template <class T>
  static void trsm(char side, char uplo, char ta, char diag, int m, int n, const T* a, int lda, T* b, int ldb) {
    const T one = 1;
    if constexpr (std::is_same_v<T, float>) strsm_(&side, &uplo, &ta, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
    else if constexpr (std::is_same_v<T, double>) dtrsm_(&side, &uplo, &ta, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
    else if constexpr (std::is_same_v<T, cf>) ctrsm_(&side, &uplo, &ta, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
    else ztrsm_(&side, &uplo, &ta, &diag, &m, &n, &one, a, &lda, b, &ldb, 1, 1, 1, 1);
  }
  // c = c - op(a) op(b) (column-major).
  template <class T>
  static void gemm_sub(char ta, char tb, int m, int n, int k, const T* a, int lda, const T* b, int ldb, T* c, int ldc) {
    const T minus = -1, one = 1;
    if constexpr (std::is_same_v<T, float>) sgemm_(&ta, &tb, &m, &n, &k, &minus, a, &lda, b, &ldb, &one, c, &ldc, 1, 1);
    else if constexpr (std::is_same_v<T, double>) dgemm_(&ta, &tb, &m, &n, &k, &minus, a, &lda, b, &ldb, &one, c, &ldc, 1, 1);
    else if constexpr (std::is_same_v<T, cf>) cgemm_(&ta, &tb, &m, &n, &k, &minus, a, &lda, b, &ldb, &one, c, &ldc, 1, 1);
    else zgemm_(&ta, &tb, &m, &n, &k, &minus, a, &lda, b, &ldb, &one, c, &ldc, 1, 1);
  }
  static void getrf(int m, int n, float* a, int lda, int* ipiv, int& info) { sgetrf_(&m, &n, a, &lda, ipiv, &info); }
  static void getrf(int m, int n, double* a, int lda, int* ipiv, int& info) { dgetrf_(&m, &n, a, &lda, ipiv, &info); }
  static void getrf(int m, int n, cf* a, int lda, int* ipiv, int& info) { cgetrf_(&m, &n, a, &lda, ipiv, &info); }
  static void getrf(int m, int n, cd* a, int lda, int* ipiv, int& info) { zgetrf_(&m, &n, a, &lda, ipiv, &info); }
  static void geqrf(int m, int n, cf* a, int lda, cf* tau, cf* w, int lw, int& info) {
    cgeqrf_(&m, &n, a, &lda, tau, w, &lw, &info);
  }
  static void geqrf(int m, int n, cd* a, int lda, cd* tau, cd* w, int lw, int& info) {
    zgeqrf_(&m, &n, a, &lda, tau, w, &lw, &info);
  }
  static void orgqr(int m, int n, int k, cf* a, int lda, const cf* tau, cf* w, int lw, int& info) {
    cungqr_(&m, &n, &k, a, &lda, tau, w, &lw, &info);
  }
  static void orgqr(int m, int n, int k, cd* a, int lda, const cd* tau, cd* w, int lw, int& info) {
    zungqr_(&m, &n, &k, a, &lda, tau, w, &lw, &info);
  }
  static void heevd(char j, char u, int n, cf* a, int lda, float* w, cf* wk, int lw, float* rw, int lrw, int* iw, int liw,
                    int& info) {
    cheevd_(&j, &u, &n, a, &lda, w, wk, &lw, rw, &lrw, iw, &liw, &info, 1, 1);
  }
  static void heevd(char j, char u, int n, cd* a, int lda, double* w, cd* wk, int lw, double* rw, int lrw, int* iw,
                    int liw, int& info) {
    zheevd_(&j, &u, &n, a, &lda, w, wk, &lw, rw, &lrw, iw, &liw, &info, 1, 1);
  }
  static void gesdd(char j, int m, int n, cf* a, int lda, float* s, cf* u, int ldu, cf* vt, int ldvt, cf* w, int lw,
                    float* rw, int* iw, int& info) {
    cgesdd_(&j, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w, &lw, rw, iw, &info, 1);
  }
  static void gesdd(char j, int m, int n, cd* a, int lda, double* s, cd* u, int ldu, cd* vt, int ldvt, cd* w, int lw,
                    double* rw, int* iw, int& info) {
    zgesdd_(&j, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w, &lw, rw, iw, &info, 1);
  }
  static void geqrf(int m, int n, float* a, int lda, float* tau, float* w, int lw, int& info) {
    sgeqrf_(&m, &n, a, &lda, tau, w, &lw, &info);
  }
  static void geqrf(int m, int n, double* a, int lda, double* tau, double* w, int lw, int& info) {
    dgeqrf_(&m, &n, a, &lda, tau, w, &lw, &info);
  }
  static void orgqr(int m, int n, int k, float* a, int lda, const float* tau, float* w, int lw, int& info) {
    sorgqr_(&m, &n, &k, a, &lda, tau, w, &lw, &info);
  }
  static void orgqr(int m, int n, int k, double* a, int lda, const double* tau, double* w, int lw, int& info) {
    dorgqr_(&m, &n, &k, a, &lda, tau, w, &lw, &info);
  }
  static void syevd(char j, char u, int n, float* a, int lda, float* w, float* wk, int lw, int* iw, int liw, int& info) {
    ssyevd_(&j, &u, &n, a, &lda, w, wk, &lw, iw, &liw, &info, 1, 1);
  }
  static void syevd(char j, char u, int n, double* a, int lda, double* w, double* wk, int lw, int* iw, int liw,
                    int& info) {
    dsyevd_(&j, &u, &n, a, &lda, w, wk, &lw, iw, &liw, &info, 1, 1);
  }
  static void gesdd(char j, int m, int n, float* a, int lda, float* s, float* u, int ldu, float* vt, int ldvt, float* w,
                    int lw, int* iw, int& info) {
    sgesdd_(&j, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w, &lw, iw, &info, 1);
  }
  static void gesdd(char j, int m, int n, double* a, int lda, double* s, double* u, int ldu, double* vt, int ldvt,
                    double* w, int lw, int* iw, int& info) {
    dgesdd_(&j, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w, &lw, iw, &info, 1);
  }
};

template <class T>
struct RealOf {
  using type = T;
};
template <class T>
struct RealOf<std::complex<T>> {
  using type = T;
};
template <class T>
using real_of = typename RealOf<T>::type;
template <class T>
constexpr bool is_cx = !std::is_same_v<T, real_of<T>>;
// NaN as T (for complex: NaN + 0j, as jnp.full(..., nan) of a complex dtype).
template <class T>
void fill_nan(T* p, std::int64_t n) {
  std::fill(p, p + n, T(std::numeric_limits<real_of<T>>::quiet_NaN()));
}
template <class T>
void conjugate(T* p, std::int64_t n) {
  if constexpr (is_cx<T>)
    for (std::int64_t i = 0; i < n; ++i) p[i] = std::conj(p[i]);
}
// f(T{}) for the element type LAPACK sees: float or double, or their
// complex for packed complex arrays (codegen/complex.cpp).
template <class F>
void with_element(DType d, bool packed_complex, F&& f) {
  if (packed_complex) {
    if (d == DType::float32) f(cf{});
    else f(cd{});
  } else if (d == DType::float32) {
    f(float{});
  } else {
    f(double{});
  }
}
// f() while holding the library (blas_lock).
template <class F>
void locked(F&& f) {
  const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
  f();
}
inline int lapack_int(std::int64_t v, const Node& n) {
  if (v > std::numeric_limits<int>::max())
    throw NotImplementedError(detail::cat(op_name(n.op), " of ", n.in[0]->aval.str(),
                                          ": LAPACK's 32-bit sizes cannot hold a dimension of ", v));
  return int(std::max<std::int64_t>(v, 0));
}

}  // namespace tessel::codegen::lapack_internal
