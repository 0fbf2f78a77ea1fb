#include <doctest/doctest.h>

#include <cstring>

#include "codegen/host.hpp"
#include "codegen/library.hpp"
#include "tests/common/run_graph.hpp"
#include "tracer/build.hpp"

using namespace tessel;
using testing::compare_arrays;
using testing::random_host;
using testing::run_compiled;

namespace {
struct G {
  NodeTable t;
  Graph g;
  NodeRef param(DType d, Shape s) {
    auto p = build::parameter(t, int(g.params.size()), Aval{d, s, false});
    g.params.push_back(p);
    return p;
  }
};

void check_against_interpreter(const Graph& g, const std::vector<HostArray>& args, double rtol = 2e-5,
                               double atol = 1e-5) {
  verify(g);
  auto want = interpret(g, args);
  auto got = run_compiled(g, args);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(compare_arrays(got[i], want[i], rtol, atol) == "");
  }
}
}  // namespace

TEST_CASE("2 * sin(x) + 1 fuses into one kernel and matches the interpreter") {
  G b;
  auto x = b.param(DType::float32, {37, 129});
  auto two = build::broadcast_in_dim(b.t, build::scalar(b.t, DType::float32, 2), {37, 129}, {});
  auto one = build::broadcast_in_dim(b.t, build::scalar(b.t, DType::float32, 1), {37, 129}, {});
  auto y = build::binary(b.t, Op::add, build::binary(b.t, Op::mul, two, build::unary(b.t, Op::sin, x)), one);
  b.g.outputs = {y};
  std::mt19937 rng(1);
  check_against_interpreter(b.g, {random_host<float>(DType::float32, {37, 129}, rng, -100, 100)});
  auto c = codegen::compile(b.g, {1});
  CHECK(c.executable->thunks.size() == 1);
}

TEST_CASE("large loop nests and dots ask for every core, and equal the interpreter when they get it") {
  // On one device of an idle runtime, machine_if_idle slots are granted
  // (tests/runtime): these runs take the machine-wide paths.
  using W = rt::ComputeSlot::Width;
  std::mt19937 rng(3);
  const Shape big = {1031, 1029};  // > 2^20 elements, ragged
  G b;
  auto x = b.param(DType::float32, big);
  auto two = build::broadcast_in_dim(b.t, build::scalar(b.t, DType::float32, 2), big, {});
  b.g.outputs = {build::binary(b.t, Op::mul, two, build::unary(b.t, Op::sin, x))};
  check_against_interpreter(b.g, {random_host<float>(DType::float32, big, rng, -100, 100)});
  CHECK(codegen::compile(b.g, {1}).executable->thunks[0]->width() == W::machine_if_idle);

  G small;
  auto xs = small.param(DType::float32, {37, 129});
  small.g.outputs = {build::unary(small.t, Op::sin, xs)};
  CHECK(codegen::compile(small.g, {1}).executable->thunks[0]->width() == W::device);

  for (DType dt : {DType::float32, DType::float64}) {
    G d;
    auto p = d.param(dt, {613, 577}), q = d.param(dt, {577, 701});
    d.g.outputs = {build::dot_general(d.t, p, q, {{1}, {0}, {}, {}})};
    check_against_interpreter(d.g, {random_host<float>(dt, {613, 577}, rng), random_host<float>(dt, {577, 701}, rng)},
                              1e-5, 1e-4);
    CHECK(codegen::compile(d.g, {1}).executable->thunks[0]->width() != W::device);
  }
}

