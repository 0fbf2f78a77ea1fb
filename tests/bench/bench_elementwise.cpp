// 2 * sin(x) + 1 on 8192 x 8192 float32: one fused kernel. Floor: reading
// and writing 256 MiB each at the machine's best bandwidth (bench::memory_floor).
// Then 2 * x + 1 and 2 * f(x) + 1 for the other transcendentals, one device,
// and ops that move data across the layout (x.T, argmax, concatenate, sort).
#include <functional>

#include <tessel/special.hpp>
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 8192;
  const std::size_t bytes = std::size_t(n * n) * 4;
  auto f = ts::jit([](ts::Array x) { return 2.0f * ts::sin(x) + 1.0f; });
  auto x = ts::linspace(-100, 100, n * n).reshape({n, n}).block_until_ready();
  const bench::Floor floor = bench::memory_floor(bytes, bytes);
  const double floor_s = floor.seconds;
  const double torch_s = bench::torch_seconds("x = torch.linspace(-100, 100, " + std::to_string(n * n) + ").reshape(" +
                                                  std::to_string(n) + ", " + std::to_string(n) + ")",
                                              "y = 2 * torch.sin(x) + 1");
  bench::header("2*sin(x)+1, " + std::to_string(n) + "x" + std::to_string(n) + " float32 (" +
                std::to_string(bench::cores()) + " cores, " + std::to_string(ts::device_count()) + " devices); floor: " +
                bench::describe(floor, 2.0 * double(bytes)));
  auto x1 = ts::device_put(x, ts::Device(0));
  double one = bench::seconds([&] { f(x1).block_until_ready(); });
  bench::row("1 device", floor_s, one, torch_s);
  auto x8 = ts::device_put(x, ts::NamedSharding(ts::make_mesh({ts::device_count()}, {"x"}), P("x")));
  double eight = bench::seconds([&] { f(x8).block_until_ready(); });
  bench::row(std::to_string(ts::device_count()) + " devices, P('x')", floor_s, eight, torch_s);

  // The others, x in [-100, 100] (log and log1p: [0.01, 100]).
  auto pos = ts::device_put(ts::linspace(0.01, 100, n * n).reshape({n, n}), ts::Device(0)).block_until_ready();
  struct Fn {
    const char* name;
    std::function<ts::Array(const ts::Array&)> f;
    const char* torch;
    bool positive;
  };
  const std::vector<Fn> fns{
      // No transcendental: the kernel streams its result out (non-temporal stores).
      {"", [](const ts::Array& a) { return a; }, "x", false},
      {"cos", [](const ts::Array& a) { return ts::cos(a); }, "torch.cos(x)", false},
      {"exp", [](const ts::Array& a) { return ts::exp(a); }, "torch.exp(x)", false},
      {"expm1", [](const ts::Array& a) { return ts::expm1(a); }, "torch.expm1(x)", false},
      {"log", [](const ts::Array& a) { return ts::log(a); }, "torch.log(x)", true},
      {"log1p", [](const ts::Array& a) { return ts::log1p(a); }, "torch.log1p(x)", true},
      {"tanh", [](const ts::Array& a) { return ts::tanh(a); }, "torch.tanh(x)", false},
      {"logistic", [](const ts::Array& a) { return ts::nn::sigmoid(a); }, "torch.sigmoid(x)", false},
      {"erf", [](const ts::Array& a) { return ts::scipy::special::erf(a); }, "torch.erf(x)", false},
  };
  for (const Fn& fn : fns) {
    auto g = ts::jit([h = fn.f](ts::Array a) { return 2.0f * h(a) + 1.0f; });
    const ts::Array& in = fn.positive ? pos : x1;
    const double t = bench::seconds([&] { g(in).block_until_ready(); });
    const double peer = bench::torch_seconds(
        std::string("x = torch.linspace(") + (fn.positive ? "0.01" : "-100") + ", 100, " + std::to_string(n * n) + ").reshape(" +
            std::to_string(n) + ", " + std::to_string(n) + ")",
        std::string("y = 2 * ") + fn.torch + " + 1");
    bench::row(std::string("2*") + fn.name + (*fn.name ? "(x)" : "x") + "+1, 1 device", floor_s, t, peer);
  }
  // Ops that move data across the layout, one device: x.T (a Transpose step,
  // the same bytes as the copy floor), argmax along each dim (reads 256 MiB:
  // the floor's read half), a concatenation along the last dim (reads x once:
  // a row's second read is in the cache; writes it twice).
  const std::string torch_x = "x = torch.linspace(-100, 100, " + std::to_string(n * n) + ").reshape(" +
                              std::to_string(n) + ", " + std::to_string(n) + ")";
  struct Layout {
    const char* name;
    std::function<ts::Array(const ts::Array&)> f;
    const char* torch;
    double floor;
  };
  const double read_floor = bench::memory_floor(bytes, 0).seconds, concat_floor = bench::memory_floor(bytes, 2 * bytes).seconds;
  const std::vector<Layout> layouts = {
      {"x.T", [](const ts::Array& a) { return a.T(); }, "y = x.t().contiguous()", floor_s},
      {"(x + x.T) / 2", [](const ts::Array& a) { return (a + a.T()) * 0.5f; }, "y = (x + x.t()) * 0.5", floor_s},
      {"argmax(x, 0)", [](const ts::Array& a) { return ts::argmax(a, 0); }, "y = torch.argmax(x, 0)", read_floor},
      {"argmax(x, 1)", [](const ts::Array& a) { return ts::argmax(a, 1); }, "y = torch.argmax(x, 1)", read_floor},
      {"concatenate([x, x], 1)", [](const ts::Array& a) { return ts::concatenate({a, a}, 1); }, "y = torch.cat([x, x], 1)",
       concat_floor},
  };
  for (const Layout& l : layouts) {
    auto g = ts::jit(l.f);
    const double t = bench::seconds([&] { g(x1).block_until_ready(); });
    bench::row(std::string(l.name) + ", 1 device", l.floor, t, bench::torch_seconds(torch_x, l.torch));
  }
  // Stable sorts of uniform random keys along each dim (a radix sort of each
  // line, tracer/sort_kernel.cpp); the floor: reading and writing x once.
  auto xr = ts::device_put(ts::random::uniform(ts::random::key(5), {n, n}, ts::float32), ts::Device(0)).block_until_ready();
  const std::string torch_r = "x = torch.rand(" + std::to_string(n) + ", " + std::to_string(n) + ")";
  for (int axis : {1, 0}) {
    auto g = ts::jit([axis](const ts::Array& a) { return ts::sort(a, axis); });
    const double t = bench::seconds([&] { g(xr).block_until_ready(); }, 3);
    bench::row("sort(x, " + std::to_string(axis) + "), stable, random keys, 1 device", floor_s, t,
               bench::torch_seconds(torch_r, "y = torch.sort(x, dim=" + std::to_string(axis) + ", stable=True)", 1));
  }
  return bench::status();
}
