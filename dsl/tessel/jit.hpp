// ts::jit: trace a C++ callable over pytrees of arrays once per argument
// signature, propagate shardings, partition, compile, cache (API.md
// "Transformations"). jit(f).lower(args...) and .compile() expose the stages.
#pragma once

#include <algorithm>
#include <any>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/device_put.hpp>
#include <tessel/sharding.hpp>
#include <tessel/tree.hpp>

namespace tessel {

namespace detail {
// Leaves of a tree of shardings: device_put's (a sharding or a device), or none ("any").
template <class T>
struct SpecLeaf : std::bool_constant<ShardingLeaf<T>::value || std::is_same_v<T, std::optional<Sharding>> ||
                                     std::is_same_v<T, std::nullopt_t>> {};
template <class T>
std::optional<Sharding> spec_leaf(const T& s) {
  if constexpr (std::is_same_v<T, std::nullopt_t>) return std::nullopt;
  else if constexpr (std::is_same_v<T, std::optional<Sharding>>) return s;
  else return as_sharding(s);
}
template <class T>
inline constexpr bool is_tree_node_v =
    tree::detail::is_std_vector<T>::value || tree::detail::is_std_array<T>::value || tree::detail::is_pair<T>::value ||
    tree::detail::is_tuple<T>::value || tree::detail::is_string_map<T>::value || tree::detail::is_hana_struct<T>;
}  // namespace detail

// One entry of jit's in_shardings / out_shardings: one sharding (or none:
// any) for every array below it, or, as JAX's, a pytree of shardings that is
// a tree prefix of the argument (a std::map of parameters with a sharding per
// entry; std::nullopt leaves for "any").
class ShardingTree {
 public:
  ShardingTree() { leaves_.emplace_back(); }
  ShardingTree(std::nullopt_t) : ShardingTree() {}
  template <class T, std::enable_if_t<detail::SpecLeaf<T>::value, int> = 0>
  ShardingTree(const T& s) {
    leaves_.push_back(detail::spec_leaf(s));
  }
  template <class T, std::enable_if_t<!detail::SpecLeaf<T>::value && detail::is_tree_node_v<T>, int> = 0>
  ShardingTree(const T& tree) : node_(tree::detail::node_of<detail::SpecLeaf>(tree)) {
    auto f = [&](const auto& leaf) { leaves_.push_back(detail::spec_leaf(leaf)); };
    tree::detail::each<detail::SpecLeaf>(tree, f);
  }
  // One sharding (or none) for the whole argument.
  bool is_leaf() const { return node_.kind == tree::detail::Node::Leaf; }
  // The leaf's sharding (is_leaf()).
  const std::optional<Sharding>& sharding() const { return leaves_.front(); }
  const tree::detail::Node& node() const { return node_; }
  const std::vector<std::optional<Sharding>>& leaves() const { return leaves_; }

