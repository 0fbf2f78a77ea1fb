// The single-device LAPACK thunk (lapack_routine); the distributed ones are in lapack_distributed.cpp.
#include "codegen/lapack.hpp"

#include <algorithm>
#include <complex>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>

#include "codegen/lapack_blocked.hpp"
#include "codegen/lapack_internal.hpp"
#include "codegen/library.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::codegen {

bool blas_is_serial() { return openblas_get_parallel() == 0; }

std::mutex& blas_lock() {
  static std::mutex m;
  return m;
}

namespace {

using namespace lapack_internal;

using lapack_internal::transpose;  // with row strides
template <class T>
void transpose(const T* src, std::int64_t r, std::int64_t c, T* dst) {
  transpose(src, r, c, c, dst, r);
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
// A workspace size LAPACK answered in a query (a complex one in its real part).
template <class T>
std::size_t work_size(T q) {
  return std::size_t(std::max<real_of<T>>(std::real(q), 1));
}
// The ops LAPACK runs on a column-major copy of each matrix.
bool needs_col(Op op) { return op == Op::lu || op == Op::qr || op == Op::eigh || op == Op::svd; }

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
    os << op_name(op_) << ' ' << n.aval.str() << (p_.packed_complex ? " (packed complex, " : " (")
       << (!blocked()                 ? "LAPACK, "
           : op_ == Op::lu            ? "blocked with tessel's GEMM, LAPACK's getrf for panels, "
           : op_ == Op::cholesky      ? "blocked with tessel's GEMM, LAPACK's potrf for diagonal blocks, "
                                      : "blocked with tessel's GEMM, ")
       << batch_ << " matrix"
       << (batch_ == 1 ? ")" : "es)");
    // Blocked ones run on the whole host where they are as large as a dot that does (codegen/dot.cpp).
    const double flops = op_ == Op::lu         ? double(m_) * n_ * std::min(m_, n_)
                         : op_ == Op::cholesky ? double(n_) * n_ * n_ / 3
                                               : double(br_) * br_ * bc_;
    if (blocked() && flops >= 2.0 * 512 * 512 * 512) {
      width_ = machine_wide_width();
      os << ' ' << width_words(width_);
    }
    text_ = os.str();
  }
  rt::ComputeSlot::Width width() const override { return width_; }
  // The library's calls take turns (blas_lock); the copies and transposes
  // around them run on every device at once.
  void run(rt::ExecContext& ctx) const override {
    with_element(dtype_, p_.packed_complex, [&](auto tag) { run_typed<decltype(tag)>(ctx); });
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "library"; }

 private:
  // Whether the op runs in codegen/lapack_blocked.cpp on tessel's GEMM
  // rather than in one LAPACK call: the lu of a real matrix both of whose
  // sides are at least two panels, the cholesky of one of at least two
  // panels, and a real left-side triangular solve with many right-hand sides.
  bool blocked() const {
    if (p_.packed_complex) return false;
    if (op_ == Op::lu) return lu_runs_blocked(m_, n_);
    if (op_ == Op::cholesky) return cholesky_runs_blocked(n_);
    return op_ == Op::triangular_solve && p_.left_side && solve_runs_blocked(br_, bc_);
  }
  // Threads for the blocked routines' tasks: the whole host's in a machine-wide turn, else the device's.
  static int task_threads(const rt::ExecContext& ctx) {
    return ctx.machine_wide ? rt::ComputeSlot::machine_threads() : rt::Runtime::get().threads_per_device();
  }

