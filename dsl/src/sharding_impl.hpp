// Conversions from the user-facing shardings to the internal axis form.
#pragma once

#include <tessel/sharding.hpp>

#include "tessel/core/key.hpp"
#include "tracer/sharding.hpp"

namespace tessel::detail {

// The axis form of `s` for an array of `global` shape; throws ShardingError
// (naming the sharding and the shape) when `s` does not fit the array.
AxisSharding axis_sharding(const Sharding& s, const Shape& global);
// The axis form for an array of rank `rank`, checking only the rank.
AxisSharding axis_sharding_for_rank(const Sharding& s, int rank);

// The mesh of a device list laid out as one unnamed axis.
MeshRef flat_mesh(const std::vector<Device>& devices);
std::vector<int> device_ids(const std::vector<Device>& devices);
// ShardingError naming the first device id that does not exist.
void check_devices_exist(const std::vector<Device>& devices);

// The sharding's exact structure (kind, mesh, spec or device sets) for cache keys.
void add_to_key(Key& k, const Sharding& s);

}  // namespace tessel::detail
