// Distributed factorisations: the partition rules of lu, cholesky and
// triangular_solve for one matrix whose rows are split over devices
// (a 2-D split is first turned into a row split over both axes by one
// all-to-all, and back after). Each is a blocked right-looking algorithm,
// ScaLAPACK's pattern: a panel step moves the panel (nb columns of the
// active rows), and for lu the pivot rows and the rows they displace; no
// device ever holds the whole matrix. The panel itself is factorised
// redundantly on every device (LAPACK's getrf / potrf on n x nb), so lu's
// pivots are partial pivoting's over the whole column, the same as the
// single-device lu's, with no collective per column. lu and cholesky are one
// op each (distributed_lu, distributed_cholesky) that codegen runs in place;
// triangular_solve is written here as per-device code with collectives.
#include <algorithm>
#include <limits>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/linalg_build.hpp"
#include "tracer/rules.hpp"

namespace tessel::la {

namespace {

NodeRef i32(NodeTable& t, std::int64_t v) { return build::scalar(t, DType::int32, double(v)); }
NodeRef full(NodeTable& t, DType d, double v, const Shape& s) {
  return build::broadcast_in_dim(t, build::scalar(t, d, v), s, {});
}
NodeRef vec_i32(NodeTable& t, std::int64_t n) { return build::iota(t, DType::int32, {n}, 0); }
// v (an int32 scalar) as a vector of length n.
NodeRef splat(NodeTable& t, const NodeRef& v, std::int64_t n) { return build::broadcast_in_dim(t, v, {n}, {}); }
NodeRef bin(NodeTable& t, Op op, const NodeRef& a, const NodeRef& b) { return build::binary(t, op, a, b); }
// Per row: mask [rows] ? a : b, for [rows, cols] a and b.
NodeRef select_rows(NodeTable& t, const NodeRef& mask, const NodeRef& a, const NodeRef& b) {
  return build::select(t, build::broadcast_in_dim(t, mask, a->shape(), {0}), a, b);
}
NodeRef cols(NodeTable& t, const NodeRef& x, std::int64_t c0, std::int64_t c1) {
  return build::slice(t, x, {0, c0}, {x->shape()[0], c1});
}
NodeRef rows(NodeTable& t, const NodeRef& x, std::int64_t r0, std::int64_t r1) {
  return build::slice(t, x, {r0, 0}, {r1, x->shape()[1]});
}
NodeRef zeros_of(NodeTable& t, const NodeRef& x) { return full(t, x->dtype(), 0, x->shape()); }

// The panel width: about 16 panels (a panel step costs two collectives and
// an op per column block, the redundant panel factorisation n nb^2 flops
// per device), at most a quarter of a device's rows (the moved rows, 2 nb
// of them, stay within half its rows' bytes), between 8 and 128 columns.
std::int64_t panel_width(std::int64_t k, std::int64_t rows_per_device) {
  return std::clamp<std::int64_t>(std::min((k + 15) / 16, rows_per_device / 4), 8, 128);
}

struct RowSplit {
  NodeTable& t;
  const MeshRef& mesh;
  std::vector<int> axes;
  std::int64_t m = 0, r = 0, P = 1;
  NodeRef off, index, g;  // this device's first global row, its tile index, the global row of each local row

