// ts::jacfwd, jacrev, hessian, linearize (API.md "Custom rules and
// kernels"; jax.jacfwd and friends). As JAX builds them: the argument's
// leaves are raveled into one vector of N values, and jvp (forward) or vjp
// (reverse) is vmapped over the N (or M, the outputs' values) rows of an
// identity matrix: one batched program, not N programs.
//
//   auto J = ts::jacrev(f)(x);          // f: R^n -> R^m, J: [m, n]
//   auto H = ts::hessian(loss, 1)(x, w);  // w.r.t. argument 1
//
// The Jacobian of an output leaf of shape S with respect to an argument leaf
// of shape T has shape S + T. Either the argument or the output may be a
// pytree: a pytree argument gives a tree shaped like it (one Jacobian per
// leaf); a pytree output gives a tree shaped like it.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <tessel/autodiff.hpp>
#include <tessel/tree.hpp>
#include <tessel/vmap.hpp>

namespace tessel {

namespace detail {

// The values of `leaves` as one vector (converted to `dtype`).
Array ravel_leaves(const std::vector<Array>& leaves, DType dtype);
// The inverse: `v` cut into pieces shaped (and typed) as `like`.
std::vector<Array> unravel_leaves(const Array& v, const std::vector<Array>& like);
// `jac` is [M, N] (rows: the outputs' values, columns: the argument's):
// the block of output leaf i and argument leaf j, shaped out_i + arg_j.
std::vector<std::vector<Array>> split_jacobian(const Array& jac, const std::vector<Array>& outs,
                                               const std::vector<Array>& args);
// TypeError unless every leaf is floating or complex (jax's message for jacfwd/jacrev).
void check_differentiable(const std::vector<Array>& leaves, const char* who, int argnum);

// With respect to argument Argnum, or (Argnum = -1) the run-time argnum.
template <class F, bool Forward, int Argnum = -1>
class JacobianFn {
 public:
  JacobianFn(F f, int argnum) : f_(std::move(f)), argnum_(argnum) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    if constexpr (Argnum >= 0) {
      static_assert(std::size_t(Argnum) < sizeof...(Args), "jacfwd/jacrev: argnum out of range");
      return at<R, std::size_t(Argnum)>(std::forward_as_tuple(args...), std::index_sequence_for<Args...>{});
    } else {
      return dispatch_on<R, 0>(std::forward_as_tuple(args...), std::index_sequence_for<Args...>{});
    }
  }

 private:
  // Finds the run-time argnum_ among the arguments (all of one type).
  template <class R, std::size_t K, class Tuple, std::size_t... I>
  auto dispatch_on(const Tuple& args, std::index_sequence<I...> seq) const {
    if constexpr (K + 1 < sizeof...(I)) {
      using Next = decltype(dispatch_on<R, K + 1>(args, seq));
      using Here = decltype(at<R, K>(args, seq));
      static_assert(std::is_same_v<Next, Here>,
                    "jacfwd/jacrev with a run-time argnum: the arguments must be of one type (else name the "
                    "argument at compile time: ts::jacrev<N>(f), or ts::jacrev(f) for argument 0)");
      if (int(K) == argnum_) return at<R, K>(args, seq);
      return dispatch_on<R, K + 1>(args, seq);
    } else {
      if (int(K) != argnum_) throw TypeError("jacobian: argnum " + std::to_string(argnum_) + " is out of range");
      return at<R, K>(args, seq);
    }
  }

  // The Jacobian of f with respect to argument K.
  template <class R, std::size_t K, class Tuple, std::size_t... I>
  auto at(const Tuple& args, std::index_sequence<I...>) const {
    using A = std::decay_t<std::tuple_element_t<K, Tuple>>;
    static_assert(std::is_same_v<A, Array> || std::is_same_v<R, Array>,
                  "jacfwd/jacrev: take the argument as one ts::Array or return one ts::Array (a pytree of "
                  "pytrees has no C++ type here)");
    const A& x = std::get<K>(args);
    const std::vector<Array> x_leaves = tree::flatten(x);
    check_differentiable(x_leaves, Forward ? "jacfwd" : "jacrev", int(K));
    const DType dt = x_leaves.empty() ? DType::float32 : x_leaves[0].dtype();
    Array v0 = ravel_leaves(x_leaves, dt);
    // f as a function of the raveled argument, the others fixed; its outputs raveled.
    // (The outputs' structure and leaves are kept from the first call, for their shapes.)
    std::shared_ptr<R> r_like;
    std::vector<Array> out_like;
    auto g = [&](const Array& v) {
      A xv = tree::unflatten(x, unravel_leaves(v, x_leaves));
      R r = f_(pick_arg<I, K>(std::get<I>(args), xv)...);
      std::vector<Array> outs = tree::flatten(r);
      if (!r_like) {
        r_like = std::make_shared<R>(r);
        out_like = outs;
      }
      return ravel_leaves(outs, outs.empty() ? dt : outs[0].dtype());
    };
    const std::int64_t n = v0.size();
    Array jac;  // [M, N]
    if constexpr (Forward) {
      Array basis = eye(n, std::nullopt, 0, dt);
      // Rows of the vmapped jvp are columns of the Jacobian.
      Array cols = vmap([&](const Array& t) { return jvp(g, v0, t).second; })(basis);  // [N, M]
      jac = transpose(cols);
    } else {
      auto [y, pullback] = vjp(g, v0);
      Array basis = eye(y.size(), std::nullopt, 0, y.dtype());
      jac = vmap([&](const Array& ct) { return std::get<0>(pullback(ct)); })(basis);  // [M, N]
    }
    auto blocks = split_jacobian(jac, out_like, x_leaves);
    if constexpr (std::is_same_v<A, Array>) {
      // One argument leaf: the output's tree, each leaf its block.
      std::vector<Array> per_out;
      for (auto& row : blocks) per_out.push_back(row.at(0));
      if constexpr (std::is_same_v<R, Array>) return per_out.at(0);
      else return tree::unflatten(*r_like, per_out);
    } else {
      // One output leaf: the argument's tree, each leaf its block.
      return tree::unflatten(x, blocks.at(0));
    }
  }