 private:
  tree::detail::Node node_;
  std::vector<std::optional<Sharding>> leaves_;
};

struct JitOptions {
  // Per positional argument: a sharding for every array in it, or a pytree of
  // shardings matching it (a tree prefix, as JAX's); one entry: every argument.
  std::vector<ShardingTree> in_shardings;
  // Per output array (flattened), or a pytree of shardings that is a prefix of
  // the result (one entry: the whole result; several: the result's top-level
  // elements); one sharding: every output.
  std::vector<ShardingTree> out_shardings;
  // Arguments traced as compile-time constants (their values key the cache).
  // Non-array C++ values are always static.
  std::vector<int> static_argnums;
  // Arguments given up to the call (JAX's donate_argnums; every array of a
  // pytree argument): each is deleted afterwards (Array::is_deleted), and an
  // output of the same size, dtype and sharding may be written into its
  // buffers, shard by shard, where nothing reads them after (docs/memory.md).
  std::vector<int> donate_argnums;
  // Name in messages, dumps and as_text.
  std::string name = "f";
};

struct MemoryAnalysis {
  std::size_t argument_size_in_bytes = 0, output_size_in_bytes = 0, temp_size_in_bytes = 0;
  // The most bytes one device holds at once while the program runs (its
  // arguments, outputs and live temporaries; an output that takes a donated
  // argument's block counted once).
  std::size_t peak_memory_in_bytes = 0;
  // Output bytes written into donated arguments' blocks (JAX's
  // alias_size_in_bytes): the compiled object of a jit with donate_argnums.
  std::size_t alias_size_in_bytes = 0;
};

struct CollectiveTraffic {
  std::string collective;     // XLA's spelling: "all-gather", "all-reduce", ...
  double bytes_per_device = 0;  // read from peers by each device
};

namespace detail {
struct Program;

// What tracing a function gave: its graph, the arrays it closed over, and
// how to rebuild its result from output arrays.
struct Traced {
  std::shared_ptr<void> graph;  // tessel::Graph
  std::vector<Array> captured;
  std::function<std::any(const std::vector<Array>&)> rebuild;
  std::size_t outputs = 0;
  double seconds = 0;  // how long tracing took
  Key graph_key;       // the graph's fingerprint: every call's program key starts with it
  tree::detail::Node out_node;  // the result's structure (jit: out_shardings as a pytree)
};

// An argument's structure (static values: a leaf that holds no array).
template <class T>
tree::detail::Node arg_node(const T& a) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string> || std::is_enum_v<T>) return {};
  else return tree::detail::node_of<tree::detail::ArrayLeaf>(a);
}

// Traces fn over fresh tracers of the given avals (dtype, shape, weak).
Traced trace(const std::string& name, const std::vector<Array>& examples,
             const std::function<std::vector<Array>(const std::vector<Array>&, std::function<std::any(const std::vector<Array>&)>&)>& fn);
// Lowers (and compiles) a traced program for arguments (inputs + captured).
// arg_nodes: each positional argument's structure, needed only when an
// in_shardings entry is a pytree (else empty).
std::shared_ptr<const Program> lower_traced(const Traced& t, const std::vector<Array>& args, const JitOptions& opt,
                                            const std::vector<int>& arg_of_leaf,
                                            const std::vector<tree::detail::Node>& arg_nodes, bool compile);
// `donated`: empty, or a flag per input (donated_inputs).
std::vector<Array> run_program(const Program& p, const std::vector<Array>& args, const std::vector<bool>& donated = {});
// Per input (the positional arguments' leaves, then the closed-over
// arrays): whether its positional argument is in opt.donate_argnums.
std::vector<bool> donated_inputs(const JitOptions& opt, const std::vector<int>& arg_of_leaf, std::size_t nargs,
                                 std::size_t ninputs);
// Throws for options that do not fit a call with `nargs` positional arguments:
// static_argnums out of range (ValueError), in_shardings of another count (ShardingError).
void check_jit_options(const JitOptions& opt, std::size_t nargs);
// Throws unless `args` (the call's arrays, without captured ones) are what
// `p` was compiled for: their count, dtypes and shapes (TypeError, as JAX),
// and for committed arrays their placement (ShardingError).
void check_compiled_args(const Program& p, const std::vector<Array>& args, std::size_t captured);
std::string program_text(const Program& p, bool compiled);
std::string program_explanation(const Program& p);
std::map<std::string, double> program_cost(const Program& p);
// donated: per input, whether a call gives it up (outputs that take those
// blocks are counted once: MemoryAnalysis::alias_size_in_bytes).
MemoryAnalysis program_memory(const Program& p, const std::vector<bool>& donated = {});
std::vector<CollectiveTraffic> program_communication(const Program& p);

