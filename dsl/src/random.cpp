// ts::random after jax/_src/prng.py and jax/_src/random.py: the same
// counters, the same bit manipulations, in both partitionable modes.
#include <tessel/dtype_info.hpp>
#include <tessel/random.hpp>

#include <cmath>
#include <limits>

#include <tessel/device.hpp>
#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"
#include <cstring>

namespace tessel::random {

using detail::apply1;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;

namespace {

NodeRef u32(NodeTable& t, double v, const Shape& shape) {
  return build::broadcast_in_dim(t, build::scalar(t, DType::uint32, v), shape, {});
}

// Key word k (0 or 1) of a (2,) key, broadcast to `shape`.
NodeRef key_word(NodeTable& t, const NodeRef& key, int k, const Shape& shape) {
  NodeRef w = build::reshape(t, build::slice(t, key, {k}, {k + 1}), {});
  return build::broadcast_in_dim(t, w, shape, {});
}

std::pair<NodeRef, NodeRef> block(NodeTable& t, const NodeRef& key, const NodeRef& x0, const NodeRef& x1) {
  NodeRef k0 = key_word(t, key, 0, x0->shape()), k1 = key_word(t, key, 1, x0->shape());
  return {build::threefry2x32(t, k0, k1, x0, x1, 0), build::threefry2x32(t, k0, k1, x0, x1, 1)};
}

// Each element's row-major index, as uint32 (shapes under 2^32 elements).
NodeRef flat_index(NodeTable& t, const Shape& shape) {
  if (shape.empty()) return build::scalar(t, DType::uint32, 0);
  auto st = row_major_strides(shape);
  NodeRef idx;
  for (size_t d = 0; d < shape.size(); ++d) {
    NodeRef term = build::iota(t, DType::uint32, shape, std::int64_t(d));
    if (st[d] != 1) term = build::binary(t, Op::mul, term, u32(t, double(st[d]), shape));
    idx = idx ? build::binary(t, Op::add, idx, term) : term;
  }
  return idx;
}

// threefry_2x32(key, arange(n)) of JAX's original mode: the counters cut in
// halves (padded with one 0 when n is odd), the two words concatenated.
NodeRef flat_counter_bits(NodeTable& t, const NodeRef& key, std::int64_t n) {
  if (n == 0) return build::broadcast_in_dim(t, build::scalar(t, DType::uint32, 0), {0}, {});
  const std::int64_t h = (n + 1) / 2;
  NodeRef x0 = build::iota(t, DType::uint32, {h}, 0);
  NodeRef x1 = build::binary(t, Op::add, x0, u32(t, double(h), {h}));
  if (n % 2) {
    NodeRef last = build::binary(t, Op::eq, x0, u32(t, double(h - 1), {h}));
    x1 = build::select(t, last, u32(t, 0, {h}), x1);
  }
  auto [w0, w1] = block(t, key, x0, x1);
  NodeRef all = build::concatenate(t, {w0, w1}, 0);
  return build::slice(t, all, {0}, {n});
}

bool partitionable() { return config().threefry_partitionable; }

// 32 random bits per element of `shape`.
NodeRef bits32(NodeTable& t, const NodeRef& key, const Shape& shape) {
  if (partitionable()) {
    auto [w0, w1] = block(t, key, u32(t, 0, shape), flat_index(t, shape));
    return build::binary(t, Op::xor_, w0, w1);
  }
  return build::reshape(t, flat_counter_bits(t, key, numel(shape)), shape);
}

// 64 random bits per element of `shape`, in an int64.
NodeRef bits64(NodeTable& t, const NodeRef& key, const Shape& shape) {
  NodeRef hi, lo;
  if (partitionable()) {
    auto [w0, w1] = block(t, key, u32(t, 0, shape), flat_index(t, shape));
    hi = w0, lo = w1;
  } else {
    const std::int64_t n = numel(shape);
    NodeRef b = flat_counter_bits(t, key, 2 * n);
    hi = build::reshape(t, build::slice(t, b, {0}, {n}), shape);
    lo = build::reshape(t, build::slice(t, b, {n}, {2 * n}), shape);
  }
  NodeRef h = build::convert(t, hi, DType::int64), l = build::convert(t, lo, DType::int64);
  NodeRef shifted = build::binary(t, Op::shift_left, h, build::broadcast_in_dim(t, build::scalar(t, DType::int64, 32), shape, {}));
  return build::binary(t, Op::or_, shifted, l);
}

// 8 or 16 random bits per element of `shape` (uint8 or uint16), as
// jax.random.bits draws them: partitionable, the low bits of the 32-bit
// draw; else the flat stream's 32-bit words cut in 32/width pieces, the low
// piece first, word after word.
NodeRef bits_narrow(NodeTable& t, const NodeRef& key, const Shape& shape, int width) {
  const DType out = width == 8 ? DType::uint8 : DType::uint16;
  if (partitionable()) return build::convert(t, bits32(t, key, shape), out);
  const std::int64_t n = numel(shape), per = 32 / width, words = (std::int64_t(width) * n + 31) / 32;
  NodeRef w = build::reshape(t, flat_counter_bits(t, key, words), {words, 1});
  w = build::broadcast_in_dim(t, w, {words, per}, {0, 1});
  NodeRef shifts = build::binary(t, Op::mul, build::iota(t, DType::uint32, {words, per}, 1), u32(t, width, {words, per}));
  NodeRef pieces = build::binary(t, Op::and_, build::binary(t, Op::shift_right_logical, w, shifts),
                                 u32(t, double((1u << width) - 1), {words, per}));
  NodeRef flat = build::slice(t, build::reshape(t, pieces, {words * per}), {0}, {n});
  return build::reshape(t, build::convert(t, flat, out), shape);
}

NodeRef split_node(NodeTable& t, const NodeRef& key, std::int64_t num) {
  if (partitionable()) {
    auto [w0, w1] = block(t, key, u32(t, 0, {num}), build::iota(t, DType::uint32, {num}, 0));
    NodeRef a = build::reshape(t, w0, {num, 1}), b = build::reshape(t, w1, {num, 1});
    return build::concatenate(t, {a, b}, 1);
  }
  return build::reshape(t, flat_counter_bits(t, key, 2 * num), {num, 2});
}

NodeRef key_row(NodeTable& t, const NodeRef& keys, std::int64_t i) {
  return build::reshape(t, build::slice(t, keys, {i, 0}, {i + 1, 2}), {2});
}

void check_key(const Array& key) {
  if (key.dtype() != DType::uint32 || key.shape() != Shape{2})
    throw TypeError("a PRNG key is a uint32 array of shape (2,), got " + aval_str(key.dtype(), key.shape()) +
                    " (index a batch of keys, e.g. keys.index({0}))");
}

// Floats in [minval, maxval) from random bits, as jax.random.uniform.
NodeRef uniform_node(NodeTable& t, const NodeRef& key, const Shape& shape, DType dtype, const NodeRef& minval,
                     const NodeRef& maxval) {
  NodeRef floats;
  if (dtype == DType::float32) {
    NodeRef b = bits32(t, key, shape);
    NodeRef m = build::binary(t, Op::shift_right_logical, b, u32(t, 32 - 23, shape));
    m = build::binary(t, Op::or_, m, u32(t, double(0x3F800000u), shape));
    floats = build::binary(t, Op::sub, build::bitcast_convert(t, m, DType::float32), c::full_like(t, build::bitcast_convert(t, m, DType::float32), 1.0));
  } else if (dtype == DType::float64) {
    NodeRef b = bits64(t, key, shape);
    auto i64 = [&](double v) { return build::broadcast_in_dim(t, build::scalar(t, DType::int64, v), shape, {}); };
    NodeRef m = build::binary(t, Op::shift_right_logical, b, i64(64 - 52));
    NodeRef one_bits = build::broadcast_in_dim(t, build::constant(t, [] {
      auto l = std::make_shared<Literal>();
      l->dtype = DType::int64;
      std::int64_t v = 0x3FF0000000000000LL;
      l->bytes.resize(8);
      std::memcpy(l->bytes.data(), &v, 8);
      return l;
    }()), shape, {});
    m = build::binary(t, Op::or_, m, one_bits);
    NodeRef f = build::bitcast_convert(t, m, DType::float64);
    floats = build::binary(t, Op::sub, f, c::full_like(t, f, 1.0));
  } else if (is_narrow_float(dtype)) {
    // jax.random._uniform: the format's own width of bits (8 at least when
    // the mantissa is narrower), the top mantissa bits under 1.0's exponent.
    const FInfo fi = finfo(dtype);
    const int rng_bits = fi.nmant < 8 ? 8 : fi.bits;
    const DType ut = fi.bits == 8 ? DType::uint8 : DType::uint16;
    NodeRef b = build::convert(t, bits_narrow(t, key, shape, rng_bits), ut);
    auto uc = [&](double v) { return build::broadcast_in_dim(t, build::scalar(t, ut, v), shape, {}); };
    NodeRef one = build::scalar(t, dtype, 1.0);
    const std::uint64_t one_bits = visit_dtype(dtype, [](auto tag) -> std::uint64_t {
      using T = decltype(tag);
      if constexpr (is_narrow_float_v<T>) return T(1.0f).bits;
      else return 0;
    });
    NodeRef m = build::binary(t, Op::or_, build::binary(t, Op::shift_right_logical, b, uc(rng_bits - fi.nmant)), uc(double(one_bits)));
    NodeRef f = build::bitcast_convert(t, m, dtype);
    floats = build::binary(t, Op::sub, f, build::broadcast_in_dim(t, one, shape, {}));
  } else {
    throw TypeError(std::string("uniform: dtype must be a float dtype (float32, float64, bfloat16, float16, "
                                "float8_e4m3fn, float8_e5m2), got ") + dtype_name(dtype));
  }
  NodeRef lo = build::broadcast_in_dim(t, minval, shape, {}), hi = build::broadcast_in_dim(t, maxval, shape, {});
  NodeRef v = build::binary(t, Op::add, build::binary(t, Op::mul, floats, build::binary(t, Op::sub, hi, lo)), lo);
  return build::binary(t, Op::max, lo, v);
}

NodeRef scalar_of(NodeTable& t, DType dtype, double v) { return build::scalar(t, dtype, v); }

}  // namespace

Array key(std::int64_t seed) {
  std::uint32_t hi = 0, lo = std::uint32_t(seed);
  // JAX without x64: seeds are 32-bit, the high word 0; wider seeds keep it.
  if (seed > std::int64_t(std::numeric_limits<std::uint32_t>::max()) || seed < std::numeric_limits<std::int32_t>::min())
    hi = std::uint32_t(std::uint64_t(seed) >> 32);
  return array(std::vector<std::uint32_t>{hi, lo});
}

Array key_data(const Array& k) {
  if (k.dtype() != DType::uint32 || k.shape().empty() || k.shape().back() != 2)
    throw TypeError("key_data: not a key array: " + aval_str(k.dtype(), k.shape()));
  return k;
}

Array split(const Array& k, std::int64_t num) {
  check_key(k);
  return apply1("random.split", {k}, [num](NodeTable& t, const NR& in) { return split_node(t, in[0], num); });
}

Array fold_in(const Array& k, std::uint32_t data) {
  check_key(k);
  return apply1("random.fold_in", {k}, [data](NodeTable& t, const NR& in) {
    auto [w0, w1] = block(t, in[0], u32(t, 0, {1}), u32(t, double(data), {1}));
    return build::concatenate(t, {w0, w1}, 0);
  });
}

Array bits(const Array& k, const Shape& shape, DType dtype) {
  check_key(k);
  return apply1("random.bits", {k}, [shape, dtype](NodeTable& t, const NR& in) {
    if (dtype == DType::uint32) return bits32(t, in[0], shape);
    if (dtype == DType::int64) return bits64(t, in[0], shape);
    if (dtype == DType::uint64) return build::bitcast_convert(t, bits64(t, in[0], shape), DType::uint64);
    if (dtype == DType::uint8) return bits_narrow(t, in[0], shape, 8);
    if (dtype == DType::uint16) return bits_narrow(t, in[0], shape, 16);
    throw TypeError(std::string("random.bits: dtype must be uint8, uint16, uint32, uint64 or int64 (64 bits), got ") +
                    dtype_name(dtype));
  });
}

Array uniform(const Array& k, const Shape& shape, DType dtype, double minval, double maxval) {
  check_key(k);
  return apply1("random.uniform", {k}, [=](NodeTable& t, const NR& in) {
    return uniform_node(t, in[0], shape, dtype, scalar_of(t, dtype, minval), scalar_of(t, dtype, maxval));
  });
}

Array normal(const Array& k, const Shape& shape, DType dtype) {
  check_key(k);
  return apply1("random.normal", {k}, [=](NodeTable& t, const NR& in) {
    // u in (-1, 1): the float just above -1, as JAX.
    double lo = dtype == DType::float32 ? double(std::nextafter(-1.0f, 0.0f))
                : is_narrow_float(dtype)   ? -1.0 + finfo(dtype).epsneg  // the dtype's next value above -1
                                           : std::nextafter(-1.0, 0.0);
    NodeRef u = uniform_node(t, in[0], shape, dtype, scalar_of(t, dtype, lo), scalar_of(t, dtype, 1.0));
    return build::binary(t, Op::mul, c::full_like(t, u, std::sqrt(2.0)), build::unary(t, Op::erf_inv, u));
  });
}

// jax.random.randint: two draws of the dtype's width, combined modulo the
// span in that width's unsigned arithmetic (wrapping, as JAX's lax ops do:
// the multiplier (2^(nbits/2) mod span)^2 wraps, so for spans past
// 2^(nbits/2) it is 0); minval and maxval clipped to the dtype, a maxval
// past its range adding 1 to the offset.
Array randint(const Array& k, const Shape& shape, std::int64_t minval, std::int64_t maxval, DType dtype) {
  check_key(k);
  if (!is_integral(dtype) || dtype_size(dtype) > 4)
    throw TypeError(std::string("randint: dtype must be an integer dtype of at most 32 bits (int8, uint8, int16, "
                                "uint16, int32, uint32), got ") + dtype_name(dtype));
  const int nbits = int(8 * dtype_size(dtype));
  const IInfo info = iinfo(dtype);
  const std::int64_t lo = std::max(minval, info.min), hi = std::min<std::int64_t>(maxval, std::int64_t(info.max));
  const bool out_of_range = maxval > std::int64_t(info.max);
  const std::uint64_t mask = nbits == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << nbits) - 1;
  std::uint64_t span = hi <= lo ? 1 : std::uint64_t(hi - lo) & mask;
  // A maxval past the dtype: one more (the whole range wraps to 0, which
  // the remainders below leave alone: XLA's x % 0 is x).
  if (out_of_range && hi > lo) span = (span + 1) & mask;
  auto rem = [](std::uint64_t a, std::uint64_t b) { return b == 0 ? a : a % b; };
  const std::uint64_t m = rem(std::uint64_t(1) << (nbits / 2), span);
  const std::uint64_t mult = rem((m * m) & mask, span);  // the product wraps in the width
  const DType ut = nbits == 8 ? DType::uint8 : nbits == 16 ? DType::uint16 : DType::uint32;
  return apply1("random.randint", {k}, [=](NodeTable& t, const NR& in) {
    NodeRef keys = split_node(t, in[0], 2);
    auto draw = [&](std::int64_t row) {
      return nbits == 32 ? bits32(t, key_row(t, keys, row), shape) : bits_narrow(t, key_row(t, keys, row), shape, nbits);
    };
    NodeRef higher = draw(0), lower = draw(1);
    auto uc = [&](double v) { return build::broadcast_in_dim(t, build::scalar(t, ut, v), shape, {}); };
    NodeRef sp = uc(double(span));
    NodeRef off = build::binary(t, Op::add, build::binary(t, Op::mul, build::binary(t, Op::rem, higher, sp), uc(double(mult))),
                                build::binary(t, Op::rem, lower, sp));
    off = build::binary(t, Op::rem, off, sp);
    NodeRef base = build::broadcast_in_dim(t, build::scalar(t, dtype, double(lo)), shape, {});
    return build::binary(t, Op::add, base, build::convert(t, off, dtype));
  });
}

