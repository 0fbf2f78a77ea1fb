// Meshes, partition specs and shardings (API.md "Sharding").
//
// Every sharding converts to one internal, axis-based form (tracer/sharding.hpp);
// the classes here keep what the user wrote so they print as JAX prints them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <tessel/device.hpp>

#include <tessel/core/shape.hpp>

namespace tessel {

class DeviceMesh;  // tracer/sharding.hpp

// Python's None in a PartitionSpec: the dimension is not split.
struct NoneType {
  bool operator==(const NoneType&) const = default;
};
inline constexpr NoneType None{};

class Mesh {
 public:
  // Devices laid out row-major over the named axes; any order, any subset.
  Mesh(const std::vector<Device>& devices, const Shape& shape, const std::vector<std::string>& axis_names);
  // A 1-D mesh over all the given devices: Mesh(jax.devices(), 'x').
  Mesh(const std::vector<Device>& devices, const std::string& axis_name);

  Shape shape() const;
  std::vector<std::string> axis_names() const;
  std::int64_t size() const;
  // The devices in mesh order (row-major over the axes).
  std::vector<Device> devices() const;
  // Size of one named axis; throws ShardingError for an unknown name.
  std::int64_t axis_size(const std::string& name) const;
  // "Mesh('x': 4, 'y': 2)"
  std::string str() const;
  bool operator==(const Mesh& o) const;

  const std::shared_ptr<const DeviceMesh>& impl() const { return impl_; }
  explicit Mesh(std::shared_ptr<const DeviceMesh> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const DeviceMesh> impl_;
};

// As jax.make_mesh on CPU: devices in id order, row-major over the axes.
Mesh make_mesh(const Shape& shape, const std::vector<std::string>& axis_names);
Mesh make_mesh(const Shape& shape, const std::vector<std::string>& axis_names, const std::vector<Device>& devices);

class PartitionSpec {
 public:
  // One entry: None, one mesh axis, or a tuple of mesh axes (major to minor).
  class Entry {
   public:
    Entry() : absent_(true) {}  // no argument given (internal)
    Entry(NoneType) {}
    Entry(const char* axis) : axes_{axis} {}
    Entry(std::string axis) : axes_{std::move(axis)} {}
    Entry(std::initializer_list<std::string> axes) : axes_(axes), tuple_(true) {}
    static Entry tuple(std::vector<std::string> axes) {
      Entry e;
      e.absent_ = false;
      e.axes_ = std::move(axes);
      e.tuple_ = true;
      return e;
    }
    const std::vector<std::string>& axes() const { return axes_; }
    bool is_none() const { return axes_.empty(); }
    bool is_tuple() const { return tuple_; }
    bool absent() const { return absent_; }
    // Entries mean the same split (a 1-tuple equals its axis).
    bool operator==(const Entry& o) const { return axes_ == o.axes_; }

   private:
    std::vector<std::string> axes_;
    bool tuple_ = false;
    bool absent_ = false;
  };

  PartitionSpec(Entry e0 = {}, Entry e1 = {}, Entry e2 = {}, Entry e3 = {}, Entry e4 = {}, Entry e5 = {},
                Entry e6 = {}, Entry e7 = {});
  // P({"a", "b"}): one dimension split over a tuple of axes. (Needed so a lone
  // braced list is not ambiguous between an Entry and a PartitionSpec.)
  PartitionSpec(std::initializer_list<const char*> tuple_axes);
  static PartitionSpec from_entries(std::vector<Entry> entries);

  int size() const { return int(entries_.size()); }
  const Entry& operator[](int i) const { return entries_.at(i); }
  const std::vector<Entry>& entries() const { return entries_; }
  // "P('a', None)", "P(('a', 'b'), None)", "P()"
  std::string str() const;
  // Equal when they split the same way (trailing Nones do not matter).
  bool operator==(const PartitionSpec& o) const;

 private:
  std::vector<Entry> entries_;
};
using P = PartitionSpec;

// One dimension's part of a shard: [start, stop).
struct Slice {
  std::int64_t start = 0, stop = 0;
  bool operator==(const Slice&) const = default;
};
// A shard's place in the global array, per dimension.
using Index = std::vector<Slice>;
// "(0:2, 0:8)"
std::string to_string(const Index& idx);

class Sharding;

// The methods every sharding has (JAX's Sharding interface).
template <class Derived>
class ShardingInterface {
 public:
  // The shape of each shard of an array of `global_shape` (ceil division when uneven).
  Shape shard_shape(const Shape& global_shape) const;
  // Each device's slice of an array of `global_shape` (clamped when uneven).
  std::map<Device, Index> devices_indices_map(const Shape& global_shape) const;
  bool is_fully_replicated() const;
  int num_devices() const;
  std::set<Device> device_set() const;
  // The devices in the order the sharding lists them (JAX's _device_assignment).
  std::vector<Device> device_assignment() const;
  // True when both place every element of an array of rank `ndim` on the same devices.
  bool is_equivalent_to(const Sharding& other, int ndim) const;
};

class NamedSharding : public ShardingInterface<NamedSharding> {
 public:
  // Throws ShardingError for an axis the mesh lacks or an axis used twice.
  NamedSharding(Mesh mesh, PartitionSpec spec);
  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  // "NamedSharding(mesh=Mesh('a': 4, 'b': 2), spec=P('a', 'b'))"
  std::string str() const;
  bool operator==(const NamedSharding& o) const { return mesh_ == o.mesh_ && spec_ == o.spec_; }

