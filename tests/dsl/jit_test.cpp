// Tracing and jit: pytrees, static values, caching, errors, lowering text,
// the eager cache, dumps, device placement rules and their errors.
#include <complex>
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <thread>

#include "dsl/src/pipeline.hpp"
#include "tests/common/golden.hpp"
#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::P;

namespace demo {
struct Params {
  BOOST_HANA_DEFINE_STRUCT(Params, (ts::Array, w), (ts::Array, b));
};
}  // namespace demo

TEST_CASE("jit traces once per signature and runs pytrees in and out") {
  std::atomic<int> traces{0};
  auto f = ts::jit([&](const std::pair<ts::Array, ts::Array>& p, const std::map<std::string, ts::Array>& m) {
    ++traces;
    return std::make_tuple(p.first * p.second, m.at("k") + 1.0, std::vector<ts::Array>{p.first});
  });
  auto a = ts::arange(4.0), b = ts::full({4}, 2.0f);
  std::map<std::string, ts::Array> m{{"k", ts::zeros({2})}};
  auto [x, y, z] = f(std::make_pair(a, b), m);
  CHECK(x.to_vector<float>() == std::vector<float>{0, 2, 4, 6});
  CHECK(y.to_vector<float>() == std::vector<float>{1, 1});
  CHECK(z[0].to_vector<float>() == a.to_vector<float>());
  f(std::make_pair(b, a), m);
  CHECK(traces == 1);
  f(std::make_pair(ts::arange(5.0), ts::arange(5.0)), m);  // new shape: a new trace
  CHECK(traces == 2);

  auto g = ts::jit([](const demo::Params& p, ts::Array x) { return demo::Params{p.w * x, p.b + x}; });
  auto r = g(demo::Params{ts::ones({3}), ts::zeros({3})}, ts::arange(3.0));
  CHECK(r.w.to_vector<float>() == std::vector<float>{0, 1, 2});
}

TEST_CASE("C++ scalars and static_argnums are compile-time values") {
  std::atomic<int> traces{0};
  auto f = ts::jit([&](ts::Array x, int n, double scale) {
    ++traces;
    ts::Array r = x;
    for (int i = 1; i < n; ++i) r = r * x;  // a loop unrolled at trace time
    return r * scale;
  });
  auto x = ts::arange(4.0);
  CHECK(f(x, 3, 1.0).to_vector<float>() == std::vector<float>{0, 1, 8, 27});
  CHECK(f(x, 2, 0.5).to_vector<float>() == std::vector<float>{0, 0.5f, 2, 4.5f});
  CHECK(f(x, 3, 1.0).to_vector<float>() == std::vector<float>{0, 1, 8, 27});
  CHECK(traces == 2);
  auto g = ts::jit([](ts::Array x, std::string mode) { return mode == "double" ? x * 2.0 : x; }, {.static_argnums = {1}});
  CHECK(g(x, std::string("double")).to_vector<float>() == std::vector<float>{0, 2, 4, 6});
}

TEST_CASE("a traced value used as a concrete one is a ConcretizationError") {
  auto f = ts::jit([](ts::Array x) {
    if (x.sum().item<float>() > 0) return x;  // control flow on a traced value
    return -x;
  });
  CHECK_THROWS_AS(f(ts::arange(3.0)), ts::ConcretizationError);
  ts::Array leaked;
  auto g = ts::jit([&](ts::Array x) {
    leaked = x * 2;
    return x;
  });
  g(ts::arange(3.0));
  CHECK(leaked.is_tracer());
  CHECK_THROWS_AS(leaked + 1.0, ts::ConcretizationError);
  CHECK(ts::to_string(leaked) == "Traced<ShapedArray(float32[3])>");
}

TEST_CASE("closed-over arrays become inputs, nested jit traces through") {
  auto w = ts::arange(3.0) + 1.0;
  auto inner = ts::jit([&](ts::Array x) { return x * w; });
  auto outer = ts::jit([&](ts::Array x) { return inner(x) + inner(x * 2.0); });
  CHECK(outer(ts::ones({3})).to_vector<float>() == std::vector<float>{3, 6, 9});
}

