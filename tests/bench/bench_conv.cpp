// Convolutions (issue 42): ResNet-like 2-D layers, NHWC, forward and
// forward + backward (both gradients), under jit on one device, with the
// batch split over every device, and with the rows split (halo exchange);
// against oneDNN called directly on all cores (its own layout for the
// kernel, prepared outside the timing) and PyTorch's conv2d (channels last)
// in the same run. Floor: the flops at the cores' peak FMA rate.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

extern "C" void omp_set_num_threads(int);

namespace ts = tessel;
namespace lax = tessel::lax;
using ts::Array;
using ts::P;

namespace {

struct Layer {
  const char* name;
  std::int64_t N, H, W, C, O, K, stride;
  const char* padding;
};

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

// oneDNN's forward, backward-data and backward-weights primitives for one
// layer, on all cores, with its preferred kernel layouts.
struct OneDnn {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  dnnl::memory src, dst, wei, dsrc, ddst, dwei;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights bwd_weights;

  OneDnn(const Layer& l, std::int64_t Ho, std::int64_t Wo, std::int64_t pad_lo_h, std::int64_t pad_lo_w,
         std::int64_t pad_hi_h, std::int64_t pad_hi_w) {
    dnnl::memory::desc src_md({l.N, l.C, l.H, l.W}, dt::f32, tag::nhwc), dst_md({l.N, l.O, Ho, Wo}, dt::f32, tag::nhwc);
    dnnl::memory::desc wei_any({l.O, l.C, l.K, l.K}, dt::f32, tag::any);
    const dnnl::memory::dims st{l.stride, l.stride}, dil{0, 0}, pl{pad_lo_h, pad_lo_w}, pr{pad_hi_h, pad_hi_w};
    dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_md,
                                       wei_any, dst_md, st, dil, pl, pr);
    dnnl::convolution_forward::primitive_desc fpd(fd, eng);
    dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, src_md, wei_any, dst_md, st, dil, pl, pr);
    dnnl::convolution_backward_data::primitive_desc bpd(bd, eng, fpd);
    dnnl::convolution_backward_weights::desc wd(dnnl::algorithm::convolution_direct, src_md, wei_any, dst_md, st, dil, pl,
                                                pr);
    dnnl::convolution_backward_weights::primitive_desc wpd(wd, eng, fpd);
    fwd = dnnl::convolution_forward(fpd);
    bwd_data = dnnl::convolution_backward_data(bpd);
    bwd_weights = dnnl::convolution_backward_weights(wpd);
    auto filled = [&](const dnnl::memory::desc& md) {
      dnnl::memory m(md, eng);
      float* p = static_cast<float*>(m.get_data_handle());
      for (std::size_t i = 0; i < md.get_size() / sizeof(float); ++i) p[i] = float(int(i % 17) - 8) / 16.0f;
      return m;
    };
    src = filled(fpd.src_desc());
    dst = filled(fpd.dst_desc());
    wei = filled(fpd.weights_desc());
    dsrc = filled(bpd.diff_src_desc());
    ddst = filled(wpd.diff_dst_desc());
    dwei = filled(wpd.diff_weights_desc());
  }
  void forward() {
    fwd.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    s.wait();
  }
  void forward_backward() {
    fwd.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    bwd_data.execute(s, {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, dsrc}});
    bwd_weights.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dwei}});
    s.wait();
  }
};

}  // namespace

