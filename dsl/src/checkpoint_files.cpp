// The files of a checkpoint: see checkpoint_files.hpp.
#include "dsl/src/checkpoint_files.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <nlohmann/json.hpp>

#include <tessel/io.hpp>

#include "dsl/src/npy_format.hpp"
#include "dsl/src/posix_io.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::checkpoint::detail {

using tessel::detail::cat;

namespace {
std::string sys_error(const std::string& what, const std::string& path) {
  return cat("checkpoint: cannot ", what, " ", path, ": ", std::strerror(errno));
}
}  // namespace

std::uint32_t crc32_of(const void* data, std::size_t bytes) {
  return std::uint32_t(crc32_z(crc32_z(0, nullptr, 0), static_cast<const Bytef*>(data), bytes));
}

std::vector<std::uint32_t> piece_crcs(const void* data, std::size_t bytes) {
  std::vector<std::uint32_t> out;
  const char* p = static_cast<const char*>(data);
  for (std::size_t off = 0; off < bytes; off += kPiece) out.push_back(crc32_of(p + off, std::min(kPiece, bytes - off)));
  return out;
}

void write_file(const std::string& path, const void* data, std::size_t bytes, bool flush) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw FileError(sys_error("create", path));
  try {
    tessel::detail::pwrite_all(fd, data, bytes, 0, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (flush && ::fdatasync(fd) != 0) {
    const std::string msg = sys_error("flush", path);
    ::close(fd);
    throw FileError(msg);
  }
  if (::close(fd) != 0) throw FileError(sys_error("close", path));
}

std::string read_text(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FileError(sys_error("open", path));
  std::string s;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string msg = sys_error("read", path);
      ::close(fd);
      throw FileError(msg);
    }
    if (n == 0) break;
    s.append(buf, std::size_t(n));
  }
  ::close(fd);
  return s;
}

namespace {
// fsync (or syncfs) of a directory's descriptor.
void flush_dir(const std::string& dir, bool filesystem) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw FileError(sys_error("open the directory", dir));
  const int rc = filesystem ? ::syncfs(fd) : ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw FileError(sys_error(filesystem ? "flush the filesystem of" : "flush the directory", dir));
}
}  // namespace

void sync_filesystem(const std::string& dir) { flush_dir(dir, true); }
void sync_dir(const std::string& dir) { flush_dir(dir, false); }

ChunkReader::ChunkReader(std::string path, std::size_t bytes, const std::vector<std::uint32_t>& crcs)
    : path_(std::move(path)), bytes_(bytes), crcs_(crcs) {
  if (crcs_.size() != pieces())
    throw FileError(cat("checkpoint: the metadata of ", path_, " lists ", crcs_.size(), " checksums for ", bytes_,
                        " bytes (", pieces(), " pieces of ", kPiece, "): the metadata is damaged"));
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw FileError(sys_error("open the chunk", path_));
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    const std::string msg = sys_error("stat", path_);
    ::close(fd_);
    throw FileError(msg);
  }
  if (std::size_t(st.st_size) != bytes_) {
    ::close(fd_);
    throw FileError(cat("checkpoint: the chunk ", path_, " has ", st.st_size, " bytes but the checkpoint's metadata says ",
                        bytes_, (std::size_t(st.st_size) < bytes_ ? " (truncated)" : " (it grew)")));
  }
}

ChunkReader::~ChunkReader() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t ChunkReader::read_into(std::size_t first, std::size_t last, char* dst) {
  const std::size_t begin = first * kPiece, end = std::min(bytes_, (last + 1) * kPiece);
  const std::size_t n = tessel::detail::pread_upto(fd_, dst, end - begin, begin, path_);
  if (n != end - begin)
    throw FileError(cat("checkpoint: the chunk ", path_, " ended at byte ", begin + n, " of ", bytes_));
  for (std::size_t i = first; i <= last; ++i) {
    const std::size_t off = i * kPiece, len = std::min(kPiece, bytes_ - off);
    const std::uint32_t got = crc32_of(dst + (off - begin), len);
    if (got != crcs_[i])
      throw FileError(cat("checkpoint: the chunk ", path_, " is damaged: bytes ", off, "..", off + len,
                          " have CRC-32 ", got, " but the checkpoint's metadata says ", crcs_[i]));
  }
  return end - begin;
}

