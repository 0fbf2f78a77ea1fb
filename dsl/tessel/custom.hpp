// ts::custom_jvp and ts::custom_vjp (API.md "Custom rules and kernels"):
// functions whose derivatives are the user's rules, with JAX's semantics.
//
//   auto log1pexp = ts::custom_jvp(
//       [](const ts::Array& x) { return ts::log1p(ts::exp(x)); },
//       [](const std::tuple<ts::Array>& primals, const std::tuple<ts::Array>& tangents) {
//         auto [x] = primals;
//         auto [t] = tangents;
//         return std::pair(log1pexp_value(x), t * (1 - 1 / (1 + ts::exp(x))));
//       });
//
//   auto clip_gradient = ts::custom_vjp(
//       [](const ts::Array& x) { return x; },                                    // f(args...)
//       [](const ts::Array& x) { return std::pair(x, std::tuple<>{}); },      // fwd: (f's result, residuals)
//       [](std::tuple<>, const ts::Array& g) { return ts::clip(g, -1, 1); });  // bwd(residuals, cotangent)
//
// custom_jvp(f, jvp): jvp(primals, tangents) gets std::tuple<Args...> of the
// arguments and of their tangents (same types; a C++ scalar argument is
// passed as is in both) and returns a pair (f's result, its tangent), both
// of f's result type. custom_vjp(f, fwd, bwd): fwd(args...) returns a pair
// (f's result, residuals: any pytree); bwd(residuals, cotangent of the
// result) returns the cotangents of the arguments: a std::tuple with one per
// argument (or, for one argument, the cotangent itself); C++ scalar entries
// (a double argument's "cotangent") are ignored, as are C++ scalars among
// the residuals, which reach bwd as they were.
//
// The rule is what grad, vjp, jvp, jacfwd, jacrev and hessian use, inside
// jit, vmap (the rules batched), shard_map and control flow; everywhere
// else (running, propagation, partitioning) the call is f. grad of grad
// differentiates a custom_jvp rule. A custom_vjp function has no forward
// mode (jvp of it is JAX's TypeError). CustomOptions::nondiff_argnums: those
// arguments get zero tangents and no cotangent (JAX's nondiff_argnums,
// with the arguments kept in place). Arrays the functions close over are
// constants to the rules: no derivative flows to them (pass what should be
// differentiated as an argument); bwd may not close over arrays (return
// them from fwd as residuals).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <tessel/jit.hpp>
#include <tessel/tree.hpp>

namespace tessel {

struct CustomOptions {
  std::vector<int> nondiff_argnums;
};

namespace detail {
using LeafFn = std::function<std::vector<Array>(const std::vector<Array>&)>;
using BwdFn = std::function<std::vector<Array>(const std::vector<Array>& residuals, const std::vector<Array>& cotangents)>;
// jvp: (primal leaves, tangent leaves) -> (result leaves, result tangent leaves).
std::vector<Array> custom_jvp_call(const std::string& name, const LeafFn& fun, const LeafFn& jvp,
                                   const std::vector<Array>& args, const std::vector<std::int64_t>& nondiff);
// fwd: leaves -> (result leaves, residual leaves).
std::vector<Array> custom_vjp_call(const std::string& name, const LeafFn& fun, const LeafFn& fwd, const BwdFn& bwd,
                                   const std::vector<Array>& args, const std::vector<std::int64_t>& nondiff);

inline std::vector<std::int64_t> leaves_of_args(const std::vector<int>& arg_of_leaf, const std::vector<int>& argnums,
                                                int nargs) {
  for (int a : argnums)
    if (a < 0 || a >= nargs)
      throw ValueError("custom derivative: nondiff_argnums entry " + std::to_string(a) + " is out of range for " +
                       std::to_string(nargs) + " arguments");
  std::vector<std::int64_t> out;
  for (std::size_t k = 0; k < arg_of_leaf.size(); ++k)
    for (int a : argnums)
      if (arg_of_leaf[k] == a) out.push_back(std::int64_t(k));
  return out;
}

// The arrays of a pytree, in order; its C++ scalars stay in the structure
// (substitute puts the arrays back), as for jit's arguments.
template <class T>
std::vector<Array> arrays_of(const T& t) {
  std::vector<Array> out;
  Key unused;
  flatten_arg(t, false, out, unused);
  return out;
}

template <class P>
std::vector<Array> flatten_pair(const P& p) {
  const auto& [a, b] = p;
  std::vector<Array> r = tree::flatten(a), s = tree::flatten(b);
  r.insert(r.end(), s.begin(), s.end());
  return r;
}
}  // namespace detail

template <class F, class Jvp>
class CustomJvpFunction {
 public:
  CustomJvpFunction(F f, Jvp jvp, CustomOptions options)
      : f_(std::move(f)), jvp_(std::move(jvp)), options_(std::move(options)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    std::vector<Array> leaves;
    std::vector<int> arg_of_leaf;
    detail::flatten_args(leaves, arg_of_leaf, args...);
    std::shared_ptr<R> shape;
    auto fun = [&](const std::vector<Array>& xs) { return detail::call_on_leaves<R>(f_, shape, xs, args...); };
    auto rule = [&](const std::vector<Array>& xs) {
      const std::vector<Array> p(xs.begin(), xs.begin() + std::ptrdiff_t(xs.size() / 2)),
          t(xs.begin() + std::ptrdiff_t(xs.size() / 2), xs.end());
      std::size_t i = 0, k = 0;
      const std::tuple<Args...> primals{detail::substitute(args, p, i)...};
      const std::tuple<Args...> tangents{detail::substitute(args, t, k)...};
      return detail::flatten_pair(jvp_(primals, tangents));
    };
    const auto nondiff = detail::leaves_of_args(arg_of_leaf, options_.nondiff_argnums, int(sizeof...(Args)));
    std::vector<Array> outs = detail::custom_jvp_call("custom_jvp", fun, rule, leaves, nondiff);
    return tree::unflatten(*shape, outs);
  }

