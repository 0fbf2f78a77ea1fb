#include "codegen/lapack.hpp"

#include <algorithm>
#include <complex>
#include <cstring>
#include <limits>
#include <sstream>

#include "tessel/core/errors.hpp"

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
void cgesdd_(const char*, const int*, const int*, cf*, const int*, float*, cf*, const int*, cf*, const int*, cf*,
             const int*, float*, int*, int*, std::size_t);
void zgesdd_(const char*, const int*, const int*, cd*, const int*, double*, cd*, const int*, cd*, const int*, cd*,
             const int*, double*, int*, int*, std::size_t);
}

namespace tessel::codegen {

bool blas_is_serial() { return openblas_get_parallel() == 0; }

namespace {

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

// dst (c x r, row-major) = the transpose of src (r x c, row-major), by
// tiles that stay in cache (a plain strided loop is several times slower
// on large matrices). A row-major matrix is the column-major transpose, so
// this turns row-major into LAPACK's column-major order and back.
template <class T>
void transpose(const T* src, std::int64_t r, std::int64_t c, T* dst) {
  constexpr std::int64_t B = 32;
  for (std::int64_t i0 = 0; i0 < r; i0 += B)
    for (std::int64_t j0 = 0; j0 < c; j0 += B)
      for (std::int64_t j = j0; j < std::min(j0 + B, c); ++j)
        for (std::int64_t i = i0; i < std::min(i0 + B, r); ++i) dst[j * r + i] = src[i * c + j];
}
// Row-major r x c to column-major, and back.
template <class T>
void to_col(const T* row, std::int64_t r, std::int64_t c, T* col) {
  transpose(row, r, c, col);
}
template <class T>
void from_col(const T* col, std::int64_t r, std::int64_t c, T* row) {
  transpose(col, c, r, row);
}
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
// A workspace size LAPACK answered in a query (a complex one in its real part).
template <class T>
std::size_t work_size(T q) {
  return std::size_t(std::max<real_of<T>>(std::real(q), 1));
}
template <class T>
void conjugate(T* p, std::int64_t n) {
  if constexpr (is_cx<T>)
    for (std::int64_t i = 0; i < n; ++i) p[i] = std::conj(p[i]);
}
int lapack_int(std::int64_t v, const Node& n) {
  if (v > std::numeric_limits<int>::max())
    throw NotImplementedError(detail::cat(op_name(n.op), " of ", n.in[0]->aval.str(),
                                          ": LAPACK's 32-bit sizes cannot hold a dimension of ", v));
  return int(std::max<std::int64_t>(v, 0));
}

class LapackThunk final : public rt::Thunk {
 public:
  LapackThunk(const Node& n, std::vector<int> reads, std::vector<int> writes)
      : op_(n.op), p_(n.attr<attr::Linalg>()), reads_(std::move(reads)), writes_(std::move(writes)), dtype_(n.in[0]->dtype()) {
    // Packed complex operands (codegen/complex.cpp) are [..., 2] of the real dtype: their logical shapes drop the 2.
    for (auto& x : n.in) in_.push_back(p_.packed_complex ? Shape(x->shape().begin(), x->shape().end() - 1) : x->shape());
    const Shape& s = in_[0];
    m_ = lapack_int(s[s.size() - 2], n);
    n_ = lapack_int(s.back(), n);
    batch_ = numel(Shape(s.begin(), s.end() - 2));
    if (op_ == Op::triangular_solve) {
      const Shape& b = in_[1];
      br_ = lapack_int(b[b.size() - 2], n);
      bc_ = lapack_int(b.back(), n);
    }
    std::ostringstream os;
    os << op_name(op_) << ' ' << n.aval.str() << (p_.packed_complex ? " (packed complex, " : " (") << "LAPACK, " << batch_
       << " matrix" << (batch_ == 1 ? ")" : "es)");
    text_ = os.str();
  }
  void run(rt::ExecContext& ctx) const override {
    if (p_.packed_complex) {
      if (dtype_ == DType::float32) run_typed<cf>(ctx);
      else run_typed<cd>(ctx);
    } else if (dtype_ == DType::float32) {
      run_typed<float>(ctx);
    } else {
      run_typed<double>(ctx);
    }
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "library"; }

