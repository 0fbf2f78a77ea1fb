// Large transposes that move the last dim run as steps of their own, copied
// by blocks (codegen/transpose.hpp; AVX-512 register blocks for 4- and
// 8-byte elements, portable blocks otherwise): against the reference
// interpreter, bit for bit, for every element size, N-d permutations (runs
// of dims merged, size-1 dims dropped), edges that are not whole blocks, a
// transpose inside a fused expression, and sharded arrays on even and uneven
// meshes (each shard's own buffer checked).
#include <doctest/doctest.h>

#include <cmath>
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <random>
#include <string>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::Array;
using ts::P;
using ts::testing::host_of;
using ts::testing::interpret_fn;
using ts::testing::same_bits;

namespace {

// Values that tell elements apart: random integers over the dtype's range
// (bool: random bits), or distinct integers for float types.
Array distinct(std::mt19937& rng, const ts::Shape& s, ts::DType t) {
  std::vector<double> v(std::size_t(ts::numel(s)));
  std::uniform_int_distribution<int> u(0, 255);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == ts::bool_) v[i] = u(rng) & 1;
    else if (t == ts::int8) v[i] = u(rng) - 128;
    else if (t == ts::uint8) v[i] = u(rng);
    else if (t == ts::bfloat16) v[i] = (u(rng) - 128) / 4.0;  // exact in bfloat16
    else v[i] = double(std::int64_t(i * 2654435761u % 1000003u)) - 500000;  // exact in 32 bits and up
  }
  Array a = ts::array(v, s).astype(t);
  if (t == ts::complex64) a = a + ts::array(std::vector<double>(v.rbegin(), v.rend()), s).astype(t) * ts::array(std::complex<float>(0, 1));
  return a;
}

}  // namespace

TEST_CASE("large transposes moving the last dim are copied by blocks, bit for bit, every element size") {
  struct Case {
    ts::Shape shape;
    std::vector<int> perm;
    bool blocks = true;  // false: the operand's rows too short to be worth blocks (a fused loop reads them)
  };
  const std::vector<Case> cases = {
      {{300, 517}, {1, 0}},         {{64, 3, 700}, {2, 0, 1}},   {{64, 3, 700}, {1, 2, 0}},
      {{64, 3, 700}, {2, 1, 0}},    {{5, 1, 129, 257}, {3, 1, 0, 2}}, {{3, 40000}, {1, 0}},
      {{40000, 3}, {1, 0}, false},       {{17, 2048}, {1, 0}},        {{130, 4, 129}, {0, 2, 1}},
      {{512, 8, 96}, {2, 0, 1}},
  };
  std::mt19937 rng(7);
  for (ts::DType t : {ts::float32, ts::float64, ts::bfloat16, ts::int8, ts::uint8, ts::int16, ts::bool_, ts::uint64,
                      ts::complex64}) {
    for (const Case& c : cases) {
      CAPTURE(ts::dtype_name(t));
      CAPTURE(ts::shape_str(c.shape));
      CAPTURE(c.perm.size());
      const Array x = distinct(rng, c.shape, t);
      auto f = [&](const std::vector<Array>& xs) { return std::vector<Array>{ts::transpose(xs[0], c.perm)}; };
      const auto want = interpret_fn(f, {x});
      auto jf = ts::jit([&](Array a) { return ts::transpose(a, c.perm); });
      CHECK(same_bits(host_of(jf(x)), want[0]) == "");
      if (t == ts::float32) {
        const std::string text = jf.lower(x).compile().as_text();
        CHECK((text.find("by blocks") != std::string::npos) == c.blocks);
        CHECK((text.find("fusion") == std::string::npos) == c.blocks);
      }
    }
  }
}

