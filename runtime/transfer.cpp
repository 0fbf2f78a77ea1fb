#include "runtime/transfer.hpp"

#include <atomic>
#include <cstring>
#include <map>
#include <memory>

#include "runtime/device.hpp"
#include "runtime/mpi.hpp"
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

  // Several processes. A source whose devices lie in one process (host
  // data each process put on its own device, or an array of one process's
  // devices) is this process's to read: each builds its own destinations
  // from its own replicas. A source spanning processes is the same global
  // array everywhere: the plan covers every destination (each process
  // computes the same plan), reading the replica in the destination's own
  // process where there is one; pieces between processes move over MPI
  // (run_transfer).
  const Runtime& rt = Runtime::get();
  TransferPlan plan;
  for (auto id : src_ids)
    if (rt.process_of(id) != rt.process_of(src_ids.front())) plan.between_processes = true;
  plan.alias.assign(dst_ids.size(), -1);
  plan.pieces.resize(dst_ids.size());
  for (std::int64_t q = 0; q < std::int64_t(dst_ids.size()); ++q) {
    const bool local = rt.is_local(dst_ids[std::size_t(q)]);
    if (!local && !plan.between_processes) continue;
    const int home = rt.process_of(dst_ids[std::size_t(q)]);
    Box want = dst.shard_box(global, q);
    for (auto [tile, holders] : replicas) {
      // The replicas in the destination's process, if any; without
      // processes, the local ones.
      std::vector<std::int64_t> near;
      for (auto p : holders)
        if (plan.between_processes ? rt.process_of(src_ids[std::size_t(p)]) == home
                                   : rt.is_local(src_ids[std::size_t(p)]))
          near.push_back(p);
      if (!near.empty()) holders = near;
      Box have = src.shard_box(global, holders[0]);
      Box part = intersect(want, have);
      if (part.empty() && !(want.empty() && have == want)) continue;
      // Prefer a replica on the destination device; else spread the reads.
      std::int64_t pick = holders[std::size_t(q) % holders.size()];
      for (auto p : holders)
        if (src_ids[p] == dst_ids[q]) pick = p;
      if (!plan.between_processes && !rt.is_local(src_ids[std::size_t(pick)]))
        throw DistributedError(detail::cat(
            "moving an array between processes outside a compiled program: device ", dst_ids[std::size_t(q)],
            " (process ", rt.process_of(dst_ids[std::size_t(q)]), ") needs data that only device ",
            src_ids[std::size_t(pick)], " (process ", rt.process_of(src_ids[std::size_t(pick)]),
            ") holds, and the array lives on one process's devices (each process may hold its own such array, so "
            "there is no one source to send); make it a global array first (device_put on a sharding spanning "
            "the processes, make_array_from_callback) or reshard inside jit"));
      if (src_ids[pick] == dst_ids[q] && have == want && src_tile == dst_tile) {
        plan.alias[q] = pick;
        plan.pieces[q].clear();
        break;
      }
      if (part.empty()) continue;
      plan.pieces[q].push_back({pick, part});
      if (local && src_ids[pick] != dst_ids[q]) plan.bytes_moved += std::size_t(numel(part.extent())) * elem_size;
    }
  }
  return plan;
}

