// Moving array data between shardings outside a compiled program
// (device_put, host reads). A plan lists, for every destination device, the
// pieces it copies and from which source device; a destination whose piece
// is already in place on the same device shares the source buffer instead.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/buffer.hpp"
#include "tracer/sharding.hpp"

namespace tessel::rt {

// Copies the global region `region` from a buffer holding the tile that
// starts at src_origin (padded tile shape src_tile) to one holding the tile
// at dst_origin (shape dst_tile). Row-major, elements of elem_size bytes.
void copy_region(const void* src, const Shape& src_tile, const std::vector<std::int64_t>& src_origin, void* dst,
                 const Shape& dst_tile, const std::vector<std::int64_t>& dst_origin, const Box& region,
                 std::size_t elem_size);

struct Piece {
  std::int64_t src_pos;  // flat position in the source mesh
  Box region;            // global coordinates
};

struct TransferPlan {
  // Per destination mesh position: the source position whose buffer can be
  // shared as is (-1 if none), else the pieces to copy.
  std::vector<std::int64_t> alias;
  std::vector<std::vector<Piece>> pieces;
  std::size_t bytes_moved = 0;  // bytes copied between different devices (into this process's)
  // A source spanning processes: every destination is planned, and pieces
  // between processes move over MPI.
  bool between_processes = false;
};

TransferPlan plan_transfer(const Shape& global, std::size_t elem_size, const AxisSharding& src,
                           const AxisSharding& dst);

// Runs a plan: each destination device builds its buffer in its own queue
// after the source buffers it reads are ready. Returns at once, except when
// pieces move between processes: those are packed, sent and received first,
// on the calling (host) thread, which every process runs alike.
std::vector<BufferRef> run_transfer(const TransferPlan& plan, const Shape& global, std::size_t elem_size,
                                    const AxisSharding& src, const std::vector<BufferRef>& src_bufs,
                                    const AxisSharding& dst);

}  // namespace tessel::rt
