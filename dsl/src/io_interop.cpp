// Arrays over memory that is not tessel's: ts::from_buffer (LibTorch's
// from_blob), DLPack (to_dlpack / from_dlpack) and JAX's
// make_array_from_single_device_arrays. Devices share the host's memory, so
// a caller's block, a CPU DLPack tensor's or another array's buffer serves
// as a device buffer as it is (rt::Buffer::external, which runs the owner's
// release when the last array over it is gone).
//
// Alignment: compiled kernels load and store each element with its type's
// own alignment (codegen/emit.cpp's loads carry the element type's ABI
// alignment; the library kernels read typed pointers; the 64-byte aligned
// SIMD loads are only of their own packed copies, and stream_copy handles an
// unaligned head). So 64-byte alignment is not needed, but an element must
// sit at a multiple of its type's alignment: memory that is not (a float32 at
// an odd address) is copied into a buffer of tessel's, never read in place.
#include <tessel/io.hpp>

#include <dlpack/dlpack.h>

#include <cstring>
#include <map>
#include <memory>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "runtime/transfer.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::cat;

namespace {

// ---- DLPack's types ----------------------------------------------------------

// Type codes newer than Debian's dlpack.h (0.6): kDLBool (0.8), the 8-bit
// floats (1.1). Our own names, so that a newer header's enumerators do not clash.
constexpr std::uint8_t kCodeBool = 6;
constexpr std::uint8_t kCodeFloat8E4M3FN = 10;
constexpr std::uint8_t kCodeFloat8E5M2 = 12;
constexpr std::uint8_t kCodeFloat8E8M0FNU = 13;

// DLPack 1.1's names for its type codes, for messages.
std::string code_name(std::uint8_t code) {
  static const char* const names[] = {"kDLInt",
                                      "kDLUInt",
                                      "kDLFloat",
                                      "kDLOpaqueHandle",
                                      "kDLBfloat",
                                      "kDLComplex",
                                      "kDLBool",
                                      "kDLFloat8_e3m4",
                                      "kDLFloat8_e4m3",
                                      "kDLFloat8_e4m3b11fnuz",
                                      "kDLFloat8_e4m3fn",
                                      "kDLFloat8_e4m3fnuz",
                                      "kDLFloat8_e5m2",
                                      "kDLFloat8_e5m2fnuz",
                                      "kDLFloat8_e8m0fnu",
                                      "kDLFloat6_e2m3fn",
                                      "kDLFloat6_e3m2fn",
                                      "kDLFloat4_e2m1fn"};
  if (code < std::size(names)) return cat(names[code], " (code ", int(code), ")");
  return cat("type code ", int(code));
}

std::string device_type_name(int type) {
  static const std::map<int, const char*> names = {
      {1, "kDLCPU"},   {2, "kDLCUDA"},        {3, "kDLCUDAHost"}, {4, "kDLOpenCL"},        {7, "kDLVulkan"},
      {8, "kDLMetal"}, {9, "kDLVPI"},         {10, "kDLROCM"},    {11, "kDLROCMHost"},     {12, "kDLExtDev"},
      {13, "kDLCUDAManaged"}, {14, "kDLOneAPI"}, {15, "kDLWebGPU"}, {16, "kDLHexagon"}, {17, "kDLMAIA"}};
  auto it = names.find(type);
  return it != names.end() ? cat(it->second, " (", type, ")") : cat("device type ", type);
}

DLDataType to_dl(DType t) {
  const auto bits = std::uint8_t(8 * dtype_size(t));
  switch (t) {
    case DType::bool_: return {kCodeBool, 8, 1};
    case DType::int8:
    case DType::int16:
    case DType::int32:
    case DType::int64: return {kDLInt, bits, 1};
    case DType::uint8:
    case DType::uint16:
    case DType::uint32:
    case DType::uint64: return {kDLUInt, bits, 1};
    case DType::float16:
    case DType::float32:
    case DType::float64: return {kDLFloat, bits, 1};
    case DType::bfloat16: return {kDLBfloat, 16, 1};
    case DType::complex64:
    case DType::complex128: return {kDLComplex, bits, 1};
    case DType::float8_e4m3fn: return {kCodeFloat8E4M3FN, 8, 1};
    case DType::float8_e5m2: return {kCodeFloat8E5M2, 8, 1};
    case DType::float8_e8m0fnu: return {kCodeFloat8E8M0FNU, 8, 1};
    case DType::float4_e2m1fn:
      // DLPack's kDLFloat4_e2m1fn packs two values in a byte; tessel (like
      // NumPy with ml_dtypes) stores one per byte, so no view can share them.
      throw TypeError("to_dlpack: float4_e2m1fn has no DLPack type for tessel's layout (one value per byte; "
                      "DLPack's kDLFloat4_e2m1fn packs two per byte); convert it with astype first");
  }
  throw InternalError(cat("to_dlpack: no DLPack type for ", dtype_name(t)));
}

// The inverse of to_dl (one table: to_dl's).
DType from_dl(DLDataType t) {
  if (t.lanes != 1)
    throw TypeError(cat("from_dlpack: vector types (lanes ", t.lanes, ") are not supported; tessel's dtypes have one lane (",
                        code_name(t.code), ", ", int(t.bits), " bits)"));
  for (int i = 0; i < kNumDTypes; ++i) {
    if (DType(i) == DType::float4_e2m1fn) continue;  // none (to_dl)
    const DLDataType d = to_dl(DType(i));
    if (d.code == t.code && d.bits == t.bits) return DType(i);
  }
  throw TypeError(cat("from_dlpack: tessel has no dtype for ", code_name(t.code), " with ", int(t.bits), " bits"));
}

// ---- Devices and alignment -----------------------------------------------------

// The alignment compiled kernels assume of an element of `t` (its storage type's).
std::size_t element_alignment(DType t) {
  return visit_dtype(t, [](auto tag) { return alignof(decltype(tag)); });
}

bool aligned_for(const void* p, DType t) { return reinterpret_cast<std::uintptr_t>(p) % element_alignment(t) == 0; }

// `device` exists and is this process's (a buffer of ours must be on a local device).
void check_local(const Device& device, const char* where) {
  detail::check_devices_exist({device});
  if (!detail::runtime().is_local(device.id()))
    throw ValueError(cat(where, ": device ", device.id(), " is process ", device.process_index(),
                         "'s, not this process's (", process_index(), "); memory can only be placed on a local device"));
}

// A single-device array over `buf` (its bytes, C order).
Array single_device_array(DType dtype, const Shape& shape, const Device& device, bool committed, rt::BufferRef buf) {
  return detail::make_array(dtype, shape, false, SingleDeviceSharding(device),
                            replicated(detail::flat_mesh({device}), int(shape.size())), committed, {std::move(buf)});
}

// A buffer of tessel's on `device` holding a copy of `bytes` bytes at `data`.
rt::BufferRef copied_buffer(const Device& device, const void* data, std::size_t bytes, const std::string& what) {
  detail::check_allocation(bytes, 1, what);
  auto buf = rt::Buffer::allocate(device.id(), bytes);
  if (bytes) std::memcpy(buf->data(), data, bytes);
  buf->ready().set();
  return buf;
}

// ---- DLPack's tensors ------------------------------------------------------------

// What a tensor given out by to_dlpack owns: the buffer (the array's, one
// reference) and the shape and strides its DLTensor points to.
struct Exported {
  DLManagedTensor tensor{};
  rt::BufferRef buffer;
  std::vector<std::int64_t> shape, strides;
};

void delete_exported(DLManagedTensor* self) {
  if (self) delete static_cast<Exported*>(self->manager_ctx);
}

// Calls a consumed tensor's deleter (if it has one) once.
void release_tensor(DLManagedTensor* t) {
  if (t && t->deleter) t->deleter(t);
}

// Whether a tensor of `shape` with element strides `strides` (null: compact)
// is compact in C order. Dimensions of extent 1 may have any stride, and an
// empty tensor any strides (NumPy's C_CONTIGUOUS flag, as PyTorch's
// is_contiguous, so that a tensor with a broadcast unit axis still goes
// without a copy).
bool c_contiguous(const Shape& shape, const std::int64_t* strides) {
  if (!strides || numel(shape) == 0) return true;
  std::int64_t expect = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    if (shape[std::size_t(d)] != 1 && strides[d] != expect) return false;
    expect *= shape[std::size_t(d)];
  }
  return true;
}

