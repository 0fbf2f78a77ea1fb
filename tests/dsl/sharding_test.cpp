#include <doctest/doctest.h>

#include "tests/common/golden.hpp"

namespace ts = tessel;
using ts::P;

namespace {
std::vector<ts::Device> first(int n) {
  auto d = ts::devices();
  d.erase(d.begin() + n, d.end());
  return d;
}
}  // namespace

TEST_CASE("Mesh") {
  auto mesh = ts::make_mesh({4, 2}, {"x", "y"});
  CHECK(mesh.shape() == ts::Shape{4, 2});
  CHECK(mesh.axis_names() == std::vector<std::string>{"x", "y"});
  CHECK(mesh.size() == 8);
  CHECK(mesh.devices() == ts::devices());
  CHECK(mesh.axis_size("y") == 2);
  CHECK(mesh.str() == "Mesh('x': 4, 'y': 2)");
  CHECK(mesh == ts::make_mesh({4, 2}, {"x", "y"}));
  CHECK_FALSE(mesh == ts::make_mesh({2, 4}, {"x", "y"}));
  auto sub = ts::make_mesh({2}, {"x"}, {ts::Device(5), ts::Device(2)});
  CHECK(sub.devices() == std::vector<ts::Device>{ts::Device(5), ts::Device(2)});
  ts::Mesh one_d(ts::devices(), "x");
  CHECK(one_d.str() == "Mesh('x': 8)");
  // Fewer devices than exist: the first ones, as jax.make_mesh.
  CHECK(ts::make_mesh({2, 2}, {"a", "b"}).devices() == first(4));
}

TEST_CASE("Mesh errors name the sizes and ids") {
  CHECK_THROWS_WITH_AS(ts::make_mesh({4, 4}, {"a", "b"}),
                       "Number of devices 8 must be >= the product of mesh_shape (4, 4)", ts::ShardingError);
  CHECK_THROWS_WITH_AS(ts::make_mesh({3}, {"a"}, first(4)), doctest::Contains("(3,)"), ts::ShardingError);
  CHECK_THROWS_WITH_AS(ts::Mesh(ts::devices(), {4, 4}, {"a", "b"}), doctest::Contains("(4, 4)"), ts::ShardingError);
  CHECK_THROWS_AS(ts::Mesh(ts::devices(), {4, 2}, {"a"}), ts::ShardingError);
  CHECK_THROWS_AS(ts::Mesh(ts::devices(), {4, 2}, {"a", "a"}), ts::ShardingError);
  CHECK_THROWS_AS(ts::Mesh({ts::Device(0), ts::Device(0)}, {2}, {"a"}), ts::ShardingError);
  CHECK_THROWS_WITH_AS(ts::Mesh({ts::Device(9)}, {1}, {"a"}), doctest::Contains("device id 9"), ts::ShardingError);
  CHECK_THROWS_WITH_AS(ts::make_mesh({8}, {"x"}).axis_size("q"), doctest::Contains("'q'"), ts::ShardingError);
}

TEST_CASE("PartitionSpec prints and compares as JAX's") {
  CHECK(P("a", "b").str() == "P('a', 'b')");
  CHECK(P("a", ts::None).str() == "P('a', None)");
  CHECK(P({"a", "b"}, ts::None).str() == "P(('a', 'b'), None)");
  CHECK(P().str() == "P()");
  CHECK(P(ts::None, "b").size() == 2);
  CHECK(P("a") == P("a", ts::None));
  CHECK(P() == P(ts::None));
  CHECK_FALSE(P("a") == P("b"));
  CHECK(P({"a"}).str() == "P(('a',))");
  CHECK(P({"a"}) == P("a"));
}