TEST_CASE("fused reshapes map each group of dims alone, and pads read safe indices dim by dim") {
  // Reshapes whose dims group (same size, unit dims, merges, splits), fused
  // into a loop after an add, and interior, edge and negative pads of them.
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 1, 3, 4}, {6, 1, 2, 2}}, {{4, 1}, {2, 2}},       {{1, 1}, {1}},          {{3, 5, 1}, {1, 3, 5}},
      {{6, 4}, {2, 3, 2, 2}},       {{2, 3, 4}, {24}},      {{24}, {1, 2, 1, 12, 1}}, {{2, 6, 5}, {4, 3, 5}},
      {{5, 1, 7, 1}, {35}},         {{0, 3}, {3, 0, 1}}};
  std::mt19937 rng(3);
  for (auto& [from, to] : cases) {
    G b;
    auto p = b.param(DType::float32, from);
    auto r = build::reshape(b.t, build::binary(b.t, Op::add, p, p), to);
    std::vector<std::int64_t> lo(to.size(), 0), hi(to.size(), 0), in(to.size(), 0);
    lo.front() = 1, hi.back() = 2, in.back() = 1;
    if (to.size() > 1 && to[0] > 1) lo[0] = -1;
    auto padded = build::pad(b.t, r, build::scalar(b.t, DType::float32, 7), lo, hi, in);
    b.g.outputs = {r, build::binary(b.t, Op::mul, padded, padded)};
    CAPTURE(to.size());
    check_against_interpreter(b.g, {random_host<float>(DType::float32, from, rng, -3, 3)});
  }
}

TEST_CASE("every transcendental is within a few ulp over a wide range") {
  for (Op op : {Op::sin, Op::cos, Op::tan, Op::tanh, Op::exp, Op::expm1, Op::log, Op::log1p, Op::logistic,
                Op::sqrt, Op::rsqrt, Op::erf_inv, Op::erf}) {
    for (DType dt : {DType::float32, DType::float64}) {
      G b;
      auto x = b.param(dt, {4096});
      b.g.outputs = {build::unary(b.t, op, x)};
      std::mt19937 rng{unsigned(op)};
      double lo = -30, hi = 30;
      if (op == Op::log || op == Op::sqrt || op == Op::rsqrt) lo = 1e-30, hi = 1e30;
      if (op == Op::log1p) lo = -0.999, hi = 1e6;
      if (op == Op::erf_inv) lo = -0.9999, hi = 0.9999;
      if (op == Op::erf) lo = -5, hi = 5;
      HostArray a = op == Op::log || op == Op::sqrt || op == Op::rsqrt
                        ? [&] {
                            HostArray h = random_host<float>(dt, {4096}, rng, -30, 30);
                            for (std::int64_t i = 0; i < 4096; ++i) {
                              double v = std::exp(h.as_double(i) * 2.3);
                              visit_dtype(dt, [&](auto tag) {
                                using T = decltype(tag);
                                reinterpret_cast<T*>(h.bytes.data())[i] = T(v);
                              });
                            }
                            return h;
                          }()
                        : random_host<float>(dt, {4096}, rng, lo, hi);
      std::string name = std::string(op_name(op)) + " " + dtype_name(dt);
      CAPTURE(name);
      // float32: within ~3 ulp; tan (a quotient) ~6; erf_inv is Giles' polynomial,
      // which JAX uses too: its relative error grows to ~4e-6 near |x| = 1.
      double rtol = dt == DType::float32 ? (op == Op::tan ? 6e-7 : op == Op::erf_inv ? 1e-5 : 3e-7) : 1e-13;
      check_against_interpreter(b.g, {a}, rtol, 1e-30);
    }
  }
}

TEST_CASE("float32 sin and cos reduce large arguments to within a few ulp of 1") {
  for (Op op : {Op::sin, Op::cos}) {
    G b;
    auto x = b.param(DType::float32, {8192});
    b.g.outputs = {build::unary(b.t, op, x)};
    std::mt19937 rng{7};
    std::string name = op_name(op);
    CAPTURE(name);
    // |x| up to 1e5: the four-part pi keeps the reduced argument exact to float
    // precision, so the absolute error stays at a few ulp of 1.
    check_against_interpreter(b.g, {random_host<float>(DType::float32, {8192}, rng, -1e5, 1e5)}, 3e-7, 2.5e-7);
  }
  // sin keeps the sign of zero; cos(+-0) = 1; inf and NaN: NaN.
  G b;
  std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
  auto x = b.param(DType::float32, {5});
  b.g.outputs = {build::unary(b.t, Op::sin, x), build::unary(b.t, Op::cos, x)};
  auto out = tessel::testing::run_compiled(b.g, {host_array(DType::float32, {5}, v.data())});
  CHECK(std::signbit(out[0].as_double(1)));
  CHECK_FALSE(std::signbit(out[0].as_double(0)));
  CHECK(out[1].as_double(1) == 1.0);
  for (int i = 2; i < 5; ++i) CHECK((std::isnan(out[0].as_double(i)) && std::isnan(out[1].as_double(i))));
}