TEST_CASE("lower, compile, as_text, cost and memory analysis") {
  auto f = ts::jit([](ts::Array a, ts::Array b) { return 2.0f * ts::sin(ts::dot(a, b)) + 1.0f; }, {.name = "layer"});
  auto a = ts::ones({8, 16}), b = ts::ones({16, 4});
  auto lowered = f.lower(a, b);
  std::string lt = lowered.as_text();
  CHECK(lt.find("func layer") != std::string::npos);
  CHECK(lt.find("dot(") != std::string::npos);
  CHECK(lt.find("sharding=P(") != std::string::npos);
  auto compiled = lowered.compile();
  std::string ct = compiled.as_text();
  CHECK(ct.find("(gemm ") != std::string::npos);
  CHECK(ct.find("fusion") != std::string::npos);
  auto cost = compiled.cost_analysis();
  CHECK(cost.at("flops") >= 2.0 * 8 * 16 * 4);
  CHECK(cost.at("transcendentals") == 32);
  auto mem = compiled.memory_analysis();
  CHECK(mem.argument_size_in_bytes == (8 * 16 + 16 * 4) * 4);
  CHECK(mem.output_size_in_bytes == 8 * 4 * 4);
  ts::Array r = compiled(a, b);
  CHECK(r.to_vector<float>()[0] == doctest::Approx(2 * std::sin(16.0) + 1).epsilon(1e-5));
}

TEST_CASE("eager ops compile once per op and signature") {
  auto x = ts::arange(16.0);
  ts::cos(x).block_until_ready();
  auto before = ts::detail::compile_count();
  for (int i = 0; i < 5; ++i) ts::cos(x).block_until_ready();
  CHECK(ts::detail::compile_count() == before);
  ts::cos(ts::arange(17.0)).block_until_ready();
  CHECK(ts::detail::compile_count() == before + 1);
}

TEST_CASE("TESSEL_DUMP_DIR writes every pass") {
  auto dir = std::filesystem::temp_directory_path() / "tessel_dump_test";
  std::filesystem::remove_all(dir);
  ts::config().dump_dir = dir.string();
  ts::jit([](ts::Array x) { return ts::exp(x) * 3.0; }, {.name = "dumped"})(ts::arange(5.0));
  ts::config().dump_dir.clear();
  int files = 0;
  bool partitioned = false;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    partitioned = partitioned || e.path().string().find("dumped.4-partition.txt") != std::string::npos;
  }
  // trace, rewrite-for-mesh, propagate, partition, codegen's fold-transposes,
  // plan-fusion, schedule-for-memory and sink-collectives, compile (no calls
  // to inline, no complex values to expand)
  CHECK(files == 9);
  CHECK(partitioned);
  std::filesystem::remove_all(dir);
  // A program of complex values: codegen's expansion into real pairs too.
  ts::config().dump_dir = dir.string();
  ts::jit([](ts::Array x) { return x * x; }, {.name = "dumped_complex"})(ts::array(std::vector<std::complex<float>>{{1, 2}, {3, -4}}));
  ts::config().dump_dir.clear();
  bool expanded = false;
  for (auto& e : std::filesystem::directory_iterator(dir))
    expanded = expanded || e.path().string().find("dumped_complex.5-expand-complex.txt") != std::string::npos;
  CHECK(expanded);
  std::filesystem::remove_all(dir);
}

TEST_CASE("committed arrays on different devices: DeviceMismatchError with JAX's message") {
  auto x = ts::arange(24);
  auto devs = ts::devices();
  std::vector<ts::Device> first(devs.begin(), devs.begin() + 4), last(devs.begin() + 4, devs.end());
  auto y = ts::device_put(x, ts::NamedSharding(ts::Mesh(first, "x"), P("x")));
  auto z = ts::device_put(x, ts::NamedSharding(ts::Mesh(last, "x"), P("x")));
  CHECK_THROWS_WITH_AS(y + z,
                       "Received incompatible devices for jitted computation. Got argument x1 of tessel.add with shape "
                       "int32[24] and device ids [0, 1, 2, 3] on platform cpu and argument x2 of tessel.add with shape "
                       "int32[24] and device ids [4, 5, 6, 7] on platform cpu",
                       ts::DeviceMismatchError);
  std::vector<ts::Device> perm;
  for (int i : {0, 1, 2, 3, 6, 7, 4, 5}) perm.push_back(devs[i]);
  auto p1 = ts::device_put(x, ts::NamedSharding(ts::Mesh(devs, "x"), P("x")));
  auto p2 = ts::device_put(x, ts::NamedSharding(ts::Mesh(perm, "x"), P("x")));
  CHECK_THROWS_WITH_AS(p1 + p2, doctest::Contains("device ids [0, 1, 2, 3, 6, 7, 4, 5] on platform cpu"),
                       ts::DeviceMismatchError);
  // Uncommitted arrays move silently.
  CHECK((y + ts::ones_like(y)).committed());
  CHECK((y + ts::arange(24)).to_vector<int>()[23] == 46);
  CHECK((y + ts::arange(y.size()).reshape(y.shape())).sharding() == y.sharding());
}

