// Programs 100,000 ops deep: no pass, no destructor and no emitter may
// recurse in proportion to program depth (the stack is 8 MiB).
#include <doctest/doctest.h>

#include <cmath>

#include <tessel/tessel.hpp>

namespace ts = tessel;

namespace {
constexpr int kDepth = 100000;
}

TEST_CASE("a 100,000-op chain under jit compiles, runs and is freed") {
  {
    auto f = ts::jit([](ts::Array x) {
      for (int i = 0; i < kDepth; ++i) x = x + 1.0;
      return x;
    });
    auto r = f(ts::zeros({4}, ts::int32));
    CHECK(r.to_vector<int>() == std::vector<int>(4, kDepth));
  }  // the jit object, its trace and its program die here
  {
    auto g = ts::jit([](ts::Array x) {
      for (int i = 0; i < kDepth; ++i) x = ts::sin(x);
      return x;
    });
    double want = 0.5;
    for (int i = 0; i < kDepth; ++i) want = std::sin(want);
    auto r = g(ts::full({3}, 0.5, ts::float64));
    CHECK(r.to_vector<double>()[2] == doctest::Approx(want).epsilon(1e-9));
  }
}

TEST_CASE("grad of a 100,000-op chain") {
  auto f = [](ts::Array x) {
    for (int i = 0; i < kDepth; ++i) x = x * 1.00001;
    return ts::sum(x);
  };
  auto g = ts::grad(f)(ts::ones({2}, ts::float64));
  CHECK(g.to_vector<double>()[0] == doctest::Approx(std::pow(1.00001, kDepth)).epsilon(1e-9));
  auto jg = ts::jit(ts::grad(f))(ts::ones({2}, ts::float64));
  CHECK(jg.to_vector<double>()[1] == doctest::Approx(std::pow(1.00001, kDepth)).epsilon(1e-9));
}