namespace {

// The pieces of a plan between processes, moved now on the host thread:
// this process's sources pack theirs and send them, its destinations
// receive theirs (per destination position and piece; null where the piece
// is read locally). Both sides list the pieces in the plan's order
// (destination, then piece), which every process computes alike, so the
// messages between two processes match.
std::vector<std::vector<std::shared_ptr<std::vector<char>>>> exchange_pieces(
    const TransferPlan& plan, const Shape& global, std::size_t elem_size, const AxisSharding& src,
    const std::vector<BufferRef>& src_bufs, const AxisSharding& dst) {
  static std::atomic<std::uint64_t> transfers{0};
  const Runtime& rt = Runtime::get();
  const auto& src_ids = src.mesh->device_ids();
  const auto& dst_ids = dst.mesh->device_ids();
  const int me = rt.process_of(rt.first_device_id());
  const Shape src_tile = src.tile_shape(global);
  // First the messages (no waiting), so every process agrees on them and on
  // the count below whatever happens after; then the packing.
  struct Out {
    int peer;
    std::size_t q, k, bytes;
  };
  std::vector<Out> outgoing;
  std::vector<std::vector<std::shared_ptr<std::vector<char>>>> received(dst_ids.size());
  std::map<int, mpi::PeerBlocks> sends, recvs;
  bool any = false;
  // The transfer's identity: shape, element size, both placements.
  std::uint64_t fp = 1469598103934665603ull;
  auto mix = [&](std::uint64_t v) { fp = (fp ^ v) * 1099511628211ull; };
  mix(elem_size);
  for (auto d : global) mix(std::uint64_t(d));
  for (auto id : src_ids) mix(std::uint64_t(id) + 1000);
  for (auto id : dst_ids) mix(std::uint64_t(id) + 2000);
  for (std::size_t q = 0; q < dst_ids.size(); ++q) {
    received[q].resize(plan.pieces[q].size());
    const int dp = rt.process_of(dst_ids[q]);
    for (std::size_t k = 0; k < plan.pieces[q].size(); ++k) {
      const Piece& piece = plan.pieces[q][k];
      const int sp = rt.process_of(src_ids[std::size_t(piece.src_pos)]);
      const std::size_t bytes = std::size_t(numel(piece.region.extent())) * elem_size;
      if (sp == dp || bytes == 0) continue;
      any = true;
      mix(std::uint64_t(q) * 31 + k);
      if (sp == me) outgoing.push_back({dp, q, k, bytes});
      if (dp == me) {
        auto buf = std::make_shared<std::vector<char>>(bytes);
        received[q][k] = buf;
        recvs[sp].peer = sp;
        recvs[sp].blocks.push_back({buf->data(), bytes});
      }
    }
  }
  if (!any) return {};
  // Every process counts the transfers between processes alike (each runs
  // the same device_puts, from one host thread), so the count tells this
  // one's messages apart.
  const std::uint64_t n = transfers++;
  if (outgoing.empty() && recvs.empty()) return {};
  std::vector<std::shared_ptr<std::vector<char>>> packed;
  for (const Out& o : outgoing) {
    const Piece& piece = plan.pieces[o.q][o.k];
    const BufferRef& b = src_bufs[std::size_t(piece.src_pos)];
    b->ready().wait();
    auto buf = std::make_shared<std::vector<char>>(o.bytes);
    copy_region(b->data(), src_tile, src.shard_box(global, piece.src_pos).start, buf->data(), piece.region.extent(),
                piece.region.start, piece.region, elem_size);
    packed.push_back(buf);
    sends[o.peer].peer = o.peer;
    sends[o.peer].blocks.push_back({buf->data(), o.bytes});
  }
  std::vector<mpi::PeerBlocks> s, r;
  for (auto& [q, b] : sends) s.push_back(b);
  for (auto& [q, b] : recvs) r.push_back(b);
  try {
    mpi::exchange(s, r, fp ^ (n << 40), int(n % (1u << 14)),
                  detail::cat("moving an array of shape ", shape_str(global), " between processes"), /*host=*/true);
  } catch (...) {
    // Messages may still be under way: their buffers are never freed.
    mpi::keep_forever(new auto(std::make_pair(std::move(packed), std::move(received))));
    throw;
  }
  return received;
}

}  // namespace

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
  // `view` is ready when `source` is (waiting for it), or has its error.
  auto ready_with = [](const BufferRef& source, const BufferRef& view) {
    try {
      source->ready().wait();
      view->ready().set();
    } catch (...) {
      view->ready().set_error(std::current_exception());
    }
  };
  // Destinations of this process that hold the same box of the array share
  // one block (buffers are immutable once written): the first builds it,
  // the others view it and are ready with it. A replicated array is then
  // one block per process, and work on it the same blocks on every device
  // (done once: Thunk::pure).
  // A destination whose source buffer is its own (plan.alias) lends it so
  // too: a view of it is ready when it is (at once if it is computed, else
  // by a task on the view's device that waits for it, as a copy would).
  std::map<std::vector<std::int64_t>, std::size_t> builder;  // box start -> the destination that builds it
  std::map<std::vector<std::int64_t>, BufferRef> lent;       // box start -> a source buffer that holds it
  std::vector<std::vector<BufferRef>> views(dst_ids.size());
  std::vector<std::pair<BufferRef, BufferRef>> waits;  // (a pending source, its view)
  for (std::size_t q = 0; q < dst_ids.size(); ++q)
    if (rt.is_local(dst_ids[q]) && plan.alias[q] >= 0) {
      out[q] = src_bufs[plan.alias[q]];
      lent.emplace(dst.shard_box(global, std::int64_t(q)).start, out[q]);
    }
  for (std::size_t q = 0; q < dst_ids.size(); ++q) {
    if (!rt.is_local(dst_ids[q]) || out[q]) continue;  // built by its own process, or its source
    std::vector<std::int64_t> start = dst.shard_box(global, std::int64_t(q)).start;
    if (auto it = lent.find(start); it != lent.end()) {
      out[q] = Buffer::deferred(dst_ids[q], dst_bytes);
      out[q]->view(it->second);
      if (!it->second->ready().is_set()) {
        launch_ids.push_back(dst_ids[q]);
        launch_pos.push_back(-1 - std::int64_t(waits.size()));
        waits.push_back({it->second, out[q]});
        continue;
      }
      ready_with(it->second, out[q]);  // computed: at once
      continue;
    }
    auto [at, first] = builder.try_emplace(start, q);
    if (!first) {
      out[q] = Buffer::deferred(dst_ids[q], dst_bytes);
      out[q]->view(out[at->second]);
      views[at->second].push_back(out[q]);
      continue;
    }
    out[q] = Buffer::allocate(dst_ids[q], dst_bytes);
    launch_ids.push_back(dst_ids[q]);
    launch_pos.push_back(std::int64_t(q));
  }
  std::vector<std::vector<std::shared_ptr<std::vector<char>>>> received;
  if (plan.between_processes) received = exchange_pieces(plan, global, elem_size, src, src_bufs, dst);
  if (launch_ids.empty()) return out;
  Runtime::get().launch(launch_ids, [&](int i) -> std::function<void()> {
    std::int64_t q = launch_pos[i];
    if (q < 0) {
      auto [source, view] = waits[std::size_t(-1 - q)];
      return [ready_with, source, view] { ready_with(source, view); };
    }
    BufferRef target = out[q];
    std::vector<BufferRef> same = views[std::size_t(q)];
    // Each piece from a local source buffer (its tile at its origin), or
    // from the packed copy another process sent (the region alone).
    struct Read {
      BufferRef buf;
      std::shared_ptr<std::vector<char>> packed;
      Shape tile;
      std::vector<std::int64_t> origin;
      Box region;
    };
    std::vector<Read> reads;
    for (std::size_t k = 0; k < plan.pieces[q].size(); ++k) {
      const Piece& piece = plan.pieces[q][k];
      if (!received.empty() && received[std::size_t(q)][k])
        reads.push_back({nullptr, received[std::size_t(q)][k], piece.region.extent(), piece.region.start, piece.region});
      else
        reads.push_back({src_bufs[piece.src_pos], nullptr, src_tile, src.shard_box(global, piece.src_pos).start,
                         piece.region});
    }
    std::vector<std::int64_t> dst_origin = dst.shard_box(global, q).start;
    bool padded = numel(dst.shard_box(global, q).extent()) != numel(dst_tile);
    return [=] {
      try {
        if (padded) std::memset(target->data(), 0, target->bytes());
        for (const Read& r : reads) {
          const void* from = r.packed ? static_cast<const void*>(r.packed->data()) : nullptr;
          if (!from) {
            r.buf->ready().wait();
            from = r.buf->data();
          }
          copy_region(from, r.tile, r.origin, target->data(), dst_tile, dst_origin, r.region, elem_size);
        }
        target->ready().set();
        for (const BufferRef& v : same) v->ready().set();
      } catch (...) {
        target->ready().set_error(std::current_exception());
        for (const BufferRef& v : same) v->ready().set_error(std::current_exception());
      }
    };
  });
  return out;
}

}  // namespace tessel::rt
