// Bad input to the everyday surface (numpy.hpp, sorting.hpp, nn.hpp,
// special.hpp, initializers.hpp, the lax scans and top_k, the jax.random
// distributions): each user mistake must raise a ts::Error subclass, never
// crash, never throw ts::InternalError (a std::logic_error, not a ts::Error)
// or a bare std::exception, and never quietly return an answer.
//
// Which inputs count as errors follows JAX (and NumPy where JAX defers to it):
// an axis out of range, a negative count or size, a rank or dtype a function
// does not take, a mode or method it does not know, sizes that do not divide,
// a value-dependent size under jit without a static `size` / `length` /
// `range`.
//
// Two kinds of checks:
//  - CHECK_THROWS_AS(settle(expr), ts::XError) where the class is clear: the
//    class bad_input_test.cpp maps JAX's error to (an axis out of range or a
//    broadcast that fails: ShapeError; a negative count, a bad mode or order:
//    ValueError; a dtype the function does not take: TypeError; a traced value
//    where a concrete one is needed: ConcretizationError);
//  - CHECK_TS_ERROR(expr) elsewhere: passes on any ts::Error subclass, fails
//    (naming the C++ type and message) on any other exception, and fails on
//    no exception at all.
// settle() waits for every array in the result, so that an error cannot hide
// in asynchronous work. The checks run eagerly, under ts::jit, and on arrays
// split over a 1-D mesh of every device.
#include <doctest/doctest.h>

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

namespace sp = ts::scipy::special;
namespace nninit = ts::nn::initializers;

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

// Waits for every array of a result (an Array, a vector, a pair, a tuple, a
// Boost.Hana struct such as lax::TopK or UniqueAll).
template <class T>
void settle(const T& result) {
  for (const auto& a : ts::tree::flatten(result)) a.block_until_ready();
}

// Runs f and settles its result; it must throw a ts::Error subclass.
template <class F>
void expect_ts_error(const char* what, F&& f) {
  try {
    using R = std::decay_t<decltype(f())>;
    if constexpr (std::is_void_v<R>) f();
    else settle(f());
  } catch (const ts::Error&) {
    return;
  } catch (const std::exception& e) {
    FAIL_CHECK((std::string(what) + "\n  expected a ts::Error subclass, threw " + demangle(typeid(e).name()) + ": " +
                e.what()));
    return;
  } catch (...) {
    FAIL_CHECK((std::string(what) + "\n  expected a ts::Error subclass, threw something not derived from std::exception"));
    return;
  }
  FAIL_CHECK((std::string(what) + "\n  did not throw (expected a ts::Error subclass)"));
}

#define CHECK_TS_ERROR(...) expect_ts_error(#__VA_ARGS__, [&] { return __VA_ARGS__; })

const auto add2 = [](const ts::Array& a, const ts::Array& b) { return a + b; };

}  // namespace

TEST_CASE("scans: axes out of range, dtypes the lax scans do not take") {
  auto x = ts::arange(12.0).reshape({3, 4});
  // JAX: jnp.cumsum(x, axis=5) on a 2-D array raises (an AxisError).
  CHECK_THROWS_AS(settle(ts::cumsum(x, 5)), ts::ShapeError);
  CHECK_TS_ERROR(ts::cumprod(x, -3));
  CHECK_TS_ERROR(ts::nancumsum(x, 2));
  // jnp.cumulative_sum needs an axis for arrays of rank > 1.
  CHECK_THROWS_AS(settle(ts::cumulative_sum(x)), ts::ValueError);
  CHECK_TS_ERROR(ts::lax::cumsum(x, 2));
  CHECK_TS_ERROR(ts::lax::cummax(x, -3));
  CHECK_TS_ERROR(ts::lax::cumlogsumexp(x, 2));
  // lax.cumsum of a boolean array: "cumsum does not accept dtype bool".
  CHECK_THROWS_AS(settle(ts::lax::cumsum(ts::ones({4}, ts::bool_))), ts::TypeError);
}

