// Compositions written over ts::Array: traced inline inside a trace; run
// eagerly as one program (traced into a graph, compiled once per structure by
// the pipeline's cache, fused like any jit program), not op by op.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tessel/array.hpp>

namespace tessel::detail {

std::vector<Array> staged_many(const std::string& name, const std::vector<Array>& xs,
                               const std::function<std::vector<Array>(const std::vector<Array>&)>& fn);
Array staged(const std::string& name, const std::vector<Array>& xs,
             const std::function<Array(const std::vector<Array>&)>& fn);

// Helpers the compositions share.
// Integers and booleans as float32 (a weak type kept), inexact x unchanged.
Array inexact(const Array& x);
// An axis in [0, rank) (negatives count from the end); a ShapeError naming `what` otherwise.
int axis_in(int axis, int rank, const char* what);
// x[start:stop] along axis.
Array along(const Array& x, int axis, std::int64_t start, std::int64_t stop);
// Of a sorted 1-D s: where each run of equal values starts (NaNs are one value).
Array run_starts(const Array& s);

}  // namespace tessel::detail
