// The seed tutorial's "Sharp bits: Generating random numbers" in C++, with
// ts::random, which is bit-identical to jax.random in both of JAX's modes.
//
// JAX (0.11) without jax_threefry_partitionable draws the whole flat counter
// and exchanges halves between devices (its compiled program has an
// all-gather and a collective-permute); tessel in that mode has every device
// compute the draw its shard needs from the full counter (no communication,
// redundant arithmetic). With the flag on (JAX's default since 0.5) the
// counter is the element's global index: each device draws exactly its own
// shard, nothing is exchanged or repeated, and the values differ.
#include <tessel/tessel.hpp>

#include <iostream>

namespace ts = tessel;
using ts::P;

int main() {
  auto f = ts::jit([](const ts::Array& key, const ts::Array& x) {
    auto numbers = ts::random::uniform(key, x.shape());
    return x + numbers;
  });
  auto key = ts::random::key(42);
  ts::Mesh mesh(ts::devices(), "x");
  ts::NamedSharding x_sharding(mesh, P("x"));
  auto x = ts::device_put(ts::arange(24), x_sharding);

  for (bool partitionable : {false, true}) {
    ts::config().threefry_partitionable = partitionable;
    std::cout << "\n## jax_threefry_partitionable = " << (partitionable ? "True" : "False") << "\n\n";
    ts::debug::visualize_array_sharding(f(key, x));
    auto f_exe = f.lower(key, x).compile();
    std::cout << "Communicating? " << (f_exe.communication().empty() ? "False" : "True") << "\n";
    std::cout << "flops per device: " << f_exe.cost_analysis()["flops"] << "\n";
    std::cout << (partitionable ? "Partitionable:" : "Stable:") << "\n" << f(key, x) << "\n";
  }
}
