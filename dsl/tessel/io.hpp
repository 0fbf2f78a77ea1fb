// Arrays in files and in other libraries' memory (API.md "Files and
// checkpoints"): NumPy's .npy and .npz (jnp.save/load, np.savez), DLPack,
// arrays over a user's buffer, and JAX's make_array_from_single_device_arrays.
// Sharded checkpoints of pytrees are tessel/checkpoint.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/device.hpp>
#include <tessel/sharding.hpp>

struct DLManagedTensor;  // dlpack/dlpack.h

namespace tessel {

// A file that cannot be opened, read or written, or that is damaged or not
// what it claims (a truncated .npy, a zip entry that fails its CRC, a
// checkpoint chunk whose checksum differs). The message names the file.
class FileError : public Error {
 public:
  using Error::Error;
};

// ---- NumPy's files -------------------------------------------------------

// jnp.save: x as a .npy file (format 1.0, or 2.0 when the header needs it;
// C order, little endian). bfloat16 is written as NumPy writes ml_dtypes'
// bfloat16 ('<V2', which jnp.load reads back as bfloat16); the 8-bit floats
// as '|V1'. A sharded array is written from its shards, each shard's rows
// at their place in the file, without gathering it on one device. The
// array must be fully addressable (as with JAX).
void save(const std::string& path, const Array& x);

struct LoadOptions {
  // The dtype of a file whose NumPy type does not say it: '|V1' (one of the
  // 8-bit floats; required) or '<V2' (bfloat16 by default, as jnp.load).
  std::optional<DType> dtype;
};
// jnp.load of a .npy file: versions 1.0-3.0, C or Fortran order, either byte
// order, every dtype tessel has. An uncommitted array on the default device.
Array load(const std::string& path, const LoadOptions& options = {});

// np.savez / np.savez_compressed: one "<name>.npy" member per entry (stored,
// or deflated), through libzip.
void savez(const std::string& path, const std::map<std::string, Array>& arrays);
void savez_compressed(const std::string& path, const std::map<std::string, Array>& arrays);
// np.load of a .npz: member "<name>.npy" as entry "<name>".
std::map<std::string, Array> load_npz(const std::string& path, const LoadOptions& options = {});

// np.fromfile: the file's bytes from `offset` as `count` elements (all: -1)
// of `dtype` (sep empty), or as text numbers separated by `sep` (as
// fromstring). JAX's jnp.fromfile refuses to run (it would be impure under
// jit); tessel's runs eagerly, like frombuffer.
Array fromfile(const std::string& path, DType dtype = DType::float32, std::int64_t count = -1,
               const std::string& sep = "", std::int64_t offset = 0);

// ---- Arrays over memory that is not tessel's -------------------------------

// An array over `data` (shape, dtype, C order, 64-byte aligned or not) on
// one device, without a copy: the array reads the caller's memory, which
// must not change while any array made from it lives. `deleter` (if any)
// runs when the last of them is gone. LibTorch's from_blob. Committed to
// `device`. Kernels assume each element at its type's alignment (not 64
// bytes'): `data` that is not (a float32 at an odd address) is copied into
// tessel's memory instead, and `deleter` runs at once. The deleter may run
// on a device's thread; on an error it is not called (the memory stays the
// caller's).
Array from_buffer(void* data, const Shape& shape, DType dtype, const Device& device,
                  std::function<void(void*)> deleter = {});
template <class T>
Array from_buffer(std::span<T> data, const Shape& shape, const Device& device,
                  std::function<void(void*)> deleter = {}) {
  if (std::int64_t(data.size()) != numel(shape))
    throw ShapeError("from_buffer: the span holds " + std::to_string(data.size()) + " elements but the shape " +
                     shape_str(shape) + " needs " + std::to_string(numel(shape)));
  return from_buffer(const_cast<void*>(static_cast<const void*>(data.data())), shape,
                     dtype_of_v<std::remove_const_t<T>>, device, std::move(deleter));
}

// jax.make_array_from_single_device_arrays: the global array of `shape`
// laid out by `sharding` from one single-device array per addressable
// device, each the shard that device holds (in the order of the sharding's
// addressable devices, or any order: each is placed by its device). No copy
// where a shard's layout is the global array's tile.
Array make_array_from_single_device_arrays(const Shape& shape, const Sharding& sharding,
                                           const std::vector<Array>& arrays);

// DLPack (dlpack/dlpack.h, version 0.6 or later; kDLCPU): to_dlpack gives a
// tensor over a single-device array's buffer (no copy; its deleter releases
// the buffer), which its consumer must not write; an array on several
// devices, sharded or replicated, is a ValueError (JAX's rule: export a
// shard). from_dlpack takes a CPU tensor without a copy when it is compact
// in C order and its elements are at their type's alignment (else it copies
// honouring strides and byte_offset, and calls the deleter at once) and
// calls the tensor's deleter when the last array over it is gone (on
// whichever thread drops it, a device's perhaps). Uncommitted
// on the default device unless `device` is given. Type codes: DLPack 1.1's,
// bool as kDLBool (6), float8_e4m3fn and float8_e5m2 as codes 10 and 12; a
// tensor on another device type is a ValueError, a type tessel lacks (or
// lanes != 1) a TypeError; on an error the tensor stays the caller's.
DLManagedTensor* to_dlpack(const Array& x);
Array from_dlpack(DLManagedTensor* tensor, std::optional<Device> device = std::nullopt);

}  // namespace tessel
