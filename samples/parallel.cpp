// The seed tutorial's middle sections in C++: "Computation follows data
// sharding and is automatically parallelized", "When explicit shardings
// disagree, JAX errors" and "Constraining shardings of intermediates in
// jitted code", plus what tessel adds: the collectives in the compiled
// program, the bytes they move, and why each value got its sharding.
//
//   ./tessel run samples/parallel.cpp [--full]
//
// The products are 2048x2048 by default; --full uses the tutorial's 8192x8192.
#include <tessel/tessel.hpp>

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>

namespace ts = tessel;
using ts::P;

namespace {

void section(const std::string& title) { std::cout << "\n## " << title << "\n\n"; }

// %timeit -n 5 -r 5: mean and standard deviation of the per-loop time.
template <class F>
void timeit(const std::string& what, const F& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 5);
  }
  double mean = 0, var = 0;
  for (double v : t) mean += v / 5;
  for (double v : t) var += (v - mean) * (v - mean) / 5;
  std::cout << what << ": " << std::fixed << std::setprecision(2) << mean << " ms ± " << std::sqrt(var)
            << " ms per loop (mean ± std. dev. of 5 runs, 5 loops each)\n"
            << std::defaultfloat;
}

}  // namespace

int main(int argc, char** argv) {
  // The tutorial's 8192x8192 products take minutes on a laptop's cores; --full runs them at that size.
  bool full = argc > 1 && std::string(argv[1]) == "--full";
  const int64_t n = full ? 8192 : 2048;
  std::cout << std::unitbuf;
  if (ts::device_count() < 8) {
    std::cerr << "this sample needs 8 devices (TESSEL_DEVICE_COUNT=8, the default)\n";
    return 2;
  }
  section("Computation follows data sharding and is automatically parallelized");
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto x = ts::random::normal(ts::random::key(0), {n, n});
  x = ts::device_put(x, ts::NamedSharding(mesh, P("a", "b")));
  std::cout << "input sharding:\n";
  ts::debug::visualize_array_sharding(x);
  auto y = ts::sin(x);
  std::cout << "output sharding:\n";
  ts::debug::visualize_array_sharding(y);

  y = ts::device_put(x, ts::NamedSharding(mesh, P("a", ts::None)));
  auto z = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "b")));
  std::cout << "lhs sharding:\n";
  ts::debug::visualize_array_sharding(y);
  std::cout << "rhs sharding:\n";
  ts::debug::visualize_array_sharding(z);
  auto w = ts::dot(y, z);
  std::cout << "out sharding:\n";
  ts::debug::visualize_array_sharding(w);

  auto x_single = ts::device_put(x, ts::devices()[0]);
  ts::debug::visualize_array_sharding(x_single);
  // np.allclose copies both to the host; ts::allclose is jnp.allclose, which (like JAX) refuses committed
  // operands on different devices, so bring the sharded product to device 0 first.
  std::cout << "np.allclose(jnp.dot(x_single, x_single), jnp.dot(y, z)): "
            << (ts::allclose(ts::dot(x_single, x_single), ts::device_put(ts::dot(y, z), ts::devices()[0]), 1e-4, 1e-3)
                        .item<bool>()
                    ? "True"
                    : "False")
            << "\n";
  timeit("jnp.dot(x_single, x_single)", [&] { ts::dot(x_single, x_single).block_until_ready(); });
  timeit("jnp.dot(y, z)", [&] { ts::dot(y, z).block_until_ready(); });
  auto w_copy = ts::copy(w);
  ts::debug::visualize_array_sharding(w_copy);

  // tessel: the compiled program says how (no collective: each device has its operands).
  auto dot = ts::jit([](const ts::Array& a, const ts::Array& b) { return ts::dot(a, b); });
  auto compiled = dot.lower(y, z).compile();
  std::cout << "collectives in jnp.dot(y, z):";
  for (auto& c : compiled.communication()) std::cout << " " << c.collective;
  std::cout << (compiled.communication().empty() ? " none\n" : "\n");
  // Block rows x row blocks: a partial sum on every device, then an all-reduce.
  auto rows = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "a")));
  auto cols = ts::device_put(x, ts::NamedSharding(mesh, P("a", ts::None)));
  auto partial = dot.lower(rows, cols).compile();
  for (auto& c : partial.communication())
    std::cout << "jnp.dot(P(None,'a'), P('a',None)) needs " << c.collective << ": " << c.bytes_per_device / 1048576
              << " MiB read by each device\n";
  std::cout << "its output sharding: " << dot(rows, cols).sharding() << "\n";

  section("When explicit shardings disagree, JAX errors");
  auto v = ts::arange(24);
  auto devices = ts::devices();
  ts::NamedSharding sharding1(ts::Mesh(std::vector<ts::Device>(devices.begin(), devices.begin() + 4), "x"), P("x"));
  ts::NamedSharding sharding2(ts::Mesh(std::vector<ts::Device>(devices.begin() + 4, devices.end()), "x"), P("x"));
  try {
    ts::device_put(v, sharding1) + ts::device_put(v, sharding2);
  } catch (const ts::DeviceMismatchError& e) {
    std::cout << "DeviceMismatchError: " << e.what() << "\n\n";
  }
  std::vector<ts::Device> permuted;
  for (int i : {0, 1, 2, 3, 6, 7, 4, 5}) permuted.push_back(devices[i]);
  sharding1 = ts::NamedSharding(ts::Mesh(devices, "x"), P("x"));
  sharding2 = ts::NamedSharding(ts::Mesh(permuted, "x"), P("x"));
  try {
    ts::device_put(v, sharding1) + ts::device_put(v, sharding2);
  } catch (const ts::DeviceMismatchError& e) {
    std::cout << "DeviceMismatchError: " << e.what() << "\n\n";
  }
  // Uncommitted arrays (zeros, arange, array, ...) move to where they are needed.
  auto committed = ts::device_put(v, sharding1);
  committed + ts::ones_like(committed);
  committed + ts::arange(committed.size()).reshape(committed.shape());
  std::cout << "no error!\n";

  section("Constraining shardings of intermediates in jitted code");
  auto mesh_xy = ts::make_mesh({4, 2}, {"x", "y"});
  auto xs = ts::device_put(ts::random::normal(ts::random::key(0), {8192, 8192}), ts::NamedSharding(mesh_xy, P("x", "y")));
  auto f = ts::jit([&](ts::Array x) {
    x = x + 1;
    return ts::with_sharding_constraint(x, ts::NamedSharding(mesh_xy, P("y", "x")));
  });
  ts::debug::visualize_array_sharding(xs);
  ts::debug::visualize_array_sharding(f(xs));
  auto g = ts::jit([&](ts::Array x) {
    x = x + 1;
    return ts::with_sharding_constraint(x, ts::NamedSharding(mesh_xy, P()));
  });
  ts::debug::visualize_array_sharding(xs);
  ts::debug::visualize_array_sharding(g(xs));

  // tessel: why every value of a program has its sharding.
  auto h = ts::jit([&](ts::Array x, ts::Array w) {
    auto hidden = ts::with_sharding_constraint(ts::dot(x, w), ts::NamedSharding(mesh_xy, P("x", ts::None)));
    return ts::tanh(hidden) * 2.0;
  });
  auto wts = ts::device_put(ts::ones({8192, 1024}), ts::NamedSharding(mesh_xy, P("y", ts::None)));
  ts::debug::explain_sharding(h, xs, wts);
}
