// Complex dtypes (complex64, complex128) against independent references:
// std::complex arithmetic in double on the host (closed forms), NumPy's
// printing rules, JAX's promotion lattice and grad convention (grad of a real
// function of z is df/dx - i df/dy: grad |z|^2 at 3+4j is 6-8j), central
// differences, and the reference interpreter (std::complex kernels) for the
// compiled code, which computes on pairs of reals (codegen/complex.cpp), on
// 1..8 devices with even and uneven shards.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <random>

#include <tessel/tessel.hpp>

#include "tests/common/interp_check.hpp"

namespace ts = tessel;
using ts::Array;
using ts::P;
using C = std::complex<double>;
using C64 = std::complex<float>;

namespace {

std::vector<C> host(const Array& a) {
  if (a.dtype() == ts::complex64) {
    auto v = a.to_vector<C64>();
    return std::vector<C>(v.begin(), v.end());
  }
  return a.to_vector<C>();
}

std::vector<C> rand_c(std::uint32_t seed, std::size_t n, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<C> v(n);
  for (auto& z : v) z = C(u(rng), u(rng));
  return v;
}

Array carray(const std::vector<C>& v, const ts::Shape& s, ts::DType t) {
  if (t == ts::complex128) return ts::array(v, s);
  std::vector<C64> f(v.begin(), v.end());
  return ts::array(f, s);
}

// |got - want| <= tol (1 + |want|) elementwise.
void check_close(const Array& got, const std::vector<C>& want, double tol) {
  auto g = host(got);
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    CAPTURE(g[i]);
    CAPTURE(want[i]);
    CHECK(std::abs(g[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

const ts::DType kComplex[] = {ts::complex64, ts::complex128};
double tol_of(ts::DType t) { return t == ts::complex64 ? 3e-6 : 1e-13; }

}  // namespace

TEST_CASE("complex arrays print as JAX (NumPy's complex format)") {
  using V = std::vector<C64>;
  CHECK(ts::to_string(ts::array(V{{1, 2}, {3, -4}, {0, 0}, {-1.5f, 0.25f}})) ==
        "Array([ 1. +2.j  ,  3. -4.j  ,  0. +0.j  , -1.5+0.25j], dtype=complex64)");
  CHECK(ts::to_string(ts::array(C(1, 2))) == "Array(1.+2.j, dtype=complex64, weak_type=True)");
  CHECK(ts::to_string(ts::array(C64(0.5f, -1))) == "Array(0.5-1.j, dtype=complex64)");
  CHECK(ts::to_string(ts::array(std::vector<C>{{1, 0}, {0, 1}}, {2, 1})) ==
        "Array([[1.+0.j],\n       [0.+1.j]], dtype=complex128)");
  const double inf = INFINITY;
  CHECK(ts::to_string(ts::array(std::vector<C>{{NAN, inf}, {1, 0}})) == "Array([nan+infj,  1. +0.j], dtype=complex128)");
  CHECK(ts::to_string(ts::zeros({2}, ts::complex64)) == "Array([0.+0.j, 0.+0.j], dtype=complex64)");
  CHECK(ts::to_string(ts::array(V{{1e-5f, 1e9f}})) == "Array([1.e-05+1.e+09j], dtype=complex64)");
  CHECK(ts::dtype_from_name("complex128") == ts::complex128);
}

TEST_CASE("complex promotion follows JAX's lattice; weak complex scalars") {
  Array f32 = ts::ones({2}), f64 = ts::ones({2}, ts::float64), i32 = ts::ones({2}, ts::int32);
  Array c64 = ts::ones({2}, ts::complex64), c128 = ts::ones({2}, ts::complex128);
  CHECK((f32 + c64).dtype() == ts::complex64);
  CHECK((f64 + c64).dtype() == ts::complex128);  // f64 -> c128 and c64 -> c128
  CHECK((i32 + c64).dtype() == ts::complex64);
  CHECK((c64 + c128).dtype() == ts::complex128);
  CHECK((f32 * C(0, 1)).dtype() == ts::complex64);  // a weak complex takes the float's precision
  CHECK((f64 * C(0, 1)).dtype() == ts::complex128);
  CHECK((c64 * 2.5).dtype() == ts::complex64);
  CHECK((i32 * C(0, 1)).dtype() == ts::complex64);
  CHECK((c64 + C(1, 1)).dtype() == ts::complex64);
  CHECK(ts::array(C(1, 1)).weak_type());
  check_close(f32 * C(0, 2), {C(0, 2), C(0, 2)}, 0);
  CHECK(ts::abs(c64).dtype() == ts::float32);
  CHECK(ts::real(c128).dtype() == ts::float64);
  CHECK(ts::angle(i32).dtype() == ts::float32);
  CHECK(ts::complex(f64, f64).dtype() == ts::complex128);
  CHECK(ts::sqrt(c64).dtype() == ts::complex64);
  CHECK(f32.astype(ts::complex64).dtype() == ts::complex64);
  // var and std of complex values are real: the mean of |x - mean|^2
  Array v = ts::array(std::vector<C64>{{1, 1}, {-1, -1}, {2, 0}, {-2, 0}});
  CHECK(ts::var(v).dtype() == ts::float32);
  CHECK(ts::var(v).item<float>() == doctest::Approx(3.0));  // (2 + 2 + 4 + 4) / 4, the mean being 0
  CHECK(ts::std(v).item<float>() == doctest::Approx(std::sqrt(3.0)));
  // norms of complex arrays are real: |z| summed as NumPy does
  CHECK(ts::linalg::norm(v).dtype() == ts::float32);
  CHECK(ts::linalg::norm(v).item<float>() == doctest::Approx(std::sqrt(12.0)));
  CHECK(ts::linalg::norm(v, 1.0).item<float>() == doctest::Approx(2 * std::sqrt(2.0) + 4));
  CHECK(ts::linalg::norm(v, 0.0).item<float>() == 4);
  // complex to real keeps the real part (convert_element_type)
  CHECK(ts::array(C64(2.5f, 7)).astype(ts::float32).item<float>() == 2.5f);
  CHECK(ts::array(C64(0, 7)).astype(ts::bool_).item<bool>());
  CHECK_FALSE(ts::array(C64(0, 0)).astype(ts::bool_).item<bool>());
}

TEST_CASE("complex arithmetic and functions equal std::complex in double, eager and jitted, sharded evenly and unevenly") {
  using Fn = std::function<Array(const Array&, const Array&)>;
  using Ref = std::function<C(C, C)>;
  struct Case {
    const char* name;
    Fn f;
    Ref ref;
  };
  const std::vector<Case> cases{
      {"add", [](const Array& a, const Array& b) { return a + b; }, [](C a, C b) { return a + b; }},
      {"sub", [](const Array& a, const Array& b) { return a - b; }, [](C a, C b) { return a - b; }},
      {"mul", [](const Array& a, const Array& b) { return a * b; }, [](C a, C b) { return a * b; }},
      {"div", [](const Array& a, const Array& b) { return a / b; }, [](C a, C b) { return a / b; }},
      {"neg", [](const Array& a, const Array&) { return -a; }, [](C a, C) { return -a; }},
      {"conj", [](const Array& a, const Array&) { return ts::conj(a); }, [](C a, C) { return std::conj(a); }},
      {"real", [](const Array& a, const Array&) { return ts::real(a).astype(a.dtype()); }, [](C a, C) { return C(a.real()); }},
      {"imag", [](const Array& a, const Array&) { return ts::imag(a).astype(a.dtype()); }, [](C a, C) { return C(a.imag()); }},
      {"abs", [](const Array& a, const Array&) { return ts::abs(a).astype(a.dtype()); }, [](C a, C) { return C(std::abs(a)); }},
      {"angle", [](const Array& a, const Array&) { return ts::angle(a).astype(a.dtype()); }, [](C a, C) { return C(std::arg(a)); }},
      {"sign", [](const Array& a, const Array&) { return ts::sign(a); }, [](C a, C) { return a / std::abs(a); }},
      {"exp", [](const Array& a, const Array&) { return ts::exp(a); }, [](C a, C) { return std::exp(a); }},
      {"log", [](const Array& a, const Array&) { return ts::log(a); }, [](C a, C) { return std::log(a); }},
      {"expm1", [](const Array& a, const Array&) { return ts::expm1(a * 1e-3); }, [](C a, C) { return std::exp(a * 1e-3) - 1.0; }},
      {"log1p", [](const Array& a, const Array&) { return ts::log1p(a); }, [](C a, C) { return std::log(1.0 + a); }},
      {"sqrt", [](const Array& a, const Array&) { return ts::sqrt(a); }, [](C a, C) { return std::sqrt(a); }},
      {"rsqrt", [](const Array& a, const Array&) { return ts::rsqrt(a); }, [](C a, C) { return 1.0 / std::sqrt(a); }},
      {"sin", [](const Array& a, const Array&) { return ts::sin(a); }, [](C a, C) { return std::sin(a); }},
      {"cos", [](const Array& a, const Array&) { return ts::cos(a); }, [](C a, C) { return std::cos(a); }},
      {"tan", [](const Array& a, const Array&) { return ts::tan(a); }, [](C a, C) { return std::tan(a); }},
      {"tanh", [](const Array& a, const Array&) { return ts::tanh(a); }, [](C a, C) { return std::tanh(a); }},
      {"pow", [](const Array& a, const Array& b) { return ts::power(a, b); }, [](C a, C b) { return std::exp(b * std::log(a)); }},
      {"eq", [](const Array& a, const Array& b) { return (a == a).astype(a.dtype()) + (a == b).astype(a.dtype()); },
       [](C a, C b) { return C(1.0 + (a == b)); }},
      {"where", [](const Array& a, const Array& b) { return ts::where(ts::real(a) > 0, a, b); },
       [](C a, C b) { return a.real() > 0 ? a : b; }},
      {"complex", [](const Array& a, const Array& b) { return ts::complex(ts::imag(a), ts::real(b)); },
       [](C a, C b) { return C(a.imag(), b.real()); }},
      {"scalars", [](const Array& a, const Array&) { return a * C(0, 1) + 2.0 - C(1, -1) / a; },
       [](C a, C) { return a * C(0, 1) + 2.0 - C(1, -1) / a; }},
  };
  const auto all = ts::devices();
  for (auto t : kComplex)
    for (std::int64_t n : {12, 7}) {
      auto av = rand_c(1, size_t(n)), bv = rand_c(2, size_t(n));
      bv[1] = av[1];  // an equal pair for eq
      for (int devs : {1, 4}) {
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + devs), {devs}, {"x"});
        Array a = ts::device_put(carray(av, {n}, t), ts::NamedSharding(mesh, P("x")));
        Array b = ts::device_put(carray(bv, {n}, t), ts::NamedSharding(mesh, P("x")));
        // the reference computes from the values as stored (rounded to the dtype)
        auto ah = host(a), bh = host(b);
        for (auto& c : cases) {
          CAPTURE(c.name);
          CAPTURE(ts::dtype_name(t));
          CAPTURE(n);
          CAPTURE(devs);
          std::vector<C> want;
          for (size_t i = 0; i < ah.size(); ++i) want.push_back(c.ref(ah[i], bh[i]));
          check_close(c.f(a, b), want, 4 * tol_of(t));
          Array j = ts::jit(c.f)(a, b);
          check_close(j, want, 4 * tol_of(t));
          CHECK(j.sharding() == ts::Sharding(ts::NamedSharding(mesh, P("x"))));
        }
      }
    }
}

TEST_CASE("complex edge values: zeros, signed infinities, huge and tiny parts") {
  const double inf = INFINITY;
  std::vector<C> v{{0, 0}, {3e30, 4e30}, {3e-30, -4e-30}, {0, 100}, {0, -100}, {-4, 0}, {inf, 1}, {2, 0}};
  for (auto t : kComplex) {
    Array z = carray(v, {std::int64_t(v.size())}, t);
    auto f = ts::jit([](const Array& z) { return std::make_tuple(ts::abs(z), ts::sqrt(z), ts::tanh(z), ts::exp(z)); });
    auto [a, s, th, e] = f(z);
    auto av = a.astype(ts::float64).to_vector<double>();
    CHECK(av[0] == 0);
    CHECK(av[1] == doctest::Approx(5e30).epsilon(1e-6));  // no overflow in the squares
    CHECK(av[2] == doctest::Approx(5e-30).epsilon(1e-6));  // no underflow either
    CHECK(std::isinf(av[6]));
    auto sv = host(s);
    CHECK(sv[0] == C(0, 0));
    CHECK(std::abs(sv[5] - C(0, 2)) < 1e-6);  // sqrt(-4) = 2i
    CHECK(std::abs(sv[7] - std::sqrt(C(2))) < 1e-6);
    auto tv = host(th);
    CHECK(std::abs(tv[3] - std::tanh(C(0, 100))) < 1e-4);
    auto ev = host(e);
    CHECK(ev[7].imag() == 0);  // exp of a real value has no imaginary part
    CHECK(ev[0] == C(1, 0));
  }
  // 0^w: 1 for w = 0, else 0
  auto p = host(ts::power(ts::array(std::vector<C>{{0, 0}, {0, 0}}), ts::array(std::vector<C>{{0, 0}, {2, 1}})));
  CHECK(p[0] == C(1, 0));
  CHECK(p[1] == C(0, 0));
}

TEST_CASE("complex reductions, dots and shape ops equal the reference interpreter on 1..8 devices") {
  using Fn = std::function<Array(const std::vector<Array>&)>;
  std::vector<std::pair<std::string, Fn>> fns{
      {"sum", [](const std::vector<Array>& x) { return ts::sum(x[0] * x[1], {0}); }},
      {"sum all", [](const std::vector<Array>& x) { return ts::sum(ts::exp(x[0])) + ts::mean(x[1]); }},
      {"matmul", [](const std::vector<Array>& x) { return ts::matmul(x[0], ts::transpose(x[1], {1, 0})); }},
      {"matmul contracted over the split", [](const std::vector<Array>& x) { return ts::matmul(ts::transpose(x[0], {1, 0}), x[1]); }},
      {"shape ops", [](const std::vector<Array>& x) {
         Array c = ts::concatenate({x[0], ts::conj(x[1])}, 1);
         return ts::pad(c, {{1, 0}, {0, 2}}).index({ts::slice(0, std::nullopt, 2), ts::all}).reshape({-1}).index({ts::slice(1, 9)});
       }},
      {"gather and scatter", [](const std::vector<Array>& x) {
         Array idx = ts::array(std::vector<int>{2, 0, 2});
         Array g = ts::take(x[0], idx, 0);
         return x[1].at({idx}).add(g * C(0, 1)).at({1}).set(C(7, -7));
       }},
      {"mixed real and complex", [](const std::vector<Array>& x) {
         return ts::abs(x[0]) * x[1] + ts::real(x[0] * x[1]) - ts::angle(x[1]) * C(0, 1);
       }},
      {"broadcast, transpose", [](const std::vector<Array>& x) {
         return ts::transpose(ts::broadcast_to(ts::expand_dims(x[0], 0), {2, x[0].shape()[0], 3}), {2, 1, 0}) * 2.0;
       }},
  };
  const auto all = ts::devices();
  for (auto t : kComplex)
    for (std::int64_t rows : {8, 5})
      for (int n = 1; n <= 8; ++n) {
        if (n != 1 && n != 2 && n != 3 && n != 8) continue;
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + n), {n}, {"x"});
        Array a = ts::device_put(carray(rand_c(3, size_t(rows * 3)), {rows, 3}, t), ts::NamedSharding(mesh, P("x")));
        Array b = ts::device_put(carray(rand_c(4, size_t(rows * 3)), {rows, 3}, t), ts::NamedSharding(mesh, P("x")));
        for (auto& [name, fn] : fns) {
          CAPTURE(name);
          CAPTURE(n);
          CAPTURE(rows);
          CAPTURE(ts::dtype_name(t));
          ts::testing::check(fn, {a, b}, false);
        }
      }
}

