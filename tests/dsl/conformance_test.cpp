// Conformance with JAX where a user one step past the tutorials found tessel
// differing (issue 36, section 1): each case failed before its fix.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {
ts::Array mat3() { return ts::array(std::vector<float>{4, 3, 2, 1, 5, 7, 2, 8, 6}, {3, 3}); }

std::vector<float> host(const ts::Array& x) { return x.to_vector<float>(); }
}  // namespace

TEST_CASE("linalg result structs are pytrees: jit, vmap, grad, device_put, tree::map") {
  auto a = mat3();
  auto eager = ts::linalg::lu(a);
  auto j = ts::jit([](const ts::Array& m) { return ts::linalg::lu(m); })(a);
  CHECK(host(j.lu) == host(eager.lu));
  CHECK(j.pivots.to_vector<int>() == eager.pivots.to_vector<int>());
  CHECK(j.permutation.to_vector<int>() == eager.permutation.to_vector<int>());
  CHECK(ts::tree::leaf_count(j) == 3);
  CHECK(ts::tree::structure(j) == "struct(lu=*, pivots=*, permutation=*)");

  auto qr = ts::jit([](const ts::Array& m) { return ts::linalg::qr(m); })(a);
  auto back = ts::matmul(qr.q, qr.r).to_vector<float>();
  auto orig = host(a);
  for (size_t i = 0; i < orig.size(); ++i) CHECK(back[i] == doctest::Approx(orig[i]).epsilon(1e-5));

  auto eig = ts::jit([](const ts::Array& m) { return ts::linalg::eigh(m); })(ts::matmul(a, a.T()));
  CHECK(eig.eigenvalues.shape() == ts::Shape{3});
  auto sv = ts::jit([](const ts::Array& m) { return ts::linalg::svd(m); })(a);
  CHECK(sv.s.shape() == ts::Shape{3});
  auto sd = ts::jit([](const ts::Array& m) { return ts::linalg::slogdet(m); })(a);
  auto det = ts::linalg::det(a).item<float>();
  CHECK(sd.sign.item<float>() * std::exp(sd.logabsdet.item<float>()) == doctest::Approx(det).epsilon(1e-4));
  auto lf = ts::jit([](const ts::Array& m) { return ts::linalg::lu_factor(m); })(a);
  auto x = ts::linalg::lu_solve(lf, ts::ones({3}));
  auto want = ts::linalg::solve(a, ts::ones({3}));
  for (int i = 0; i < 3; ++i) CHECK(host(x)[size_t(i)] == doctest::Approx(host(want)[size_t(i)]).epsilon(1e-5));

  // vmap over a batch: the struct's leaves come out batched.
  auto batch = ts::stack({a, a * 2.0});
  auto vb = ts::vmap([](const ts::Array& m) { return ts::linalg::qr(m); })(batch);
  CHECK(vb.q.shape() == ts::Shape{2, 3, 3});
  CHECK(vb.r.shape() == ts::Shape{2, 3, 3});

  // tree::map and device_put keep the struct.
  auto doubled = ts::tree::map([](const ts::Array& l) { return l * 2; }, sd);
  CHECK(doubled.sign.item<float>() == doctest::Approx(2 * sd.sign.item<float>()));
  auto mesh = ts::make_mesh({2}, {"x"});
  auto placed = ts::device_put(qr, ts::NamedSharding(mesh, P("x")));
  CHECK(placed.q.committed());
  CHECK(placed.r.sharding() == ts::Sharding(ts::NamedSharding(mesh, P("x"))));

  // grad through a function whose inner call returns the struct.
  auto g = ts::grad([](const ts::Array& m) {
    auto s = ts::linalg::slogdet(m);
    return s.logabsdet;
  })(a);
  // d log|det a| / da = inv(a)^T.
  auto inv_t = ts::linalg::inv(a).T().to_vector<float>();
  auto gv = host(g);
  for (size_t i = 0; i < gv.size(); ++i) CHECK(gv[i] == doctest::Approx(inv_t[i]).epsilon(1e-4));
}