TEST_CASE("float32 sin and cos are within 2 ulp of the exact value up to the polynomial's limit") {
  // Against libm's double, rounded: the ulp of the float result. Three parts
  // of pi with FMA keep the reduction within half an ulp; the four short parts
  // before were 6 ulp off past 1e5. The polynomial's own error is under 1.9.
  // A CPU without FMA keeps the four short parts (codegen/math.cpp).
  const double bound = codegen::host_cpu().has("fma") ? 2.0 : 6.5;
  const std::int64_t n = 1 << 20;
  std::mt19937 rng(5);
  for (double lim : {4.0, 1000.0, 131072.0}) {
    HostArray x = random_host<float>(DType::float32, {n}, rng, -lim, lim);
    G b;
    auto p = b.param(DType::float32, {n});
    b.g.outputs = {build::unary(b.t, Op::sin, p), build::unary(b.t, Op::cos, p)};
    auto got = run_compiled(b.g, {x});
    for (int k = 0; k < 2; ++k) {
      double worst = 0, at = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double v = x.as_double(i), want = k == 0 ? std::sin(v) : std::cos(v);
        const float wf = std::fabs(float(want));
        const double e = std::fabs(got[k].as_double(i) - want) / (std::nextafter(wf, INFINITY) - wf);
        if (e > worst) worst = e, at = v;
      }
      CAPTURE(lim);
      CAPTURE(k);
      CAPTURE(at);
      CHECK(worst < bound);
    }
  }
}

TEST_CASE("float32 and bfloat16 sin, cos and tan beyond the polynomial's range: libm's values, fused and reduced") {
  // Rows of 9000 span two blocks of a loop kernel; a large argument sits in
  // the second block of row 1, the first of row 2, none in row 0. Before,
  // the polynomial's NaN stood for all of them (|x| >= 2^23) or a value a few
  // thousand ulp off (|x| past 2e5).
  const Shape s = {3, 9000};
  std::mt19937 rng(11);
  HostArray x = random_host<float>(DType::float32, s, rng, -100, 100);
  const float large[] = {131073.0f, -2e5f, 1e6f, 8388609.0f, 1e7f, -1e8f, 1e20f, 3e38f, 16777216.0f, -INFINITY};
  float* v = reinterpret_cast<float*>(x.bytes.data());
  for (int k = 0; k < 10; ++k) {
    v[9000 + 8500 + k] = large[k];
    v[2 * 9000 + 3 + 7 * k] = large[9 - k];
  }
  G b;
  auto p = b.param(DType::float32, s);
  auto two = build::broadcast_in_dim(b.t, build::scalar(b.t, DType::float32, 2), s, {});
  auto sin = build::unary(b.t, Op::sin, p), cos = build::unary(b.t, Op::cos, p);
  b.g.outputs = {sin, build::binary(b.t, Op::add, build::binary(b.t, Op::mul, two, cos), two),
                 build::unary(b.t, Op::tan, p),
                 build::reduce(b.t, Op::reduce_sum, sin, {1}),   // a row reduction
                 build::reduce(b.t, Op::reduce_sum, cos, {0}),   // a column reduction
                 build::arg_reduce(b.t, Op::argmax, sin, 1, DType::int32)};
  // The reductions: compiled code adds in another order.
  verify(b.g);
  auto want = interpret(b.g, {x});
  auto got = run_compiled(b.g, {x});
  for (int i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(compare_arrays(got[i], want[i], i == 2 ? 6e-7 : i == 3 || i == 4 ? 2e-5 : 3e-7, i == 3 ? 1e-4 : 2.5e-7) == "");
  }
  // bfloat16: the same arguments rounded, each result rounded once.
  G h;
  auto q = h.param(DType::bfloat16, s);
  h.g.outputs = {build::unary(h.t, Op::sin, q), build::unary(h.t, Op::cos, q)};
  const HostArray xb = interpret(
      [&] {
        G c;
        auto r = c.param(DType::float32, s);
        c.g.outputs = {build::convert(c.t, r, DType::bfloat16)};
        return c.g;
      }(),
      {x})[0];
  check_against_interpreter(h.g, {xb}, 7.9e-3, 1e-38);  // within one bfloat16 ulp (f32 sin rounds once more)
}

