// Shapes: a plain vector of dimension sizes, row-major everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <tessel/core/dtype.hpp>

namespace tessel {

using Shape = std::vector<std::int64_t>;

// Number of elements (1 for a scalar).
std::int64_t numel(const Shape& s);
// Throws ShapeError, naming `where` and the shape, unless every dimension
// is >= 0 and the element count and byte size (elements of dtype t) fit in
// an int64. Nodes check their avals with it where they are built, arrays
// where they are made.
void check_shape(const Shape& s, DType t, const std::string& where);
// The shape's element count times `element_bytes`, or -1 when it overflows an int64.
std::int64_t checked_bytes(const Shape& s, std::int64_t element_bytes);
// Row-major element strides.
std::vector<std::int64_t> row_major_strides(const Shape& s);
// "(4, 8)" as Python prints a tuple; "()" and "(3,)" included.
std::string shape_str(const Shape& s);
// "float32[4,8]" as JAX prints an aval.
std::string aval_str(DType t, const Shape& s);
// ceil(a / b) for positive b.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A half-open box [start, stop) per dimension: a shard's place in the array.
struct Box {
  std::vector<std::int64_t> start, stop;
  Shape extent() const;
  bool empty() const;
  bool operator==(const Box&) const = default;
};
// The intersection of two boxes of the same rank (possibly empty).
Box intersect(const Box& a, const Box& b);
// The whole of an array of shape s.
Box full_box(const Shape& s);

}  // namespace tessel
