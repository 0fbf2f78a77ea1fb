// The narrow dtypes against their floors, float32 and PyTorch in the same run:
//  - bfloat16 GEMM n^3 with float32 accumulation (preferred_element_type),
//    floor: 2 n^3 at the faster of AVX512_BF16's dot-product instruction and
//    the float32 FMA, each measured here with the instruction itself on every
//    core (tessel runs whichever is faster: codegen/dot.cpp); the float32 GEMM
//    beside it (floor: the FMA peak) for the ratio the issue asks (>= 1.6x);
//  - int8 GEMM n^3 with int32 accumulation, floor: 2 n^3 at AVX512_VNNI's
//    byte dot-product peak, measured likewise, beside the float32 GEMM (>= 2x);
//  - 2*sin(x)+1 in bfloat16 and float32 at 8192^2 (floor: the bytes moved);
//  - conversions float32 <-> bfloat16 at 8192^2 (floor: the bytes moved).
#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;

namespace {

// 12 independent chains of vpdpbusd: 16 lanes x 4 byte products, 128 ops per instruction.
__attribute__((target("avx512f,avx512vnni"))) float dpbusd_chains(long iters) {
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x02020202);
  for (long k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  int out[16];
  _mm512_storeu_si512(out, s);
  return float(out[0]);
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 4096;
  const std::int64_t e = argc > 2 ? std::atoll(argv[2]) : 8192;
  const bool bf16 = __builtin_cpu_supports("avx512bf16");
  double bf16_peak = bench::bf16_peak_flops();

  // ---- GEMMs
  const std::string N = std::to_string(n);
  auto a32 = ts::random::uniform(ts::random::key(1), {n, n}, ts::float32, -1, 1).block_until_ready();
  auto b32 = ts::random::uniform(ts::random::key(2), {n, n}, ts::float32, -1, 1).block_until_ready();
  auto a16 = ts::astype(a32, ts::bfloat16).block_until_ready(), b16 = ts::astype(b32, ts::bfloat16).block_until_ready();
  const double flops = 2.0 * double(n) * double(n) * double(n);
  auto mm32 = ts::jit([](ts::Array a, ts::Array b) { return ts::matmul(a, b); });
  auto mm16 = ts::jit([](ts::Array a, ts::Array b) { return ts::matmul(a, b, {.preferred_element_type = ts::float32}); });
  bench::header("GEMM " + N + "^3 (" + std::to_string(bench::cores()) + " cores, " + std::to_string(ts::device_count()) +
                " devices, one device used); floors: the float32 FMA peak " +
                std::to_string(int(bench::peak_flops() / 1e9)) + " GFLOP/s, the bfloat16 dot-product peak " +
                (bf16 ? std::to_string(int(bf16_peak / 1e9)) + " GFLOP/s" : std::string("(no AVX512_BF16)")));
  const double t32 = bench::seconds([&] { mm32(a32, b32).block_until_ready(); }, 3);
  const double torch32 = bench::torch_seconds("a = torch.rand(" + N + ", " + N + "); b = torch.rand(" + N + ", " + N + ")",
                                              "torch.matmul(a, b)", 3);
  bench::row("float32", bench::flop_floor(flops), t32, torch32);
  const double t16 = bench::seconds([&] { mm16(a16, b16).block_until_ready(); }, 3);
  const double torch16 = bench::torch_seconds(
      "a = torch.rand(" + N + ", " + N + ").bfloat16(); b = torch.rand(" + N + ", " + N + ").bfloat16()",
      "torch.matmul(a, b)", 3);
  // The floor: the faster of the two ways (the dot-product instruction, the
  // float32 FMAs on converted operands); tessel takes the faster (codegen/dot.cpp).
  const double fma_floor = bench::flop_floor(flops);
  if (bf16) bf16_peak = bench::detail::peak_beside(bf16_peak, flops, t16, bench::bf16_peak_flops);
  // With AMX (codegen/dot.cpp runs bf16 products on its tiles), its tdpbf16ps peak.
  const double amx_peak = bench::amx_bf16_peak_flops();
  if (amx_peak > 0) std::printf("AMX bfloat16 peak (tdpbf16ps, measured): %.0f GFLOP/s\n", amx_peak / 1e9);
  const double bf16_floor = std::min(bf16 ? std::min(flops / bf16_peak, fma_floor) : fma_floor,
                                     amx_peak > 0 ? flops / amx_peak : fma_floor);
  bench::row(std::string("bfloat16 -> float32") + (amx_peak > 0 ? " (AMX)" : ""), bf16_floor, t16, torch16);
  std::printf("bfloat16 GEMM speed over float32 GEMM: %.2fx\n", t32 / t16);
  {
    const std::string text = mm16.lower(a16, b16).compile().as_text();
    const auto at = text.find("(gemm ");
    std::printf("the bfloat16 product runs as: %s\n", at == std::string::npos ? "?" : text.substr(at, text.find(')', at) - at + 1).c_str());
  }

  // int8 x int8 -> int32: floor at the byte dot product's peak (AVX512_VNNI), else the FMA's.
  const bool vnni = __builtin_cpu_supports("avx512vnni");
  // all_core_rate counts 2 x lanes ops per chain step: 64 "lanes" make the 128 of a vpdpbusd.
  double vnni_peak = vnni ? bench::detail::best_rate(dpbusd_chains, 64) : 0.0;
  auto a8 = ts::astype(ts::random::randint(ts::random::key(3), {n, n}, -128, 128), ts::int8).block_until_ready();
  auto b8 = ts::astype(ts::random::randint(ts::random::key(4), {n, n}, -128, 128), ts::int8).block_until_ready();
  auto mm8 = ts::jit([](ts::Array a, ts::Array b) { return ts::matmul(a, b, {.preferred_element_type = ts::int32}); });
  const double t8 = bench::seconds([&] { mm8(a8, b8).block_until_ready(); }, 3);
  const double torch8 = bench::torch_seconds("a = torch.randint(-128, 128, (" + N + ", " + N + "), dtype=torch.int8); b = torch.randint(-128, 128, (" + N + ", " + N + "), dtype=torch.int8)",
                                             "torch.matmul(a, b)", 1);
  // Beside the run too (the instruction's rate drifts by up to 15% between windows here).
  if (vnni) vnni_peak = bench::detail::peak_beside(vnni_peak, flops, t8, [] { return bench::detail::best_rate(dpbusd_chains, 64); });
  std::printf("int8 dot-product peak: %s\n", vnni ? (std::to_string(int(vnni_peak / 1e9)) + " GOP/s").c_str() : "(no AVX512_VNNI)");
  bench::row("int8 -> int32", vnni ? flops / vnni_peak : fma_floor, t8, torch8);
  std::printf("int8 GEMM speed over float32 GEMM: %.2fx\n", t32 / t8);

  // ---- elementwise and conversions
  const std::string E = std::to_string(e);
  auto x32 = ts::linspace(-100, 100, e * e).reshape({e, e}).block_until_ready();
  auto x16 = ts::astype(x32, ts::bfloat16).block_until_ready();
  const std::size_t b4 = std::size_t(e * e) * 4, b2 = std::size_t(e * e) * 2;
  auto f = ts::jit([](ts::Array x) { return 2.0 * ts::sin(x) + 1.0; });
  auto to16 = ts::jit([](ts::Array x) { return ts::astype(x, ts::bfloat16); });
  auto to32 = ts::jit([](ts::Array x) { return ts::astype(x, ts::float32); });
  const std::string torch_x = "x = torch.linspace(-100, 100, " + std::to_string(e * e) + ").reshape(" + E + ", " + E + ")";
  const bench::Floor f44 = bench::memory_floor(b4, b4), f22 = bench::memory_floor(b2, b2);
  const bench::Floor f42 = bench::memory_floor(b4, b2), f24 = bench::memory_floor(b2, b4);
  bench::header("elementwise and conversions, " + E + "x" + E + "; floors: the bytes each moves (" +
                bench::describe(f44, 2.0 * double(b4)) + " for float32 in and out)");
  const double s32 = bench::seconds([&] { f(x32).block_until_ready(); });
  bench::row("2*sin(x)+1 float32", f44.seconds, s32, bench::torch_seconds(torch_x, "y = 2 * torch.sin(x) + 1"));
  const double s16 = bench::seconds([&] { f(x16).block_until_ready(); });
  bench::row("2*sin(x)+1 bfloat16", f22.seconds, s16,
             bench::torch_seconds(torch_x + ".bfloat16()", "y = 2 * torch.sin(x) + 1"));
  std::printf("bfloat16 elementwise speed over float32: %.2fx\n", s32 / s16);
  bench::row("float32 -> bfloat16", f42.seconds, bench::seconds([&] { to16(x32).block_until_ready(); }),
             bench::torch_seconds(torch_x, "y = x.bfloat16()"));
  bench::row("bfloat16 -> float32", f24.seconds, bench::seconds([&] { to32(x16).block_until_ready(); }),
             bench::torch_seconds(torch_x + ".bfloat16()", "y = x.float()"));
  return bench::status();
}
