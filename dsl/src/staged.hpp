// Compositions written over ts::Array: traced inline inside a trace; run
// eagerly as one program (traced into a graph, compiled once per structure by
// the pipeline's cache, fused like any jit program), not op by op.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <tessel/array.hpp>

namespace tessel::detail {

std::vector<Array> staged_many(const std::string& name, const std::vector<Array>& xs,
                               const std::function<std::vector<Array>(const std::vector<Array>&)>& fn);
Array staged(const std::string& name, const std::vector<Array>& xs,
             const std::function<Array(const std::vector<Array>&)>& fn);

}  // namespace tessel::detail
