// .at[] updates of a box (integers, unit-step slices, Array indices, dynamic
// slices) are dynamic_update_slices: each equals the reference interpreter
// bit for bit on 1..8 devices, with the operand replicated or split along the
// updated dim (each device writes its own part of the window, no
// communication), even and uneven, in loops whose carry is updated in place,
// and out-of-bounds indices dropped as JAX's scatter drops them.
#include <doctest/doctest.h>

#include <random>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::P;
namespace lax = tessel::lax;

namespace {

using Fn = std::function<std::vector<ts::Array>(const std::vector<ts::Array>&)>;

// fn under jit against the interpreter's evaluation of its trace, each
// output compared by `same`.
void check_with(const Fn& fn, const std::vector<ts::Array>& args,
                const std::function<void(const ts::Array&, const ts::HostArray&)>& same) {
  const auto want = ts::testing::interpret_fn(fn, args);
  auto jitted = ts::jit([&](const std::vector<ts::Array>& xs) { return fn(xs); });
  const std::vector<ts::Array> got = jitted(args);
  REQUIRE(got.size() == want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    same(got[k], want[k]);
  }
}

// Bit for bit (each output), and so is every shard's own block.
void check_exact(const Fn& fn, const std::vector<ts::Array>& args) {
  check_with(fn, args, [](const ts::Array& got, const ts::HostArray& want) {
    CHECK(ts::testing::same_bits(ts::testing::host_of(got), want) == "");
    CHECK(ts::testing::shards_hold(got, want) == "");
  });
}

// The same within rounding (fused multiply-adds, transcendental
// polynomials, sums in another order): for bodies that compute.
void check_close(const Fn& fn, const std::vector<ts::Array>& args) {
  check_with(fn, args, [](const ts::Array& got, const ts::HostArray& want) {
    CHECK(ts::testing::compare_arrays(ts::testing::host_of(got), want, 2e-5, 1e-5) == "");
  });
}

ts::Mesh mesh_of(int n) {
  const auto all = ts::devices();
  return ts::Mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
}

std::string program_text(const Fn& fn, const std::vector<ts::Array>& args) {
  return ts::jit([&](const std::vector<ts::Array>& xs) { return fn(xs); }).lower(args).compile().as_text();
}

// check(xs) for x0's first `len` rows, replicated and split by rows over 1..8 devices.
void on_devices(const ts::Array& x0, std::initializer_list<std::int64_t> lens, const std::function<void(const ts::Array&)>& check) {
  for (int n = 1; n <= 8; ++n) {
    CAPTURE(n);
    const ts::Mesh mesh = mesh_of(n);
    for (std::int64_t len : lens) {
      CAPTURE(len);
      const ts::Array x = x0.index({ts::slice(0, len)});
      for (const ts::Array& xs : {x, ts::device_put(x, ts::NamedSharding(mesh, P("x")))}) check(xs);
    }
  }
}

}  // namespace

