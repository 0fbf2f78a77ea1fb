// ts::debug::print and ts::debug::callback (jax.debug.print, .callback):
// fired at run time with the traced values, in jit, shard_map, cond and
// loops, under vmap and grad; closed forms for every value printed.
#include <doctest/doctest.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <sstream>

#include <tessel/tessel.hpp>

#include "dsl/src/pipeline.hpp"

namespace ts = tessel;
using ts::Array;
using ts::P;

namespace {

// std::cout's text while it lives (the devices must be done writing: every
// case blocks on its results first). Checks come after it ends: doctest
// reports on std::cout too.
struct CaptureCout {
  std::ostringstream text;
  std::streambuf* old;
  CaptureCout() : old(std::cout.rdbuf(text.rdbuf())) {}
  ~CaptureCout() { std::cout.rdbuf(old); }
  std::vector<std::string> lines() const {
    ts::effects_barrier();  // every print launched so far has run
    std::vector<std::string> out;
    std::istringstream is(text.str());
    for (std::string l; std::getline(is, l);) out.push_back(l);
    return out;
  }
};

}  // namespace

TEST_CASE("debug::print inside jit fires at every run with the traced values, once, with the whole array") {
  auto f = ts::jit([](const Array& x) {
    Array y = x * 2.0f;
    ts::debug::print("x={x} y={y} sum={}", x, y, ts::sum(y));
    return y + 1.0f;
  });
  std::vector<std::string> lines;
  std::vector<float> result;
  {
    CaptureCout c;
    auto r1 = f(ts::arange(4, ts::float32));
    r1.block_until_ready();
    auto r2 = f(ts::arange(4, ts::float32) + 1.0f);  // the cached program prints again, with the new values
    r2.block_until_ready();
    lines = c.lines();
    result = r2.to_vector<float>();
  }
  CHECK(result == std::vector<float>{3, 5, 7, 9});
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "x=[0. 1. 2. 3.] y=[0. 2. 4. 6.] sum=12.0");
  CHECK(lines[1] == "x=[1. 2. 3. 4.] y=[2. 4. 6. 8.] sum=20.0");
  // On a sharded input the whole value is printed once (the partitioner gathers it).
  if (ts::device_count() >= 4) {
    auto mesh = ts::make_mesh({4}, {"x"});
    auto x = ts::device_put(ts::arange(8, ts::int32), ts::NamedSharding(mesh, P("x")));
    auto g = ts::jit([](const Array& v) {
      ts::debug::print("{} and {{braces}} {0}", v);
      return v;
    });
    std::vector<std::string> l;
    {
      CaptureCout c;
      f(x.astype(ts::float32)).block_until_ready();
      g(x).block_until_ready();
      l = c.lines();
    }
    REQUIRE(l.size() == 2);
    CHECK(l[0] == "x=[0. 1. 2. 3. 4. 5. 6. 7.] y=[ 0.  2.  4.  6.  8. 10. 12. 14.] sum=56.0");
    CHECK(l[1] == "[0 1 2 3 4 5 6 7] and {braces} [0 1 2 3 4 5 6 7]");
  }
}

TEST_CASE("debug::print outside a trace prints at once; bad format strings are ValueErrors at trace time") {
  std::vector<std::string> l;
  {
    CaptureCout c;
    ts::debug::print("eager {} {} {}", ts::array(std::vector<double>{1.5, -2}), 3, true);
    l = c.lines();
  }
  REQUIRE(l.size() == 1);
  CHECK(l[0] == "eager [ 1.5 -2. ] 3 True");
  CHECK_THROWS_AS(ts::debug::print("{} {}", ts::ones({2})), ts::ValueError);
  CHECK_THROWS_AS(ts::debug::print("{:.3f}", ts::ones({2})), ts::ValueError);
  CHECK_THROWS_AS(ts::debug::print("{", ts::ones({2})), ts::ValueError);
  CHECK_THROWS_AS(ts::jit([](const Array& x) {
                    ts::debug::print("{3}", x);
                    return x;
                  })(ts::ones({2})),
                  ts::ValueError);
}

