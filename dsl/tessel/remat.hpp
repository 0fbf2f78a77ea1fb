// ts::remat (jax.checkpoint / jax.remat), its policies and checkpoint_name
// (API.md "Custom rules and kernels").
//
//   auto layer = ts::remat([](const ts::Array& h, const ts::Array& w) { return ts::tanh(ts::matmul(h, w)); });
//   auto block = ts::remat(f, {.policy = ts::checkpoint_policies::dots_saveable});
//
// remat(f) computes what f computes. Under reverse mode (grad, vjp, jacrev)
// the values f computes inside are not kept from the forward pass to the
// backward one: the backward pass recomputes them from f's arguments when
// it reaches f, keeping only what the policy saves. Memory falls (see
// Compiled::memory_analysis) at the price of running f's forward twice;
// results and gradients are the same bits. Forward mode and everything
// else see f.
//
// Policies (jax.checkpoint_policies): nothing_saveable (the default:
// recompute everything), everything_saveable (keep everything: no
// recomputation), dots_saveable (keep the results of dot_general: matmul,
// einsum, tensordot...), dots_with_no_batch_dims_saveable (only dots
// without batch dimensions), save_only_these_names(names) (keep the values
// named by checkpoint_name(x, name) with one of the names),
// save_any_names_but_these(names). prevent_cse (default true): the
// recomputation is kept apart from the forward pass's values and waits for
// the backward pass to reach it; false lets the compiler merge the two,
// which then saves nothing (JAX's advice: false inside scan, whose loop
// already keeps them apart).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <tessel/custom.hpp>
#include <tessel/jit.hpp>
#include <tessel/tree.hpp>

namespace tessel {

// A remat policy: which of f's intermediates the backward pass keeps.
struct CheckpointPolicy {
  enum class Kind : std::int8_t {
    nothing_saveable,
    everything_saveable,
    dots_saveable,
    dots_with_no_batch_dims_saveable,
    save_only_these_names,
    save_any_names_but_these,
  };
  Kind kind = Kind::nothing_saveable;
  std::vector<std::string> names;  // the save_*_names policies' names
};

namespace checkpoint_policies {
inline const CheckpointPolicy nothing_saveable{CheckpointPolicy::Kind::nothing_saveable, {}};
inline const CheckpointPolicy everything_saveable{CheckpointPolicy::Kind::everything_saveable, {}};
inline const CheckpointPolicy dots_saveable{CheckpointPolicy::Kind::dots_saveable, {}};
inline const CheckpointPolicy checkpoint_dots = dots_saveable;
inline const CheckpointPolicy dots_with_no_batch_dims_saveable{CheckpointPolicy::Kind::dots_with_no_batch_dims_saveable,
                                                               {}};
inline const CheckpointPolicy checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable;
inline CheckpointPolicy save_only_these_names(std::vector<std::string> names) {
  return {CheckpointPolicy::Kind::save_only_these_names, std::move(names)};
}
inline CheckpointPolicy save_any_names_but_these(std::vector<std::string> names) {
  return {CheckpointPolicy::Kind::save_any_names_but_these, std::move(names)};
}
}  // namespace checkpoint_policies

struct RematOptions {
  CheckpointPolicy policy = checkpoint_policies::nothing_saveable;
  bool prevent_cse = true;
};

// jax.ad_checkpoint.checkpoint_name: x, named for save_only_these_names and
// save_any_names_but_these (every leaf of a pytree).
Array checkpoint_name(const Array& x, const std::string& name);
template <class T>
  requires(!std::is_same_v<std::decay_t<T>, Array>)
T checkpoint_name(const T& tree, const std::string& name) {
  return tree::map([&](const Array& x) { return checkpoint_name(x, name); }, tree);
}

namespace detail {
// f applied to `args` as one remat_call node (f traced on their avals).
std::vector<Array> remat_call(const std::string& name, const LeafFn& fun, const std::vector<Array>& args,
                              const RematOptions& options);
}  // namespace detail

template <class F>
class RematFunction {
 public:
  RematFunction(F f, RematOptions options) : f_(std::move(f)), options_(std::move(options)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    std::vector<Array> leaves;
    std::vector<int> arg_of_leaf;
    detail::flatten_args(leaves, arg_of_leaf, args...);
    std::shared_ptr<R> shape;
    auto fun = [&](const std::vector<Array>& xs) { return detail::call_on_leaves<R>(f_, shape, xs, args...); };
    std::vector<Array> outs = detail::remat_call("checkpoint", fun, leaves, options_);
    return tree::unflatten(*shape, outs);
  }

 private:
  F f_;
  RematOptions options_;
};

// jax.checkpoint(f, policy=..., prevent_cse=...) (also jax.remat).
template <class F>
RematFunction<F> remat(F f, RematOptions options = {}) {
  return {std::move(f), std::move(options)};
}

}  // namespace tessel