TEST_CASE("sorting, searching, counting, order statistics and set functions") {
  auto x = ts::arange(12.0).reshape({3, 4});
  auto v = ts::arange(8.0);
  auto xi = ts::arange(8);
  auto s = ts::array(1.0f);
  // lax.top_k: k larger than the last dimension, a scalar operand.
  CHECK_THROWS_AS(settle(ts::lax::top_k(v, 9)), ts::ValueError);
  CHECK_TS_ERROR(ts::lax::top_k(s, 1));
  CHECK_TS_ERROR(ts::sort(x, 2, {.descending = true}));
  CHECK_THROWS_AS(settle(ts::lax::sort({x, x}, -1, 3)), ts::ValueError);  // num_keys > operands
  // searchsorted and digitize need a 1-D sorted array, side 'left' or 'right'.
  CHECK_TS_ERROR(ts::searchsorted(x, v));
  CHECK_THROWS_AS(settle(ts::searchsorted(v, v, "middle")), ts::ValueError);
  CHECK_TS_ERROR(ts::digitize(v, x));
  // bincount: integer input; JAX's zeros(length) rejects a negative length.
  CHECK_THROWS_AS(settle(ts::bincount(v)), ts::TypeError);
  CHECK_TS_ERROR(ts::bincount(xi, {.length = -1}));
  // histogram: bins must be positive (NumPy; JAX also for bins < 0).
  CHECK_THROWS_AS(settle(ts::histogram(v, 0)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::histogram_bin_edges(v, -3)), ts::ValueError);
  // Order statistics: axes and methods.
  CHECK_TS_ERROR(ts::quantile(x, 0.5, 5));
  CHECK_THROWS_AS(settle(ts::percentile(v, 50.0, std::nullopt, "bogus")), ts::ValueError);
  CHECK_TS_ERROR(ts::nanmedian(x, 2));
  // A negative static size.
  CHECK_TS_ERROR(ts::unique(v, {.size = -1}));
  CHECK_TS_ERROR(ts::nonzero(v, {.size = -1}));
  CHECK_TS_ERROR(ts::intersect1d(v, v, {.size = -2}));
  // JAX: "Calling nonzero on 0d arrays is not allowed".
  CHECK_TS_ERROR(ts::nonzero(s));
  CHECK_TS_ERROR(ts::lexsort({}));
  CHECK_TS_ERROR(ts::lax::associative_scan(add2, x, {.axis = 5}));
  CHECK_TS_ERROR(ts::lax::reduce(x, 0.0, add2, {5}));
  // compress: a 1-D condition; under jit a static size (JAX's rule).
  CHECK_THROWS_AS(settle(ts::compress(ts::ones({2, 2}, ts::bool_), x)), ts::ValueError);
  CHECK_THROWS_AS(ts::jit([](const ts::Array& c, const ts::Array& a) { return ts::compress(c, a, 0); })(
                      ts::ones({3}, ts::bool_), x),
                  ts::ConcretizationError);
  CHECK(ts::jit([](const ts::Array& c, const ts::Array& a) { return ts::compress(c, a, 0, {.size = 2}); })(
            ts::ones({3}, ts::bool_), x)
            .shape() == ts::Shape{2, 4});
  // A true entry past the axis.
  CHECK_THROWS_AS(settle(ts::compress(ts::ones({5}, ts::bool_), x, 0)), ts::ValueError);
  // place: never in place; a mask of arr's size; some vals.
  CHECK_THROWS_AS(settle(ts::place(v, v > 2, ts::ones({1}), true)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::place(v, ts::ones({3}, ts::bool_), ts::ones({1}))), ts::ShapeError);
  CHECK_THROWS_AS(settle(ts::place(v, v > 2, ts::ones({0}))), ts::ValueError);
  // poly of a non-square matrix: JAX's ValueError.
  CHECK_THROWS_AS(settle(ts::poly(ts::ones({2, 3}))), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::roots(ts::ones({2, 2}))), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::polydiv(v, ts::ones({0}))), ts::ValueError);
  // gradient: spacings none, one or one per axis; coordinates of the axis's length.
  CHECK_THROWS_AS(settle(ts::gradient(x, {ts::array(1.0), ts::array(1.0), ts::array(1.0)}, {0, 1})), ts::TypeError);
  CHECK_THROWS_AS(settle(ts::gradient(x, {ts::arange(5.0)}, {0})), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::gradient(ts::ones({1, 4}), std::vector<ts::Array>{})), ts::ValueError);
  // insert: values of higher rank, or not broadcasting to the slot.
  CHECK_THROWS_AS(settle(ts::insert(x, 1, ts::ones({1, 2, 3}), 0)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::insert(x, 1, ts::ones({2, 3}), 0)), ts::ValueError);
}

