// Distributed factorisations: the partition rules of lu, cholesky and
// triangular_solve for one matrix whose rows are split over devices
// (a 2-D split is first turned into a row split over both axes by one
// all-to-all, and back after). Each is a blocked right-looking algorithm,
// ScaLAPACK's pattern: a panel step moves the panel (nb columns of the
// active rows), and for lu the pivot rows and the rows they displace; no
// device ever holds the whole matrix. The panel itself is factorised whole
// (LAPACK's getrf / potrf on n x nb; once in shared memory, by every
// process across processes), so lu's pivots are partial pivoting's over the
// whole column, the same as the single-device lu's, with no collective per
// column. A triangular solve moves a block of x per step. Each is one op
// (distributed_lu, distributed_cholesky, distributed_triangular_solve) that
// codegen runs in place.
#include <algorithm>
#include <limits>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/linalg_build.hpp"
#include "tracer/rules.hpp"

namespace tessel::la {

namespace {

// The panel width: about 16 panels (a panel step costs a meeting of the
// group, and its panel factorisation n nb^2 flops on one device), at most a
// quarter of a device's rows (across processes the panel and the moved
// rows stay within half its rows' bytes), between 8 and 128 columns.
std::int64_t panel_width(std::int64_t k, std::int64_t rows_per_device) {
  return std::clamp<std::int64_t>(std::min((k + 15) / 16, rows_per_device / 4), 8, 128);
}

}  // namespace


// LU runs as one library routine per device (codegen/lapack_distributed.cpp)
// that meets its group once per panel step, in place on the device's rows:
// in shared memory a device holds nothing beside its rows in and out (the
// GEMM subtracts the update in place; across processes also the panel and the pivot rows),
// never a second copy of its rows (the same algorithm written as ops here
// held each column block's old and new versions and the joined result: 4.5
// shards at 512 x 512 on 8 devices).
NodeRef distributed_lu(LocalBuilder& b, const NodeRef& x_in, const Shape& G, const std::vector<int>& axes) {
  const std::int64_t r = ceil_div(G[0], b.tiles(axes));
  return build::distributed_lu(b.table(), x_in, b.device_mesh(), axes, G[0], panel_width(std::min(G[0], G[1]), r));
}

// Cholesky likewise: one routine per device (codegen/lapack_distributed.cpp), in place.
NodeRef distributed_cholesky(LocalBuilder& b, const NodeRef& x_in, const Shape& G, const std::vector<int>& axes) {
  const std::int64_t r = ceil_div(G[0], b.tiles(axes));
  return build::distributed_cholesky(b.table(), x_in, b.device_mesh(), axes, G[0], panel_width(G[0], r));
}

// A triangular solve too: one routine per device (codegen/lapack_distributed.cpp) that
// reads its rows of a in place and writes x, blocks of its row tile: a block's
// owner solves it and every device takes it and updates its own residual
// (op(a) = a), or every device adds its part of the next block's residual
// and the owner solves it (op(a) = a^T). Beside a, b and x a device holds
// nothing (the GEMM subtracts in place); the same algorithm as ops held a's
// masked, padded copy.
NodeRef distributed_triangular_solve(LocalBuilder& b, const NodeRef& a_in, const Shape& G, const std::vector<int>& axes,
                                     const NodeRef& rhs, const attr::Linalg& p) {
  TESSEL_CHECK_INTERNAL(p.left_side, "a distributed triangular solve is left-sided");
  return build::distributed_triangular_solve(b.table(), a_in, rhs, b.device_mesh(), axes, G[0], p);
}

}  // namespace tessel::la