  template <class T>
  void run_typed(rt::ExecContext& ctx) const {
    using Re = real_of<T>;
    const T* a = static_cast<const T*>(ctx.slots[size_t(reads_[0])]);
    auto out = [&](size_t k) { return ctx.slots[size_t(writes_.at(k))]; };
    const std::int64_t m = m_, n = n_, k = std::min(m_, n_);
    // A column-major copy of the matrix, for the routines that need one (not
    // cholesky, triangular_solve): the workspace slot after the results
    // (lapack_workspace), a block of the device's pool, so its pages are not
    // faulted in again on every call (64 MiB of them took 280 ms here).
    // Left uninitialised (every use overwrites it first).
    struct {
      T* p;
      T* data() const { return p; }
      T& operator[](std::size_t i) const { return p[i]; }
      T* begin() const { return p; }
    } col{needs_col(op_) ? static_cast<T*>(ctx.slots[size_t(writes_.back())]) : nullptr};
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
          if constexpr (!is_cx<T>)
            if (blocked()) {
              if (blocked_cholesky(o, n, task_threads(ctx), step_tasks(ctx.machine_wide)) != 0) fill_nan(o, n * n);
              break;
            }
          locked([&] { Lapack::potrf('U', n_, o, n_, info); });
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
          if constexpr (!is_cx<T>)
            if (blocked()) {  // row-major in place, a read as it lies
              std::copy(bb, bb + br_ * bc_, o);
              solve_left_tasks(ab, n, p_.lower, p_.transpose_a, p_.unit_diagonal, o, bc_, br_, bc_, task_threads(ctx),
                               step_tasks(ctx.machine_wide));
              break;
            }
          if (p_.left_side) {
            std::vector<T> bcol(static_cast<std::size_t>(br_) * static_cast<std::size_t>(bc_));
            to_col(bb, br_, bc_, bcol.data());
            if (wrap) conjugate(bcol.data(), br_ * bc_);
            locked([&] { Lapack::trsm<T>('L', uplo, op, diag, br_, bc_, ab, std::max(n_, 1), bcol.data(), std::max(br_, 1)); });
            from_col(bcol.data(), br_, bc_, o);
          } else {
            std::copy(bb, bb + br_ * bc_, o);
            if (wrap) conjugate(o, br_ * bc_);
            locked([&] { Lapack::trsm<T>('L', uplo, op, diag, bc_, br_, ab, std::max(n_, 1), o, std::max(bc_, 1)); });
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
          if constexpr (!is_cx<T>)
            if (blocked()) {
              std::copy(ab, ab + m * n, o);
              blocked_lu(o, m, n, piv, col.data(), task_threads(ctx), step_tasks(ctx.machine_wide));
              for (std::int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[piv[i]]);
              break;
            }
          std::vector<int> ipiv(static_cast<std::size_t>(k));
          to_col(ab, m, n, col.data());
          locked([&] { Lapack::getrf(m_, n_, col.data(), m_, ipiv.data(), info); });  // info > 0: singular, the factors stand
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
          if (m == 0) break;
          std::vector<T> tau(std::size_t(std::max<std::int64_t>(k, 1)));
          to_col(ab, m, n, col.data());
          T wq;
          if (n > 0) {
            locked([&] { Lapack::geqrf(m_, n_, col.data(), m_, tau.data(), &wq, -1, info); });
            std::vector<T> work(work_size(wq));
            locked([&] { Lapack::geqrf(m_, n_, col.data(), m_, tau.data(), work.data(), int(work.size()), info); });
          }
          // R: the first rr rows of the factored matrix (its first rr columns
          // read as row-major n x m), the reflectors below the diagonal zeroed.
          // (Read column by column it was 6 ms of a 1024^2 float32 qr's 58.)
          transpose(col.data(), n, rr, m, r, n);
          for (std::int64_t i = 1; i < rr; ++i) std::fill(r + i * n, r + i * n + std::min(i, n), T(0));
          if (qc == 0) break;
          // Q from the reflectors' columns: in place where Q has no more
          // columns than the matrix, else in a copy with room for them.
          std::vector<T> wide;
          if (qc > n) {
            wide.assign(std::size_t(m * qc), T(0));
            std::copy(col.begin(), col.begin() + m * k, wide.begin());
          }
          T* qcol = qc > n ? wide.data() : col.data();
          locked([&] { Lapack::orgqr(m_, int(qc), int(k), qcol, m_, tau.data(), &wq, -1, info); });
          std::vector<T> work(work_size(wq));
          locked([&] { Lapack::orgqr(m_, int(qc), int(k), qcol, m_, tau.data(), work.data(), int(work.size()), info); });
          from_col(qcol, m, qc, q);
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
            locked([&] { Lapack::heevd('V', uplo, n_, col.data(), n_, w, &wq, -1, &rwq, -1, &iwq, -1, info); });
            std::vector<T> work(work_size(wq));
            std::vector<Re> rwork(work_size(rwq));
            std::vector<int> iwork(std::size_t(std::max(iwq, 1)));
            locked([&] { Lapack::heevd('V', uplo, n_, col.data(), n_, w, work.data(), int(work.size()), rwork.data(), int(rwork.size()),
                          iwork.data(), int(iwork.size()), info); });
          } else {
            locked([&] { Lapack::syevd('V', uplo, n_, col.data(), n_, w, &wq, -1, &iwq, -1, info); });
            std::vector<T> work(work_size(wq));
            std::vector<int> iwork(std::size_t(std::max(iwq, 1)));
            locked([&] { Lapack::syevd('V', uplo, n_, col.data(), n_, w, work.data(), int(work.size()), iwork.data(),
                          int(iwork.size()), info); });
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
            locked([&] { Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, &wq, -1, rwork.data(),
                          iwork.data(), info); });
            std::vector<T> work(work_size(wq));
            locked([&] { Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, work.data(),
                          int(work.size()), rwork.data(), iwork.data(), info); });
          } else {
            locked([&] { Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, &wq, -1, iwork.data(), info); });
            std::vector<T> work(work_size(wq));
            locked([&] { Lapack::gesdd(job, m_, n_, col.data(), m_, s, ucol.data(), ldu, vcol.data(), ldvt, work.data(),
                          int(work.size()), iwork.data(), info); });
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
  rt::ComputeSlot::Width width_ = rt::ComputeSlot::Width::device;
};

}  // namespace

std::size_t lapack_workspace(const Node& n) {
  if (!needs_col(n.op)) return 0;
  const bool packed = n.attr<attr::Linalg>().packed_complex;
  Shape s = n.in[0]->shape();
  if (packed) s.pop_back();
  const std::int64_t m = s[s.size() - 2], c = s.back();
  return dtype_size(n.in[0]->dtype()) * (packed ? 2 : 1) * std::size_t(std::max<std::int64_t>(m * c, 1));
}

std::unique_ptr<rt::Thunk> lapack_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<LapackThunk>(n, reads, writes);
}

}  // namespace tessel::codegen