TEST_CASE("shape helpers, indexing helpers, polynomials and statistics") {
  auto x = ts::arange(12.0).reshape({3, 4});
  auto v = ts::arange(8.0);
  auto s = ts::array(1.0f);
  auto c2 = ts::arange(2.0);
  // take / take_along_axis: ranks, axes, index dtypes.
  CHECK_THROWS_AS(settle(ts::take_along_axis(x, ts::arange(3), 0)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::take_along_axis(x, ts::zeros({3, 4}), 0)), ts::TypeError);
  CHECK_TS_ERROR(ts::take(x, ts::arange(2), 5));
  // reshape and the split family.
  CHECK_THROWS_AS(settle(ts::reshape(x, {5, 5})), ts::ShapeError);
  CHECK_TS_ERROR(ts::split(v, 3));
  CHECK_TS_ERROR(ts::split(v, std::vector<std::int64_t>{5, 2}));  // JAX: lax.split sizes [5, -3, 6] must be nonnegative
  CHECK_THROWS_AS(settle(ts::array_split(v, 0)), ts::ValueError);
  CHECK_TS_ERROR(ts::hsplit(v, 3));
  CHECK_TS_ERROR(ts::dsplit(x, 2));
  // diff: negative order, 0-d input.
  CHECK_THROWS_AS(settle(ts::diff(v, -1)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::diff(s)), ts::ValueError);
  CHECK_TS_ERROR(ts::repeat(v, -1));
  CHECK_THROWS_AS(settle(ts::meshgrid({v, v}, "xz")), ts::ValueError);
  CHECK_TS_ERROR(ts::meshgrid({x, v}));  // JAX: arguments to meshgrid must be 1D
  CHECK_TS_ERROR(ts::diagonal(x, 0, 1, 1));
  CHECK_THROWS_AS(settle(ts::rot90(v)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::matrix_transpose(v)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::cross(ts::zeros({4}), ts::zeros({4}))), ts::ValueError);
  CHECK_TS_ERROR(ts::vecdot(ts::zeros({3, 4}), ts::zeros({3, 1})));  // JAX: "axes must match"
  CHECK_THROWS_AS(settle(ts::logspace(0, 1, -1)), ts::ValueError);
  // select, choose.
  CHECK_THROWS_AS(settle(ts::select({v > 0.0}, {v, v})), ts::ValueError);
  CHECK_TS_ERROR(ts::choose(ts::array({0, 5}), {c2, c2}));  // mode "raise": JAX raises "invalid entry in choice array"
  CHECK_TS_ERROR(ts::choose(ts::array({0.5f, 1.0f}), {c2, c2}, "clip"));  // JAX: `a` array must be integer typed
  // Index helpers.
  CHECK_THROWS_AS(settle(ts::tril_indices_from(v)), ts::ValueError);
  CHECK_TS_ERROR(ts::ravel_multi_index({ts::array({0, 5}), ts::array({0, 1})}, {2, 3}, "raise"));
  CHECK_TS_ERROR(ts::ravel_multi_index({ts::array({0.5f}), ts::array({1.0f})}, {2, 3}));  // JAX: only int indices
  CHECK_TS_ERROR(ts::delete_(v, 8));
  CHECK_TS_ERROR(ts::compress(ts::ones({2, 2}, ts::bool_), x, 0));  // JAX: condition must be a 1D array
  // Polynomials, convolutions, statistics, NaN-aware reductions.
  CHECK_THROWS_AS(settle(ts::vander(x)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::polyder(v, -1)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::convolve(v, v, "bogus")), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::cov(ts::zeros({2, 2, 2}))), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::interp(v, v, ts::arange(5.0))), ts::ValueError);
  CHECK_TS_ERROR(ts::nansum(x, 5));
}

