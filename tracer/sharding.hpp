// The internal sharding model (docs/architecture.md, "Sharding rules").
//
// A DeviceMesh lays device ids out row-major over named axes. An AxisSharding
// says how one value is split over a mesh: for every array dimension, the
// ordered list of mesh axes (major to minor) it is split over. Mesh axes that
// split no dimension hold replicas. `unreduced` axes mark a partial value: the
// true value is the sum of the pieces over those axes (a pending all-reduce).
//
// Every user-facing sharding (NamedSharding, PositionalSharding,
// SingleDeviceSharding) converts to this form; everything that needs to know
// where data lives (shard boxes, transfers, the partitioner) reads it from here.
//
// Uneven dimensions: a dimension of size n split k ways has tiles of
// ceil(n / k) elements; tile t covers [t*c, min((t+1)*c, n)) clamped to n, so
// trailing tiles may be short or empty. Buffers always hold the full padded
// tile; the padding is never shown to the user.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/core/key.hpp"
#include "tessel/core/shape.hpp"

namespace tessel {

struct MeshAxis {
  std::string name;
  std::int64_t size = 1;
  bool operator==(const MeshAxis&) const = default;
};

class DeviceMesh {
 public:
  // Throws ShardingError if the axis sizes do not multiply to the device count,
  // a name repeats, or a device id repeats.
  DeviceMesh(std::vector<int> device_ids, std::vector<MeshAxis> axes);

  const std::vector<int>& device_ids() const { return device_ids_; }
  const std::vector<MeshAxis>& axes() const { return axes_; }
  int num_axes() const { return int(axes_.size()); }
  std::int64_t size() const { return std::int64_t(device_ids_.size()); }
  // Index of the named axis, or -1.
  int axis_index(const std::string& name) const;
  // Coordinate along `axis` of the device at flat mesh position `pos`.
  std::int64_t coord(std::int64_t pos, int axis) const;
  // Flat mesh position of a device id, or -1 when the mesh lacks it.
  std::int64_t position_of(int device_id) const;
  // "Mesh('x': 4, 'y': 2)"
  std::string str() const;
  bool operator==(const DeviceMesh& o) const {
    return device_ids_ == o.device_ids_ && axes_ == o.axes_;
  }

 private:
  std::vector<int> device_ids_;
  std::vector<MeshAxis> axes_;
  std::vector<std::int64_t> strides_;  // row-major strides of the axes
};

using MeshRef = std::shared_ptr<const DeviceMesh>;

struct AxisSharding {
  MeshRef mesh;
  std::vector<std::vector<int>> dims;  // per array dim: mesh axis indices, major to minor
  std::vector<int> unreduced;          // mesh axes holding partial sums

  int rank() const { return int(dims.size()); }
  // Number of tiles along array dimension d.
  std::int64_t num_tiles(int d) const;
  // The padded local shape every device holds: ceil(global / tiles) per dim.
  Shape tile_shape(const Shape& global) const;
  // Tile coordinate, per array dim, of the device at flat mesh position pos.
  std::vector<std::int64_t> tile_index(std::int64_t pos) const;
  // The part of the global array the device at `pos` holds (clamped; may be empty).
  Box shard_box(const Shape& global, std::int64_t pos) const;
  // True when every device holds the whole (reduced) value.
  bool is_fully_replicated() const;
  // Mesh axes used by no dimension (and not unreduced): replica axes.
  std::vector<int> replica_axes() const;
  // "P('a', None)" style, for messages and IR text.
  std::string spec_str() const;
  bool operator==(const AxisSharding& o) const;
};

// The groups of flat mesh positions a collective over `axes` joins: in each
// group the other axes are fixed and `axes` vary (row-major over them); groups
// in order of the fixed coordinates. XLA's replica_groups.
std::vector<std::vector<std::int64_t>> collective_groups(const DeviceMesh& mesh, const std::vector<int>& axes);

// One mesh for shardings given on several meshes over the same device list
// (in the same order): the common refinement of their axes. Axis sizes must
// nest (e.g. (4, 2) and (8,) and (2, 4) refine to (2, 2, 2)); throws
// ShardingError when they do not, or when the device lists differ.
struct CommonMesh {
  MeshRef mesh;
  // The same sharding on the common mesh.
  AxisSharding rewrite(const AxisSharding& s) const;
  // `s` (on the common mesh) written on `target`, if it can be.
  std::optional<AxisSharding> express_on(const AxisSharding& s, const MeshRef& target) const;

  std::vector<MeshRef> sources;
  std::vector<std::vector<std::vector<int>>> atoms_of;  // [source][axis] -> common axes
};
CommonMesh unify_meshes(const std::vector<MeshRef>& meshes);

// Exact structure for cache keys (tessel/core/key.hpp).
void add_to_key(Key& k, const DeviceMesh& m);
void add_to_key(Key& k, const AxisSharding& s);

// A fully replicated sharding of rank `rank` over `mesh`.
AxisSharding replicated(MeshRef mesh, int rank);

// Builds the axis form of a tiled sharding given as JAX's PositionalSharding
// (or an HLO tile assignment) gives it: the device list, the tile grid shape,
// and for every tile (row-major) the set of positions (into device_ids) that
// hold it. Finds a mesh over device_ids whose axes express the grid; throws
// ShardingError when the assignment is not a transposed iota (not expressible).
AxisSharding sharding_from_tiles(const std::vector<int>& device_ids, const Shape& grid,
                                 const std::vector<std::vector<int>>& tile_positions);

}  // namespace tessel
