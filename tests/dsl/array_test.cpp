#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/common/golden.hpp"

namespace ts = tessel;
using ts::P;

TEST_CASE("host creation gives JAX's dtypes and weak types") {
  CHECK(ts::array(1.5).dtype() == ts::float32);
  CHECK(ts::array(1.5).weak_type());
  CHECK(ts::array(2).dtype() == ts::int32);
  CHECK(ts::array(2).weak_type());
  CHECK(ts::array(2.5f).dtype() == ts::float32);
  CHECK_FALSE(ts::array(2.5f).weak_type());
  CHECK(ts::array(true).dtype() == ts::bool_);
  CHECK(ts::array(std::int64_t(5)).dtype() == ts::int64);
  CHECK(ts::array(std::uint32_t(5)).dtype() == ts::uint32);
  CHECK(ts::array(std::vector<double>{1, 2}).dtype() == ts::float64);
  CHECK(ts::array(std::vector<float>{1, 2}).dtype() == ts::float32);
  CHECK(ts::array(std::vector<int>{1, 2}).dtype() == ts::int32);
  CHECK(ts::array(std::vector<long>{1, 2}).dtype() == ts::int64);
  CHECK_FALSE(ts::array(std::vector<int>{1, 2}).weak_type());
  CHECK(ts::zeros({2, 3}).dtype() == ts::float32);
  CHECK(ts::arange(5).dtype() == ts::int32);
  CHECK(ts::arange(5.0).dtype() == ts::float32);
  CHECK(ts::full({2}, 3.0).weak_type());
  CHECK(ts::full({2}, 3.0, ts::float64).dtype() == ts::float64);
  CHECK(ts::full({2}, 7).dtype() == ts::int32);
}

TEST_CASE("creation values") {
  CHECK(ts::zeros({2, 2}).to_vector<float>() == std::vector<float>{0, 0, 0, 0});
  CHECK(ts::ones({3}, ts::int32).to_vector<int>() == std::vector<int>{1, 1, 1});
  CHECK(ts::full({2}, 2.5).to_vector<float>() == std::vector<float>{2.5f, 2.5f});
  CHECK(ts::arange(5).to_vector<int>() == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(ts::arange(2, 11, 3).to_vector<int>() == std::vector<int>{2, 5, 8});
  CHECK(ts::arange(1.0, 0.0, -0.25).to_vector<float>() == std::vector<float>{1, 0.75f, 0.5f, 0.25f});
  CHECK(ts::arange(0).size() == 0);
  CHECK(ts::eye(2, 3, 1).to_vector<int>() == std::vector<int>{0, 1, 0, 0, 0, 1});
  CHECK(ts::eye(3).shape() == ts::Shape{3, 3});
  CHECK(ts::linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1});
  CHECK(ts::linspace(0, 1, 4, false).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  auto x = ts::array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(x.shape() == ts::Shape{2, 3});
  CHECK(x.ndim() == 2);
  CHECK(x.size() == 6);
  CHECK(ts::zeros_like(x).to_vector<float>() == std::vector<float>(6, 0));
  CHECK(ts::ones_like(x, ts::int32).dtype() == ts::int32);
  CHECK(ts::full_like(x, 4).to_vector<float>() == std::vector<float>(6, 4));
  CHECK(ts::zeros_like(ts::array(1.0)).weak_type());
  CHECK(ts::array({1, 2, 3}).to_vector<int>() == std::vector<int>{1, 2, 3});
}

TEST_CASE("to_vector and item convert as XLA converts") {
  const float nan = std::nanf("");
  auto x = ts::array(std::vector<float>{1.9f, -1.9f, nan, 3e9f, -3e9f, 0.0f});
  CHECK(x.to_vector<int>() == std::vector<int>{1, -1, 0, 2147483647, -2147483647 - 1, 0});
  CHECK(x.to_vector<bool>() == std::vector<bool>{true, true, true, true, true, false});
  CHECK(ts::array(7).item<double>() == 7.0);
  CHECK(ts::array(std::vector<int>{9}, {1, 1}).item<int>() == 9);
  CHECK_THROWS_WITH_AS(ts::zeros({2, 3}).item<float>(), doctest::Contains("shape (2, 3)"), ts::ShapeError);
}

TEST_CASE("bad creation input is a tessel error naming the shape") {
  CHECK_THROWS_WITH_AS(ts::array(std::vector<float>{1, 2, 3}, {2, 2}), doctest::Contains("(2, 2)"), ts::ShapeError);
  CHECK_THROWS_AS(ts::zeros({-1, 2}), ts::ShapeError);
  CHECK_THROWS_AS(ts::arange(0, 5, 0), ts::Error);
  ts::Array empty;
  CHECK_FALSE(empty.valid());
  CHECK_THROWS_AS(empty.shape(), ts::Error);
  CHECK_THROWS_AS(ts::to_string(empty), ts::Error);
}

TEST_CASE("host arrays are uncommitted on the default device") {
  auto x = ts::arange(32.0);
  CHECK_FALSE(x.committed());
  CHECK(x.devices() == std::set<ts::Device>{ts::Device(0)});
  CHECK(x.sharding() == ts::Sharding(ts::SingleDeviceSharding(ts::Device(0))));
  CHECK(x.sharding().str() == "SingleDeviceSharding(device=CpuDevice(id=0))");
  auto shards = x.addressable_shards();
  REQUIRE(shards.size() == 1);
  CHECK(shards[0].device() == ts::Device(0));
  CHECK(shards[0].index() == ts::Index{{0, 32}});
  CHECK(&x.block_until_ready() == &x);
}

TEST_CASE("addressable shards show the true slices of an uneven array") {
  auto mesh = ts::make_mesh({4}, {"x"}, {ts::Device(0), ts::Device(1), ts::Device(2), ts::Device(3)});
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[i] = float(i);
  auto y = ts::device_put(ts::array(v), ts::NamedSharding(mesh, P("x")));
  auto shards = y.addressable_shards();
  REQUIRE(shards.size() == 4);
  std::vector<ts::Index> want = {{{0, 3}}, {{3, 6}}, {{6, 9}}, {{9, 10}}};
  for (int i = 0; i < 4; ++i) {
    CHECK(shards[i].device() == ts::Device(i));
    CHECK(shards[i].index() == want[i]);
    auto d = shards[i].data();
    CHECK(d.committed());
    CHECK(d.devices() == std::set<ts::Device>{ts::Device(i)});
    std::vector<float> expect(v.begin() + want[i][0].start, v.begin() + want[i][0].stop);
    CHECK(d.to_vector<float>() == expect);
  }
  CHECK(y.to_vector<float>() == v);
}

TEST_CASE("devices and configuration") {
  auto devs = ts::devices();
  REQUIRE(devs.size() == 8);
  CHECK(ts::device_count() == 8);
  CHECK(ts::local_devices() == devs);
  CHECK(devs[3].id() == 3);
  CHECK(devs[3].platform() == "cpu");
  CHECK(devs[3].process_index() == 0);
  CHECK(ts::to_string(devs[3]) == "CpuDevice(id=3)");
  CHECK(ts::threads_per_device() >= 1);
  CHECK(ts::config().threefry_partitionable);
}