TEST_CASE("NamedSharding") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  ts::NamedSharding s(mesh, P("a", "b"));
  CHECK(s.str() == "NamedSharding(mesh=Mesh('a': 4, 'b': 2), spec=P('a', 'b'))");
  CHECK(s.shard_shape({8192, 8192}) == ts::Shape{2048, 4096});
  CHECK(s.num_devices() == 8);
  CHECK(s.device_set().size() == 8);
  CHECK_FALSE(s.is_fully_replicated());
  CHECK(ts::NamedSharding(mesh, P()).is_fully_replicated());
  auto m = s.devices_indices_map({8, 4});
  CHECK(m.at(ts::Device(0)) == ts::Index{{0, 2}, {0, 2}});
  CHECK(m.at(ts::Device(5)) == ts::Index{{4, 6}, {2, 4}});
  auto t = ts::NamedSharding(mesh, P({"a", "b"}, ts::None)).devices_indices_map({16, 3});
  for (int d = 0; d < 8; ++d) CHECK(t.at(ts::Device(d)) == ts::Index{{2 * d, 2 * d + 2}, {0, 3}});
  auto r = ts::NamedSharding(mesh, P({"b", "a"}, ts::None)).devices_indices_map({8, 1});
  CHECK(r.at(ts::Device(1)) == ts::Index{{4, 5}, {0, 1}});  // b is major: device 1 has b=1, a=0
  CHECK(r.at(ts::Device(2)) == ts::Index{{1, 2}, {0, 1}});
  // Uneven: ceil tiles, clamped.
  auto u = ts::NamedSharding(mesh, P("a")).devices_indices_map({9});
  CHECK(u.at(ts::Device(6)) == ts::Index{{9, 9}});
  CHECK(u.at(ts::Device(4)) == ts::Index{{6, 9}});
  CHECK(ts::NamedSharding(mesh, P("a")).shard_shape({9}) == ts::Shape{3});
  CHECK(s == ts::NamedSharding(ts::make_mesh({4, 2}, {"a", "b"}), P("a", "b")));
  CHECK_FALSE(s == ts::NamedSharding(mesh, P("b", "a")));
}

TEST_CASE("NamedSharding errors are JAX's") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  CHECK_THROWS_WITH_AS(ts::NamedSharding(mesh, P("c")), "Resource axis: c of P('c') is not found in mesh: ('a', 'b').",
                       ts::ShardingError);
  CHECK_THROWS_WITH_AS(ts::NamedSharding(mesh, P("a", "a")),
                       "A single NamedSharding spec specification can map every mesh axis to at most one positional "
                       "dimension, but P('a', 'a') has duplicate entries for `a`",
                       ts::ShardingError);
  CHECK_THROWS_AS(ts::NamedSharding(mesh, P({"a", "b"}, "b")), ts::ShardingError);
  CHECK_THROWS_WITH_AS(ts::device_put(ts::zeros({8}), ts::NamedSharding(mesh, P("a", "b"))),
                       "Sharding NamedSharding(mesh=Mesh('a': 4, 'b': 2), spec=P('a', 'b')) is only valid for values "
                       "of rank at least 2, but was applied to a value of rank 1",
                       ts::ShardingError);
}