// Copies the strided elements at `src` (element strides, possibly negative
// or zero) into `dst` in C order; the innermost dimension by one memcpy
// where it is compact.
void gather_strided(const char* src, const Shape& shape, const std::int64_t* strides, std::size_t es, char* dst) {
  const std::int64_t n = numel(shape);
  if (n == 0) return;
  const int nd = int(shape.size());
  if (nd == 0) return void(std::memcpy(dst, src, es));
  const std::int64_t inner = shape.back(), inner_stride = strides[nd - 1];
  std::vector<std::int64_t> idx(std::size_t(nd), 0);
  for (std::int64_t row = 0; row < n / inner; ++row) {
    std::int64_t off = 0;  // elements from src to this row's first
    for (int d = 0; d < nd - 1; ++d) off += idx[std::size_t(d)] * strides[d];
    const char* s = src + off * std::int64_t(es);
    if (inner_stride == 1) {
      std::memcpy(dst, s, std::size_t(inner) * es);
      dst += std::size_t(inner) * es;
    } else {
      for (std::int64_t i = 0; i < inner; ++i, dst += es) std::memcpy(dst, s + i * inner_stride * std::int64_t(es), es);
    }
    for (int d = nd - 2; d >= 0; --d) {  // the next row's index (odometer over the outer dimensions)
      if (++idx[std::size_t(d)] < shape[std::size_t(d)]) break;
      idx[std::size_t(d)] = 0;
    }
  }
}

}  // namespace

