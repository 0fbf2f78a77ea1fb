// The compile caches never confuse two programs: keys hold exact structure
// and bits (tessel/core/key.hpp), never printed text; the program cache is bounded
// and frees what nobody holds.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include <tessel/tessel.hpp>

#include "codegen/jit.hpp"
#include "dsl/src/pipeline.hpp"
#include "runtime/executable.hpp"

namespace ts = tessel;
using ts::P;

TEST_CASE("constants that print alike are different programs") {
  auto x = ts::ones({4});
  // jit(x * c): c is a constant of the traced program; 6-digit text would make them one.
  for (auto [a, b] : {std::pair{0.1234567, 0.1234568}, std::pair{1.0000001, 1.0000002}, std::pair{1e-30, 1.0000001e-30}}) {
    auto fa = ts::jit([a = a](ts::Array v) { return v * ts::array(std::vector<double>{a}, {}); });
    auto fb = ts::jit([b = b](ts::Array v) { return v * ts::array(std::vector<double>{b}, {}); });
    auto xd = ts::astype(x, ts::float64);
    CHECK(fa(xd).to_vector<double>()[0] == a);
    CHECK(fb(xd).to_vector<double>()[0] == b);
    // Closed-over float64 scalars as constants (not arrays).
    auto ga = ts::jit([a = a](ts::Array v) { return v * a; });
    auto gb = ts::jit([b = b](ts::Array v) { return v * b; });
    CHECK(ga(xd).to_vector<double>()[0] == a);
    CHECK(gb(xd).to_vector<double>()[0] == b);
  }
  // float32 constants one ulp apart.
  const float c1 = 0.1234567f, c2 = std::nextafter(c1, 1.0f);
  auto f1 = ts::jit([&](ts::Array v) { return v * ts::array(c1); });
  auto f2 = ts::jit([&](ts::Array v) { return v * ts::array(c2); });
  CHECK(f1(x).to_vector<float>()[0] == c1);
  CHECK(f2(x).to_vector<float>()[0] == c2);
}

TEST_CASE("static C++ scalars key the trace by their bits") {
  auto x = ts::ones({3}, ts::float64);
  auto f = ts::jit([](ts::Array v, double s) { return v * s; });
  CHECK(f(x, 123456.7).to_vector<double>()[0] == 123456.7);
  CHECK(f(x, 123456.8).to_vector<double>()[0] == 123456.8);
  CHECK(f(x, 123456.7).to_vector<double>()[0] == 123456.7);
  // -0.0 and 0.0 print alike and multiply differently.
  CHECK(std::signbit(f(x, -0.0).to_vector<double>()[0]));
  CHECK(!std::signbit(f(x, 0.0).to_vector<double>()[0]));
  // int and double statics with the same value are different arguments.
  auto g = ts::jit([](ts::Array v, auto s) { return v + s; });
  CHECK(g(x, 1).to_vector<double>()[0] == 2);
  CHECK(g(x, 1.5).to_vector<double>()[0] == 2.5);
}

TEST_CASE("static strings with any characters are distinct keys") {
  auto x = ts::arange(3.0);
  auto f = ts::jit([](ts::Array v, std::string a, std::string b) { return v * double(a.size() * 10 + b.size()); },
                   {.static_argnums = {1, 2}});
  // Under naive concatenation with separators these pairs collide.
  CHECK(f(x, std::string("a|#s="), std::string("b")).to_vector<float>()[1] == 51);
  CHECK(f(x, std::string("a"), std::string("|#s=b")).to_vector<float>()[1] == 15);
  CHECK(f(x, std::string("ab"), std::string("")).to_vector<float>()[1] == 20);
  CHECK(f(x, std::string(""), std::string("ab")).to_vector<float>()[1] == 2);
  // Map keys in pytrees likewise.
  auto g = ts::jit([](const std::map<std::string, ts::Array>& m) {
    ts::Array r = ts::zeros({3});
    double w = 1;
    for (auto& [k, v] : m) r = r + v * (w *= double(k.size() + 1));
    return r;
  });
  ts::Array o = ts::ones({3});
  CHECK(g(std::map<std::string, ts::Array>{{"a', 'b", o}}).to_vector<float>()[0] == 7);
  CHECK(g(std::map<std::string, ts::Array>{{"a", o}, {"b", o}}).to_vector<float>()[0] == 2 + 4);
}

TEST_CASE("eager ops with constants one ulp apart") {
  auto x = ts::ones({5}, ts::float64);
  const double a = 0.1 + 0.2, b = 0.3;  // differ in the last bit
  REQUIRE(a != b);
  CHECK((x * a).to_vector<double>()[0] == a);
  CHECK((x * b).to_vector<double>()[0] == b);
  CHECK(ts::full({2}, a, ts::float64).to_vector<double>()[1] == a);
  CHECK(ts::full({2}, b, ts::float64).to_vector<double>()[1] == b);
}

