// The seed tutorial's neural network: 8-way batch data parallelism, then
// 4-way batch data parallelism with 2-way model tensor parallelism, training
// the same MLP with SGD under jit(grad(loss)). As in the tutorial, the
// program is written once; only the shardings of the inputs change.
//
//   ./tessel run samples/mlp.cpp [--small] [--steps N] [--timing-loops N] [--dtype bfloat16]
//
// --dtype bfloat16 (or float16): mixed precision, the activations and
// matmuls in that dtype, float32 master weights (mlp::loss_mixed).
//
// Full size (784-8192-8192-8192-10, batch 8192) needs about 7 TFLOP a step;
// --small (784-2048-2048-2048-10, batch 2048) about 1/50 of that.
#include "samples/mlp.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <string>

namespace ts = tessel;
using ts::P;
using mlp::Batch;
using mlp::Params;

namespace {

void section(const std::string& title) { std::cout << "\n## " << title << "\n\n"; }

// %timeit -n loops -r runs: the mean and standard deviation of the per-loop time.
template <class F>
void timeit(const std::string& what, int loops, int runs, const F& f) {
  f();  // compile and warm up
  std::vector<double> per_loop;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < loops; ++i) f();
    per_loop.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / loops);
  }
  double mean = 0, var = 0;
  for (double t : per_loop) mean += t / runs;
  for (double t : per_loop) var += (t - mean) * (t - mean) / runs;
  std::cout << what << ": " << std::fixed << std::setprecision(1) << mean << " ms ± " << std::sqrt(var)
            << " ms per loop (mean ± std. dev. of " << runs << " runs, " << loops << " loops each)\n"
            << std::defaultfloat;
}

ts::DType compute_dtype = ts::float32;  // --dtype

ts::Array model_loss(const Params& params, const Batch& batch) {
  return compute_dtype == ts::float32 ? mlp::loss(params, batch) : mlp::loss_mixed(params, batch, compute_dtype);
}

Params train(Params params, const Batch& batch, int steps) {
  static auto gradfun = ts::jit(ts::grad(model_loss));
  const double step_size = 1e-5;
  for (int i = 0; i < steps; ++i) params = mlp::sgd(params, gradfun(params, batch), step_size);
  return params;
}

}  // namespace

int main(int argc, char** argv) {
  std::cout << std::unitbuf;  // a long run: show each line as it comes
  bool small = false;
  int steps = 30, loops = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--small") small = true;
    else if (a == "--steps" && i + 1 < argc) steps = std::stoi(argv[++i]);
    else if (a == "--timing-loops" && i + 1 < argc) loops = std::stoi(argv[++i]);
    else if (a == "--dtype" && i + 1 < argc) compute_dtype = ts::dtype_from_name(argv[++i]);
    else {
      std::cerr << "usage: mlp [--small] [--steps N] [--timing-loops N] [--dtype bfloat16|float16]\n";
      return 2;
    }
  }
  if (ts::device_count() < 8) {
    std::cerr << "this sample needs 8 devices (TESSEL_DEVICE_COUNT=8, the default)\n";
    return 2;
  }
  std::vector<std::int64_t> layer_sizes = {784, 8192, 8192, 8192, 10};
  std::int64_t batch_size = 8192;
  if (small) layer_sizes = {784, 2048, 2048, 2048, 10}, batch_size = 2048;

  auto loss_jit = ts::jit(model_loss);
  auto gradfun = ts::jit(ts::grad(model_loss));
  auto [params, batch] = mlp::init_model(ts::random::key(0), layer_sizes, batch_size);
  std::cout << "layer sizes";
  for (auto s : layer_sizes) std::cout << " " << s;
  std::cout << ", batch " << batch_size << ", compute dtype " << ts::dtype_name(compute_dtype)
            << ", threefry_partitionable "
            << (ts::config().threefry_partitionable ? "on" : "off") << "\n";

  section("8-way batch data parallelism");
  auto mesh = ts::make_mesh({8}, {"batch"});
  ts::NamedSharding sharding(mesh, P("batch")), replicated_sharding(mesh, P());
  batch = ts::device_put(batch, sharding);
  params = ts::device_put(params, replicated_sharding);
  std::cout << "loss_jit(params, batch) = " << loss_jit(params, batch) << "\n";
  params = train(params, batch, steps);
  std::cout << "after " << steps << " SGD steps: " << loss_jit(params, batch) << "\n";
  timeit("gradfun(params, batch), 8 devices", loops, loops,
         [&] { gradfun(params, batch)[0].first.block_until_ready(); });
  auto batch_single = ts::device_put(batch, ts::devices()[0]);
  auto params_single = ts::device_put(params, ts::devices()[0]);
  timeit("gradfun(params_single, batch_single), 1 device", loops, loops,
         [&] { gradfun(params_single, batch_single)[0].first.block_until_ready(); });

  section("4-way batch data parallelism and 2-way model tensor parallelism");
  mesh = ts::make_mesh({4, 2}, {"batch", "model"});
  batch = ts::device_put(batch, ts::NamedSharding(mesh, P("batch", ts::None)));
  ts::debug::visualize_array_sharding(batch.first);
  ts::debug::visualize_array_sharding(batch.second);
  replicated_sharding = ts::NamedSharding(mesh, P());
  auto& [W1, b1] = params[0];
  auto& [W2, b2] = params[1];
  auto& [W3, b3] = params[2];
  auto& [W4, b4] = params[3];
  W1 = ts::device_put(W1, replicated_sharding);
  b1 = ts::device_put(b1, replicated_sharding);
  W2 = ts::device_put(W2, ts::NamedSharding(mesh, P(ts::None, "model")));
  b2 = ts::device_put(b2, ts::NamedSharding(mesh, P("model")));
  W3 = ts::device_put(W3, ts::NamedSharding(mesh, P("model", ts::None)));
  b3 = ts::device_put(b3, replicated_sharding);
  W4 = ts::device_put(W4, replicated_sharding);
  b4 = ts::device_put(b4, replicated_sharding);
  ts::debug::visualize_array_sharding(W2);
  ts::debug::visualize_array_sharding(W3);
  std::cout << "loss_jit(params, batch) = " << loss_jit(params, batch) << "\n";
  // The gradients come out sharded like the parameters, unannotated.
  auto grads = gradfun(params, batch);
  std::cout << "dW2.sharding: " << grads[1].first.sharding() << "\n";
  std::cout << "dW3.sharding: " << grads[2].first.sharding() << "\n";
  params = train(params, batch, steps);
  std::cout << "after " << steps << " more SGD steps: " << loss_jit(params, batch) << "\n";
  timeit("gradfun(params, batch), 4x2 mesh", loops, loops,
         [&] { gradfun(params, batch)[0].first.block_until_ready(); });
}
