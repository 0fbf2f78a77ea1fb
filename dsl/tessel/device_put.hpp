// ts::device_put: place arrays (or every array of a pytree) with a sharding,
// committing them. Resharding moves only the data that must move.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/sharding.hpp>
#include <tessel/tree.hpp>

namespace tessel {

Array device_put(const Array& x, const Sharding& sharding);
Array device_put(const Array& x, const Device& device);

namespace detail {
template <class T>
struct ShardingLeaf
    : std::bool_constant<std::is_same_v<T, Sharding> || std::is_same_v<T, NamedSharding> ||
                         std::is_same_v<T, PositionalSharding> || std::is_same_v<T, SingleDeviceSharding> ||
                         std::is_same_v<T, Device>> {};

inline Sharding as_sharding(const Sharding& s) { return s; }
inline Sharding as_sharding(const Device& d) { return SingleDeviceSharding(d); }
}  // namespace detail

// device_put on a pytree: `where` is one sharding (or device) for every leaf,
// or a pytree of shardings of the same structure. Scalar leaves stay as they are.
template <class Tree, class Where>
Tree device_put(const Tree& tree, const Where& where) {
  if constexpr (detail::ShardingLeaf<Where>::value) {
    Sharding s = detail::as_sharding(where);
    auto g = [&](const auto& leaf) {
      using L = std::decay_t<decltype(leaf)>;
      if constexpr (std::is_same_v<L, Array>) return device_put(leaf, s);
      else return leaf;
    };
    return tree::detail::rebuild<tree::detail::ArrayLeaf>(tree, g);
  } else {
    std::vector<Sharding> shardings;
    auto collect = [&](const auto& leaf) { shardings.push_back(detail::as_sharding(leaf)); };
    tree::detail::each<detail::ShardingLeaf>(where, collect);
    std::string a = tree::structure(tree), b;
    tree::detail::describe<detail::ShardingLeaf>(where, b);
    if (a != b)
      throw TypeError("device_put: the shardings' pytree structure " + b +
                      " does not match the arrays' structure " + a);
    std::size_t i = 0;
    auto g = [&](const auto& leaf) {
      using L = std::decay_t<decltype(leaf)>;
      const Sharding& s = shardings[i++];
      if constexpr (std::is_same_v<L, Array>) return device_put(leaf, s);
      else return leaf;
    };
    return tree::detail::rebuild<tree::detail::ArrayLeaf>(tree, g);
  }
}

}  // namespace tessel
