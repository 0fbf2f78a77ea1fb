// ts::debug: pictures of shardings (API.md "visualize_array_sharding").
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/creation.hpp>
#include <tessel/sharding.hpp>

namespace tessel::debug {

struct VisualizeOptions {
  // Background colour per device set; default: when the stream is a terminal.
  std::optional<bool> use_color;
  int max_width = 80;
  int min_width = 9;
  double scale = 1.0;
};

// JAX's box drawing of where each part of a 1-D or 2-D array lives.
void visualize_array_sharding(const Array& x, const VisualizeOptions& opts = {});
void visualize_array_sharding(const Array& x, std::ostream& os, const VisualizeOptions& opts = {});
void visualize_sharding(const Shape& shape, const Sharding& sharding, const VisualizeOptions& opts = {});
void visualize_sharding(const Shape& shape, const Sharding& sharding, std::ostream& os,
                        const VisualizeOptions& opts = {});
// The drawing as text (no colour unless asked for).
std::string sharding_text(const Shape& shape, const Sharding& sharding, const VisualizeOptions& opts = {});

// An SVG picture of the same layout, for documents.
std::string sharding_svg_text(const Shape& shape, const Sharding& sharding);
void sharding_svg(const Array& x, const std::string& path);

// jax.debug.print: prints `fmt` with each placeholder replaced by its
// argument's value as NumPy prints it ("[1. 2. 3.]"), on stdout, at run time:
// inside jit, shard_map, cond and loops it fires when the compiled program
// runs, with the traced values (at the top level of a jit, once, with the
// whole array; inside shard_map once per device, with that device's block;
// in a loop, every iteration; under vmap, once per batch element; under
// grad, with the primal values). Outside a trace it prints at once.
// Placeholders: "{}" (the next argument), "{0}" (by position), "{name}"
// (names take the arguments in order of first appearance); "{{" and "}}"
// are braces. Arguments are ts::Arrays or C++ arithmetic scalars. The order
// of prints from different devices is not defined (as JAX's ordered=False).
void print_values(const std::string& fmt, const std::vector<Array>& args);

namespace detail {
inline Array debug_arg(const Array& x) { return x; }
template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>
Array debug_arg(T x) {
  return tessel::array(x);
}
}  // namespace detail

template <class... A>
void print(const std::string& fmt, const A&... args) {
  print_values(fmt, std::vector<Array>{detail::debug_arg(args)...});
}

// jax.debug.callback: calls `f` at run time, where print would print, with
// the arguments' values as concrete host arrays (on this process's first
// device). `f` must not run tessel computations (a ts::Error says so: the
// devices are running the program that calls it).
void callback_values(std::function<void(const std::vector<Array>&)> f, const std::vector<Array>& args);
template <class F, class... A>
void callback(F f, const A&... args) {
  callback_values(
      [f](const std::vector<Array>& v) mutable {
        [&]<std::size_t... I>(std::index_sequence<I...>) { f(v[I]...); }(std::index_sequence_for<A...>{});
      },
      std::vector<Array>{detail::debug_arg(args)...});
}

}  // namespace tessel::debug

namespace tessel {
// jax.effects_barrier: waits until every debug print and callback of the
// programs launched so far has run (results can be ready before a program's
// prints are: a print of an input passed straight through). Rethrows the
// first exception a callback raised since the last barrier (the outputs of
// its program carry it too, where they were not ready already).
void effects_barrier();
}  // namespace tessel
