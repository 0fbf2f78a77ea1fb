#include "runtime/transfer.hpp"

#include <cstring>
#include <map>

#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::rt {

void copy_region(const void* src, const Shape& src_tile, const std::vector<std::int64_t>& src_origin, void* dst,
                 const Shape& dst_tile, const std::vector<std::int64_t>& dst_origin, const Box& region,
                 std::size_t elem_size) {
  const int rank = int(region.start.size());
  if (region.empty()) return;
  if (rank == 0) {
    std::memcpy(dst, src, elem_size);
    return;
  }
  auto ss = row_major_strides(src_tile), ds = row_major_strides(dst_tile);
  Shape ext = region.extent();
  const std::size_t row_bytes = std::size_t(ext[rank - 1]) * elem_size;
  // Iterate over every row (all dims but the last) of the region.
  std::vector<std::int64_t> idx(rank, 0);
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  for (;;) {
    std::int64_t so = 0, doff = 0;
    for (int k = 0; k < rank; ++k) {
      std::int64_t g = region.start[k] + idx[k];
      so += (g - src_origin[k]) * ss[k];
      doff += (g - dst_origin[k]) * ds[k];
    }
    std::memcpy(d + doff * elem_size, s + so * elem_size, row_bytes);
    int k = rank - 2;
    for (; k >= 0; --k) {
      if (++idx[k] < ext[k]) break;
      idx[k] = 0;
    }
    if (k < 0) break;
  }
}

TransferPlan plan_transfer(const Shape& global, std::size_t elem_size, const AxisSharding& src,
                           const AxisSharding& dst) {
  TESSEL_CHECK_INTERNAL(src.unreduced.empty() && dst.unreduced.empty(), "transfers move reduced values only");
  const auto& src_ids = src.mesh->device_ids();
  const auto& dst_ids = dst.mesh->device_ids();
  const Shape src_tile = src.tile_shape(global), dst_tile = dst.tile_shape(global);
  // Group source positions by the tile they hold.
  std::map<std::vector<std::int64_t>, std::vector<std::int64_t>> replicas;
  for (std::int64_t p = 0; p < std::int64_t(src_ids.size()); ++p) replicas[src.tile_index(p)].push_back(p);

  // Several processes: only this process's destinations are built here,
  // from replicas this process holds.
  const Runtime& rt = Runtime::get();
  for (auto& [tile, holders] : replicas) {
    std::vector<std::int64_t> local;
    for (auto p : holders)
      if (rt.is_local(src_ids[std::size_t(p)])) local.push_back(p);
    if (!local.empty()) holders = local;
  }
  TransferPlan plan;
  plan.alias.assign(dst_ids.size(), -1);
  plan.pieces.resize(dst_ids.size());
  for (std::int64_t q = 0; q < std::int64_t(dst_ids.size()); ++q) {
    if (!rt.is_local(dst_ids[std::size_t(q)])) continue;
    Box want = dst.shard_box(global, q);
    for (auto& [tile, holders] : replicas) {
      Box have = src.shard_box(global, holders[0]);
      Box part = intersect(want, have);
      if (part.empty() && !(want.empty() && have == want)) continue;
      // Prefer a replica on the destination device; else spread the reads.
      std::int64_t pick = holders[std::size_t(q) % holders.size()];
      for (auto p : holders)
        if (src_ids[p] == dst_ids[q]) pick = p;
      if (!rt.is_local(src_ids[std::size_t(pick)]))
        throw NotImplementedError(detail::cat(
            "moving an array between processes outside a compiled program: device ", dst_ids[std::size_t(q)],
            " (process ", rt.process_of(dst_ids[std::size_t(q)]), ") needs data that only device ",
            src_ids[std::size_t(pick)], " (process ", rt.process_of(src_ids[std::size_t(pick)]),
            ") holds; reshard inside jit (in_shardings / out_shardings), where collectives move it"));
      if (src_ids[pick] == dst_ids[q] && have == want && src_tile == dst_tile) {
        plan.alias[q] = pick;
        plan.pieces[q].clear();
        break;
      }
      if (part.empty()) continue;
      plan.pieces[q].push_back({pick, part});
      if (src_ids[pick] != dst_ids[q]) plan.bytes_moved += std::size_t(numel(part.extent())) * elem_size;
    }
  }
  return plan;
}

std::vector<BufferRef> run_transfer(const TransferPlan& plan, const Shape& global, std::size_t elem_size,
                                    const AxisSharding& src, const std::vector<BufferRef>& src_bufs,
                                    const AxisSharding& dst) {
  const auto& dst_ids = dst.mesh->device_ids();
  const Shape src_tile = src.tile_shape(global), dst_tile = dst.tile_shape(global);
  const std::size_t dst_bytes = std::size_t(numel(dst_tile)) * elem_size;
  std::vector<BufferRef> out(dst_ids.size());
  std::vector<int> launch_ids;
  std::vector<std::int64_t> launch_pos;
  const Runtime& rt = Runtime::get();
  for (std::size_t q = 0; q < dst_ids.size(); ++q) {
    if (!rt.is_local(dst_ids[q])) continue;  // built by its own process
    if (plan.alias[q] >= 0) {
      out[q] = src_bufs[plan.alias[q]];
      continue;
    }
    out[q] = Buffer::allocate(dst_ids[q], dst_bytes);
    launch_ids.push_back(dst_ids[q]);
    launch_pos.push_back(std::int64_t(q));
  }
  if (launch_ids.empty()) return out;
  Runtime::get().launch(launch_ids, [&](int i) -> std::function<void()> {
    std::int64_t q = launch_pos[i];
    BufferRef target = out[q];
    std::vector<std::pair<BufferRef, Piece>> reads;
    for (auto& piece : plan.pieces[q]) reads.emplace_back(src_bufs[piece.src_pos], piece);
    std::vector<std::vector<std::int64_t>> src_origins;
    for (auto& piece : plan.pieces[q]) src_origins.push_back(src.shard_box(global, piece.src_pos).start);
    std::vector<std::int64_t> dst_origin = dst.shard_box(global, q).start;
    bool padded = numel(dst.shard_box(global, q).extent()) != numel(dst_tile);
    return [=] {
      try {
        if (padded) std::memset(target->data(), 0, target->bytes());
        for (std::size_t k = 0; k < reads.size(); ++k) {
          reads[k].first->ready().wait();
          copy_region(reads[k].first->data(), src_tile, src_origins[k], target->data(), dst_tile, dst_origin,
                      reads[k].second.region, elem_size);
        }
        target->ready().set();
      } catch (...) {
        target->ready().set_error(std::current_exception());
      }
    };
  });
  return out;
}

}  // namespace tessel::rt