TEST_CASE("debug::print in a loop fires every iteration; in cond, in the branch taken") {
  auto f = ts::jit([](const Array& x) {
    return ts::lax::fori_loop(0, 3, [](const Array& i, const Array& v) {
      ts::debug::print("i={} v={}", i, v);
      return v * 2.0f;
    }, x);
  });
  auto g = ts::jit([](const Array& x) {
    return ts::lax::cond(ts::sum(x) > 0.0f, [](const Array& v) {
      ts::debug::print("positive {}", v);
      return v;
    }, [](const Array& v) {
      ts::debug::print("not positive {}", v);
      return -v;
    }, x);
  });
  std::vector<std::string> l;
  std::vector<float> r;
  {
    CaptureCout c;
    r = f(ts::ones({2})).to_vector<float>();
    g(ts::ones({2})).block_until_ready();
    g(-ts::ones({2})).block_until_ready();
    l = c.lines();
  }
  CHECK(r == std::vector<float>{8, 8});
  REQUIRE(l.size() == 5);
  CHECK(l[0] == "i=0 v=[1. 1.]");
  CHECK(l[1] == "i=1 v=[2. 2.]");
  CHECK(l[2] == "i=2 v=[4. 4.]");
  CHECK(l[3] == "positive [1. 1.]");
  CHECK(l[4] == "not positive [-1. -1.]");
}

TEST_CASE("debug::print inside shard_map prints each device's block") {
  if (ts::device_count() < 4) return;
  auto mesh = ts::make_mesh({4}, {"x"});
  auto f = ts::jit(ts::shard_map([](const Array& b) {
    ts::debug::print("block {}", b);
    return ts::psum(ts::sum(b), "x");
  }, mesh, P("x"), P()));
  std::vector<std::string> l;
  float r = 0;
  {
    CaptureCout c;
    r = f(ts::arange(8, ts::float32)).item<float>();
    l = c.lines();
  }
  CHECK(r == 28.0f);
  std::sort(l.begin(), l.end());  // the devices' order is not defined
  REQUIRE(l.size() == 4);
  CHECK(l == std::vector<std::string>{"block [0. 1.]", "block [2. 3.]", "block [4. 5.]", "block [6. 7.]"});
}

TEST_CASE("debug::print under vmap prints each element; under grad the primal values, once") {
  auto f = ts::vmap([](const Array& row) {
    ts::debug::print("row {}", row);
    return ts::sum(row);
  });
  auto loss = [](const Array& w) {
    ts::debug::print("w {}", w);
    return ts::sum(w * w);
  };
  std::vector<std::string> l;
  std::vector<float> sums, grads;
  {
    CaptureCout c;
    sums = ts::jit(f)(ts::arange(6, ts::float32).reshape({3, 2})).to_vector<float>();
    grads = ts::jit(ts::grad(loss))(ts::arange(3, ts::float32)).to_vector<float>();
    l = c.lines();
  }
  CHECK(sums == std::vector<float>{1, 5, 9});
  CHECK(grads == std::vector<float>{0, 2, 4});
  REQUIRE(l.size() == 4);
  CHECK(l[0] == "row [0. 1.]");
  CHECK(l[1] == "row [2. 3.]");
  CHECK(l[2] == "row [4. 5.]");
  CHECK(l[3] == "w [0. 1. 2.]");
}

