// Sharded checkpoints of pytrees (API.md "Files and checkpoints"; orbax's
// PyTreeCheckpointer and CheckpointManager). docs/checkpoints.md has the
// format and the design.
//
//   auto h = ts::checkpoint::save("/ckpt/step_10", state, {.async = true});
//   ...training goes on: arrays are immutable, the save reads what they were...
//   h.wait();
//   State back = ts::checkpoint::restore("/ckpt/step_10", state_like);
//
// On disk a checkpoint is a directory: one Zarr v2 array per leaf (its
// chunks the saved sharding's shards, raw or zstd; zarr-python opens any
// leaf) and `tessel_checkpoint.json` (the tree's leaf paths, dtypes,
// shapes, shardings, each chunk file's size and CRC-32 per MiB). A save
// writes into `<dir>.tessel-partial`, flushes it and renames it to `<dir>`:
// a save that dies leaves no directory that could be taken for a
// checkpoint. Every process writes the distinct shards it holds; a restore
// reads, on each device, only the parts of the chunks its new shard covers,
// onto any mesh, sharding, device count or process count.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/string.hpp>

#include <tessel/array.hpp>
#include <tessel/io.hpp>
#include <tessel/sharding.hpp>
#include <tessel/tree.hpp>

namespace tessel {

// jax.ShapeDtypeStruct: what a restored leaf should be. Without a sharding
// the leaf comes back as an uncommitted array on the default device.
struct ShapeDtypeStruct {
  Shape shape;
  DType dtype = DType::float32;
  std::optional<Sharding> sharding;
};

}  // namespace tessel

namespace tessel::checkpoint {

struct SaveOptions {
  // Return at once; the handle's wait() finishes the save (with several
  // processes, wait() is where they agree and publish, so every process
  // calls it, in the same order as their other collective calls).
  bool async = false;
  // Replace a checkpoint already at `dir` (else a ValueError names it).
  bool force = false;
  // "none" (chunks are the shards' raw bytes) or "zstd".
  std::string compression = "none";
  int zstd_level = 1;
};

namespace detail {
struct SaveJob;
}

// An in-flight (or finished) save.
class SaveHandle {
 public:
  SaveHandle() = default;
  explicit SaveHandle(std::shared_ptr<detail::SaveJob> job) : job_(std::move(job)) {}
  // Blocks until the checkpoint is published; rethrows what made it fail.
  void wait();
  // Whether the save has finished (published or failed).
  bool done() const;