TEST_CASE("box updates equal the interpreter on 1..8 devices, split along the updated dim or not, in and out of loops") {
  std::mt19937 rng(11);
  int checked = 0;
  const ts::Array i_in = ts::array(std::int32_t(3)), i_neg = ts::array(std::int32_t(-2)),
                  i_out = ts::array(std::int32_t(9)), i_far = ts::array(std::int32_t(-20));
  for (int n = 1; n <= 8; ++n) {
    ts::Mesh mesh = mesh_of(n);
    for (std::int64_t rows : {8, 7}) {
      for (ts::DType t : {ts::DType::float32, ts::DType::int32, ts::DType::bfloat16, ts::DType::complex64}) {
        CAPTURE(n);
        CAPTURE(rows);
        CAPTURE(ts::dtype_name(t));
        const ts::Array x0 = ts::testing::random_array(rng, {rows, 5}, t);
        for (ts::Array x : {x0, ts::device_put(x0, ts::NamedSharding(mesh, P("x"))),
                            ts::device_put(x0, ts::NamedSharding(mesh, P(ts::None, "x")))}) {
          for (const ts::Array& i : {i_in, i_neg, i_out, i_far}) {
            CAPTURE(i.item<std::int32_t>());
            // One element, a row, a column; set, add, max; a dynamic window
            // (its start clamped); a chain of two updates.
            check_exact(
                [](const std::vector<ts::Array>& a) {
                  const ts::Array& x = a[0];
                  const ts::Array& i = a[1];
                  return std::vector<ts::Array>{
                      x.at({i, 2}).set(7),
                      x.at({i}).add(ts::ones({5}, x.dtype())),
                      ts::is_complex(x.dtype()) ? x.at({ts::all, i}).multiply(2) : x.at({ts::all, i}).max(1),
                      x.at({ts::slice(i, 3), ts::slice(1, 4)}).set(-1),
                      x.at({i, 0}).set(2).at({0, i}).set(3),
                  };
                },
                {x, i});
            ++checked;
          }
          // Loops: fori_loop writing row i % rows from the carry's own
          // previous row (a read of the operand before the write), a scan
          // whose body updates its carry and stacks a row of it, a
          // while_loop updating two places a step.
          check_exact(
              [rows](const std::vector<ts::Array>& a) {
                const ts::Array r = lax::fori_loop(0, 11, [rows](ts::Array i, ts::Array x) {
                  const ts::Array k = i % std::int32_t(rows);
                  return x.at({k}).set(x.index({k - 1}) * 2 + ts::ones({5}, x.dtype()));
                }, a[0]);
                auto [c, ys] = lax::scan(
                    [](ts::Array x, ts::Array i) {
                      ts::Array y = x.at({i, ts::slice(1, 3)}).set(i.astype(x.dtype()));
                      return std::pair{y, y.index({i})};
                    },
                    a[0], ts::arange(std::int64_t(-1), std::int64_t(8), std::int64_t(1), ts::DType::int32));
                using C = std::pair<ts::Array, ts::Array>;
                const ts::Array w = lax::while_loop(
                                        [](const C& c) { return c.second < 6; },
                                        [](const C& c) {
                                          return C(c.first.at({c.second, 0}).add(1).at({0, c.second % 5}).set(9),
                                                   c.second + 1);
                                        },
                                        C(a[0], ts::array(std::int32_t(-1))))
                                        .first;
                return std::vector<ts::Array>{r, c, ys, w};
              },
              {x});
          ++checked;
        }
      }
    }
  }
  CHECK(checked == 8 * 2 * 4 * 3 * 5);
}

TEST_CASE("a loop's carry updated at an index stays one buffer: the compiled loop says so, and it is still right") {
  const ts::Array x = ts::arange(std::int64_t(0), std::int64_t(4096), std::int64_t(1), ts::DType::float32);
  const Fn loop = [](const std::vector<ts::Array>& a) {
    return std::vector<ts::Array>{lax::fori_loop(0, 100, [](ts::Array i, ts::Array x) {
      return x.at({i * 7}).set(i.astype(ts::DType::float32) - 1).at({i * 7 + 1}).add(0.5);
    }, a[0])};
  };
  const std::string text = program_text(loop, {x});
  CAPTURE(text);
  CHECK(text.find("update f32[4096] window=f32[1]") != std::string::npos);
  // Carry 1, the array (the counter, carry 0, is written over too: its
  // increment waits for its other readers, codegen/schedule.cpp).
  CHECK(text.find("carries updated in place: 0 1") != std::string::npos);
  check_exact(loop, {x});
  // The carry read after the update (its old value, by a later reader): not
  // in place, and right.
  const Fn late = [](const std::vector<ts::Array>& a) {
    using C = std::pair<ts::Array, ts::Array>;
    auto r = lax::fori_loop(0, 10, [](ts::Array i, C c) {
      return C(c.first.at({i}).set(100), c.second + ts::sum(c.first));
    }, C(a[0], ts::array(0.0f)));
    return std::vector<ts::Array>{r.first, r.second};
  };
  check_exact(late, {x});
}