TEST_CASE("a transpose inside a fused expression reads its operand by blocks, and small ones stay fused") {
  std::mt19937 rng(11);
  const Array x = distinct(rng, {400, 333}, ts::float32);
  auto sym = [](const std::vector<Array>& xs) { return std::vector<Array>{(xs[0] + xs[0].T()) * 0.5f}; };
  auto jsym = ts::jit([](Array a) { return (a + a.T()) * 0.5f; });
  const Array sq = distinct(rng, {400, 400}, ts::float32);
  CHECK(same_bits(host_of(jsym(sq)), interpret_fn(sym, {sq})[0]) == "");
  CHECK(jsym.lower(sq).compile().as_text().find("by blocks") != std::string::npos);
  // The operand computed in the program: made first, then transposed.
  auto g = [](const std::vector<Array>& xs) { return std::vector<Array>{(xs[0] * 3.0f - 1.0f).T() + 2.0f}; };
  auto jg = ts::jit([](Array a) { return (a * 3.0f - 1.0f).T() + 2.0f; });
  CHECK(same_bits(host_of(jg(x)), interpret_fn(g, {x})[0]) == "");
  // A small transpose stays inside its loop nest.
  const Array small = distinct(rng, {40, 33}, ts::float32);
  CHECK(same_bits(host_of(jg(small)), interpret_fn(g, {small})[0]) == "");
  CHECK(jg.lower(small).compile().as_text().find("by blocks") == std::string::npos);
}

TEST_CASE("sharded transposes copy each device's block by blocks, even and uneven") {
  std::mt19937 rng(13);
  for (int devices : {8, 3}) {
    CAPTURE(devices);
    ts::Mesh mesh = ts::make_mesh({devices}, {"x"});
    for (ts::DType t : {ts::float32, ts::float64, ts::bfloat16}) {
      CAPTURE(ts::dtype_name(t));
      const Array host = distinct(rng, {1000, 517}, t);
      const Array x = ts::device_put(host, ts::NamedSharding(mesh, P("x")));
      auto f = [](const std::vector<Array>& xs) { return std::vector<Array>{xs[0].T()}; };
      const auto want = interpret_fn(f, {host});
      auto jf = ts::jit([](Array a) { return a.T(); });
      const Array got = jf(x);
      CHECK(ts::testing::shards_hold(got, want[0]) == "");
      if (t == ts::float32) CHECK(jf.lower(x).compile().as_text().find("by blocks") != std::string::npos);
    }
  }
}

// argmax / argmin: along the last dim in two passes (the extreme value, then
// its first index), along another dim by columns (the best value and index
// per column, row by row): the reference interpreter's indices exactly, with
// NaNs (the first wins), ties (the first wins), -0 and +0 (equal: the
// first), infinities, every dtype kind, fused operands and sharded arrays.
TEST_CASE("argmax and argmin equal the reference interpreter: NaNs, ties, signed zeros, along any dim") {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> u(0, 11);
  auto special = [&](const ts::Shape& s, ts::DType t) {
    std::vector<double> v(std::size_t(ts::numel(s)));
    const double pool[] = {1.0, -1.0, 0.0, -0.0, 2.0, 2.0, -3.5, INFINITY, -INFINITY, NAN, 7.0, -7.0};
    for (auto& e : v) {
      e = pool[u(rng)];
      if (!ts::is_floating(t) && !std::isfinite(e)) e = 5;
      if (t == ts::bool_) e = e > 0;
      if (ts::is_unsigned_int(t)) e = std::fabs(e);
    }
    return ts::array(v, s).astype(t);
  };
  const std::vector<std::pair<ts::Shape, int>> cases = {{{37, 1000}, 1}, {{37, 1000}, 0}, {{5, 300, 7}, 1},
                                                        {{5, 300, 7}, 2}, {{5, 300, 7}, 0}, {{1, 4100}, 1}, {{3000, 2}, 0}};
  for (ts::DType t : {ts::float32, ts::float64, ts::bfloat16, ts::int8, ts::uint32, ts::int64, ts::bool_})
    for (const auto& [shape, axis] : cases)
      for (bool is_max : {true, false}) {
        CAPTURE(ts::dtype_name(t));
        CAPTURE(ts::shape_str(shape));
        CAPTURE(axis);
        CAPTURE(is_max);
        const Array x = special(shape, t);
        auto op = [is_max, axis = axis](const Array& a) { return is_max ? ts::argmax(a, axis) : ts::argmin(a, axis); };
        auto f = [&](const std::vector<Array>& xs) { return std::vector<Array>{op(xs[0])}; };
        auto jf = ts::jit([&](Array a) { return op(a); });
        CHECK(same_bits(host_of(jf(x)), interpret_fn(f, {x})[0]) == "");
        if (t == ts::float32) {  // a fused operand
          auto g = [&](const std::vector<Array>& xs) { return std::vector<Array>{op(xs[0] * 2.0f - 1.0f)}; };
          auto jg = ts::jit([&](Array a) { return op(a * 2.0f - 1.0f); });
          CHECK(same_bits(host_of(jg(x)), interpret_fn(g, {x})[0]) == "");
        }
      }
  // Split along the reduced dim and along the kept one.
  ts::Mesh mesh = ts::make_mesh({3}, {"x"});
  const Array host = special({30, 200}, ts::float32);
  for (int axis : {0, 1})
    for (auto spec : {P("x"), P(ts::None, "x")}) {
      CAPTURE(axis);
      const Array x = ts::device_put(host, ts::NamedSharding(mesh, spec));
      auto f = [axis](const std::vector<Array>& xs) { return std::vector<Array>{ts::argmax(xs[0], axis)}; };
      auto jf = ts::jit([axis](Array a) { return ts::argmax(a, axis); });
      CHECK(same_bits(host_of(jf(x)), interpret_fn(f, {host})[0]) == "");
    }
}

