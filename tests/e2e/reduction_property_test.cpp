// Property: every reduction of every dtype, on meshes of 1..8 devices with
// even and uneven splits of the reduced or kept dimension, equals plain host
// loops exactly (identities of padded shards are exact per dtype: min of an
// int32 array of 10 over 4 devices is its minimum, never INT_MIN).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

// The host reference over a row-major (rows, cols) array (rank 1: rows = 1).
struct Ref {
  std::vector<double> sum, prod, max, min, argmax, argmin, all, any;
};

Ref reference(const std::vector<std::int64_t>& v, std::int64_t rows, std::int64_t cols, std::optional<int> axis,
              bool rank1) {
  Ref r;
  auto reduce = [&](auto index_of, std::int64_t outer, std::int64_t inner) {
    for (std::int64_t o = 0; o < outer; ++o) {
      double s = 0, p = 1, mx = -1e300, mn = 1e300, am = 0, an = 0;
      bool al = true, ay = false;
      for (std::int64_t i = 0; i < inner; ++i) {
        double x = double(v[index_of(o, i)]);
        s += x, p *= x;
        if (x > mx) mx = x, am = double(i);
        if (x < mn) mn = x, an = double(i);
        al = al && x != 0, ay = ay || x != 0;
      }
      r.sum.push_back(s), r.prod.push_back(p), r.max.push_back(mx), r.min.push_back(mn);
      r.argmax.push_back(am), r.argmin.push_back(an), r.all.push_back(al), r.any.push_back(ay);
    }
  };
  if (!axis || rank1) reduce([&](std::int64_t, std::int64_t i) { return i; }, 1, rows * cols);
  else if (*axis == 0) reduce([&](std::int64_t o, std::int64_t i) { return i * cols + o; }, cols, rows);
  else reduce([&](std::int64_t o, std::int64_t i) { return o * cols + i; }, rows, cols);
  return r;
}

std::vector<double> values(const ts::Array& a) {
  std::vector<double> out;
  for (double x : ts::astype(a, ts::float64).to_vector<double>()) out.push_back(x);
  return out;
}

}  // namespace

TEST_CASE("every reduction of every dtype on 1..8 devices, even and uneven, equals host loops exactly") {
  const std::vector<ts::DType> dtypes = {ts::float32, ts::float64, ts::int32, ts::int64, ts::uint32, ts::bool_};
  const std::vector<ts::Shape> shapes = {{10}, {7, 5}};
  std::mt19937 rng(13);
  int checked = 0;
  const int max_devices = std::min(8, ts::device_count());
  for (int k = 1; k <= max_devices; ++k) {
    const auto all = ts::devices();
    std::vector<ts::Device> devs(all.begin(), all.begin() + k);
    ts::Mesh mesh(devs, {k}, {"x"});
    for (ts::DType dt : dtypes)
      for (const ts::Shape& shape : shapes) {
        const bool rank1 = shape.size() == 1;
        const std::int64_t rows = shape[0], cols = rank1 ? 1 : shape[1];
        // Small values (products stay exact in every dtype), ties on purpose.
        std::vector<std::int64_t> v(std::size_t(rows * cols));
        for (auto& x : v) {
          if (dt == ts::bool_) x = std::int64_t(rng() % 4 != 0);
          else if (dt == ts::uint32) x = std::int64_t(1 + rng() % 2);  // products stay below 2^32
          else x = std::int64_t(rng() % 5) - 2;
          if (x == 0 && dt != ts::bool_) x = 1;
        }
        // Some arrays hold the dtype's extreme values: identities must not beat them.
        if (dt == ts::int32) v[1] = std::numeric_limits<std::int32_t>::min() + 1, v[2] = std::numeric_limits<std::int32_t>::max() - 1;
        std::vector<double> vd(v.begin(), v.end());
        ts::Array host = ts::astype(ts::array(vd, shape), dt);
        if (dt == ts::int32) host = ts::array(std::vector<std::int32_t>(v.begin(), v.end()), shape);
        for (int shard_dim = 0; shard_dim < int(shape.size()); ++shard_dim) {
          std::vector<ts::PartitionSpec::Entry> e(shape.size(), ts::PartitionSpec::Entry(ts::None));
          e[shard_dim] = ts::PartitionSpec::Entry("x");
          ts::Array x = ts::device_put(host, ts::NamedSharding(mesh, ts::PartitionSpec::from_entries(e)));
          std::vector<std::optional<int>> axes = {std::nullopt, 0};
          if (!rank1) axes.push_back(1);
          for (auto axis : axes) {
            CAPTURE(k);
            CAPTURE(std::string(ts::dtype_name(dt)));
            CAPTURE(ts::shape_str(shape));
            CAPTURE(shard_dim);
            CAPTURE(axis.value_or(-1));
            // With the int32 extremes, sums and products overflow: compare those as the dtype wraps.
            const bool extremes = dt == ts::int32;
            Ref r = reference(v, rows, cols, rank1 ? std::nullopt : axis, rank1);
            ts::Axes ax = axis ? ts::Axes(*axis) : ts::Axes();
            auto one = ts::jit([&](ts::Array a) {
              std::vector<ts::Array> out = {ts::max(a, ax), ts::min(a, ax), ts::all(a, ax), ts::any(a, ax)};
              if (dt != ts::bool_) {
                out.push_back(ts::argmax(a, axis));
                out.push_back(ts::argmin(a, axis));
              }
              if (!extremes) {
                out.push_back(ts::sum(a, ax));
                out.push_back(ts::prod(a, ax));
              }
              return out;
            });
            auto got = one(x);
            CHECK(values(got[0]) == r.max);
            CHECK(values(got[1]) == r.min);
            CHECK(values(got[2]) == r.all);
            CHECK(values(got[3]) == r.any);
            size_t i = 4;
            if (dt != ts::bool_) {
              CHECK(values(got[i++]) == r.argmax);
              CHECK(values(got[i++]) == r.argmin);
            }
            if (!extremes) {
              CHECK(values(got[i++]) == r.sum);
              CHECK(values(got[i++]) == r.prod);
            }
            ++checked;
          }
        }
      }
  }
  CHECK(checked > 0);
}

TEST_CASE("min and max of an int32 array of 10 split over 4 devices (the padding identity)") {
  if (ts::device_count() < 4) return;
  const auto all = ts::devices();
  std::vector<ts::Device> devs(all.begin(), all.begin() + 4);
  ts::Mesh mesh(devs, {4}, {"x"});
  for (std::int32_t base : {0, 1000, -1000, std::numeric_limits<std::int32_t>::max() - 20}) {
    std::vector<std::int32_t> v(10);
    for (int i = 0; i < 10; ++i) v[i] = base + i;
    auto x = ts::device_put(ts::array(v, {10}), ts::NamedSharding(mesh, P("x")));
    CHECK(ts::min(x).item<std::int32_t>() == base);
    CHECK(ts::max(x).item<std::int32_t>() == base + 9);
    CHECK(ts::jit([](ts::Array a) { return ts::min(a); })(x).item<std::int32_t>() == base);
    auto u = ts::device_put(ts::array(std::vector<std::uint32_t>{7, 9, 3, 4, 8, 5, 6, 9, 7, 5}, {10}),
                            ts::NamedSharding(mesh, P("x")));
    CHECK(ts::min(u).item<std::uint32_t>() == 3);
    CHECK(ts::max(u).item<std::uint32_t>() == 9);
  }
}