TEST_CASE("outputs of committed inputs are committed; of uncommitted ones, not") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto c = ts::device_put(ts::ones({8, 4}), ts::NamedSharding(mesh, P("a", "b")));
  CHECK(ts::sin(c).committed());
  CHECK_FALSE(ts::sin(ts::ones({8, 4})).committed());
  CHECK(ts::sin(ts::ones({8, 4})).devices() == std::set<ts::Device>{ts::Device(0)});
}

TEST_CASE("in_shardings and out_shardings") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto f = ts::jit([](ts::Array x) { return x * 2.0; },
                   {.in_shardings = {ts::NamedSharding(mesh, P("a"))}, .out_shardings = {ts::NamedSharding(mesh, P(ts::None, "b"))}});
  auto y = f(ts::arange(32.0).reshape({8, 4}));
  CHECK(y.sharding() == ts::Sharding(ts::NamedSharding(mesh, P(ts::None, "b"))));
  CHECK(y.committed());
  CHECK(y.to_vector<float>()[31] == 62);
}

TEST_CASE("programs launched from many host threads at once, with collectives, finish") {
  auto mesh = ts::make_mesh({8}, {"x"});
  auto a = ts::device_put(ts::ones({64, 64}), ts::NamedSharding(mesh, P("x")));
  auto f = ts::jit([](ts::Array x) { return ts::sum(x, 0) + ts::sum(x.T(), 1); });
  auto g = ts::jit([](ts::Array x) { return ts::dot(x.T(), x); });
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto r = (t % 2 ? f(a) : g(a)).to_vector<float>();
        if (r[0] == (t % 2 ? 128.0f : 64.0f)) ++ok;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(ok == 40);
}

TEST_CASE("explain_sharding names what chose every value's sharding") {
  auto mesh = ts::make_mesh({4, 2}, {"x", "y"});
  auto xs = ts::device_put(ts::ones({64, 64}), ts::NamedSharding(mesh, P("x", "y")));
  auto ws = ts::device_put(ts::ones({64, 16}), ts::NamedSharding(mesh, P("y", ts::None)));
  auto h = ts::jit([&](ts::Array x, ts::Array w) {
    auto hidden = ts::with_sharding_constraint(ts::dot(x, w), ts::NamedSharding(mesh, P("x", ts::None)));
    return ts::tanh(hidden) * 2.0;
  });
  const std::string text = h.lower(xs, ws).explain_sharding();
  auto line_with = [&](const std::string& what) {
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);)
      if (l.find(what) != std::string::npos) return l;
    FAIL("no line with '" << what << "' in\n" << text);
    return std::string();
  };
  CHECK(line_with("parameter(0)").find("sharding=P('x', 'y')  // input 0: its own sharding") != std::string::npos);
  CHECK(line_with("parameter(1)").find("// input 1: its own sharding") != std::string::npos);
  CHECK(line_with(" dot(").find("sharding=P('x', None)  // dot's rule, from its operands") != std::string::npos);
  CHECK(line_with("sharding-constraint(").find("// with_sharding_constraint") != std::string::npos);
  CHECK(line_with(" tanh(").find("// tanh's rule, from its operands") != std::string::npos);
  // The broadcast scalar got its sharding back from the multiply that uses it, which the note names.
  const std::string mul = line_with(" multiply(");
  const std::string mul_id = mul.substr(mul.find('%'), mul.find(' ', mul.find('%')) - mul.find('%'));
  CHECK(line_with(" broadcast(").find("// multiply's rule, back from its user: operand 1 of " + mul_id) !=
        std::string::npos);
  CHECK(text.find("// output 0 (" + mul_id + ") is delivered as NamedSharding(mesh=Mesh('x': 4, 'y': 2), spec=P('x'))") !=
        std::string::npos);
  // A value no sharding reaches is replicated, and says so.
  auto k = ts::jit([](ts::Array x) { return std::make_pair(x + 1.0, ts::zeros({3}) + 1.0); });
  CHECK(k.lower(xs).explain_sharding().find("no sharding reached it: replicated") != std::string::npos);
}

