// ts::save / load (NumPy's .npy) and savez / savez_compressed / load_npz
// (.npz, through libzip). A sharded array is written from its shards'
// buffers, in the file's order, without gathering it; files are written
// under a temporary name and renamed over the target once synced, so that
// an interrupted save never leaves half a file under the name asked for.
#include <tessel/io.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>

#include <tessel/numpy.hpp>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/npy_format.hpp"
#include "dsl/src/posix_io.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

using detail::cat;
using detail::pread_upto;
using detail::pwrite_all;

namespace {

std::string errno_str(int e) { return std::strerror(e); }

// ---- Files -----------------------------------------------------------------

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // close(2)'s own error (a delayed write error on some file systems).
  int close() {
    const int r = ::close(fd_);
    fd_ = -1;
    return r;
  }

 private:
  int fd_;
};

void pread_all(int fd, void* dst, std::size_t n, std::uint64_t off, const std::string& file) {
  const std::size_t got = pread_upto(fd, dst, n, off, file);
  if (got != n)
    throw FileError(cat("the .npy file ", file, " is truncated: it ends at byte ", off + got, ", inside what its header "
                        "describes"));
}

// The mode a new file gets from open(2): 0666 less the umask (read from
// /proc: umask(2) would change it for every thread while it is read).
mode_t new_file_mode() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Umask:", 0) == 0) {
      const unsigned long mask = std::strtoul(line.c_str() + 6, nullptr, 8);
      return mode_t(0666 & ~mask);
    }
  return 0644;
}

// A file written under a temporary name next to `path` (so the rename stays
// on one file system) and renamed over `path` by commit(); removed unless
// committed.
class TempFile {
 public:
  TempFile(const std::string& path, const char* what) : path_(path), what_(what) {
    namespace fs = std::filesystem;
    const fs::path p(path);
    if (path.empty()) throw FileError(cat(what, ": the path is empty"));
    if (!p.has_filename()) throw FileError(cat(what, ": cannot write ", path, ": it names a directory"));
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::string name = ".";  // appended, not "." + string: GCC 12 warns falsely (-Wrestrict) on that
    name += p.filename().string();
    name += ".tmp-XXXXXX";
    std::string tmpl = (dir / name).string();
    const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
    if (fd < 0)
      throw FileError(cat(what, ": cannot write ", path, ": cannot create a file in ", dir.string(), ": ",
                          errno_str(errno)));
    fd_ = fd;
    tmp_ = tmpl;
    // The mode np.save's open() would give: the old file's, or a new file's.
    struct stat st;
    const mode_t mode = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? st.st_mode & 07777 : new_file_mode();
    ::fchmod(fd_, mode);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& tmp() const { return tmp_; }
  // Closes the descriptor, leaving the file (libzip writes it by name).
  void close_fd() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // fsync, then rename over the target, then fsync the directory (the rename's durability).
  void commit() {
    if (fd_ < 0) {
      fd_ = ::open(tmp_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) throw FileError(cat(what_, ": cannot write ", path_, ": cannot reopen ", tmp_, ": ", errno_str(errno)));
    }
    if (::fsync(fd_) != 0) throw FileError(cat(what_, ": cannot write ", path_, ": fsync: ", errno_str(errno)));
    const int r = ::close(fd_);
    fd_ = -1;
    if (r != 0) throw FileError(cat(what_, ": cannot write ", path_, ": close: ", errno_str(errno)));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw FileError(cat(what_, ": cannot write ", path_, ": renaming ", tmp_, " to it: ", errno_str(errno)));
    committed_ = true;
    const std::filesystem::path p(path_);
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);  // best effort: some file systems refuse a directory's fsync
      ::close(dfd);
    }
  }

 private:
  std::string path_, tmp_;
  const char* what_;
  int fd_ = -1;
  bool committed_ = false;
};

// ---- An array's .npy bytes, in file order, from its shards -------------------

