// NumPy's .npy format (numpy/lib/format.py): the header (magic, version,
// length, and a Python dict literal naming the type string, the order and
// the shape) and NumPy's type strings for tessel's dtypes. Pure functions
// over bytes, apart from the files themselves (io_npy.cpp), so that every
// check of a damaged header is made here, once, for .npy and .npz alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <tessel/core/dtype.hpp>
#include <tessel/core/shape.hpp>

namespace tessel::detail::npy {

inline constexpr std::string_view kMagic{"\x93NUMPY", 6};
// NumPy's writer pads the header so that the data starts at a multiple of 64.
inline constexpr std::size_t kAlign = 64;

struct Header {
  int major = 1, minor = 0;
  std::string descr;  // the type string as the file gives it ('<f4', '|V1')
  bool fortran_order = false;
  Shape shape;
  std::uint64_t data_offset = 0;  // magic, version, length and dict: where the data starts
};

// Reads exactly n bytes into dst or throws FileError (naming the file).
using ReadExact = std::function<void(void* dst, std::size_t n)>;

// Reads and checks the header of a file of `file_size` bytes (`file` names
// it in messages: a path, or a path and an .npz member). FileError for
// anything damaged: bad magic, an unknown version, a header longer than the
// file, a dict that is not NumPy's (a missing or extra key, a shape that is
// not a tuple of non-negative integers, an order that is not True/False).
Header read_header(const ReadExact& read, std::uint64_t file_size, const std::string& file);

// The dict literal alone ("{'descr': '<f4', ...}" and its padding).
Header parse_dict(std::string_view text, const std::string& file);

// The complete header NumPy writes for a C-order array of `dtype` and
// `shape`: version 1.0, or 2.0 when the dict needs more than 65535 bytes;
// its length a multiple of kAlign.
std::string make_header(DType dtype, const Shape& shape);

// NumPy's type string for a dtype ('<f4'; bfloat16 '<V2' and the 8-bit
// floats '|V1', as np.save writes ml_dtypes' types).
std::string descr_of(DType dtype);

struct DataType {
  DType dtype;
  bool swap = false;  // the file's data is big endian: swap each element's (each component's) bytes
};
// The dtype a file's type string gives, with `wanted` (LoadOptions::dtype).
// '<V2' is bfloat16 unless `wanted` is another 2-byte dtype; '|V1' needs
// `wanted` (an 8-bit float's format is not in the file). When the string
// names a dtype, a different `wanted` is a TypeError unless `only_unnamed`
// (an .npz: `wanted` is for its members whose type the file does not say).
// TypeError for a type tessel lacks (objects, strings, structured types,
// datetimes, long doubles), naming the string and the file.
DataType dtype_of_descr(const std::string& descr, std::optional<DType> wanted, bool only_unnamed,
                        const std::string& file);

// numel(shape) * itemsize, or FileError (naming the file) when it overflows.
std::uint64_t data_bytes(const Shape& shape, std::size_t itemsize, const std::string& file);

// Reverses the bytes of each element (each component of a complex) in place.
void byteswap(void* data, std::int64_t n, DType dtype);

// The C-order array from the data of a Fortran-order one: `src` holds the
// array of `shape` transposed (its reversed shape, row-major).
void fortran_to_c(const void* src, void* dst, const Shape& shape, std::size_t itemsize);

}  // namespace tessel::detail::npy