TEST_CASE("all-reduce and reduce-scatter of many cache tiles, every op and device count") {
  // 65592 / 8 = 8199: each member reduces two 32 KiB tiles of float32, the last one ragged.
  const std::int64_t rows = 8, cols = 65592;
  std::vector<std::int32_t> v(rows * cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) v[i] = std::int32_t((i * 7919) % 1009) - 500;
  std::vector<double> sum(cols, 0), mx(cols, -1e9);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) sum[c] += v[r * cols + c], mx[c] = std::max<double>(mx[c], v[r * cols + c]);
  for (int d = 1; d <= 8; ++d) {
    CAPTURE(d);
    auto all_devices = ts::devices();
    std::vector<ts::Device> devs(all_devices.begin(), all_devices.begin() + d);
    ts::Mesh mesh(devs, "x");
    for (ts::DType dt : {ts::float32, ts::int32}) {
      auto x = ts::device_put(ts::astype(ts::array(v, {rows, cols}), dt), ts::NamedSharding(mesh, P("x", ts::None)));
      auto all_sum = ts::jit([](ts::Array a) { return ts::sum(a, 0); });
      auto all_max = ts::jit([](ts::Array a) { return ts::max(a, 0); });
      auto scattered = ts::jit([&](ts::Array a) {
        return ts::with_sharding_constraint(ts::sum(a, 0), ts::NamedSharding(mesh, P("x")));
      });
      CHECK(all_sum(x).to_vector<double>() == sum);
      CHECK(all_max(x).to_vector<double>() == mx);
      CHECK(scattered(x).to_vector<double>() == sum);
      if (d > 1 && rows % d == 0 && cols % d == 0) {
        CHECK(all_sum.lower(x).compile().as_text().find("all-reduce(") != std::string::npos);
        CHECK(scattered.lower(x).compile().as_text().find("reduce-scatter(") != std::string::npos);
      }
      if (d == 1) {
        // Over a mesh of one device a partial sum is whole, and a gather
        // would copy: no collective at all.
        auto gathered = ts::jit([&](ts::Array a) { return ts::with_sharding_constraint(a * 2, ts::NamedSharding(mesh, P())); });
        CHECK(gathered(x).to_vector<double>() == (ts::astype(ts::array(v, {rows, cols}), dt) * 2).to_vector<double>());
        for (const std::string& text : {all_sum.lower(x).compile().as_text(), scattered.lower(x).compile().as_text(),
                                       gathered.lower(x).compile().as_text()}) {
          CHECK(text.find("all-reduce(") == std::string::npos);
          CHECK(text.find("reduce-scatter(") == std::string::npos);
          CHECK(text.find("all-gather(") == std::string::npos);
        }
      }
    }
  }
}

TEST_CASE("a tile of a broadcast is the broadcast at the tile's shape: no slice, no device index") {
  // x + b with x split by rows and b replicated: b's broadcast along the rows
  // is resharded to x's layout. Cut along the dims it broadcasts (new ones,
  // or size-1 ones), a tile is the same broadcast at the tile's shape; the
  // program neither slices nor reads the device's index (which kept devices
  // that hold the same rows from sharing work in lockstep runs). Uneven
  // rows are padded and sliced as before. Every device count and both.
  const std::int64_t cols = 6;
  std::vector<float> bs(cols), b1s(cols);
  for (std::int64_t j = 0; j < cols; ++j) bs[std::size_t(j)] = float(j) - 2.5f, b1s[std::size_t(j)] = 0.25f * float(j);
  for (int d = 1; d <= std::min(8, ts::device_count()); ++d) {
    CAPTURE(d);
    auto all_devices = ts::devices();
    ts::Mesh mesh(std::vector<ts::Device>(all_devices.begin(), all_devices.begin() + d), "x");
    for (std::int64_t rows : {std::int64_t(8), std::int64_t(8 * d), std::int64_t(7)}) {
      CAPTURE(rows);
      std::vector<float> xs(std::size_t(rows * cols));
      for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = float(int(i % 11) - 5);
      auto x = ts::device_put(ts::array(xs).reshape({rows, cols}), ts::NamedSharding(mesh, P("x", ts::None)));
      auto b = ts::device_put(ts::array(bs), ts::NamedSharding(mesh, P()));
      auto b1 = ts::device_put(ts::array(b1s).reshape({1, cols}), ts::NamedSharding(mesh, P()));
      auto f = ts::jit([](ts::Array a, ts::Array v, ts::Array w) { return a + v - w; });
      std::vector<float> want(xs.size());
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j)
          want[std::size_t(i * cols + j)] = xs[std::size_t(i * cols + j)] + bs[std::size_t(j)] - b1s[std::size_t(j)];
      ts::Array y = f(x, b, b1);
      CHECK(y.to_vector<float>() == want);
      CHECK(ts::testing::shards_hold(y, ts::host_array(ts::DType::float32, y.shape(), want.data())) == "");
      if (d > 1 && rows % d == 0) {
        const std::string text = f.lower(x, b, b1).compile().as_text();
        CHECK(text.find("dynamic-slice") == std::string::npos);
        CHECK(text.find("axis-index") == std::string::npos);
      }
    }
  }
}