// A concatenation along the last dim: each row in pieces between the
// operands' boundaries, each piece reading one operand with an affine index
// (rows longer than a work item's 8192 elements included), against the
// reference interpreter bit for bit; and cumulative ops along a dim that is
// not the last, row after row.
TEST_CASE("concatenations along the last dim read each operand in its own piece of the row") {
  std::mt19937 rng(19);
  for (ts::DType t : {ts::float32, ts::bfloat16, ts::int8, ts::bool_, ts::float64}) {
    CAPTURE(ts::dtype_name(t));
    for (std::int64_t rows : {3, 64}) {
      const Array a = distinct(rng, {rows, 5}, t), b = distinct(rng, {rows, 8200}, t), c = distinct(rng, {rows, 3}, t);
      auto plain = [](const std::vector<Array>& xs) { return std::vector<Array>{ts::concatenate({xs[0], xs[1], xs[2]}, 1)}; };
      auto jplain = ts::jit([](Array x, Array y, Array z) { return ts::concatenate({x, y, z}, 1); });
      CHECK(same_bits(host_of(jplain(a, b, c)), interpret_fn(plain, {a, b, c})[0]) == "");
      if (t == ts::bool_ || t == ts::int8) continue;
      // Inside elementwise ops, an operand computed in the loop, and under a reverse (the select path).
      auto fused = [](const std::vector<Array>& xs) {
        return std::vector<Array>{ts::concatenate({xs[0], xs[1] * 2.0f, xs[2]}, 1) + 1.0f +
                                  ts::flip(ts::concatenate({xs[2], xs[1], xs[0]}, 1), 1)};
      };
      auto jfused = ts::jit([](Array x, Array y, Array z) {
        return ts::concatenate({x, y * 2.0f, z}, 1) + 1.0f + ts::flip(ts::concatenate({z, y, x}, 1), 1);
      });
      CHECK(same_bits(host_of(jfused(a, b, c)), interpret_fn(fused, {a, b, c})[0]) == "");
    }
  }
  // Split over devices along the rows.
  ts::Mesh mesh = ts::make_mesh({3}, {"x"});
  const Array a = distinct(rng, {30, 40}, ts::float32), b = distinct(rng, {30, 25}, ts::float32);
  auto f = [](const std::vector<Array>& xs) { return std::vector<Array>{ts::concatenate({xs[0], xs[1]}, 1) * 3.0f}; };
  auto jf = ts::jit([](Array x, Array y) { return ts::concatenate({x, y}, 1) * 3.0f; });
  const auto sh = ts::NamedSharding(mesh, P("x"));
  CHECK(same_bits(host_of(jf(ts::device_put(a, sh), ts::device_put(b, sh))), interpret_fn(f, {a, b})[0]) == "");
}

