// Builders for matrix algebra over the two minor dims (leading dims a
// batch), shared by the linear-algebra primitives' JVP rules
// (tracer/rules_linalg.cpp) and ts::linalg (dsl/src/linalg.cpp).
#pragma once

#include "tracer/build.hpp"

namespace tessel {
class LocalBuilder;
}

namespace tessel::la {

// x with its two minor dims swapped.
NodeRef mT(NodeTable& t, const NodeRef& x);
// x's conjugate transpose (mT for reals), and x conjugated (x itself for reals).
NodeRef mH(NodeTable& t, const NodeRef& x);
NodeRef conj(NodeTable& t, const NodeRef& x);
// The batched matrix product a @ b (equal batch dims).
NodeRef mm(NodeTable& t, const NodeRef& a, const NodeRef& b);
// x where col - row <= k (tril) or >= k (triu), else 0.
NodeRef tril(NodeTable& t, const NodeRef& x, std::int64_t k = 0);
NodeRef triu(NodeTable& t, const NodeRef& x, std::int64_t k = 0);
// The identity of x's shape and dtype (per matrix).
NodeRef eye_like(NodeTable& t, const NodeRef& x);
// The rows (dim -2) of x reordered: row i of the result is row perm[i]
// (perm: int32 [..., rows], x's batch dims).
NodeRef permute_rows(NodeTable& t, const NodeRef& x, const NodeRef& perm);
NodeRef triangular_solve(NodeTable& t, const NodeRef& a, const NodeRef& b, attr::Linalg how);

// The distributed algorithms (tracer/linalg_distributed.cpp): per-device
// code for a matrix of global shape G whose rows are split over `axes`
// (each device's tile of rows, the last ones padded when uneven).
// lu -> tuple(its rows of lu, pivots, permutation) (pivots and permutation
// on every device); cholesky -> its rows of L; triangular_solve (left side)
// of the row-split a with rhs whole on every device -> x whole.
NodeRef distributed_lu(LocalBuilder& b, const NodeRef& x, const Shape& G, const std::vector<int>& axes);
NodeRef distributed_cholesky(LocalBuilder& b, const NodeRef& x, const Shape& G, const std::vector<int>& axes);
NodeRef distributed_triangular_solve(LocalBuilder& b, const NodeRef& a, const Shape& G, const std::vector<int>& axes,
                                     const NodeRef& rhs, const attr::Linalg& how);

}  // namespace tessel::la