 private:
  Mesh mesh_;
  PartitionSpec spec_;
};

// JAX's PositionalSharding: an array of device sets, reshaped, transposed and
// replicated (set union along an axis) like a numpy array.
class PositionalSharding : public ShardingInterface<PositionalSharding> {
 public:
  explicit PositionalSharding(std::vector<Device> devices);
  PositionalSharding reshape(const Shape& shape) const;
  PositionalSharding transpose(const std::vector<int>& perm) const;
  PositionalSharding T() const;
  // Union of the device sets along `axis` (keepdims as in JAX: default true).
  PositionalSharding replicate(int axis, bool keepdims = true) const;
  // Union over every axis: every device holds everything.
  PositionalSharding replicate() const;
  const Shape& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  // Device ids (sorted) of the set at a row-major position.
  std::vector<int> device_ids_at(std::int64_t flat) const;
  // "PositionalSharding([[{CPU 0} {CPU 1}] ...], shape=(4, 2))"
  std::string str() const;
  bool operator==(const PositionalSharding& o) const {
    return devices_ == o.devices_ && shape_ == o.shape_ && sets_ == o.sets_;
  }
  const std::vector<Device>& devices() const { return devices_; }
  // Device sets as positions into devices(), row-major over shape().
  const std::vector<std::vector<int>>& position_sets() const { return sets_; }

 private:
  PositionalSharding(std::vector<Device> devices, Shape shape, std::vector<std::vector<int>> sets);
  std::vector<Device> devices_;
  Shape shape_;
  std::vector<std::vector<int>> sets_;
};

class SingleDeviceSharding : public ShardingInterface<SingleDeviceSharding> {
 public:
  explicit SingleDeviceSharding(Device device) : device_(device) {}
  Device device() const { return device_; }
  // "SingleDeviceSharding(device=CpuDevice(id=0))"
  std::string str() const;
  bool operator==(const SingleDeviceSharding& o) const { return device_ == o.device_; }

 private:
  Device device_;
};

// Any sharding: what x.sharding() returns and what device_put takes.
class Sharding : public ShardingInterface<Sharding> {
 public:
  Sharding(NamedSharding s) : v_(std::move(s)) {}
  Sharding(PositionalSharding s) : v_(std::move(s)) {}
  Sharding(SingleDeviceSharding s) : v_(std::move(s)) {}

  bool is_named() const { return std::holds_alternative<NamedSharding>(v_); }
  bool is_positional() const { return std::holds_alternative<PositionalSharding>(v_); }
  bool is_single_device() const { return std::holds_alternative<SingleDeviceSharding>(v_); }
  // The concrete sharding; throws ShardingError if it is another kind.
  const NamedSharding& as_named() const;
  const PositionalSharding& as_positional() const;
  const SingleDeviceSharding& as_single_device() const;

  std::string str() const;
  bool operator==(const Sharding& o) const { return v_ == o.v_; }
  const std::variant<NamedSharding, PositionalSharding, SingleDeviceSharding>& variant() const { return v_; }

 private:
  std::variant<NamedSharding, PositionalSharding, SingleDeviceSharding> v_;
};

std::ostream& operator<<(std::ostream& os, const Mesh& m);
std::ostream& operator<<(std::ostream& os, const PartitionSpec& p);
std::ostream& operator<<(std::ostream& os, const NamedSharding& s);
std::ostream& operator<<(std::ostream& os, const PositionalSharding& s);
std::ostream& operator<<(std::ostream& os, const SingleDeviceSharding& s);
std::ostream& operator<<(std::ostream& os, const Sharding& s);
std::ostream& operator<<(std::ostream& os, const Index& idx);

namespace detail {
Shape sharding_shard_shape(const Sharding& s, const Shape& global);
std::map<Device, Index> sharding_indices(const Sharding& s, const Shape& global);
bool sharding_replicated(const Sharding& s);
std::vector<Device> sharding_devices(const Sharding& s);
bool sharding_equivalent(const Sharding& a, const Sharding& b, int ndim);
}  // namespace detail

template <class D>
Shape ShardingInterface<D>::shard_shape(const Shape& g) const {
  return detail::sharding_shard_shape(Sharding(static_cast<const D&>(*this)), g);
}
template <class D>
std::map<Device, Index> ShardingInterface<D>::devices_indices_map(const Shape& g) const {
  return detail::sharding_indices(Sharding(static_cast<const D&>(*this)), g);
}
template <class D>
bool ShardingInterface<D>::is_fully_replicated() const {
  return detail::sharding_replicated(Sharding(static_cast<const D&>(*this)));
}
template <class D>
std::vector<Device> ShardingInterface<D>::device_assignment() const {
  return detail::sharding_devices(Sharding(static_cast<const D&>(*this)));
}
template <class D>
int ShardingInterface<D>::num_devices() const {
  return int(device_assignment().size());
}
template <class D>
std::set<Device> ShardingInterface<D>::device_set() const {
  auto d = device_assignment();
  return std::set<Device>(d.begin(), d.end());
}
template <class D>
bool ShardingInterface<D>::is_equivalent_to(const Sharding& other, int ndim) const {
  return detail::sharding_equivalent(Sharding(static_cast<const D&>(*this)), other, ndim);
}

}  // namespace tessel
