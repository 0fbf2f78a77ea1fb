// The partition rules of the leaves and of the data-movement family
// (tracer/rules_shape.cpp holds their other rules): the per-device form of
// each, with the collectives a split dim needs (a shifted slice's halo
// exchange, a strided slice's window gather, a dynamic slice or update of a
// split dim).
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/halo.hpp"
#include "tracer/rules.hpp"
#include "tracer/shape_rules.hpp"

namespace tessel {

using detail::cat;

// ---------------------------------------------------------------- partitioning

TESSEL_LOCAL_SAME_OP(transpose)
TESSEL_LOCAL_SAME_OP(rev)
TESSEL_LOCAL_SAME_OP(concatenate)
NodeRef Rule<Op::parameter>::local(LocalBuilder&, const Node&, const std::vector<NodeRef>&,
                                   const std::vector<AxisSharding>&, const AxisSharding&) {
  throw InternalError("partition: parameters are laid out by the partitioner itself");
}
// Every device holds the whole constant, then keeps its part.
NodeRef Rule<Op::constant>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>&,
                                  const std::vector<AxisSharding>&, const AxisSharding& natural) {
  NodeRef c = build::constant(b.table(), attrs_of(n).value, n.aval.weak_type);
  return b.reshard(c, n.shape(), replicated(b.device_mesh(), n.rank()), natural);
}
// The local iota, offset by this device's first index along the split dim.
NodeRef Rule<Op::iota>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>&,
                              const std::vector<AxisSharding>&, const AxisSharding& natural) {
  const Shape tile = natural.tile_shape(n.shape());
  const std::int64_t d = attrs_of(n).dimension;
  NodeTable& t = b.table();
  NodeRef i = build::iota(t, n.dtype(), tile, d);
  if (natural.dims[d].empty()) return i;
  NodeRef off = build::convert(t, b.offset(natural.dims[d], tile[d]), n.dtype());
  return build::binary(t, Op::add, i, build::broadcast_in_dim(t, off, tile, {}));
}
NodeRef Rule<Op::broadcast_in_dim>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                          const std::vector<AxisSharding>&, const AxisSharding& natural) {
  return build::broadcast_in_dim(b.table(), ops[0], natural.tile_shape(n.shape()), attrs_of(n).dims);
}
// Even tiles reshape locally; uneven ones reshape the whole array, then keep this device's part.
NodeRef Rule<Op::reshape>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                 const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  const Shape tile = natural.tile_shape(n.shape());
  bool even = true;
  const NodeRef& x = n.in[0];
  for (int d = 0; d < x->rank(); ++d)
    even = even && x->shape()[d] % std::max<std::int64_t>(1, b.tiles(op_sh[0].dims[d])) == 0;
  for (int d = 0; d < n.rank(); ++d) even = even && n.shape()[d] % b.tiles(natural.dims[d]) == 0;
  if (even && numel(ops[0]->shape()) == numel(tile)) return build::reshape(b.table(), ops[0], tile);
  NodeRef whole = b.reshard(ops[0], x->shape(), op_sh[0], replicated(b.device_mesh(), x->rank()));
  NodeRef r = build::reshape(b.table(), whole, n.shape());
  return b.reshard(r, n.shape(), replicated(b.device_mesh(), n.rank()), natural);
}
// Split dims are whole (the factor rule splits only unsliced dims).
namespace {
// The elements start, start + stride, ... (< limit) of dim d, which the
// operand x (global size G[d] there) splits over `axes`, whole on every
// device: each device takes the ones its tile holds into a window of m
// (the most any tile holds; the tables of which are constants), the
// windows are all-gathered, and the elements are picked from them in
// order. What moves is the devices' windows, not the dim.
NodeRef gather_window(LocalBuilder& b, NodeRef x, const Shape& G, const std::vector<int>& axes, int d, std::int64_t start,
                      std::int64_t limit, std::int64_t stride) {
  NodeTable& t = b.table();
  const std::int64_t T = b.tiles(axes), c = (G[std::size_t(d)] + T - 1) / T;
  const std::int64_t k = limit > start ? (limit - start + stride - 1) / stride : 0;
  std::vector<std::vector<std::int32_t>> owned(static_cast<std::size_t>(T));
  std::vector<std::int32_t> pos;
  for (std::int64_t j = 0; j < k; ++j) {
    const std::int64_t g = start + j * stride;
    auto& o = owned[std::size_t(g / c)];
    pos.push_back(std::int32_t(g / c));  // the tile for now; its window position below
    o.push_back(std::int32_t(g % c));
  }
  std::size_t m = 1;
  for (auto& o : owned) m = std::max(m, o.size());
  std::vector<std::size_t> seen(static_cast<std::size_t>(T), 0);
  for (auto& q : pos) q = std::int32_t(std::size_t(q) * m + seen[std::size_t(q)]++);
  auto table = [&](const std::vector<std::int32_t>& v, Shape shape) { return halo::int32_table(t, v, std::move(shape)); };
  std::vector<std::int32_t> rows;
  for (auto& o : owned)
    for (std::size_t i = 0; i < m; ++i) rows.push_back(i < o.size() ? o[i] : 0);
  attr::Indexed how;
  how.axis = d;
  how.mode = attr::IndexMode::clip;
  NodeRef mine = build::dynamic_slice(t, table(rows, {T, std::int64_t(m)}), {b.offset(axes, 1), build::scalar(t, DType::int32, 0)},
                                      {1, std::int64_t(m)});
  NodeRef window = build::gather(t, x, build::reshape(t, mine, {std::int64_t(m)}), how);
  NodeRef all = build::all_gather(t, window, b.device_mesh(), axes, d);
  return build::gather(t, all, table(pos, {k}), how);
}
}  // namespace

