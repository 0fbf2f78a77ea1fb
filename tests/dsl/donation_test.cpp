// Donation and deletion (issue 41): JitOptions::donate_argnums gives the
// arguments up to the call, which deletes them and may write an output into
// their buffers; Array::delete_buffers and is_deleted; using a deleted array
// is a ValueError with JAX's message. Every result is checked against the
// same program run without donation and against the reference interpreter.
#include <cmath>
#include <doctest/doctest.h>

#include <map>
#include <tessel/tessel.hpp>

#include "runtime/buffer.hpp"
#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::P;

namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ts::ValueError& e) {
    return e.what();
  }
  return "(no ValueError)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The block each device holds of x.
std::map<int, std::uintptr_t> blocks(const ts::Array& x) {
  std::map<int, std::uintptr_t> m;
  for (auto& s : x.addressable_shards()) m[s.device().id()] = s.unsafe_buffer_pointer();
  return m;
}

// A two-layer MLP's training step, returning its updated parameters (a pytree).
using Params = std::vector<ts::Array>;
ts::Array mlp_loss(const Params& p, const ts::Array& x) {
  const ts::Array h = ts::tanh(ts::matmul(x, p[0]) + p[1]);
  return ts::mean(ts::square(ts::matmul(h, p[2]) + p[3]));
}
Params train(const Params& p, const ts::Array& x) {
  const Params g = ts::grad([](const Params& q, const ts::Array& y) { return mlp_loss(q, y); })(p, x);
  Params out;
  for (std::size_t k = 0; k < p.size(); ++k) out.push_back(p[k] - 0.1f * g[k]);
  return out;
}

}  // namespace

TEST_CASE("donation: delete_buffers deletes the array; its values are then a ValueError with JAX's message") {
  ts::Array x = ts::array(std::vector<float>{1, 2, 3});
  ts::Array alias = x;  // another handle of the same array
  CHECK_FALSE(x.is_deleted());
  x.delete_buffers();
  CHECK(x.is_deleted());
  CHECK(alias.is_deleted());
  CHECK(x.shape() == ts::Shape{3});  // metadata stays
  CHECK(x.dtype() == ts::float32);
  const std::string want = "Array has been deleted with shape=float32[3].";
  CHECK(contains(message_of([&] { x.to_vector<float>(); }), want));
  CHECK(contains(message_of([&] { (void)(x + 1); }), want));
  CHECK(contains(message_of([&] { ts::jit([](ts::Array a) { return a * 2; })(x); }), want));
  CHECK(contains(message_of([&] { (void)x.str(); }), want));
  CHECK(contains(message_of([&] { x.addressable_shards(); }), want));
  CHECK(contains(message_of([&] { ts::jit([&](ts::Array a) { return a + x; })(ts::ones({3})); }), want));  // closed over
  x.delete_buffers();  // twice: nothing more happens
  CHECK(x.is_deleted());
  // A shard taken before the deletion refuses too.
  ts::Array y = ts::ones({4});
  auto shards = y.addressable_shards();
  y.delete_buffers();
  CHECK(contains(message_of([&] { shards[0].data(); }), "Array has been deleted with shape=float32[4]."));
  CHECK(contains(message_of([&] { shards[0].unsafe_buffer_pointer(); }), "Array has been deleted"));
  // Under jit a tracer has no buffers to delete.
  CHECK_THROWS_AS(ts::jit([](ts::Array a) {
                    a.delete_buffers();
                    return a;
                  })(ts::ones({2})),
                  ts::ConcretizationError);
}

