// The files of a checkpoint (docs/checkpoints.md): chunk files with a CRC-32
// per MiB, Zarr v2 array metadata, and POSIX calls that fail as FileError
// naming the file. Nothing here knows about arrays or devices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tessel/core/dtype.hpp>
#include <tessel/core/shape.hpp>

namespace tessel::checkpoint::detail {

// Checksums cover a chunk file in pieces of this many bytes (the last may be
// shorter), so that a restore reading part of a chunk checks what it read.
inline constexpr std::size_t kPiece = std::size_t(1) << 20;

std::vector<std::uint32_t> piece_crcs(const void* data, std::size_t bytes);
std::uint32_t crc32_of(const void* data, std::size_t bytes);

// Writes `bytes` to a new file `path`; `flush`: and waits until it is on the disk.
void write_file(const std::string& path, const void* data, std::size_t bytes, bool flush = false);
// Flushes everything written to the filesystem holding `dir` (syncfs): one
// flush for all of a save's chunk files instead of one per file.
void sync_filesystem(const std::string& dir);
// The whole of a small file (metadata).
std::string read_text(const std::string& path);
// Makes `path` durable in its directory (fsync of the directory).
void sync_dir(const std::string& dir);

// An open chunk file for reading pieces of it.
class ChunkReader {
 public:
  // Opens `path`, which metadata says holds `bytes` bytes with `crcs`.
  ChunkReader(std::string path, std::size_t bytes, const std::vector<std::uint32_t>& crcs);
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;
  // Reads pieces [first, last] into out + first * kPiece and checks them;
  // returns the bytes read.
  std::size_t read_pieces(std::size_t first, std::size_t last, char* out) {
    return read_into(first, last, out + first * kPiece);
  }
  // Reads pieces [first, last] into dst (dst[0] is byte first * kPiece) and checks them.
  std::size_t read_into(std::size_t first, std::size_t last, char* dst);
  // Reads bytes [offset, offset + len) into out and checks every piece they
  // touch: the pieces inside the range straight into out, the (at most two)
  // at its ends through `edge` (kPiece bytes), which holds piece
  // `edge_piece` (if any: SIZE_MAX for none) across calls, so that ranges
  // meeting inside a piece read it once. Returns the bytes read.
  std::size_t read_range(std::size_t offset, std::size_t len, char* out, char* edge, std::size_t& edge_piece);
  // Reads the whole file into out and checks it.
  std::size_t read_all(char* out) { return bytes_ ? read_pieces(0, pieces() - 1, out) : 0; }
  std::size_t pieces() const { return (bytes_ + kPiece - 1) / kPiece; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::string path_;
  std::size_t bytes_;
  const std::vector<std::uint32_t>& crcs_;
  int fd_ = -1;
};

// Zarr v2's dtype string for a tessel dtype: NumPy's type string, as .npy
// files have it ("<f4", "|b1"; "<V2" for bfloat16 and "|V1" for the 8-bit
// floats, whose formats NumPy has no name for: .zattrs and the checkpoint's
// metadata name them).
std::string zarr_dtype(DType dtype);
// The .zarray document of a leaf.
std::string zarray_json(const Shape& shape, const Shape& chunks, DType dtype, const std::string& compression,
                        int zstd_level);
// A chunk's key: its grid indices joined by '.' ("0" for a 0-d array).
std::string chunk_key(const std::vector<std::int64_t>& grid_index);
// A directory name for leaf i with key path `path` (readable, unique by i).
std::string leaf_dir_name(std::size_t i, const std::string& path);

// zstd, one frame (with its content size, as numcodecs' Zstd writes it).
std::vector<char> zstd_compress(const void* data, std::size_t bytes, int level);
// Decompresses a frame that must hold exactly `bytes` bytes; FileError
// naming `path` otherwise.
void zstd_decompress(const char* src, std::size_t src_bytes, void* dst, std::size_t bytes, const std::string& path);

}  // namespace tessel::checkpoint::detail