TEST_CASE("debug::callback hands the values to a C++ function at run time") {
  std::mutex mu;
  std::vector<std::vector<float>> seen;
  auto f = ts::jit([&](const Array& x) {
    Array y = ts::exp(x);
    ts::debug::callback([&](const Array& a, const Array& b) {
      std::lock_guard<std::mutex> lk(mu);
      seen.push_back(a.to_vector<float>());
      seen.push_back(b.to_vector<float>());
      CHECK(a.dtype() == ts::float32);
      CHECK(b.shape() == ts::Shape{});
    }, y, ts::max(y));
    return y;
  });
  f(ts::zeros({3})).block_until_ready();
  ts::effects_barrier();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<float>{1, 1, 1});
  CHECK(seen[1] == std::vector<float>{1});
  // Complex values arrive as complex (codegen packs them as real pairs).
  std::vector<std::complex<float>> got;
  ts::jit([&](const Array& z) {
    ts::debug::callback([&](const Array& a) { got = a.to_vector<std::complex<float>>(); }, z * 2.0f);
    return z;
  })(ts::array(std::vector<std::complex<float>>{{1, 2}, {3, -4}})).block_until_ready();
  ts::effects_barrier();
  CHECK(got == std::vector<std::complex<float>>{{2, 4}, {6, -8}});
  // Tessel computations inside the callback are an error, not a hang: on
  // the program's outputs, and at the next effects_barrier.
  auto bad = ts::jit([](const Array& x) {
    ts::debug::callback([](const Array& a) { (a + 1.0f).block_until_ready(); }, x);
    return x * 2.0f;
  });
  CHECK_THROWS_AS(bad(ts::ones({2})).block_until_ready(), ts::Error);
  CHECK_THROWS_AS(ts::effects_barrier(), ts::Error);
  ts::effects_barrier();  // reported once
  // An exception of the user's own type reaches the barrier as it was thrown.
  struct Mine {};
  ts::jit([](const Array& x) {
    ts::debug::callback([](const Array&) { throw Mine{}; }, x);
    return x;
  })(ts::ones({1}));
  CHECK_THROWS_AS(ts::effects_barrier(), Mine);
}

TEST_CASE("debug::print runs where it is written: not hoisted out of branches and loops, not repeated by derivatives") {
  // A print of an outer value inside a branch fires only when that branch runs.
  auto f = ts::jit([](const Array& x) {
    Array outer = x * 10.0f;
    return ts::lax::cond(ts::sum(x) > 0.0f, [&](const Array& v) {
      ts::debug::print("taken {}", outer);
      return v;
    }, [](const Array& v) { return -v; }, x);
  });
  // A loop whose result nobody reads still prints each iteration.
  auto g = ts::jit([](const Array& x) {
    ts::lax::fori_loop(0, 2, [](const Array& i, const Array& v) {
      ts::debug::print("ignored {}", i);
      return v;
    }, x);
    return x + 1.0f;
  });
  // Under grad, a loop body prints once per iteration (the derivative's own passes do not print again).
  auto loss = [](const Array& w) {
    Array s = ts::lax::fori_loop(0, 2, [](const Array& i, const Array& v) {
      ts::debug::print("step {} {}", i, v);
      return v * 2.0f;
    }, w);
    return ts::sum(s * s);
  };
  std::vector<std::string> l;
  std::vector<float> gw, vj;
  {
    CaptureCout c;
    f(-ts::ones({2})).block_until_ready();  // the other branch: no print
    f(ts::ones({2})).block_until_ready();
    g(ts::ones({1})).block_until_ready();
    gw = ts::jit(ts::grad(loss))(ts::ones({2})).to_vector<float>();
    // vjp's function does not re-run the forward pass's prints.
    auto [out, back] = ts::vjp([](const Array& w) {
      ts::debug::print("forward {}", w);
      return w * 3.0f;
    }, ts::ones({2}));
    vj = std::get<0>(back(ts::ones({2}))).to_vector<float>();
    out.block_until_ready();
    l = c.lines();
  }
  CHECK(gw == std::vector<float>{32, 32});  // d/dw sum((4w)^2) = 32 w
  CHECK(vj == std::vector<float>{3, 3});
  CHECK(l == std::vector<std::string>{"taken [10. 10.]", "ignored 0", "ignored 1", "step 0 [1. 1.]", "step 1 [2. 2.]",
                                      "forward [1. 1.]"});
}

TEST_CASE("a function that prints compiles once: retracing it (eager grad) finds its program") {
  auto loss = [](const Array& w) {
    ts::debug::print("w {}", w);
    return ts::sum(w * w);
  };
  std::vector<std::string> l;
  std::size_t compiles = 0;
  {
    CaptureCout c;
    ts::grad(loss)(ts::ones({3})).block_until_ready();
    const std::size_t before = ts::detail::compile_count();
    ts::grad(loss)(ts::ones({3}) * 2.0f).block_until_ready();
    compiles = ts::detail::compile_count() - before;
    l = c.lines();
  }
  CHECK(compiles <= 1);  // the multiply by 2 (an eager op), not the gradient again
  CHECK(l == std::vector<std::string>{"w [1. 1. 1.]", "w [2. 2. 2.]"});
}
