// Exact cache keys (a compile cache must never confuse two programs).
//
// A Key is a byte string written field by field: numbers as their bytes,
// strings and sequences length-prefixed, so two keys are equal exactly when
// every field written is equal, bit for bit (0.1234567 and 0.1234568 differ,
// -0.0 and 0.0 differ, "a|b" never collides with "a" then "b"). Caches store
// the whole Key and compare it in full; the hash only picks the bucket.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tessel {

class Key {
 public:
  // A plain value (number, enum, bool): its bytes.
  template <class T>
  Key& pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    if constexpr (std::is_same_v<T, long double>) {
      // Its value bytes only (x87: 10 of 16; the rest is padding).
      static_assert(std::numeric_limits<long double>::digits == 64 || sizeof(long double) == sizeof(double));
      constexpr std::size_t n = std::numeric_limits<long double>::digits == 64 ? 10 : sizeof(double);
      bytes_.append(reinterpret_cast<const char*>(&v), n);
    } else {
      // Every byte is part of the value (no padding).
      static_assert(std::has_unique_object_representations_v<T> || std::is_floating_point_v<T>,
                    "Key::pod of a type with padding");
      bytes_.append(reinterpret_cast<const char*>(&v), sizeof(T));
    }
    return *this;
  }
  Key& tag(char c) {
    bytes_.push_back(c);
    return *this;
  }
  Key& str(std::string_view s) {
    pod(std::uint64_t(s.size()));
    bytes_.append(s.data(), s.size());
    return *this;
  }
  template <class T>
  Key& seq(const std::vector<T>& v) {
    pod(std::uint64_t(v.size()));
    for (const auto& x : v) pod(x);
    return *this;
  }
  Key& raw(const void* data, std::size_t n) {
    pod(std::uint64_t(n));
    bytes_.append(static_cast<const char*>(data), n);
    return *this;
  }
  Key& key(const Key& k) { return str(k.bytes_); }

  const std::string& bytes() const { return bytes_; }
  std::size_t hash() const { return std::hash<std::string_view>()(bytes_); }
  // 64 bits of the whole key that every process and host computes alike
  // (no seed, no platform hash): processes compare programs by it.
  std::uint64_t digest() const {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ bytes_.size();
    auto mix = [](std::uint64_t x) {
      x ^= x >> 30;
      x *= 0xBF58476D1CE4E5B9ull;
      x ^= x >> 27;
      x *= 0x94D049BB133111EBull;
      return x ^ (x >> 31);
    };
    std::size_t i = 0;
    for (; i + 8 <= bytes_.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, bytes_.data() + i, 8);
      h = mix(h ^ w) + 0x632BE59BD9B4E019ull;
    }
    std::uint64_t tail = 0;
    std::memcpy(&tail, bytes_.data() + i, bytes_.size() - i);
    return mix(h ^ tail ^ (std::uint64_t(bytes_.size() - i) << 56));
  }
  bool operator==(const Key& o) const { return bytes_ == o.bytes_; }
  bool operator<(const Key& o) const { return bytes_ < o.bytes_; }

  struct Hash {
    std::size_t operator()(const Key& k) const { return k.hash(); }
  };

 private:
  std::string bytes_;
};

}  // namespace tessel
