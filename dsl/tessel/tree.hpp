// Pytrees (API.md "Pytrees"): nested std::vector, std::array, std::pair,
// std::tuple, std::map<std::string, ·> and Boost.Hana structs whose leaves
// are ts::Array or arithmetic scalars. In C++ the structure is the static
// type plus the run-time sizes of vectors and maps; `like` arguments carry it.
#pragma once

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/second.hpp>

#include <tessel/array.hpp>
#include <tessel/creation.hpp>

#include <tessel/core/key.hpp>

namespace tessel::tree {

namespace detail {

template <class T>
struct is_std_vector : std::false_type {};
template <class T, class A>
struct is_std_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_std_array : std::false_type {};
template <class T, std::size_t N>
struct is_std_array<std::array<T, N>> : std::true_type {};
template <class T>
struct is_pair : std::false_type {};
template <class A, class B>
struct is_pair<std::pair<A, B>> : std::true_type {};
template <class T>
struct is_tuple : std::false_type {};
template <class... Ts>
struct is_tuple<std::tuple<Ts...>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class V, class C, class A>
struct is_string_map<std::map<std::string, V, C, A>> : std::true_type {};

template <class T>
constexpr bool is_hana_struct = boost::hana::Struct<T>::value;

// Leaves of array trees.
template <class T>
struct ArrayLeaf : std::bool_constant<std::is_same_v<T, Array> || std::is_arithmetic_v<T>> {};

// Visits the children of a node in order.
template <template <class> class Leaf, class T, class F>
void each(const T& t, F& f);

template <template <class> class Leaf, class T, class F>
void each_child(const T& t, F& f) {
  if constexpr (is_std_vector<T>::value || is_std_array<T>::value) {
    for (const auto& c : t) each<Leaf>(c, f);
  } else if constexpr (is_pair<T>::value) {
    each<Leaf>(t.first, f);
    each<Leaf>(t.second, f);
  } else if constexpr (is_tuple<T>::value) {
    std::apply([&](const auto&... c) { (each<Leaf>(c, f), ...); }, t);
  } else if constexpr (is_string_map<T>::value) {
    for (const auto& kv : t) each<Leaf>(kv.second, f);
  } else if constexpr (is_hana_struct<T>) {
    boost::hana::for_each(boost::hana::accessors<T>(), [&](auto acc) { each<Leaf>(boost::hana::second(acc)(t), f); });
  } else {
    static_assert(sizeof(T) == 0,
                  "not a pytree: use ts::Array, arithmetic scalars, std::vector, std::array, std::pair, std::tuple, "
                  "std::map<std::string, T> or a BOOST_HANA_DEFINE_STRUCT struct");
  }
}

template <template <class> class Leaf, class T, class F>
void each(const T& t, F& f) {
  if constexpr (Leaf<T>::value) f(t);
  else each_child<Leaf>(t, f);
}

// Rebuilds a tree of the same type, each leaf replaced by g(leaf).
template <template <class> class Leaf, class T, class G>
T rebuild(const T& t, G& g);

template <template <class> class Leaf, class T, class G, std::size_t... I>
T rebuild_tuple(const T& t, G& g, std::index_sequence<I...>) {
  // Braced init keeps left-to-right order.
  return T{rebuild<Leaf>(std::get<I>(t), g)...};
}

template <template <class> class Leaf, class T, class G>
T rebuild(const T& t, G& g) {
  if constexpr (Leaf<T>::value) {
    return g(t);
  } else if constexpr (is_std_vector<T>::value) {
    T out;
    out.reserve(t.size());
    for (const auto& c : t) out.push_back(rebuild<Leaf>(c, g));
    return out;
  } else if constexpr (is_std_array<T>::value) {
    return rebuild_tuple<Leaf>(t, g, std::make_index_sequence<std::tuple_size_v<T>>{});
  } else if constexpr (is_pair<T>::value) {
    auto a = rebuild<Leaf>(t.first, g);
    auto b = rebuild<Leaf>(t.second, g);
    return T(std::move(a), std::move(b));
  } else if constexpr (is_tuple<T>::value) {
    return rebuild_tuple<Leaf>(t, g, std::make_index_sequence<std::tuple_size_v<T>>{});
  } else if constexpr (is_string_map<T>::value) {
    T out;
    for (const auto& kv : t) out.emplace(kv.first, rebuild<Leaf>(kv.second, g));
    return out;
  } else if constexpr (is_hana_struct<T>) {
    T out = t;
    boost::hana::for_each(boost::hana::accessors<T>(), [&](auto acc) {
      boost::hana::second(acc)(out) = rebuild<Leaf>(boost::hana::second(acc)(t), g);
    });
    return out;
  } else {
    static_assert(sizeof(T) == 0, "not a pytree");
  }
}

// A text of the structure, leaves as '*': "[(*, *), (*, *)]".
template <template <class> class Leaf, class T>
void describe(const T& t, std::string& out) {
  if constexpr (Leaf<T>::value) {
    out += '*';
  } else if constexpr (is_std_vector<T>::value || is_std_array<T>::value) {
    out += '[';
    bool first = true;
    for (const auto& c : t) {
      if (!first) out += ", ";
      first = false;
      describe<Leaf>(c, out);
    }
    out += ']';
  } else if constexpr (is_pair<T>::value) {
    out += '(';
    describe<Leaf>(t.first, out);
    out += ", ";
    describe<Leaf>(t.second, out);
    out += ')';
  } else if constexpr (is_tuple<T>::value) {
    out += '(';
    bool first = true;
    std::apply([&](const auto&... c) { ((out += first ? "" : ", ", first = false, describe<Leaf>(c, out)), ...); }, t);
    out += ')';
  } else if constexpr (is_string_map<T>::value) {
    out += '{';
    bool first = true;
    for (const auto& kv : t) {
      if (!first) out += ", ";
      first = false;
      out += "'" + kv.first + "': ";
      describe<Leaf>(kv.second, out);
    }
    out += '}';
  } else if constexpr (is_hana_struct<T>) {
    out += "struct(";
    bool first = true;
    boost::hana::for_each(boost::hana::accessors<T>(), [&](auto acc) {
      if (!first) out += ", ";
      first = false;
      out += boost::hana::to<char const*>(boost::hana::first(acc));
      out += '=';
      describe<Leaf>(boost::hana::second(acc)(t), out);
    });
    out += ')';
  } else {
    static_assert(sizeof(T) == 0, "not a pytree");
  }
}

// A tree's structure as a value, for matching one tree against another
// (a tree of shardings as a prefix of the arguments, as JAX's jit): leaves
// (`array`: whether the leaf is an Array; arithmetic leaves are not), lists
// (vector, array), tuples (pair, tuple), dicts (string maps: sorted keys) and
// structs (field names).
struct Node {
  enum Kind : char { Leaf, List, Tuple, Dict, Struct };
  Kind kind = Leaf;
  bool array = false;
  std::vector<std::string> keys;
  std::vector<Node> kids;
};

template <template <class> class Leaf, class T>
Node node_of(const T& t) {
  Node n;
  if constexpr (Leaf<T>::value) {
    n.array = std::is_same_v<T, Array>;
  } else if constexpr (is_std_vector<T>::value || is_std_array<T>::value) {
    n.kind = Node::List;
    for (const auto& c : t) n.kids.push_back(node_of<Leaf>(c));
  } else if constexpr (is_pair<T>::value) {
    n.kind = Node::Tuple;
    n.kids.push_back(node_of<Leaf>(t.first));
    n.kids.push_back(node_of<Leaf>(t.second));
  } else if constexpr (is_tuple<T>::value) {
    n.kind = Node::Tuple;
    std::apply([&](const auto&... c) { (n.kids.push_back(node_of<Leaf>(c)), ...); }, t);
  } else if constexpr (is_string_map<T>::value) {
    n.kind = Node::Dict;
    for (const auto& kv : t) {
      n.keys.push_back(kv.first);
      n.kids.push_back(node_of<Leaf>(kv.second));
    }
  } else if constexpr (is_hana_struct<T>) {
    n.kind = Node::Struct;
    boost::hana::for_each(boost::hana::accessors<T>(), [&](auto acc) {
      n.keys.push_back(boost::hana::to<char const*>(boost::hana::first(acc)));
      n.kids.push_back(node_of<Leaf>(boost::hana::second(acc)(t)));
    });
  } else {
    static_assert(sizeof(T) == 0, "not a pytree");
  }
  return n;
}

// The run-time part of a tree's structure, exactly (the static type holds
// the rest): sizes of vectors, sizes and keys of maps, and the bits of
// arithmetic leaves (non-array leaves are compile-time values in jit).
template <class T>
void add_to_key(const T& t, Key& k) {
  if constexpr (std::is_same_v<T, Array>) {
    k.tag('A');
  } else if constexpr (std::is_arithmetic_v<T>) {
    k.tag('s').pod(t);
  } else if constexpr (is_std_vector<T>::value || is_std_array<T>::value) {
    k.pod(std::uint64_t(t.size()));
    for (const auto& c : t) add_to_key(c, k);
  } else if constexpr (is_pair<T>::value) {
    add_to_key(t.first, k);
    add_to_key(t.second, k);
  } else if constexpr (is_tuple<T>::value) {
    std::apply([&](const auto&... c) { (add_to_key(c, k), ...); }, t);
  } else if constexpr (is_string_map<T>::value) {
    k.pod(std::uint64_t(t.size()));
    for (const auto& kv : t) {
      k.str(kv.first);
      add_to_key(kv.second, k);
    }
  } else if constexpr (is_hana_struct<T>) {
    boost::hana::for_each(boost::hana::accessors<T>(), [&](auto acc) { add_to_key(boost::hana::second(acc)(t), k); });
  } else {
    static_assert(sizeof(T) == 0, "not a pytree");
  }
}

template <class T>
Array leaf_to_array(const T& leaf) {
  if constexpr (std::is_same_v<T, Array>) return leaf;
  else return tessel::array(leaf);
}

template <class T>
T array_to_leaf(const Array& a) {
  if constexpr (std::is_same_v<T, Array>) return a;
  else return a.item<T>();
}

}  // namespace detail

// The leaves in order; arithmetic scalars become weakly typed 0-d arrays.
template <class T>
std::vector<Array> flatten(const T& t) {
  std::vector<Array> out;
  auto f = [&](const auto& leaf) { out.push_back(detail::leaf_to_array(leaf)); };
  detail::each<detail::ArrayLeaf>(t, f);
  return out;
}

// Number of leaves.
template <class T>
std::size_t leaf_count(const T& t) {
  std::size_t n = 0;
  auto f = [&](const auto&) { ++n; };
  detail::each<detail::ArrayLeaf>(t, f);
  return n;
}

// The structure of a tree as text, leaves as '*'.
template <class T>
std::string structure(const T& t) {
  std::string s;
  detail::describe<detail::ArrayLeaf>(t, s);
  return s;
}

// A tree shaped like `like` whose leaves are `leaves`, in order. Scalar slots
// take the value of their 0-d array.
template <class T>
T unflatten(const T& like, const std::vector<Array>& leaves) {
  if (leaves.size() != leaf_count(like))
    throw TypeError("tree::unflatten: the structure " + structure(like) + " has " + std::to_string(leaf_count(like)) +
                    " leaves but " + std::to_string(leaves.size()) + " arrays were given");
  std::size_t i = 0;
  auto g = [&](const auto& leaf) { return detail::array_to_leaf<std::decay_t<decltype(leaf)>>(leaves[i++]); };
  return detail::rebuild<detail::ArrayLeaf>(like, g);
}

// f applied to every leaf (as an Array); the result keeps the tree's type.
template <class T, class F>
T map(F&& f, const T& t) {
  auto g = [&](const auto& leaf) {
    return detail::array_to_leaf<std::decay_t<decltype(leaf)>>(f(detail::leaf_to_array(leaf)));
  };
  return detail::rebuild<detail::ArrayLeaf>(t, g);
}

}  // namespace tessel::tree