TEST_CASE("jit in_shardings and out_shardings take pytrees of shardings (tree prefixes, None leaves)") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto rows = ts::NamedSharding(mesh, P("a"));
  auto cols = ts::NamedSharding(mesh, P(ts::None, "b"));
  using Params = std::map<std::string, ts::Array>;
  Params params{{"w", ts::arange(32.0).reshape({8, 4})}, {"b", ts::arange(4.0)}};
  auto f = [](const Params& p, const ts::Array& x) { return ts::matmul(x, p.at("w")) + p.at("b"); };
  std::map<std::string, std::optional<ts::Sharding>> specs{{"w", ts::Sharding(rows)}, {"b", std::nullopt}};
  auto jf = ts::jit(f, {.in_shardings = {specs, cols}});
  auto x = ts::ones({2, 8});
  auto y = jf(params, x);
  auto want = f(params, x);
  CHECK(host(y) == host(want));
  // The pytree's shardings reached the program's parameters.
  auto text = jf.lower(params, x).as_text();
  CHECK(text.find("P('a', None)") != std::string::npos);

  // A tree prefix: one sharding for the whole map.
  auto jp = ts::jit(f, {.in_shardings = {ts::Sharding(ts::NamedSharding(mesh, P())), std::nullopt}});
  CHECK(host(jp(params, x)) == host(want));

  // out_shardings as a pytree matching the result.
  auto g = [](const ts::Array& v) { return std::map<std::string, ts::Array>{{"double", v * 2}, {"half", v / 2}}; };
  std::map<std::string, ts::Sharding> out_specs{{"double", ts::Sharding(rows)}, {"half", ts::Sharding(cols)}};
  auto jg = ts::jit(g, {.out_shardings = {out_specs}});
  auto r = jg(ts::ones({8, 4}));
  CHECK(r.at("double").sharding() == ts::Sharding(rows));
  CHECK(r.at("half").sharding() == ts::Sharding(cols));
  // One entry per top-level element of a tuple result, each a prefix of its element.
  auto h = [](const ts::Array& v) { return std::make_pair(v + 1, std::vector<ts::Array>{v, v * 3}); };
  auto jh = ts::jit(h, {.out_shardings = {ts::Sharding(rows), ts::Sharding(cols)}});
  auto hr = jh(ts::ones({8, 4}));
  CHECK(hr.first.sharding() == ts::Sharding(rows));
  CHECK(hr.second[0].sharding() == ts::Sharding(cols));
  CHECK(hr.second[1].sharding() == ts::Sharding(cols));

  // Structures that do not match: JAX's ValueError naming both sides.
  std::map<std::string, ts::Sharding> wrong{{"w", ts::Sharding(rows)}};
  try {
    ts::jit(f, {.in_shardings = {wrong, cols}})(params, x);
    FAIL("expected a ValueError");
  } catch (const ts::ValueError& e) {
    std::string m = e.what();
    CHECK(m.find("tree prefix") != std::string::npos);
    CHECK(m.find("'w'") != std::string::npos);
    CHECK(m.find("'b'") != std::string::npos);
  }
  std::vector<ts::Sharding> three{rows, rows, rows};
  CHECK_THROWS_AS(ts::jit(g, {.out_shardings = {three}})(ts::ones({8, 4})), ts::ValueError);
}

TEST_CASE("device_put inside jit is a sharding constraint") {
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto s = ts::NamedSharding(mesh, P("a", "b"));
  auto f = ts::jit([&](const ts::Array& x) { return ts::device_put(x * 2, s) + 1; });
  auto y = f(ts::ones({8, 4}));
  CHECK(host(y) == std::vector<float>(32, 3.0f));
  CHECK(y.sharding() == ts::Sharding(s));
  CHECK(f.lower(ts::ones({8, 4})).as_text().find("sharding-constraint") != std::string::npos);
}

