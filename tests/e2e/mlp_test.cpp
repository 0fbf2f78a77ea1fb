// The seed MLP (samples/mlp.hpp) at a small size against JAX 0.11
// (tests/data/jax/mlp.json, tools/jax_facts.py mlp): initial loss, gradient
// sums and the loss after 30 SGD steps, in both threefry modes, trained with
// 8-way data parallelism and with 4-way data x 2-way model parallelism. The
// gradients must come out sharded like the parameters, unannotated.
#include <doctest/doctest.h>

#include "samples/mlp.hpp"
#include "tests/common/golden.hpp"

namespace ts = tessel;
using ts::P;
using mlp::Batch;
using mlp::Params;

namespace {

struct Partitionable {
  bool saved = ts::config().threefry_partitionable;
  explicit Partitionable(bool on) { ts::config().threefry_partitionable = on; }
  ~Partitionable() { ts::config().threefry_partitionable = saved; }
};

// The tutorial's two layouts.
void data_parallel(Params& params, Batch& batch) {
  auto mesh = ts::make_mesh({8}, {"batch"});
  batch = ts::device_put(batch, ts::NamedSharding(mesh, P("batch")));
  params = ts::device_put(params, ts::NamedSharding(mesh, P()));
}
using mlp::data_and_model_parallel;

}  // namespace

TEST_CASE("the seed MLP trains as in JAX, data parallel and data x model parallel") {
  auto facts = ts::testing::jax_fact("mlp.json");
  for (bool on : {false, true}) {
    for (bool model : {false, true}) {
      CAPTURE(on);
      CAPTURE(model);
      Partitionable mode(on);
      const auto& fact = facts[on ? "tiny_on" : "tiny_off"];
      auto [params, batch] = mlp::init_model(ts::random::key(0), {32, 64, 64, 64, 10}, 64);
      if (model) data_and_model_parallel(params, batch);
      else data_parallel(params, batch);
      auto loss_jit = ts::jit(mlp::loss);
      auto gradfun = ts::jit(ts::grad(mlp::loss));
      CHECK(loss_jit(params, batch).item<float>() == doctest::Approx(fact["loss_init"].get<double>()).epsilon(1e-5));
      Params grads = gradfun(params, batch);
      REQUIRE(grads.size() == 4);
      for (size_t l = 0; l < 4; ++l) {
        CAPTURE(l);
        // Sums of float32 gradients with terms of both signs: compare against their scale.
        double w_scale = ts::sum(ts::abs(grads[l].first)).item<float>(), b_scale = ts::sum(ts::abs(grads[l].second)).item<float>();
        CHECK(std::fabs(ts::sum(grads[l].first).item<float>() - fact["grad_sums"][l][0].get<double>()) <= 1e-5 * w_scale);
        CHECK(std::fabs(ts::sum(grads[l].second).item<float>() - fact["grad_sums"][l][1].get<double>()) <= 1e-5 * b_scale);
        CHECK(grads[l].first.sharding() == params[l].first.sharding());
        CHECK(grads[l].second.sharding() == params[l].second.sharding());
      }
      for (int i = 0; i < fact["steps"].get<int>(); ++i) params = mlp::sgd(params, gradfun(params, batch), 1e-5);
      CHECK(loss_jit(params, batch).item<float>() == doctest::Approx(fact["loss_after"].get<double>()).epsilon(1e-5));
      // SGD keeps every parameter's layout.
      if (model)
        CHECK(params[1].first.sharding() ==
              ts::Sharding(ts::NamedSharding(ts::make_mesh({4, 2}, {"batch", "model"}), P(ts::None, "model"))));
    }
  }
}

TEST_CASE("the MLP's gradient step communicates as data parallelism requires") {
  // 8-way data parallel: the only collectives are the all-reduces of the
  // gradients (one per parameter, or fewer when fused); no all-gather.
  auto [params, batch] = mlp::init_model(ts::random::key(0), {32, 64, 64, 64, 10}, 64);
  data_parallel(params, batch);
  auto text = ts::jit(ts::grad(mlp::loss)).lower(params, batch).compile().as_text();
  CHECK(text.find("all-reduce") != std::string::npos);
  CHECK(text.find("all-gather") == std::string::npos);
  CHECK(text.find("all-to-all") == std::string::npos);
  // The gradients' all-reduces are read only by the outputs: the schedule
  // (codegen/schedule.hpp) puts them after all the compute, so the devices
  // meet once at the end instead of once per layer.
  REQUIRE(text.find("// thunks") != std::string::npos);
  const std::string thunks = text.substr(text.find("// thunks"));
  const auto first_all_reduce = thunks.find("all-reduce"), last_dot = thunks.rfind("(gemm ");
  REQUIRE(last_dot != std::string::npos);
  CHECK(first_all_reduce > last_dot);
  CHECK(thunks.find("fusion", first_all_reduce) == std::string::npos);
}

TEST_CASE("the seed MLP in mixed precision: bfloat16 activations and matmuls, float32 master weights") {
  // The same training, once in float32 and once with loss_mixed: the
  // gradients are float32 and sharded like the weights, and the losses
  // follow the float32 run's within bfloat16's precision.
  for (bool model : {false, true}) {
    CAPTURE(model);
    auto [params, batch] = mlp::init_model(ts::random::key(0), {32, 64, 64, 64, 10}, 64);
    if (model) data_and_model_parallel(params, batch);
    else data_parallel(params, batch);
    auto mixed = [](const Params& p, const Batch& b) { return mlp::loss_mixed(p, b, ts::bfloat16); };
    auto loss32 = ts::jit(mlp::loss);
    auto loss16 = ts::jit(mixed);
    auto grad32 = ts::jit(ts::grad(mlp::loss));
    auto grad16 = ts::jit(ts::grad(mixed));
    Params p32 = params, p16 = params;
    Params g = grad16(p16, batch);
    for (size_t l = 0; l < 4; ++l) {
      CHECK(g[l].first.dtype() == ts::float32);
      CHECK(g[l].first.sharding() == params[l].first.sharding());
    }
    const double step = 1e-2;
    for (int i = 0; i < 20; ++i) {
      const double a = loss32(p32, batch).item<float>(), b = loss16(p16, batch).item<float>();
      CAPTURE(i);
      CHECK(std::fabs(a - b) <= 0.02 * a);  // bfloat16 keeps 8 bits: about 0.4% per rounding
      p32 = mlp::sgd(p32, grad32(p32, batch), step);
      p16 = mlp::sgd(p16, grad16(p16, batch), step);
    }
    // Both trained: the loss fell by the same amount.
    const double end32 = loss32(p32, batch).item<float>(), end16 = loss16(p16, batch).item<float>();
    CHECK(end32 < loss32(params, batch).item<float>());
    CHECK(std::fabs(end32 - end16) <= 0.02 * end32);
  }
}
