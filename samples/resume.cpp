// The seed MLP trained on a 4x2 mesh (4-way data, 2-way tensor
// parallelism), checkpointed every step with ts::checkpoint's
// CheckpointManager (async saves while the next step runs), and resumed
// from the newest step after an interruption: the losses are those of a
// run that was never interrupted (tests/e2e/resume_test.cpp checks it).
//
//   ./tessel run samples/resume.cpp --dir /tmp/mlp_ckpt --steps 8 --stop-at 4   # "interrupted" after step 4
//   ./tessel run samples/resume.cpp --dir /tmp/mlp_ckpt --steps 8               # resumes at step 4
//
// --sizes a,b,c,...  the layer sizes (default 784,512,512,512,10), --batch N.
#include "samples/mlp.hpp"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

namespace ts = tessel;
using mlp::Batch;
using mlp::Params;

int main(int argc, char** argv) {
  std::string dir;
  int steps = 8, stop_at = -1;
  std::vector<std::int64_t> sizes = {784, 512, 512, 512, 10};
  std::int64_t batch_size = 512;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--steps" && i + 1 < argc) steps = std::stoi(argv[++i]);
    else if (a == "--stop-at" && i + 1 < argc) stop_at = std::stoi(argv[++i]);
    else if (a == "--batch" && i + 1 < argc) batch_size = std::stoll(argv[++i]);
    else if (a == "--sizes" && i + 1 < argc) {
      sizes.clear();
      std::stringstream s(argv[++i]);
      for (std::string t; std::getline(s, t, ',');) sizes.push_back(std::stoll(t));
    } else {
      std::cerr << "usage: resume --dir DIR [--steps N] [--stop-at K] [--sizes a,b,...] [--batch N]\n";
      return 2;
    }
  }
  if (dir.empty() || ts::device_count() < 8) {
    std::cerr << "resume needs --dir and 8 devices\n";
    return 2;
  }
  auto [params, batch] = mlp::init_model(ts::random::key(0), sizes, batch_size);
  mlp::data_and_model_parallel(params, batch);

  // The checkpointed state: the parameters and the step; `params` (fresh
  // from init) says each leaf's shape, dtype and sharding on restore.
  ts::checkpoint::CheckpointManager manager(dir, {.max_to_keep = 3, .async = true});
  int start = 0;
  if (auto latest = manager.latest_step()) {
    std::pair<Params, int> restored = manager.restore(*latest, std::pair<Params, int>{params, 0});
    params = restored.first;
    start = restored.second;
    std::printf("resumed from step %d in %s\n", start, dir.c_str());
  }
  auto loss = ts::jit(mlp::loss);
  auto grad = ts::jit(ts::grad(mlp::loss));
  for (int step = start; step < steps; ++step) {
    std::printf("step %d loss %.9g\n", step, double(loss(params, batch).item<float>()));
    params = mlp::sgd(params, grad(params, batch), 1e-5);
    // Saved while the next step computes: the arrays are immutable.
    manager.save(step + 1, std::pair<Params, int>{params, step + 1});
    if (step + 1 == stop_at) {
      manager.wait_until_finished();
      std::printf("stopped after step %d\n", stop_at);
      return 0;
    }
  }
  manager.wait_until_finished();
  std::printf("done: steps %s\n", [&] {
    std::string s;
    for (auto k : manager.all_steps()) s += std::to_string(k) + " ";
    return s;
  }().c_str());
}