TEST_CASE("jit with out_shardings on other devices moves uncommitted inputs there") {
  std::vector<ts::Device> devs{ts::Device(4), ts::Device(5)};
  ts::Mesh mesh(devs, {2}, {"x"});
  auto s = ts::NamedSharding(mesh, P("x"));
  auto f = ts::jit([](const ts::Array& a, const ts::Array& b) { return a + b; }, {.out_shardings = {ts::Sharding(s)}});
  auto y = f(ts::arange(6.0), ts::ones({6}));
  CHECK(y.devices() == std::set<ts::Device>{ts::Device(4), ts::Device(5)});
  CHECK(y.sharding() == ts::Sharding(s));
  CHECK(host(y) == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("bool + bool is a logical or, bool * bool a logical and (NumPy)") {
  auto a = ts::array(std::vector<bool>{true, true, false, false});
  auto b = ts::array(std::vector<bool>{true, false, true, false});
  auto s = a + b, p = a * b;
  CHECK(s.dtype() == ts::bool_);
  CHECK(p.dtype() == ts::bool_);
  CHECK(s.to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK(p.to_vector<bool>() == std::vector<bool>{true, false, false, false});
  auto js = ts::jit([](const ts::Array& x, const ts::Array& y) { return ts::add(x, y); })(a, b);
  CHECK(js.to_vector<bool>() == std::vector<bool>{true, true, true, false});
  // A bool with an int still adds as integers.
  CHECK((a + ts::array(std::vector<int>{1, 1, 1, 1})).to_vector<int>() == std::vector<int>{2, 2, 1, 1});
}

TEST_CASE("PositionalSharding::device_ids_at out of range is a ts::Error") {
  auto ps = ts::PositionalSharding(ts::devices()).reshape({4, 2});
  CHECK(ps.device_ids_at(7) == std::vector<int>{7});
  CHECK_THROWS_AS(ps.device_ids_at(100), ts::ValueError);
  CHECK_THROWS_AS(ps.device_ids_at(-1), ts::ValueError);
  CHECK_THROWS_WITH(ps.device_ids_at(8), doctest::Contains("out of bounds"));
}

TEST_CASE("grad with respect to a C++ integer or floating-point argument is a TypeError") {
  auto f = [](const ts::Array& x, int n) { return ts::sum(x) * float(n); };
  CHECK_THROWS_AS(ts::grad<1>(f)(ts::ones({3}), 2), ts::TypeError);
  CHECK_THROWS_WITH(ts::grad<1>(f)(ts::ones({3}), 2), doctest::Contains("real- or complex-valued"));
  auto g = [](const ts::Array& x, double s) { return ts::sum(x) * s; };
  CHECK_THROWS_AS(ts::grad<1>(g)(ts::ones({3}), 2.0), ts::TypeError);
  // The array argument still differentiates.
  CHECK(host(ts::grad<0>(f)(ts::ones({3}), 2)) == std::vector<float>{2, 2, 2});
}

TEST_CASE("ts::array of 8- and 16-bit integers keeps their dtype (no silent widening)") {
  CHECK(ts::array(std::vector<std::int8_t>{1, 2}).dtype() == ts::int8);
  CHECK(ts::array(std::vector<std::uint8_t>{1, 2}).dtype() == ts::uint8);
  CHECK(ts::array(std::vector<std::int16_t>{1, 2}).dtype() == ts::int16);
  CHECK(ts::array(std::vector<std::uint16_t>{1, 2}).dtype() == ts::uint16);
  CHECK(ts::array(std::int8_t(3)).dtype() == ts::int8);
  CHECK(ts::array(std::vector<std::int32_t>{1, 2}).dtype() == ts::int32);
  CHECK(ts::array(std::vector<bool>{true}).dtype() == ts::bool_);
}

TEST_CASE("solve with a batched vector right-hand side gives JAX's hint") {
  auto a = ts::stack({mat3(), mat3()});
  auto b = ts::ones({2, 3});
  CHECK_THROWS_WITH(ts::linalg::solve(a, b), doctest::Contains("b[..., None]"));
  auto x = ts::squeeze(ts::linalg::solve(a, ts::expand_dims(b, -1)), -1);
  CHECK(x.shape() == ts::Shape{2, 3});
}

TEST_CASE("sharded rfft2/irfft2 and uneven fft2 move data by all-to-alls, never all-gathering the array") {
  namespace fft = ts::fft;
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
  };
  auto mesh = ts::make_mesh({8}, {"x"});
  auto close = [](const ts::Array& got, const ts::Array& want, double tol) {
    auto g = ts::abs(got - want).to_vector<double>();
    auto w = ts::abs(want).to_vector<double>();
    double worst = 0, scale = 1;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, g[i]), scale = std::max(scale, w[i]);
    CHECK(worst <= tol * scale);
  };
  for (ts::Shape shape : {ts::Shape{32, 16}, ts::Shape{32, 12}, ts::Shape{32, 30}, ts::Shape{24, 10}}) {
    CAPTURE(ts::shape_str(shape));
    std::vector<double> v;
    for (std::int64_t i = 0; i < shape[0] * shape[1]; ++i) v.push_back(std::sin(0.37 * double(i)) + 0.1 * double(i % 7));
    auto x = ts::array(v, shape);
    auto xs = ts::device_put(x, ts::NamedSharding(mesh, P("x")));
    auto r2 = ts::jit([](const ts::Array& a) { return fft::rfft2(a); });
    close(r2(xs), fft::rfft2(x), 1e-12);
    auto rt = r2.lower(xs).compile().as_text();
    CHECK(count(rt, "all-gather") == 0);
    CHECK(count(rt, "all-to-all") >= 1);
    auto spec = fft::rfft2(x);
    auto specs = ts::device_put(spec, ts::NamedSharding(mesh, P("x")));
    auto i2 = ts::jit([shape](const ts::Array& a) { return fft::irfft2(a, std::vector<std::int64_t>{shape[0], shape[1]}); });
    close(i2(specs), x, 1e-12);
    CHECK(count(i2.lower(specs).compile().as_text(), "all-gather") == 0);
    auto c = x.astype(ts::complex128);
    auto cs = ts::device_put(c, ts::NamedSharding(mesh, P("x")));
    auto f2 = ts::jit([](const ts::Array& a) { return fft::fft2(a); });
    close(f2(cs), fft::fft2(c), 1e-12);
    CHECK(count(f2.lower(cs).compile().as_text(), "all-gather") == 0);
  }
  // A split real axis: its split carries to the half spectrum (padded where
  // uneven) and moves off the axis for the real-to-complex step by an
  // all-to-all, on a 4x2 mesh and a 1-D mesh, even and uneven shapes.
  auto mesh2 = ts::make_mesh({4, 2}, {"x", "y"});
  // (12 rows over 'x' are tiles of 3, over ('x', 'y') tiles of 2: those do
  // not nest, and moving 'y' onto the rows gathers them; 24 rows nest.)
  struct Case {
    ts::Shape shape;
    ts::Mesh mesh;
    ts::PartitionSpec spec;
    bool nests = true;
  };
  for (const Case& k : {Case{{16, 16}, mesh2, P("x", "y")}, Case{{64, 64}, mesh2, P("x", "y")},
                        Case{{24, 10}, mesh2, P("x", "y")}, Case{{12, 10}, mesh2, P("x", "y"), false},
                        Case{{16, 16}, mesh2, P(ts::None, "y")}, Case{{8, 30}, mesh, P(ts::None, "x")},
                        Case{{3, 8, 14}, mesh2, P(ts::None, "y", "x")}}) {
    CAPTURE(ts::shape_str(k.shape));
    CAPTURE(ts::NamedSharding(k.mesh, k.spec).str());
    std::vector<double> v;
    std::int64_t size = 1;
    for (auto d : k.shape) size *= d;
    for (std::int64_t i = 0; i < size; ++i) v.push_back(std::cos(0.29 * double(i)) + 0.05 * double(i % 5));
    auto x = ts::array(v, k.shape);
    auto xs = ts::device_put(x, ts::NamedSharding(k.mesh, k.spec));
    auto r2 = ts::jit([](const ts::Array& a) { return fft::rfft2(a); });
    auto spec = r2(xs);
    close(spec, fft::rfft2(x), 1e-12);
    auto rt = r2.lower(xs).compile().as_text();
    CHECK((count(rt, "all-gather") == 0 || !k.nests));
    CHECK(count(rt, "all-to-all") >= 1);
    // The half spectrum keeps the input's split of the real axis.
    CHECK(spec.sharding() == ts::Sharding(ts::NamedSharding(k.mesh, k.spec)));
    const std::int64_t rows = k.shape[k.shape.size() - 2], cols = k.shape.back();
    auto i2 = ts::jit([rows, cols](const ts::Array& a) { return fft::irfft2(a, std::vector<std::int64_t>{rows, cols}); });
    auto back = i2(spec);
    close(back, x, 1e-12);
    CHECK(back.sharding() == ts::Sharding(ts::NamedSharding(k.mesh, k.spec)));
    CHECK((count(i2.lower(spec).compile().as_text(), "all-gather") == 0 || !k.nests));
    // The gradient of a loss through both runs the transposed rules split too.
    auto loss = [rows, cols](const ts::Array& a) {
      return ts::sum(ts::square(fft::irfft2(fft::rfft2(a) * 0.5, std::vector<std::int64_t>{rows, cols})));
    };
    close(ts::jit(ts::grad(loss))(xs), ts::grad(loss)(x), 1e-10);
  }
}
