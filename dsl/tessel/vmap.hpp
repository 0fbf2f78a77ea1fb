// ts::vmap(f, in_axes, out_axes): f mapped over an axis of its arguments,
// as jax.vmap. f is traced once on one example; the trace is batched by
// each primitive's batching rule (tracer/batching.hpp), so the result is one
// program over the whole batch, not a loop over examples (a primitive with
// no closed rule for its operands maps over the batch inside the program).
//
//   auto f = ts::vmap([](ts::Array x, ts::Array w) { return ts::dot(w, x); }, {0, std::nullopt});
//   ts::Array ys = f(xs, w);  // xs: [B, n], w: [m, n] shared, ys: [B, m]
//
// in_axes: one axis for every argument, or one per argument (std::nullopt:
// not mapped); an argument's axis applies to each of its leaves. out_axes:
// one axis for every result leaf, or one per result leaf (std::nullopt: the
// result must not depend on the mapped axis). Composes with jit, grad and
// shard_map; spmd_axis_name splits the batch dimension over that mesh axis
// in shard_map specs and sharding constraints inside f.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <tessel/jit.hpp>
#include <tessel/tree.hpp>

namespace tessel {

class VmapAxes {
 public:
  VmapAxes(int axis) : all_(axis) {}
  VmapAxes(std::nullopt_t) : all_(std::nullopt) {}
  VmapAxes(std::initializer_list<std::optional<int>> per) : per_(per), single_(false) {}
  VmapAxes(std::vector<std::optional<int>> per) : per_(std::move(per)), single_(false) {}
  bool single() const { return single_; }
  const std::optional<int>& all() const { return all_; }
  const std::vector<std::optional<int>>& per() const { return per_; }

 private:
  std::optional<int> all_ = 0;
  std::vector<std::optional<int>> per_;
  bool single_ = true;
};

struct VmapOptions {
  std::optional<std::int64_t> axis_size;  // needed when no argument is mapped
  std::string spmd_axis_name;             // mesh axis splitting the batch inside f (empty: none)
};

namespace detail {
// The machinery behind Vmapped (dsl/src/vmap.cpp): arrays flattened from the
// arguments, the argument each came from, and f on flat leaves.
std::vector<Array> vmap_call(const std::vector<Array>& arrays, const std::vector<int>& arg_of_leaf, std::size_t nargs,
                             const VmapAxes& in_axes, const VmapAxes& out_axes, const VmapOptions& opt,
                             const std::function<std::vector<Array>(const std::vector<Array>&)>& f);
}  // namespace detail

template <class F>
class Vmapped {
 public:
  Vmapped(F f, VmapAxes in_axes, VmapAxes out_axes, VmapOptions opt)
      : f_(std::move(f)), in_(std::move(in_axes)), out_(std::move(out_axes)), opt_(std::move(opt)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    std::vector<Array> arrays;
    std::vector<int> arg_of_leaf;
    detail::flatten_args(arrays, arg_of_leaf, args...);
    std::shared_ptr<R> shape;
    auto outs = detail::vmap_call(arrays, arg_of_leaf, sizeof...(Args), in_, out_, opt_,
                                  [&](const std::vector<Array>& leaves) {
                                    return detail::call_on_leaves<R>(f_, shape, leaves, args...);
                                  });
    return tree::unflatten(*shape, outs);
  }

 private:
  F f_;
  VmapAxes in_, out_;
  VmapOptions opt_;
};

template <class F>
Vmapped<std::decay_t<F>> vmap(F&& f, VmapAxes in_axes = 0, VmapAxes out_axes = 0, VmapOptions opt = {}) {
  return Vmapped<std::decay_t<F>>(std::forward<F>(f), std::move(in_axes), std::move(out_axes), std::move(opt));
}

}  // namespace tessel
