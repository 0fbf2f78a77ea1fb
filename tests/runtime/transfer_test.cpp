#include <doctest/doctest.h>

#include <numeric>
#include <random>

#include <tessel/tessel.hpp>

#include "runtime/device.hpp"
#include "runtime/transfer.hpp"

using namespace tessel;

namespace {
MeshRef mesh(std::vector<int> ids, std::vector<MeshAxis> axes) {
  return std::make_shared<const DeviceMesh>(std::move(ids), std::move(axes));
}
}  // namespace

TEST_CASE("copy_region copies a box between tiles with different origins") {
  // Global 6x5, source tile holds rows 2..5 (padded to 4x5), destination
  // tile holds columns 1..4 (padded 6x4); copy rows 2..4, columns 1..3.
  std::vector<int> src(4 * 5), dst(6 * 4, -1);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 5; ++c) src[r * 5 + c] = (r + 2) * 10 + c;
  Box region{{2, 1}, {5, 4}};
  rt::copy_region(src.data(), {4, 5}, {2, 0}, dst.data(), {6, 4}, {0, 1}, region, sizeof(int));
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 4; ++c) {
      int g_r = r, g_c = c + 1;
      bool in = g_r >= 2 && g_r < 5 && g_c >= 1 && g_c < 4;
      CHECK(dst[r * 4 + c] == (in ? g_r * 10 + g_c : -1));
    }
  int s0 = 7, d0 = 0;
  rt::copy_region(&s0, {}, {}, &d0, {}, {}, Box{}, sizeof(int));
  CHECK(d0 == 7);
}

TEST_CASE("a plan shares buffers in place and counts the bytes that cross devices") {
  auto m = mesh({0, 1, 2, 3, 4, 5, 6, 7}, {{"a", 4}, {"b", 2}});
  AxisSharding ab{m, {{0}, {1}}, {}}, a_{m, {{0}, {}}, {}}, rep = replicated(m, 2);
  auto same = rt::plan_transfer({16, 16}, 4, ab, ab);
  for (auto q : same.alias) CHECK(q >= 0);
  CHECK(same.bytes_moved == 0);
  // P('a','b') -> P('a', None): each device fetches the other half of its rows.
  auto p = rt::plan_transfer({16, 16}, 4, ab, a_);
  CHECK(p.bytes_moved == 8 * 4 * 8 * 4);
  // -> replicated: each device fetches the 7/8 of the array it lacks.
  auto r = rt::plan_transfer({16, 16}, 4, ab, rep);
  CHECK(r.bytes_moved == 8 * (16 * 16 * 4 * 7 / 8));
  // Replicated -> anything: every device already has its part.
  auto back = rt::plan_transfer({16, 16}, 4, rep, ab);
  CHECK(back.bytes_moved == 0);
}