TEST_CASE("a loop body's elementwise kernel writes its carry over itself: one buffer, the same bits") {
  // x <- x * 0.9 + g, and a second carry summed from the first: the kernel
  // reads the carry aligned, so the loop keeps it in one buffer.
  const ts::Array x = ts::arange(std::int64_t(0), std::int64_t(4099), std::int64_t(1), ts::DType::float32) * 0.01f;
  const ts::Array g = ts::cos(x);
  const Fn loop = [](const std::vector<ts::Array>& a) {
    using C = std::pair<ts::Array, ts::Array>;
    auto r = lax::fori_loop(0, 50, [&](ts::Array, C c) {
      return C(c.first * 0.9f + a[1] * ts::tanh(c.first), c.second + ts::sum(c.first));
    }, C(a[0], ts::array(0.0f)));
    return std::vector<ts::Array>{r.first, r.second};
  };
  const std::string text = program_text(loop, {x, g});
  CAPTURE(text);
  CHECK(text.find("carries updated in place: 0") != std::string::npos);
  check_close(loop, {x, g});
  // scan and while_loop likewise; a carry that is also read after its new
  // value is written (by the sum of the next carry) is not, and stays right.
  const Fn scan = [](const std::vector<ts::Array>& a) {
    auto [c, ys] = lax::scan([](ts::Array c, ts::Array x) {
      ts::Array n = ts::sin(c) + x;
      return std::make_pair(n, ts::sum(n));
    }, a[0], a[1].reshape({-1, 1}) * ts::ones({1, 4099}));
    return std::vector<ts::Array>{c, ys};
  };
  // A temporary of the body read last by a loop kernel: the kernel writes
  // over it (tanh(c @ w) + 1 over the product), and the loop stays right.
  const Fn dense = [](const std::vector<ts::Array>& a) {
    return std::vector<ts::Array>{
        lax::fori_loop(0, 3, [&](ts::Array, ts::Array c) { return ts::tanh(ts::matmul(c, a[1])) + 1.0f; }, a[0])};
  };
  const ts::Array c0 = ts::sin(ts::arange(0.0f, 48.0f).reshape({6, 8}));
  const ts::Array w = ts::cos(ts::arange(0.0f, 64.0f).reshape({8, 8})) * 0.3f;
  const std::string dense_text = program_text(dense, {c0, w});
  CAPTURE(dense_text);
  CHECK(dense_text.find("root=add reads=1 items=6 over read 0") != std::string::npos);
  check_close(dense, {c0, w});
  const ts::Array small = ts::arange(std::int64_t(0), std::int64_t(6), std::int64_t(1), ts::DType::float32);
  CHECK(program_text(scan, {x, small}).find("carries updated in place: 0") != std::string::npos);
  check_close(scan, {x, small});
}

TEST_CASE("box updates: gradients and vmap against the interpreter and closed forms") {
  const ts::Array x = ts::arange(12.0).reshape({3, 4});
  const ts::Array i = ts::array(std::int32_t(1));
  // d/dx sum(x.at[i].set(v) * w): w outside row i, 0 on it; d/dv: w's row i summed over its broadcast.
  auto f = [&](ts::Array x, ts::Array v) { return ts::sum(x.at({i}).set(v) * ts::arange(12.0).reshape({3, 4})); };
  const ts::Array gx = ts::grad(f, 0)(x, ts::array(2.0)), gv = ts::grad(f, 1)(x, ts::array(2.0));
  std::vector<double> want(12);
  for (int k = 0; k < 12; ++k) want[size_t(k)] = k / 4 == 1 ? 0.0 : double(k);
  CHECK(gx.to_vector<double>() == want);
  CHECK(gv.item<double>() == 4 + 5 + 6 + 7);
  // Batched indices: each example's own row.
  const ts::Array idx = ts::array(std::vector<std::int32_t>{2, 0, -1, 5});
  const ts::Array xs = ts::broadcast_to(x, {4, 3, 4});
  ts::testing::check(
      [](const std::vector<ts::Array>& a) {
        return ts::vmap([](ts::Array x, ts::Array k) { return x.at({k}).add(1.0); })(a[0], a[1]);
      },
      {xs, idx}, false);
}

