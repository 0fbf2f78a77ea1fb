// The linear-algebra primitives (cholesky, triangular_solve, lu, qr, eigh,
// svd) run by LAPACK: the serial OpenBLAS build's LAPACK and BLAS, called
// on the device's own thread for each matrix of the batch it holds. Serial
// on purpose: a threaded BLAS would start a pool of its own behind the
// devices' backs (meson.build links the serial build by path, never
// Debian's alternatives, which may point at the threaded one).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/executable.hpp"
#include "tracer/ir.hpp"

namespace tessel::codegen {

std::unique_ptr<rt::Thunk> lapack_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes);
// Bytes of workspace lapack_routine's thunk reads after its results (one
// matrix's column-major copy, for lu, qr, eigh and svd; else 0).
std::size_t lapack_workspace(const Node& n);
// eig (tracer/rules_eig.cpp): ?geev of each matrix, its eigenvalues and
// right eigenvectors written complex (packed).
std::unique_ptr<rt::Thunk> eig_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes);

// distributed_lu (tracer/rules_linalg.cpp): reads its matrix rows, writes
// its three results and then a workspace of distributed_lu_workspace bytes.
std::unique_ptr<rt::Thunk> distributed_lu_routine(const Node& n, const std::vector<int>& reads,
                                                  const std::vector<int>& writes);
std::size_t distributed_lu_workspace(const Node& n);
// distributed_cholesky: reads its matrix rows, writes its rows of L and then
// a workspace of distributed_cholesky_workspace bytes.
std::unique_ptr<rt::Thunk> distributed_cholesky_routine(const Node& n, const std::vector<int>& reads,
                                                        const std::vector<int>& writes);
std::size_t distributed_cholesky_workspace(const Node& n);
// distributed_triangular_solve: reads its rows of a and b, writes x and then
// a workspace of distributed_triangular_solve_workspace bytes.
std::unique_ptr<rt::Thunk> distributed_triangular_solve_routine(const Node& n, const std::vector<int>& reads,
                                                                const std::vector<int>& writes);
std::size_t distributed_triangular_solve_workspace(const Node& n);

// Held around every call into OpenBLAS. Debian's serial build (0.3.21,
// SINGLE_THREADED, without USE_LOCKING) shares its work buffers between
// threads unguarded: zgetrf on 8 threads at once gave wrong factors in 1.6%
// of calls, dgetrf + dgemm in 0.6% (measured with a /tmp probe against the
// same calls made one at a time). The devices take turns in the library.
std::mutex& blas_lock();

// Whether the linked BLAS runs serially (OpenBLAS's openblas_get_parallel() == 0).
bool blas_is_serial();

}  // namespace tessel::codegen