// The bytes of x's .npy file in order: the header, then for every row of
// the array (all dimensions but the last) the segment of each tile along
// the last dimension, read from one replica of that tile in its buffer.
// Chunks point into the header or the buffers (no copies); segments that
// follow each other in a buffer are merged into one chunk.
class NpyChunks {
 public:
  NpyChunks(const Array& x, const std::string& path, const char* what) : x_(x) {
    const auto& a = detail::concrete(x_);
    if (!x_.is_fully_addressable())
      throw ValueError(cat(what, ": cannot write ", path, ": the array of shape ", shape_str(a.shape), " (",
                           a.sharding ? a.sharding->str() : a.layout.spec_str(),
                           ") spans devices of other processes (it is not fully addressable); gather it first "
                           "(ts::process_allgather) or save each process's addressable_shards()"));
    header_ = detail::npy::make_header(a.dtype, a.shape);
    es_ = dtype_size(a.dtype);
    total_ = header_.size() + std::uint64_t(numel(a.shape)) * es_;
    if (numel(a.shape) == 0) return;
    // A scalar is one row of one element.
    const bool scalar = a.shape.empty();
    shape_ = scalar ? Shape{1} : a.shape;
    tile_ = scalar ? Shape{1} : a.layout.tile_shape(a.shape);
    const int r = int(shape_.size());
    grid_.resize(std::size_t(r), 1);
    for (int d = 0; d < r && !scalar; ++d) grid_[d] = a.layout.num_tiles(d);
    tile_strides_ = row_major_strides(tile_);
    grid_strides_ = row_major_strides(grid_);
    base_.assign(std::size_t(numel(grid_)), nullptr);
    for (std::int64_t p = 0; p < a.layout.mesh->size(); ++p) {
      const auto& buf = a.buffers[std::size_t(p)];
      if (!buf) continue;
      std::int64_t flat = 0;
      if (!scalar) {
        const auto t = a.layout.tile_index(p);
        for (int d = 0; d < r; ++d) flat += t[d] * grid_strides_[d];
      }
      if (base_[flat]) continue;
      buf->ready().wait();
      base_[flat] = static_cast<const unsigned char*>(buf->data());
    }
    for (auto* b : base_)
      if (!b) throw InternalError(cat(what, ": a tile of a fully addressable array has no buffer"));
    row_.assign(std::size_t(r - 1), 0);
  }

  std::uint64_t size() const { return total_; }
  const std::string& header() const { return header_; }

  void rewind() {
    header_done_ = false;
    std::fill(row_.begin(), row_.end(), 0);
    t_last_ = 0;
    done_rows_ = false;
    pending_ = {};
  }

  struct Chunk {
    const unsigned char* data = nullptr;
    std::size_t size = 0;
  };
  // The next chunk; size 0 at the end.
  Chunk next() {
    if (!header_done_) {
      header_done_ = true;
      return {reinterpret_cast<const unsigned char*>(header_.data()), header_.size()};
    }
    while (!base_.empty() && !finished()) {
      const Chunk seg = segment();
      advance();
      if (seg.size == 0) continue;
      if (pending_.size && seg.data == pending_.data + pending_.size) {
        pending_.size += seg.size;
        continue;
      }
      const Chunk out = pending_;
      pending_ = seg;
      if (out.size) return out;
    }
    const Chunk out = pending_;
    pending_ = {};
    return out;
  }

 private:
  bool finished() const { return done_rows_; }
  Chunk segment() const {
    const int r = int(shape_.size());
    std::int64_t flat = t_last_ * grid_strides_[r - 1], off = 0;
    for (int d = 0; d < r - 1; ++d) {
      const std::int64_t t = row_[d] / tile_[d];
      flat += t * grid_strides_[d];
      off += (row_[d] - t * tile_[d]) * tile_strides_[d];
    }
    const std::int64_t c = tile_[r - 1], lo = t_last_ * c, hi = std::min(lo + c, shape_[r - 1]);
    if (hi <= lo) return {};
    return {base_[flat] + std::size_t(off) * es_, std::size_t(hi - lo) * es_};
  }
  void advance() {
    const int r = int(shape_.size());
    if (++t_last_ < grid_[r - 1]) return;
    t_last_ = 0;
    for (int d = r - 2; d >= 0; --d) {
      if (++row_[d] < shape_[d]) return;
      row_[d] = 0;
    }
    done_rows_ = true;
  }

  Array x_;  // keeps the buffers alive
  std::string header_;
  std::size_t es_ = 0;
  std::uint64_t total_ = 0;
  Shape shape_, tile_, grid_;
  std::vector<std::int64_t> tile_strides_, grid_strides_;
  std::vector<const unsigned char*> base_;  // per tile (row-major over grid_): one replica's data
  std::vector<std::int64_t> row_;           // the row (index over all dimensions but the last)
  std::int64_t t_last_ = 0;                 // the tile along the last dimension
  bool header_done_ = false, done_rows_ = false;
  Chunk pending_;
};