TEST_CASE("bfloat16 and float16 times constants: the rounding skipped only where exact, bit for bit") {
  // bfloat16 times +-2^k (k >= 0) skips its rounding (codegen/emit.cpp,
  // exact_on_grid); float16 (a narrower exponent range), 0.5 (subnormals
  // lose bits) and 3 must still round. Each against the interpreter.
  const std::vector<std::uint16_t> bf = {0x7F7F, 0x0080, 0x0001, 0x007F, 0x3FC0, 0xC050, 0x0000,
                                         0x8000, 0x7F80, 0xFF80, 0x4780, 0x7F00, 0x3F81};
  const std::vector<std::uint16_t> hf = {0x7BFF, 0x0400, 0x0001, 0x03FF, 0x3E00, 0xC280, 0x0000,
                                         0x8000, 0x7C00, 0xFC00, 0x5A00, 0x7800, 0x3C01};
  for (DType dt : {DType::bfloat16, DType::float16}) {
    CAPTURE(dtype_name(dt));
    const auto& bits = dt == DType::bfloat16 ? bf : hf;
    const Shape s = {std::int64_t(bits.size())};
    HostArray x;
    x.dtype = dt;
    x.shape = s;
    x.bytes.resize(bits.size() * 2);
    std::memcpy(x.bytes.data(), bits.data(), x.bytes.size());
    G b;
    auto p = b.param(dt, s);
    for (double c : {2.0, 4.0, -8.0, 0.5, 3.0, 0x1p200, 0x1p-130, 1.0, 65536.0}) {
      auto k = build::broadcast_in_dim(b.t, build::convert(b.t, build::scalar(b.t, DType::float64, c, true), dt), s, {});
      b.g.outputs.push_back(build::binary(b.t, Op::mul, p, k));
      b.g.outputs.push_back(build::binary(b.t, Op::mul, k, build::unary(b.t, Op::neg, p)));
    }
    verify(b.g);
    const auto want = interpret(b.g, {x});
    const auto got = run_compiled(b.g, {x});
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(got[i].bytes == want[i].bytes);
    }
  }
}

TEST_CASE("special values of the float32 math") {
  const float inf = INFINITY, nan = NAN;
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, nan, 1e-40f, -1e-40f, 88.8f, -104.0f, 1.0f, -1.0f, 1e30f};
  for (Op op : {Op::exp, Op::log, Op::log1p, Op::expm1, Op::tanh, Op::logistic, Op::erf_inv}) {
    G b;
    auto x = b.param(DType::float32, {std::int64_t(v.size())});
    b.g.outputs = {build::unary(b.t, op, x)};
    std::string name = op_name(op);
    CAPTURE(name);
    check_against_interpreter(b.g, {host_array(DType::float32, {std::int64_t(v.size())}, v.data())}, 3e-7, 1e-37);
  }
}

