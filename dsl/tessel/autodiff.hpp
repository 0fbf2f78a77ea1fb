// ts::grad, value_and_grad, vjp, jvp (API.md "Transformations"). Each traces
// the function into a graph, transforms it (tracer/autodiff.hpp), and runs
// the result: inline when called while tracing (so grad composes with jit
// both ways), else as one compiled program.
#pragma once

#include <functional>
#include <memory>
#include <tuple>
#include <typeinfo>
#include <utility>

#include <tessel/jit.hpp>
#include <tessel/ops.hpp>

namespace tessel {

namespace detail {
// Runs the traced function's vjp graph on inputs (arguments + captured) with
// output cotangents `cts` (empty: one scalar output, cotangent 1); returns
// the outputs, then the cotangents of the inputs marked in wrt. Without
// forward_effects the forward pass's prints and callbacks do not run (vjp's
// function: the forward pass ran them when vjp was called).
std::vector<Array> run_vjp(const Traced& t, const std::vector<Array>& inputs, const std::vector<bool>& wrt,
                           std::vector<Array> cts, bool forward_effects = true);
// Runs the jvp graph: outputs, then output tangents.
std::vector<Array> run_jvp(const Traced& t, const std::vector<Array>& inputs, const std::vector<bool>& wrt,
                           const std::vector<Array>& tangents);
// Runs the traced function itself.
std::vector<Array> run_traced(const Traced& t, const std::vector<Array>& inputs);
// grad with has_aux: cotangent 1 for output 0 (which must be a real
// scalar), zeros for the others (the aux leaves, not differentiated).
std::vector<Array> value_and_aux_cotangents(const Traced& t);

template <class T>
struct is_std_pair : std::false_type {};
template <class A, class B>
struct is_std_pair<std::pair<A, B>> : std::true_type {};

// Traces f on args: the arrays of the arguments (flattened, in order), which
// argument each came from, and the traced function.
template <class F, class... Args>
Traced trace_args(const F& f, const std::string& name, std::vector<Array>& arrays, std::vector<int>& arg_of_leaf,
                  const Args&... args) {
  using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
  flatten_args(arrays, arg_of_leaf, args...);
  return trace(name, arrays,
               [&](const std::vector<Array>& tracers, std::function<std::any(const std::vector<Array>&)>& rebuild) {
                 std::shared_ptr<R> shape;
                 auto leaves = call_on_leaves<R>(f, shape, tracers, args...);
                 rebuild = [shape](const std::vector<Array>& outs) { return std::any(tree::unflatten(*shape, outs)); };
                 return leaves;
               });
}

// Argument `which` of the tuple, as type A (it must be of that type).
template <class A, std::size_t I = 0, class Tuple>
const A& arg_as(const Tuple& args, int which) {
  if constexpr (I < std::tuple_size_v<Tuple>) {
    if (int(I) == which) {
      using T = std::decay_t<std::tuple_element_t<I, Tuple>>;
      if constexpr (std::is_same_v<T, A>) return std::get<I>(args);
      else throw TypeError("grad: with a run-time argnum the differentiated argument must have the type of argument 0; "
                           "use ts::grad<N>(f) for argument N of another type");
    }
    return arg_as<A, I + 1>(args, which);
  } else {
    throw TypeError("grad: argnum " + std::to_string(which) + " is out of range");
  }
}
}  // namespace detail

// jax's has_aux=True: f returns std::pair(value, aux); aux (any pytree) comes
// back beside the gradient and is not differentiated:
//   auto [g, aux] = ts::grad(f, ts::has_aux)(x);
//   auto [value_aux, g] = ts::value_and_grad(f, ts::has_aux)(x);  // value_aux: (value, aux)
struct HasAux {};
inline constexpr HasAux has_aux{};

// The gradient of a function with one real scalar output, with respect to
// argument Argnum (or, with Argnum = -1, the run-time argnum); WithValue
// returns (value, gradient) as jax.value_and_grad; Aux: f returns (value, aux).
template <class F, int Argnum = -1, bool WithValue = false, bool Aux = false>
class GradFn {
 public:
  GradFn(F f, int argnum) : f_(std::move(f)), argnum_(argnum) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    constexpr std::size_t S = Argnum < 0 ? 0 : std::size_t(Argnum);
    static_assert(S < sizeof...(Args), "grad: argnum out of range");
    using A = std::decay_t<std::tuple_element_t<S, std::tuple<Args...>>>;
    const int which = Argnum < 0 ? argnum_ : Argnum;
    if constexpr (std::is_arithmetic_v<A>) {
      // C++ scalars are compile-time values, not traced: refuse rather than return a gradient of zero.
      if constexpr (std::is_integral_v<A>)
        throw TypeError("grad requires real- or complex-valued inputs (input dtype that is a sub-dtype of inexact), "
                        "but argument " + std::to_string(which) + " is a C++ " + (std::is_same_v<A, bool> ? "bool" : "integer") +
                        " (int32); if you want to use integer-valued inputs, use vjp");
      else
        throw TypeError("grad: argument " + std::to_string(which) +
                        " is a C++ floating-point scalar, a compile-time constant in tessel; pass it as a ts::Array "
                        "(ts::array(x)) to differentiate with respect to it");
    }
    std::vector<Array> arrays;
    std::vector<int> arg_of_leaf;
    detail::Traced t = detail::trace_args(f_, "grad", arrays, arg_of_leaf, args...);
    std::vector<bool> wrt(arrays.size() + t.captured.size(), false);
    for (std::size_t k = 0; k < arrays.size(); ++k) wrt[k] = arg_of_leaf[k] == which;
    auto inputs = arrays;
    inputs.insert(inputs.end(), t.captured.begin(), t.captured.end());
    if constexpr (Aux) {
      using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
      static_assert(detail::is_std_pair<R>::value && std::is_same_v<typename R::first_type, Array>,
                    "grad/value_and_grad with ts::has_aux: f must return std::pair<ts::Array, Aux>");
      std::vector<Array> outs = detail::run_vjp(t, inputs, wrt, detail::value_and_aux_cotangents(t));
      std::vector<Array> grads(outs.begin() + std::ptrdiff_t(t.outputs), outs.end());
      std::size_t next = 0;
      A g = detail::substitute(detail::arg_as<A>(std::forward_as_tuple(args...), which), grads, next);
      R r = std::any_cast<R>(t.rebuild(std::vector<Array>(outs.begin(), outs.begin() + std::ptrdiff_t(t.outputs))));
      if constexpr (WithValue) return std::make_pair(r, g);
      else return std::make_pair(g, r.second);
    } else {
      std::vector<Array> outs = detail::run_vjp(t, inputs, wrt, {});
      std::vector<Array> grads(outs.begin() + std::ptrdiff_t(t.outputs), outs.end());
      std::size_t next = 0;
      A g = detail::substitute(detail::arg_as<A>(std::forward_as_tuple(args...), which), grads, next);
      if constexpr (WithValue) return std::make_pair(outs[0], g);
      else return g;
    }
  }

