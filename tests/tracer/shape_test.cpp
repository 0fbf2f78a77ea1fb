#include <doctest/doctest.h>

#include "tessel/core/shape.hpp"

using namespace tessel;

TEST_CASE("shapes") {
  CHECK(numel({}) == 1);
  CHECK(numel({2, 3, 4}) == 24);
  CHECK(numel({2, 0}) == 0);
  CHECK(row_major_strides({2, 3, 4}) == std::vector<std::int64_t>{12, 4, 1});
  CHECK(shape_str({}) == "()");
  CHECK(shape_str({3}) == "(3,)");
  CHECK(shape_str({4, 8}) == "(4, 8)");
  CHECK(aval_str(DType::float32, {4, 8}) == "float32[4,8]");
  CHECK(aval_str(DType::int32, {}) == "int32[]");
  CHECK(ceil_div(10, 4) == 3);
  CHECK(ceil_div(8, 4) == 2);
}

TEST_CASE("boxes") {
  Box a{{0, 2}, {4, 6}}, b{{3, 0}, {8, 3}};
  Box i = intersect(a, b);
  CHECK(i == Box{{3, 2}, {4, 3}});
  CHECK(i.extent() == Shape{1, 1});
  CHECK_FALSE(i.empty());
  CHECK(intersect(a, Box{{5, 0}, {6, 9}}).empty());
  CHECK(full_box({2, 3}) == Box{{0, 0}, {2, 3}});
}