TEST_CASE("scatter at an index array writes over its operand in place: a loop's carry, a dead temporary, a donated argument") {
  // Indices with a duplicate, a negative one and two out of bounds (dropped,
  // as JAX's scatter drops them).
  const ts::Array idx = ts::array(std::vector<std::int32_t>{5, -3, 4100, 5, 0, 77, -5000});
  const ts::Array v = ts::arange(1.0f, 8.0f);
  const Fn loop = [](const std::vector<ts::Array>& a) {
    const ts::Array idx = a[1], v = a[2];
    const ts::Array r = lax::fori_loop(0, 40, [&](ts::Array i, ts::Array x) {
      // The carry's scatters (add, then max at shifted indices), and a
      // scatter into a temporary of the body read by nothing else.
      const ts::Array y = x.at({idx + i}).add(v * i.astype(ts::DType::float32)).at({idx * 2}).max(v * 9.0f);
      return y + (y * 0.5f).at({idx}).set(v).index({ts::slice(0, 1)}).sum();
    }, a[0]);
    return std::vector<ts::Array>{r};
  };
  const ts::Array x0 = ts::arange(std::int64_t(0), std::int64_t(4096), std::int64_t(1), ts::DType::float32) * 0.25f;
  const std::string text = program_text(loop, {x0, idx, v});
  CAPTURE(text);
  CHECK(text.find("scatter-add float32[4096] at int32[7]") != std::string::npos);
  CHECK(text.find("carries updated in place: 0 1") != std::string::npos);
  // The carry's two scatters in a chain: its plain update (no elementwise
  // kernel that reads the carry whole) stays one buffer.
  const Fn chain = [](const std::vector<ts::Array>& a) {
    const ts::Array idx = a[1], v = a[2];
    return std::vector<ts::Array>{lax::fori_loop(0, 40, [&](ts::Array i, ts::Array x) {
      return x.at({idx + i}).add(v).at({idx * 3 - i}).min(-v);
    }, a[0])};
  };
  const std::string chain_text = program_text(chain, {x0, idx, v});
  CAPTURE(chain_text);
  CHECK(chain_text.find("carries updated in place: 0 1") != std::string::npos);
  on_devices(x0, {4096, 4093}, [&](const ts::Array& xs) {
    check_exact(chain, {xs, idx, v});
    check_close(loop, {xs, idx, v});
  });
  // The operand also its own updates (x.at[perm].set(x)): never in place.
  const Fn perm = [](const std::vector<ts::Array>& a) {
    return std::vector<ts::Array>{lax::fori_loop(0, 3, [&](ts::Array, ts::Array x) {
      return (x + 1.0f).at({a[1]}).set(x + 1.0f);
    }, a[0])};
  };
  check_exact(perm, {ts::arange(0.0f, 6.0f), ts::array(std::vector<std::int32_t>{5, 0, 1, 2, 3, 4})});
  // A donated argument at the top level: the scatter writes into its block.
  const auto add = [](ts::Array x, ts::Array i, ts::Array u) { return x.at({i}).add(u); };
  const auto want = ts::testing::interpret_fn(
      [&](const std::vector<ts::Array>& a) { return std::vector<ts::Array>{add(a[0], a[1], a[2])}; }, {x0 * 1.0f, idx, v});
  ts::Array p = x0 * 1.0f;
  const std::uintptr_t block = p.addressable_shards().at(0).unsafe_buffer_pointer();
  const ts::Array out = ts::jit(add, {.donate_argnums = {0}})(p, idx, v);
  CHECK(p.is_deleted());
  CHECK(ts::testing::same_bits(ts::testing::host_of(out), want[0]) == "");
  CHECK(out.addressable_shards().at(0).unsafe_buffer_pointer() == block);
}

TEST_CASE("a top-level kernel writes over a dead temporary; one the devices share is copied first, never changed under them") {
  // cumsum of a replicated block runs once and the devices share its result;
  // the kernel t * 2 + axis_index then differs per device and writes over t.
  const std::int64_t len = 1000;
  std::vector<float> host(static_cast<std::size_t>(len));
  for (std::int64_t k = 0; k < len; ++k) host[std::size_t(k)] = float(k % 7) - 3.0f;
  const ts::Array x = ts::array(host);
  for (int n = 1; n <= 8; ++n) {
    CAPTURE(n);
    const ts::Mesh mesh = mesh_of(n);
    auto body = [](ts::Array b) {
      const ts::Array t = ts::cumsum(b);
      return ts::cumsum(t * 2.0f + ts::axis_index("x").astype(ts::DType::float32));
    };
    auto f = ts::jit([&](ts::Array a) { return ts::shard_map(body, mesh, P(), P("x"))(a); });
    const std::string text = f.lower(x).compile().as_text();
    CAPTURE(text);
    CHECK(text.find("over read 0") != std::string::npos);
    for (int rep = 0; rep < 3; ++rep) {
      const std::vector<float> got = f(ts::device_put(x, ts::NamedSharding(mesh, P()))).to_vector<float>();
      REQUIRE(got.size() == std::size_t(n * len));
      std::vector<float> want;
      for (int i = 0; i < n; ++i) {
        float t = 0, u = 0;
        for (std::int64_t k = 0; k < len; ++k) {
          t += host[std::size_t(k)];
          u += t * 2.0f + float(i);
          want.push_back(u);
        }
      }
      CHECK(got == want);
    }
  }
}