// Max pooling 2x2 stride 2 (lax.reduce_window): forward and forward + the
// input's gradient, against PyTorch's max_pool2d on channels-last tensors.
// Floors: the bytes each must move at least once.
void pooling(int reps) {
  const std::int64_t N = 32, H = 112, W = 112, C = 64;
  Array x = ts::linspace(-1, 1, N * H * W * C).reshape({N, H, W, C}).block_until_ready();
  Array g = ts::linspace(-0.5, 0.5, N * H / 2 * W / 2 * C).reshape({N, H / 2, W / 2, C}).block_until_ready();
  auto pool = [](Array a) { return lax::reduce_window(a, -INFINITY, "max", {1, 2, 2, 1}, {1, 2, 2, 1}, lax::Padding{"VALID"}); };
  auto fwd = ts::jit(pool);
  auto fwd_bwd = ts::jit([&](Array a, Array c) {
    auto [y, pullback] = ts::vjp(pool, a);
    auto [ga] = pullback(c);
    return std::make_tuple(y, ga);
  });
  const std::string setup = "import torch.nn.functional as F\n"
                            "x = torch.randn(32, 64, 112, 112).to(memory_format=torch.channels_last).requires_grad_()\n"
                            "g = torch.randn(32, 64, 56, 56).contiguous(memory_format=torch.channels_last)";
  const double torch_f = bench::torch_seconds(setup, "with torch.no_grad(): F.max_pool2d(x, 2)", reps);
  const double torch_fb = bench::torch_seconds(setup, "F.max_pool2d(x, 2).backward(g)", reps);
  const double one_f = bench::seconds([&] { fwd(x).block_until_ready(); }, reps);
  const double one_fb = bench::seconds([&] { std::get<1>(fwd_bwd(x, g)).block_until_ready(); }, reps);
  auto mesh = ts::make_mesh({ts::device_count()}, {"x"});
  Array xs = ts::device_put(x, ts::NamedSharding(mesh, P("x"))), gs = ts::device_put(g, ts::NamedSharding(mesh, P("x")));
  const double dp_f = bench::seconds([&] { fwd(xs).block_until_ready(); }, reps);
  const double dp_fb = bench::seconds([&] { std::get<1>(fwd_bwd(xs, gs)).block_until_ready(); }, reps);
  // The images split along their rows: each device pools its own rows (112 / 8 = 14, even: no halo),
  // and its gradient likewise (the selection and the input gradient of its own rows).
  Array xr = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x")));
  Array gr = ts::device_put(g, ts::NamedSharding(mesh, P(ts::None, "x")));
  const double sp_f = bench::seconds([&] { fwd(xr).block_until_ready(); }, reps);
  const double sp_fb = bench::seconds([&] { std::get<1>(fwd_bwd(xr, gr)).block_until_ready(); }, reps);
  const std::size_t bx = std::size_t(N * H * W * C) * 4, by = bx / 4;
  const bench::Floor ff = bench::memory_floor(bx, by), ffb = bench::memory_floor(bx + by, by + bx);
  bench::header("max pool 2x2 stride 2, N=32 112x112x64 float32 NHWC; floors: the bytes moved (" +
                bench::describe(ff, double(bx + by)) + " forward)");
  const std::string dev = std::to_string(ts::device_count()) + " devices, batch split";
  bench::row("forward: tessel, 1 device", ff.seconds, one_f, torch_f);
  bench::row("forward: tessel, " + dev, ff.seconds, dp_f, torch_f);
  bench::row("forward: tessel, " + std::to_string(ts::device_count()) + " devices, rows split", ff.seconds, sp_f, torch_f);
  bench::row("fwd+bwd: tessel, 1 device", ffb.seconds, one_fb, torch_fb);
  bench::row("fwd+bwd: tessel, " + dev, ffb.seconds, dp_fb, torch_fb);
  bench::row("fwd+bwd: tessel, " + std::to_string(ts::device_count()) + " devices, rows split", ffb.seconds, sp_fb, torch_fb);
}

