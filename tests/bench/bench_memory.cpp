// Memory of a training step (issue 41): the seed MLP's SGD step, jitted with
// and without donate_argnums on the parameters, one device.
//
//   - memory_analysis's peak per device against its lower bound: the
//     parameters, their gradients, the batch, and the activations alive at
//     the backward pass's widest point (the three hidden layers' outputs
//     kept for the weight gradients, the output's gradient and the widest
//     gradient being computed);
//   - the runtime's live device blocks (rt::peak_live_bytes) over 20 steps,
//     after the first step and after the last (flat: equal);
//   - the peak RSS over 20 steps beyond the RSS before them, each case in a
//     process of its own (this program run again), its step compiled before
//     (the compiler's memory is not the step's), and PyTorch's for the same
//     step (in place SGD, torch.no_grad) likewise.
//
//   bench_memory [small|tiny] [steps]   (small: 784-2048x3-10, batch 2048)
#include "runtime/buffer.hpp"
#include "samples/mlp.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;

namespace {

// The process's peak resident set since the last reset, in bytes.
std::size_t peak_rss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

double mib(std::size_t b) { return double(b) / (1 << 20); }

mlp::Params sgd(const mlp::Params& p, const mlp::Batch& b) {
  const mlp::Params g = ts::grad(mlp::loss)(p, b);
  mlp::Params out;
  for (std::size_t l = 0; l < p.size(); ++l)
    out.push_back({p[l].first - 0.01f * g[l].first, p[l].second - 0.01f * g[l].second});
  return out;
}

// PyTorch's peak RSS beyond its RSS before the steps, after the first and
// the last of `steps` SGD steps of the same network (a first step before).
std::pair<double, double> torch_peak_mib(const std::vector<std::int64_t>& sizes, std::int64_t batch, int steps) {
  std::ostringstream py;
  py << "import torch\n"
     << "torch.set_num_threads(" << bench::cores() << ")\n"
     << "def hwm():\n"
     << "    for line in open('/proc/self/status'):\n"
     << "        if line.startswith('VmHWM:'): return int(line.split()[1]) * 1024\n"
     << bench::torch_mlp_setup(sizes, batch)
     << "def step():\n"
     << "    g = torch.autograd.grad(loss(), flat)\n"
     << "    with torch.no_grad():\n"
     << "        for v, d in zip(flat, g): v.sub_(0.01 * d)\n"
     << "step()\n"
     << "open('/proc/self/clear_refs', 'w').write('5')\n"
     << "base = hwm()\n"
     << "step()\n"
     << "first = hwm() - base\n"
     << "for _ in range(" << steps - 1 << "): step()\n"
     << "print(first / 2**20, (hwm() - base) / 2**20)\n";
  const std::string path = "/tmp/tessel_bench_memory_torch.py";
  std::ofstream(path) << py.str();
  const char* python = std::getenv("TESSEL_BENCH_PYTHON");
  FILE* p = popen((std::string(python ? python : "/usr/bin/python3") + " -I " + path + " 2>/dev/null").c_str(), "r");
  double a = -1, b = -1;
  if (!p) return {a, b};
  if (std::fscanf(p, "%lf %lf", &a, &b) != 2) a = b = -1;
  pclose(p);
  return {a, b};
}

// Distributed lu of 512 x 512 float32 with its rows split over 8 devices
// (issue 41's target: at most 2.2 shards of peak a device, where the rows in
// and out are 2): memory_analysis's peak, and the runtime's live device
// blocks during a run beyond those before it (all 8 devices, over 8).
void distributed_lu() {
  if (ts::device_count() < 8) return;
  const std::int64_t n = 512;
  auto mesh = ts::make_mesh({8}, {"x"});
  ts::Array a = ts::device_put(ts::random::normal(ts::random::key(5), {n, n}), ts::NamedSharding(mesh, ts::P("x", ts::None)));
  auto lu = ts::jit([](const ts::Array& x) { return ts::linalg::lu(x).lu; });
  const ts::MemoryAnalysis m = lu.lower(a).compile().memory_analysis();
  lu(a).block_until_ready();
  const double shard = double(n * n / 8 * 4);
  const std::size_t before = ts::rt::live_bytes();  // the argument, on every device
  ts::rt::reset_peak_live_bytes();
  ts::Array out = lu(a).block_until_ready();
  const double run_peak = double(ts::rt::peak_live_bytes() - before) / 8 + shard;  // with the argument's shard
  std::printf("\n== distributed lu %lld x %lld float32, rows split over 8 devices (a shard: %.0f KiB)\n", (long long)n,
              (long long)n, shard / 1024);
  std::printf("peak a device: memory_analysis %.3f shards, the runtime's blocks %.3f shards (target 2.2; rows in and "
              "out 2)\n", double(m.peak_memory_in_bytes) / shard, run_peak / shard);
}

struct Model {
  std::vector<std::int64_t> sizes;
  std::int64_t batch;
};

Model model(const std::string& size) {
  if (size == "tiny") return {{64, 256, 256, 256, 10}, 128};
  return {{784, 2048, 2048, 2048, 10}, 2048};
}

// A case in this process: `steps` steps after a compiled first one; prints
// the runtime's live bytes after the first and the last step and the peak
// RSS beyond the RSS before them.
int child(const std::string& size, bool donate, int steps) {
  const Model m = model(size);
  auto [params0, data] = mlp::init_model(ts::random::key(0), m.sizes, m.batch);
  const ts::Device dev = ts::devices()[0];
  data = ts::device_put(data, dev);
  mlp::Params p = ts::device_put(params0, dev);
  const auto f = donate ? ts::jit(sgd, {.donate_argnums = {0}}) : ts::jit(sgd);
  const ts::Compiled c = f.lower(p, data).compile();
  p = mlp::Params(c(p, data));
  for (auto& [W, b] : p) W.block_until_ready(), b.block_until_ready();
  reset_peak_rss();
  const std::size_t base = peak_rss();
  const std::size_t live0 = ts::rt::live_bytes();
  ts::rt::reset_peak_live_bytes();
  std::size_t first = 0, rss_first = 0;
  for (int s = 0; s < steps; ++s) {
    p = mlp::Params(c(p, data));
    for (auto& [W, b] : p) W.block_until_ready(), b.block_until_ready();
    if (s == 0) first = ts::rt::peak_live_bytes() - live0, rss_first = peak_rss() - base;
  }
  std::printf("%zu %zu %zu %zu\n", first, ts::rt::peak_live_bytes() - live0, rss_first, peak_rss() - base);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "child") return child(argv[2], std::string(argv[3]) == "donate", std::atoi(argv[4]));
  const std::string size = argc > 1 ? argv[1] : "small";
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const Model m = model(size);
  const auto& sizes = m.sizes;
  const std::int64_t batch = m.batch;
  auto [params0, data] = mlp::init_model(ts::random::key(0), sizes, batch);

