// shard_map: manual SPMD, the tutorials' third mode of parallelism.
//
//   auto f = ts::shard_map([](ts::Array x) { return ts::psum(ts::sum(x), "x"); },
//                          mesh, P("x"), P());
//
// `f` sees per-device blocks: argument k split as in_specs[k] over the mesh
// (an axis an in_spec leaves out: the block is the same on every device
// along it). Results are put together as out_specs say (an axis an
// out_spec leaves out is a promise that the blocks are equal along it,
// checked at trace time when check_vma is on). Callable eagerly (it
// compiles, like JAX), inside jit, and with jit inside it. Collectives
// (psum, all_gather, ...) run over the named mesh axes of the innermost
// shard_map binding them; outside one they throw ts::NameError.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/jit.hpp>
#include <tessel/sharding.hpp>
#include <tessel/tree.hpp>

namespace tessel {

struct ShardMapOptions {
  bool check_vma = true;
  std::optional<bool> check_rep;        // JAX's older name; when given it is check_vma
  std::vector<std::string> axis_names;  // the manual axes; empty: all the mesh's that no enclosing shard_map made manual
};

// in_specs / out_specs: one PartitionSpec for every array, or one per
// positional argument (its whole pytree) / per result array.
class Specs {
 public:
  Specs(PartitionSpec s) : specs_{std::move(s)}, single_(true) {}
  Specs(std::vector<PartitionSpec> s) : specs_(std::move(s)) {}
  Specs(std::initializer_list<PartitionSpec> s) : specs_(s) {}
  const std::vector<PartitionSpec>& specs() const { return specs_; }
  bool single() const { return single_; }

 private:
  std::vector<PartitionSpec> specs_;
  bool single_ = false;
};

// An axis name, or several ("x" or {"x", "y"}).
class AxisName {
 public:
  AxisName(const char* n) : names_{n} {}
  AxisName(std::string n) : names_{std::move(n)} {}
  AxisName(std::initializer_list<std::string> n) : names_(n) {}
  AxisName(std::vector<std::string> n) : names_(std::move(n)) {}
  const std::vector<std::string>& names() const { return names_; }

 private:
  std::vector<std::string> names_;
};

// ---------------------------------------------------------------- collectives

Array psum(const Array& x, const AxisName& axes);
Array pmean(const Array& x, const AxisName& axes);
Array pmax(const Array& x, const AxisName& axes);
Array pmin(const Array& x, const AxisName& axes);

struct AllGatherOptions {
  int axis = 0;        // where the gathered dimension goes (tiled: which dimension grows)
  bool tiled = false;  // concatenate along `axis` instead of stacking a new one
};
Array all_gather(const Array& x, const AxisName& axis_name, AllGatherOptions opt = {});

struct PsumScatterOptions {
  int scatter_dimension = 0;
  bool tiled = false;  // keep the dimension (divided) instead of removing it (its size must be the axis size)
};
Array psum_scatter(const Array& x, const AxisName& axis_name, PsumScatterOptions opt = {});

// perm: (source, destination) index pairs along the axis; a device no pair
// sends to gets zeros.
Array ppermute(const Array& x, const AxisName& axis_name, const std::vector<std::pair<int, int>>& perm);

struct AllToAllOptions {
  bool tiled = false;
};
Array all_to_all(const Array& x, const AxisName& axis_name, int split_axis, int concat_axis, AllToAllOptions opt = {});

// This device's index along the axes (row-major over several), int32.
Array axis_index(const AxisName& axis_name);
// The number of devices along the axes.
int axis_size(const AxisName& axis_name);
// x made varying over the axes (a type change; the values stay).
Array pvary(const Array& x, const AxisName& axis_name);
// The value of the device at index `source` along the axis, on every device of it.
Array pbroadcast(const Array& x, const AxisName& axis_name, int source);

namespace detail {
// Traces body over blocks of `args` and applies it: the shard_map machinery
// behind ShardMapped (dsl/src/shard_map.cpp). arg_of_leaf: the positional
// argument of each array (for in_specs given per argument).
std::vector<Array> shard_map_call(const std::string& name, const Mesh& mesh, const Specs& in_specs,
                                  const Specs& out_specs, const ShardMapOptions& opt, const std::vector<Array>& args,
                                  const std::vector<int>& arg_of_leaf, std::size_t nargs,
                                  const std::function<std::vector<Array>(const std::vector<Array>&)>& body);
}  // namespace detail

template <class F>
class ShardMapped {
 public:
  ShardMapped(F f, Mesh mesh, Specs in_specs, Specs out_specs, ShardMapOptions opt)
      : f_(std::move(f)), mesh_(std::move(mesh)), in_(std::move(in_specs)), out_(std::move(out_specs)),
        opt_(std::move(opt)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    std::vector<Array> arrays;
    std::vector<int> arg_of_leaf;
    detail::flatten_args(arrays, arg_of_leaf, args...);
    std::shared_ptr<R> shape;
    auto outs = detail::shard_map_call("shard_map", mesh_, in_, out_, opt_, arrays, arg_of_leaf, sizeof...(Args),
                                       [&](const std::vector<Array>& blocks) {
                                         return detail::call_on_leaves<R>(f_, shape, blocks, args...);
                                       });
    return tree::unflatten(*shape, outs);
  }

 private:
  F f_;
  Mesh mesh_;
  Specs in_, out_;
  ShardMapOptions opt_;
};

template <class F>
ShardMapped<std::decay_t<F>> shard_map(F&& f, Mesh mesh, Specs in_specs, Specs out_specs, ShardMapOptions opt = {}) {
  return ShardMapped<std::decay_t<F>>(std::forward<F>(f), std::move(mesh), std::move(in_specs), std::move(out_specs),
                                      std::move(opt));
}

}  // namespace tessel