// Appends the arrays of a pytree argument; its type, structure and static
// values go to the key, exactly (a double by its bits, a string by its bytes).
template <class T>
void flatten_arg(const T& arg, bool is_static, std::vector<Array>& arrays, Key& key) {
  key.str(typeid(T).name());
  if constexpr (std::is_arithmetic_v<T>) {
    key.pod(arg);
  } else if constexpr (std::is_same_v<T, std::string>) {
    key.str(arg);
  } else if constexpr (std::is_enum_v<T>) {
    key.pod(arg);
  } else {
    if (is_static) throw TypeError("static_argnums: only arithmetic, enum and std::string arguments can be static");
    tree::detail::add_to_key(arg, key);
    auto f = [&](const auto& leaf) {
      using L = std::decay_t<decltype(leaf)>;
      if constexpr (std::is_same_v<L, Array>) arrays.push_back(leaf);
    };
    tree::detail::each<tree::detail::ArrayLeaf>(arg, f);
  }
}

// The arrays of positional arguments, in order, and the argument each came from.
template <class... Args>
void flatten_args(std::vector<Array>& arrays, std::vector<int>& arg_of_leaf, const Args&... args) {
  Key unused;
  int i = 0;
  [[maybe_unused]] auto one = [&](const auto& a) {
    std::size_t before = arrays.size();
    flatten_arg(a, false, arrays, unused);
    for (std::size_t k = before; k < arrays.size(); ++k) arg_of_leaf.push_back(i);
    ++i;
  };
  (one(args), ...);
}

// The argument with its arrays replaced, in order, from `next`.
template <class T>
T substitute(const T& arg, const std::vector<Array>& arrays, std::size_t& next) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string> || std::is_enum_v<T>) {
    return arg;
  } else {
    auto g = [&](const auto& leaf) {
      using L = std::decay_t<decltype(leaf)>;
      if constexpr (std::is_same_v<L, Array>) return arrays[next++];
      else return leaf;
    };
    return tree::detail::rebuild<tree::detail::ArrayLeaf>(arg, g);
  }
}

// f applied to args with their arrays replaced, in order, by `leaves`; the
// result kept in `shape` (its structure), its leaves returned.
template <class R, class F, class... Args>
std::vector<Array> call_on_leaves(const F& f, std::shared_ptr<R>& shape, const std::vector<Array>& leaves,
                                  const Args&... args) {
  [[maybe_unused]] std::size_t next = 0;
  std::tuple<Args...> a{substitute(args, leaves, next)...};  // braced: left to right
  R r = std::apply(f, a);
  shape = std::make_shared<R>(r);
  return tree::flatten(r);
}

// A result of a Compiled call: converts to the traced function's result type.
class AnyResult {
 public:
  explicit AnyResult(std::any v) : v_(std::move(v)) {}
  template <class R>
  operator R() const {
    if (auto* r = std::any_cast<R>(&v_)) return *r;
    throw TypeError(std::string("Compiled result is a ") + v_.type().name() + ", not a " + typeid(R).name());
  }
  template <class R>
  R get() const {
    return R(*this);
  }

 private:
  std::any v_;
};
}  // namespace detail

class Compiled {
 public:
  // donated: per input of the program (its arguments' leaves, then what it
  // closes over), whether a call gives it up (donate_argnums).
  Compiled(std::shared_ptr<const detail::Program> p, std::function<std::any(const std::vector<Array>&)> call,
           std::vector<bool> donated = {})
      : p_(std::move(p)), call_(std::move(call)), donated_(std::move(donated)) {}
  // The per-device program after partitioning (collectives named as XLA
  // names them) and the thunks it compiled to.
  std::string as_text() const { return detail::program_text(*p_, true); }
  // {"flops", "transcendentals", "bytes accessed"} per device, as XLA's.
  std::map<std::string, double> cost_analysis() const { return detail::program_cost(*p_); }
  MemoryAnalysis memory_analysis() const { return detail::program_memory(*p_, donated_); }
  // Bytes each device reads from its peers, per collective (JAX has no such report).
  std::vector<CollectiveTraffic> communication() const { return detail::program_communication(*p_); }
  template <class... Args>
  detail::AnyResult operator()(const Args&... args) const {
    std::vector<Array> arrays;
    Key key;
    (detail::flatten_arg(args, false, arrays, key), ...);
    return detail::AnyResult(call_(arrays));
  }