TEST_CASE("donation: a donated argument is deleted after the call, and an output takes its buffers where nothing reads them after") {
  const ts::Array w = ts::random::normal(ts::random::key(1), {16, 16});
  auto step = [w](ts::Array p) { return ts::matmul(p, w) + 1.0f; };  // the dot reads p; the add writes the result
  const auto plain = ts::jit(step);
  const auto donating = ts::jit(step, {.donate_argnums = {0}});
  for (int k = 1; k <= std::min(8, ts::device_count()); ++k) {
    CAPTURE(k);
    const auto all = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
    for (std::int64_t rows : {16, 13}) {
      CAPTURE(rows);
      ts::Array p = ts::device_put(ts::random::normal(ts::random::key(2), {rows, 16}), ts::NamedSharding(mesh, P("x")));
      const auto want = plain(p).to_vector<float>();
      const auto ref = ts::testing::interpret_fn([&](const std::vector<ts::Array>& a) { return std::vector<ts::Array>{step(a[0])}; }, {p});
      const auto before = blocks(p);
      ts::Array out = donating(p);
      CHECK(p.is_deleted());
      CHECK(out.to_vector<float>() == want);
      CHECK(ts::testing::compare_arrays(ts::testing::host_of(out), ref[0], 1e-5, 1e-5) == "");
      // Even shards: every device's output is its donated block.
      if (rows % k == 0) CHECK(blocks(out) == before);
      CHECK(contains(message_of([&] { donating(p); }), "Array has been deleted with shape=float32[" + std::to_string(rows) + ",16]."));
    }
    // Replicated: positions whose operands are the same blocks compute once
    // and share; a position whose output took a donated block gets a copy.
    auto two = [w](ts::Array p, ts::Array q) { return std::vector<ts::Array>{ts::matmul(p, w) + 1.0f, q * 2.0f}; };
    ts::Array pr = ts::device_put(ts::random::normal(ts::random::key(3), {16, 16}), ts::NamedSharding(mesh, P()));
    ts::Array qr = ts::device_put(ts::random::normal(ts::random::key(4), {16, 16}), ts::NamedSharding(mesh, P()));
    const auto want2 = ts::jit(two)(pr, qr);
    const auto got2 = ts::jit(two, {.donate_argnums = {0}})(pr, qr);
    CHECK(pr.is_deleted());
    for (int o = 0; o < 2; ++o) {
      CHECK(got2[o].to_vector<float>() == want2[o].to_vector<float>());
      for (auto& sh : got2[o].addressable_shards()) CHECK(sh.data().to_vector<float>() == want2[o].to_vector<float>());
    }
  }
}

TEST_CASE("donation: where the writer still reads the argument, or sizes differ, the result is right and the argument deleted") {
  // p - 0.1 * g.T: the kernel reads g transposed, so g's block is not written
  // over (p's may be, its read is aligned); the same values.
  auto update = [](ts::Array p, ts::Array g) { return p - 0.1f * g.T(); };
  ts::Array p = ts::arange(16.0f).reshape({4, 4}), g = ts::arange(16.0f).reshape({4, 4}) * 3.0f;
  const auto want = ts::jit(update)(p, g).to_vector<float>();
  ts::Array out = ts::jit(update, {.donate_argnums = {0, 1}})(p, g);
  CHECK(p.is_deleted());
  CHECK(g.is_deleted());
  CHECK(out.to_vector<float>() == want);
  // Only g donated: the kernel reads it transposed, so the result takes a block of its own.
  ts::Array p3 = ts::arange(16.0f).reshape({4, 4}), g3 = ts::arange(16.0f).reshape({4, 4}) * 3.0f;
  const auto g3_block = blocks(g3);
  const ts::Array out3 = ts::jit(update, {.donate_argnums = {1}})(p3, g3);
  CHECK(out3.to_vector<float>() == want);
  CHECK(blocks(out3) != g3_block);
  // A result of another size: nothing to reuse; the argument is still given up.
  ts::Array q = ts::ones({8});
  ts::Array s = ts::jit([](ts::Array a) { return ts::sum(a); }, {.donate_argnums = {0}})(q);
  CHECK(s.item<float>() == 8.0f);
  CHECK(q.is_deleted());
  // A result that is the argument itself: the same buffer back.
  ts::Array r = ts::ones({5});
  const auto before = blocks(r);
  const auto outs = ts::jit([](ts::Array a, ts::Array b) { return std::vector<ts::Array>{a, b * 2}; },
                            {.donate_argnums = {0}})(r, ts::ones({2}));
  CHECK(blocks(outs[0]) == before);
  CHECK(outs[0].to_vector<float>() == std::vector<float>(5, 1.0f));
  // Returned as it is and read before another output of its size: the
  // other output must not take its block.
  const ts::Array w = ts::eye(4);
  ts::Array p2 = ts::arange(16.0f).reshape({4, 4});
  const auto both = ts::jit([w](ts::Array a) { return std::vector<ts::Array>{a, ts::matmul(a, w) + 1.0f}; },
                            {.donate_argnums = {0}})(p2);
  std::vector<float> id(16), plus(16);
  for (int i = 0; i < 16; ++i) id[i] = float(i), plus[i] = float(i) + 1;
  CHECK(both[0].to_vector<float>() == id);
  CHECK(both[1].to_vector<float>() == plus);
  CHECK(r.is_deleted());
}