TEST_CASE("complex collectives in shard_map: psum, all_gather, ppermute, psum_scatter, all_to_all") {
  ts::Mesh mesh(ts::devices(), {8}, {"x"});
  for (auto t : kComplex) {
    auto v = rand_c(5, 16);
    Array x = ts::device_put(carray(v, {16}, t), ts::NamedSharding(mesh, P("x")));
    auto vh = host(x);
    auto total = ts::shard_map([](Array b) { return ts::psum(ts::sum(b), "x"); }, mesh, P("x"), P())(x);
    C want = 0;
    for (auto z : vh) want += z;
    check_close(total, {want}, tol_of(t) * 4);
    auto gathered = ts::shard_map([](Array b) { return ts::all_gather(b, "x", {.axis = 0, .tiled = true}); }, mesh, P("x"),
                                  P(), {.check_vma = false})(x);
    check_close(gathered, vh, 0);
    std::vector<std::pair<int, int>> perm;
    for (int i = 0; i < 8; ++i) perm.push_back({i, (i + 1) % 8});
    auto shifted = ts::shard_map([&](Array b) { return ts::ppermute(b, "x", perm); }, mesh, P("x"), P("x"))(x);
    std::vector<C> sw(16);
    for (int i = 0; i < 16; ++i) sw[size_t((i + 2) % 16)] = vh[size_t(i)];
    check_close(shifted, sw, 0);
    Array y = ts::device_put(carray(rand_c(6, 64), {8, 8}, t), ts::NamedSharding(mesh, P("x")));
    ts::testing::check(
        [&](const std::vector<Array>& a) {
          return ts::shard_map([](Array b) { return ts::psum_scatter(b * b, "x", {.scatter_dimension = 1, .tiled = true}); },
                               mesh, P("x"), P("x"))(a[0]);
        },
        {y}, false);
    ts::testing::check(
        [&](const std::vector<Array>& a) {
          return ts::shard_map([](Array b) { return ts::all_to_all(ts::exp(b), "x", 1, 0, {.tiled = true}); }, mesh, P("x"),
                               P("x"))(a[0]);
        },
        {y}, false);
    CHECK_THROWS_AS(ts::shard_map([](Array b) { return ts::pmax(b, "x"); }, mesh, P("x"), P("x"))(x), ts::TypeError);
  }
}

