// 8192 x 8192 float32 matmul: one device, and 8 devices with row x column
// sharding (no communication); against oneDNN called directly on all cores
// in this process, and PyTorch. Floor: flops / the cores' peak FMA rate.
#include <oneapi/dnnl/dnnl.hpp>

#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

extern "C" void omp_set_num_threads(int);

namespace ts = tessel;
using ts::P;

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 8192;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const double flops = 2.0 * double(n) * double(n) * double(n);
  const double floor_s = bench::flop_floor(flops);
  auto a = ts::linspace(-1, 1, n * n).reshape({n, n}).block_until_ready();
  auto b = (ts::linspace(1, -1, n * n).reshape({n, n}) * 0.5f).block_until_ready();
  auto mm = ts::jit([](ts::Array x, ts::Array y) { return ts::dot(x, y); });

  // oneDNN directly, all cores.
  omp_set_num_threads(bench::cores());
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  using dt = dnnl::memory::data_type;
  dnnl::memory::desc md({n, n}, dt::f32, dnnl::memory::format_tag::ab);
  auto pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(md, md, md), eng);
  dnnl::matmul prim(pd);
  std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), cv(std::size_t(n * n));
  dnnl::memory am(md, eng, av.data()), bm(md, eng, bv.data()), cm(md, eng, cv.data());
  double dnnl_s = bench::seconds([&] {
    prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    s.wait();
  }, reps);
  const std::string ns = std::to_string(n);
  double torch_s = bench::torch_seconds("a = torch.randn(" + ns + ", " + ns + "); b = torch.randn(" + ns + ", " + ns + ")",
                                        "c = a @ b", reps);
  bench::header("matmul " + ns + "x" + ns + " float32, " + std::to_string(flops / 1e9) + " GFLOP (peak " +
                std::to_string(bench::peak_flops() / 1e9) + " GFLOP/s)");
  bench::row("oneDNN direct, all cores", floor_s, dnnl_s, torch_s);
  auto a1 = ts::device_put(a, ts::Device(0)), b1 = ts::device_put(b, ts::Device(0));
  double one = bench::seconds([&] { mm(a1, b1).block_until_ready(); }, reps);
  bench::row("tessel, 1 device", floor_s, one, torch_s);
  std::printf("  tessel 1 device / oneDNN direct: %.2f\n", one / dnnl_s);
  auto mesh = ts::make_mesh({ts::device_count()}, {"x"});
  auto a8 = ts::device_put(a, ts::NamedSharding(mesh, P("x", ts::None)));
  auto b8 = ts::device_put(b, ts::NamedSharding(mesh, P()));
  double eight = bench::seconds([&] { mm(a8, b8).block_until_ready(); }, reps);
  bench::row("tessel, " + std::to_string(ts::device_count()) + " devices, rows x replicated", floor_s, eight, torch_s);
  std::printf("  tessel %d devices / oneDNN direct: %.2f\n", ts::device_count(), eight / dnnl_s);
  return bench::status();
}