  // The bound, in bytes.
  std::size_t param_bytes = 0, widest = 0, hidden = 0;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
    param_bytes += std::size_t(sizes[l] * sizes[l + 1] + sizes[l + 1]) * 4;
    widest = std::max(widest, std::size_t(batch * sizes[l + 1]) * 4);
    if (l + 2 < sizes.size()) hidden += std::size_t(batch * sizes[l + 1]) * 4;
  }
  const std::size_t batch_bytes = std::size_t(batch * (sizes.front() + sizes.back())) * 4;
  const std::size_t acts = hidden + std::size_t(batch * sizes.back()) * 4 + widest;
  const std::size_t bound = 2 * param_bytes + batch_bytes + acts;
  const ts::MemoryAnalysis mp = ts::jit(sgd).lower(params0, data).compile().memory_analysis();
  const ts::MemoryAnalysis md = ts::jit(sgd, {.donate_argnums = {0}}).lower(params0, data).compile().memory_analysis();

  std::printf("== memory of the MLP's SGD step %lld", (long long)sizes[0]);
  for (std::size_t l = 1; l < sizes.size(); ++l) std::printf("-%lld", (long long)sizes[l]);
  std::printf(", batch %lld, one device, %d steps\n", (long long)batch, steps);
  std::printf("parameters %.1f MiB, batch %.1f MiB, activations alive at the backward pass's widest point %.1f MiB\n",
              mib(param_bytes), mib(batch_bytes), mib(acts));
  std::printf("bound (parameters + gradients + batch + those activations): %.1f MiB\n", mib(bound));
  std::printf("%-30s %13s %8s %22s %24s\n", "case", "analysis MiB", "x bound", "live MiB, step 1 / n",
              "peak RSS MiB, step 1 / n");
  double grow[2] = {0, 0};
  for (int donate = 0; donate < 2; ++donate) {
    const std::string cmd = std::string("/proc/self/exe child ") + size + (donate ? " donate " : " plain ") +
                            std::to_string(steps);
    // /proc/self/exe names this program in the shell popen starts only
    // through its parent: ask for our own path instead.
    char self[4096] = {0};
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    FILE* pipe = popen((std::string(self) + cmd.substr(std::string("/proc/self/exe").size())).c_str(), "r");
    std::size_t first = 0, last = 0, g1 = 0, g = 0;
    if (!pipe || std::fscanf(pipe, "%zu %zu %zu %zu", &first, &last, &g1, &g) != 4) return 1;
    pclose(pipe);
    grow[donate] = mib(g);
    const ts::MemoryAnalysis& ma = donate ? md : mp;
    std::printf("%-30s %13.1f %8.2f %10.1f / %9.1f %12.1f / %9.1f\n", donate ? "tessel, donate_argnums={0}" : "tessel",
                mib(ma.peak_memory_in_bytes), double(ma.peak_memory_in_bytes) / double(bound), mib(first), mib(last),
                mib(g1), grow[donate]);
  }
  const auto [t1, tn] = torch_peak_mib(sizes, batch, steps);
  std::printf("%-30s %13s %8s %22s %12.1f / %9.1f\n", "torch (autograd.grad, sub_)", "", "", "", t1, tn);
  std::printf("donation saves %.1f MiB of analysed peak and %.1f MiB of peak RSS (a parameter set: %.1f MiB)\n",
              mib(mp.peak_memory_in_bytes - md.peak_memory_in_bytes), grow[0] - grow[1], mib(param_bytes));
  distributed_lu();
  return 0;
}