TEST_CASE("complex derivatives follow JAX: grad of a real function is df/dx - i df/dy") {
  auto abs2 = [](const Array& z) { return ts::abs(z) * ts::abs(z); };
  auto g = ts::grad(abs2)(ts::array(C64(3, 4)));
  CHECK(g.dtype() == ts::complex64);
  check_close(g, {C(6, -8)}, 1e-6);
  // Several real functions of a complex vector against central differences
  // along the real and imaginary parts.
  using Fn = std::function<Array(const Array&)>;
  std::vector<std::pair<const char*, Fn>> fns{
      {"|exp(z) z|^2 summed", [](const Array& z) { return ts::sum(ts::real(ts::exp(z) * z * ts::conj(ts::exp(z) * z))); }},
      {"imag(sin z / (z + 3))", [](const Array& z) { return ts::sum(ts::imag(ts::sin(z) / (z + 3.0))); }},
      {"abs of sqrt and log", [](const Array& z) { return ts::sum(ts::abs(ts::sqrt(z)) + ts::real(ts::log(z)) * ts::angle(z)); }},
      {"a complex matmul", [](const Array& z) {
         Array m = ts::reshape(z, {2, 2});
         return ts::real(ts::sum(ts::matmul(m, ts::conj(ts::transpose(m, {1, 0}))) * C(0.5, 2)));
       }},
      {"via complex()", [](const Array& z) { return ts::sum(ts::abs(ts::complex(ts::imag(z), ts::real(z) * 2.0)) * ts::real(z)); }},
  };
  auto v = rand_c(7, 4, 0.5, 1.5);
  Array z = ts::array(v);
  for (auto& [name, f] : fns) {
    CAPTURE(name);
    auto gv = host(ts::jit(ts::grad(f))(z));
    auto eval = [&](const std::vector<C>& w) { return ts::jit(f)(ts::array(w)).item<double>(); };
    const double h = 1e-6;
    for (size_t i = 0; i < v.size(); ++i) {
      auto p = v, m = v;
      p[i] += h, m[i] -= h;
      double dx = (eval(p) - eval(m)) / (2 * h);
      p = v, m = v;
      p[i] += C(0, h), m[i] -= C(0, h);
      double dy = (eval(p) - eval(m)) / (2 * h);
      CAPTURE(i);
      CHECK(std::abs(gv[i] - C(dx, -dy)) < 1e-6 * (1 + std::abs(gv[i])));
    }
  }
  // Forward mode of a holomorphic function: jvp(f)(z; t) = f'(z) t.
  auto [y, ty] = ts::jvp([](const Array& z) { return ts::exp(z) * z; }, ts::array(C(0.5, -1)), ts::array(C(2, 1)));
  C z0(0.5, -1);
  check_close(ty, {(std::exp(z0) * z0 + std::exp(z0)) * C(2, 1)}, 1e-6);  // weak complex scalars: complex64
  // vjp of a holomorphic function: the cotangent times f'(z) (no conjugation).
  auto [out, pullback] = ts::vjp([](const Array& z) { return z * z; }, ts::array(C(1, 2)));
  check_close(std::get<0>(pullback(ts::array(C(1, 0)))), {C(2, 4)}, 1e-6);
}

