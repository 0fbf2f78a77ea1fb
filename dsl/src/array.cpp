#include <tessel/array.hpp>

#include <map>
#include <sstream>

#include "dsl/src/array_impl.hpp"
#include "runtime/executable.hpp"
#include "dsl/src/numpy_format.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "runtime/transfer.hpp"
#include "tracer/convert.hpp"

namespace tessel {

namespace detail {

const ArrayImpl& impl_of(const Array& x) {
  if (!x.impl()) throw Error("use of an empty ts::Array handle (default-constructed, never assigned)");
  return *x.impl();
}

void check_not_deleted(const ArrayImpl& a) {
  if (a.deleted) throw ValueError("Array has been deleted with shape=" + aval_str(a.dtype, a.shape) + ".");  // JAX's words
}

const ArrayImpl& concrete(const Array& x) {
  const ArrayImpl& a = impl_of(x);
  if (a.trace)
    throw ConcretizationError("Abstract tracer value encountered where concrete value is expected: a traced array " +
                              aval_str(a.dtype, a.shape) +
                              " was used as a concrete value inside jit. Values that decide the program's shape or "
                              "control flow must be static (pass them as C++ scalars or via static_argnums), or use "
                              "ts::lax.cond / while_loop.");
  check_not_deleted(a);
  return a;
}

Array make_array(DType dtype, Shape shape, bool weak_type, Sharding sharding, AxisSharding layout, bool committed,
                 std::vector<rt::BufferRef> buffers) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->dtype = dtype;
  impl->shape = std::move(shape);
  impl->weak_type = weak_type;
  impl->sharding = std::move(sharding);
  impl->layout = std::move(layout);
  impl->committed = committed;
  impl->buffers = std::move(buffers);
  TESSEL_CHECK_INTERNAL(std::int64_t(impl->buffers.size()) == impl->layout.mesh->size());
  return Array(std::move(impl));
}

void gather_to_host(const ArrayImpl& a, void* out) {
  const Shape tile = a.layout.tile_shape(a.shape);
  const std::size_t elem = dtype_size(a.dtype);
  // A tile is read from a replica this process holds; one held only by
  // other processes cannot be read here (JAX: the array is not fully addressable).
  std::map<std::vector<std::int64_t>, std::int64_t> holder;
  for (std::int64_t p = 0; p < a.layout.mesh->size(); ++p) {
    auto t = a.layout.tile_index(p);
    auto it = holder.find(t);
    if (it == holder.end() || (!a.buffers[std::size_t(it->second)] && a.buffers[std::size_t(p)])) holder[t] = p;
  }
  for (auto& [t, p] : holder) {
    if (!a.buffers[std::size_t(p)]) {
      const int id = a.layout.mesh->device_ids()[std::size_t(p)];
      throw DistributedError(cat("reading an array of shape ", shape_str(a.shape), " (", a.sharding ? a.sharding->str() : a.layout.spec_str(),
                                 ") needs its shard on device ", id, ", which process ", process_of_device(id),
                                 " holds, not this process (", process_index(),
                                 "): gather it first (ts::process_allgather) or read addressable_shards()"));
    }
    a.buffers[std::size_t(p)]->ready().wait();
    Box b = a.layout.shard_box(a.shape, p);
    rt::copy_region(a.buffers[p]->data(), tile, b.start, out, a.shape, std::vector<std::int64_t>(a.shape.size(), 0), b,
                    elem);
  }
}

void check_allocation(std::size_t bytes, std::size_t devices, const std::string& what) {
  if (rt::fits_host(bytes, devices)) return;
  throw ResourceExhaustedError(cat("RESOURCE_EXHAUSTED: ", what, " needs ", bytes, " bytes on each of ", devices,
                                   " device(s), more than the host's ", rt::host_memory_bytes(), " bytes of memory"));
}

}  // namespace detail

using detail::concrete;

const std::shared_ptr<detail::ArrayImpl>& Array::impl() const { return impl_; }
bool Array::is_tracer() const { return impl_ && impl_->trace; }
const Shape& Array::shape() const { return detail::impl_of(*this).shape; }
DType Array::dtype() const { return detail::impl_of(*this).dtype; }
bool Array::weak_type() const { return detail::impl_of(*this).weak_type; }
Sharding Array::sharding() const { return *concrete(*this).sharding; }
bool Array::committed() const { return concrete(*this).committed; }

