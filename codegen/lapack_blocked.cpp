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
#include <atomic>
#include <cmath>
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

namespace {

// Per column of X (n x cols), its first row that is not zero (n: none), or
// empty where skipping leading zero rows would not pay (less than a fifth
// of the work) or could change a value.
template <class T>
std::vector<i64> leading_zero_rows(const T* a, i64 lda, bool transpose, bool unit, const T* X, i64 ldx, i64 n,
                                   i64 cols, int threads, const gemm::ParallelFor& parallel) {
  std::vector<i64> first(size_t(cols), n);
  const i64 bw = 256;
  run_tasks((cols + bw - 1) / bw, threads, parallel, [&](i64 t) {
    const i64 j0 = t * bw, j1 = std::min(cols, j0 + bw);
    i64 left = j1 - j0;
    for (i64 i = 0; i < n && left > 0; ++i)
      for (i64 j = j0; j < j1; ++j)
        if (first[size_t(j)] == n && X[i * ldx + j] != T(0)) first[size_t(j)] = i, --left;
  });
  double full = 0, skipped = 0;
  for (i64 f : first) full += double(n) * double(n), skipped += double(n - f) * double(n - f);
  if (skipped > 0.8 * full) return {};
  // op(a) finite, its diagonal nonzero (unless unit): then the skipped rows
  // would be zeros (0 - l * 0, 0 / d) and add zeros to the others (inf * 0
  // or 0 / 0 would have made NaNs). The stored triangle row by row (op(a)'s
  // lower: a's upper when transposed).
  std::atomic<bool> bad{false};
  const i64 rb = 64;
  run_tasks((n + rb - 1) / rb, threads, parallel, [&](i64 t) {
    for (i64 i = t * rb; i < std::min(n, (t + 1) * rb) && !bad.load(std::memory_order_relaxed); ++i) {
      const T* row = a + i * lda;
      bool ok = unit || (std::isfinite(row[i]) && row[i] != T(0));
      for (i64 k = transpose ? i + 1 : 0; k < (transpose ? n : i); ++k) ok = ok && std::isfinite(row[k]);
      if (!ok) bad.store(true, std::memory_order_relaxed);
    }
  });
  if (bad.load()) return {};
  return first;
}

}  // namespace

