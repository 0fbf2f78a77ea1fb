// Helpers of the file and interop tests (tests/dsl/io_*_test.cpp,
// checkpoint_test.cpp): a scratch directory, an array's bytes, random bits.
#pragma once

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <tessel/tessel.hpp>

namespace tessel::testing {

// A scratch directory of this process (named by `prefix` and the pid),
// removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix)
      : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline doctest::Contains has(const std::string& s) { return doctest::Contains(s.c_str()); }

// The elements' bytes, row-major, in the array's own dtype.
inline std::vector<unsigned char> bytes_of(const Array& x) {
  std::vector<unsigned char> b(std::size_t(numel(x.shape())) * dtype_size(x.dtype()));
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto v = x.to_vector<T>();
    if constexpr (std::is_same_v<T, bool>) {
      for (std::size_t i = 0; i < v.size(); ++i) b[i] = v[i];  // std::vector<bool> packs its bits
    } else {
      if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    }
  });
  return b;
}

// Random bits for every element (NaN payloads included); bool holds 0 or 1.
inline std::vector<unsigned char> random_bytes(std::mt19937& rng, DType t, const Shape& s) {
  std::vector<unsigned char> b(std::size_t(numel(s)) * dtype_size(t));
  for (auto& c : b) c = (unsigned char)(t == DType::bool_ ? rng() & 1 : rng());
  return b;
}

// An array of random bits on the default device.
inline Array random_bits(std::mt19937& rng, DType t, const Shape& s) {
  auto b = random_bytes(rng, t, s);
  b.push_back(0);  // data() of an empty vector may be null
  return detail::from_host(t, s, b.data());
}

}  // namespace tessel::testing
