#include <doctest/doctest.h>

#include <random>

#include "dsl/src/array_impl.hpp"
#include "tests/common/golden.hpp"

namespace ts = tessel;
using ts::P;
using ts::testing::iota_f32;

namespace {

// Every shard holds exactly the global array's values at its index.
void check_shards(const ts::Array& x, const std::vector<float>& global) {
  const auto& shape = x.shape();
  auto strides = ts::row_major_strides(shape);
  for (auto& s : x.addressable_shards()) {
    auto data = s.data().to_vector<float>();
    const auto& idx = s.index();
    ts::Shape ext;
    for (auto& sl : idx) ext.push_back(sl.stop - sl.start);
    REQUIRE(std::int64_t(data.size()) == ts::numel(ext));
    auto es = ts::row_major_strides(ext);
    for (std::int64_t i = 0; i < std::int64_t(data.size()); ++i) {
      std::int64_t g = 0;
      for (size_t d = 0; d < shape.size(); ++d) g += (idx[d].start + (i / es[d]) % ext[d]) * strides[d];
      if (data[i] != global[g]) {
        FAIL("device " << s.device().id() << " element " << i << " is " << data[i] << ", want " << global[g]);
      }
    }
  }
}

std::vector<ts::PartitionSpec> specs_2d() {
  return {P("a", "b"), P("b", "a"), P("a", ts::None), P(ts::None, "b"), P(ts::None, "a"), P({"a", "b"}, ts::None),
          P(ts::None, {"b", "a"}), P(), P("b")};
}

}  // namespace

TEST_CASE("device_put places every tutorial spec and commits") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto x = iota_f32({16, 16});
  auto global = x.to_vector<float>();
  for (auto& spec : specs_2d()) {
    CAPTURE(spec.str());
    auto y = ts::device_put(x, ts::NamedSharding(mesh, spec));
    CHECK(y.committed());
    CHECK(y.sharding() == ts::Sharding(ts::NamedSharding(mesh, spec)));
    CHECK(y.devices().size() == 8);
    CHECK(y.to_vector<float>() == global);
    check_shards(y, global);
  }
}

TEST_CASE("resharding between any two shardings, even and uneven, on meshes of 1..8 devices") {
  std::mt19937 rng(7);
  std::vector<ts::Shape> shapes = {{16, 16}, {9, 13}, {1, 7}, {5, 3}, {3, 1}};
  std::vector<std::pair<ts::Shape, std::vector<std::string>>> meshes = {
      {{8}, {"x"}}, {{4, 2}, {"a", "b"}}, {{2, 2, 2}, {"p", "q", "r"}}, {{3}, {"x"}}, {{1}, {"x"}},
      {{5}, {"x"}}, {{3, 2}, {"a", "b"}}, {{7}, {"x"}}};
  auto random_spec = [&](const std::vector<std::string>& names) {
    std::vector<ts::PartitionSpec::Entry> e(2, ts::PartitionSpec::Entry(ts::None));
    std::vector<std::string> pool = names;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (auto& n : pool) {
      int d = int(rng() % 3);  // dim 0, dim 1, or unused
      if (d == 2) continue;
      auto axes = e[d].axes();
      axes.push_back(n);
      e[d] = ts::PartitionSpec::Entry::tuple(axes);
    }
    return ts::PartitionSpec::from_entries(e);
  };
  int checked = 0;
  for (auto& shape : shapes) {
    auto x = iota_f32(shape);
    auto global = x.to_vector<float>();
    for (int trial = 0; trial < 12; ++trial) {
      auto& [ms, names] = meshes[rng() % meshes.size()];
      std::vector<ts::Device> devs = ts::devices();
      std::shuffle(devs.begin(), devs.end(), rng);
      devs.resize(ts::numel(ms), ts::Device(0));
      ts::Mesh m1(devs, ms, names);
      auto& [ms2, names2] = meshes[rng() % meshes.size()];
      std::vector<ts::Device> devs2 = ts::devices();
      std::shuffle(devs2.begin(), devs2.end(), rng);
      devs2.resize(ts::numel(ms2), ts::Device(0));
      ts::Mesh m2(devs2, ms2, names2);
      auto s1 = ts::NamedSharding(m1, random_spec(names));
      auto s2 = ts::NamedSharding(m2, random_spec(names2));
      CAPTURE(s1.str());
      CAPTURE(s2.str());
      CAPTURE(ts::shape_str(shape));
      auto y = ts::device_put(x, s1);
      auto z = ts::device_put(y, s2);
      check_shards(y, global);
      check_shards(z, global);
      CHECK(z.to_vector<float>() == global);
      ++checked;
    }
  }
  CHECK(checked == 60);
}

