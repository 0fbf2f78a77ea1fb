#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

#include "tessel/core/errors.hpp"
#include "tracer/sharding.hpp"

using namespace tessel;

namespace {
MeshRef mesh(std::vector<int> ids, std::vector<MeshAxis> axes) {
  return std::make_shared<const DeviceMesh>(std::move(ids), std::move(axes));
}
std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}
}  // namespace

TEST_CASE("DeviceMesh") {
  auto m = mesh(iota(8), {{"a", 4}, {"b", 2}});
  CHECK(m->size() == 8);
  CHECK(m->axis_index("b") == 1);
  CHECK(m->axis_index("z") == -1);
  CHECK(m->coord(5, 0) == 2);
  CHECK(m->coord(5, 1) == 1);
  CHECK(m->str() == "Mesh('a': 4, 'b': 2)");
  auto p = mesh({3, 1, 2, 0}, {{"x", 4}});
  CHECK(p->position_of(2) == 2);
  CHECK(p->position_of(7) == -1);
  CHECK_THROWS_AS(mesh(iota(8), {{"a", 3}}), ShardingError);
  CHECK_THROWS_AS(mesh(iota(4), {{"a", 2}, {"a", 2}}), ShardingError);
  CHECK_THROWS_AS(mesh({1, 1}, {{"a", 2}}), ShardingError);
}

TEST_CASE("AxisSharding tiles, boxes and replicas") {
  auto m = mesh(iota(8), {{"a", 4}, {"b", 2}});
  AxisSharding s{m, {{0}, {1}}, {}};
  CHECK(s.tile_shape({16, 16}) == Shape{4, 8});
  CHECK(s.tile_index(5) == std::vector<std::int64_t>{2, 1});
  CHECK(s.shard_box({16, 16}, 5) == Box{{8, 8}, {12, 16}});
  CHECK(s.spec_str() == "P('a', 'b')");
  CHECK(s.replica_axes().empty());
  CHECK_FALSE(s.is_fully_replicated());
  AxisSharding r{m, {{1, 0}, {}}, {}};
  CHECK(r.spec_str() == "P(('b', 'a'), None)");
  CHECK(r.num_tiles(0) == 8);
  CHECK(r.tile_index(1) == std::vector<std::int64_t>{4, 0});
  // Uneven: 10 rows over 8 tiles of 2: the last three tiles are short or empty.
  CHECK(r.tile_shape({10, 3}) == Shape{2, 3});
  CHECK(r.shard_box({10, 3}, 1) == Box{{8, 0}, {10, 3}});  // position 1: b=1, a=0 -> tile 4
  CHECK(r.shard_box({10, 3}, 3).empty());                   // position 3: b=1, a=1 -> tile 5
  AxisSharding u{m, {{0}}, {1}};
  CHECK(u.spec_str() == "P('a'){unreduced: 'b'}");
  CHECK_FALSE(u.is_fully_replicated());
  CHECK(replicated(m, 2).is_fully_replicated());
  CHECK(replicated(m, 2).replica_axes() == std::vector<int>{0, 1});
  // Split only over a size-1 axis: still every device holds everything.
  AxisSharding one{mesh(iota(8), {{"a", 1}, {"b", 8}}), {{0}, {}}, {}};
  CHECK(one.is_fully_replicated());
}

TEST_CASE("shard boxes of an uneven dimension are ceil tiles, clamped") {
  auto m = mesh(iota(4), {{"x", 4}});
  AxisSharding s{m, {{0}}, {}};
  std::vector<Box> want = {{{0}, {3}}, {{3}, {6}}, {{6}, {9}}, {{9}, {9}}};
  for (int p = 0; p < 4; ++p) CHECK(s.shard_box({9}, p) == want[p]);
}

TEST_CASE("sharding_from_tiles recovers a mesh form of any transposed-iota assignment") {
  std::mt19937 rng(3);
  // Draw a random mesh sharding, list its tiles as PositionalSharding does,
  // convert back, and compare where every device's data lives.
  std::vector<std::vector<std::int64_t>> mesh_shapes = {{8}, {4, 2}, {2, 4}, {2, 2, 2}, {6}, {3, 2}, {2, 3}, {12}, {1}};
  for (int trial = 0; trial < 200; ++trial) {
    auto ms = mesh_shapes[rng() % mesh_shapes.size()];
    std::vector<MeshAxis> axes;
    int n = 1;
    for (size_t i = 0; i < ms.size(); ++i) axes.push_back({"m" + std::to_string(i), ms[i]}), n *= int(ms[i]);
    auto ids = iota(n);
    std::shuffle(ids.begin(), ids.end(), rng);
    auto m = mesh(ids, axes);
    int rank = 1 + int(rng() % 2);
    AxisSharding s = replicated(m, rank);
    std::vector<int> order = iota(int(ms.size()));
    std::shuffle(order.begin(), order.end(), rng);
    for (int a : order) {
      int d = int(rng() % (rank + 1));
      if (d < rank) s.dims[d].push_back(a);
    }
    Shape grid(rank);
    for (int d = 0; d < rank; ++d) grid[d] = s.num_tiles(d);
    // Tiles, row-major over the grid, each with the positions holding it.
    std::vector<std::vector<int>> tiles(numel(grid));
    auto gs = row_major_strides(grid);
    for (int p = 0; p < n; ++p) {
      auto t = s.tile_index(p);
      std::int64_t flat = 0;
      for (int d = 0; d < rank; ++d) flat += t[d] * gs[d];
      tiles[flat].push_back(p);
    }
    AxisSharding back = sharding_from_tiles(ids, grid, tiles);
    Shape global(rank);
    for (int d = 0; d < rank; ++d) global[d] = grid[d] * 3;
    CAPTURE(s.spec_str());
    for (int p = 0; p < n; ++p) {
      std::int64_t q = back.mesh->position_of(ids[p]);
      REQUIRE(q >= 0);
      CHECK(back.shard_box(global, q) == s.shard_box(global, p));
    }
  }
}

TEST_CASE("sharding_from_tiles rejects assignments that are not meshes") {
  CHECK_THROWS_AS(sharding_from_tiles(iota(4), {2}, {{0, 1}, {1, 2}}), ShardingError);
  CHECK_THROWS_AS(sharding_from_tiles(iota(4), {2}, {{0}, {1, 2, 3}}), ShardingError);
  // 0,2,1,3 is a transpose of a 2x2 iota: fine. 0,3,1,2 is not.
  CHECK_NOTHROW(sharding_from_tiles(iota(4), {4}, {{0}, {2}, {1}, {3}}));
  CHECK_THROWS_AS(sharding_from_tiles(iota(4), {4}, {{0}, {3}, {1}, {2}}), ShardingError);
}