NodeRef Rule<Op::slice>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                               const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  const auto& p = attrs_of(n);
  NodeTable& t = b.table();
  std::vector<std::int64_t> lo = p.start, hi = p.limit, step = p.stride;
  NodeRef x = ops[0];
  AxisSharding have = natural;  // the layout x ends in (dims brought whole are resliced at the end)
  for (int d = 0; d < n.rank(); ++d) {
    const auto& A = op_sh[0].dims[std::size_t(d)];
    if (slice_dim_shifted(n, d) && !A.empty()) {
      // Result tile j holds rows start + stride [j co, (j + 1) co). When the
      // operand's tile c is stride co, that is this tile's rows start,
      // start + stride, ... and, past its end, the next tile's first
      // start + (co - 1) stride - (c - 1) rows (a shift: the next tile's
      // first start rows).
      const std::int64_t T = b.tiles(A), len = n.in[0]->shape()[std::size_t(d)], st = p.stride[std::size_t(d)];
      const std::int64_t c = (len + T - 1) / T, co = (n.shape()[std::size_t(d)] + T - 1) / T, s = p.start[std::size_t(d)];
      const std::int64_t halo_rows = s + (co - 1) * st - (c - 1);
      if (natural.dims[std::size_t(d)] == A && co * st == c && halo_rows <= c) {
        if (halo_rows > 0) x = build::concatenate(t, {x, halo::neighbour_rows(b, x, A, d, halo_rows, 1)}, d);
        lo[d] = s, hi[d] = s + (co - 1) * st + 1, step[d] = st;
      } else {
        // Tiles that do not line up: the window, whole, then this device's tile of it.
        x = gather_window(b, x, n.in[0]->shape(), A, d, p.start[std::size_t(d)], p.limit[std::size_t(d)], st);
        have.dims[std::size_t(d)].clear();
        lo[d] = 0, hi[d] = x->shape()[d], step[d] = 1;
      }
    } else if (!natural.dims[d].empty()) {
      lo[d] = 0, hi[d] = x->shape()[d], step[d] = 1;  // a whole dim, split alike
    } else if (!A.empty()) {
      x = gather_window(b, x, n.in[0]->shape(), A, d, p.start[d], p.limit[d], p.stride[d]);
      lo[d] = 0, hi[d] = x->shape()[d], step[d] = 1;
    }
  }
  x = build::slice(t, x, lo, hi, step);
  return have.dims == natural.dims ? x : b.reshard(x, n.shape(), have, natural);
}
NodeRef Rule<Op::pad>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                             const std::vector<AxisSharding>&, const AxisSharding& natural) {
  std::vector<std::int64_t> lo = attrs_of(n).low, hi = attrs_of(n).high, in = attrs_of(n).interior;
  for (int d = 0; d < n.rank(); ++d)
    if (!natural.dims[d].empty()) lo[d] = hi[d] = in[d] = 0;
  return build::pad(b.table(), ops[0], ops[1], lo, hi, in);
}
NodeRef Rule<Op::dynamic_slice>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                       const std::vector<AxisSharding>&, const AxisSharding& natural) {
  const Shape tile = natural.tile_shape(n.shape());
  Shape sizes = attrs_of(n).sizes;
  for (int d = 0; d < n.rank(); ++d)
    if (!natural.dims[d].empty()) sizes[d] = tile[d];
  return build::dynamic_slice(b.table(), ops[0], std::vector<NodeRef>(ops.begin() + 1, ops.end()), sizes);
}