 private:
  template <class T>
  void run_typed(rt::ExecContext& ctx) const {
    using Re = real_of<T>;
    const T* a = static_cast<const T*>(ctx.slots[size_t(reads_[0])]);
    auto out = [&](size_t k) { return ctx.slots[size_t(writes_.at(k))]; };
    const std::int64_t m = m_, n = n_, k = std::min(m_, n_);
    // A column-major copy of the matrix, for the routines that need one (not cholesky, triangular_solve).
    // Left uninitialised (every use overwrites it first): zeroing it would cost as much as copying.
    std::unique_ptr<T[]> col_buf;
    if (op_ == Op::lu || op_ == Op::qr || op_ == Op::eigh || op_ == Op::svd)
      col_buf.reset(new T[static_cast<std::size_t>(std::max<std::int64_t>(m * n, 1))]);
    struct {
      T* p;
      T* data() const { return p; }
      T& operator[](std::size_t i) const { return p[i]; }
      T* begin() const { return p; }
    } col{col_buf.get()};
    for (std::int64_t b = 0; b < batch_; ++b) {
      const T* ab = a + b * m * n;
      int info = 0;
      switch (op_) {
        case Op::cholesky: {
          // Row-major a is column-major a^T: its upper triangle is a's
          // lower; potrf('U') leaves U with a^T = U^T U there, which read
          // row-major is L = U^T. No transposes.
          T* o = static_cast<T*>(out(0)) + b * n * n;
          if (n == 0) break;
          std::copy(ab, ab + n * n, o);
          Lapack::potrf('U', n_, o, n_, info);
          if (info != 0) {
            fill_nan(o, n * n);
            break;
          }
          for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t j = i + 1; j < n; ++j) o[i * n + j] = 0;
          break;
        }
        case Op::triangular_solve: {
          const T* bb = static_cast<const T*>(ctx.slots[size_t(reads_[1])]) + b * br_ * bc_;
          T* o = static_cast<T*>(out(0)) + b * br_ * bc_;
          // Row-major a is column-major a^T (its other triangle), so a is
          // never transposed. Left side: op(a) x = b with b made
          // column-major (x is as wide as b, usually narrow); right side:
          // x op(a) = b is op(a)^T x^T = b^T, and row-major b is
          // column-major b^T: a left-side solve in place. (OpenBLAS's
          // right-side solve of a few rows is tens of times slower.)
          // Conjugation (complex only): the stored a^T conjugate-transposed
          // ('C') is conj(a), so op(a) = conj(a) on the left and a^H on the
          // right are 'C'; the other two solve conj(a^T) y = conj(b) with
          // 'N' and conjugate y: conj(b), and x, conjugated around the call.
          if (br_ == 0 || bc_ == 0) break;
          const char uplo = p_.lower ? 'U' : 'L', diag = p_.unit_diagonal ? 'U' : 'N';
          const bool cj = is_cx<T> && p_.conjugate_a, tr = p_.transpose_a;
          const bool wrap = cj && (p_.left_side == tr);  // conj(b) in, conj(x) out
          const char op = wrap ? 'N' : cj ? 'C' : (p_.left_side != tr) ? 'T' : 'N';
          if (p_.left_side) {
            std::vector<T> bcol(static_cast<std::size_t>(br_) * static_cast<std::size_t>(bc_));
            to_col(bb, br_, bc_, bcol.data());
            if (wrap) conjugate(bcol.data(), br_ * bc_);
            Lapack::trsm<T>('L', uplo, op, diag, br_, bc_, ab, std::max(n_, 1), bcol.data(), std::max(br_, 1));
            from_col(bcol.data(), br_, bc_, o);
          } else {
            std::copy(bb, bb + br_ * bc_, o);
            if (wrap) conjugate(o, br_ * bc_);
            Lapack::trsm<T>('L', uplo, op, diag, bc_, br_, ab, std::max(n_, 1), o, std::max(bc_, 1));
          }
          if (wrap) conjugate(o, br_ * bc_);
          break;
        }
        case Op::lu: {
          T* o = static_cast<T*>(out(0)) + b * m * n;
          auto* piv = static_cast<std::int32_t*>(out(1)) + b * k;
          auto* perm = static_cast<std::int32_t*>(out(2)) + b * m;
          for (std::int64_t i = 0; i < m; ++i) perm[i] = std::int32_t(i);
          if (m == 0 || n == 0) break;
          std::vector<int> ipiv(static_cast<std::size_t>(k));
          to_col(ab, m, n, col.data());
          Lapack::getrf(m_, n_, col.data(), m_, ipiv.data(), info);  // info > 0: singular, the factors stand
          from_col(col.data(), m, n, o);
          for (std::int64_t i = 0; i < k; ++i) {
            piv[i] = ipiv[size_t(i)] - 1;
            std::swap(perm[i], perm[piv[i]]);
          }
          break;
        }
        case Op::qr: {
          const std::int64_t qc = p_.full_matrices ? m : k, rr = p_.full_matrices ? m : k;
          T* q = static_cast<T*>(out(0)) + b * m * qc;
          T* r = static_cast<T*>(out(1)) + b * rr * n;
          std::fill(r, r + rr * n, T(0));
          if (m == 0) break;
          std::vector<T> tau(std::size_t(std::max<std::int64_t>(k, 1)));
          to_col(ab, m, n, col.data());
          T wq;
          if (n > 0) {
            Lapack::geqrf(m_, n_, col.data(), m_, tau.data(), &wq, -1, info);
            std::vector<T> work(work_size(wq));
            Lapack::geqrf(m_, n_, col.data(), m_, tau.data(), work.data(), int(work.size()), info);
          }
          for (std::int64_t i = 0; i < rr; ++i)
            for (std::int64_t j = i; j < n; ++j) r[i * n + j] = col[size_t(j * m + i)];
          if (qc == 0) break;
          std::vector<T> qcol(std::size_t(m * qc), T(0));
          std::copy(col.begin(), col.begin() + m * k, qcol.begin());  // the reflectors' columns
          Lapack::orgqr(m_, int(qc), int(k), qcol.data(), m_, tau.data(), &wq, -1, info);
          std::vector<T> work(work_size(wq));
          Lapack::orgqr(m_, int(qc), int(k), qcol.data(), m_, tau.data(), work.data(), int(work.size()), info);
          from_col(qcol.data(), m, qc, q);
          break;
        }
        case Op::eigh: {
          T* v = static_cast<T*>(out(0)) + b * n * n;
          Re* w = static_cast<Re*>(out(1)) + b * n;
          if (n == 0) break;
          to_col(ab, n, n, col.data());
          T wq;
          int iwq;
          const char uplo = p_.lower ? 'L' : 'U';
          if constexpr (is_cx<T>) {
            Re rwq;
            Lapack::heevd('V', uplo, n_, col.data(), n_, w, &wq, -1, &rwq, -1, &iwq, -1, info);
            std::vector<T> work(work_size(wq));
            std::vector<Re> rwork(work_size(rwq));
            std::vector<int> iwork(std::size_t(std::max(iwq, 1)));
            Lapack::heevd('V', uplo, n_, col.data(), n_, w, work.data(), int(work.size()), rwork.data(), int(rwork.size()),
                          iwork.data(), int(iwork.size()), info);
          } else {
            Lapack::syevd('V', uplo, n_, col.data(), n_, w, &wq, -1, &iwq, -1, info);
            std::vector<T> work(work_size(wq));
            std::vector<int> iwork(std::size_t(std::max(iwq, 1)));
            Lapack::syevd('V', uplo, n_, col.data(), n_, w, work.data(), int(work.size()), iwork.data(),
                          int(iwork.size()), info);
          }
          if (info != 0) {
            fill_nan(v, n * n);
            fill_nan(w, n);
            break;
          }
          from_col(col.data(), n, n, v);
          break;
        }
        case Op::svd: {
          Re* s = static_cast<Re*>(out(0)) + b * k;
          const std::int64_t uc = p_.full_matrices ? m : k, vr = p_.full_matrices ? n : k;
          T* u = p_.compute_uv ? static_cast<T*>(out(1)) + b * m * uc : nullptr;
          T* vh = p_.compute_uv ? static_cast<T*>(out(2)) + b * vr * n : nullptr;
          if (k == 0) {
            // No values; the vectors of an empty side are the identity.
            if (u) for (std::int64_t i = 0; i < m && i < uc; ++i) u[i * uc + i] = 1;
            if (vh) for (std::int64_t i = 0; i < n && i < vr; ++i) vh[i * n + i] = 1;
            break;
          }
          to_col(ab, m, n, col.data());
          const char job = !p_.compute_uv ? 'N' : p_.full_matrices ? 'A' : 'S';
          std::vector<T> ucol(p_.compute_uv ? std::size_t(m * uc) : 1), vcol(p_.compute_uv ? std::size_t(vr * n) : 1);
          std::vector<int> iwork(static_cast<std::size_t>(8 * k));
          T wq;
          const int ldu = std::max(m_, 1), ldvt = p_.compute_uv ? std::max(int(vr), 1) : 1;
          if constexpr (is_cx<T>) {
            // ?gesdd's real workspace: LAPACK 3.7's bound for either job.
            const std::size_t mn = std::size_t(k), mx = std::size_t(std::max(m, n));
            std::vector<Re> rwork(std::max({7 * mn, 5 * mn * mn + 5 * mn, 2 * mx * mn + 2 * mn * mn + mn, std::size_t(1)}));
            Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, &wq, -1, rwork.data(),
                          iwork.data(), info);
            std::vector<T> work(work_size(wq));
            Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, work.data(),
                          int(work.size()), rwork.data(), iwork.data(), info);
          } else {
            Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, &wq, -1, iwork.data(), info);
            std::vector<T> work(work_size(wq));
            Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, work.data(),
                          int(work.size()), iwork.data(), info);
          }
          if (info != 0) {
            fill_nan(s, k);
            if (u) fill_nan(u, m * uc);
            if (vh) fill_nan(vh, vr * n);
            break;
          }
          if (u) from_col(ucol.data(), m, uc, u);
          if (vh) from_col(vcol.data(), vr, n, vh);
          break;
        }
        default: throw InternalError(detail::cat(op_name(op_), " is not a LAPACK op"));
      }
    }
  }

  Op op_;
  attr::Linalg p_;
  std::vector<int> reads_, writes_;
  DType dtype_;
  std::vector<Shape> in_;
  int m_ = 0, n_ = 0, br_ = 0, bc_ = 0;
  std::int64_t batch_ = 1;
  std::string text_;
};

}  // namespace

std::unique_ptr<rt::Thunk> lapack_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<LapackThunk>(n, reads, writes);
}

}  // namespace tessel::codegen