TEST_CASE("reductions: row and column strategies, argmax, all dtypes") {
  std::mt19937 rng(5);
  for (DType dt : {DType::float32, DType::float64, DType::int32, DType::uint32, DType::int64}) {
    for (Op op : {Op::reduce_sum, Op::reduce_max, Op::reduce_min, Op::reduce_prod}) {
      for (auto axes : std::vector<std::vector<std::int64_t>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {1, 2}, {0, 1}}) {
        G b;
        auto x = b.param(dt, {5, 7, 9});
        b.g.outputs = {build::reduce(b.t, op, x, axes)};
        std::string name = std::string(op_name(op)) + " " + dtype_name(dt) + " axes " + std::to_string(axes.size());
        CAPTURE(name);
        double lo = op == Op::reduce_prod ? 0.5 : -2, hi = op == Op::reduce_prod ? 1.5 : 2;
        check_against_interpreter(b.g, {random_host<float>(dt, {5, 7, 9}, rng, lo, hi)}, 1e-5, 1e-5);
      }
    }
    for (Op op : {Op::argmax, Op::argmin})
      for (std::int64_t axis : {0, 1, 2}) {
        G b;
        auto x = b.param(dt, {5, 7, 9});
        b.g.outputs = {build::arg_reduce(b.t, op, x, axis, DType::int32)};
        check_against_interpreter(b.g, {random_host<float>(dt, {5, 7, 9}, rng)});
      }
  }
}

TEST_CASE("dot_general: plain, transposed operands, batched, f32/f64 by codegen/gemm and int by loops") {
  std::mt19937 rng(9);
  struct Case {
    Shape a, b;
    DotDims d;
  };
  std::vector<Case> cases = {
      {{13, 17}, {17, 11}, {{1}, {0}, {}, {}}},
      {{17, 13}, {17, 11}, {{0}, {0}, {}, {}}},          // lhs transposed
      {{13, 17}, {11, 17}, {{1}, {1}, {}, {}}},          // rhs transposed
      {{3, 13, 17}, {3, 17, 5}, {{2}, {1}, {0}, {0}}},   // batched
      {{13, 3, 17}, {17, 3, 5}, {{2}, {0}, {1}, {1}}},   // batch in the middle: copies
      {{4, 6, 5}, {6, 5, 7}, {{1, 2}, {0, 1}, {}, {}}},  // two contracting dims
      {{9}, {9}, {{0}, {0}, {}, {}}},                    // vector dot
  };
  for (auto& c : cases)
    for (DType dt : {DType::float32, DType::float64, DType::int32}) {
      G b;
      auto x = b.param(dt, c.a), y = b.param(dt, c.b);
      b.g.outputs = {build::dot_general(b.t, x, y, c.d)};
      check_against_interpreter(b.g, {random_host<float>(dt, c.a, rng), random_host<float>(dt, c.b, rng)}, 1e-5, 1e-4);
    }
}

TEST_CASE("data movement fuses: broadcast, reshape, transpose, slice, pad, concatenate, dynamic slices") {
  std::mt19937 rng(3);
  G b;
  auto x = b.param(DType::float32, {6, 8});
  auto t = build::transpose(b.t, x, {1, 0});                                            // 8x6
  auto r = build::reshape(b.t, t, {4, 12});                                             // 4x12
  auto s = build::slice(b.t, r, {1, 2}, {4, 11}, {2, 3});                               // 2x3
  auto p = build::pad(b.t, s, build::scalar(b.t, DType::float32, -7), {1, -1}, {2, 3}, {1, 0});  // 6x5
  auto c = build::concatenate(b.t, {p, build::iota(b.t, DType::float32, {6, 2}, 0)}, 1);          // 6x7
  auto bc = build::broadcast_in_dim(b.t, build::reduce(b.t, Op::reduce_sum, x, {1}), {6, 7}, {0});
  auto e = build::binary(b.t, Op::mul, c, bc);
  auto i1 = build::scalar(b.t, DType::int32, 2), i2 = build::scalar(b.t, DType::int32, 100);
  auto ds = build::dynamic_slice(b.t, x, {i1, i2}, {3, 4});  // start clamped to 4
  auto upd = build::dynamic_update_slice(b.t, x, ds, {i2, i1});
  b.g.outputs = {e, ds, upd, r};
  check_against_interpreter(b.g, {random_host<float>(DType::float32, {6, 8}, rng)});
}