TEST_CASE("donation: pytree arguments donate every leaf; the compiled object donates; the same array twice is an error") {
  std::vector<ts::Array> params = {ts::ones({4}), ts::full({2, 2}, 3.0)};
  auto f = [](const std::vector<ts::Array>& ps, ts::Array s) {
    std::vector<ts::Array> out;
    for (auto& x : ps) out.push_back(ts::exp(x) * s);
    return out;
  };
  const auto want = ts::jit(f)(params, ts::array(2.0f));
  const auto got = ts::jit(f, {.donate_argnums = {0}})(params, ts::array(2.0f));
  for (auto& x : params) CHECK(x.is_deleted());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].to_vector<float>() == want[i].to_vector<float>());
  // Negative argnums count from the end, as JAX's.
  ts::Array a = ts::ones({3}), b = ts::ones({3});
  ts::jit([](ts::Array x, ts::Array y) { return x + y; }, {.donate_argnums = {-1}})(a, b);
  CHECK_FALSE(a.is_deleted());
  CHECK(b.is_deleted());
  // The compiled object honours donation too.
  ts::Array c = ts::ones({3});
  auto compiled = ts::jit([](ts::Array x) { return x * 3; }, {.donate_argnums = {0}}).lower(c).compile();
  const ts::Array r3 = compiled(c);
  CHECK(r3.to_vector<float>() == std::vector<float>{3, 3, 3});
  CHECK(c.is_deleted());
  // Donating an array that is also another argument or closed over: JAX's error, and nothing is deleted.
  ts::Array d = ts::ones({3});
  const std::string twice = message_of([&] { ts::jit([](ts::Array x, ts::Array y) { return x + y; }, {.donate_argnums = {0}})(d, d); });
  CHECK(contains(twice, "Attempt to donate the same buffer twice"));
  CHECK_FALSE(d.is_deleted());
  const std::string closed = message_of([&] { ts::jit([d](ts::Array x) { return x + d; }, {.donate_argnums = {0}})(d); });
  CHECK(contains(closed, "Attempt to donate the same buffer twice"));
  CHECK(d.to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("donation: an elementwise kernel and an update write over a donated argument they read aligned, on 1..8 devices") {
  for (int n = 1; n <= 8; ++n) {
    const auto all = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
    for (std::int64_t rows : {16, 13}) {
      CAPTURE(n);
      CAPTURE(rows);
      const ts::NamedSharding split(mesh, P("x"));
      auto fresh = [&](float scale) {
        return ts::device_put(ts::arange(double(rows * 6)).reshape({rows, 6}).astype(ts::DType::float32) * scale, split);
      };
      // The training step's update: p - lr * tanh(g) + p * p (p read twice, aligned).
      auto step = [](ts::Array p, ts::Array g) { return p - 0.01f * ts::tanh(g) + p * p * 0.001f; };
      const ts::Array g = fresh(0.5f);
      const auto want = ts::testing::interpret_fn(
          [&](const std::vector<ts::Array>& a) { return std::vector<ts::Array>{step(a[0], a[1])}; }, {fresh(1.0f), g});
      ts::Array p = fresh(1.0f);
      const auto before = blocks(p);
      const ts::Array out = ts::jit(step, {.donate_argnums = {0}})(p, g);
      CHECK(p.is_deleted());
      CHECK(ts::testing::same_bits(ts::testing::host_of(out), want[0]) == "");
      CHECK(ts::testing::shards_hold(out, want[0]) == "");
      // Every device's result sits in its donated block (even and uneven: the
      // tile sizes of argument and result agree).
      CHECK(blocks(out) == before);
      // x.at[i].set(v) at the top level: the update writes only its window.
      ts::Array x = fresh(2.0f);
      const auto xb = blocks(x);
      auto set = [](ts::Array x, ts::Array i) { return x.at({i, 2}).set(-1.0f).at({0}).add(1.0f); };
      const auto want_x = ts::testing::interpret_fn(
          [&](const std::vector<ts::Array>& a) { return std::vector<ts::Array>{set(a[0], a[1])}; },
          {fresh(2.0f), ts::array(std::int32_t(rows - 2))});
      const ts::Array y = ts::jit(set, {.donate_argnums = {0}})(x, ts::array(std::int32_t(rows - 2)));
      CHECK(ts::testing::same_bits(ts::testing::host_of(y), want_x[0]) == "");
      if (n == 1) CHECK(blocks(y) == xb);  // one device: no partition rule's mask in between
    }
  }
  // A small MLP's training step returning its updated parameters (a pytree):
  // every parameter's block is reused, and the values equal the step without donation.
  auto init = [] {
    return Params{ts::arange(32.0f).reshape({8, 4}) * 0.01f, ts::ones({4}) * 0.1f,
                  ts::arange(8.0f).reshape({4, 2}) * -0.02f, ts::zeros({2})};
  };
  const ts::Array x = ts::arange(24.0f).reshape({3, 8}) * 0.1f;
  const Params plain = ts::jit(train)(init(), x);
  Params p = init();
  std::vector<std::map<int, std::uintptr_t>> before;
  for (auto& a : p) before.push_back(blocks(a));
  const auto donating = ts::jit(train, {.donate_argnums = {0}});
  const Params next = donating(p, x);
  for (std::size_t k = 0; k < p.size(); ++k) {
    CAPTURE(k);
    CHECK(p[k].is_deleted());
    CHECK(next[k].to_vector<float>() == plain[k].to_vector<float>());
    CHECK(blocks(next[k]) == before[k]);
  }
  // Twenty steps: the parameters stay in the same blocks.
  Params q = next;
  for (int s = 0; s < 20; ++s) q = donating(q, x);
  for (std::size_t k = 0; k < q.size(); ++k) CHECK(blocks(q[k]) == before[k]);
}

TEST_CASE("memory_analysis: donation and the blocks the runtime actually holds for a training step") {
  auto init = [] {
    return Params{ts::ones({256, 512}) * 0.01f, ts::ones({512}) * 0.1f, ts::ones({512, 128}) * -0.02f, ts::zeros({128})};
  };
  const std::size_t param_bytes = (256 * 512 + 512 + 512 * 128 + 128) * 4;
  const ts::Array x = ts::ones({64, 256});
  const auto plain = ts::jit(train).lower(init(), x).compile();
  const auto donating = ts::jit(train, {.donate_argnums = {0}}).lower(init(), x).compile();
  const ts::MemoryAnalysis mp = plain.memory_analysis(), md = donating.memory_analysis();
  CHECK(mp.alias_size_in_bytes == 0);
  CHECK(md.alias_size_in_bytes == param_bytes);  // every parameter's update writes over it
  CHECK(md.peak_memory_in_bytes + param_bytes == mp.peak_memory_in_bytes);
  // What one run holds beyond its arguments, as the runtime counts its blocks.
  auto held = [&](const ts::Compiled& c) {
    Params p = init();
    for (auto& a : p) a.block_until_ready();
    x.block_until_ready();
    const std::size_t before = tessel::rt::live_bytes();
    tessel::rt::reset_peak_live_bytes();
    {
      const Params out = c(p, x);
      for (auto& a : out) a.block_until_ready();
    }
    return tessel::rt::peak_live_bytes() - before;
  };
  const std::size_t run_plain = held(plain), run_donating = held(donating);
  MESSAGE("training step: memory_analysis peak beyond arguments " << mp.peak_memory_in_bytes - mp.argument_size_in_bytes
          << " bytes (donating " << md.peak_memory_in_bytes - md.argument_size_in_bytes << "); the runtime held "
          << run_plain << " (donating " << run_donating << ")");
  CHECK(run_plain <= mp.peak_memory_in_bytes - mp.argument_size_in_bytes);
  CHECK(run_donating <= md.peak_memory_in_bytes - md.argument_size_in_bytes);
  // The outputs alone are a parameter set: without donation the run holds them.
  CHECK(run_plain >= param_bytes);
  CHECK(run_plain - run_donating >= param_bytes * 9 / 10);
}

TEST_CASE("donation: sin written over its donated argument still takes libm's value for large arguments") {
  // The in-place kernel cannot read a block again after writing it: it looks
  // for large arguments first (codegen/emit.cpp, guarded).
  std::vector<float> v(20000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.01f - 90.0f;
  v[12345] = 1e8f;
  v[3] = 3e38f;
  v[17000] = -262144.5f;
  ts::Array x = ts::array(v);
  const auto before = blocks(x);
  const ts::Array y = ts::jit([](ts::Array a) { return ts::sin(a); }, {.donate_argnums = {0}})(x);
  CHECK(x.is_deleted());
  CHECK(blocks(y) == before);
  const auto got = y.to_vector<float>();
  int bad = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double want = std::sin(double(v[i]));
    if (!(std::fabs(got[i] - want) <= 3e-7 * std::max(1.0, std::fabs(want)))) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("donation: a donated argument no output can use is JAX's UserWarning, once per compiled program") {
  std::vector<std::string> seen;
  const ts::WarningHandler before = ts::set_warning_handler([&](const std::string& m) { seen.push_back(m); });
  // JAX's FAQ: add with both arguments donated; one output takes one of them.
  auto add = [](ts::Array x, ts::Array y) { return x + y; };
  const auto both = ts::jit(add, {.donate_argnums = {0, 1}});
  ts::Array z = both(ts::ones({2, 3}), ts::ones({2, 3}));
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] ==
        "Some donated buffers were not usable: ShapedArray(float32[2,3]).\n"
        "See an explanation at https://docs.jax.dev/en/latest/faq.html#buffer-donation.");
  z = both(ts::ones({2, 3}), ts::ones({2, 3}));  // the same program: no second warning
  CHECK(seen.size() == 1);
  // A donated argument of another shape than any output.
  const auto other = ts::jit(add, {.donate_argnums = {1}});
  z = other(ts::ones({2, 3}), ts::ones({1, 3}));
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].find("ShapedArray(float32[1,3])") != std::string::npos);
  // Every donation usable (the training step): nothing.
  const ts::Array x = ts::arange(24.0f).reshape({3, 8}) * 0.1f;
  Params p{ts::arange(32.0f).reshape({8, 4}) * 0.01f, ts::ones({4}) * 0.1f, ts::arange(8.0f).reshape({4, 2}) * -0.02f,
           ts::zeros({2})};
  p = ts::jit(train, {.donate_argnums = {0}})(p, x);
  CHECK(seen.size() == 2);
  ts::set_warning_handler(before);
}