TEST_CASE("PositionalSharding behaves as an array of device sets") {
  ts::PositionalSharding s(ts::devices());
  CHECK(s.shape() == ts::Shape{8});
  CHECK(s.str() ==
        "PositionalSharding([{CPU 0} {CPU 1} {CPU 2} {CPU 3} {CPU 4} {CPU 5} {CPU 6} {CPU 7}], shape=(8,))");
  auto s42 = s.reshape({4, 2});
  CHECK(s42.str() ==
        "PositionalSharding([[{CPU 0} {CPU 1}]\n"
        "                    [{CPU 2} {CPU 3}]\n"
        "                    [{CPU 4} {CPU 5}]\n"
        "                    [{CPU 6} {CPU 7}]], shape=(4, 2))");
  CHECK(s42.replicate(0).str() == "PositionalSharding([[{CPU 0, 2, 4, 6} {CPU 1, 3, 5, 7}]], shape=(1, 2))");
  CHECK(s42.replicate(0).shape() == ts::Shape{1, 2});
  CHECK(s42.replicate(1).shape() == ts::Shape{4, 1});
  CHECK(s42.replicate(1, false).shape() == ts::Shape{4});
  CHECK(s42.replicate().shape() == ts::Shape{1, 1});
  CHECK(s42.replicate().is_fully_replicated());
  CHECK(s42.T().shape() == ts::Shape{2, 4});
  CHECK(s42.T().device_ids_at(1) == std::vector<int>{2});
  CHECK(s.reshape({-1, 2}).shape() == ts::Shape{4, 2});
  CHECK_THROWS_AS(s.reshape({3, 2}), ts::ShardingError);
  CHECK_THROWS_AS(s42.replicate(2), ts::ShardingError);
  CHECK(s42.shard_shape({8192, 8192}) == ts::Shape{2048, 4096});
}

TEST_CASE("PositionalSharding and NamedSharding place the same data alike") {
  ts::PositionalSharding s = ts::PositionalSharding(ts::devices()).reshape({4, 2});
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto named = [&](ts::PartitionSpec p) { return ts::Sharding(ts::NamedSharding(mesh, p)); };
  CHECK(s.is_equivalent_to(named(P("a", "b")), 2));
  CHECK(s.replicate(0).is_equivalent_to(named(P(ts::None, "b")), 2));
  CHECK(s.replicate(1).is_equivalent_to(named(P("a", ts::None)), 2));
  CHECK(s.replicate(0).T().is_equivalent_to(named(P("b", ts::None)), 2));
  CHECK(s.replicate().is_equivalent_to(named(P()), 2));
  CHECK(s.reshape({2, 4}).is_equivalent_to(ts::NamedSharding(ts::make_mesh({2, 4}, {"x", "y"}), P("x", "y")), 2));
  CHECK(ts::PositionalSharding(ts::devices()).reshape({8, 1}).is_equivalent_to(named(P({"a", "b"})), 2));
  CHECK_FALSE(s.is_equivalent_to(named(P("b", "a")), 2));
  // A transposed device order still has a mesh form.
  auto t = s.T().reshape({8, 1});
  auto idx = t.devices_indices_map({8, 2});
  CHECK(idx.at(ts::Device(2)) == ts::Index{{1, 2}, {0, 2}});
  CHECK(idx.at(ts::Device(1)) == ts::Index{{4, 5}, {0, 2}});
}

TEST_CASE("PositionalSharding needs congruent shapes") {
  auto s = ts::PositionalSharding(ts::devices()).reshape({4, 2});
  CHECK_THROWS_WITH_AS(ts::device_put(ts::zeros({9, 8}), s),
                       doctest::Contains("should be divisible by 4, but it is equal to 9"), ts::ShardingError);
  CHECK_THROWS_WITH_AS(ts::device_put(ts::zeros({8}), s), doctest::Contains("rank 2"), ts::ShardingError);
  // Fully replicated fits any rank.
  CHECK(ts::device_put(ts::zeros({3}), s.replicate()).committed());
}

TEST_CASE("Sharding holds any kind and compares by kind and value") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  ts::Sharding a = ts::NamedSharding(mesh, P("a"));
  ts::Sharding b = ts::SingleDeviceSharding(ts::Device(3));
  CHECK(a.is_named());
  CHECK(b.is_single_device());
  CHECK(b.as_single_device().device() == ts::Device(3));
  CHECK_THROWS_AS(a.as_positional(), ts::ShardingError);
  CHECK_FALSE(a == b);
  CHECK(a.str() == "NamedSharding(mesh=Mesh('a': 4, 'b': 2), spec=P('a'))");
  CHECK(b.device_assignment() == std::vector<ts::Device>{ts::Device(3)});
  CHECK(b.is_fully_replicated());
}
