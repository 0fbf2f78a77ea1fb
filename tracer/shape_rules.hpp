// What the data-movement family's rule files share (tracer/rules_shape.cpp,
// tracer/rules_shape_partition.cpp).
#pragma once

#include "tracer/ir.hpp"

namespace tessel {

// Whether slice n's dim d is a shift (stride 1, at least half the operand's
// rows) or a pooling tap (every s-th row from one of the first 2s, over at
// least half the dim, into at least 8 rows): its result stays split like
// the operand, each device's missing rows brought from the next.
bool slice_dim_shifted(const Node& n, int d);

}  // namespace tessel
