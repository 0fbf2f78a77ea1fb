// The reference interpreter: runs any graph on the host in plain loops, one
// primitive at a time, with each op's reference kernel (tracer/rules.hpp).
// Every compiled result is checked against it.
#pragma once

#include <vector>

#include "tracer/rules.hpp"

namespace tessel {

// Evaluates a (global, collective-free) graph on host arrays.
std::vector<HostArray> interpret(const Graph& g, const std::vector<HostArray>& args);

// Host-array helpers the reference kernels share: an op's reference result;
// arrays concatenated along dim; block k of n along dim.
HostArray host_eval(Op op, const Attrs& a, const Aval& out_aval, const std::vector<const HostArray*>& in);
HostArray host_concat(const std::vector<HostArray>& xs, std::int64_t dim);
HostArray host_chunk(const HostArray& x, std::int64_t dim, std::int64_t k, std::int64_t n);

// A host array of `aval` from typed data.
HostArray host_array(DType dtype, const Shape& shape, const void* data);

}  // namespace tessel