 private:
  std::shared_ptr<const detail::Program> p_;
  std::function<std::any(const std::vector<Array>&)> call_;
  std::vector<bool> donated_;
};

class Lowered {
 public:
  Lowered(std::shared_ptr<const detail::Program> p, std::function<Compiled()> compile)
      : p_(std::move(p)), compile_(std::move(compile)) {}
  // The traced program with the sharding propagation chose for every value.
  std::string as_text() const { return detail::program_text(*p_, false); }
  // as_text, with what chose each value's sharding: an input's own, a
  // with_sharding_constraint, or an op's sharding rule applied from its
  // operands or back from its user (ts::debug::explain_sharding prints it).
  std::string explain_sharding() const { return detail::program_explanation(*p_); }
  Compiled compile() const { return compile_(); }

 private:
  std::shared_ptr<const detail::Program> p_;
  std::function<Compiled()> compile_;
};

template <class F>
class Jitted {
 public:
  Jitted(F f, JitOptions opt) : f_(std::move(f)), opt_(std::move(opt)), cache_(std::make_shared<Cache>()) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    static_assert(!std::is_void_v<R>, "a jitted function must return its results");
    Call c = prepare(args...);
    // Called while tracing another function: trace straight through.
    for (auto& a : c.arrays)
      if (a.is_tracer()) return R(f_(args...));
    const std::shared_ptr<const detail::Traced> held = traced<R>(c, args...);
    const detail::Traced& t = *held;
    for (auto& a : t.captured)
      if (a.is_tracer()) {
        // f closes over values of an enclosing trace: no program of its
        // own; trace straight through, and keep no trace holding them.
        forget<R>(c);
        return R(f_(args...));
      }
    auto inputs = c.arrays;
    inputs.insert(inputs.end(), t.captured.begin(), t.captured.end());
    auto p = detail::lower_traced(t, inputs, opt_, c.arg_of_leaf, c.arg_nodes, true);
    return std::any_cast<R>(t.rebuild(
        detail::run_program(*p, inputs, detail::donated_inputs(opt_, c.arg_of_leaf, sizeof...(Args), inputs.size()))));
  }

  template <class... Args>
  Lowered lower(const Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    Call c = prepare(args...);
    const std::shared_ptr<const detail::Traced> tp = traced<R>(c, args...);
    const detail::Traced& t = *tp;
    auto inputs = c.arrays;
    inputs.insert(inputs.end(), t.captured.begin(), t.captured.end());
    auto p = detail::lower_traced(t, inputs, opt_, c.arg_of_leaf, c.arg_nodes, false);
    // The lambdas hold the trace (the cache may drop it).
    auto cache = cache_;
    JitOptions opt = opt_;
    std::vector<int> aol = c.arg_of_leaf;
    std::vector<tree::detail::Node> nodes = c.arg_nodes;
    std::vector<Array> captured = t.captured;
    constexpr std::size_t nargs = sizeof...(Args);
    return Lowered(p, [tp, cache, inputs, opt, aol, nodes, captured]() {
      auto cp = detail::lower_traced(*tp, inputs, opt, aol, nodes, true);
      return Compiled(
          cp,
          [cp, tp, cache, captured, opt, aol](const std::vector<Array>& args) {
            detail::check_compiled_args(*cp, args, captured.size());
            auto all = args;
            all.insert(all.end(), captured.begin(), captured.end());
            return tp->rebuild(detail::run_program(*cp, all, detail::donated_inputs(opt, aol, nargs, all.size())));
          },
          detail::donated_inputs(opt, aol, nargs, inputs.size()));
    });
  }

 private:
  struct Call {
    std::vector<Array> arrays;
    std::vector<int> arg_of_leaf;  // positional argument of each array
    std::vector<tree::detail::Node> arg_nodes;  // only when an in_shardings entry is a pytree
    Key key;
  };
  struct Cache {
    std::mutex m;
    std::map<Key, std::shared_ptr<const detail::Traced>> traces;
    std::deque<Key> order;  // insertion order: the oldest trace goes first when full
  };

  template <class... Args>
  Call prepare(const Args&... args) const {
    Call c;
    detail::check_jit_options(opt_, sizeof...(Args));
    int i = 0;
    auto one = [&](const auto& a) {
      const int n = int(sizeof...(Args));
      bool is_static = std::any_of(opt_.static_argnums.begin(), opt_.static_argnums.end(),
                                   [&](int s) { return s == i || s + n == i; });
      std::size_t before = c.arrays.size();
      detail::flatten_arg(a, is_static, c.arrays, c.key);
      for (std::size_t k = before; k < c.arrays.size(); ++k) c.arg_of_leaf.push_back(i);
      ++i;
    };
    (one(args), ...);
    if (std::any_of(opt_.in_shardings.begin(), opt_.in_shardings.end(), [](const ShardingTree& s) { return !s.is_leaf(); }))
      (c.arg_nodes.push_back(detail::arg_node(args)), ...);
    c.key.pod(std::uint64_t(c.arrays.size()));
    for (auto& a : c.arrays) c.key.pod(a.dtype()).pod(a.weak_type()).seq(a.shape());
    // Settings that change what tracing builds.
    c.key.pod(config().threefry_partitionable);
    return c;
  }

  template <class R>
  void forget(const Call& c) const {
    std::lock_guard<std::mutex> lk(cache_->m);
    Key key;
    key.str(typeid(R).name()).key(c.key);
    cache_->traces.erase(key);
    auto it = std::find(cache_->order.begin(), cache_->order.end(), key);
    if (it != cache_->order.end()) cache_->order.erase(it);
  }

  static constexpr std::size_t kMaxTraces = 512;

  template <class R, class... Args>
  std::shared_ptr<const detail::Traced> traced(const Call& c, const Args&... args) const {
    std::lock_guard<std::mutex> lk(cache_->m);
    Key key;
    key.str(typeid(R).name()).key(c.key);
    auto it = cache_->traces.find(key);
    if (it != cache_->traces.end()) return it->second;
    tree::detail::Node out_node;
    auto t = std::make_unique<detail::Traced>(detail::trace(
        opt_.name, c.arrays,
        [&](const std::vector<Array>& tracers, std::function<std::any(const std::vector<Array>&)>& rebuild) {
          std::shared_ptr<R> shape;
          auto leaves = detail::call_on_leaves<R>(f_, shape, tracers, args...);
          rebuild = [shape](const std::vector<Array>& outs) { return std::any(tree::unflatten(*shape, outs)); };
          out_node = tree::detail::node_of<tree::detail::ArrayLeaf>(*shape);
          return leaves;
        }));
    t->out_node = std::move(out_node);
    // Bounded: a jit object called with ever new shapes keeps its newest traces.
    while (cache_->traces.size() >= kMaxTraces && !cache_->order.empty()) {
      cache_->traces.erase(cache_->order.front());
      cache_->order.pop_front();
    }
    cache_->order.push_back(key);
    return cache_->traces.emplace(key, std::shared_ptr<const detail::Traced>(std::move(t))).first->second;
  }

  F f_;
  JitOptions opt_;
  std::shared_ptr<Cache> cache_;
};

template <class F>
Jitted<std::decay_t<F>> jit(F&& f, JitOptions opt = {}) {
  return Jitted<std::decay_t<F>>(std::forward<F>(f), std::move(opt));
}

namespace debug {
// Prints, for every value of jitted(args...), its sharding and what chose it
// (users ask JAX for this: jax#20381). Lowers without running.
template <class F, class... Args>
void explain_sharding(const Jitted<F>& jitted, const Args&... args) {
  std::cout << jitted.lower(args...).explain_sharding();
}
}  // namespace debug

}  // namespace tessel