namespace {

// A cumulative op along `axis` of a {6, 50, 33} array, a line at a time on
// the host in T (the order every line combines in).
template <class T>
std::vector<T> host_cumulative(std::vector<T> v, const ts::Shape& s, int axis, bool reverse, int which) {
  std::int64_t stride = 1;
  for (std::size_t d = std::size_t(axis) + 1; d < s.size(); ++d) stride *= s[d];
  const std::int64_t len = s[std::size_t(axis)], n = std::int64_t(v.size());
  for (std::int64_t outer = 0; outer < n; outer += len * stride)
    for (std::int64_t inner = 0; inner < stride; ++inner)
      for (std::int64_t k = 1; k < len; ++k) {
        const std::int64_t i = reverse ? len - 1 - k : k, prev = reverse ? i + 1 : i - 1;
        T& y = v[std::size_t(outer + inner + i * stride)];
        const T a = v[std::size_t(outer + inner + prev * stride)];
        if (which == 0) y = std::is_integral_v<T> ? T(std::uint32_t(a) + std::uint32_t(y)) : T(a + y);
        else if (which == 1) y = std::is_integral_v<T> ? T(std::uint32_t(a) * std::uint32_t(y)) : T(a * y);
        else if (which == 2) y = std::max(a, y);
        else y = std::min(a, y);
      }
  return v;
}

}  // namespace

TEST_CASE("cumulative ops along any dim, forward and reverse, equal a line-by-line host loop") {
  std::mt19937 rng(23);
  for (ts::DType t : {ts::float32, ts::int32, ts::float64})
    for (int axis : {0, 1, 2})
      for (bool reverse : {false, true}) {
        CAPTURE(ts::dtype_name(t));
        CAPTURE(axis);
        CAPTURE(reverse);
        const Array x = ts::testing::random_array(rng, {6, 50, 33}, t);
        for (int which = 0; which < 4; ++which) {
          auto op = [=](const Array& a) {
            return which == 0 ? ts::lax::cumsum(a, axis, reverse)
                 : which == 1 ? ts::lax::cumprod(a, axis, reverse)
                 : which == 2 ? ts::lax::cummax(a, axis, reverse)
                              : ts::lax::cummin(a, axis, reverse);
          };
          auto jf = ts::jit([&](Array a) { return op(a); });
          const Array got = jf(x);
          const ts::Shape s = x.shape();
          if (t == ts::float32) CHECK(got.to_vector<float>() == host_cumulative(x.to_vector<float>(), s, axis, reverse, which));
          if (t == ts::float64) CHECK(got.to_vector<double>() == host_cumulative(x.to_vector<double>(), s, axis, reverse, which));
          if (t == ts::int32)
            CHECK(got.to_vector<std::int32_t>() == host_cumulative(x.to_vector<std::int32_t>(), s, axis, reverse, which));
        }
      }
}

// sort and argsort along any dim, lines spread over threads: against
// std::stable_sort on the host (NaNs last, ties in their order), not the
// interpreter (which shares the kernel).
TEST_CASE("sort and argsort along any dim equal a stable sort on the host, NaNs last, ties in order") {
  std::mt19937 rng(29);
  std::uniform_int_distribution<int> u(0, 40);
  const ts::Shape s = {7, 300, 5};
  std::vector<float> v(std::size_t(ts::numel(s)));
  for (auto& e : v) {
    const int r = u(rng);
    e = r == 0 ? NAN : r == 1 ? -0.0f : r == 2 ? 0.0f : float(r % 13) - 6.0f;  // many ties
  }
  const Array x = ts::array(v, s);
  for (int axis : {0, 1, 2}) {
    CAPTURE(axis);
    const Array sorted = ts::jit([axis](Array a) { return ts::sort(a, axis); })(x);
    const Array order = ts::jit([axis](Array a) { return ts::argsort(a, axis); })(x);
    const auto got = sorted.to_vector<float>();
    const auto got_order = order.astype(ts::int64).to_vector<std::int64_t>();
    std::int64_t stride = 1;
    for (std::size_t d = std::size_t(axis) + 1; d < s.size(); ++d) stride *= s[d];
    const std::int64_t len = s[std::size_t(axis)];
    bool same = true;
    for (std::int64_t l = 0; l < ts::numel(s) / len; ++l) {
      const std::int64_t base = l / stride * len * stride + l % stride;
      std::vector<std::int64_t> idx(static_cast<std::size_t>(len));
      for (std::int64_t i = 0; i < len; ++i) idx[std::size_t(i)] = i;
      std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
        const float ka = v[std::size_t(base + a * stride)], kb = v[std::size_t(base + b * stride)];
        return !std::isnan(ka) && (std::isnan(kb) || ka < kb);
      });
      for (std::int64_t i = 0; i < len; ++i) {
        const float want = v[std::size_t(base + idx[std::size_t(i)] * stride)], g = got[std::size_t(base + i * stride)];
        same = same && got_order[std::size_t(base + i * stride)] == idx[std::size_t(i)] &&
               (std::isnan(want) ? std::isnan(g) : std::bit_cast<std::uint32_t>(g) == std::bit_cast<std::uint32_t>(want));
      }
    }
    CHECK(same);
  }
}