TEST_CASE("donation through shard_map, a fori_loop, a cond and a scan: deleted, equal to the plain run, the block reused") {
  const auto all = ts::devices();
  for (int k : {1, 3, 8}) {
    if (k > ts::device_count()) continue;
    CAPTURE(k);
    ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
    const ts::NamedSharding rows(mesh, P("x"));
    auto fresh = [&] { return ts::device_put(ts::random::normal(ts::random::key(7), {8 * k, 16}), rows); };
    // A collective inside: each device's block less the mean over the devices.
    auto centred = [mesh](ts::Array p) {
      return ts::shard_map([](ts::Array b) { return b - ts::pmean(ts::mean(b, std::vector<int>{0}), "x"); }, mesh, P("x"), P("x"))(p);
    };
    // A loop whose carry is the donated argument, and a branch on its values.
    auto looped = [](ts::Array p) {
      return ts::lax::fori_loop(0, 5, [](ts::Array, ts::Array v) { return v * 0.5f + 1.0f; }, p);
    };
    auto branched = [](ts::Array p) {
      return ts::lax::cond(ts::sum(p) > 0.0f, [](ts::Array v) { return v * 2.0f; }, [](ts::Array v) { return v - 1.0f; }, p);
    };
    for (auto [name, f] : std::vector<std::pair<std::string, std::function<ts::Array(ts::Array)>>>{
             {"shard_map", centred}, {"fori_loop", looped}, {"cond", branched}}) {
      CAPTURE(name);
      ts::Array p = fresh();
      const auto want = ts::jit(f)(p).to_vector<float>();
      const auto ref = ts::testing::interpret_fn([&](const std::vector<ts::Array>& a) { return std::vector<ts::Array>{f(a[0])}; }, {p});
      const auto before = blocks(p);
      ts::Array out = ts::jit(f, {.donate_argnums = {0}})(p);
      CHECK(p.is_deleted());
      CHECK(out.to_vector<float>() == want);
      CHECK(ts::testing::compare_arrays(ts::testing::host_of(out), ref[0], 1e-5, 1e-5) == "");
      // A branch's operands are read in place by the branch, so its result cannot take
      // them (XLA may alias them; JAX then warns that the donation was not usable).
      if (name != "cond") CHECK(blocks(out) == before);
      CHECK(out.sharding().is_equivalent_to(rows, 2));
    }
  }
  // Two donated carries that trade places each step, and a donated carry the body
  // also reads as a constant (its block must keep the initial value): equal to the
  // plain run.
  auto swap = [](ts::Array a, ts::Array b) {
    auto r = ts::lax::fori_loop(0, 3, [](ts::Array, std::pair<ts::Array, ts::Array> c) {
      return std::make_pair(c.second * 2.0f, c.first + 1.0f);
    }, std::make_pair(a, b));
    return std::vector<ts::Array>{r.first, r.second};
  };
  auto closed = [](ts::Array p) {
    return ts::lax::fori_loop(0, 4, [p](ts::Array, ts::Array v) { return v * 0.5f + p; }, p);
  };
  ts::Array a0 = ts::random::normal(ts::random::key(9), {40}), b0 = ts::random::normal(ts::random::key(10), {40});
  const auto want_swap = ts::jit(swap)(a0, b0);
  ts::Array a = a0 * 1.0f, b = b0 * 1.0f;
  const auto got_swap = ts::jit(swap, {.donate_argnums = {0, 1}})(a, b);
  CHECK(a.is_deleted());
  for (int o = 0; o < 2; ++o) CHECK(got_swap[o].to_vector<float>() == want_swap[o].to_vector<float>());
  ts::Array b1 = b0 * 1.0f;  // only the second: the first carry's result must not take its block
  const auto got_second = ts::jit(swap, {.donate_argnums = {1}})(a0, b1);
  CHECK(b1.is_deleted());
  for (int o = 0; o < 2; ++o) CHECK(got_second[o].to_vector<float>() == want_swap[o].to_vector<float>());
  const auto want_closed = ts::jit(closed)(a0).to_vector<float>();
  ts::Array c = a0 * 1.0f;
  CHECK(ts::jit(closed, {.donate_argnums = {0}})(c).to_vector<float>() == want_closed);
  CHECK(c.is_deleted());

  // A scan writes its stacked outputs into the result, step by step: beside the
  // argument and the result it holds only the carry and the step's output.
  auto f = ts::jit([](const ts::Array& xs) {
    auto [c, ys] = ts::lax::scan([](const ts::Array& c, const ts::Array& x) {
      ts::Array n = c * 0.5f + x;
      return std::make_pair(n, n * 2.0f);
    }, ts::zeros({1000}), xs);
    return ys;
  });
  ts::Array xs = ts::random::normal(ts::random::key(8), {64, 1000});
  const auto mem = f.lower(xs).compile().memory_analysis();
  MESSAGE("scan of 64 steps over f32[1000]: peak ", mem.peak_memory_in_bytes, " bytes, argument ", mem.argument_size_in_bytes,
          ", output ", mem.output_size_in_bytes);
  CHECK(mem.output_size_in_bytes == 64 * 1000 * 4);
  CHECK(mem.peak_memory_in_bytes <= mem.argument_size_in_bytes + mem.output_size_in_bytes + 2 * 1000 * 4);
  const auto ref = ts::testing::interpret_fn([&](const std::vector<ts::Array>& a) { return std::vector<ts::Array>{f(a[0])}; }, {xs});
  CHECK(ts::testing::compare_arrays(ts::testing::host_of(f(xs)), ref[0], 1e-5, 1e-5) == "");
}
