// Whole reads and writes at an offset, retried on EINTR and short counts,
// for the file formats (io_npy.cpp, checkpoint_files.cpp): an error is a
// FileError naming the file.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <tessel/io.hpp>

#include "tessel/core/errors.hpp"

namespace tessel::detail {

inline void pwrite_all(int fd, const void* src, std::size_t n, std::uint64_t off, const std::string& file) {
  const auto* p = static_cast<const unsigned char*>(src);
  while (n > 0) {
    const ssize_t r = ::pwrite(fd, p, std::min<std::size_t>(n, std::size_t(1) << 30), off_t(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw FileError(cat("cannot write ", file, ": ", std::strerror(errno)));
    p += r;
    n -= std::size_t(r);
    off += std::uint64_t(r);
  }
}

// Reads n bytes at off; returns fewer only where the file ends.
inline std::size_t pread_upto(int fd, void* dst, std::size_t n, std::uint64_t off, const std::string& file) {
  auto* p = static_cast<unsigned char*>(dst);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, p + done, std::min<std::size_t>(n - done, std::size_t(1) << 30), off_t(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw FileError(cat("cannot read ", file, ": ", std::strerror(errno)));
    if (r == 0) break;
    done += std::size_t(r);
  }
  return done;
}

}  // namespace tessel::detail
