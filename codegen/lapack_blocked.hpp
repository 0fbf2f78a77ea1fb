// One matrix's LU on the device that holds it, by the blocked right-looking
// algorithm with tessel's GEMM for the trailing updates and LAPACK only for
// the panels (codegen/lapack_blocked.cpp). The single-device lu thunk
// (codegen/lapack.cpp) runs it for large float32 and float64 matrices.
#pragma once

#include <cstdint>

#include "codegen/gemm.hpp"

namespace tessel::codegen {

// C [rows, cols] (row stride ldc) -= a [rows, k] b [k, cols] (element strides
// as gemm::Operands'), float or double: tessel's GEMM on this thread (no
// library, no lock), subtracting in place. Every routine here and the
// distributed ones (codegen/row_blocked.hpp) update through it.
template <class T>
void subtract_product(T* C, std::int64_t ldc, std::int64_t rows, std::int64_t cols, std::int64_t k, const T* a,
                      std::int64_t a_rs, std::int64_t a_cs, const T* b, std::int64_t b_rs, std::int64_t b_cs) {
  static const gemm::ParallelFor here = [](std::int64_t len, const std::function<void(std::int64_t, std::int64_t)>& task) {
    task(0, len);
  };
  gemm::Operands<T> op;
  op.m = rows, op.n = cols, op.k = k;
  op.a = a, op.a_rs = a_rs, op.a_cs = a_cs;
  op.b = b, op.b_rs = b_rs, op.b_cs = b_cs;
  op.c = C, op.c_rs = ldc, op.subtract = true;
  gemm::matmul(op, 1, here);
}

// Whether an m x n lu runs blocked (else in LAPACK's getrf): both sides at
// least two panels.
bool lu_runs_blocked(std::int64_t m, std::int64_t n);

// a (m x n, row-major) overwritten by its LU factors with partial pivoting:
// LAPACK getrf's result (L unit lower below the diagonal, U on and above;
// piv[i] the row swapped with row i at step i, 0-based) up to rounding.
// `work` holds 2 m x panel elements (at most m x n when lu_runs_blocked).
// Each panel step's row swaps, U's block row (a triangular solve) and the
// trailing update run as tasks over column blocks through `parallel`
// (`threads` of them at once), the next panel factorised inside the first
// of them (a look-ahead of one). The bits depend on neither the number of
// threads nor how tasks are spread over them.
template <class T>
void blocked_lu(T* a, std::int64_t m, std::int64_t n, std::int32_t* piv, T* work, int threads,
                const gemm::ParallelFor& parallel);

// X [n, cols] (row stride ldx) = op(a)^-1 X for a [n, n] (row stride lda)
// triangular (`lower`: its lower triangle, else its upper; `transpose`:
// op(a) = a^T; `unit`: a unit diagonal, not read), on this thread, by
// halves: the first half solved, the second less its product with the
// first (tessel's GEMM), then solved; blocks of 32 rows substituted row by
// row, dividing by the diagonal. Columns are independent: a caller may cut X into column blocks
// and solve them anywhere, with the same bits.
template <class T>
void solve_left(const T* a, std::int64_t lda, bool lower, bool transpose, bool unit, T* X, std::int64_t ldx,
                std::int64_t n, std::int64_t cols);


// Whether an n x n cholesky runs blocked (else in LAPACK's potrf).
bool cholesky_runs_blocked(std::int64_t n);
// a (n x n, row-major; its lower triangle read) overwritten by L, lower with
// L L^T = a and zeros above the diagonal, by halves (recursively): L11 of
// the first half, then as tasks L21 = A21 L11^-T (solve_left on blocks of
// rows transposed) and A22 -= L21 L21^T (tessel's GEMM on square tiles on
// and below the diagonal), then L22; LAPACK's potrf for blocks of at most
// 128. Returns 0, or like potrf's info the 1-based column where a leading
// minor is not positive definite (a then partly factored). The same bits
// on any number of threads.
template <class T>
int blocked_cholesky(T* a, std::int64_t n, int threads, const gemm::ParallelFor& parallel);

// Whether a left-side triangular solve of n rows and `cols` right-hand
// sides runs as solve_left_tasks (else in LAPACK's trsm).
bool solve_runs_blocked(std::int64_t n, std::int64_t cols);
// solve_left over column blocks of X run as tasks through `parallel`. A
// forward substitution (op(a) lower) of many columns whose right-hand sides
// start with rows of zeros (inv's permuted identity) skips them: the
// columns taken in the order of their first nonzero row, each block solves
// only the rows from its first one (a's rows below them finite: the skipped
// rows would stay zero), a third of the work for an identity.
template <class T>
void solve_left_tasks(const T* a, std::int64_t lda, bool lower, bool transpose, bool unit, T* X, std::int64_t ldx,
                      std::int64_t n, std::int64_t cols, int threads, const gemm::ParallelFor& parallel);

}  // namespace tessel::codegen