TEST_CASE("the program cache is bounded and frees programs nobody holds") {
  auto& cfg = ts::config();
  const auto old_entries = cfg.compile_cache_max_entries;
  const auto old_bytes = cfg.compile_cache_max_bytes;
  auto& jit = ts::codegen::Jit::get();
  cfg.compile_cache_max_entries = 4;
  std::size_t live_before = 0;
  {
    // 12 distinct programs (shapes 1..12), each its own kernels.
    for (int n = 1; n <= 12; ++n) {
      auto f = ts::jit([n](ts::Array v) { return ts::sin(v) * double(n) + 0.25; });
      auto r = f(ts::ones({n + 100}));
      CHECK(r.to_vector<float>()[0] == doctest::Approx(std::sin(1.0) * n + 0.25));
      CHECK(ts::detail::compile_cache_stats().entries <= 4);
    }
    live_before = jit.live_modules();
  }
  // Programs evicted and not held anywhere are gone, their machine code too.
  CHECK(ts::detail::compile_cache_stats().entries <= 4);
  cfg.compile_cache_max_entries = 1;
  auto keep = ts::jit([](ts::Array v) { return ts::cos(v) * 3.5; });
  CHECK(keep(ts::ones({7})).to_vector<float>()[0] == doctest::Approx(std::cos(1.0) * 3.5));
  CHECK(ts::detail::compile_cache_stats().entries == 1);
  CHECK(jit.live_modules() < live_before);
  // A Compiled keeps its program alive after the cache dropped it, and still runs.
  auto compiled = ts::jit([](ts::Array v) { return ts::exp(v) + 0.5; }).lower(ts::zeros({9})).compile();
  for (int n = 1; n <= 3; ++n) ts::jit([n](ts::Array v) { return v * double(n + 1000); })(ts::ones({3})).block_until_ready();
  ts::Array r = compiled(ts::zeros({9}));
  CHECK(r.to_vector<float>()[8] == doctest::Approx(1.5));
  // An evicted program compiles again, to the same answer.
  auto again = ts::jit([](ts::Array v) { return ts::sin(v) * 3.0 + 0.25; });
  CHECK(again(ts::ones({103})).to_vector<float>()[0] == doctest::Approx(std::sin(1.0) * 3 + 0.25));
  // A byte bound as well.
  cfg.compile_cache_max_entries = old_entries;
  cfg.compile_cache_max_bytes = 1;
  ts::jit([](ts::Array v) { return v * 7.0; })(ts::ones({11})).block_until_ready();
  CHECK(ts::detail::compile_cache_stats().entries == 1);  // the newest stays
  cfg.compile_cache_max_bytes = old_bytes;
}

TEST_CASE("RESOURCE_EXHAUSTED counts every device's part, before any device allocates") {
  if (ts::device_count() < 8) return;
  // Twice the host's memory of float32 split 8 ways: each part alone (a quarter of the host) fits, all together
  // do not (on this 24 GiB machine: 48 GiB, 6 GiB a device).
  const std::int64_t elems = std::int64_t(ts::rt::host_memory_bytes() / 4 / 8 * 2) * 8;
  auto mesh = ts::make_mesh({8}, {"x"});
  auto f = ts::jit([elems](ts::Array v) { return ts::broadcast_to(v, {elems}); },
                   {.out_shardings = {ts::Sharding(ts::NamedSharding(mesh, P("x")))}});
  CHECK_THROWS_WITH_AS(f(ts::zeros({})), doctest::Contains("RESOURCE_EXHAUSTED"), ts::ResourceExhaustedError);
  // Nothing was allocated: the process is alive and a small program still runs.
  CHECK(f.lower(ts::zeros({})).compile().memory_analysis().output_size_in_bytes == std::size_t(elems) / 8 * 4);
  CHECK(ts::jit([](ts::Array v) { return v + 1.0; })(ts::zeros({3})).to_vector<float>()[2] == 1);
}

TEST_CASE("C++ doubles keep their bits and JAX's weak types") {
  auto c = ts::array(std::vector<bool>{true, false}, {2});
  // Scalars only: weak float32, as jnp.where(c, 0.5, 1.5).
  CHECK(ts::where(c, 0.5, 1.5).dtype() == ts::float32);
  CHECK((ts::where(c, 1.0, 0.0) + ts::where(c, 2.0, 3.0)).dtype() == ts::float32);
  CHECK((ts::arange(3) * 0.5).dtype() == ts::float32);            // int32 * double: float32
  CHECK((ts::ones({2}) + 1.5).dtype() == ts::float32);
  CHECK((ts::array(2.0) * 3.0).dtype() == ts::float32);
  CHECK((ts::ones({2}, ts::bool_) * 0.5).dtype() == ts::float32);
  CHECK((ts::ones({2}, ts::float64) * 0.1).dtype() == ts::float64);
  // A float64 array sees the double exactly; a float32 array sees it rounded once.
  CHECK((ts::ones({2}, ts::float64) * 0.1).to_vector<double>()[0] == 0.1);
  CHECK((ts::ones({2}) * 0.1).to_vector<float>()[0] == 0.1f);
  CHECK(ts::jit([](ts::Array x) { return x + 0.1; })(ts::zeros({2}, ts::float64)).to_vector<double>()[1] == 0.1);
}

TEST_CASE("a jit object keeps a bounded number of traces, and what it dropped still runs") {
  auto f = ts::jit([](ts::Array x) { return x * 2.0f; });
  auto lowered = f.lower(ts::zeros({1}));
  for (int n = 1; n <= 600; ++n) CHECK(f(ts::zeros({n})).shape() == ts::Shape{n});  // 600 shapes > 512 kept
  // The first trace is gone from the cache; its Lowered still compiles and runs.
  CHECK(lowered.compile()(ts::ones({1})).get<ts::Array>().to_vector<float>() == std::vector<float>{2});
  CHECK(f(ts::ones({1})).to_vector<float>() == std::vector<float>{2});  // traced again
}
