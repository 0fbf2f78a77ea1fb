// The seed MLP's gradient step (jit(grad(loss)), samples/mlp.hpp) on one
// device and data-parallel over every device, against PyTorch's forward and
// backward of the same network in the same run. Floor: the step's flops /
// the cores' peak FMA rate.
//
//   bench_mlp [small|full] [reps] [sharded-only]   (small: 784-2048x3-10, batch 2048)
#include "samples/mlp.hpp"

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

int main(int argc, char** argv) {
  const bool full = argc > 1 && std::string(argv[1]) == "full";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool sharded_only = argc > 3 && std::string(argv[3]) == "sharded-only";
  std::vector<std::int64_t> sizes = {784, 2048, 2048, 2048, 10};
  std::int64_t batch_size = 2048;
  if (full) sizes = {784, 8192, 8192, 8192, 10}, batch_size = 8192;

  // Forward: 2*B*n_in*n_out per layer; backward: dW for every layer and dx for
  // all but the first (the inputs are not differentiated).
  double flops = 0;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const double layer = 2.0 * double(batch_size) * double(sizes[l]) * double(sizes[l + 1]);
    flops += layer * (l == 0 ? 2 : 3);
  }
  const double floor_s = bench::flop_floor(flops);

  auto [params, batch] = mlp::init_model(ts::random::key(0), sizes, batch_size);
  auto gradfun = ts::jit(ts::grad(mlp::loss));
  // Steady state: after a layout change the block cache (runtime/buffer.hpp)
  // takes up to twice its cap in requests (three full-size steps) to trade
  // the previous layout's blocks for this one's.
  constexpr int kWarmup = 3;
  auto step = [&](const mlp::Params& p, const mlp::Batch& b) {
    auto g = gradfun(p, b);
    for (auto& [dW, db] : g) dW.block_until_ready(), db.block_until_ready();
  };

  const std::string setup = bench::torch_mlp_setup(sizes, batch_size);
  double torch_s = bench::torch_seconds(setup, "torch.autograd.grad(loss(), flat)", reps);

  std::ostringstream title;
  title << "MLP grad step " << sizes[0] << "-" << sizes[1] << "x3-10, batch " << batch_size << ", "
        << flops / 1e9 << " GFLOP (peak " << bench::peak_flops() / 1e9 << " GFLOP/s)";
  bench::header(title.str());

  auto p1 = ts::device_put(params, ts::devices()[0]);
  auto b1 = ts::device_put(batch, ts::devices()[0]);
  if (!sharded_only) {
    double one = bench::seconds([&] { step(p1, b1); }, reps, kWarmup);
    bench::row("tessel, 1 device", floor_s, one, torch_s, [&] { return bench::seconds([&] { step(p1, b1); }, 1, 0); });
  }

  const int n = ts::device_count();
  auto mesh = ts::make_mesh({n}, {"batch"});
  auto pn = ts::device_put(params, ts::NamedSharding(mesh, P()));
  auto bn = ts::device_put(batch, ts::NamedSharding(mesh, P("batch")));
  double many = bench::seconds([&] { step(pn, bn); }, reps, kWarmup);
  bench::row("tessel, " + std::to_string(n) + " devices, data parallel", floor_s, many, torch_s,
             [&] { return bench::seconds([&] { step(pn, bn); }, 1, 0); });
  if (n >= 8 && n % 2 == 0) {
    auto mesh2 = ts::make_mesh({n / 2, 2}, {"batch", "model"});
    ts::NamedSharding rep(mesh2, P());
    auto pm = ts::device_put(params, rep);
    pm[1].first = ts::device_put(pm[1].first, ts::NamedSharding(mesh2, P(ts::None, "model")));
    pm[1].second = ts::device_put(pm[1].second, ts::NamedSharding(mesh2, P("model")));
    pm[2].first = ts::device_put(pm[2].first, ts::NamedSharding(mesh2, P("model", ts::None)));
    auto bm = ts::device_put(batch, ts::NamedSharding(mesh2, P("batch", ts::None)));
    double dm = bench::seconds([&] { step(pm, bm); }, reps, kWarmup);
    bench::row("tessel, " + std::to_string(n / 2) + "x2 data x model", floor_s, dm, torch_s,
               [&] { return bench::seconds([&] { step(pm, bm); }, 1, 0); });
    if (!sharded_only) {
      // Sharded against one device, round by round: one step of each in
      // turn, so that every ratio compares steps a second apart (this host's
      // speed drifts by 10-30% over longer spans: the blocks above ran
      // minutes apart). The median of the rounds' ratios and their range.
      const int rounds = std::max(reps, 9);
      std::vector<double> dp, mp;
      for (int r = 0; r < rounds; ++r) {
        const double t1 = bench::seconds([&] { step(p1, b1); }, 1, 0);
        dp.push_back(bench::seconds([&] { step(pn, bn); }, 1, 0) / t1);
        mp.push_back(bench::seconds([&] { step(pm, bm); }, 1, 0) / t1);
      }
      for (auto* v : {&dp, &mp}) std::sort(v->begin(), v->end());
      std::printf("interleaved, %d rounds: data parallel %.3fx one device (%.3f-%.3f), %dx2 %.3fx (%.3f-%.3f)\n", rounds,
                  dp[dp.size() / 2], dp.front(), dp.back(), n / 2, mp[mp.size() / 2], mp.front(), mp.back());
    }
  }
  return bench::status();
}
