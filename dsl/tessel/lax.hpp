// Control flow with traced values, as JAX's lax: cond, switch_, while_loop,
// fori_loop and scan.
//
//   ts::Array y = ts::lax::cond(x.sum() > 0, [](ts::Array v) { return v * 2; },
//                               [](ts::Array v) { return -v; }, x);
//   auto r = ts::lax::fori_loop(0, 10, [](ts::Array i, ts::Array v) { return v + i; }, x);
//   auto [last, ys] = ts::lax::scan([](ts::Array c, ts::Array x) { return std::pair{c + x, c}; }, init, xs);
//
// Each function is traced once into a region of one primitive (cond, while,
// scan), so a loop runs inside the compiled program, not step by step from
// C++. Operands, carries and xs are pytrees (tessel/tree.hpp) whose leaves
// are ts::Array; a loop's carry must keep its type (dtype and shape of every
// leaf): a ts::TypeError names the leaf otherwise. Functions may close over
// arrays (concrete or traced); those become operands of the primitive.
// Eager calls work: the primitive runs as a one-op program.
//
// Differences from JAX: a C++ scalar cannot be a carry leaf (it cannot hold
// a traced value: use a 0-d ts::Array); `unroll` is accepted and does not
// change the compiled loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/tree.hpp>

namespace tessel::lax {

struct ScanOptions {
  std::optional<std::int64_t> length;  // required when xs has no leaves
  bool reverse = false;                // run from the last element of xs to the first
  int unroll = 1;                      // accepted; the loop is not unrolled
};

namespace detail {

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

// The machinery behind the templates below (dsl/src/control.cpp). `what`
// names the function in messages; leaves are flat pytrees.
std::vector<Array> cond_call(const char* what, const Array& index, const std::vector<Fn>& branches,
                             const std::vector<Array>& operands);
std::vector<Array> while_call(const char* what, const Fn& cond_fn, const Fn& body_fn, const std::vector<Array>& init,
                              const std::string& carry_structure);
// f(carry leaves ++ x slice leaves) -> carry leaves ++ y leaves.
std::vector<Array> scan_call(const Fn& f, const std::vector<Array>& init, const std::vector<Array>& xs,
                             const ScanOptions& opt, const std::string& carry_structure);
// fori_loop's trip count from static bounds: hi - lo, or 0.
Array loop_index(std::int64_t v);

[[noreturn]] void scalar_carry(const char* what);
[[noreturn]] void structure_changed(const char* what, const std::string& in, const std::string& out);

// t with its Array leaves replaced by leaves[next...] (scalar leaves: an error).
template <class T>
T with_leaves(const char* what, const T& t, const std::vector<Array>& leaves, std::size_t& next) {
  auto g = [&](const auto& leaf) {
    using L = std::decay_t<decltype(leaf)>;
    if constexpr (std::is_same_v<L, Array>) return leaves.at(next++);
    else {
      scalar_carry(what);
      return leaf;
    }
  };
  return tree::detail::rebuild<tree::detail::ArrayLeaf>(t, g);
}

// The leaves of t (scalar leaves: an error).
template <class T>
std::vector<Array> leaves_of(const char* what, const T& t) {
  std::vector<Array> out;
  auto f = [&](const auto& leaf) {
    using L = std::decay_t<decltype(leaf)>;
    if constexpr (std::is_same_v<L, Array>) out.push_back(leaf);
    else scalar_carry(what);
  };
  tree::detail::each<tree::detail::ArrayLeaf>(t, f);
  return out;
}

template <class R, class F, class... Ops>
Fn branch_fn(const char* what, F& f, std::shared_ptr<R>& shape, const Ops&... operands) {
  return [what, &f, &shape, &operands...](const std::vector<Array>& leaves) {
    [[maybe_unused]] std::size_t next = 0;
    std::tuple<Ops...> args{with_leaves(what, operands, leaves, next)...};
    R r = std::apply(f, args);
    if (!shape) shape = std::make_shared<R>(r);
    else if (tree::structure(*shape) != tree::structure(r))
      structure_changed(what, tree::structure(*shape), tree::structure(r));
    return leaves_of(what, r);
  };
}

// The branches (made by branch_fn over `shape`) applied to the operands'
// leaves by one cond primitive; the result in the branches' structure.
template <class R, class... Ops>
R call_branches(const char* what, const Array& index, const std::vector<Fn>& fns, const std::shared_ptr<R>& shape,
                const Ops&... operands) {
  std::vector<Array> flat;
  [[maybe_unused]] auto add = [&](const auto& op) {
    auto l = leaves_of(what, op);
    flat.insert(flat.end(), l.begin(), l.end());
  };
  (add(operands), ...);
  auto outs = cond_call(what, index, fns, flat);
  return tree::unflatten(*shape, outs);
}

}  // namespace detail

// switch_(index, branches, operands...): branches[clamp(index, 0, n - 1)]
// applied to the operands (lax.switch). Every branch returns the same type.
template <class Branch, class... Ops>
auto switch_(const Array& index, const std::vector<Branch>& branches, const Ops&... operands) {
  using R = std::decay_t<std::invoke_result_t<const Branch&, const Ops&...>>;
  std::shared_ptr<R> shape;
  std::vector<detail::Fn> fns;
  for (const Branch& b : branches) fns.push_back(detail::branch_fn<R>("switch", b, shape, operands...));
  return detail::call_branches<R>("switch", index, fns, shape, operands...);
}

// cond(pred, true_fn, false_fn, operands...): true_fn(operands...) where
// pred (a boolean scalar) holds, false_fn(operands...) elsewhere; both are
// traced, and must return the same type (lax.cond).
template <class T, class F, class... Ops>
auto cond(const Array& pred, T&& true_fn, F&& false_fn, const Ops&... operands) {
  using R = std::decay_t<std::invoke_result_t<T&, const Ops&...>>;
  static_assert(std::is_same_v<R, std::decay_t<std::invoke_result_t<F&, const Ops&...>>>,
                "lax::cond: true_fn and false_fn must return the same type");
  std::shared_ptr<R> shape;
  std::vector<detail::Fn> fns{detail::branch_fn<R>("cond", false_fn, shape, operands...),
                              detail::branch_fn<R>("cond", true_fn, shape, operands...)};
  return detail::call_branches<R>("cond", pred, fns, shape, operands...);
}

// while_loop(cond_fn, body_fn, init): while cond_fn(carry) holds (a boolean
// scalar), carry = body_fn(carry) (lax.while_loop). Not reverse-mode
// differentiable (JAX's error); forward mode is.
template <class C, class B, class T>
T while_loop(C&& cond_fn, B&& body_fn, const T& init) {
  const std::string structure = tree::structure(init);
  std::vector<Array> leaves = detail::leaves_of("while_loop", init);
  detail::Fn c = [&](const std::vector<Array>& l) {
    std::size_t next = 0;
    return std::vector<Array>{Array(cond_fn(detail::with_leaves("while_loop", init, l, next)))};
  };
  detail::Fn b = [&](const std::vector<Array>& l) {
    std::size_t next = 0;
    T r = body_fn(detail::with_leaves("while_loop", init, l, next));
    if (tree::structure(r) != structure) detail::structure_changed("while_loop", structure, tree::structure(r));
    return detail::leaves_of("while_loop", r);
  };
  auto outs = detail::while_call("while_loop", c, b, leaves, structure);
  std::size_t next = 0;
  return detail::with_leaves("while_loop", init, outs, next);
}

// scan(f, init, xs, {.length, .reverse}): f(carry, x) -> (carry, y) over the
// leading axis of xs' leaves; returns (final carry, ys stacked along a new
// leading axis) (lax.scan). f returns a std::pair.
template <class F, class C, class X>
auto scan(F&& f, const C& init, const X& xs, ScanOptions opt = {}) {
  using P = std::decay_t<std::invoke_result_t<F&, const C&, const X&>>;
  using Y = std::decay_t<decltype(std::declval<P>().second)>;
  const std::string structure = tree::structure(init);
  std::vector<Array> carry = detail::leaves_of("scan", init);
  std::vector<Array> x_leaves = detail::leaves_of("scan", xs);
  std::shared_ptr<Y> y_shape;
  detail::Fn body = [&](const std::vector<Array>& l) {
    std::size_t next = 0;
    C c = detail::with_leaves("scan", init, l, next);
    X x = detail::with_leaves("scan", xs, l, next);
    P r = f(c, x);
    if (tree::structure(r.first) != structure) detail::structure_changed("scan", structure, tree::structure(r.first));
    y_shape = std::make_shared<Y>(r.second);
    std::vector<Array> out = detail::leaves_of("scan", r.first);
    auto ys = detail::leaves_of("scan", r.second);
    out.insert(out.end(), ys.begin(), ys.end());
    return out;
  };
  auto outs = detail::scan_call(body, carry, x_leaves, opt, structure);
  std::size_t next = 0;
  C last = detail::with_leaves("scan", init, outs, next);
  Y ys = detail::with_leaves("scan", *y_shape, outs, next);
  return std::pair<C, Y>(std::move(last), std::move(ys));
}

// fori_loop(lo, hi, body, init): for i in [lo, hi): carry = body(i, carry)
// (lax.fori_loop), i an int32 scalar. With C++ integer bounds the trip
// count is static and the loop is a scan (reverse-mode differentiable);
// with traced bounds it is a while loop.
template <class B, class T>
T fori_loop(std::int64_t lo, std::int64_t hi, B&& body, const T& init) {
  const std::int64_t n = hi > lo ? hi - lo : 0;
  auto step = [&](const std::pair<Array, T>& c, const std::vector<Array>&) {
    T next = body(c.first, c.second);
    return std::pair<std::pair<Array, T>, std::vector<Array>>({c.first + 1, std::move(next)}, {});
  };
  ScanOptions opt;
  opt.length = n;
  auto r = scan(step, std::pair<Array, T>(detail::loop_index(lo), init), std::vector<Array>{}, opt);
  return r.first.second;
}

template <class B, class T>
T fori_loop(const Array& lo, const Array& hi, B&& body, const T& init) {
  using C = std::pair<Array, T>;
  auto r = while_loop([&](const C& c) { return c.first < hi; },
                      [&](const C& c) { return C(c.first + 1, body(c.first, c.second)); },
                      C(lo.astype(DType::int32), init));
  return r.second;
}

}  // namespace tessel::lax