template <class T>
void solve_left_tasks(const T* a, std::int64_t lda, bool lower, bool transpose, bool unit, T* X, std::int64_t ldx,
                      std::int64_t n, std::int64_t cols, int threads, const gemm::ParallelFor& parallel) {
  const i64 bw = block_width(cols, threads);
  const bool forward = lower != transpose;
  std::vector<i64> first;
  if (forward && cols >= 2 * bw) first = leading_zero_rows(a, lda, transpose, unit, X, ldx, n, cols, threads, parallel);
  if (first.empty()) {
    run_tasks((cols + bw - 1) / bw, threads, parallel,
              [&](i64 t) { solve_left(a, lda, lower, transpose, unit, X + t * bw, ldx, n, std::min(bw, cols - t * bw)); });
    return;
  }
  // The columns put in the order of their first nonzero row (in place, row
  // by row: a fresh n x cols buffer cost more in page faults than the solve
  // saved), each block solved from its first, then put back.
  std::vector<i64> order(static_cast<size_t>(cols));
  for (i64 j = 0; j < cols; ++j) order[size_t(j)] = j;
  std::stable_sort(order.begin(), order.end(), [&](i64 x, i64 y) { return first[size_t(x)] < first[size_t(y)]; });
  auto permute = [&](bool back) {
    const i64 rows_per = 64;
    run_tasks((n + rows_per - 1) / rows_per, threads, parallel, [&](i64 t) {
      std::vector<T> row(static_cast<size_t>(cols));
      for (i64 i = t * rows_per; i < std::min(n, (t + 1) * rows_per); ++i) {
        T* x = X + i * ldx;
        std::copy(x, x + cols, row.begin());
        if (back)
          for (i64 j = 0; j < cols; ++j) x[order[size_t(j)]] = row[size_t(j)];
        else
          for (i64 j = 0; j < cols; ++j) x[j] = row[size_t(order[size_t(j)])];
      }
    });
  };
  permute(false);
  run_tasks((cols + bw - 1) / bw, threads, parallel, [&](i64 t) {
    const i64 f = first[size_t(order[size_t(t * bw)])];
    if (f < n)
      solve_left(a + f * lda + f, lda, lower, transpose, unit, X + f * ldx + t * bw, ldx, n - f,
                 std::min(bw, cols - t * bw));
  });
  permute(true);
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


namespace {

// Rows of a task of the Cholesky's triangular solve, and the side of a tile
// of its symmetric update (fixed, so the bits do not depend on the threads).
constexpr i64 kCholeskySolveRows = 128;
constexpr i64 kCholeskyTile = 256;

// The lower Cholesky factor of the n x n block at a (rows lda apart), in
// place, by halves: L11 of the first n1 columns (recursively), L21 = A21
// L11^-T (the triangular solve: tasks over row blocks), A22 -= L21 L21^T on
// and below the diagonal (tasks over square tiles), then L22 of the rest.
// Each update has depth n1, half the block: the top level's run at depth
// n/2 (one pass over A22), where updates by 128-column panels read and wrote
// the trailing matrix n/128 times (a 4096^2 float32 factor took 1.9x its
// GEMM time). Returns 0, or the 1-based column (from `off`) where the block
// is not positive definite.
template <class T>
int cholesky_halves(T* a, i64 n, i64 lda, i64 off, int threads, const gemm::ParallelFor& parallel) {
  if (n <= kPanel) {
    // Row-major lower is column-major upper, whose potrf('U') U^T U is L L^T.
    int info = 0;
    locked([&] { Lapack::potrf('U', int(n), a, int(lda), info); });
    return info == 0 ? 0 : int(off) + info;
  }
  const i64 n1 = std::max(kPanel, n / 2 / kPanel * kPanel), n2 = n - n1;
  if (int info = cholesky_halves(a, n1, lda, off, threads, parallel)) return info;
  T* L21 = a + n1 * lda;
  run_tasks((n2 + kCholeskySolveRows - 1) / kCholeskySolveRows, threads, parallel, [&](i64 t) {
    const i64 r0 = t * kCholeskySolveRows, rows = std::min(kCholeskySolveRows, n2 - r0);
    thread_local std::vector<T> xt;  // kept between calls: a fresh MiB a task faulted its pages in
    if (xt.size() < size_t(n1 * rows)) xt.resize(size_t(n1 * rows));
    transpose(L21 + r0 * lda, rows, n1, lda, xt.data(), rows);
    solve_left(a, lda, true, false, false, xt.data(), rows, n1, rows);
    transpose(xt.data(), n1, rows, rows, L21 + r0 * lda, lda);
  });
  // Tiles (i, j), j <= i, of A22: the diagonal ones whole (the upper
  // triangle's values are never read).
  const i64 tiles = (n2 + kCholeskyTile - 1) / kCholeskyTile;
  std::vector<std::pair<i64, i64>> ij;
  for (i64 i = 0; i < tiles; ++i)
    for (i64 j = 0; j <= i; ++j) ij.push_back({i, j});
  T* A22 = L21 + n1;
  run_tasks(i64(ij.size()), threads, parallel, [&](i64 t) {
    const i64 r0 = ij[size_t(t)].first * kCholeskyTile, c0 = ij[size_t(t)].second * kCholeskyTile;
    subtract_product(A22 + r0 * lda + c0, lda, std::min(kCholeskyTile, n2 - r0), std::min(kCholeskyTile, n2 - c0), n1,
                     L21 + r0 * lda, lda, i64(1), L21 + c0 * lda, i64(1), lda);  // L21^T: b's rows are L21's columns
  });
  return cholesky_halves(A22, n2, lda, off + n1, threads, parallel);
}

}  // namespace

template <class T>
int blocked_cholesky(T* a, std::int64_t n, int threads, const gemm::ParallelFor& parallel) {
  if (int info = cholesky_halves(a, n, n, 0, threads, parallel)) return info;
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