// ---- Reading ------------------------------------------------------------------

struct Source {
  std::string file;      // for messages
  std::uint64_t size;    // bytes
  detail::npy::ReadExact read;  // sequential
};

// An uncommitted array on the default device, read from a .npy stream
// straight into its buffer.
Array read_npy(const Source& src, const LoadOptions& options, bool only_unnamed) {
  namespace npy = detail::npy;
  const npy::Header h = npy::read_header(src.read, src.size, src.file);
  const npy::DataType t = npy::dtype_of_descr(h.descr, options.dtype, only_unnamed, src.file);
  const std::size_t es = dtype_size(t.dtype);
  const std::uint64_t nbytes = npy::data_bytes(h.shape, es, src.file);
  if (nbytes > src.size - h.data_offset)
    throw FileError(cat("the .npy file ", src.file, " is truncated: its header says ", aval_str(t.dtype, h.shape),
                        " (NumPy type '", h.descr, "', shape ", shape_str(h.shape), "), ", nbytes,
                        " bytes of data after its ", h.data_offset, " bytes of header, but the file has ",
                        src.size - h.data_offset, " bytes after the header"));
  check_shape(h.shape, t.dtype, "load");
  const bool transpose = h.fortran_order && h.shape.size() > 1;
  detail::check_allocation(std::size_t(nbytes) * (transpose ? 2 : 1), 1, cat("loading ", src.file));
  const Device dev = local_devices().at(0);  // the default device, as from_host
  auto buf = rt::Buffer::allocate(dev.id(), std::size_t(nbytes));
  if (transpose) {
    std::vector<unsigned char> file_order(static_cast<std::size_t>(nbytes));
    src.read(file_order.data(), file_order.size());
    detail::npy::fortran_to_c(file_order.data(), buf->data(), h.shape, es);
  } else if (nbytes) {
    src.read(buf->data(), std::size_t(nbytes));
  }
  if (t.swap) npy::byteswap(buf->data(), numel(h.shape), t.dtype);
  buf->ready().set();
  return detail::make_array(t.dtype, h.shape, false, SingleDeviceSharding(dev),
                            replicated(detail::flat_mesh({dev}), int(h.shape.size())), false, {buf});
}

// Runs f, turning the standard library's exceptions into tessel's (a
// caller catching ts::Error sees every failure of a file).
template <class F>
auto guarded(const char* what, const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const InternalError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw ResourceExhaustedError(cat("RESOURCE_EXHAUSTED: ", what, " ", path, ": out of host memory"));
  } catch (const std::filesystem::filesystem_error& e) {
    throw FileError(cat(what, " ", path, ": ", e.what()));
  } catch (const std::exception& e) {
    throw FileError(cat(what, " ", path, ": ", e.what()));
  }
}

// ---- .npz -------------------------------------------------------------------

std::string zip_message(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

// A libzip source streaming one member's .npy bytes from its NpyChunks.
struct MemberSource {
  NpyChunks* chunks;
  NpyChunks::Chunk cur;
  zip_error_t error;
};

zip_int64_t member_callback(void* state, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* s = static_cast<MemberSource*>(state);
  try {
    switch (cmd) {
      case ZIP_SOURCE_OPEN:
        s->chunks->rewind();
        s->cur = {};
        return 0;
      case ZIP_SOURCE_READ: {
        auto* out = static_cast<unsigned char*>(data);
        zip_uint64_t n = 0;
        while (n < len) {
          if (s->cur.size == 0) {
            s->cur = s->chunks->next();
            if (s->cur.size == 0) break;
          }
          const std::size_t k = std::size_t(std::min<zip_uint64_t>(len - n, s->cur.size));
          std::memcpy(out + n, s->cur.data, k);
          s->cur.data += k;
          s->cur.size -= k;
          n += k;
        }
        return zip_int64_t(n);
      }
      case ZIP_SOURCE_CLOSE:
      case ZIP_SOURCE_FREE: return 0;
      case ZIP_SOURCE_STAT: {
        auto* st = static_cast<zip_stat_t*>(data);
        zip_stat_init(st);
        st->size = s->chunks->size();
        st->mtime = std::time(nullptr);
        st->valid |= ZIP_STAT_SIZE | ZIP_STAT_MTIME;
        return sizeof(zip_stat_t);
      }
      case ZIP_SOURCE_ERROR: return zip_error_to_data(&s->error, data, len);
      case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                              ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, -1);
      default: zip_error_set(&s->error, ZIP_ER_OPNOTSUPP, 0); return -1;
    }
  } catch (...) {
    zip_error_set(&s->error, ZIP_ER_MEMORY, 0);
    return -1;
  }
}

