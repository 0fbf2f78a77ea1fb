// Halo exchange for partition rules: the rows a device needs from the
// devices holding other tiles of a split dim (a shifted slice,
// tracer/rules_shape.cpp; a convolution's window, tracer/rules_conv.cpp;
// pooling and its gradient, tracer/rules_window.cpp). Collective permutes
// only: what moves is the rows needed, never the dim.
#pragma once

#include <cstdint>
#include <vector>

#include "tracer/rules.hpp"

namespace tessel::halo {

// x: this device's tile of dim `d`, split over mesh `axes` (every tile the
// same size). dir +1: the first `rows` rows of the next tile; dir -1: the
// last `rows` rows of the previous one. Zeros on the devices with no such
// neighbour (past the array's ends). One collective permute.
NodeRef neighbour_rows(LocalBuilder& b, const NodeRef& x, const std::vector<int>& axes, int d, std::int64_t rows, int dir);

// x: this device's tile of dim `d` (c rows, the last tiles padded), split
// over mesh `axes` into T = starts.size() tiles. On the device holding tile
// k, the `rows` rows of the whole dim from row starts[k] on (any integer):
// rows before the first tile or past the last are zeros, rows of a tile's
// padding are that padding. One collective permute per distance between the
// tile sending and the tile receiving (the tile's own rows move nothing),
// each sending the part of its tile some device needs; then a slice where
// every device's rows lie alike among the parts (the neighbours' border
// rows), else a gather by a table of each tile's positions. With a step,
// the rows starts[k] + i * step (i < rows): a 1x1 strided convolution's
// rows; each permute still sends the range its receivers' rows span, and
// the device gathers only its own.
NodeRef rows_at(LocalBuilder& b, const NodeRef& x, const std::vector<int>& axes, int d,
                const std::vector<std::int64_t>& starts, std::int64_t rows, std::int64_t step = 1);

// A constant int32 array of `shape` holding v (row-major): the tables of
// each tile's positions or offsets.
NodeRef int32_table(NodeTable& t, const std::vector<std::int32_t>& v, Shape shape);

// This device's entry of `values` (one per tile along `axes`), an int32
// scalar.
NodeRef per_tile(LocalBuilder& b, const std::vector<int>& axes, const std::vector<std::int64_t>& values);

// On the device holding tile k (of those along `axes`), y's `keep` rows of
// dim d from offsets[k] on: a slice where every tile's offset is the same,
// else a dynamic_slice by a table of them (a device that made more rows
// than its own cutting them off).
NodeRef tile_rows(LocalBuilder& b, const NodeRef& y, const std::vector<int>& axes, int d,
                  const std::vector<std::int64_t>& offsets, std::int64_t keep);

// floor(a / b) for b > 0.
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

}  // namespace tessel::halo