TEST_CASE("complex bad input: ordering, lossy copies, complex grad outputs, unsupported ops name themselves") {
  Array z = ts::array(std::vector<C64>{{1, 2}, {3, 4}});
  CHECK_THROWS_AS(z < z, ts::TypeError);
  CHECK_THROWS_AS(ts::maximum(z, z), ts::TypeError);
  CHECK_THROWS_AS(ts::max(z), ts::TypeError);
  CHECK_THROWS_AS(ts::argmax(z), ts::TypeError);
  CHECK_THROWS_AS(ts::floor(z), ts::TypeError);
  CHECK_THROWS_AS(z.to_vector<float>(), ts::TypeError);
  CHECK_THROWS_AS(ts::grad([](const Array& z) { return ts::sum(z); })(z), ts::TypeError);
  CHECK_THROWS_AS(ts::complex(z, z), ts::TypeError);
  // A complex product, and linear algebra with a complex operand, compute in complex: never on a real cast.
  check_close(ts::prod(z), {C(-5, 10)}, 1e-6);
  Array m = ts::eye(2).astype(ts::complex64);
  check_close(ts::linalg::solve(ts::eye(2), z), host(z), 1e-6);
  check_close(ts::linalg::solve(m, z), host(z), 1e-6);
  check_close(ts::linalg::triangular_solve(ts::eye(2), z.reshape({2, 1}), {.left_side = true}), host(z), 1e-6);
  CHECK(ts::linalg::triangular_solve(ts::eye(2), z.reshape({2, 1}), {.left_side = true}).dtype() == ts::complex64);
  check_close(ts::linalg::inv(m), host(m), 1e-6);
  check_close(ts::linalg::cholesky(m), host(m), 1e-6);
  CHECK_THROWS_AS(ts::linalg::cholesky(ts::eye(2).astype(ts::int32).reshape({4})), ts::ShapeError);
  try {
    (void)(z < z);
  } catch (const ts::TypeError& e) {
    CHECK(std::string(e.what()).find("complex64[2]") != std::string::npos);
  }
}