TEST_CASE("integer and boolean semantics follow XLA") {
  G b;
  std::vector<std::int32_t> av = {7, -7, 5, INT32_MIN, 3, 0, -1, 31};
  std::vector<std::int32_t> bv = {2, 2, 0, -1, 40, 0, 1, 31};
  auto x = b.param(DType::int32, {8}), y = b.param(DType::int32, {8});
  b.g.outputs = {build::binary(b.t, Op::div, x, y),         build::binary(b.t, Op::rem, x, y),
                 build::binary(b.t, Op::shift_left, x, y),  build::binary(b.t, Op::shift_right_logical, x, y),
                 build::binary(b.t, Op::max, x, y),         build::unary(b.t, Op::abs, x),
                 build::unary(b.t, Op::neg, x),             build::binary(b.t, Op::lt, x, y),
                 build::convert(b.t, x, DType::uint32),     build::convert(b.t, x, DType::float32),
                 build::unary(b.t, Op::not_, x),            build::unary(b.t, Op::sign, x)};
  check_against_interpreter(b.g, {host_array(DType::int32, {8}, av.data()), host_array(DType::int32, {8}, bv.data())});
  G f;
  std::vector<float> fv = {1.5f, -1.5f, NAN, 3e9f, -3e9f, 2.5f, -2.5f, 0.5f};
  auto z = f.param(DType::float32, {8});
  f.g.outputs = {build::convert(f.t, z, DType::int32), build::convert(f.t, z, DType::uint32),
                 build::convert(f.t, z, DType::bool_), build::unary(f.t, Op::round, z),
                 build::unary(f.t, Op::is_finite, z),  build::binary(f.t, Op::max, z, build::unary(f.t, Op::neg, z)),
                 build::bitcast_convert(f.t, z, DType::uint32)};
  check_against_interpreter(f.g, {host_array(DType::float32, {8}, fv.data())});
}

TEST_CASE("every library op names its own routine; no other op has one") {
  int library_ops = 0;
  for (int i = 0; i < tessel::kNumOps; ++i) {
    const auto op = tessel::Op(i);
    const bool is_library = tessel::op_family(op) == tessel::OpFamily::Library;
    CAPTURE(tessel::op_name(op));
    CHECK((tessel::codegen::library_routine(op) != nullptr) == is_library);
    library_ops += is_library;
  }
  CHECK(library_ops >= 1);
}

TEST_CASE("a large result of little work an element is streamed out, and equals the interpreter") {
  // Results of 32 MiB over the process's devices (rt::kStreamBytes): 2*x+1
  // and a bfloat16 cast of 4 MiB on each of 8 devices are written with
  // non-temporal stores (KernelThunk), sin, a ragged row length (no
  // line-aligned rows) and 4 MiB on one device plainly. The values never
  // depend on it.
  std::mt19937 rng(7);
  auto run = [&](const Shape& s, int devices, auto&& make) {
    G b;
    auto x = b.param(DType::float32, s);
    b.g.outputs = {make(b, x)};
    verify(b.g);
    const std::vector<HostArray> args{random_host<float>(DType::float32, s, rng, -3, 3)};
    auto want = interpret(b.g, args);
    auto got = run_compiled(b.g, args, 0, devices);
    CHECK(compare_arrays(got[0], want[0], 2e-6, 1e-6) == "");
    codegen::CompileOptions o;
    o.local_devices = devices;
    return codegen::compile(b.g, o).thunks_text;
  };
  auto affine = [](G& b, const NodeRef& x) {
    auto c = [&](double v) { return build::broadcast_in_dim(b.t, build::scalar(b.t, DType::float32, v), x->shape(), {}); };
    return build::binary(b.t, Op::add, build::binary(b.t, Op::mul, c(2), x), c(1));
  };
  auto streamed = [](const std::string& text) { return text.find("streamed") != std::string::npos; };
  CHECK(streamed(run({1024, 1024}, 8, affine)));
  CHECK(streamed(run({1024, 2048}, 8, [](G& b, const NodeRef& x) { return build::convert(b.t, x, DType::bfloat16); })));
  CHECK(!streamed(run({1024, 1024}, 8, [](G& b, const NodeRef& x) { return build::unary(b.t, Op::sin, x); })));
  CHECK(!streamed(run({1023, 1029}, 8, affine)));
  CHECK(!streamed(run({1024, 1024}, 1, affine)));  // 4 MiB: stays in the caches
}