TEST_CASE("elementwise and scipy.special: dtypes they do not take, shapes that do not broadcast") {
  auto x = ts::arange(12.0).reshape({3, 4});
  auto v = ts::arange(8.0);
  auto xi = ts::arange(8);
  auto c = ts::complex(ts::ones({3}), ts::ones({3}));
  auto z5 = ts::zeros({5});
  // Integer-only functions given floats.
  CHECK_THROWS_AS(settle(ts::bitwise_and(v, v)), ts::TypeError);
  CHECK_TS_ERROR(ts::left_shift(v, xi));
  CHECK_TS_ERROR(ts::gcd(v, v));
  // Real-only functions given complex numbers.
  CHECK_THROWS_AS(settle(ts::fabs(c)), ts::TypeError);
  CHECK_THROWS_AS(settle(ts::frexp(c)), ts::TypeError);
  CHECK_TS_ERROR(ts::isposinf(c));  // JAX: "isposinf/isneginf are not well defined for complex types"
  CHECK_TS_ERROR(ts::trunc(c));  // JAX: lax.lt and floor/ceil reject complex
  CHECK_TS_ERROR(ts::cbrt(c));   // JAX: lax.cbrt takes floats only
  CHECK_TS_ERROR(ts::logaddexp(x, z5));
  // scipy.special: lax's float-only primitives (lgamma, erf) and ndtri's
  // dtype check reject complex input.
  CHECK_TS_ERROR(sp::gammaln(c));
  CHECK_TS_ERROR(sp::erf(c));
  CHECK_TS_ERROR(sp::ndtri(c));
  CHECK_TS_ERROR(sp::xlogy(x, z5));
}

TEST_CASE("nn, nn.initializers and random distributions") {
  auto x = ts::arange(12.0).reshape({3, 4});
  auto k = ts::random::key(0);
  // jax.nn.
  CHECK_TS_ERROR(ts::nn::glu(ts::zeros({3, 5})));  // an odd axis cannot be halved
  CHECK_TS_ERROR(ts::nn::standardize(x, 5));
  auto q = ts::zeros({2, 3, 4, 8}), kv = ts::zeros({2, 5, 4, 8});
  CHECK_TS_ERROR(ts::nn::dot_product_attention(q, ts::zeros({2, 5, 3, 8}), ts::zeros({2, 5, 3, 8})));  // 3 !| 4 heads
  // JAX: "key dtype should be float32, but got float64"; "mask dtype should be bool".
  CHECK_TS_ERROR(ts::nn::dot_product_attention(q, ts::zeros({2, 5, 4, 8}, ts::float64), ts::zeros({2, 5, 4, 8}, ts::float64)));
  CHECK_TS_ERROR(ts::nn::dot_product_attention(q, kv, kv, {.mask = ts::ones({2, 4, 3, 5})}));
  // jax.nn.initializers.
  CHECK_THROWS_AS(settle(nninit::glorot_uniform()(k, {5})), ts::ValueError);  // needs at least 2-D
  CHECK_THROWS_AS(settle(nninit::variance_scaling(1.0, "fan_bogus", "normal")(k, {3, 4})), ts::ValueError);
  CHECK_TS_ERROR(nninit::normal()(k, {2, 2}, ts::int32));
  // jax.random distributions.
  CHECK_TS_ERROR(ts::random::categorical(k, x, 5));
  CHECK_THROWS_AS(settle(ts::random::choice(k, 3, {5}, false)), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::random::choice(k, 4, {2}, true, ts::ones({3}))), ts::ValueError);
  // The parameters broadcast, but not to the shape asked for (JAX's _check_shape: ValueError).
  CHECK_THROWS_AS(settle(ts::random::gamma(k, ts::ones({3}), ts::Shape{1})), ts::ValueError);
  CHECK_TS_ERROR(ts::random::poisson(k, 3.0, std::nullopt, ts::float32));
  CHECK_TS_ERROR(ts::random::geometric(k, 0.5, {3}, ts::float32));  // JAX: must be an int dtype
  CHECK_THROWS_AS(settle(ts::random::dirichlet(k, ts::array(1.0f))), ts::ValueError);
  CHECK_THROWS_AS(settle(ts::random::multivariate_normal(k, ts::zeros({3}), ts::eye(2))), ts::ValueError);
  CHECK_TS_ERROR(ts::random::wrap_key_data(ts::zeros({3})));
}

