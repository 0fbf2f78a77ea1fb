// Checking traced programs against the reference interpreter from tests:
// a concrete array as a host array (exact, every dtype the tests use), and
// fn compiled under jit (and eagerly) against the interpreter's evaluation
// of its trace.
#pragma once

#include <doctest/doctest.h>

#include <any>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include <tessel/tessel.hpp>

#include "tests/common/run_graph.hpp"
#include "tracer/interpreter.hpp"

namespace tessel::testing {

inline tessel::HostArray host_of(const tessel::Array& a) {
  std::vector<unsigned char> bytes(std::size_t(tessel::numel(a.shape())) * tessel::dtype_size(a.dtype()));
  tessel::visit_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto v = a.to_vector<T>();
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < v.size(); ++i) bytes[i] = v[i];  // std::vector<bool> packs its bits
    } else {
      if (!bytes.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());  // an empty shard's data() may be null
    }
  });
  return tessel::host_array(a.dtype(), a.shape(), bytes.data());
}

// "" when the two arrays are equal bit for bit (any NaN matches any NaN),
// else what differs first.
inline std::string same_bits(const tessel::HostArray& got, const tessel::HostArray& want) {
  if (got.dtype != want.dtype || got.shape != want.shape)
    return "aval " + tessel::aval_str(got.dtype, got.shape) + " vs " + tessel::aval_str(want.dtype, want.shape);
  const std::size_t es = tessel::dtype_size(got.dtype);
  for (std::int64_t i = 0; i < tessel::numel(got.shape); ++i) {
    const double a = got.as_double(i), b = want.as_double(i);
    if (std::memcmp(got.bytes.data() + i * es, want.bytes.data() + i * es, es) != 0 && !(a != a && b != b))
      return "element " + std::to_string(i) + " of " + tessel::aval_str(got.dtype, got.shape) + ": got " +
             std::to_string(a) + ", want " + std::to_string(b);
  }
  return "";
}

// fn (several outputs) traced on args and run by the reference interpreter.
inline std::vector<tessel::HostArray> interpret_fn(
    const std::function<std::vector<tessel::Array>(const std::vector<tessel::Array>&)>& fn,
    const std::vector<tessel::Array>& args) {
  auto tr = tessel::detail::trace("f", args, [&](const std::vector<tessel::Array>& xs,
                                                 std::function<std::any(const std::vector<tessel::Array>&)>&) {
    return fn(xs);
  });
  const tessel::Graph& g = *std::static_pointer_cast<tessel::Graph>(tr.graph);
  std::vector<tessel::HostArray> hosts;
  for (auto& a : args) hosts.push_back(host_of(a));
  for (auto& a : tr.captured) hosts.push_back(host_of(a));
  return tessel::interpret(g, hosts);
}

// fn traced (the shard_map node with its body) and run by the reference
// interpreter, against fn under jit and eagerly.
template <class F>
void check(const F& fn, const std::vector<tessel::Array>& args, bool eager = true) {
  auto tr = tessel::detail::trace("f", args, [&](const std::vector<tessel::Array>& xs, std::function<std::any(const std::vector<tessel::Array>&)>&) {
    return std::vector<tessel::Array>{fn(xs)};
  });
  const tessel::Graph& g = *std::static_pointer_cast<tessel::Graph>(tr.graph);
  std::vector<tessel::HostArray> hosts;
  for (auto& a : args) hosts.push_back(host_of(a));
  for (auto& a : tr.captured) hosts.push_back(host_of(a));
  auto want = tessel::interpret(g, hosts);
  auto jitted = tessel::jit([&](const std::vector<tessel::Array>& xs) { return fn(xs); });
  tessel::Array got = jitted(args);
  CHECK(tessel::testing::compare_arrays(host_of(got), want[0], 1e-5, 1e-5) == "");
  if (eager) CHECK(tessel::testing::compare_arrays(host_of(fn(args)), want[0], 1e-5, 1e-5) == "");
}

// "" when every addressable shard's own buffer holds, bit for bit, its
// slice of `full` (the global values, row-major, in the array's dtype; NaN
// matches any NaN). Reading the array whole reads one replica of each box,
// so a replica whose block went wrong, or that shares a block it should
// not, would go unseen there.
inline std::string shards_hold(const tessel::Array& a, const tessel::HostArray& full) {
  const tessel::Shape& shape = full.shape;
  const std::size_t es = tessel::dtype_size(full.dtype);
  for (const auto& shard : a.addressable_shards()) {
    const tessel::Index& index = shard.index();
    tessel::Shape local;
    for (auto& sl : index) local.push_back(sl.stop - sl.start);
    const tessel::HostArray mine = host_of(shard.data());
    if (mine.dtype != full.dtype || tessel::numel(mine.shape) != tessel::numel(local))
      return "shard on " + tessel::to_string(shard.device()) + ": " + tessel::aval_str(mine.dtype, mine.shape) +
             " for a box of " + tessel::shape_str(local);
    for (std::int64_t i = 0; i < tessel::numel(local); ++i) {
      std::int64_t rest = i, flat = 0, stride = 1;
      for (int d = int(local.size()) - 1; d >= 0; --d) {
        flat += (index[size_t(d)].start + rest % local[size_t(d)]) * stride;
        rest /= local[size_t(d)];
        stride *= shape[size_t(d)];
      }
      const double got = mine.as_double(i), want = full.as_double(flat);
      if (std::memcmp(mine.bytes.data() + std::size_t(i) * es, full.bytes.data() + std::size_t(flat) * es, es) != 0 &&
          !(got != got && want != want))
        return "shard on " + tessel::to_string(shard.device()) + ", local element " + std::to_string(i) + ": got " +
               std::to_string(got) + ", want " + std::to_string(want);
    }
  }
  return "";
}

inline tessel::Array random_array(std::mt19937& rng, const tessel::Shape& s, tessel::DType t) {
  std::vector<double> v(tessel::numel(s));
  std::uniform_int_distribution<int> u(-9, 9);
  for (auto& e : v) e = tessel::is_floating(t) ? u(rng) / 4.0 : t == tessel::DType::uint32 ? double(u(rng) + 9) : double(u(rng));
  return tessel::array(v, s).astype(t);
}

}  // namespace tessel::testing