Array bernoulli(const Array& k, double p, const Shape& shape) { return uniform(k, shape) < p; }

namespace {
// JAX's _shuffle: rounds of a stable sort by fresh random keys.
Array shuffle(const Array& k, const Array& x) {
  const std::int64_t n = x.shape()[0];
  const double uint32max = 4294967295.0;
  const int rounds = int(std::ceil(3 * std::log(double(std::max<std::int64_t>(1, n))) / std::log(uint32max)));
  return apply1("random.permutation", {k, x}, [rounds](NodeTable& t, const NR& in) {
    NodeRef key = in[0], v = in[1];
    for (int r = 0; r < rounds; ++r) {
      NodeRef keys = split_node(t, key, 2);
      key = key_row(t, keys, 0);
      NodeRef sort_keys = bits32(t, key_row(t, keys, 1), {v->shape()[0]});
      if (v->rank() > 1) sort_keys = build::broadcast_in_dim(t, sort_keys, v->shape(), {0});
      v = build::sort(t, sort_keys, v, 0);
    }
    return v;
  });
}
}  // namespace

Array permutation(const Array& k, std::int64_t n) {
  check_key(k);
  return shuffle(k, arange(n));
}

Array permutation(const Array& k, const Array& x) {
  check_key(k);
  if (x.ndim() == 0) throw ShapeError("permutation of a 0-d array");
  return shuffle(k, x);
}