TEST_CASE("under jit: the same errors while tracing, and value-dependent sizes") {
  auto x = ts::arange(12.0).reshape({3, 4});
  auto v = ts::arange(8.0);
  auto xi = ts::arange(8);
  CHECK_THROWS_AS(settle(ts::jit([](const ts::Array& a) { return ts::cumsum(a, 5); })(x)), ts::ShapeError);
  CHECK_THROWS_AS(settle(ts::jit([](const ts::Array& a) { return ts::lax::top_k(a, 9).values; })(v)), ts::ValueError);
  CHECK_TS_ERROR(ts::jit([](const ts::Array& a) { return ts::take_along_axis(a, ts::arange(3), 0); })(x));
  CHECK_TS_ERROR(ts::jit([](const ts::Array& a) { return ts::diff(a, -1); })(v));
  CHECK_TS_ERROR(ts::jit([](const ts::Array& a) { return ts::searchsorted(a, ts::arange(3.0)); })(x));
  CHECK_TS_ERROR(ts::jit([](const ts::Array& a) { return ts::nn::one_hot(a, -2); })(xi));
  CHECK_THROWS_AS(settle(ts::jit([](const ts::Array& a) { return ts::histogram(a, 0).first; })(v)), ts::ValueError);
  // Sizes that depend on traced values need a static size / length, as in JAX.
  CHECK_THROWS_AS(settle(ts::jit([](const ts::Array& a) { return ts::unique(a); })(v)), ts::ConcretizationError);
  CHECK_THROWS_AS(settle(ts::jit([](const ts::Array& a) { return ts::nonzero(a)[0]; })(v)), ts::ConcretizationError);
  CHECK_THROWS_AS(settle(ts::jit([](const ts::Array& a) { return ts::bincount(a); })(xi)), ts::ConcretizationError);
}

TEST_CASE("on arrays split over every device") {
  const int n = 2 * ts::device_count();
  ts::Mesh mesh(ts::devices(), {ts::device_count()}, {"x"});
  ts::NamedSharding sh(mesh, P("x"));
  auto s1 = ts::device_put(ts::arange(double(n)), sh);                      // f32[n], split
  auto s2 = ts::device_put(ts::arange(double(3 * n)).reshape({n, 3}), sh);  // f32[n, 3], rows split
  auto si = ts::device_put(ts::arange(n), sh);                              // i32[n], split
  CHECK_THROWS_AS(settle(ts::cumsum(s2, 5)), ts::ShapeError);
  CHECK_THROWS_AS(settle(ts::lax::top_k(s1, n + 1)), ts::ValueError);
  CHECK_TS_ERROR(ts::searchsorted(s2, s1));
  CHECK_THROWS_AS(settle(ts::bincount(s1)), ts::TypeError);
  CHECK_THROWS_AS(settle(ts::histogram(s1, 0)), ts::ValueError);
  CHECK_TS_ERROR(ts::take_along_axis(s2, si, 0));
  CHECK_TS_ERROR(ts::reshape(s2, {n + 1, 3}));
  CHECK_TS_ERROR(ts::diff(s1, -2));
  CHECK_TS_ERROR(ts::nn::glu(s2));  // 3 columns cannot be halved
  CHECK_TS_ERROR(ts::jit([](const ts::Array& a) { return ts::cumsum(a, 5); })(s2));
  CHECK_TS_ERROR(ts::jit([n](const ts::Array& a) { return ts::lax::top_k(a, n + 1).values; })(s1));
}