  RowSplit(LocalBuilder& b, const std::vector<int>& ax, std::int64_t rows)
      : t(b.table()), mesh(b.device_mesh()), axes(ax), m(rows) {
    P = b.tiles(axes);
    r = ceil_div(m, P);
    off = b.offset(axes, r);
    index = b.offset(axes, 1);
    g = bin(t, Op::add, vec_i32(t, r), splat(t, off, r));
  }
  NodeRef gather(const NodeRef& x) { return build::all_gather(t, x, mesh, axes, 0); }
  NodeRef psum(const NodeRef& x) { return build::all_reduce(t, x, mesh, axes, Op::add); }
};

}  // namespace


// LU runs as one library routine per device (codegen/lapack.cpp)
// that meets its group twice per panel step, in place on the device's rows:
// beside its rows in and out, a device holds the panel, the pivot rows and
// the rows it receives, never a second copy of its rows (the same algorithm
// written as ops here held each column block's old and new versions and the
// joined result: 4.5 shards at 512 x 512 on 8 devices).
NodeRef distributed_lu(LocalBuilder& b, const NodeRef& x_in, const Shape& G, const std::vector<int>& axes) {
  const std::int64_t r = ceil_div(G[0], b.tiles(axes));
  return build::distributed_lu(b.table(), x_in, b.device_mesh(), axes, G[0], panel_width(std::min(G[0], G[1]), r));
}

// Cholesky likewise: one routine per device (codegen/lapack.cpp), in place.
NodeRef distributed_cholesky(LocalBuilder& b, const NodeRef& x_in, const Shape& G, const std::vector<int>& axes) {
  const std::int64_t r = ceil_div(G[0], b.tiles(axes));
  return build::distributed_cholesky(b.table(), x_in, b.device_mesh(), axes, G[0], panel_width(G[0], r));
}

NodeRef distributed_triangular_solve(LocalBuilder& b, const NodeRef& a_in, const Shape& G, const std::vector<int>& axes,
                                     const NodeRef& rhs, const attr::Linalg& p) {
  NodeTable& t = b.table();
  TESSEL_CHECK_INTERNAL(p.left_side, "a distributed triangular solve is left-sided");
  RowSplit rs(b, axes, G[0]);
  const std::int64_t n = G[0], r = rs.r, P = rs.P, k = rhs->shape()[1];
  // a's rows with its columns padded to P r, only its triangle kept (the other is never read).
  // op(a) = conj(a) (transposed or not) is op'(conj(a)): conjugated once, here.
  NodeRef A = build::pad(t, p.conjugate_a ? conj(t, a_in) : a_in, build::scalar(t, a_in->dtype(), 0), {0, 0}, {0, P * r - n});
  NodeRef row = build::broadcast_in_dim(t, rs.g, A->shape(), {0}), col = build::iota(t, DType::int32, A->shape(), 1);
  NodeRef keep = bin(t, p.lower ? Op::le : Op::ge, col, row);
  if (p.unit_diagonal) keep = bin(t, Op::and_, keep, bin(t, Op::ne, col, row));
  A = build::select(t, keep, A, zeros_of(t, A));
  // My diagonal block, the identity on padding rows (so their solve is 0 = 0).
  NodeRef diag = build::dynamic_slice(t, A, {i32(t, 0), rs.off}, {r, r});
  NodeRef pad_row = bin(t, Op::ge, rs.g, full(t, DType::int32, double(n), {r}));
  NodeRef eye = eye_like(t, diag);
  diag = select_rows(t, pad_row, eye, diag);
  attr::Linalg dp = p;  // the diagonal block's own solve (LAPACK ignores a unit diagonal's entries)
  dp.conjugate_a = false;
  NodeRef B = build::pad(t, rhs, build::scalar(t, rhs->dtype(), 0), {0, 0}, {P * r - n, 0});  // [P r, k]
  NodeRef mine = build::dynamic_slice(t, B, {rs.off, i32(t, 0)}, {r, k});
  const bool eff_lower = p.lower != p.transpose_a;
  std::vector<NodeRef> solved(static_cast<size_t>(P));
  NodeRef Xmine = zeros_of(t, mine);  // my block of x once solved (transpose case)
  for (std::int64_t s = 0; s < P; ++s) {
    const std::int64_t j = eff_lower ? s : P - 1 - s;
    NodeRef resid;
    if (!p.transpose_a) {
      resid = mine;  // kept up to date: b_mine - sum over solved blocks i of A_mine,i x_i
    } else {
      // T_j,i = A_i,j^T: every device's part of block j's sum, from its own solved block.
      NodeRef c = mm(t, mT(t, cols(t, A, j * r, (j + 1) * r)), Xmine);
      resid = bin(t, Op::sub, rows(t, B, j * r, (j + 1) * r), rs.psum(c));
    }
    NodeRef x_try = triangular_solve(t, diag, resid, dp);  // only block j's owner's is kept
    NodeRef is_owner = build::broadcast_in_dim(t, bin(t, Op::eq, rs.index, i32(t, j)), x_try->shape(), {});
    NodeRef xj = rs.psum(build::select(t, is_owner, x_try, zeros_of(t, x_try)));
    solved[size_t(j)] = xj;
    if (!p.transpose_a) mine = bin(t, Op::sub, mine, mm(t, cols(t, A, j * r, (j + 1) * r), xj));
    else Xmine = build::select(t, is_owner, xj, Xmine);
  }
  NodeRef X = solved.size() == 1 ? solved[0] : build::concatenate(t, solved, 0);
  return rows(t, X, 0, n);
}

}  // namespace tessel::la
