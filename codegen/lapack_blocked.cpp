// The blocked right-looking LU of one row-major matrix (lapack_blocked.hpp).
//
// Why not LAPACK's getrf for the whole matrix: Debian's serial OpenBLAS runs
// on one core, and its trailing updates are its GEMM, which on the 2-core
// Zen 5 host made a 4096^2 float32 solve 3.1x the FMA floor of the host's
// cores. Here each panel step is
//   1. the panel (the active rows, nb columns) factorised by LAPACK's getrf
//      on a column-major copy (one call, taking the library's turn);
//   2. tasks over column blocks, each applying the panel's row swaps to its
//      columns and, right of the panel, solving its part of U's block row
//      (U12 = L11^-1 A12: a unit lower solve in blocks, the off-diagonal
//      parts by tessel's GEMM: solve_left) and subtracting L21 U12 from its rows below
//      the panel (tessel's GEMM, subtracting in place);
// the first task of a step holds the next panel's columns and factorises
// that panel as soon as they are updated (a look-ahead of one step), so the
// panel's serial getrf runs beside the other tasks' updates.
//
// Each element is computed by the same operations in the same order however
// the columns are cut into tasks and wherever they run: the same bits on one
// thread or many.
#include "codegen/lapack_blocked.hpp"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "codegen/lapack_internal.hpp"