 private:
  F f_;
  int argnum_;
};

template <class F, int Argnum = -1>
using Grad = GradFn<F, Argnum, false>;
template <class F, int Argnum = -1>
using ValueAndGrad = GradFn<F, Argnum, true>;

// jax.grad(f, argnums): f must return one real scalar array.
template <class F>
Grad<std::decay_t<F>> grad(F&& f, int argnum = 0) {
  return Grad<std::decay_t<F>>(std::forward<F>(f), argnum);
}
template <int Argnum, class F>
Grad<std::decay_t<F>, Argnum> grad(F&& f) {
  return Grad<std::decay_t<F>, Argnum>(std::forward<F>(f), Argnum);
}
template <class F>
ValueAndGrad<std::decay_t<F>> value_and_grad(F&& f, int argnum = 0) {
  return ValueAndGrad<std::decay_t<F>>(std::forward<F>(f), argnum);
}
template <int Argnum, class F>
ValueAndGrad<std::decay_t<F>, Argnum> value_and_grad(F&& f) {
  return ValueAndGrad<std::decay_t<F>, Argnum>(std::forward<F>(f), Argnum);
}
// With ts::has_aux (jax's has_aux=True).
template <class F>
GradFn<std::decay_t<F>, -1, false, true> grad(F&& f, HasAux) {
  return GradFn<std::decay_t<F>, -1, false, true>(std::forward<F>(f), 0);
}
template <class F>
GradFn<std::decay_t<F>, -1, false, true> grad(F&& f, int argnum, HasAux) {
  return GradFn<std::decay_t<F>, -1, false, true>(std::forward<F>(f), argnum);
}
template <int Argnum, class F>
GradFn<std::decay_t<F>, Argnum, false, true> grad(F&& f, HasAux) {
  return GradFn<std::decay_t<F>, Argnum, false, true>(std::forward<F>(f), Argnum);
}
template <class F>
GradFn<std::decay_t<F>, -1, true, true> value_and_grad(F&& f, HasAux) {
  return GradFn<std::decay_t<F>, -1, true, true>(std::forward<F>(f), 0);
}
template <class F>
GradFn<std::decay_t<F>, -1, true, true> value_and_grad(F&& f, int argnum, HasAux) {
  return GradFn<std::decay_t<F>, -1, true, true>(std::forward<F>(f), argnum);
}
template <int Argnum, class F>
GradFn<std::decay_t<F>, Argnum, true, true> value_and_grad(F&& f, HasAux) {
  return GradFn<std::decay_t<F>, Argnum, true, true>(std::forward<F>(f), Argnum);
}

