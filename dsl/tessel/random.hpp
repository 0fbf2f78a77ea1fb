// ts::random: JAX's counter-based PRNG, Threefry-2x32, bit for bit (API.md
// "Random"). A key is a uint32 array of shape (2,) (split gives (n, 2)).
//
// Both of JAX's modes, per config().threefry_partitionable (read when an op
// runs or a function is traced): on (JAX's default since 0.5), element i of a
// draw uses counter i, so each device draws its own shard with no
// communication; off (the seeds' era), the counters are one flat range cut
// in halves. Values equal JAX's for the same key, shape, dtype and mode.
#pragma once

#include <cstdint>
#include <optional>

#include <tessel/array.hpp>

namespace tessel::random {

Array key(std::int64_t seed);
Array split(const Array& key, std::int64_t num = 2);
Array fold_in(const Array& key, std::uint32_t data);
Array key_data(const Array& key);

// Raw bits: uint32 (or, with dtype int64, 64 bits in an int64).
Array bits(const Array& key, const Shape& shape, DType dtype = DType::uint32);
Array uniform(const Array& key, const Shape& shape = {}, DType dtype = DType::float32, double minval = 0.0,
              double maxval = 1.0);
Array normal(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
Array randint(const Array& key, const Shape& shape, std::int64_t minval, std::int64_t maxval, DType dtype = DType::int32);
Array bernoulli(const Array& key, double p = 0.5, const Shape& shape = {});
// A shuffled arange(n), or x shuffled along its first axis.
Array permutation(const Array& key, std::int64_t n);
Array permutation(const Array& key, const Array& x);
Array truncated_normal(const Array& key, double lower, double upper, const Shape& shape = {},
                       DType dtype = DType::float32);

}  // namespace tessel::random
