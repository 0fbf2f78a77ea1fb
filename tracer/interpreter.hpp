// The reference interpreter: runs any graph on the host in plain loops, one
// primitive at a time, with each op's reference kernel (tracer/rules.hpp).
// Every compiled result is checked against it.
#pragma once

#include <vector>

#include "tracer/rules.hpp"

namespace tessel {

// Evaluates a (global, collective-free) graph on host arrays.
std::vector<HostArray> interpret(const Graph& g, const std::vector<HostArray>& args);

// A host array of `aval` from typed data.
HostArray host_array(DType dtype, const Shape& shape, const void* data);

}  // namespace tessel
