// ts::ffi::call and ts::pure_callback (issue 40): user kernels on each
// device's blocks as the sharding rule says (no all-gather for split
// factors; partial sums all-reduced for contracted ones; gathered only
// along factors that need replication), equal to the same computation in
// tessel ops and to the reference interpreter on 1..8 devices, even and
// uneven; their vmap methods; a gradient through custom_vjp; a kernel that
// throws is a ts::Error naming it, with no device left waiting; the rule's
// errors.
#include <doctest/doctest.h>

#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::Array;
using ts::P;
using Buf = ts::ffi::Buffer;

namespace {

// y = 2 x + 1, elementwise on whatever block it is given (float32).
void affine(std::span<const Buf> in, std::span<Buf> out) {
  const float* x = in[0].typed_data<float>();
  float* y = out[0].typed_data<float>();
  for (std::int64_t i = 0; i < in[0].size(); ++i) y[i] = 2 * x[i] + 1;
}

// C = A B on row-major blocks [m, k] x [k, n] (float32).
void gemm(std::span<const Buf> in, std::span<Buf> out) {
  const auto m = in[0].shape()[0], k = in[0].shape()[1], n = in[1].shape()[1];
  REQUIRE(in[1].shape()[0] == k);
  const float* a = in[0].typed_data<float>();
  const float* b = in[1].typed_data<float>();
  float* c = out[0].typed_data<float>();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (std::int64_t p = 0; p < k; ++p) s += a[i * k + p] * b[p * n + j];
      c[i * n + j] = s;
    }
}

ts::Mesh mesh_of(int a, int b) {
  const auto all = ts::devices();
  return ts::Mesh(std::vector<ts::Device>(all.begin(), all.begin() + a * b), {a, b}, {"x", "y"});
}

Array iota2(std::int64_t r, std::int64_t c) {
  return ts::reshape(ts::arange(0.0, double(r * c), 1.0, ts::float32), {r, c}) * 0.25f - 3.f;
}