// jax.vjp: (f(primals), a function from output cotangents to the primals' cotangents).
template <class F, class... Args>
auto vjp(const F& f, const Args&... primals) {
  using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
  std::vector<Array> arrays;
  std::vector<int> arg_of_leaf;
  auto t = std::make_shared<detail::Traced>(detail::trace_args(f, "vjp", arrays, arg_of_leaf, primals...));
  auto inputs = arrays;
  inputs.insert(inputs.end(), t->captured.begin(), t->captured.end());
  R out = std::any_cast<R>(t->rebuild(detail::run_traced(*t, inputs)));
  std::vector<bool> wrt(inputs.size(), false);
  for (std::size_t k = 0; k < arrays.size(); ++k) wrt[k] = true;
  std::tuple<Args...> saved{primals...};
  std::function<std::tuple<Args...>(const R&)> fn = [t, inputs, wrt, saved](const R& ct) {
    std::vector<Array> outs = detail::run_vjp(*t, inputs, wrt, tree::flatten(ct), /*forward_effects=*/false);
    std::vector<Array> cts(outs.begin() + std::ptrdiff_t(t->outputs), outs.end());
    std::size_t next = 0;
    return std::apply([&](const auto&... p) { return std::tuple<Args...>{detail::substitute(p, cts, next)...}; }, saved);
  };
  return std::make_pair(out, fn);
}

// jax.jvp: (f(primals), the directional derivative along tangents).
template <class F, class... Args>
auto jvp(const F& f, const std::tuple<Args...>& primals, const std::tuple<Args...>& tangents) {
  using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
  std::vector<Array> arrays;
  std::vector<int> arg_of_leaf;
  detail::Traced t = std::apply(
      [&](const auto&... p) { return detail::trace_args(f, "jvp", arrays, arg_of_leaf, p...); }, primals);
  std::vector<Array> tans;
  Key key;
  std::apply([&](const auto&... tg) { (detail::flatten_arg(tg, false, tans, key), ...); }, tangents);
  auto inputs = arrays;
  inputs.insert(inputs.end(), t.captured.begin(), t.captured.end());
  std::vector<bool> wrt(inputs.size(), false);
  for (std::size_t k = 0; k < arrays.size(); ++k) wrt[k] = true;
  std::vector<Array> outs = detail::run_jvp(t, inputs, wrt, tans);
  std::vector<Array> primal_out(outs.begin(), outs.begin() + std::ptrdiff_t(t.outputs));
  std::vector<Array> tangent_out(outs.begin() + std::ptrdiff_t(t.outputs), outs.end());
  return std::make_pair(std::any_cast<R>(t.rebuild(primal_out)), std::any_cast<R>(t.rebuild(tangent_out)));
}
template <class F>
auto jvp(const F& f, const Array& primal, const Array& tangent) {
  return jvp(f, std::tuple<Array>(primal), std::tuple<Array>(tangent));
}

}  // namespace tessel