TEST_CASE("functions traced inside jit may close over the enclosing trace's values") {
  // grad, an inner jit called with concrete arguments, and shard_map, each
  // closing over a tracer of the outer jit: inputs of the inner trace.
  ts::Array x = ts::arange(8.0f), w = ts::full({2}, 3.0f);
  auto h = ts::jit([&](ts::Array a, ts::Array v) { return ts::grad([&](ts::Array b) { return ts::sum(b * v.sum()); })(a); });
  CHECK(h(x, w).to_vector<float>() == std::vector<float>(8, 6.0f));
  ts::Array y = ts::arange(4.0f);
  ts::Array* vp = nullptr;
  auto inner = ts::jit([&](ts::Array b) { return b * vp->sum(); });
  auto outer = ts::jit([&](ts::Array v) {
    vp = &v;
    return inner(y);
  });
  CHECK(outer(ts::full({2}, 1.0f)).to_vector<float>() == std::vector<float>{0, 2, 4, 6});
  CHECK(outer(ts::full({3}, 1.0f)).to_vector<float>() == std::vector<float>{0, 3, 6, 9});  // no stale trace
  auto mesh = ts::make_mesh({4}, {"x"});
  auto s = ts::jit([&](ts::Array a, ts::Array v) {
    return ts::shard_map([&](ts::Array b) { return b * v.sum(); }, mesh, ts::P("x"), ts::P("x"))(a);
  });
  CHECK(s(x, w).to_vector<float>() == std::vector<float>{0, 6, 12, 18, 24, 30, 36, 42});
}

TEST_CASE("zeros, ones, full and their _like forms inside jit are broadcasts of a constant, not captured arrays") {
  // As jnp.zeros in a jaxpr: no parameter per array (one was allocated at
  // trace time and held on every device), the same values and weak types.
  auto f = [](ts::Array a) {
    return std::make_tuple(a + ts::zeros_like(a) + ts::ones({64, 64}) * ts::full({64, 64}, 2.5),
                           ts::ones_like(a, ts::int32) + ts::full_like(a, 3.0, ts::int32), ts::zeros({3, 4}, ts::int8),
                           ts::full({2}, 7.0) + 1);
  };
  const ts::Array x = ts::arange(0.0f, 4096.0f).reshape({64, 64});
  auto j = ts::jit(f);
  const std::string text = j.lower(x).as_text();
  CAPTURE(text);
  CHECK(text.find("func f(%0) {") != std::string::npos);  // x alone: nothing captured
  const auto [a, b, c, d] = j(x);
  const auto [ea, eb, ec, ed] = f(x);
  CHECK(a.to_vector<float>() == ea.to_vector<float>());
  CHECK(b.to_vector<std::int32_t>() == eb.to_vector<std::int32_t>());
  CHECK(c.dtype() == ts::int8);
  CHECK(c.to_vector<std::int8_t>() == ec.to_vector<std::int8_t>());
  CHECK(d.dtype() == ed.dtype());
  CHECK(d.weak_type() == ed.weak_type());
  CHECK(d.to_vector<float>() == ed.to_vector<float>());
  // Sharded: the broadcast takes the split of what it meets.
  auto mesh = ts::make_mesh({ts::device_count()}, {"x"});
  const ts::Array xs = ts::device_put(x, ts::NamedSharding(mesh, ts::P("x")));
  CHECK(std::get<0>(j(xs)).to_vector<float>() == ea.to_vector<float>());
}