bool has(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("ffi::call: an elementwise kernel on each device's block of P('x', 'y'), never gathered") {
  if (ts::device_count() < 8) return;
  std::mutex mu;
  std::set<std::vector<std::int64_t>> blocks;
  auto call = ts::ffi::call(
      [&](std::span<const Buf> in, std::span<Buf> out) {
        {
          std::lock_guard<std::mutex> lk(mu);
          blocks.insert(in[0].shape());
        }
        affine(in, out);
      },
      ts::ShapeDtypeStruct{{8, 6}, ts::float32, std::nullopt}, {.sharding_rule = "i j -> i j", .name = "affine"});
  const ts::Mesh mesh = mesh_of(4, 2);
  const Array x = ts::device_put(iota2(8, 6), ts::NamedSharding(mesh, P("x", "y")));
  auto f = ts::jit([&](const Array& x) { return call(x); });
  const std::string text = f.lower(x).compile().as_text();
  CHECK(has(text, "custom-call"));
  CHECK_FALSE(has(text, "all-gather"));
  const Array y = f(x);
  CHECK(ts::array_equal(y, iota2(8, 6) * 2.f + 1.f).item<bool>());
  CHECK(y.sharding().is_equivalent_to(x.sharding(), 2));
  CHECK(blocks == std::set<std::vector<std::int64_t>>{{2, 3}});
  // Eagerly, the same.
  CHECK(ts::array_equal(call(x), y).item<bool>());
}

TEST_CASE("ffi::call on 1..8 devices, even and uneven, against tessel ops and the interpreter") {
  const int max_devices = std::min(8, ts::device_count());
  for (std::int64_t rows : {8, 7}) {
    const Array ah = iota2(rows, 6), bh = iota2(6, 5) * 0.5f;
    auto mm = ts::ffi::call(gemm, ts::ShapeDtypeStruct{{rows, 5}, ts::float32, std::nullopt},
                            {.sharding_rule = "i k, k j -> i j", .name = "gemm"});
    const auto want = tessel::testing::interpret_fn([&](const std::vector<Array>& v) { return std::vector{mm(v[0], v[1])}; },
                                                    {ah, bh});
    for (int k = 1; k <= max_devices; ++k) {
      CAPTURE(rows);
      CAPTURE(k);
      const ts::Mesh mesh = mesh_of(k, 1);
      // Rows split: each device multiplies its rows.
      const Array a = ts::device_put(ah, ts::NamedSharding(mesh, P("x", ts::None)));
      auto f = ts::jit([&](const Array& a, const Array& b) { return mm(a, b); });
      const Array c = f(a, bh);
      CHECK(tessel::testing::compare_arrays(tessel::testing::host_of(c), want[0], 1e-6, 1e-5) == "");
      CHECK(ts::allclose(c, ts::matmul(ah, bh), 1e-5, 1e-5).item<bool>());
      // (A factor shorter than the device count is not split: propagation
      // leaves it whole, as every op's rule.)
      if (rows >= k) CHECK_FALSE(has(f.lower(a, bh).compile().as_text(), "all-gather"));
      // The contracted factor split: partial sums, all-reduced.
      const Array a2 = ts::device_put(ah, ts::NamedSharding(mesh, P(ts::None, "x")));
      const Array b2 = ts::device_put(bh, ts::NamedSharding(mesh, P("x", ts::None)));
      const Array c2 = f(a2, b2);
      CHECK(ts::allclose(c2, ts::matmul(ah, bh), 1e-5, 1e-5).item<bool>());
      const std::string text = f.lower(a2, b2).compile().as_text();
      if (6 >= k) CHECK_FALSE(has(text, "all-gather"));
      if (k > 1 && 6 >= k) CHECK(has(text, "all-reduce"));
    }
  }
}

TEST_CASE("ffi::call: need_replication gathers along that factor only; no rule gathers everything") {
  if (ts::device_count() < 8) return;
  const ts::Mesh mesh = mesh_of(4, 2);
  const Array x = ts::device_put(iota2(8, 6), ts::NamedSharding(mesh, P("x", "y")));
  std::mutex mu;
  std::set<std::vector<std::int64_t>> blocks;
  auto kernel = [&](std::span<const Buf> in, std::span<Buf> out) {
    {
      std::lock_guard<std::mutex> lk(mu);
      blocks.insert(in[0].shape());
    }
    affine(in, out);
  };
  const ts::ShapeDtypeStruct r{{8, 6}, ts::float32, std::nullopt};
  auto rows_whole = ts::ffi::call(kernel, r, {.sharding_rule = "i j -> i j", .need_replication = {"j"}});
  CHECK(ts::array_equal(ts::jit([&](const Array& x) { return rows_whole(x); })(x), iota2(8, 6) * 2.f + 1.f).item<bool>());
  CHECK(blocks == std::set<std::vector<std::int64_t>>{{2, 6}});
  blocks.clear();
  auto gathered = ts::ffi::call(kernel, r);
  CHECK(ts::array_equal(ts::jit([&](const Array& x) { return gathered(x); })(x), iota2(8, 6) * 2.f + 1.f).item<bool>());
  CHECK(blocks == std::set<std::vector<std::int64_t>>{{8, 6}});
}

TEST_CASE("ffi::call: several results, vmap methods, and a gradient through custom_vjp") {
  // Two results: the block and its negation.
  auto two = ts::ffi::call(
      [](std::span<const Buf> in, std::span<Buf> out) {
        const float* x = in[0].typed_data<float>();
        for (std::int64_t i = 0; i < in[0].size(); ++i) {
          out[0].typed_data<float>()[i] = x[i];
          out[1].typed_data<float>()[i] = -x[i];
        }
      },
      std::pair(ts::ShapeDtypeStruct{{4}, ts::float32, std::nullopt}, ts::ShapeDtypeStruct{{4}, ts::float32, std::nullopt}),
      {.sharding_rule = "i -> i, i"});
  const Array v = ts::array(std::vector<float>{1, -2, 3, 4});
  auto [p, n] = ts::jit([&](const Array& v) { return two(v); })(v);
  CHECK(ts::array_equal(p, v).item<bool>());
  CHECK(ts::array_equal(n, -v).item<bool>());
  // vmap: one call per element, or one call on the batch (a leading batch dim).
  const Array xs = ts::reshape(ts::arange(0.0, 12.0, 1.0, ts::float32), {3, 4});
  std::vector<std::vector<std::int64_t>> seen;
  auto rec = [&](std::span<const Buf> in, std::span<Buf> out) {
    seen.push_back(in[0].shape());
    affine(in, out);
  };
  const ts::ShapeDtypeStruct r4{{4}, ts::float32, std::nullopt};
  for (const char* method : {"sequential", "sequential_unrolled", "expand_dims", "broadcast_all"}) {
    CAPTURE(method);
    seen.clear();
    auto c = ts::ffi::call(rec, r4, {.sharding_rule = "i -> i", .vmap_method = method});
    CHECK(ts::array_equal(ts::vmap([&](const Array& x) { return c(x); })(xs), xs * 2.f + 1.f).item<bool>());
    const bool one_call = std::string(method) == "expand_dims" || std::string(method) == "broadcast_all";
    CHECK(seen.size() == (one_call ? 1u : 3u));
    CHECK(seen.at(0) == (one_call ? std::vector<std::int64_t>{3, 4} : std::vector<std::int64_t>{4}));
  }
  auto none = ts::ffi::call(affine, r4, {.sharding_rule = "i -> i"});
  CHECK_THROWS_AS(ts::vmap([&](const Array& x) { return none(x); })(xs), ts::NotImplementedError);
  // No derivative of its own; one through custom_vjp: d/dx sum(f(x)^2) = 2 f(x) f'(x) = 4 (2x + 1).
  CHECK_THROWS_AS(ts::grad([&](const Array& x) { return ts::sum(none(x)); })(v), ts::TypeError);
  auto f = ts::custom_vjp([&](const Array& x) { return none(x); },
                          [&](const Array& x) { return std::pair(none(x), std::tuple<>{}); },
                          [](std::tuple<>, const Array& g) { return g * 2.f; });
  const Array g = ts::jit(ts::grad([&](const Array& x) { return ts::sum(f(x) * f(x)); }))(v);
  CHECK(ts::allclose(g, (v * 2.f + 1.f) * 4.f).item<bool>());
}

TEST_CASE("ffi::call: a kernel that throws is a ts::Error naming it, and no device hangs") {
  const int k = std::min(8, ts::device_count());
  const ts::Mesh mesh = mesh_of(k, 1);
  auto bad = ts::ffi::call(
      [](std::span<const Buf> in, std::span<Buf>) {
        if (in[0].device() == 0 || in[0].device() == -1) throw std::runtime_error("block out of range");
      },
      ts::ShapeDtypeStruct{{16}, ts::float32, std::nullopt}, {.sharding_rule = "i -> i", .name = "my_kernel"});
  const Array x = ts::device_put(ts::ones({16}), ts::NamedSharding(mesh, P("x")));
  // A sum after it: the other devices wait in an all-reduce for device 0.
  auto f = ts::jit([&](const Array& x) { return ts::sum(bad(x)); });
  try {
    (void)f(x).item<float>();
    FAIL("no error");
  } catch (const ts::Error& e) {
    CHECK(has(e.what(), "my_kernel"));
    CHECK(has(e.what(), "block out of range"));
    CHECK(has(e.what(), "device 0"));
  }
  // The devices are free: the next program runs.
  CHECK(ts::jit([](const Array& x) { return ts::sum(x); })(x).item<float>() == 16.f);
}

TEST_CASE("ffi::call: the sharding rule's errors") {
  const Array a = iota2(4, 3), b = iota2(3, 2);
  const ts::ShapeDtypeStruct r{{4, 2}, ts::float32, std::nullopt};
  auto err = [&](const std::string& rule, std::vector<std::string> rep, const char* what) {
    CAPTURE(rule);
    try {
      (void)ts::ffi::call(gemm, r, {.sharding_rule = rule, .need_replication = rep})(a, b);
      FAIL("no error");
    } catch (const ts::ValueError& e) {
      CHECK(has(e.what(), what));
    }
  };
  err("i k, k j", {}, "needs one \"->\"");
  err("i k -> i j", {}, "names 1 operands, the call has 2");
  err("i k, k -> i j", {}, "rank 2");
  err("i k, j j -> i j", {}, "factor 'j' is 3 long elsewhere but 2");
  err("i k, k j -> i z", {}, "factor 'z' of result 0 is in no operand");
  err("i k, k j -> i j", {"q"}, "need_replication names 'q'");
  err("i k, k j -> i j, i", {}, "names 2 results");
  CHECK(ts::allclose(ts::ffi::call(gemm, r, {.sharding_rule = "i k, k j -> i j"})(a, b), ts::matmul(a, b)).item<bool>());
}

TEST_CASE("pure_callback: a host function of whole arrays, under jit, sharded, vmapped, against the interpreter") {
  // The host's sin and cos of x, and a scalar argument passed as it is.
  auto host = [](const Array& x, double scale) {
    std::vector<float> v = x.to_vector<float>(), s, c;
    for (float e : v) s.push_back(float(std::sin(e) * scale)), c.push_back(float(std::cos(e)));
    return std::pair(ts::array(s, x.shape()), ts::array(c, x.shape()));
  };
  auto f = [&](const Array& x) {
    const ts::ShapeDtypeStruct r{x.shape(), ts::float32, std::nullopt};
    return ts::pure_callback(host, std::pair(r, r), x, 2.0, ts::PureCallbackOptions{.vmap_method = "sequential"});
  };
  const int max_devices = std::min(8, ts::device_count());
  for (std::int64_t n : {8, 7}) {
    const Array xh = ts::arange(0.0, double(n), 1.0, ts::float32) * 0.5f;
    const auto want = tessel::testing::interpret_fn(
        [&](const std::vector<Array>& v) {
          auto [s, c] = f(v[0]);
          return std::vector{s, c};
        },
        {xh});
    for (int k = 1; k <= max_devices; ++k) {
      CAPTURE(n);
      CAPTURE(k);
      const ts::Mesh mesh = mesh_of(k, 1);
      const Array x = ts::device_put(xh, ts::NamedSharding(mesh, P("x")));
      auto [s, c] = ts::jit([&](const Array& x) {
        auto [s, c] = f(x);
        return std::pair(s + 1.f, c);
      })(x);
      CHECK(tessel::testing::compare_arrays(tessel::testing::host_of(s - 1.f), want[0], 1e-6, 1e-6) == "");
      CHECK(tessel::testing::compare_arrays(tessel::testing::host_of(c), want[1], 0, 0) == "");
      CHECK(ts::allclose(c, ts::cos(xh), 1e-6, 1e-6).item<bool>());
    }
    // Eagerly.
    CHECK(ts::allclose(f(xh).first, ts::sin(xh) * 2.f, 1e-6, 1e-6).item<bool>());
  }
  // vmap methods: expand_dims gives the function the batch.
  const Array xs = ts::reshape(ts::arange(0.0, 6.0, 1.0, ts::float32), {2, 3});
  std::vector<std::vector<std::int64_t>> shapes;
  auto twice = [&](const Array& x) {
    shapes.push_back(x.shape());
    std::vector<float> v = x.to_vector<float>();
    for (auto& e : v) e *= 2;
    return ts::array(v, x.shape());
  };
  for (const char* m : {"sequential", "expand_dims", "broadcast_all"}) {
    CAPTURE(m);
    shapes.clear();
    auto g = ts::vmap([&](const Array& x) {
      return ts::pure_callback(twice, ts::ShapeDtypeStruct{{3}, ts::float32, std::nullopt}, x,
                               ts::PureCallbackOptions{.vmap_method = m});
    });
    CHECK(ts::array_equal(g(xs), xs * 2.f).item<bool>());
    CHECK(shapes.at(0) == (std::string(m) == "sequential" ? std::vector<std::int64_t>{3} : std::vector<std::int64_t>{2, 3}));
  }
  CHECK_THROWS_AS(ts::vmap([&](const Array& x) {
                    return ts::pure_callback(twice, ts::ShapeDtypeStruct{{3}, ts::float32, std::nullopt}, x);
                  })(xs),
                  ts::NotImplementedError);
  // A result of the wrong shape is JAX's error, raised where the result is read.
  auto wrong = [&](const Array& x) {
    return ts::pure_callback([](const Array& x) { return ts::array(x.to_vector<float>()); },
                             ts::ShapeDtypeStruct{{2, 3}, ts::float32, std::nullopt}, x);
  };
  try {
    (void)ts::jit(wrong)(xs).to_vector<float>();
    FAIL("no error");
  } catch (const ts::Error& e) {
    CHECK(has(e.what(), "incorrect output shape for return value #0"));
  }
  CHECK_THROWS_AS(ts::grad([&](const Array& x) { return ts::sum(wrong(x)); })(xs), ts::TypeError);
}
