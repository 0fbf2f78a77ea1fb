// Builders for matrix algebra over the two minor dims (leading dims a
// batch), shared by the linear-algebra primitives' JVP rules
// (tracer/rules_linalg.cpp) and ts::linalg (dsl/src/linalg.cpp).
#pragma once

#include "tracer/build.hpp"

namespace tessel::la {

// x with its two minor dims swapped.
NodeRef mT(NodeTable& t, const NodeRef& x);
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

}  // namespace tessel::la