TEST_CASE("updates at several index arrays write in place: a reshape reads its operand's bytes where they lie") {
  // Rows and columns together (a duplicate, negatives, a row out of bounds):
  // one scatter into x flattened, whose reshapes are bitcasts of the carry.
  const ts::Array rows = ts::array(std::vector<std::int32_t>{1, -1, 40, 1, 30});
  const ts::Array cols = ts::array(std::vector<std::int32_t>{0, 2, -3, 0, 1});
  const ts::Array v = ts::arange(1.0f, 6.0f);
  const Fn loop = [](const std::vector<ts::Array>& a) {
    return std::vector<ts::Array>{lax::fori_loop(0, 30, [&](ts::Array i, ts::Array x) {
      return x.at({a[1], a[2] + i % 3}).add(a[3]).at({a[1] * 2, 1}).set(-a[3]);
    }, a[0])};
  };
  const ts::Array x0 = ts::arange(0.0f, 32.0f * 6.0f).reshape({32, 6});
  const std::string text = program_text(loop, {x0, rows, cols, v});
  CAPTURE(text);
  CHECK(text.find("bitcast f32[192] of f32[32,6]") != std::string::npos);
  CHECK(text.find("carries updated in place: 0 1") != std::string::npos);
  // Reshapes returned beside their operand, of a parameter, of a
  // temporary, and read by a scatter and a dot: each right.
  const Fn shapes = [](const std::vector<ts::Array>& a) {
    const ts::Array t = ts::cumsum(a[0], 0);
    return std::vector<ts::Array>{a[0].reshape({-1}), t, t.reshape({6, -1}), ts::cumsum(t.reshape({-1}), 0),
                                  ts::matmul(ts::transpose(t.reshape({-1, 12})), t.reshape({-1, 12})),
                                  (t * 2.0f).reshape({-1}).at({a[1]}).add(1.0f)};
  };
  on_devices(x0, {32, 30}, [&](const ts::Array& xs) {
    check_exact(loop, {xs, rows, cols, v});
    check_close(shapes, {xs, rows});
  });
  // The argument stays what it was after a call returning its reshape.
  const ts::Array p = x0 * 1.0f;
  const ts::Array flat = ts::jit([](ts::Array a) { return a.reshape({-1}); })(p);
  CHECK(flat.to_vector<float>() == x0.reshape({-1}).to_vector<float>());
  CHECK(p.to_vector<float>() == x0.reshape({-1}).to_vector<float>());
}

TEST_CASE("writing over a slot: never while the step reads it as another value too, never into a returned bitcast") {
  // A scatter whose updates are a bitcast of its operand: the updates' slot
  // is the operand's, so the scatter copies (an update of 1 read the
  // element already changed, [a+d, b+a, c+b, d+c] became [.., c+a+b, ..]).
  const ts::Array idx = ts::array(std::vector<std::int32_t>{1, 2, 3, 0}, {2, 2});
  const Fn self = [](const std::vector<ts::Array>& a) {
    const ts::Array t = ts::exp(a[0]);
    const ts::Array in_loop = lax::fori_loop(0, 3, [&](ts::Array, ts::Array c) {
      const ts::Array u = ts::sin(c);
      return u.at({a[1]}).add(u.reshape({2, 2}));
    }, a[0]);
    return std::vector<ts::Array>{t.at({a[1]}).add(t.reshape({2, 2})) * 2.0f, in_loop};
  };
  check_close(self, {ts::arange(0.0f, 4.0f) * 0.3f, idx});
  // A broadcast computed once for every device (it reads nothing), a
  // scatter of each device's own values over it, returned as a reshape: each
  // device's result its own (a returned bitcast of a slot written over is a copy).
  const std::int64_t len = 8;
  for (int n = 2; n <= 8; ++n) {
    CAPTURE(n);
    const ts::Mesh mesh = mesh_of(n);
    const ts::Array i = ts::array(std::vector<std::int32_t>{3, 5});
    auto body = [&](ts::Array xb) { return ts::zeros({len}).at({i}).add(xb * ts::ones({2})).reshape({2, 4}); };
    auto f = ts::jit([&](ts::Array x) { return ts::shard_map(body, mesh, P("x"), P("x"))(x); });
    const ts::Array x = ts::arange(1.0f, float(n + 1));
    const std::vector<float> got = f(ts::device_put(x, ts::NamedSharding(mesh, P("x")))).to_vector<float>();
    std::vector<float> want;
    for (int d = 0; d < n; ++d)
      for (std::int64_t k = 0; k < len; ++k) want.push_back(k == 3 || k == 5 ? float(d + 1) : 0.0f);
    CHECK(got == want);
  }
}
