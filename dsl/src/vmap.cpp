// ts::vmap: trace f on one example, batch the trace (tracer/batching.hpp),
// run it on the arguments with their mapped axes moved to the front, and
// move each result's batch dimension to its out_axis.
#include <tessel/vmap.hpp>

#include <tessel/ops.hpp>

#include <sstream>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/trace.hpp"
#include "tracer/batching.hpp"
#include "tracer/build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rewrite.hpp"

namespace tessel::detail {

namespace {

// x with axis `from` moved to `to`.
Array move_axis(const Array& x, int from, int to) {
  if (from == to) return x;
  std::vector<int> perm;
  for (int d = 0; d < x.ndim(); ++d)
    if (d != from) perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  return transpose(x, perm);
}

int norm(int axis, int rank, const std::string& what) {
  if (axis < -rank || axis >= rank)
    throw ValueError(cat("vmap was requested to map its ", what, " along axis ", axis, ", which implies that its rank "
                         "should be at least ", (axis < 0 ? -axis : axis + 1), ", but is only ", rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace

std::vector<Array> vmap_call(const std::vector<Array>& arrays, const std::vector<int>& arg_of_leaf, std::size_t nargs,
                             const VmapAxes& in_axes, const VmapAxes& out_axes, const VmapOptions& opt,
                             const std::function<std::vector<Array>(const std::vector<Array>&)>& f) {
  if (!in_axes.single() && in_axes.per().size() != nargs)
    throw ValueError(cat("vmap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
                         "arguments passed to the function, but got len(in_axes)=", in_axes.per().size(),
                         ", len(args)=", nargs));
  // The mapped axis of each array, its batch size.
  std::vector<std::optional<int>> axis(arrays.size());
  std::optional<std::int64_t> size = opt.axis_size;
  std::ostringstream sizes;
  bool inconsistent = false;
  for (size_t k = 0; k < arrays.size(); ++k) {
    const std::optional<int>& a = in_axes.single() ? in_axes.all() : in_axes.per()[size_t(arg_of_leaf[k])];
    if (!a) continue;
    const int d = norm(*a, arrays[k].ndim(), cat("argument ", arg_of_leaf[k]));
    axis[k] = d;
    const std::int64_t n = arrays[k].shape()[size_t(d)];
    sizes << "\n  * one axis had size " << n << ": axis " << d << " of argument " << arg_of_leaf[k] << " of type "
          << Aval{arrays[k].dtype(), arrays[k].shape(), false}.str();
    if (size && *size != n) inconsistent = true;
    if (!size) size = n;
  }
  if (inconsistent) throw ValueError("vmap got inconsistent sizes for array axes to be mapped:" + sizes.str());
  if (!size) throw ValueError("vmap must have at least one non-None value in in_axes (or give axis_size)");
  // Trace f on one example.
  std::vector<Aval> example;
  for (size_t k = 0; k < arrays.size(); ++k) {
    Aval a{arrays[k].dtype(), arrays[k].shape(), arrays[k].weak_type()};
    if (axis[k]) a.shape.erase(a.shape.begin() + *axis[k]);
    example.push_back(a);
  }
  TracedGraph tg = trace_graph("vmap", example, f);
  std::vector<bool> flags;
  std::vector<Array> args;
  for (size_t k = 0; k < arrays.size(); ++k) {
    flags.push_back(axis[k].has_value());
    args.push_back(axis[k] ? move_axis(arrays[k], *axis[k], 0) : arrays[k]);
  }
  for (auto& c : tg.trace->captured) flags.push_back(false), args.push_back(c);
  BatchInfo info{*size, opt.spmd_axis_name};
  std::vector<bool> out_batched;
  std::vector<Array> res = call_graph(batch_graph(tg.g, flags, info, &out_batched), args, "vmap");
  if (!out_axes.single() && out_axes.per().size() != res.size())
    throw ValueError(cat("vmap out_axes has ", out_axes.per().size(), " entries but the function returns ", res.size(),
                         " arrays"));
  for (size_t k = 0; k < res.size(); ++k) {
    const std::optional<int>& a = out_axes.single() ? out_axes.all() : out_axes.per()[k];
    if (!a) {
      if (out_batched[k])
        throw ValueError(cat("vmap has mapped output (result ", k, ") but out_axes is None"));
      res[k] = res[k].index({0});
      continue;
    }
    res[k] = move_axis(res[k], 0, norm(*a, res[k].ndim(), cat("output ", k)));
  }
  return res;
}

}  // namespace tessel::detail
