// Halo exchange (tracer/halo.hpp).
#include "tracer/halo.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "tessel/core/errors.hpp"
#include "tracer/build.hpp"

namespace tessel::halo {
namespace {

// The mesh positions by (tile index along `axes`, the other axes'
// coordinates): pairs(δ) are the (sender, receiver) positions whose tiles
// are δ apart, the receiver's tile + δ = the sender's.
struct Tiles {
  const DeviceMesh& mesh;
  std::vector<int> axes;
  std::map<std::pair<std::int64_t, std::vector<std::int64_t>>, std::int64_t> at;

  Tiles(const DeviceMesh& m, const std::vector<int>& a) : mesh(m), axes(a) {
    for (std::int64_t pos = 0; pos < mesh.size(); ++pos) at[{tile_of(pos), others(pos)}] = pos;
  }
  std::int64_t tile_of(std::int64_t pos) const {
    std::int64_t k = 0;
    for (int a : axes) k = k * mesh.axes()[std::size_t(a)].size + mesh.coord(pos, a);
    return k;
  }
  std::vector<std::int64_t> others(std::int64_t pos) const {
    std::vector<std::int64_t> c;
    for (int a = 0; a < mesh.num_axes(); ++a)
      if (std::find(axes.begin(), axes.end(), a) == axes.end()) c.push_back(mesh.coord(pos, a));
    return c;
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs(std::int64_t delta) const {
    std::vector<std::pair<std::int64_t, std::int64_t>> r;
    for (std::int64_t pos = 0; pos < mesh.size(); ++pos) {
      auto it = at.find({tile_of(pos) + delta, others(pos)});
      if (it != at.end()) r.push_back({it->second, pos});
    }
    return r;
  }
};

NodeRef rows_of(NodeTable& t, const NodeRef& x, int d, std::int64_t lo, std::int64_t hi) {
  if (lo == 0 && hi == x->shape()[std::size_t(d)]) return x;
  std::vector<std::int64_t> a(x->shape().size(), 0), z = x->shape();
  a[std::size_t(d)] = lo;
  z[std::size_t(d)] = hi;
  return build::slice(t, x, a, z);
}

}  // namespace

NodeRef int32_table(NodeTable& t, const std::vector<std::int32_t>& v, Shape shape) {
  auto l = std::make_shared<Literal>();
  l->dtype = DType::int32;
  l->shape = std::move(shape);
  l->bytes.resize(v.size() * sizeof(std::int32_t));
  if (!v.empty()) std::memcpy(l->bytes.data(), v.data(), l->bytes.size());
  return build::constant(t, l);
}

NodeRef per_tile(LocalBuilder& b, const std::vector<int>& axes, const std::vector<std::int64_t>& values) {
  NodeTable& t = b.table();
  const std::int64_t T = std::int64_t(values.size());
  if (T != b.tiles(axes)) throw InternalError(detail::cat("halo::per_tile: ", T, " values for ", b.tiles(axes), " tiles"));
  std::vector<std::int32_t> v(values.begin(), values.end());
  NodeRef mine = build::dynamic_slice(t, int32_table(t, v, {T}), {b.offset(axes, 1)}, {1});
  return build::reshape(t, mine, {});
}

NodeRef tile_rows(LocalBuilder& b, const NodeRef& y, const std::vector<int>& axes, int d,
                  const std::vector<std::int64_t>& offsets, std::int64_t keep) {
  NodeTable& t = b.table();
  if (std::all_of(offsets.begin(), offsets.end(), [&](std::int64_t o) { return o == offsets.at(0); }))
    return rows_of(t, y, d, offsets[0], offsets[0] + keep);
  std::vector<NodeRef> at(std::size_t(y->rank()), build::scalar(t, DType::int32, 0));
  at[std::size_t(d)] = per_tile(b, axes, offsets);
  Shape size = y->shape();
  size[std::size_t(d)] = keep;
  return build::dynamic_slice(t, y, at, size);
}

NodeRef neighbour_rows(LocalBuilder& b, const NodeRef& x, const std::vector<int>& axes, int d, std::int64_t rows,
                       int dir) {
  const std::int64_t c = x->shape()[std::size_t(d)];
  NodeRef part = dir > 0 ? rows_of(b.table(), x, d, 0, rows) : rows_of(b.table(), x, d, c - rows, c);
  return build::collective_permute(b.table(), part, b.device_mesh(), Tiles(*b.device_mesh(), axes).pairs(dir));
}

NodeRef rows_at(LocalBuilder& b, const NodeRef& x, const std::vector<int>& axes, int d,
                const std::vector<std::int64_t>& starts, std::int64_t rows, std::int64_t step) {
  NodeTable& t = b.table();
  const std::int64_t T = std::int64_t(starts.size()), c = x->shape()[std::size_t(d)];
  if (T != b.tiles(axes) || c <= 0 || rows < 0 || step < 1)
    throw InternalError(detail::cat("halo::rows_at: ", T, " starts for ", b.tiles(axes), " tiles of ", c, " rows"));
  // Per distance δ (sender's tile - receiver's), the rows [lo, hi) of the
  // sender's tile that some receiver needs; every δ in reach of some
  // receiver, senders past the ends included (their receivers get zeros).
  std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> need;
  for (std::int64_t k = 0; k < T; ++k)
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t g = starts[std::size_t(k)] + i * step, u = floor_div(g, c), r = g - u * c;
      auto [it, fresh] = need.try_emplace(u - k, r, r + 1);
      if (!fresh) it->second = {std::min(it->second.first, r), std::max(it->second.second, r + 1)};
    }
  // The parts in order of δ, and where each δ's part starts among them.
  const Tiles tiles(*b.device_mesh(), axes);
  std::vector<NodeRef> parts;
  std::map<std::int64_t, std::int64_t> at;
  std::int64_t total = 0;
  for (const auto& [delta, r] : need) {
    NodeRef part = rows_of(t, x, d, r.first, r.second);
    parts.push_back(delta == 0 ? part : build::collective_permute(t, part, b.device_mesh(), tiles.pairs(delta)));
    at[delta] = total;
    total += r.second - r.first;
  }
  // Each tile's rows among the parts.
  std::vector<std::int32_t> pos;
  pos.reserve(std::size_t(T * rows));
  for (std::int64_t k = 0; k < T; ++k)
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t g = starts[std::size_t(k)] + i * step, u = floor_div(g, c);
      pos.push_back(std::int32_t(at[u - k] + (g - u * c) - need[u - k].first));
    }
  if (parts.empty()) {
    Shape s = x->shape();
    s[std::size_t(d)] = 0;
    return build::slice(t, x, std::vector<std::int64_t>(s.size(), 0), s);
  }
  NodeRef all = parts.size() == 1 ? parts[0] : build::concatenate(t, parts, d);
  bool alike = true;
  for (std::int64_t k = 0; k < T && alike; ++k)
    for (std::int64_t i = 0; i < rows && alike; ++i) alike = pos[std::size_t(k * rows + i)] == pos[0] + i;
  if (alike) return rows_of(t, all, d, pos[0], pos[0] + rows);
  attr::Indexed how;
  how.axis = d;
  how.mode = attr::IndexMode::clip;
  NodeRef mine = build::dynamic_slice(t, int32_table(t, pos, {T, rows}), {b.offset(axes, 1), build::scalar(t, DType::int32, 0)},
                                      {1, rows});
  return build::gather(t, all, build::reshape(t, mine, {rows}), how);
}

}  // namespace tessel::halo