void write_npz(const std::string& path, const std::map<std::string, Array>& arrays, bool compress, const char* what) {
  std::vector<std::unique_ptr<NpyChunks>> chunks;
  for (auto& [name, x] : arrays) {
    if (name.find('\0') != std::string::npos)
      throw ValueError(cat(what, ": cannot write ", path, ": an entry's name holds a NUL character"));
    chunks.push_back(std::make_unique<NpyChunks>(x, cat(path, " (entry '", name, "')"), what));
  }
  TempFile tmp(path, what);
  if (arrays.empty()) {
    // libzip writes no file for an empty archive; NumPy writes the 22-byte end record alone.
    const unsigned char eocd[22] = {'P', 'K', 5, 6};
    pwrite_all(tmp.fd(), eocd, sizeof eocd, 0, tmp.tmp());
    tmp.commit();
    return;
  }
  tmp.close_fd();
  int err = 0;
  zip_t* za = zip_open(tmp.tmp().c_str(), ZIP_TRUNCATE, &err);
  if (!za) throw FileError(cat(what, ": cannot write ", path, ": ", zip_message(err)));
  std::vector<std::unique_ptr<MemberSource>> sources;
  auto fail = [&](const std::string& msg) {
    zip_discard(za);
    for (auto& s : sources) zip_error_fini(&s->error);
    throw FileError(cat(what, ": cannot write ", path, ": ", msg));
  };
  std::size_t k = 0;
  for (auto& [name, x] : arrays) {
    auto& s = sources.emplace_back(std::make_unique<MemberSource>());
    s->chunks = chunks[k++].get();
    zip_error_init(&s->error);
    zip_source_t* zs = zip_source_function(za, member_callback, s.get());
    if (!zs) fail(zip_strerror(za));
    const std::string member = name + ".npy";
    const zip_int64_t idx = zip_file_add(za, member.c_str(), zs, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(zs);
      fail(cat("member '", member, "': ", zip_strerror(za)));
    }
    if (zip_set_file_compression(za, zip_uint64_t(idx), compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) != 0)
      fail(cat("member '", member, "': ", zip_strerror(za)));
  }
  if (zip_close(za) != 0) fail(zip_strerror(za));
  for (auto& s : sources) zip_error_fini(&s->error);
  tmp.commit();
}

}  // namespace

// ---- The public functions -----------------------------------------------------

void save(const std::string& path, const Array& x) {
  guarded("save", path, [&] {
    NpyChunks chunks(x, path, "save");
    TempFile tmp(path, "save");
    // Large chunks go to the file straight from the shard's buffer; small
    // ones (a shard's short rows) are gathered first, so that an array split
    // along its last dimension is not written an element or so at a time.
    constexpr std::size_t kStage = std::size_t(1) << 20;
    std::vector<unsigned char> stage;
    std::uint64_t off = 0, stage_off = 0;
    auto flush = [&] {
      pwrite_all(tmp.fd(), stage.data(), stage.size(), stage_off, path);
      stage_off += stage.size();
      stage.clear();
    };
    for (auto c = chunks.next(); c.size; c = chunks.next()) {
      if (c.size >= kStage / 4) {
        flush();
        pwrite_all(tmp.fd(), c.data, c.size, off, path);
        stage_off = off + c.size;
      } else {
        if (stage.size() + c.size > kStage) flush();
        if (stage.capacity() < kStage) stage.reserve(kStage);
        stage.insert(stage.end(), c.data, c.data + c.size);
      }
      off += c.size;
    }
    flush();
    if (off != chunks.size())
      throw InternalError(cat("save: wrote ", off, " bytes of ", path, ", expected ", chunks.size()));
    tmp.commit();
  });
}

Array load(const std::string& path, const LoadOptions& options) {
  return guarded("load", path, [&] {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) throw FileError(cat("load: cannot open ", path, ": ", errno_str(errno)));
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) throw FileError(cat("load: cannot read ", path, ": ", errno_str(errno)));
    if (S_ISDIR(st.st_mode)) throw FileError(cat("load: cannot read ", path, ": it is a directory"));
    std::uint64_t off = 0;
    Source src{path, std::uint64_t(st.st_size), [&](void* dst, std::size_t n) {
                 pread_all(fd.get(), dst, n, off, path);
                 off += n;
               }};
    return read_npy(src, options, false);
  });
}