 private:
  std::shared_ptr<detail::SaveJob> job_;
};

// Bytes a restore read from chunk files, and the bytes its new shards hold
// (what it could not read less than), for the last restore of this process.
struct RestoreStats {
  std::uint64_t bytes_read = 0, bytes_needed = 0;
};
RestoreStats last_restore_stats();

namespace detail {

// What restore makes of a target leaf.
struct LeafTarget {
  Shape shape;
  std::optional<DType> dtype;  // none: as saved (a scalar slot)
  std::optional<Sharding> sharding;  // none: the default device, uncommitted
  bool committed = true;
};

SaveHandle save_leaves(const std::string& dir, const std::vector<Array>& leaves, const std::vector<std::string>& paths,
                       const SaveOptions& options);
std::vector<Array> restore_leaves(const std::string& dir, const std::vector<LeafTarget>& targets,
                                  const std::vector<std::string>& paths);
// The leaf paths a checkpoint holds (in order), for messages and tools.
std::vector<std::string> saved_paths(const std::string& dir);

template <class T>
struct CkptLeaf : std::bool_constant<std::is_same_v<T, Array> || std::is_same_v<T, ShapeDtypeStruct> ||
                                     std::is_arithmetic_v<T>> {};

// Each leaf with its path, spelled as jax.tree_util.keystr spells it:
// [0] for sequences, ['key'] for maps, .name for struct members.
template <class T, class F>
void each_path(const T& t, const std::string& path, F& f) {
  namespace td = tree::detail;
  if constexpr (CkptLeaf<T>::value) {
    f(t, path);
  } else if constexpr (td::is_std_vector<T>::value || td::is_std_array<T>::value) {
    std::size_t i = 0;
    for (const auto& c : t) each_path(c, path + "[" + std::to_string(i++) + "]", f);
  } else if constexpr (td::is_pair<T>::value) {
    each_path(t.first, path + "[0]", f);
    each_path(t.second, path + "[1]", f);
  } else if constexpr (td::is_tuple<T>::value) {
    std::size_t i = 0;
    std::apply([&](const auto&... c) { (each_path(c, path + "[" + std::to_string(i++) + "]", f), ...); }, t);
  } else if constexpr (td::is_string_map<T>::value) {
    for (const auto& kv : t) each_path(kv.second, path + "['" + kv.first + "']", f);
  } else if constexpr (td::is_hana_struct<T>) {
    boost::hana::for_each(boost::hana::accessors<T>(), [&](auto acc) {
      each_path(boost::hana::second(acc)(t), path + "." + boost::hana::to<char const*>(boost::hana::first(acc)), f);
    });
  } else {
    static_assert(sizeof(T) == 0, "checkpoint: not a pytree (see tessel/tree.hpp) of arrays, scalars and ShapeDtypeStruct");
  }
}

// The tree type restore returns: ShapeDtypeStruct leaves become Arrays.
template <class T>
struct Restored {
  using type = T;
};
template <>
struct Restored<ShapeDtypeStruct> {
  using type = Array;
};
template <class T, class A>
struct Restored<std::vector<T, A>> {
  using type = std::vector<typename Restored<T>::type>;
};
template <class T, std::size_t N>
struct Restored<std::array<T, N>> {
  using type = std::array<typename Restored<T>::type, N>;
};
template <class A, class B>
struct Restored<std::pair<A, B>> {
  using type = std::pair<typename Restored<A>::type, typename Restored<B>::type>;
};
template <class... Ts>
struct Restored<std::tuple<Ts...>> {
  using type = std::tuple<typename Restored<Ts>::type...>;
};
template <class V, class C, class A>
struct Restored<std::map<std::string, V, C, A>> {
  using type = std::map<std::string, typename Restored<V>::type>;
};

template <class T, class G>
typename Restored<T>::type rebuild(const T& t, G& g) {
  namespace td = tree::detail;
  using R = typename Restored<T>::type;
  if constexpr (CkptLeaf<T>::value) {
    if constexpr (std::is_same_v<T, ShapeDtypeStruct>) return g();
    else return tree::detail::array_to_leaf<T>(g());
  } else if constexpr (td::is_std_vector<T>::value) {
    R out;
    out.reserve(t.size());
    for (const auto& c : t) out.push_back(rebuild(c, g));
    return out;
  } else if constexpr (td::is_std_array<T>::value) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return R{rebuild(std::get<I>(t), g)...};  // braced: left to right
    }(std::make_index_sequence<std::tuple_size_v<T>>{});
  } else if constexpr (td::is_pair<T>::value) {
    auto a = rebuild(t.first, g);
    auto b = rebuild(t.second, g);
    return R(std::move(a), std::move(b));
  } else if constexpr (td::is_tuple<T>::value) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return R{rebuild(std::get<I>(t), g)...};
    }(std::make_index_sequence<std::tuple_size_v<T>>{});
  } else if constexpr (td::is_string_map<T>::value) {
    R out;
    for (const auto& kv : t) out.emplace(kv.first, rebuild(kv.second, g));
    return out;
  } else {
    static_assert(std::is_same_v<R, T>, "checkpoint::restore: a struct's members must be arrays or scalars");
    auto h = [&](const auto& leaf) {
      using L = std::decay_t<decltype(leaf)>;
      return tree::detail::array_to_leaf<L>(g());
    };
    return td::rebuild<td::ArrayLeaf>(t, h);
  }
}

}  // namespace detail

