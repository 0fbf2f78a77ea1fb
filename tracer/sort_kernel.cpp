// The sort kernel (tracer/rules.hpp: sort_lines), shared by the reference
// interpreter and the compiled SortThunk (codegen/library.cpp): each line
// along the sorted dim sorted stably by its keys, NaNs after every number,
// values moved with their keys.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

namespace {

// Radix sorting (sort_lines): a key as an unsigned integer whose order is
// the sort's, ties where the sort has them: NaNs after every number and
// equal to each other, -0.0 equal to 0.0, signed integers offset.
template <class K>
auto radix_key(K x) {
  if constexpr (std::is_floating_point_v<K>) {
    using U = std::conditional_t<sizeof(K) == 4, std::uint32_t, std::uint64_t>;
    constexpr U sign = U(1) << (8 * sizeof(U) - 1);
    if (std::isnan(x)) return ~U(0);
    if (x == K(0)) x = K(0);
    U u;
    std::memcpy(&u, &x, sizeof u);
    return (u & sign) ? U(~u) : U(u | sign);
  } else {
    using U = std::conditional_t<(sizeof(K) <= 4), std::uint32_t, std::uint64_t>;
    if constexpr (std::is_signed_v<K>) {
      using UK = std::make_unsigned_t<K>;
      return U(UK(UK(x) ^ (UK(1) << (8 * sizeof(K) - 1))));
    } else {
      return U(x);
    }
  }
}

// A stable least-significant-digit radix sort of (key, position) pairs by
// key, a byte a pass, passes where every key has the same byte skipped.
// `key2` and `pos2` are scratch of the same length.
template <class U>
void radix_sort(std::vector<U>& key, std::vector<std::uint32_t>& pos, std::vector<U>& key2, std::vector<std::uint32_t>& pos2) {
  constexpr int kBytes = int(sizeof(U));
  const std::size_t n = key.size();
  std::uint32_t hist[kBytes][256] = {};
  for (std::size_t i = 0; i < n; ++i)
    for (int b = 0; b < kBytes; ++b) ++hist[b][(key[i] >> (8 * b)) & 255];
  for (int b = 0; b < kBytes; ++b) {
    std::uint32_t* h = hist[b];
    if (h[(key[0] >> (8 * b)) & 255] == n) continue;
    std::uint32_t sum = 0;
    for (int d = 0; d < 256; ++d) {
      const std::uint32_t c = h[d];
      h[d] = sum;
      sum += c;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t at = h[(key[i] >> (8 * b)) & 255]++;
      key2[at] = key[i];
      pos2[at] = pos[i];
    }
    key.swap(key2);
    pos.swap(pos2);
  }
}

// Lines at least this long sort by radix (below, a comparison sort is as fast).
constexpr std::int64_t kRadixLine = 256;

}  // namespace

std::int64_t sort_line_count(const Shape& s, std::int64_t d) { return s[std::size_t(d)] == 0 ? 0 : numel(s) / s[std::size_t(d)]; }

void sort_lines(DType key_dtype, DType value_dtype, const Shape& s, std::int64_t d, const void* keys,
                const void* values, void* out) {
  sort_lines(key_dtype, value_dtype, s, d, keys, values, out, 0, sort_line_count(s, d));
}

void sort_lines(DType key_dtype, DType value_dtype, const Shape& s, std::int64_t d, const void* keys,
                const void* values, void* out, std::int64_t first, std::int64_t last) {
  const std::int64_t len = s[std::size_t(d)], stride = row_major_strides(s)[std::size_t(d)];
  const std::size_t es = dtype_size(value_dtype);
  const char* v = static_cast<const char*>(values);
  char* o = static_cast<char*>(out);
  visit_wide_dtype(key_dtype, [&](auto tag) {
    using K = decltype(tag);
    if constexpr (is_complex_v<K>) {
      throw InternalError("sorting by complex keys");
    } else {
      const K* k = static_cast<const K*>(keys);
      // A strict weak order with NaNs after every number.
      auto less = [](K a, K b) {
        if constexpr (std::is_floating_point_v<K>) {
          if (std::isnan(a)) return false;
          if (std::isnan(b)) return true;
        }
        return a < b;
      };
      // Long lines of plain numbers: a stable radix sort of their keys as
      // unsigned integers (radix_key), positions beside them.
      if constexpr (std::is_floating_point_v<K> || std::is_integral_v<K>) {
        if (len >= kRadixLine && len < (std::int64_t(1) << 32)) {
          using U = decltype(radix_key(K()));
          std::vector<U> key(static_cast<std::size_t>(len)), key2(key.size());
          std::vector<std::uint32_t> pos(key.size()), pos2(key.size());
          for (std::int64_t l = first; l < last; ++l) {
            const std::int64_t base = l / stride * len * stride + l % stride;
            for (std::int64_t i = 0; i < len; ++i) key[std::size_t(i)] = radix_key(k[base + i * stride]), pos[std::size_t(i)] = std::uint32_t(i);
            radix_sort(key, pos, key2, pos2);
            for (std::int64_t i = 0; i < len; ++i)
              std::memcpy(o + (base + i * stride) * es, v + (base + std::int64_t(pos[std::size_t(i)]) * stride) * es, es);
          }
          return;
        }
      }
      // Each line's keys beside their positions, sorted stably by key: the
      // same order as positions sorted by their keys (compared in place, a
      // 4096^2 float32 sort took 1.35 s on 2 cores).
      std::vector<std::pair<K, std::int64_t>> line(static_cast<std::size_t>(len));
      for (std::int64_t l = first; l < last; ++l) {
        const std::int64_t base = l / stride * len * stride + l % stride;
        for (std::int64_t i = 0; i < len; ++i) line[std::size_t(i)] = {k[base + i * stride], i};
        std::stable_sort(line.begin(), line.end(), [&](const auto& a, const auto& b) { return less(a.first, b.first); });
        for (std::int64_t i = 0; i < len; ++i)
          std::memcpy(o + (base + i * stride) * es, v + (base + line[std::size_t(i)].second * stride) * es, es);
      }
    }
  });
}

}  // namespace tessel
