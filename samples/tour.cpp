// The first sections of the seed tutorials ("Introduction to sharded
// computation" and "Distributed arrays and automatic parallelization"), in C++:
// devices, meshes, every PartitionSpec the tutorials show, PositionalSharding,
// and the pictures of where the data lives.
#include <tessel/tessel.hpp>

#include <iostream>

namespace ts = tessel;
using ts::P;

namespace {

void section(const std::string& title) { std::cout << "\n## " << title << "\n\n"; }

std::vector<float> iota(std::int64_t n) {
  std::vector<float> v(n);
  for (std::int64_t i = 0; i < n; ++i) v[i] = float(i);
  return v;
}

}  // namespace

int main() {
  if (ts::device_count() < 8) {
    std::cerr << "this sample needs 8 devices (TESSEL_DEVICE_COUNT=8, the default)\n";
    return 2;
  }
  section("Devices");
  std::cout << "[";
  for (auto& d : ts::devices()) std::cout << (d.id() ? ", " : "") << d;
  std::cout << "]\n";

  section("Key concept: data sharding");
  // arr = jnp.arange(32.0).reshape(4, 8)
  auto arr = ts::array(iota(32), {4, 8});
  std::cout << "arr.devices(): {";
  for (auto& d : arr.devices()) std::cout << d;
  std::cout << "}\n";
  std::cout << "arr.sharding: " << arr.sharding() << "\n";
  ts::debug::visualize_array_sharding(arr);

  // mesh = Mesh(create_device_mesh((2, 4)), ('x', 'y'))
  auto mesh24 = ts::make_mesh({2, 4}, {"x", "y"});
  ts::NamedSharding sharding(mesh24, P("x", "y"));
  std::cout << sharding << "\n";
  auto arr_sharded = ts::device_put(arr, sharding);
  std::cout << arr_sharded << "\n";
  ts::debug::visualize_array_sharding(arr_sharded);

  section("Sharding describes how array values are laid out in memory across devices");
  // x = jax.random.normal(jax.random.key(0), (8192, 8192)); the layout does
  // not depend on the values.
  auto x = ts::ones({8192, 8192});
  ts::debug::visualize_array_sharding(x);

  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto mesh_sharding = [&](const ts::PartitionSpec& spec) { return ts::NamedSharding(mesh, spec); };
  for (auto spec : {P("a", "b"), P("b", "a"), P("a", ts::None), P(ts::None, "b"), P(ts::None, "a"),
                    P({"a", "b"}, ts::None)}) {
    std::cout << "y = jax.device_put(x, mesh_sharding(" << spec << "))\n";
    auto y = ts::device_put(x, mesh_sharding(spec));
    ts::debug::visualize_array_sharding(y);
  }

  section("PositionalSharding");
  ts::PositionalSharding positional(ts::devices());
  auto y = ts::device_put(x, positional.reshape({8, 1}));
  ts::debug::visualize_array_sharding(y);
  std::cout << positional << "\n\n";
  std::cout << positional.reshape({8, 1}) << "\n\n";
  std::cout << positional.reshape({4, 2}) << "\n\n";
  auto s42 = positional.reshape({4, 2});
  y = ts::device_put(x, s42);
  ts::debug::visualize_array_sharding(y);
  auto s18 = positional.reshape({1, 8});
  std::cout << s18 << "\n";
  ts::debug::visualize_array_sharding(ts::device_put(x, s18));
  std::cout << s42.replicate(0, true) << "\n";
  ts::debug::visualize_array_sharding(ts::device_put(x, s42.replicate(0, true)));
  std::cout << ts::shape_str(s42.replicate(0).shape()) << "\n" << ts::shape_str(s42.replicate(1).shape()) << "\n";
  ts::debug::visualize_array_sharding(ts::device_put(x, s42.replicate(1)));

  section("Uneven shapes (tessel): shards need not divide the mesh");
  auto odd = ts::device_put(ts::array(iota(10 * 7), {10, 7}), mesh_sharding(P("a", "b")));
  ts::debug::visualize_array_sharding(odd);
  for (auto& shard : odd.addressable_shards())
    if (shard.device().id() >= 6) std::cout << shard.device() << " holds " << ts::to_string(shard.index()) << "\n";
  std::cout << odd << "\n";
  return 0;
}
