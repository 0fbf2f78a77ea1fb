// Automatic differentiation as graph transformations, JAX's way: forward
// mode applies each primitive's JVP rule; reverse mode linearises (the JVP's
// tangent part is linear in the input tangents) and transposes that linear
// part with each primitive's transpose rule (tracer/rules.hpp).
#pragma once

#include <vector>

#include "tracer/ir.hpp"

namespace tessel {

// Params: g's params, then a tangent for each param with wrt[i] (float
// params only). Outputs: g's outputs, then their tangents.
Graph jvp_graph(const Graph& g, const std::vector<bool>& wrt);

// Params: g's params, then a cotangent for each output. Outputs: g's
// outputs, then the cotangent of each param with wrt[i] (zeros when it does
// not reach the outputs).
Graph vjp_graph(const Graph& g, const std::vector<bool>& wrt);

}  // namespace tessel