// Saves a pytree of arrays (and scalars) to the directory `dir` (orbax's
// PyTreeCheckpointer.save): see the top of this file.
template <class T>
SaveHandle save(const std::string& dir, const T& tree, const SaveOptions& options = {}) {
  std::vector<Array> leaves;
  std::vector<std::string> paths;
  auto f = [&](const auto& leaf, const std::string& path) {
    using L = std::decay_t<decltype(leaf)>;
    static_assert(!std::is_same_v<L, ShapeDtypeStruct>, "checkpoint::save: a ShapeDtypeStruct has no values to save");
    if constexpr (!std::is_same_v<L, ShapeDtypeStruct>) leaves.push_back(tree::detail::leaf_to_array(leaf));
    paths.push_back(path);
  };
  detail::each_path(tree, "", f);
  return detail::save_leaves(dir, leaves, paths, options);
}

// Restores the checkpoint at `dir` into the structure of `target` (orbax's
// restore with a target): a pytree whose leaves are arrays (restored with
// their shape, dtype and sharding), ShapeDtypeStructs (restored as they
// say; the tree comes back with Arrays in their place) or scalars. The
// target's leaf paths must be the saved ones and its shapes the saved
// shapes (else a ValueError naming the first that differs); a dtype that
// differs converts the saved values. Chunks are checked against their
// CRCs as they are read: damage is a FileError naming the file.
template <class T>
typename detail::Restored<T>::type restore(const std::string& dir, const T& target) {
  std::vector<detail::LeafTarget> targets;
  std::vector<std::string> paths;
  auto f = [&](const auto& leaf, const std::string& path) {
    using L = std::decay_t<decltype(leaf)>;
    if constexpr (std::is_same_v<L, ShapeDtypeStruct>) {
      targets.push_back({leaf.shape, leaf.dtype, leaf.sharding, leaf.sharding.has_value()});
    } else if constexpr (std::is_same_v<L, Array>) {
      if (leaf.is_tracer())
        throw ConcretizationError("checkpoint::restore: the target leaf " + path +
                                  " is a tracer; pass arrays or ShapeDtypeStructs");
      targets.push_back({leaf.shape(), leaf.dtype(), leaf.sharding(), leaf.committed()});
    } else {
      targets.push_back({{}, std::nullopt, std::nullopt, false});
    }
    paths.push_back(path);
  };
  detail::each_path(target, "", f);
  std::vector<Array> leaves = detail::restore_leaves(dir, targets, paths);
  std::size_t i = 0;
  auto g = [&]() { return leaves.at(i++); };
  return detail::rebuild(target, g);
}

struct CheckpointManagerOptions {
  // Keep the newest max_to_keep steps (all when unset).
  std::optional<int> max_to_keep;
  // Saves run in the background; the next save (or wait_until_finished)
  // waits for the one in flight.
  bool async = false;
  std::string compression = "none";
};

// orbax's CheckpointManager: step N lives in `<dir>/<N>`.
class CheckpointManager {
 public:
  explicit CheckpointManager(std::string dir, CheckpointManagerOptions options = {});
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  template <class T>
  void save(std::int64_t step, const T& tree) {
    begin_save(step);
    SaveOptions o{.async = options_.async, .force = true, .compression = options_.compression};
    pending_ = checkpoint::save(step_dir(step), tree, o);
    pending_step_ = step;
    if (!options_.async) wait_until_finished();
  }
  template <class T>
  typename detail::Restored<T>::type restore(std::int64_t step, const T& target) {
    wait_until_finished();
    return checkpoint::restore(existing_step_dir(step), target);
  }
  // The newest published step, if any.
  std::optional<std::int64_t> latest_step() const;
  // Every published step, oldest first.
  std::vector<std::int64_t> all_steps() const;
  // Waits for the save in flight (if any), then drops steps past max_to_keep.
  void wait_until_finished();
  const std::string& directory() const { return dir_; }

 private:
  void begin_save(std::int64_t step);
  std::string step_dir(std::int64_t step) const;
  std::string existing_step_dir(std::int64_t step) const;
  std::string dir_;
  CheckpointManagerOptions options_;
  SaveHandle pending_;
  std::optional<std::int64_t> pending_step_;
};

}  // namespace tessel::checkpoint