int main(int argc, char** argv) {
  // Before OpenMP starts: the peer's team sleeps, not spins, while tessel runs.
  setenv("OMP_WAIT_POLICY", "passive", 1);
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::vector<Layer> layers{{"3x3 64->64, 56x56, N=32", 32, 56, 56, 64, 64, 3, 1, "SAME"},
                                  {"1x1 64->128 stride 2, 56x56, N=32", 32, 56, 56, 64, 128, 1, 2, "VALID"}};
  const std::vector<std::string> nhwc{"NHWC", "HWIO", "NHWC"};
  for (const auto& l : layers) {
    const bool same = std::string(l.padding) == "SAME";
    const std::int64_t Ho = same ? (l.H + l.stride - 1) / l.stride : (l.H - l.K) / l.stride + 1;
    const std::int64_t Wo = same ? (l.W + l.stride - 1) / l.stride : (l.W - l.K) / l.stride + 1;
    const std::int64_t th = std::max<std::int64_t>(0, (Ho - 1) * l.stride + l.K - l.H);
    const std::int64_t tw = std::max<std::int64_t>(0, (Wo - 1) * l.stride + l.K - l.W);
    const double flops = 2.0 * double(l.N * Ho * Wo * l.O) * double(l.C * l.K * l.K);
    Array x = (ts::linspace(-1, 1, l.N * l.H * l.W * l.C).reshape({l.N, l.H, l.W, l.C})).block_until_ready();
    Array w = (ts::linspace(1, -1, l.K * l.K * l.C * l.O).reshape({l.K, l.K, l.C, l.O}) * 0.1f).block_until_ready();
    Array g = ts::linspace(-0.5, 0.5, l.N * Ho * Wo * l.O).reshape({l.N, Ho, Wo, l.O}).block_until_ready();
    const std::vector<std::int64_t> strides{l.stride, l.stride};
    auto f = [&](Array a, Array b) {
      return lax::conv_general_dilated(a, b, strides, l.padding, {.dimension_numbers = nhwc});
    };
    auto fwd = ts::jit(f);
    auto fwd_bwd = ts::jit([&](Array a, Array b, Array c) {
      auto [y, pullback] = ts::vjp(f, a, b);
      auto [ga, gb] = pullback(c);
      return std::make_tuple(y, ga, gb);
    });

    omp_set_num_threads(bench::cores());
    OneDnn dnn(l, Ho, Wo, th / 2, tw / 2, th - th / 2, tw - tw / 2);
    const double dnn_f = bench::seconds([&] { dnn.forward(); }, reps);
    const double dnn_fb = bench::seconds([&] { dnn.forward_backward(); }, reps);
    const std::string sz = std::to_string(l.N) + ", " + std::to_string(l.C) + ", " + std::to_string(l.H) + ", " +
                           std::to_string(l.W);
    const std::string setup = "import torch.nn.functional as F\n"
                              "x = torch.randn(" + sz + ").to(memory_format=torch.channels_last).requires_grad_()\n"
                              "w = torch.randn(" + std::to_string(l.O) + ", " + std::to_string(l.C) + ", " +
                              std::to_string(l.K) + ", " + std::to_string(l.K) + ").requires_grad_()\n"
                              "pad = " + (same ? std::to_string(th / 2) : std::string("0")) + "\n"
                              "g = torch.randn(F.conv2d(x, w, stride=" + std::to_string(l.stride) +
                              ", padding=pad).shape).contiguous(memory_format=torch.channels_last)";
    const std::string call = "F.conv2d(x, w, stride=" + std::to_string(l.stride) + ", padding=pad)";
    const double torch_f = bench::torch_seconds(setup, "with torch.no_grad(): " + call, reps);
    const double torch_fb = bench::torch_seconds(setup, call + ".backward(g)", reps);

    Array x1 = ts::device_put(x, ts::Device(0)), w1 = ts::device_put(w, ts::Device(0)), g1 = ts::device_put(g, ts::Device(0));
    const double one_f = bench::seconds([&] { fwd(x1, w1).block_until_ready(); }, reps);
    const double one_fb = bench::seconds([&] { std::get<2>(fwd_bwd(x1, w1, g1)).block_until_ready(); }, reps);
    auto mesh = ts::make_mesh({ts::device_count()}, {"x"});
    Array xs = ts::device_put(x, ts::NamedSharding(mesh, P("x"))), ws = ts::device_put(w, ts::NamedSharding(mesh, P()));
    Array gs = ts::device_put(g, ts::NamedSharding(mesh, P("x")));
    const double dp_f = bench::seconds([&] { fwd(xs, ws).block_until_ready(); }, reps);
    const double dp_fb = bench::seconds([&] { std::get<2>(fwd_bwd(xs, ws, gs)).block_until_ready(); }, reps);

    // The images split along their rows: halo exchange (collective permutes).
    Array xh = ts::device_put(x, ts::NamedSharding(mesh, P(ts::None, "x"))), gh = ts::device_put(g, ts::NamedSharding(mesh, P(ts::None, "x")));
    const double sp_f = bench::seconds([&] { fwd(xh, ws).block_until_ready(); }, reps);
    const double sp_fb = bench::seconds([&] { std::get<2>(fwd_bwd(xh, ws, gh)).block_until_ready(); }, reps);
    // One image (inference): cut into chunks of output rows for the device's threads.
    Array x_img = ts::device_put(x.index({ts::slice(0, 1)}), ts::Device(0)).block_until_ready();
    fwd(x_img, w1).block_until_ready();
    const double img_f = bench::seconds([&] { fwd(x_img, w1).block_until_ready(); }, reps);
    const double torch_img =
        bench::torch_seconds(setup + "\nx = x[:1].detach().contiguous(memory_format=torch.channels_last)",
                             "with torch.no_grad(): " + call, reps);
    // Its forward and both gradients: the gradients cut into chunks of rows too.
    Array g_img = ts::device_put(g.index({ts::slice(0, 1)}), ts::Device(0)).block_until_ready();
    std::get<2>(fwd_bwd(x_img, w1, g_img)).block_until_ready();
    const double img_fb = bench::seconds([&] { std::get<2>(fwd_bwd(x_img, w1, g_img)).block_until_ready(); }, reps);
    const double torch_img_fb = bench::torch_seconds(
        setup + "\nx = x[:1].detach().contiguous(memory_format=torch.channels_last).requires_grad_()"
                "\ng = g[:1].contiguous(memory_format=torch.channels_last)",
        call + ".backward(g)", reps);
    // bfloat16 operands (float32 accumulation, a bfloat16 result): oneDNN's
    // bfloat16 kernels where the CPU has AVX512_BF16.
    Array x16 = x1.astype(ts::bfloat16).block_until_ready(), w16 = w1.astype(ts::bfloat16).block_until_ready();
    fwd(x16, w16).block_until_ready();
    const double bf16_f = bench::seconds([&] { fwd(x16, w16).block_until_ready(); }, reps);
    Array g16 = g1.astype(ts::bfloat16).block_until_ready();
    std::get<2>(fwd_bwd(x16, w16, g16)).block_until_ready();
    const double bf16_fb = bench::seconds([&] { std::get<2>(fwd_bwd(x16, w16, g16)).block_until_ready(); }, reps);
    const std::string bf16_setup = setup + "\nx = x.detach().bfloat16().contiguous(memory_format=torch.channels_last)"
                                           ".requires_grad_()\nw = w.detach().bfloat16().requires_grad_()\ng = g.bfloat16()";
    const double torch_bf16 = bench::torch_seconds(bf16_setup, "with torch.no_grad(): " + call, reps);
    const double torch_bf16_fb = bench::torch_seconds(bf16_setup, call + ".backward(g)", reps);
    const std::string dev = std::to_string(ts::device_count()) + " devices, batch split";
    const std::string rows = std::to_string(ts::device_count()) + " devices, rows split";
    bench::header(std::string("conv ") + l.name + " float32 NHWC, " + std::to_string(flops / 1e9) +
                  " GFLOP forward (peak " + std::to_string(bench::peak_flops() / 1e9) + " GFLOP/s)");
    const double floor_f = bench::flop_floor(flops), floor_fb = bench::flop_floor(3 * flops);
    bench::row("forward: oneDNN direct, all cores", floor_f, dnn_f, torch_f);
    bench::row("forward: tessel, 1 device", floor_f, one_f, torch_f);
    bench::row("forward: tessel, " + dev, floor_f, dp_f, torch_f);
    bench::row("forward: tessel, " + rows, floor_f, sp_f, torch_f);
    bench::row("forward, one image: tessel, 1 device", floor_f / double(l.N), img_f, torch_img);
    bench::row("fwd+bwd, one image: tessel, 1 device", floor_fb / double(l.N), img_fb, torch_img_fb);
    static const double bf16_peak = bench::bf16_peak_flops();
    bench::row(std::string("forward bfloat16: tessel, 1 device (floor: ") + (bf16_peak > 0 ? "vdpbf16ps" : "FMA") + ")",
               bf16_peak > 0 ? std::min(flops / bf16_peak, floor_f) : floor_f, bf16_f, torch_bf16);
    bench::row(std::string("fwd+bwd bfloat16: tessel, 1 device (floor: ") + (bf16_peak > 0 ? "vdpbf16ps" : "FMA") + ")",
               bf16_peak > 0 ? std::min(3 * flops / bf16_peak, floor_fb) : floor_fb, bf16_fb, torch_bf16_fb);
    bench::row("fwd+bwd: oneDNN direct, all cores", floor_fb, dnn_fb, torch_fb);
    bench::row("fwd+bwd: tessel, 1 device", floor_fb, one_fb, torch_fb);
    bench::row("fwd+bwd: tessel, " + dev, floor_fb, dp_fb, torch_fb);
    bench::row("fwd+bwd: tessel, " + rows, floor_fb, sp_fb, torch_fb);
    std::printf("  oneDNN direct / tessel 1 device: forward %.2f, fwd+bwd %.2f (target >= 0.9)\n", dnn_f / one_f,
                dnn_fb / one_fb);
  }
  pooling(reps);
  return bench::status();
}