// ---- ts::from_buffer ----------------------------------------------------------------

Array from_buffer(void* data, const Shape& shape, DType dtype, const Device& device, std::function<void(void*)> deleter) {
  check_shape(shape, dtype, "from_buffer");
  check_local(device, "from_buffer");
  const std::size_t bytes = std::size_t(numel(shape)) * dtype_size(dtype);
  if (!data && bytes)
    throw ValueError(cat("from_buffer: data is null for an array of ", aval_str(dtype, shape), " (", bytes, " bytes)"));
  if (!aligned_for(data, dtype)) {
    // Kernels would read it misaligned (undefined, and slow where it works):
    // a copy of tessel's, and the caller's memory is given back at once.
    auto buf = copied_buffer(device, data, bytes, cat("from_buffer: a copy of misaligned ", aval_str(dtype, shape)));
    if (deleter) deleter(data);
    return single_device_array(dtype, shape, device, true, std::move(buf));
  }
  auto buf = rt::Buffer::external(device.id(), bytes, data, [data, deleter = std::move(deleter)] {
    if (deleter) deleter(data);
  });
  return single_device_array(dtype, shape, device, true, std::move(buf));
}

// ---- ts::make_array_from_single_device_arrays -------------------------------------------

Array make_array_from_single_device_arrays(const Shape& shape, const Sharding& sharding,
                                           const std::vector<Array>& arrays) {
  const char* where = "make_array_from_single_device_arrays";
  check_shape(shape, DType::float32, where);
  AxisSharding layout = detail::axis_sharding(sharding, shape);
  const auto& ids = layout.mesh->device_ids();
  rt::Runtime& runtime = detail::runtime();
  std::map<int, std::size_t> position;  // local device id -> flat mesh position
  for (std::size_t p = 0; p < ids.size(); ++p)
    if (runtime.is_local(ids[p])) position[ids[p]] = p;
  if (arrays.size() != position.size()) {
    std::string devs;
    for (auto& [id, p] : position) devs += cat(devs.empty() ? "" : ", ", id);
    throw ValueError(cat(where, ": the sharding ", sharding.str(), " has ", position.size(),
                         " addressable device(s) (ids ", devs, "), so it needs one array for each; got ", arrays.size()));
  }
  if (arrays.empty())
    throw ValueError(cat(where, ": the sharding ", sharding.str(), " has no device of this process (", process_index(),
                         "), so no array gives the dtype"));
  const Shape tile = layout.tile_shape(shape);
  const DType dtype = arrays.front().dtype();
  const std::size_t es = dtype_size(dtype), tile_bytes = std::size_t(numel(tile)) * es;
  std::vector<rt::BufferRef> bufs(ids.size());
  std::map<int, std::size_t> given;  // device id -> index in arrays
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const auto& a = detail::concrete(arrays[i]);
    const auto devs = arrays[i].devices();
    if (devs.size() != 1)
      throw ValueError(cat(where, ": arrays[", i, "] is on ", devs.size(), " devices (", a.sharding->str(),
                           "); each must be on one device"));
    const int id = devs.begin()->id();
    auto pos = position.find(id);
    if (pos == position.end())
      throw ValueError(cat(where, ": arrays[", i, "] is on device ", id, ", which is not an addressable device of the sharding ",
                           sharding.str()));
    if (auto [it, fresh] = given.emplace(id, i); !fresh)
      throw ValueError(cat(where, ": arrays[", it->second, "] and arrays[", i, "] are both on device ", id,
                           "; each device takes one"));
    if (a.dtype != dtype)
      throw TypeError(cat(where, ": arrays[", i, "] (device ", id, ") has dtype ", dtype_name(a.dtype), ", arrays[0] ",
                          dtype_name(dtype), "; all must have the same dtype"));
    const std::size_t p = pos->second;
    const Box box = layout.shard_box(shape, std::int64_t(p));
    if (a.shape != box.extent()) {
      std::string index;
      for (std::size_t d = 0; d < shape.size(); ++d) index += cat(d ? ", " : "", box.start[d], ":", box.stop[d]);
      throw ShapeError(cat(where, ": arrays[", i, "] (device ", id, ") has shape ", shape_str(a.shape),
                           " but device ", id, "'s shard [", index, "] of ", shape_str(shape), " under ", sharding.str(),
                           " has shape ", shape_str(box.extent())));
    }
    // The array's buffer is its whole value in C order on this device (one
    // device: its tile is its shape). When the global tile is that shape
    // too (an even split), it is the shard's buffer as it is.
    const rt::BufferRef& src = a.buffers.front();
    if (a.buffers.size() == 1 && a.tile_bytes() == tile_bytes && numel(box.extent()) == numel(tile)) {
      bufs[p] = src;
      continue;
    }
    // An uneven split: the tile is padded past the shard's end; a copy, the padding zeros.
    detail::check_allocation(tile_bytes, 1, cat(where, ": a padded tile of ", aval_str(dtype, tile)));
    auto buf = rt::Buffer::allocate(id, tile_bytes);
    std::memset(buf->data(), 0, buf->bytes());
    src->ready().wait();
    rt::copy_region(src->data(), a.layout.tile_shape(a.shape), std::vector<std::int64_t>(shape.size(), 0), buf->data(),
                    tile, std::vector<std::int64_t>(shape.size(), 0), full_box(a.shape), es);
    buf->ready().set();
    bufs[p] = std::move(buf);
  }
  return detail::make_array(dtype, shape, false, sharding, layout, true, std::move(bufs));
}