TEST_CASE("device_put moves only what must move") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto x = ts::device_put(iota_f32({16, 16}), ts::NamedSharding(mesh, P("a", "b")));
  // Same sharding: every buffer is shared, nothing copied.
  auto same = ts::device_put(x, ts::NamedSharding(mesh, P("a", "b")));
  for (size_t i = 0; i < 8; ++i) CHECK(same.impl()->buffers[i] == x.impl()->buffers[i]);
  // P('a', 'b') -> P('a', None): each device keeps its half and fetches the other.
  auto y = ts::device_put(x, ts::NamedSharding(mesh, P("a", ts::None)));
  for (size_t i = 0; i < 8; ++i) CHECK(y.impl()->buffers[i] != x.impl()->buffers[i]);
  CHECK(y.to_vector<float>() == x.to_vector<float>());
}

TEST_CASE("device_put to a device, and committed vs uncommitted") {
  auto x = ts::arange(8.0);
  CHECK_FALSE(x.committed());
  auto y = ts::device_put(x, ts::Device(5));
  CHECK(y.committed());
  CHECK(y.devices() == std::set<ts::Device>{ts::Device(5)});
  CHECK(y.sharding() == ts::Sharding(ts::SingleDeviceSharding(ts::Device(5))));
  CHECK(y.to_vector<float>() == x.to_vector<float>());
  CHECK(ts::device_put(ts::array(1.0), ts::Device(2)).weak_type());
}

TEST_CASE("device_put on pytrees with one sharding or a tree of shardings") {
  auto mesh = ts::make_mesh({8}, {"batch"});
  ts::NamedSharding rows(mesh, P("batch")), rep(mesh, P());
  std::pair<ts::Array, ts::Array> batch{iota_f32({16, 4}), iota_f32({16, 2})};
  auto b = ts::device_put(batch, rows);
  CHECK(b.first.sharding() == ts::Sharding(rows));
  CHECK(b.second.sharding() == ts::Sharding(rows));
  std::vector<std::pair<ts::Array, ts::Array>> params = {{iota_f32({4, 3}), iota_f32({3})},
                                                         {iota_f32({3, 2}), iota_f32({2})}};
  auto p = ts::device_put(params, rep);
  CHECK(p.size() == 2);
  CHECK(p[1].second.sharding() == ts::Sharding(rep));
  CHECK(p[1].second.to_vector<float>() == std::vector<float>{0, 1});

  std::vector<std::pair<ts::Sharding, ts::Sharding>> where = {{rep, rows}, {rows, rep}};
  std::vector<std::pair<ts::Array, ts::Array>> q = {{iota_f32({8, 3}), iota_f32({8})},
                                                    {iota_f32({8, 2}), iota_f32({2})}};
  auto r = ts::device_put(q, where);
  CHECK(r[0].first.sharding() == ts::Sharding(rep));
  CHECK(r[0].second.sharding() == ts::Sharding(rows));
  CHECK(r[1].first.sharding() == ts::Sharding(rows));

  std::tuple<ts::Array, double, std::map<std::string, ts::Array>> t{iota_f32({8}), 2.5, {{"w", iota_f32({8})}}};
  auto t2 = ts::device_put(t, ts::Device(3));
  CHECK(std::get<0>(t2).devices() == std::set<ts::Device>{ts::Device(3)});
  CHECK(std::get<1>(t2) == 2.5);
  CHECK(std::get<2>(t2).at("w").committed());

  std::vector<ts::Sharding> too_few = {rep};
  CHECK_THROWS_WITH_AS(ts::device_put(params, too_few), doctest::Contains("does not match"), ts::TypeError);
}
