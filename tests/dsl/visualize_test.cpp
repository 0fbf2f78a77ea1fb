#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/common/golden.hpp"

namespace ts = tessel;
using ts::P;
using ts::testing::jax_fact;
using ts::testing::parse_spec;

TEST_CASE("visualize_sharding draws what JAX 0.11 draws, for every measured case") {
  auto facts = jax_fact("visualize.json");
  REQUIRE(facts.size() > 60);
  for (auto& f : facts) {
    ts::Shape shape = f["shape"].get<ts::Shape>();
    std::optional<ts::Sharding> s;
    if (f["mesh"] == "single") {
      s = ts::SingleDeviceSharding(ts::devices()[0]);
    } else {
      auto m = f["mesh"];
      std::vector<ts::Device> devs = ts::devices();
      if (m.size() > 2) {
        devs.clear();
        for (int id : m[2].get<std::vector<int>>()) devs.emplace_back(id);
      } else {
        devs.erase(devs.begin() + ts::numel(m[0].get<ts::Shape>()), devs.end());
      }
      ts::Mesh mesh(devs, m[0].get<ts::Shape>(), m[1].get<std::vector<std::string>>());
      s = ts::NamedSharding(mesh, parse_spec(f["spec"]));
    }
    CAPTURE(f["shape"].dump());
    CAPTURE(f["spec"].get<std::string>());
    CHECK(ts::debug::sharding_text(shape, *s) == f["text"].get<std::string>());
  }
}

TEST_CASE("the examples of API.md and shared/reference") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto x = ts::device_put(ts::zeros({16, 16}), ts::NamedSharding(mesh, P("a", "b")));
  std::ostringstream os;
  ts::debug::visualize_array_sharding(x, os, {.use_color = false});
  CHECK(os.str() ==
        "┌──────────┬──────────┐\n"
        "│  CPU 0   │  CPU 1   │\n"
        "├──────────┼──────────┤\n"
        "│  CPU 2   │  CPU 3   │\n"
        "├──────────┼──────────┤\n"
        "│  CPU 4   │  CPU 5   │\n"
        "├──────────┼──────────┤\n"
        "│  CPU 6   │  CPU 7   │\n"
        "└──────────┴──────────┘\n");
  auto y = ts::device_put(ts::zeros({16, 16}), ts::NamedSharding(mesh, P("a", ts::None)));
  CHECK(ts::debug::sharding_text(y.shape(), y.sharding()) ==
        "┌───────────────────────┐\n"
        "│        CPU 0,1        │\n"
        "├───────────────────────┤\n"
        "│        CPU 2,3        │\n"
        "├───────────────────────┤\n"
        "│        CPU 4,5        │\n"
        "├───────────────────────┤\n"
        "│        CPU 6,7        │\n"
        "└───────────────────────┘\n");
}

TEST_CASE("uneven shardings are drawn with their true shard sizes") {
  // 10 rows over 4 tiles of ceil(10/4) = 3: rows of 3, 3, 3 and 1.
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  std::string t = ts::debug::sharding_text({10, 16}, ts::NamedSharding(mesh, P("a", "b")));
  // base height 10: 3/10 -> 3 lines (top 0, bottom 1 padding); 1/10 -> 1 line.
  // aspect 16/10: cells of int(0.5 * 16 * 2.5) = 20 columns, 6 + 5 + 7 wide.
  CHECK(t ==
        "┌──────────────────┬──────────────────┐\n"
        "│      CPU 0       │      CPU 1       │\n"
        "│                  │                  │\n"
        "├──────────────────┼──────────────────┤\n"
        "│      CPU 2       │      CPU 3       │\n"
        "│                  │                  │\n"
        "├──────────────────┼──────────────────┤\n"
        "│      CPU 4       │      CPU 5       │\n"
        "│                  │                  │\n"
        "├──────────────────┼──────────────────┤\n"
        "│      CPU 6       │      CPU 7       │\n"
        "└──────────────────┴──────────────────┘\n");
}

TEST_CASE("colour mode paints each device set and draws no box") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  std::string t = ts::debug::sharding_text({16, 16}, ts::NamedSharding(mesh, P("a", "b")), {.use_color = true});
  CHECK(t.find("\x1b[38;2;") != std::string::npos);
  CHECK(t.find("┌") == std::string::npos);
  CHECK(t.find("CPU 7") != std::string::npos);
  // tab20b's first colour (#393B79) paints the first cell, with white text.
  CHECK(t.rfind("\x1b[38;2;255;255;255;48;2;57;59;121m", 0) == 0);
}

TEST_CASE("visualising an array of rank 0 or 3 is a ShapeError") {
  CHECK_THROWS_AS(ts::debug::sharding_text({2, 2, 2}, ts::SingleDeviceSharding(ts::devices()[0])), ts::ShapeError);
  CHECK_THROWS_WITH_AS(ts::debug::visualize_array_sharding(ts::zeros({2, 2, 2})),
                       doctest::Contains("1 and 2 dimensions"), ts::ShapeError);
  CHECK_THROWS_AS(ts::debug::sharding_text({}, ts::SingleDeviceSharding(ts::devices()[0])), ts::ShapeError);
}

TEST_CASE("sharding_svg writes one rectangle per distinct shard") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto x = ts::device_put(ts::zeros({16, 16}), ts::NamedSharding(mesh, P("a", ts::None)));
  std::string path = "sharding_test.svg";
  ts::debug::sharding_svg(x, path);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string svg = ss.str();
  std::remove(path.c_str());
  int rects = 0;
  for (size_t p = svg.find("<rect"); p != std::string::npos; p = svg.find("<rect", p + 1)) ++rects;
  CHECK(rects == 4);
  CHECK(svg.find("CPU 6,7") != std::string::npos);
  CHECK(svg.rfind("<svg", 0) == 0);
}