namespace tessel::codegen {

namespace {

using namespace lapack_internal;
using i64 = std::int64_t;

// Columns of a panel. 128: the trailing update's GEMM has depth 128 (one
// pass of C per step); the panels' getrf is a few percent of the work.
constexpr i64 kPanel = 128;
// Rows of a block of a triangular solve (solve_left): the in-block part is
// vector axpys, the rest GEMM.
constexpr i64 kSolveBlock = 32;

// Column blocks for tasks: about 4 per thread, 64 to 512 columns, whole GEMM slivers.
i64 block_width(i64 cols, int threads) {
  return std::clamp<i64>(((cols + 4 * threads - 1) / (4 * threads) + 31) & ~i64(31), 64, 512);
}

// f(t) for t in [0, count): as tasks through `parallel` where there are
// threads to share them, else in order on this thread.
void run_tasks(i64 count, int threads, const gemm::ParallelFor& parallel, const std::function<void(i64)>& f) {
  if (threads > 1 && count > 1)
    parallel(count, [&](i64 lo, i64 hi) {
      for (i64 t = lo; t < hi; ++t) f(t);
    });
  else
    for (i64 t = 0; t < count; ++t) f(t);
}

// The panel whose top-left element is (c0, c0), w columns of rows c0 .. m,
// factorised by getrf on a column-major copy in `buf` and written back;
// ipiv: getrf's 1-based pivots relative to row c0.
template <class T>
void factor_panel(T* a, i64 m, i64 n, i64 c0, i64 w, T* buf, int* ipiv) {
  // By tiles (transpose): a column at a time, the copy wrote rows 16 KiB
  // apart at 4096 columns, all in the same cache sets (a tenth of a 4096^2
  // solve's time).
  const i64 rows = m - c0;
  transpose(a + c0 * n + c0, rows, w, n, buf, rows);
  int info = 0;  // > 0: an exactly zero pivot; the factors stand, as getrf's
  locked([&] { Lapack::getrf(int(rows), int(w), buf, int(rows), ipiv, info); });
  transpose(buf, w, rows, rows, a + c0 * n + c0, n);
}

// The panel at c0's row swaps on columns [j0, j1).
template <class T>
void swap_rows(T* a, i64 n, i64 c0, i64 w, const int* ipiv, i64 j0, i64 j1) {
  for (i64 i = 0; i < w; ++i) {
    const i64 p = c0 + ipiv[i] - 1;
    if (p != c0 + i) std::swap_ranges(a + (c0 + i) * n + j0, a + (c0 + i) * n + j1, a + p * n + j0);
  }
}

}  // namespace

template <class T>
void solve_left(const T* a, std::int64_t lda, bool lower, bool transpose, bool unit, T* X, std::int64_t ldx,
                std::int64_t n, std::int64_t cols) {
  // op(a)[i][k] at a[i * rs + k * cs].
  const i64 rs = transpose ? 1 : lda, cs = transpose ? lda : 1;
  auto at = [&](i64 i, i64 k) { return a[i * rs + k * cs]; };
  auto finish_row = [&](i64 i, i64 k0, i64 k1) {  // x_i -= op(a)[i][k] x_k for k in [k0, k1), then / op(a)[i][i]
    T* __restrict xi = X + i * ldx;
    for (i64 k = k0; k < k1; ++k) {
      const T l = at(i, k);
      const T* __restrict xk = X + k * ldx;
      for (i64 j = 0; j < cols; ++j) xi[j] -= l * xk[j];
    }
    if (!unit) {
      const T d = at(i, i);
      for (i64 j = 0; j < cols; ++j) xi[j] /= d;
    }
  };
  auto minus_product = [&](i64 r0, i64 r1, i64 k0, i64 k1) {  // X[r0:r1] -= op(a)[r0:r1, k0:k1] X[k0:k1]
    subtract_product(X + r0 * ldx, ldx, r1 - r0, cols, k1 - k0, a + r0 * rs + k0 * cs, rs, cs, X + k0 * ldx, ldx, i64(1));
  };
  // Rows [lo, hi), the rows solved before them already subtracted: halves
  // down to kSolveBlock rows, so that most of the work is few large GEMMs (a
  // GEMM per block of 32 rows repacked the solved rows each time: a 4096^2
  // solve with 4096 right-hand sides took 2.4x a GEMM's time for its flops).
  const bool forward = lower != transpose;  // op(a) lower
  std::function<void(i64, i64)> solve = [&](i64 lo, i64 hi) {
    if (hi - lo <= kSolveBlock) {
      if (forward)
        for (i64 i = lo; i < hi; ++i) finish_row(i, lo, i);
      else
        for (i64 i = hi - 1; i >= lo; --i) finish_row(i, i + 1, hi);
      return;
    }
    const i64 mid = lo + ((hi - lo) / 2 + kSolveBlock - 1) / kSolveBlock * kSolveBlock;
    if (forward) {
      solve(lo, mid);
      minus_product(mid, hi, lo, mid);
      solve(mid, hi);
    } else {
      solve(mid, hi);
      minus_product(lo, mid, mid, hi);
      solve(lo, mid);
    }
  };
  solve(0, n);
}

bool lu_runs_blocked(std::int64_t m, std::int64_t n) { return std::min(m, n) >= 2 * kPanel; }
bool cholesky_runs_blocked(std::int64_t n) { return n >= 2 * kPanel; }
bool solve_runs_blocked(std::int64_t n, std::int64_t cols) { return n >= 2 * kSolveBlock && cols >= 2 * kSolveBlock; }

template <class T>
void solve_left_tasks(const T* a, std::int64_t lda, bool lower, bool transpose, bool unit, T* X, std::int64_t ldx,
                      std::int64_t n, std::int64_t cols, int threads, const gemm::ParallelFor& parallel) {
  const i64 bw = block_width(cols, threads);
  run_tasks((cols + bw - 1) / bw, threads, parallel,
            [&](i64 t) { solve_left(a, lda, lower, transpose, unit, X + t * bw, ldx, n, std::min(bw, cols - t * bw)); });
}

template <class T>
void blocked_lu(T* a, std::int64_t m, std::int64_t n, std::int32_t* piv, T* work, int threads,
                const gemm::ParallelFor& parallel) {
  const i64 kmax = std::min(m, n);
  std::vector<int> ipiv[2] = {std::vector<int>(size_t(kPanel)), std::vector<int>(size_t(kPanel))};
  T* buf[2] = {work, work + m * kPanel};
  int cur = 0;
  factor_panel(a, m, n, 0, std::min(kPanel, kmax), buf[cur], ipiv[cur].data());
  struct Task {
    i64 j0, j1;
    bool right;  // right of the panel: swaps, solve and update; else swaps only
  };
  std::vector<Task> tasks;
  for (i64 c0 = 0; c0 < kmax;) {
    const i64 w = std::min(kPanel, kmax - c0), c1 = c0 + w, next_w = std::min(kPanel, kmax - c1);
    const int* pv = ipiv[cur].data();
    tasks.clear();
    if (next_w > 0) tasks.push_back({c1, c1 + next_w, true});  // the next panel, first
    for (i64 j0 = c1 + std::max<i64>(next_w, 0), bw = block_width(n - j0, threads); j0 < n; j0 += bw) tasks.push_back({j0, std::min(n, j0 + bw), true});
    for (i64 j0 = 0, bw = block_width(c0, threads); j0 < c0; j0 += bw) tasks.push_back({j0, std::min(c0, j0 + bw), false});
    const T* L11 = a + c0 * n + c0;
    auto run = [&](i64 t) {
      const Task& k = tasks[size_t(t)];
      swap_rows(a, n, c0, w, pv, k.j0, k.j1);
      if (!k.right) return;
      T* U12 = a + c0 * n + k.j0;
      solve_left(L11, n, true, false, true, U12, n, w, k.j1 - k.j0);
      subtract_product(a + c1 * n + k.j0, n, m - c1, k.j1 - k.j0, w, a + c1 * n + c0, n, i64(1), U12, n, i64(1));
      if (t == 0 && next_w > 0) factor_panel(a, m, n, c1, next_w, buf[1 - cur], ipiv[1 - cur].data());
    };
    run_tasks(i64(tasks.size()), threads, parallel, run);
    for (i64 i = 0; i < w; ++i) piv[c0 + i] = std::int32_t(c0 + pv[i] - 1);
    cur = 1 - cur;
    c0 = c1;
  }
}


template <class T>
int blocked_cholesky(T* a, std::int64_t n, int threads, const gemm::ParallelFor& parallel) {
  const i64 rb = 128;  // rows of a task
  for (i64 c0 = 0; c0 < n; c0 += kPanel) {
    const i64 w = std::min(kPanel, n - c0), c1 = c0 + w;
    T* L11 = a + c0 * n + c0;
    // L11: row-major lower is column-major upper, whose potrf('U') U^T U is L L^T.
    int info = 0;
    locked([&] { Lapack::potrf('U', int(w), L11, int(n), info); });
    if (info != 0) return int(c0) + info;
    if (c1 == n) break;
    // L21 = A21 L11^-T, by row blocks: each block transposed (w x rows), L11^-1
    // applied from the left (solve_left), transposed back.
    const i64 blocks = (n - c1 + rb - 1) / rb;
    run_tasks(blocks, threads, parallel, [&](i64 t) {
      const i64 r0 = c1 + t * rb, rows = std::min(rb, n - r0);
      std::vector<T> xt(size_t(w * rows));
      transpose(a + r0 * n + c0, rows, w, n, xt.data(), rows);
      solve_left(L11, n, true, false, false, xt.data(), rows, w, rows);
      transpose(xt.data(), w, rows, rows, a + r0 * n + c0, n);
    });
    // A22 -= L21 L21^T on and below the diagonal (whole row blocks: a block's
    // columns up to its last row; the upper triangle's values are never read).
    run_tasks(blocks, threads, parallel, [&](i64 t) {
      const i64 r0 = c1 + t * rb, rows = std::min(rb, n - r0);
      subtract_product(a + r0 * n + c1, n, rows, r0 + rows - c1, w, a + r0 * n + c0, n, i64(1), a + c1 * n + c0, i64(1),
                       n);  // L21^T: b's rows are L21's columns
    });
  }
  for (i64 i = 0; i < n; ++i) std::fill(a + i * n + i + 1, a + (i + 1) * n, T(0));
  return 0;
}

template void solve_left<float>(const float*, std::int64_t, bool, bool, bool, float*, std::int64_t, std::int64_t,
                                std::int64_t);
template void solve_left<double>(const double*, std::int64_t, bool, bool, bool, double*, std::int64_t, std::int64_t,
                                 std::int64_t);
template int blocked_cholesky<float>(float*, std::int64_t, int, const gemm::ParallelFor&);
template int blocked_cholesky<double>(double*, std::int64_t, int, const gemm::ParallelFor&);
template void solve_left_tasks<float>(const float*, std::int64_t, bool, bool, bool, float*, std::int64_t,
                                      std::int64_t, std::int64_t, int, const gemm::ParallelFor&);
template void solve_left_tasks<double>(const double*, std::int64_t, bool, bool, bool, double*, std::int64_t,
                                       std::int64_t, std::int64_t, int, const gemm::ParallelFor&);
template void blocked_lu<float>(float*, std::int64_t, std::int64_t, std::int32_t*, float*, int, const gemm::ParallelFor&);
template void blocked_lu<double>(double*, std::int64_t, std::int64_t, std::int32_t*, double*, int,
                                 const gemm::ParallelFor&);

}  // namespace tessel::codegen
