// ts::Array: the one value type (API.md "Arrays").
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <tessel/device.hpp>
#include <tessel/sharding.hpp>

#include <tessel/core/dtype.hpp>
#include <tessel/core/errors.hpp>
#include <tessel/core/shape.hpp>

namespace tessel {

namespace detail {
struct ArrayImpl;
}

class Array;
class IndexItem;
class IndexUpdate;
class Axes;

// One device's piece of an array.
class Shard {
 public:
  Shard(Device device, Index index, std::shared_ptr<detail::ArrayImpl> owner, std::int64_t position)
      : device_(device), index_(std::move(index)), owner_(std::move(owner)), position_(position) {}
  Device device() const { return device_; }
  // Per dimension, the [start, stop) of the global array this shard holds.
  const Index& index() const { return index_; }
  // The shard's values as an array committed to device() (a copy).
  Array data() const;
  // The address of the shard's buffer once it is computed (JAX's
  // unsafe_buffer_pointer), valid while the array lives. Devices of one
  // process may hold one block for a value that is the same on each.
  std::uintptr_t unsafe_buffer_pointer() const;

 private:
  Device device_;
  Index index_;
  std::shared_ptr<detail::ArrayImpl> owner_;
  std::int64_t position_;
};

class Array {
 public:
  // An empty handle (for containers); using it throws tessel::Error.
  Array() = default;
  explicit Array(std::shared_ptr<detail::ArrayImpl> impl) : impl_(std::move(impl)) {}

  const Shape& shape() const;
  DType dtype() const;
  int ndim() const { return int(shape().size()); }
  std::int64_t size() const { return numel(shape()); }
  // True for values that came from C++ scalars (JAX's weak_type).
  bool weak_type() const;

  Sharding sharding() const;
  // The set of devices holding (part of) the array.
  std::set<Device> devices() const;
  // True after device_put, or as the output of a computation on committed inputs.
  bool committed() const;
  // The shards this process holds (all of them in one process).
  std::vector<Shard> addressable_shards() const;
  // Whether this process holds every shard (jax.Array.is_fully_addressable).
  bool is_fully_addressable() const;
  // Whether the array's buffers were given up (delete_buffers, or donated to
  // a jit call: JitOptions::donate_argnums). Its shape and dtype stay
  // readable; anything that needs its values is a ValueError ("Array has
  // been deleted with shape=float32[3].").
  bool is_deleted() const;
  // JAX's Array.delete() (a C++ keyword): gives up the buffers at once; a
  // computation still reading them keeps them until it is done. Every handle
  // of this array sees it deleted.
  void delete_buffers();
  // Waits for the asynchronous work producing the array; returns *this.
  const Array& block_until_ready() const;

  // Copies the values to the host (row-major), converting to T as numpy's astype.
  template <class T>
  std::vector<T> to_vector() const;
  // The single element, converted to T; throws ShapeError unless size() == 1.
  template <class T>
  T item() const;

  // Methods as on jax.Array (see ops.hpp for the functions).
  Array astype(DType dtype) const;
  Array T() const;
  Array reshape(Shape shape) const;
  Array index(const std::vector<IndexItem>& items) const;
  // x[i]: one index item (an integer, ts::slice, an integer or boolean Array), as x.index({i}).
  Array operator[](const IndexItem& item) const;
  IndexUpdate at(const std::vector<IndexItem>& items) const;
  Array sum(const Axes& axis, bool keepdims = false) const;
  Array sum() const;
  Array mean(const Axes& axis, bool keepdims = false) const;
  Array mean() const;
  Array max(const Axes& axis, bool keepdims = false) const;
  Array max() const;
  Array min(const Axes& axis, bool keepdims = false) const;
  Array min() const;

  // JAX's repr: "Array([[0., 1.],\n       [2., 3.]], dtype=float32)".
  std::string str() const;
  bool valid() const { return bool(impl_); }
  // True inside ts::jit for values that depend on the traced inputs.
  bool is_tracer() const;
  const std::shared_ptr<detail::ArrayImpl>& impl() const;

 private:
  void copy_to_host(DType as, void* out) const;
  std::shared_ptr<detail::ArrayImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Array& x);
std::string to_string(const Array& x);

template <class T>
std::vector<T> Array::to_vector() const {
  static_assert(std::is_arithmetic_v<T> || is_narrow_float_v<T> || std::is_same_v<T, std::complex<float>> ||
                    std::is_same_v<T, std::complex<double>>,
                "to_vector<T>: T must be an arithmetic type, a narrow float (ts::bfloat16_t, ...) or "
                "std::complex<float/double>");
  static_assert(!std::is_same_v<T, long double> && !std::is_same_v<T, char>,
                "to_vector<T>: T has no tessel dtype (use double, or std::int8_t)");
  using S = std::conditional_t<std::is_same_v<T, bool>, bool, T>;
  if constexpr (std::is_same_v<T, bool>) {
    std::unique_ptr<bool[]> tmp(new bool[size() > 0 ? size() : 1]);
    copy_to_host(DType::bool_, tmp.get());
    return std::vector<bool>(tmp.get(), tmp.get() + size());
  } else {
    std::vector<S> v(size());
    copy_to_host(dtype_of_v<S>, v.data());
    return v;
  }
}

template <class T>
T Array::item() const {
  if (size() != 1)
    throw ShapeError("item(): can only convert an array of size 1 to a scalar, got shape " + shape_str(shape()));
  return to_vector<T>()[0];
}

}  // namespace tessel