// ---- DLPack ------------------------------------------------------------------------------

DLManagedTensor* to_dlpack(const Array& x) {
  const auto& a = detail::concrete(x);
  if (a.buffers.size() != 1 || !a.buffers.front())
    throw ValueError(cat("to_dlpack: the array (", aval_str(a.dtype, a.shape), ", ", a.sharding->str(), ") is on ",
                         a.buffers.size(), " devices; DLPack takes a single-device array (as JAX's): pass one shard, ",
                         "ts::device_put(x, device), or x.addressable_shards()[i].data()"));
  // One device: its buffer is the whole array in C order, no padding.
  TESSEL_CHECK_INTERNAL(numel(a.layout.tile_shape(a.shape)) == numel(a.shape), "to_dlpack: a padded single-device tile");
  const DLDataType type = to_dl(a.dtype);
  auto out = std::make_unique<Exported>();
  out->buffer = a.buffers.front();
  out->buffer->ready().wait();  // the consumer reads it at once; an error computing it is thrown here
  out->shape = a.shape;
  out->strides.assign(a.shape.size(), 1);
  for (int d = int(a.shape.size()) - 2; d >= 0; --d)
    out->strides[std::size_t(d)] = out->strides[std::size_t(d) + 1] * a.shape[std::size_t(d) + 1];
  DLTensor& t = out->tensor.dl_tensor;
  // The consumer must not write it: tessel's buffers are immutable (DLPack
  // 0.6 has no read-only flag to say so).
  t.data = const_cast<void*>(static_cast<const rt::Buffer&>(*out->buffer).data());
  t.device = {kDLCPU, 0};  // one host: every tessel device is CPU device 0 to DLPack
  t.ndim = int(a.shape.size());
  t.dtype = type;
  t.shape = out->shape.data();
  t.strides = out->strides.data();  // explicit, as JAX gives them: some consumers want them
  t.byte_offset = 0;
  out->tensor.manager_ctx = out.get();
  out->tensor.deleter = delete_exported;
  return &out.release()->tensor;
}