Array truncated_normal(const Array& k, double lower, double upper, const Shape& shape, DType dtype) {
  check_key(k);
  return apply1("random.truncated_normal", {k}, [=](NodeTable& t, const NR& in) {
    NodeRef sqrt2 = scalar_of(t, dtype, std::sqrt(2.0));
    NodeRef a = build::unary(t, Op::erf, build::binary(t, Op::div, scalar_of(t, dtype, lower), sqrt2));
    NodeRef b = build::unary(t, Op::erf, build::binary(t, Op::div, scalar_of(t, dtype, upper), sqrt2));
    NodeRef u = uniform_node(t, in[0], shape, dtype, a, b);
    NodeRef out = build::binary(t, Op::mul, build::broadcast_in_dim(t, sqrt2, shape, {}), build::unary(t, Op::erf_inv, u));
    auto next = [&](double v, double toward) {
      return dtype == DType::float32 ? double(std::nextafter(float(v), float(toward))) : std::nextafter(v, toward);
    };
    NodeRef lo = build::broadcast_in_dim(t, scalar_of(t, dtype, next(lower, HUGE_VAL)), shape, {});
    NodeRef hi = build::broadcast_in_dim(t, scalar_of(t, dtype, next(upper, -HUGE_VAL)), shape, {});
    return build::binary(t, Op::min, build::binary(t, Op::max, out, lo), hi);
  });
}

}  // namespace tessel::random