 private:
  F f_;
  Jvp jvp_;
  CustomOptions options_;
};

template <class F, class Fwd, class Bwd>
class CustomVjpFunction {
 public:
  CustomVjpFunction(F f, Fwd fwd, Bwd bwd, CustomOptions options)
      : f_(std::move(f)), fwd_(std::move(fwd)), bwd_(std::move(bwd)), options_(std::move(options)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    using FR = std::decay_t<std::invoke_result_t<const Fwd&, const Args&...>>;
    using Res = std::decay_t<std::tuple_element_t<1, FR>>;
    std::vector<Array> leaves;
    std::vector<int> arg_of_leaf;
    detail::flatten_args(leaves, arg_of_leaf, args...);
    std::shared_ptr<R> shape;
    std::shared_ptr<Res> res_shape;
    auto fun = [&](const std::vector<Array>& xs) { return detail::call_on_leaves<R>(f_, shape, xs, args...); };
    auto fwd = [&](const std::vector<Array>& xs) {
      std::size_t i = 0;
      const std::tuple<Args...> a{detail::substitute(args, xs, i)...};
      const FR out = std::apply(fwd_, a);
      res_shape = std::make_shared<Res>(std::get<1>(out));
      std::vector<Array> r = tree::flatten(std::get<0>(out)), rr = detail::arrays_of(std::get<1>(out));
      r.insert(r.end(), rr.begin(), rr.end());
      return r;
    };
    auto bwd = [&](const std::vector<Array>& res, const std::vector<Array>& cts) {
      std::size_t i = 0;
      return detail::arrays_of(bwd_(detail::substitute(*res_shape, res, i), tree::unflatten(*shape, cts)));
    };
    const auto nondiff = detail::leaves_of_args(arg_of_leaf, options_.nondiff_argnums, int(sizeof...(Args)));
    std::vector<Array> outs = detail::custom_vjp_call("custom_vjp", fun, fwd, bwd, leaves, nondiff);
    return tree::unflatten(*shape, outs);
  }

 private:
  F f_;
  Fwd fwd_;
  Bwd bwd_;
  CustomOptions options_;
};

// jax.custom_jvp(f) with f.defjvp(jvp).
template <class F, class Jvp>
CustomJvpFunction<F, Jvp> custom_jvp(F f, Jvp jvp, CustomOptions options = {}) {
  return {std::move(f), std::move(jvp), std::move(options)};
}
// jax.custom_vjp(f) with f.defvjp(fwd, bwd).
template <class F, class Fwd, class Bwd>
CustomVjpFunction<F, Fwd, Bwd> custom_vjp(F f, Fwd fwd, Bwd bwd, CustomOptions options = {}) {
  return {std::move(f), std::move(fwd), std::move(bwd), std::move(options)};
}

}  // namespace tessel