Array from_dlpack(DLManagedTensor* tensor, std::optional<Device> device) {
  // Errors leave the tensor with the caller (its deleter is not called), as
  // a consumer that does not take it.
  if (!tensor) throw ValueError("from_dlpack: the tensor is null");
  const DLTensor& t = tensor->dl_tensor;
  // The device type as the integer it is: a producer may send a code this
  // header's enum does not list (reading it as the enum would be undefined).
  std::int32_t device_type;
  static_assert(sizeof(device_type) == sizeof(t.device.device_type));
  std::memcpy(&device_type, &t.device.device_type, sizeof device_type);
  if (device_type != std::int32_t(kDLCPU))
    throw ValueError(cat("from_dlpack: the tensor is on ", device_type_name(int(device_type)), " device ",
                         t.device.device_id, "; tessel's devices are the host's memory and take kDLCPU tensors only"));
  const DType dtype = from_dl(t.dtype);
  if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
    throw ValueError(cat("from_dlpack: the tensor has ndim ", t.ndim, (t.ndim > 0 ? " and no shape" : "")));
  Shape shape(t.shape, t.shape + t.ndim);
  check_shape(shape, dtype, "from_dlpack");
  const std::size_t es = dtype_size(dtype), bytes = std::size_t(numel(shape)) * es;
  if (!t.data && bytes) throw ValueError(cat("from_dlpack: the tensor's data is null (", aval_str(dtype, shape), ")"));
  const Device dev = device ? *device : local_devices().at(0);  // the default device, as from_host
  check_local(dev, "from_dlpack");
  const bool committed = device.has_value();
  char* first = static_cast<char*>(t.data) + t.byte_offset;
  if (c_contiguous(shape, t.strides) && aligned_for(first, dtype)) {
    auto buf = rt::Buffer::external(dev.id(), bytes, first, [tensor] { release_tensor(tensor); });
    return single_device_array(dtype, shape, dev, committed, std::move(buf));
  }
  // Strided (a transposed or sliced view) or misaligned: a copy in C order,
  // after which the tensor is given back.
  detail::check_allocation(bytes, 1, cat("from_dlpack: a copy of the strided ", aval_str(dtype, shape)));
  auto buf = rt::Buffer::allocate(dev.id(), bytes);
  if (t.strides) {
    gather_strided(first, shape, t.strides, es, static_cast<char*>(buf->data()));
  } else if (bytes) {
    std::memcpy(buf->data(), first, bytes);
  }
  buf->ready().set();
  release_tensor(tensor);
  return single_device_array(dtype, shape, dev, committed, std::move(buf));
}

}  // namespace tessel