TEST_CASE("eye inside jit compares two iotas: equal to the host's in every dtype, nothing captured") {
  for (ts::DType t : {ts::float32, ts::float64, ts::int32, ts::bool_, ts::bfloat16, ts::int8, ts::complex64, ts::uint64}) {
    CAPTURE(std::string(ts::dtype_name(t)));
    for (auto [n, m, k] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
             {4, 4, 0}, {3, 5, 1}, {5, 3, -2}, {6, 2, 7}, {1, 3, 0}, {300, 200, -5}}) {
      CAPTURE(n);
      CAPTURE(m);
      CAPTURE(k);
      auto f = ts::jit([&](ts::Array a) { return ts::eye(n, m, k, t) + a; });
      const ts::Array zero = ts::zeros({}, t);
      const std::string text = f.lower(zero).as_text();
      CHECK(text.find("func f(%0) {") != std::string::npos);  // only the argument: the identity is computed
      const ts::Array got = f(zero), want = ts::eye(n, m, k, t) + zero;
      CHECK(got.dtype() == want.dtype());
      CHECK(got.shape() == want.shape());
      CHECK(got.astype(ts::float64).to_vector<double>() == want.astype(ts::float64).to_vector<double>());
    }
  }
}

TEST_CASE("linspace inside jit: the host's arithmetic on an iota, bit for bit, nothing captured (float32)") {
  for (ts::DType t : {ts::float32}) {
    CAPTURE(std::string(ts::dtype_name(t)));
    for (auto [a, b, num, endpoint] : std::vector<std::tuple<double, double, std::int64_t, bool>>{
             {0, 1, 50, true}, {-3.3, 7.1, 97, true}, {-3.3, 7.1, 97, false}, {1e6, -2.5e-3, 1000, true}, {2, 2, 5, true},
             {0.1, 0.7, 70001, true}}) {
      CAPTURE(a);
      CAPTURE(b);
      CAPTURE(num);
      CAPTURE(endpoint);
      auto f = ts::jit([&](ts::Array x) { return ts::linspace(a, b, num, endpoint, t) + x; });
      const ts::Array zero = ts::zeros({}, t);
      CHECK(f.lower(zero).as_text().find("func f(%0) {") != std::string::npos);
      const ts::Array got = f(zero), want = ts::linspace(a, b, num, endpoint, t) + zero;
      CHECK(got.dtype() == want.dtype());
      CHECK(got.astype(ts::float64).to_vector<double>() == want.astype(ts::float64).to_vector<double>());
      // A closed form: start + i * delta rounded once (a float32 fused multiply-add, as
      // XLA:CPU contracts it), the endpoint exactly stop. (A double rounding could differ
      // in a halfway case; none of these cases has one.)
      const auto v = got.to_vector<float>();
      const std::int64_t div = endpoint ? num - 1 : num;
      const float lo = float(a), hi = float(b), delta = (hi - lo) / float(div);
      std::int64_t differ = 0;
      for (std::int64_t i = 0; i < num; ++i)
        differ += v[size_t(i)] != (endpoint && i == num - 1 ? hi : std::fma(float(i), delta, lo));
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("arange(n) inside jit is an iota: equal to the host's in every dtype it covers, nothing captured") {
  for (ts::DType t : {ts::int32, ts::int64, ts::uint32, ts::int16, ts::uint16, ts::float32, ts::float64, ts::bfloat16,
                      ts::float16, ts::int8}) {
    CAPTURE(std::string(ts::dtype_name(t)));
    for (std::int64_t n : {2, 300, 70000}) {
      CAPTURE(n);
      auto f = ts::jit([&](ts::Array a) { return ts::arange(std::int64_t(0), n, std::int64_t(1), t) + a; });
      const ts::Array zero = ts::zeros({}, t);
      const std::string text = f.lower(zero).as_text();
      CAPTURE(text);
      // 8-bit types keep the host's array (a cast of a large count may differ).
      CHECK((text.find("func f(%0) {") != std::string::npos) == (t != ts::int8));
      const ts::Array got = f(zero), want = ts::arange(std::int64_t(0), n, std::int64_t(1), t) + zero;
      CHECK(got.dtype() == want.dtype());
      CHECK(got.astype(ts::float64).to_vector<double>() == want.astype(ts::float64).to_vector<double>());
    }
  }
}