  template <std::size_t I, std::size_t K, class T, class X>
  static decltype(auto) pick_arg(const T& a, const X& x) {
    if constexpr (I == K) return (x);
    else return (a);
  }

  F f_;
  int argnum_;
};

// f's first result (f returns (out, aux): has_aux).
template <class F>
struct FirstOf {
  F f;
  template <class... Args>
  auto operator()(const Args&... args) const {
    return f(args...).first;
  }
};

// has_aux: the Jacobian of f's first result, and its second (aux), not
// differentiated. aux comes from a second call of f on the same arguments
// (under jit both calls trace the same nodes, which the IR shares).
template <class F, bool Forward, int Argnum = -1>
class JacobianAuxFn {
 public:
  JacobianAuxFn(F f, int argnum) : f_(f), jac_(FirstOf<F>{std::move(f)}, argnum) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    static_assert(is_std_pair<R>::value, "jacfwd/jacrev with ts::has_aux: f must return std::pair(output, aux)");
    auto jac = jac_(args...);
    return std::make_pair(std::move(jac), f_(args...).second);
  }

 private:
  F f_;
  JacobianFn<FirstOf<F>, Forward, Argnum> jac_;
};

}  // namespace detail

// has_aux (jax's has_aux=True): f returns std::pair(output, aux); the result
// is std::pair(Jacobian of output, aux):
//   auto [J, aux] = ts::jacrev(f, ts::has_aux)(x);
template <class F>
detail::JacobianAuxFn<std::decay_t<F>, true, 0> jacfwd(F&& f, HasAux) {
  return {std::forward<F>(f), 0};
}
template <int Argnum, class F>
detail::JacobianAuxFn<std::decay_t<F>, true, Argnum> jacfwd(F&& f, HasAux) {
  return {std::forward<F>(f), Argnum};
}
template <class F>
detail::JacobianAuxFn<std::decay_t<F>, true> jacfwd(F&& f, int argnum, HasAux) {
  return {std::forward<F>(f), argnum};
}
template <class F>
detail::JacobianAuxFn<std::decay_t<F>, false, 0> jacrev(F&& f, HasAux) {
  return {std::forward<F>(f), 0};
}
template <int Argnum, class F>
detail::JacobianAuxFn<std::decay_t<F>, false, Argnum> jacrev(F&& f, HasAux) {
  return {std::forward<F>(f), Argnum};
}
template <class F>
detail::JacobianAuxFn<std::decay_t<F>, false> jacrev(F&& f, int argnum, HasAux) {
  return {std::forward<F>(f), argnum};
}

// jax.jacfwd(f, argnums): forward mode, one jvp per argument value (vmapped).
// jacfwd(f) and jacfwd<N>(f) name the argument at compile time (the others
// may be of any types); jacfwd(f, argnum) at run time (all of one type).
template <class F>
detail::JacobianFn<std::decay_t<F>, true, 0> jacfwd(F&& f) {
  return detail::JacobianFn<std::decay_t<F>, true, 0>(std::forward<F>(f), 0);
}
template <int Argnum, class F>
detail::JacobianFn<std::decay_t<F>, true, Argnum> jacfwd(F&& f) {
  return detail::JacobianFn<std::decay_t<F>, true, Argnum>(std::forward<F>(f), Argnum);
}
template <class F>
detail::JacobianFn<std::decay_t<F>, true> jacfwd(F&& f, int argnum) {
  return detail::JacobianFn<std::decay_t<F>, true>(std::forward<F>(f), argnum);
}
// jax.jacrev(f, argnums): reverse mode, one vjp per output value (vmapped).
template <class F>
detail::JacobianFn<std::decay_t<F>, false, 0> jacrev(F&& f) {
  return detail::JacobianFn<std::decay_t<F>, false, 0>(std::forward<F>(f), 0);
}
template <int Argnum, class F>
detail::JacobianFn<std::decay_t<F>, false, Argnum> jacrev(F&& f) {
  return detail::JacobianFn<std::decay_t<F>, false, Argnum>(std::forward<F>(f), Argnum);
}
template <class F>
detail::JacobianFn<std::decay_t<F>, false> jacrev(F&& f, int argnum) {
  return detail::JacobianFn<std::decay_t<F>, false>(std::forward<F>(f), argnum);
}
// jax.hessian(f, argnums): jacfwd(jacrev(f)).
template <class F>
auto hessian(F&& f) {
  return jacfwd(jacrev(std::forward<F>(f)));
}
template <int Argnum, class F>
auto hessian(F&& f) {
  return jacfwd<Argnum>(jacrev<Argnum>(std::forward<F>(f)));
}
template <class F>
auto hessian(F&& f, int argnum) {
  return jacfwd(jacrev(std::forward<F>(f), argnum), argnum);
}

// jax.linearize: (f(primals...), a function of tangents giving the
// directional derivative at primals).
template <class F, class... Args>
auto linearize(const F& f, const Args&... primals) {
  using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
  std::tuple<Args...> saved{primals...};
  R out = f(primals...);
  std::function<R(const Args&...)> f_jvp = [f, saved](const Args&... tangents) {
    return jvp(f, saved, std::tuple<Args...>{tangents...}).second;
  };
  return std::make_pair(out, f_jvp);
}

}  // namespace tessel