std::size_t ChunkReader::read_range(std::size_t offset, std::size_t len, char* out, char* edge,
                                    std::size_t& edge_piece) {
  if (len == 0) return 0;
  const std::size_t end = offset + len, first = offset / kPiece, last = (end - 1) / kPiece;
  auto piece_end = [&](std::size_t p) { return std::min(bytes_, (p + 1) * kPiece); };
  // Pieces wholly inside [offset, end).
  const std::size_t lo = offset % kPiece == 0 ? first : first + 1;
  const std::size_t hi_excl = piece_end(last) == end ? last + 1 : last;
  std::size_t n = 0;
  if (lo < hi_excl) n += read_into(lo, hi_excl - 1, out + (lo * kPiece - offset));
  // The end pieces that are not wholly inside, each once.
  std::vector<std::size_t> edges;
  if (first < lo) edges.push_back(first);
  if (last >= hi_excl && (edges.empty() || last != first)) edges.push_back(last);
  for (std::size_t p : edges) {
    if (p != edge_piece) n += read_into(p, p, edge);
    edge_piece = p;
    const std::size_t a = std::max(offset, p * kPiece), b = std::min(end, piece_end(p));
    std::memcpy(out + (a - offset), edge + (a - p * kPiece), b - a);
  }
  return n;
}

std::string zarr_dtype(DType t) { return tessel::detail::npy::descr_of(t); }  // Zarr v2 takes NumPy's type strings

std::string zarray_json(const Shape& shape, const Shape& chunks, DType dtype, const std::string& compression,
                        int zstd_level) {
  nlohmann::ordered_json j;
  j["zarr_format"] = 2;
  j["shape"] = shape;
  j["chunks"] = chunks;
  j["dtype"] = zarr_dtype(dtype);
  if (compression == "zstd") j["compressor"] = {{"id", "zstd"}, {"level", zstd_level}};
  else j["compressor"] = nullptr;
  j["fill_value"] = nullptr;
  j["order"] = "C";
  j["filters"] = nullptr;
  j["dimension_separator"] = ".";
  return j.dump(4);
}

std::string chunk_key(const std::vector<std::int64_t>& g) {
  if (g.empty()) return "0";
  std::string s;
  for (std::size_t d = 0; d < g.size(); ++d) {
    if (d) s += '.';
    s += std::to_string(g[d]);
  }
  return s;
}

std::string leaf_dir_name(std::size_t i, const std::string& path) {
  // "['params']['w']" -> "3.params.w": the index keeps names unique.
  std::string s = std::to_string(i);
  bool sep = true;
  for (char c : path) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!keep) {
      sep = true;
      continue;
    }
    if (sep) s += '.';
    sep = false;
    s += c;
    if (s.size() > 96) break;
  }
  return s;
}

std::vector<char> zstd_compress(const void* data, std::size_t bytes, int level) {
  std::vector<char> out(ZSTD_compressBound(bytes));
  const std::size_t n = ZSTD_compress(out.data(), out.size(), data, bytes, level);
  if (ZSTD_isError(n)) throw Error(cat("checkpoint: zstd failed: ", ZSTD_getErrorName(n)));
  out.resize(n);
  return out;
}

void zstd_decompress(const char* src, std::size_t src_bytes, void* dst, std::size_t bytes, const std::string& path) {
  const unsigned long long content = ZSTD_getFrameContentSize(src, src_bytes);
  if (content != bytes)
    throw FileError(cat("checkpoint: the chunk ", path, " is not a zstd frame of ", bytes, " bytes (",
                        content == ZSTD_CONTENTSIZE_ERROR ? std::string("not zstd") : cat("it says ", content), ")"));
  const std::size_t n = ZSTD_decompress(dst, bytes, src, src_bytes);
  if (ZSTD_isError(n) || n != bytes)
    throw FileError(cat("checkpoint: the chunk ", path, " does not decompress: ",
                        ZSTD_isError(n) ? ZSTD_getErrorName(n) : "wrong size"));
}

}  // namespace tessel::checkpoint::detail