// Lines of 256 and more sort by radix (tracer/sort_kernel.cpp): keys of each
// plain dtype, with their extremes, NaNs, infinities, signed zeros,
// subnormals and many ties, against std::stable_sort on the host (by value),
// argsort's positions too; a short line beside them takes the comparison sort.
TEST_CASE("sort by radix: long lines of every key dtype equal a stable sort on the host") {
  std::mt19937_64 rng(31);
  auto check = [&](ts::DType dt, auto tag, const std::vector<decltype(tag)>& specials) {
    using K = decltype(tag);
    CAPTURE(ts::dtype_name(dt));
    for (const ts::Shape& s : std::vector<ts::Shape>{{3, 700}, {1000, 2}, {2, 257, 3}}) {
      std::vector<K> v(std::size_t(ts::numel(s)));
      for (auto& e : v) {
        const auto r = rng() % 8;
        if (r == 0) e = specials[rng() % specials.size()];
        else if constexpr (std::is_floating_point_v<K>) e = K(std::int64_t(rng() % 41) - 20) / K(4);
        else e = K(rng() % 3 == 0 ? K(rng()) : K(rng() % 17));
      }
      const Array x = ts::array(v, s);
      for (int axis = 0; axis < int(s.size()); ++axis) {
        CAPTURE(axis);
        const Array sorted = ts::sort(x, axis);
        const auto got = sorted.to_vector<K>();
        const auto got_order = ts::argsort(x, axis).astype(ts::int64).to_vector<std::int64_t>();
        std::int64_t stride = 1;
        for (std::size_t d = std::size_t(axis) + 1; d < s.size(); ++d) stride *= s[d];
        const std::int64_t len = s[std::size_t(axis)];
        bool same = true;
        for (std::int64_t l = 0; l < ts::numel(s) / len; ++l) {
          const std::int64_t base = l / stride * len * stride + l % stride;
          std::vector<std::int64_t> idx(static_cast<std::size_t>(len));
          for (std::int64_t i = 0; i < len; ++i) idx[std::size_t(i)] = i;
          std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
            const K ka = v[std::size_t(base + a * stride)], kb = v[std::size_t(base + b * stride)];
            if constexpr (std::is_floating_point_v<K>) return !std::isnan(ka) && (std::isnan(kb) || ka < kb);
            else return ka < kb;
          });
          for (std::int64_t i = 0; i < len; ++i) {
            const K want = v[std::size_t(base + idx[std::size_t(i)] * stride)], g = got[std::size_t(base + i * stride)];
            same = same && got_order[std::size_t(base + i * stride)] == idx[std::size_t(i)] &&
                   std::memcmp(&want, &g, sizeof(K)) == 0;
          }
        }
        CHECK(same);
      }
    }
  };
  const float fi = std::numeric_limits<float>::infinity();
  check(ts::float32, 0.0f,
        {NAN, -NAN, fi, -fi, -0.0f, 0.0f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
         std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest()});
  const double di = std::numeric_limits<double>::infinity();
  check(ts::float64, 0.0, {NAN, di, -di, -0.0, 0.0, std::numeric_limits<double>::denorm_min(), -1e-310, std::numeric_limits<double>::lowest()});
  check(ts::int32, std::int32_t(0), {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), -1, 0});
  check(ts::uint32, std::uint32_t(0), {0u, 0xffffffffu, 0x80000000u, 0x7fffffffu});
  check(ts::int64, std::int64_t(0), {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), -1});
  check(ts::int8, std::int8_t(0), {std::int8_t(-128), std::int8_t(127), std::int8_t(-1)});
}