// A window dim split over devices: tile j covers [o, o + T) of the dim, o =
// j T; the window [s, s + w) (s clamped into the dim) meets it where s <= o +
// i < s + w, and holds there the update's element o + i - s: a slice of the
// update padded by T on each side, from o - s + T (clamped only where the
// window misses the tile). Each device writes its own part of the window,
// with no communication: a DUS over the whole tile along such dims, of the
// update where the mask holds and the old values elsewhere.
NodeRef Rule<Op::dynamic_update_slice>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                                              const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  NodeTable& t = b.table();
  const Shape& G = n.shape();
  const Shape& W = n.in[1]->shape();
  NodeRef x = b.reshard(ops[0], G, op_sh[0], natural);
  const Shape tile = x->shape();
  NodeRef u = ops[1];
  std::vector<NodeRef> starts(ops.begin() + 2, ops.end());
  Shape box = u->shape();
  struct Split {
    int d;
    NodeRef o, s;
    std::int64_t w;
  };
  std::vector<Split> split;
  for (int d = 0; d < n.rank(); ++d) {
    const auto& A = natural.dims[std::size_t(d)];
    const std::int64_t w = W[std::size_t(d)], len = G[std::size_t(d)];
    if (A.empty() || w == len) continue;
    const std::int64_t T = tile[std::size_t(d)];
    NodeRef s = build::convert(t, starts[std::size_t(d)], DType::int32);
    s = build::binary(t, Op::min, build::binary(t, Op::max, s, build::scalar(t, DType::int32, 0)),
                      build::scalar(t, DType::int32, double(len - w)));
    NodeRef o = b.offset(A, T);
    std::vector<std::int64_t> lo(std::size_t(n.rank()), 0), hi = lo, in = lo;
    lo[std::size_t(d)] = hi[std::size_t(d)] = T;
    u = build::pad(t, u, build::scalar(t, n.dtype(), 0), lo, hi, in);
    std::vector<NodeRef> at(std::size_t(n.rank()), build::scalar(t, DType::int32, 0));
    at[std::size_t(d)] = build::binary(t, Op::add, build::binary(t, Op::sub, o, s), build::scalar(t, DType::int32, double(T)));
    box[std::size_t(d)] = T;
    u = build::dynamic_slice(t, u, at, box);
    starts[std::size_t(d)] = build::scalar(t, DType::int32, 0);
    split.push_back({d, o, s, w});
  }
  if (split.empty()) return build::dynamic_update_slice(t, x, u, starts);
  // The mask over the box: o + i in [s, s + w) along each split dim.
  NodeRef mask;
  for (auto& [d, o, s, w] : split) {
    NodeRef g = build::binary(t, Op::add, build::iota(t, DType::int32, box, d), build::broadcast_in_dim(t, o, box, {}));
    NodeRef end = build::binary(t, Op::add, s, build::scalar(t, DType::int32, double(w)));
    NodeRef m = build::binary(t, Op::and_, build::binary(t, Op::ge, g, build::broadcast_in_dim(t, s, box, {})),
                              build::binary(t, Op::lt, g, build::broadcast_in_dim(t, end, box, {})));
    mask = mask ? build::binary(t, Op::and_, mask, m) : m;
  }
  for (auto& st : starts) st = build::convert(t, st, DType::int32);
  NodeRef old = build::dynamic_slice(t, x, starts, box);
  return build::dynamic_update_slice(t, x, build::select(t, mask, u, old), starts);
}

}  // namespace tessel
