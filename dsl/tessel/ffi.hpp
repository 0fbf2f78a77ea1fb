// Your own C++ inside compiled programs (API.md "Custom rules and kernels"):
// ts::ffi::call, a kernel run on each device's own blocks, and
// ts::pure_callback, a host function of whole arrays.
//
//   // A kernel on each device's block of a P('x', 'y') array: no gather.
//   auto scale = ts::ffi::call(
//       [](std::span<const ts::ffi::Buffer> in, std::span<ts::ffi::Buffer> out) {
//         const float* x = in[0].typed_data<float>();
//         float* y = out[0].typed_data<float>();
//         for (std::int64_t i = 0; i < in[0].size(); ++i) y[i] = 2 * x[i];
//       },
//       ts::ShapeDtypeStruct{{8, 6}, ts::float32}, {.sharding_rule = "i j -> i j"});
//   ts::Array y = ts::jit([&](const ts::Array& x) { return scale(x); })(x);
//
// ffi::call(fn, result_shape_dtypes, options)(args...): fn receives the
// device's blocks of the operands and writes its blocks of the results
// (row-major; a result's bytes are not cleared first), on the device's own
// thread, as a library call. How blocks compose is the sharding rule, an
// einsum-like factor rule in Shardy's and custom_partitioning's notation:
// "i k, k j -> i j" names each dim of each operand and result by a factor
// ("1" for a dim of size 1). A factor of the results keeps the split its
// operands have: each device computes its own block, nothing is gathered. A
// factor only in operands is contracted: each device's result is a partial
// sum over its blocks, all-reduced after the call. A factor in
// `need_replication` (and, with several results, a contracted one) is
// gathered whole along it only. Without a rule every operand is gathered
// whole and every device computes the whole results (JAX's ffi_call
// without custom partitioning). Blocks of unevenly split dims carry the
// split's padding (zeros along contracted factors); the results' padding
// is ignored. A kernel that throws fails the program with a ts::Error
// naming the call and the device; the other devices are released.
//
// pure_callback(f, result_shape_dtypes, args..., {.vmap_method}): f(args...)
// (arrays, or C++ scalars passed as they are) on concrete arrays (whole, on the host) returning arrays of
// result_shape_dtypes' shapes and dtypes (a ShapeDtypeStruct, or a pytree
// of them). Pure: it may run once per device, or not at all when its
// results are unused. f must not run tessel computations (the devices are
// running the program that calls it).
//
// vmap_method (both): "sequential" (a loop over the batch, one call per
// element), "sequential_unrolled", "expand_dims" (one call; batched
// operands have a leading batch dim, the others a leading dim of 1: the
// kernel takes a leading batch dim), "broadcast_all" (every operand
// broadcast to the batch). Left empty, vmap of the call is JAX's
// NotImplementedError. Neither call has a derivative: wrap it in
// ts::custom_jvp or ts::custom_vjp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tessel/checkpoint.hpp>
#include <tessel/custom.hpp>
#include <tessel/jit.hpp>
#include <tessel/tree.hpp>

namespace tessel::ffi {

// One device's block of an operand or result.
class Buffer {
 public:
  Buffer(void* data, Shape shape, DType dtype, int device)
      : data_(data), shape_(std::move(shape)), dtype_(dtype), device_(device) {}
  void* data() const { return data_; }
  template <class T>
  T* typed_data() const {
    return static_cast<T*>(data_);
  }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::int64_t size() const { return numel(shape_); }  // elements
  std::size_t size_bytes() const { return std::size_t(size()) * dtype_size(dtype_); }
  int device() const { return device_; }  // the device id (-1: the reference interpreter)

