// ts::vmap: for every primitive of the op table, vmap(f)(xs) equals f
// applied to each example and stacked (one generic test, whose programs are
// checked to cover the table), mapped and unmapped arguments, other axes,
// composition with jit, grad and shard_map, spmd_axis_name, and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <set>
#include <string>

#include <tessel/tessel.hpp>

#include "tracer/ir.hpp"

namespace ts = tessel;
using ts::P;
namespace lax = tessel::lax;

namespace {

using Fn = std::function<ts::Array(ts::Array, ts::Array)>;

ts::Mesh mesh4() {
  const auto all = ts::devices();
  return ts::Mesh(std::vector<ts::Device>(all.begin(), all.begin() + 4), {4}, {"x"});
}

std::string diff(const ts::Array& got, const ts::Array& want) {
  if (got.shape() != want.shape()) return "shape " + ts::shape_str(got.shape()) + " vs " + ts::shape_str(want.shape());
  if (got.dtype() != want.dtype()) return std::string("dtype ") + ts::dtype_name(got.dtype()) + " vs " + ts::dtype_name(want.dtype());
  auto g = got.astype(ts::DType::float64).to_vector<double>(), w = want.astype(ts::DType::float64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (!(std::fabs(g[i] - w[i]) <= 1e-5 * (1 + std::fabs(w[i]))))
      return "element " + std::to_string(i) + ": " + std::to_string(g[i]) + " vs " + std::to_string(w[i]);
  }
  return "";
}

// f on each example (x[i], y[i] or y), stacked.
ts::Array stacked(const Fn& f, const ts::Array& x, const ts::Array& y, bool y_mapped) {
  std::vector<ts::Array> parts;
  for (std::int64_t i = 0; i < x.shape()[0]; ++i)
    parts.push_back(f(x.index({i}), y_mapped ? y.index({i}) : y));
  return ts::stack(parts);
}

struct Case {
  std::string name;
  Fn f;
};

std::vector<Case> cases() {
  ts::Mesh mesh = mesh4();
  std::vector<Case> c;
  c.push_back({"unary", [](ts::Array x, ts::Array) {
                 ts::Array a = ts::sin(x) + ts::cos(x) + ts::tan(x * 0.1) + ts::tanh(x) + ts::exp(x * 0.1) + ts::expm1(x * 0.1);
                 a = a + ts::log(ts::abs(x) + 1) + ts::log1p(ts::abs(x)) + ts::sqrt(ts::abs(x)) + ts::rsqrt(ts::abs(x) + 1);
                 a = a + ts::nn::sigmoid(x) + lax::erf(x) + lax::erf_inv(ts::clip(x * 0.1, -0.9, 0.9)) + ts::sign(x);
                 a = a + ts::floor(x) + ts::ceil(x) + ts::round(x) - x;
                 return ts::where(ts::logical_not(ts::isfinite(a / (x - 1000.0f))), 0.0f, a);
               }});
  c.push_back({"binary", [](ts::Array x, ts::Array y) {
                 ts::Array a = x + y - x * y + x / (ts::abs(y) + 1) + ts::remainder(x, ts::abs(y) + 1);
                 a = a + ts::power(ts::abs(x) + 1, y * 0.1) + ts::maximum(x, y) + ts::minimum(x, y) + ts::arctan2(x, y);
                 ts::Array b = ts::where(ts::logical_or(ts::logical_and(x < y, x <= y), ts::logical_and(x > y, x >= y)), a, -a);
                 return ts::where(ts::logical_or(x == y, x != y), b, a);
               }});
  c.push_back({"bits", [](ts::Array x, ts::Array y) {
                 ts::Array u = lax::bitcast_convert_type(x, ts::DType::uint32);
                 ts::Array v = lax::bitwise_xor(lax::shift_left(u, ts::full_like(u, 3)), lax::shift_right_logical(u, ts::full_like(u, 5)));
                 v = lax::bitwise_or(lax::bitwise_and(v, ts::full_like(u, 0xffff)), ts::full_like(u, 1));
                 return v.astype(ts::DType::float32) + y;
               }});
  c.push_back({"shape", [](ts::Array x, ts::Array y) {
                 ts::Array a = x - ts::mean(x, 1, true);                    // broadcast
                 ts::Array b = ts::transpose(a).reshape({2, 6}).reshape({3, 4});  // transpose, reshape
                 ts::Array s = ts::flip(b).index({ts::slice(0, 3, 2), ts::slice(1, 4)});  // rev, slice
                 ts::Array p = ts::pad(s, {{1, 0}, {0, 1}}, 0.5);          // pad -> [3, 4]
                 return ts::concatenate({p, y}, 0);                         // concatenate
               }});
  c.push_back({"dynamic", [](ts::Array x, ts::Array y) {
                 ts::Array i = ts::argmax(y.index({0}));   // a per-example index
                 ts::Array w = lax::dynamic_slice(x, {ts::array(std::int32_t(1)), i}, {2, 2});
                 ts::Array u = lax::dynamic_update_slice(x, w * 10, {i, ts::array(std::int32_t(0))});
                 ts::Array v = lax::dynamic_slice(u, {ts::array(std::int32_t(0)), ts::array(std::int32_t(1))}, {3, 2});
                 return ts::concatenate({v, w, lax::dynamic_update_slice(v, w, {ts::array(std::int32_t(1)), ts::array(std::int32_t(0))})}, 0);
               }});
  c.push_back({"indexing", [](ts::Array x, ts::Array y) {
                 ts::Array idx = ts::array(std::vector<std::int32_t>{2, 0, 3, 3});
                 ts::Array g = ts::take(x, idx, 1) + ts::take(x, ts::argsort(y.index({0})), 1);   // shared and per-example indices
                 ts::Array s = x.at({idx}).add(1.0f);                          // scatter with rows [4]? (axis 0 of [3,4]: 3 rows)
                 ts::Array t = ts::take_along_axis(x, ts::argsort(y, 1), 1);
                 return g + s.index({ts::slice(0, 3), ts::slice(0, 4)}) + t;
               }});
  c.push_back({"reduce", [](ts::Array x, ts::Array y) {
                 ts::Array a = ts::sum(x, 0) + ts::max(x, 0) + ts::min(y, 0) + ts::prod(x * 0.5, 0);
                 ts::Array b = (ts::argmax(x, 0) + ts::argmin(y, 0)).astype(ts::DType::float32);
                 return a + b + ts::sort(x, 0).index({0});
               }});
  c.push_back({"dot", [](ts::Array x, ts::Array y) {
                 return ts::dot(x, ts::transpose(y)) + ts::einsum("ij,kj->ik", x, y * 2.0f);
               }});
  c.push_back({"scans", [](ts::Array x, ts::Array y) {
                 return ts::lax::cumsum(x, 0) + ts::lax::cumprod(y, 1, true) + ts::lax::cummax(x, 1) +
                        ts::lax::cummin(y, 0, true) + ts::lax::cumlogsumexp(x, 1) + ts::stop_gradient(y) +
                        ts::lax::top_k(x, 1).values;
               }});
  c.push_back({"random", [](ts::Array x, ts::Array) {
                 // A key that depends on the example (traced, equal to key(7) here): threefry per example.
                 ts::Array key = ts::random::key(7) + (ts::sum(x) > 1e9f).astype(ts::DType::uint32);
                 return ts::random::uniform(ts::random::fold_in(key, 3), {3, 4}) + x;
               }});
  c.push_back({"constraint", [mesh](ts::Array x, ts::Array y) {
                 return ts::with_sharding_constraint(x * y, ts::NamedSharding(mesh, P(ts::None, "x")));
               }});
  c.push_back({"cond", [](ts::Array x, ts::Array y) {
                 return lax::cond(ts::sum(x) > ts::sum(y), [](ts::Array a, ts::Array b) { return a * b; },
                                  [](ts::Array a, ts::Array b) { return a - b; }, x, y);
               }});
  c.push_back({"switch", [](ts::Array x, ts::Array y) {
                 std::vector<std::function<ts::Array(ts::Array)>> br = {[](ts::Array a) { return a + 1.0f; },
                                                                       [](ts::Array a) { return a * 3.0f; },
                                                                       [](ts::Array a) { return -a; }};
                 return lax::switch_(ts::argmax(ts::sum(y, 1)).astype(ts::DType::int32), br, x);
               }});
  c.push_back({"while", [](ts::Array x, ts::Array y) {
                 using C = std::pair<ts::Array, ts::Array>;
                 return lax::while_loop([](const C& s) { return ts::sum(ts::abs(s.first)) < 200.0f; },
                                        [](const C& s) { return C(s.first * 2.0f + s.second, s.second); }, C(x, y))
                     .first;
               }});
  c.push_back({"scan", [](ts::Array x, ts::Array y) {
                 auto r = lax::scan([](ts::Array s, ts::Array row) { return std::pair{ts::tanh(s + row), s * row}; },
                                    y.index({0}), x);
                 return r.second + r.first + lax::fori_loop(0, 3, [](ts::Array i, ts::Array v) { return v * 0.5f + i.astype(ts::DType::float32); }, y);
               }});
  c.push_back({"complex", [](ts::Array x, ts::Array y) {
                 ts::Array z = ts::complex(x, y);
                 ts::Array w = ts::exp(z * 0.1) * ts::conj(z) + ts::sum(z, {1}, true);
                 ts::Array f = ts::fft::irfft(ts::fft::fft(z, std::nullopt, 0), 4, 1);
                 return ts::real(w) + ts::imag(w) * 2.0f + ts::abs(z) + f;
               }});
  c.push_back({"convolution", [](ts::Array x, ts::Array y) {
                 // x: one image of 3 features and 4 pixels; y: a kernel of 4 outputs, 3 inputs, 1 tap.
                 ts::Array img = x.reshape({1, 3, 4}), k = y.reshape({4, 3, 1});
                 ts::Array a = lax::conv(img, k, {1}, "SAME"), b = lax::conv(img, ts::concatenate({k, k}, 2), {1}, {{1, 0}});
                 return (a + b).reshape({4, 4});
               }});
  c.push_back({"pooling", [](ts::Array x, ts::Array y) {
                 // x, y: [3, 4]; max pooling's jvp (reduce-window-max, window-select,
                 // select-and-gather-add) and vjp (select-and-scatter-add), sum and min pooling.
                 auto mx = [](const ts::Array& a) { return lax::reduce_window(a, -INFINITY, "max", {2, 2}, {1, 2}, "SAME"); };
                 auto [p, t] = ts::jvp(mx, std::make_tuple(x), std::make_tuple(y));
                 auto [p2, back] = ts::vjp(mx, x);
                 auto [gx] = back(t * 2.0f + p2);
                 ts::Array s = lax::reduce_window(x, 0.0, "add", {2, 2}, {1, 2}, "SAME");
                 ts::Array m = lax::reduce_window(y, INFINITY, "min", {2, 1}, {1, 1}, "VALID");
                 return gx + ts::concatenate({p + s, t}, 1) + ts::sum(m);
               }});
  c.push_back({"debug callback", [](ts::Array x, ts::Array y) {
                 // Unrolled per example (tests/dsl/debug_print_test.cpp checks what it sees).
                 ts::debug::callback([](const ts::Array&, const ts::Array&) {}, x, y);
                 return x * 2.0f + y;
               }});
  c.push_back({"linalg", [](ts::Array x, ts::Array y) {
                 namespace la = ts::linalg;
                 ts::Array a = x.index({ts::all, ts::slice(0, 3)}) + ts::eye(3) * 4.0f;
                 ts::Array s = la::solve(a, y);  // lu, triangular-solve
                 ts::Array l = la::cholesky(ts::matmul(a, a.T()) + ts::eye(3));
                 auto [q, r] = la::qr(x);
                 auto [w, v] = la::eigh(a);
                 // eig: a function of the eigenvalues that does not depend on their order.
                 ts::Array e = ts::sum(ts::real(ts::power(la::eigvals(a), 2)));
                 return s + ts::matmul(l, r) + ts::matmul(v * v, y) + ts::matmul(q * q, y) +
                        ts::expand_dims(w + la::svdvals(x), 1) + e;
               }});
  // Calls with custom derivatives: batched with their rules (the values are fun's).
  c.push_back({"custom", [](ts::Array x, ts::Array y) {
                 auto f = ts::custom_jvp([](const ts::Array& a) { return ts::sin(a) * 2.0f; },
                                         [](const std::tuple<ts::Array>& p, const std::tuple<ts::Array>& t) {
                                           const auto& [a] = p;
                                           return std::pair(ts::sin(a) * 2.0f, std::get<0>(t));
                                         });
                 auto g = ts::custom_vjp([](const ts::Array& a, const ts::Array& b) { return a * b + 1.0f; },
                                         [](const ts::Array& a, const ts::Array& b) {
                                           return std::pair(a * b + 1.0f, std::pair(a, b));
                                         },
                                         [](const std::pair<ts::Array, ts::Array>& r, const ts::Array& ct) {
                                           return std::tuple(ct * r.second, ct * r.first);
                                         });
                 return f(x) + g(x, y);
               }});
  // remat (its call, its tangent, the barriers of its recomputation, a
  // named value), and host functions (pure_callback, ffi::call).
  c.push_back({"remat and host calls", [](ts::Array x, ts::Array y) {
                 namespace cp = ts::checkpoint_policies;
                 auto f = ts::remat([](const ts::Array& a, const ts::Array& b) {
                   return ts::sin(ts::checkpoint_name(a * b, "ab")) + a;
                 }, {.policy = cp::save_only_these_names({"ab"})});
                 ts::Array g = ts::grad([&](const ts::Array& a) { return ts::sum(f(a, y)); })(x);
                 auto [p, t] = ts::jvp([&](const ts::Array& a) { return f(a, y); }, x, y);
                 const ts::ShapeDtypeStruct r{x.shape(), x.dtype(), std::nullopt};
                 ts::Array cb = ts::pure_callback(
                     [](const ts::Array& a) {
                       std::vector<float> v = a.to_vector<float>();
                       for (auto& e : v) e = std::cos(e);
                       return ts::array(v, a.shape());
                     },
                     r, x, ts::PureCallbackOptions{.vmap_method = "sequential"});
                 ts::Array k = ts::ffi::call(
                     [](std::span<const ts::ffi::Buffer> in, std::span<ts::ffi::Buffer> out) {
                       for (std::int64_t i = 0; i < in[0].size(); ++i)
                         out[0].typed_data<float>()[i] = 3 * in[0].typed_data<float>()[i] - in[1].typed_data<float>()[i];
                     },
                     r, {.sharding_rule = "i j, i j -> i j", .vmap_method = "broadcast_all"})(x, y);
                 return g + p + t + cb + k;
               }});
  c.push_back({"shard_map", [mesh](ts::Array x, ts::Array y) {
                 auto body = [](ts::Array a, ts::Array b) {
                   ts::Array s = ts::psum(a, "x") + ts::pmax(b, "x");
                   ts::Array g = ts::all_gather(a, "x", {.axis = 0, .tiled = true});   // [4, 3]: the columns
                   ts::Array r = ts::psum_scatter(g, "x", {.scatter_dimension = 0, .tiled = true});  // [1, 3]
                   ts::Array p = ts::ppermute(a, "x", {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
                   ts::Array q = ts::all_to_all(ts::transpose(g), "x", 1, 1, {.tiled = true});  // [3, 4] -> [3, 4]
                   ts::Array k = ts::pvary(ts::axis_index("x").astype(ts::DType::float32), "x");
                   return s + ts::transpose(r) * 0 + ts::transpose(p) * 0 + p + q.index({ts::all, ts::slice(0, 1)}) + k;
                 };
                 // x, y: [3, 4] per example; the shard_map splits the columns.
                 return ts::shard_map([&](ts::Array a, ts::Array b) { return body(ts::transpose(a), ts::transpose(b)); },
                                      mesh, P(ts::None, "x"), P("x"))(x, y);
               }});
  return c;
}

}  // namespace

TEST_CASE("vmap equals the function on each example, stacked, for every primitive of the op table") {
  ts::Array x = ts::arange(-2.0, 2.8, 0.2).reshape({2, 3, 4}).astype(ts::DType::float32);
  ts::Array y = ts::cos(ts::arange(24.0)).reshape({2, 3, 4}).astype(ts::DType::float32) * 3.0f;
  std::set<std::string> seen;
  for (auto& c : cases()) {
    CAPTURE(c.name);
    CHECK(diff(ts::vmap(c.f)(x, y), stacked(c.f, x, y, true)) == "");
    CHECK(diff(ts::jit(ts::vmap(c.f))(x, y), stacked(c.f, x, y, true)) == "");
    ts::Array y0 = y.index({0});
    CHECK(diff(ts::vmap(c.f, {0, std::nullopt})(x, y0), stacked(c.f, x, y0, false)) == "");
    // The mapped axis elsewhere, and the result's batch axis last.
    ts::Array xt = ts::transpose(x, {1, 0, 2});
    ts::Array want = stacked(c.f, x, y, true);
    std::vector<int> last;
    for (int d = 1; d < want.ndim(); ++d) last.push_back(d);
    last.push_back(0);
    CHECK(diff(ts::vmap(c.f, {1, 0}, -1)(xt, y), ts::transpose(want, last)) == "");
    // The primitives it exercises.
    auto tr = ts::detail::trace("f", {x.index({0}), y.index({0})},
                                [&](const std::vector<ts::Array>& a, std::function<std::any(const std::vector<ts::Array>&)>&) {
                                  return std::vector<ts::Array>{c.f(a[0], a[1])};
                                });
    ts::for_each_graph(*std::static_pointer_cast<ts::Graph>(tr.graph), [&](const ts::Graph& g) {
      for (auto& n : g.topo_order()) seen.insert(ts::op_name(n->op));
    });
  }
  // Every primitive but the structural ones, and distributed-lu,
  // distributed-cholesky and distributed-triangular-solve (made only by partitioning, after every
  // transformation), appears in some case.
  // custom-lin is made only by reverse mode, which transposes it away.
  const std::set<std::string> structural = {"parameter", "tuple", "get-tuple-element", "call", "distributed-lu",
                                            "distributed-cholesky", "distributed-triangular-solve", "custom-lin"};
  for (int k = 0; k < ts::kNumOps; ++k) {
    const std::string name = ts::op_name(ts::Op(k));
    CAPTURE(name);
    if (!structural.count(name)) CHECK(seen.count(name) == 1);
  }
}

TEST_CASE("vmap over random keys, pytrees and unmapped outputs; errors") {
  ts::Array keys = ts::random::split(ts::random::key(0), 5);
  auto draw = [](ts::Array k) { return ts::random::normal(k, {3}); };
  ts::Array got = ts::vmap(draw)(keys);
  for (int i = 0; i < 5; ++i) CHECK(diff(got.index({i}), draw(keys.index({i}))) == "");
  // A pair in, a pair out.
  auto f = [](const std::pair<ts::Array, ts::Array>& p) { return std::pair{p.first + p.second, p.first * 2.0f}; };
  ts::Array a = ts::arange(6.0f).reshape({3, 2}), b = ts::ones({3, 2});
  auto r = ts::vmap(f)(std::pair{a, b});
  CHECK(diff(r.first, a + b) == "");
  CHECK(diff(r.second, a * 2.0f) == "");
  // out_axes None: a result that does not depend on the mapped axis.
  auto g = [](ts::Array v, ts::Array w) { return std::pair{v * 2.0f, w + 1.0f}; };
  auto [gv, gw] = ts::vmap(g, {0, std::nullopt}, {0, std::nullopt})(a, b.index({0}));
  CHECK(diff(gw, b.index({0}) + 1.0f) == "");
  CHECK_THROWS_AS(ts::vmap(g, 0, {0, std::nullopt})(a, b), ts::ValueError);
  CHECK_THROWS_AS(ts::vmap([](ts::Array v, ts::Array w) { return v + w; })(a, ts::ones({4, 2})), ts::ValueError);
  CHECK_THROWS_AS(ts::vmap([](ts::Array v) { return v; }, 2)(a), ts::ValueError);
  CHECK_THROWS_AS(ts::vmap([](ts::Array v) { return v; }, std::nullopt)(a), ts::ValueError);
}

TEST_CASE("vmap composes with grad both ways, with jit, and keeps sharded batches sharded") {
  ts::Array xs = ts::arange(-1.0, 1.0, 0.25).reshape({4, 2});
  auto loss = [](ts::Array v) { return ts::sum(ts::sin(v) * v); };
  // Per-example gradients: vmap(grad(f)).
  ts::Array per = ts::vmap(ts::grad(loss))(xs);
  CHECK(diff(per, ts::cos(xs) * xs + ts::sin(xs)) == "");
  // grad of a vmapped function.
  ts::Array whole = ts::grad([&](ts::Array v) { return ts::sum(ts::vmap(loss)(v)); })(xs);
  CHECK(diff(whole, ts::cos(xs) * xs + ts::sin(xs)) == "");
  CHECK(diff(ts::jit(ts::vmap(ts::grad(loss)))(xs), per) == "");
  // A batch split over the devices stays split.
  ts::Mesh mesh = mesh4();
  ts::Array sharded = ts::device_put(ts::arange(32.0f).reshape({8, 4}), ts::NamedSharding(mesh, P("x")));
  ts::Array out = ts::jit(ts::vmap([](ts::Array v) { return ts::sin(v) * ts::sum(v); }))(sharded);
  CHECK(out.sharding().is_equivalent_to(ts::NamedSharding(mesh, P("x")), 2));
  // spmd_axis_name: the batch dimension of a constraint inside f is split over it.
  auto cf = ts::vmap([&](ts::Array v) { return ts::with_sharding_constraint(v * 2.0f, ts::NamedSharding(mesh, P())); }, 0, 0,
                     {.spmd_axis_name = "x"});
  ts::Array c = ts::jit(cf)(ts::arange(32.0f).reshape({8, 4}));
  CHECK(c.sharding().is_equivalent_to(ts::NamedSharding(mesh, P("x")), 2));
  CHECK(diff(c, ts::arange(32.0f).reshape({8, 4}) * 2.0f) == "");
}

TEST_CASE("vmap of a shard_map with spmd_axis_name: the batch split over that axis, each device's share of examples") {
  auto mesh = ts::make_mesh({4, 2}, {"x", "y"});
  auto f = [&](ts::Array v) {
    return ts::shard_map([](ts::Array b) { return b * ts::psum(ts::sum(b), "y"); }, mesh, P("y"), P("y"))(v);
  };
  ts::Array xs = ts::arange(64.0f).reshape({8, 8}) * 0.125f;
  std::vector<ts::Array> rows;
  for (int i = 0; i < 8; ++i) rows.push_back(f(xs.index({i})));
  ts::Array want = ts::stack(rows);
  for (std::string axis : {"", "x"}) {
    CAPTURE(axis);
    auto vf = ts::vmap(f, 0, 0, {.spmd_axis_name = axis});
    CHECK(diff(vf(xs), want) == "");
    ts::Array got = ts::jit(vf)(xs);
    CHECK(diff(got, want) == "");
    if (axis == "x") CHECK(got.sharding().is_equivalent_to(ts::NamedSharding(mesh, P("x", "y")), 2));
  }
}
