// The full-size seed MLP against ../shared/reference/: threefry_partitionable
// off, 30 SGD steps 8-way data parallel, then 30 more on a 4x2 data x model
// mesh, as the tutorial. Reference: 23.47892 -> 10.75999 -> 10.75245.
// About 7 TFLOP a step, so for a many-core machine:
//   TESSEL_THREEFRY_PARTITIONABLE=0 ./tessel run tools/mlp_reference_check.cpp
#include "samples/mlp.hpp"
#include <chrono>
#include <iostream>
namespace ts = tessel;
using ts::P;
int main() {
  std::cout << std::unitbuf;
  auto t0 = std::chrono::steady_clock::now();
  auto secs = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  auto [params, batch] = mlp::init_model(ts::random::key(0), {784, 8192, 8192, 8192, 10}, 8192);
  auto loss_jit = ts::jit(mlp::loss);
  auto gradfun = ts::jit(ts::grad(mlp::loss));
  auto mesh = ts::make_mesh({8}, {"batch"});
  batch = ts::device_put(batch, ts::NamedSharding(mesh, P("batch")));
  params = ts::device_put(params, ts::NamedSharding(mesh, P()));
  std::cout << "loss 0: " << loss_jit(params, batch) << "\n";
  for (int i = 1; i <= 30; ++i) params = mlp::sgd(params, gradfun(params, batch), 1e-5);
  std::cout << "loss 30 (8-way data parallel): " << loss_jit(params, batch) << "  (" << secs() << " s)\n";
  auto mesh2 = ts::make_mesh({4, 2}, {"batch", "model"});
  batch = ts::device_put(batch, ts::NamedSharding(mesh2, P("batch", ts::None)));
  auto rep = ts::NamedSharding(mesh2, P());
  for (auto& [w, b] : params) w = ts::device_put(w, rep), b = ts::device_put(b, rep);
  params[1].first = ts::device_put(params[1].first, ts::NamedSharding(mesh2, P(ts::None, "model")));
  params[1].second = ts::device_put(params[1].second, ts::NamedSharding(mesh2, P("model")));
  params[2].first = ts::device_put(params[2].first, ts::NamedSharding(mesh2, P("model", ts::None)));
  for (int i = 31; i <= 60; ++i) {
    params = mlp::sgd(params, gradfun(params, batch), 1e-5);
    if (i % 10 == 0) std::cout << "loss " << i << " (4x2): " << loss_jit(params, batch) << "  (" << secs() << " s)\n";
  }
}