 private:
  void* data_;
  Shape shape_;
  DType dtype_;
  int device_;
};

using Kernel = std::function<void(std::span<const Buffer> in, std::span<Buffer> out)>;

struct CallOptions {
  std::string sharding_rule;                  // "i k, k j -> i j"; empty: gather everything
  std::string vmap_method;                    // see above
  std::vector<std::string> need_replication;  // factors gathered whole (Shardy's need_replication_factors)
  std::string name = "ffi_call";              // in messages and compiled text
};

namespace detail {
// The leaves of result_shape_dtypes, and the arrays back in its structure.
template <class R>
std::vector<ShapeDtypeStruct> result_leaves(const R& r) {
  std::vector<ShapeDtypeStruct> out;
  auto f = [&](const auto& leaf, const std::string&) {
    using L = std::decay_t<decltype(leaf)>;
    if constexpr (std::is_same_v<L, ShapeDtypeStruct>) out.push_back(leaf);
    else if constexpr (std::is_same_v<L, Array>) out.push_back({leaf.shape(), leaf.dtype(), std::nullopt});
    else static_assert(sizeof(L) == 0, "result_shape_dtypes: a pytree of ShapeDtypeStruct (or arrays)");
  };
  checkpoint::detail::each_path(r, "", f);
  return out;
}
template <class R>
auto rebuild_results(const R& r, const std::vector<Array>& arrays) {
  std::size_t i = 0;
  auto g = [&] { return arrays.at(i++); };
  return checkpoint::detail::rebuild(r, g);
}

std::vector<Array> call_leaves(const Kernel& fn, const std::vector<ShapeDtypeStruct>& results,
                               const CallOptions& options, const std::vector<Array>& args);
}  // namespace detail

template <class R>
class Call {
 public:
  Call(Kernel fn, R results, CallOptions options)
      : fn_(std::move(fn)), results_(std::move(results)), options_(std::move(options)) {}
  template <class... Args>
  auto operator()(const Args&... args) const {
    std::vector<Array> leaves;
    std::vector<int> arg_of_leaf;
    tessel::detail::flatten_args(leaves, arg_of_leaf, args...);
    return detail::rebuild_results(results_, detail::call_leaves(fn_, detail::result_leaves(results_), options_, leaves));
  }

 private:
  Kernel fn_;
  R results_;
  CallOptions options_;
};

// jax.ffi.ffi_call(target, result_shape_dtypes, vmap_method=...)(args...),
// with custom_partitioning's sharding rule.
template <class R>
Call<R> call(Kernel fn, R result_shape_dtypes, CallOptions options = {}) {
  return {std::move(fn), std::move(result_shape_dtypes), std::move(options)};
}

}  // namespace tessel::ffi

namespace tessel {

struct PureCallbackOptions {
  std::string vmap_method;
};

namespace detail {
using HostFn = std::function<std::vector<Array>(const std::vector<Array>&)>;
std::vector<Array> pure_callback_leaves(const HostFn& fn, const std::vector<ShapeDtypeStruct>& results,
                                        const PureCallbackOptions& options, const std::vector<Array>& args);

template <class T>
T callback_skeleton(const T& x) {
  static_assert(std::is_same_v<T, Array> || std::is_arithmetic_v<T>,
                "pure_callback: the arguments are arrays or C++ scalars");
  if constexpr (std::is_same_v<T, Array>) return Array();
  else return x;
}

template <class F, class R, class... Args>
auto pure_callback_impl(const F& f, const R& results, const PureCallbackOptions& options, const Args&... args) {
  std::vector<Array> leaves;
  std::vector<int> arg_of_leaf;
  flatten_args(leaves, arg_of_leaf, args...);
  // Kept in the compiled program: f and the arguments' structure, by value.
  HostFn host = [f, skeleton = std::tuple<Args...>{callback_skeleton(args)...}](const std::vector<Array>& xs) {
    std::size_t i = 0;
    const std::tuple<Args...> a = std::apply(
        [&](const auto&... s) { return std::tuple<Args...>{substitute(s, xs, i)...}; }, skeleton);
    return tree::flatten(std::apply(f, a));
  };
  return ffi::detail::rebuild_results(results, pure_callback_leaves(host, ffi::detail::result_leaves(results), options, leaves));
}
}  // namespace detail

// jax.pure_callback(f, result_shape_dtypes, *args, vmap_method=...): the
// last argument may be the options.
template <class F, class R, class... Rest>
auto pure_callback(F f, const R& result_shape_dtypes, const Rest&... rest) {
  const auto all = std::forward_as_tuple(rest...);
  constexpr std::size_t n = sizeof...(Rest);
  if constexpr (n > 0 && std::is_same_v<std::decay_t<std::tuple_element_t<n - 1, std::tuple<Rest...>>>, PureCallbackOptions>) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return detail::pure_callback_impl(f, result_shape_dtypes, std::get<n - 1>(all), std::get<I>(all)...);
    }(std::make_index_sequence<n - 1>{});
  } else {
    return detail::pure_callback_impl(f, result_shape_dtypes, PureCallbackOptions{}, rest...);
  }
}

}  // namespace tessel