void savez(const std::string& path, const std::map<std::string, Array>& arrays) {
  guarded("savez", path, [&] { write_npz(path, arrays, false, "savez"); });
}

void savez_compressed(const std::string& path, const std::map<std::string, Array>& arrays) {
  guarded("savez_compressed", path, [&] { write_npz(path, arrays, true, "savez_compressed"); });
}

std::map<std::string, Array> load_npz(const std::string& path, const LoadOptions& options) {
  return guarded("load_npz", path, [&] {
    {
      struct stat st;
      if (::stat(path.c_str(), &st) != 0) throw FileError(cat("load_npz: cannot open ", path, ": ", errno_str(errno)));
      if (S_ISDIR(st.st_mode)) throw FileError(cat("load_npz: cannot read ", path, ": it is a directory"));
    }
    int err = 0;
    zip_t* za = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &err);
    if (!za) throw FileError(cat("load_npz: cannot read ", path, ": ", zip_message(err)));
    struct Closer {
      zip_t* z;
      ~Closer() { zip_discard(z); }
    } closer{za};
    std::map<std::string, Array> out;
    const zip_int64_t n = zip_get_num_entries(za, 0);
    for (zip_int64_t i = 0; i < n; ++i) {
      zip_stat_t st;
      if (zip_stat_index(za, zip_uint64_t(i), 0, &st) != 0)
        throw FileError(cat("load_npz: cannot read ", path, ": member ", i, ": ", zip_strerror(za)));
      if (!(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE))
        throw FileError(cat("load_npz: cannot read ", path, ": member ", i, " has no name or size"));
      const std::string member = st.name;
      // np.load's NpzFile: "<name>.npy" is entry "<name>"; other members are not arrays.
      if (member.size() < 4 || member.compare(member.size() - 4, 4, ".npy") != 0) continue;
      const std::string file = cat(path, " (member '", member, "')");
      zip_file_t* zf = zip_fopen_index(za, zip_uint64_t(i), 0);
      if (!zf) throw FileError(cat("load_npz: cannot read ", file, ": ", zip_strerror(za)));
      struct FileCloser {
        zip_file_t* f;
        ~FileCloser() {
          if (f) zip_fclose(f);
        }
      } fcloser{zf};
      auto read = [&](void* dst, std::size_t len) {
        auto* p = static_cast<unsigned char*>(dst);
        while (len > 0) {
          const zip_int64_t r = zip_fread(zf, p, std::min<std::size_t>(len, std::size_t(1) << 30));
          if (r < 0) throw FileError(cat("load_npz: cannot read ", file, ": ", zip_file_strerror(zf)));
          if (r == 0) throw FileError(cat("the .npy file ", file, " is truncated: it ends inside what its header describes"));
          p += r;
          len -= std::size_t(r);
        }
      };
      Array a = read_npy(Source{file, st.size, read}, options, true);
      // libzip checks a member's CRC when its end is read: read to the end.
      unsigned char rest[4096];
      for (;;) {
        const zip_int64_t r = zip_fread(zf, rest, sizeof rest);
        if (r < 0) throw FileError(cat("load_npz: cannot read ", file, ": ", zip_file_strerror(zf)));
        if (r == 0) break;
      }
      const int rc = zip_fclose(zf);
      fcloser.f = nullptr;
      if (rc != 0) throw FileError(cat("load_npz: cannot read ", file, ": ", zip_message(rc)));
      out.insert_or_assign(member.substr(0, member.size() - 4), std::move(a));
    }
    return out;
  });
}

}  // namespace tessel

namespace tessel {

Array fromfile(const std::string& path, DType dtype, std::int64_t count, const std::string& sep, std::int64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(detail::cat("fromfile: cannot open ", path, ": ", std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw FileError(detail::cat("fromfile: cannot read ", path));
  if (offset < 0 || std::size_t(offset) > bytes.size())
    throw ValueError(detail::cat("fromfile: offset ", offset, " is outside ", path, " (", bytes.size(), " bytes)"));
  if (sep.empty()) return frombuffer(bytes, dtype, count, offset);
  return fromstring(bytes.substr(std::size_t(offset)), sep, dtype, count);
}

}  // namespace tessel