std::set<Device> Array::devices() const {
  std::set<Device> s;
  for (int id : concrete(*this).layout.mesh->device_ids()) s.insert(Device(id));
  return s;
}

std::vector<Shard> Array::addressable_shards() const {
  const auto& a = concrete(*this);
  std::vector<Shard> out;
  for (std::int64_t p = 0; p < a.layout.mesh->size(); ++p) {
    if (!a.buffers[std::size_t(p)]) continue;  // another process's
    Box b = a.layout.shard_box(a.shape, p);
    Index idx;
    for (size_t d = 0; d < a.shape.size(); ++d) idx.push_back({b.start[d], b.stop[d]});
    out.emplace_back(Device(a.layout.mesh->device_ids()[p]), std::move(idx), impl_, p);
  }
  return out;
}

bool Array::is_deleted() const {
  const detail::ArrayImpl& a = detail::impl_of(*this);
  if (a.trace) detail::concrete(*this);  // a tracer: ConcretizationError
  return a.deleted;
}

void Array::delete_buffers() {
  if (detail::impl_of(*this).trace) detail::concrete(*this);  // a tracer: ConcretizationError
  impl_->buffers.clear();
  impl_->deleted = true;
}

bool Array::is_fully_addressable() const {
  for (auto& b : concrete(*this).buffers)
    if (!b) return false;
  return true;
}

const Array& Array::block_until_ready() const {
  for (auto& b : concrete(*this).buffers)
    if (b) b->ready().wait();
  return *this;
}

void Array::copy_to_host(DType as, void* out) const {
  const auto& a = concrete(*this);
  if (as == a.dtype) {
    detail::gather_to_host(a, out);
    return;
  }
  if (is_complex(a.dtype) && !is_complex(as))
    throw TypeError(std::string("copying a ") + dtype_name(a.dtype) + " array to " + dtype_name(as) +
                    " would drop its imaginary parts; take ts::real or ts::abs first, or copy it to std::complex");
  std::vector<unsigned char> tmp(std::size_t(numel(a.shape)) * dtype_size(a.dtype) + 1);
  detail::gather_to_host(a, tmp.data());
  convert_elements(a.dtype, tmp.data(), as, out, numel(a.shape));
}

std::string Array::str() const {
  const auto& ai = detail::impl_of(*this);
  if (ai.trace) return "Traced<ShapedArray(" + aval_str(ai.dtype, ai.shape) + (ai.weak_type ? ", weak_type=True" : "") + ")>";
  const auto& a = concrete(*this);
  std::vector<unsigned char> host(std::size_t(numel(a.shape)) * dtype_size(a.dtype) + 1);
  detail::gather_to_host(a, host.data());
  return detail::array_repr(a.dtype, a.weak_type, a.shape, host.data());
}

std::ostream& operator<<(std::ostream& os, const Array& x) { return os << x.str(); }
std::string to_string(const Array& x) { return x.str(); }

Array Shard::data() const {
  const auto& a = *owner_;
  detail::check_not_deleted(a);
  Box b = a.layout.shard_box(a.shape, position_);
  Shape ext = b.extent();
  const std::size_t elem = dtype_size(a.dtype);
  auto buf = rt::Buffer::allocate(device_.id(), std::size_t(numel(ext)) * elem);
  a.buffers[position_]->ready().wait();
  rt::copy_region(a.buffers[position_]->data(), a.layout.tile_shape(a.shape), b.start, buf->data(), ext, b.start, b,
                  elem);
  buf->ready().set();
  SingleDeviceSharding s(device_);
  return detail::make_array(a.dtype, ext, a.weak_type, s, replicated(detail::flat_mesh({device_}), int(ext.size())),
                            true, {buf});
}

std::uintptr_t Shard::unsafe_buffer_pointer() const {
  detail::check_not_deleted(*owner_);
  const rt::BufferRef& b = owner_->buffers[std::size_t(position_)];
  b->ready().wait();
  return reinterpret_cast<std::uintptr_t>(b->data());
}

}  // namespace tessel
