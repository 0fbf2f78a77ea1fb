// Halo exchange for partition rules: the rows a device needs from the
// devices holding the neighbouring tiles of a split dim (a shifted slice,
// tracer/rules_shape.cpp; a convolution's window, tracer/rules_conv.cpp).
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

}  // namespace tessel::halo
