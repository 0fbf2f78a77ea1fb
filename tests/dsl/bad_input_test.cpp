// Bad input, everywhere: every user mistake throws one specific ts::Error
// subclass whose message names the offending shapes, dtypes, values and
// device ids. Table-driven: each row is one bad input, the class it must
// throw, and the strings its message must contain. A row fails (and the
// others still run) on no exception, on another class, on a non-tessel
// exception (std::out_of_range, std::bad_alloc, ...) or on a message that
// lacks a needle. Zero-size inputs that must keep working are checked at the end.
#include <doctest/doctest.h>

#include <cxxabi.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include <tessel/tessel.hpp>

namespace ts = tessel;
using ts::P;

namespace {

constexpr std::int64_t p2(int k) { return std::int64_t(1) << k; }
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// The expected class of a row. ShapeOrType: either is acceptable (e.g. item()
// on a non-scalar: the header says ShapeError, JAX says TypeError).
enum class K { Shape, Type, Sharding, Device, Resource, Value, ShapeOrType };

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

// "ts::ShapeError: <message>", or the C++ type of a non-tessel exception.
std::string describe(const std::exception& e) {
  std::string cls;
  if (dynamic_cast<const ts::ShapeError*>(&e)) cls = "ts::ShapeError";
  else if (dynamic_cast<const ts::TypeError*>(&e)) cls = "ts::TypeError";
  else if (dynamic_cast<const ts::ShardingError*>(&e)) cls = "ts::ShardingError";
  else if (dynamic_cast<const ts::DeviceMismatchError*>(&e)) cls = "ts::DeviceMismatchError";
  else if (dynamic_cast<const ts::ResourceExhaustedError*>(&e)) cls = "ts::ResourceExhaustedError";
  else if (dynamic_cast<const ts::ValueError*>(&e)) cls = "ts::ValueError";
  else if (dynamic_cast<const ts::ConcretizationError*>(&e)) cls = "ts::ConcretizationError";
  else if (dynamic_cast<const ts::Error*>(&e)) cls = "ts::Error (no specific subclass)";
  else if (dynamic_cast<const ts::InternalError*>(&e)) cls = "ts::InternalError";
  else cls = "non-tessel " + demangle(typeid(e).name());
  return cls + ": " + e.what();
}

template <class E>
const char* error_name() {
  if constexpr (std::is_same_v<E, ts::ShapeError>) return "ts::ShapeError";
  else if constexpr (std::is_same_v<E, ts::TypeError>) return "ts::TypeError";
  else if constexpr (std::is_same_v<E, ts::ShardingError>) return "ts::ShardingError";
  else if constexpr (std::is_same_v<E, ts::DeviceMismatchError>) return "ts::DeviceMismatchError";
  else if constexpr (std::is_same_v<E, ts::ResourceExhaustedError>) return "ts::ResourceExhaustedError";
  else if constexpr (std::is_same_v<E, ts::ValueError>) return "ts::ValueError";
  else return "a ts::Error subclass";
}

int g_cases = 0;  // bad inputs checked so far (all test cases)

// Runs f; it must throw one of Es (a ts::Error subclass) whose message holds every needle.
template <class... Es>
void expect_error_in(const std::string& what, const std::function<void()>& f, const std::vector<std::string>& needles) {
  ++g_cases;
  std::string expected;
  ((expected += (expected.empty() ? "" : " or "), expected += error_name<Es>()), ...);
  std::string got, msg;
  bool ok = false;
  try {
    f();
    got = "no exception";
  } catch (const std::exception& e) {
    if ((dynamic_cast<const Es*>(&e) || ...)) {
      ok = true;
      msg = e.what();
    } else {
      got = describe(e);
    }
  } catch (...) {
    got = "an exception not derived from std::exception";
  }
  if (!ok) {
    FAIL_CHECK(what << "\n  expected " << expected << ", got " << got);
    return;
  }
  for (const auto& n : needles)
    if (msg.find(n) == std::string::npos)
      FAIL_CHECK(what << "\n  " << expected << " message lacks \"" << n << "\": " << msg);
}

// The helper by the exception class: expect_error<ts::ShapeError>([&] { ... }, {"-2"}).
template <class E, class F>
void expect_error(F&& f, std::initializer_list<std::string> needles, const std::string& what = "(inline case)") {
  expect_error_in<E>(what, std::function<void()>(std::forward<F>(f)), std::vector<std::string>(needles));
}

// Runs the callable and waits for any array it returns (errors must not hide in async work).
template <class F>
std::function<void()> sink(F fn) {
  return [fn]() {
    using R = std::decay_t<decltype(fn())>;
    if constexpr (std::is_void_v<R>) fn();
    else if constexpr (std::is_same_v<R, ts::Array>) fn().block_until_ready();
    else (void)fn();
  };
}

struct Case {
  std::string what;
  std::function<void()> f;
  K kind;
  std::vector<std::string> needles;
};

// One row: the expression (also its description), the class, the needles.
#define BAD(expr, kind, ...) Case{#expr, sink([&] { return expr; }), K::kind, {__VA_ARGS__}}

void run(const std::vector<Case>& cases) {
  static const bool trace = std::getenv("TESSEL_TEST_TRACE") != nullptr;  // which case crashed
  for (const auto& c : cases) {
    if (trace) std::fprintf(stderr, "case: %s\n", c.what.c_str());
    switch (c.kind) {
      case K::Shape: expect_error_in<ts::ShapeError>(c.what, c.f, c.needles); break;
      case K::Type: expect_error_in<ts::TypeError>(c.what, c.f, c.needles); break;
      case K::Sharding: expect_error_in<ts::ShardingError>(c.what, c.f, c.needles); break;
      case K::Device: expect_error_in<ts::DeviceMismatchError>(c.what, c.f, c.needles); break;
      case K::Resource: expect_error_in<ts::ResourceExhaustedError>(c.what, c.f, c.needles); break;
      case K::Value: expect_error_in<ts::ValueError>(c.what, c.f, c.needles); break;
      case K::ShapeOrType: expect_error_in<ts::ShapeError, ts::TypeError>(c.what, c.f, c.needles); break;
    }
  }
  MESSAGE(cases.size() << " bad inputs in this test case, " << g_cases << " so far");
}

// A "must work" check: an exception is a failure that names its class, and the next check still runs.
void works(const char* what, const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    FAIL_CHECK(what << "\n  must not throw, threw " << describe(e));
  }
}
#define WORKS(...) works(#__VA_ARGS__, [&] { __VA_ARGS__; })

std::vector<ts::Device> first(int n) {
  auto d = ts::devices();
  d.erase(d.begin() + n, d.end());
  return d;
}

const auto twice = [](const ts::Array& v) { return v * 2.0; };
const auto add2 = [](const ts::Array& a, const ts::Array& b) { return a + b; };
const auto sumf = [](const ts::Array& v) { return ts::sum(v); };

}  // namespace

TEST_CASE("creation: negative, overflowing and unallocatable shapes, bad values") {
  const std::int64_t i64max = std::numeric_limits<std::int64_t>::max();
  const std::int64_t i64min = std::numeric_limits<std::int64_t>::min();
  run({
      BAD(ts::zeros({-1}), Shape, "-1"),
      BAD(ts::zeros({-2, 3}), Shape, "-2"),
      BAD(ts::zeros({3, -4}), Shape, "-4"),
      BAD(ts::zeros({2, 3, -1}), Shape, "-1"),
      BAD(ts::zeros({-1}, ts::int32), Shape, "-1"),
      BAD(ts::zeros({i64min}), Shape, "-9223372036854775808"),
      BAD(ts::ones({-5}), Shape, "-5"),
      BAD(ts::ones({4, -7}, ts::float64), Shape, "-7"),
      BAD(ts::full({-3}, 1.0, ts::float32), Shape, "-3"),
      BAD(ts::full({-3}, 2.5f), Shape, "-3"),
      BAD(ts::full({2, -6}, 1), Shape, "-6"),
      BAD(ts::eye(-1), Shape, "-1"),
      BAD(ts::eye(3, -2), Shape, "-2"),
      BAD(ts::eye(-4, 3), Shape, "-4"),
      BAD(ts::lax::iota(ts::float32, -1), Shape, "-1"),
      BAD(ts::lax::broadcasted_iota(ts::int32, {-3}, 0), Shape, "-3"),
      BAD(ts::lax::broadcasted_iota(ts::int32, {3, 4}, 2), Shape, "2"),
      // Element counts (or byte counts) that overflow int64: ShapeError naming the shape.
      BAD(ts::zeros({p2(62), 4}), Shape, "4611686018427387904"),
      BAD(ts::zeros({p2(32), p2(32)}), Shape, "4294967296"),
      BAD(ts::ones({i64max, 2}), Shape, "9223372036854775807"),
      BAD(ts::zeros({p2(61), 2}), Shape, "2305843009213693952"),  // 2^62 elements * 4 bytes
      BAD(ts::zeros({p2(61), 2}, ts::float64), Shape, "2305843009213693952"),
      BAD(ts::full({p2(40), p2(40)}, 1.0, ts::int32), Shape, "1099511627776"),
      // Sizes that fit int64 but can never be allocated: ResourceExhaustedError before allocating.
      BAD(ts::zeros({p2(40), p2(10)}), Resource, "1099511627776"),  // 4 PiB of float32
      BAD(ts::zeros({p2(40), p2(10)}, ts::int32), Resource, "1099511627776"),
      BAD(ts::ones({p2(40), p2(10)}, ts::float64), Resource, "1099511627776"),
      BAD(ts::full({p2(30), p2(30)}, 1.0, ts::float32), Resource, "1073741824"),
      BAD(ts::zeros({p2(61), 2}, ts::bool_), Resource, "2305843009213693952"),  // 4 EiB of bool
      BAD(ts::eye(p2(26)), Resource, "67108864"),
      BAD(ts::linspace(0, 1, p2(50)), Resource, "1125899906842624"),
      BAD(ts::arange(0.0, 1e16, 1.0, ts::float32), Resource),
      BAD(ts::outer(ts::zeros({p2(25)}), ts::zeros({p2(25)})), Resource, "33554432"),
      BAD(ts::nn::one_hot(ts::arange(3), p2(50)), Resource, "1125899906842624"),
      // Host data that does not fill its shape (or fills it only by a negative product).
      BAD(ts::array(std::vector<float>{1, 2, 3}, {2, 2}), Shape, "3"),
      BAD(ts::array(std::vector<int>{1, 2, 3, 4}, {3}), Shape, "4"),
      BAD(ts::array(std::vector<double>{}, {1}), Shape, "1"),
      BAD(ts::array(std::vector<float>{1, 2}, {-1, -2}), Shape, "-1"),
      BAD(ts::array(std::vector<float>{1, 2, 3, 4, 5, 6}, {-2, -3}), Shape, "-2"),
      BAD(ts::array(std::vector<int>{}, {0, -1}), Shape, "-1"),
      // Bounds and counts that are not shapes: ValueError.
      BAD(ts::arange(kNaN), Value, "nan"),
      BAD(ts::arange(kInf), Value, "inf"),
      BAD(ts::arange(0.0, kInf), Value, "inf"),
      BAD(ts::arange(-kInf, 0.0), Value, "inf"),
      BAD(ts::arange(kNaN, 5.0), Value, "nan"),
      BAD(ts::arange(0.0, kNaN), Value, "nan"),
      BAD(ts::arange(0.0, 10.0, kNaN), Value, "nan"),
      BAD(ts::arange(0.0, 1.0, 0.0), Value, "0"),
      BAD(ts::arange(0, 5, 0), Value, "0"),
      BAD(ts::linspace(0, 1, -1), Value, "-1"),
      BAD(ts::linspace(0, 1, -5, false), Value, "-5"),
      // Dtype names that do not exist.
      BAD(ts::dtype_from_name("complex256"), Type, "complex256"),
      BAD(ts::dtype_from_name("float128"), Type, "float128"),
      BAD(ts::dtype_from_name("not_a_dtype"), Type, "not_a_dtype"),
      BAD(ts::dtype_from_name(""), Type),
  });
}

TEST_CASE("reshape, broadcast_to, expand_dims, squeeze, transpose, concatenate, split, pad") {
  auto x = ts::arange(12.0).reshape({3, 4});
  auto z03 = ts::zeros({0, 3});
  auto s = ts::array(1.0f);
  run({
      BAD(x.reshape({-2, -3}), Shape, "-2"),
      BAD(x.reshape({-1, -1}), Shape, "-1"),
      BAD(x.reshape({5, 3}), Shape, "5"),
      BAD(x.reshape({13}), Shape, "13"),
      BAD(x.reshape({-1, 5}), Shape, "5"),
      BAD(x.reshape({-1, 0}), Shape, "0"),
      BAD(x.reshape({2, -3, 2}), Shape, "-3"),
      BAD(x.reshape({-4, -3}), Shape, "-4"),  // product 12, still negative
      BAD(x.reshape({}), Shape, "12"),
      BAD(x.reshape({p2(62), 4}), Shape, "4611686018427387904"),
      BAD(ts::reshape(x, {-5}), Shape, "-5"),
      BAD(z03.reshape({-1, 0}), Shape, "-1"),
      BAD(z03.reshape({4}), Shape, "4"),
      BAD(z03.reshape({0, -2}), Shape, "-2"),
      BAD(s.reshape({2}), Shape, "2"),
      BAD(ts::broadcast_to(x, {-1, 4}), Shape, "-1"),
      BAD(ts::broadcast_to(x, {3, -4}), Shape, "-4"),
      BAD(ts::broadcast_to(x, {-2, 3, 4}), Shape, "-2"),
      BAD(ts::broadcast_to(x, {4}), Shape, "3"),
      BAD(ts::broadcast_to(x, {3, 5}), Shape, "5"),
      BAD(ts::broadcast_to(x, {2, 4}), Shape, "2"),
      BAD(ts::broadcast_to(x, {6, 3, 8}), Shape, "8"),
      BAD(ts::broadcast_to(ts::arange(3), {3, 2}), Shape, "2"),
      BAD(ts::broadcast_to(ts::zeros({0}), {2}), Shape, "0"),
      BAD(ts::broadcast_to(x, {p2(62), 3, 4}), Shape, "4611686018427387904"),
      BAD(ts::broadcast_to(x, {p2(40), p2(10), 3, 4}), Resource, "1099511627776"),
      BAD(ts::expand_dims(x, 3), Shape, "3"),
      BAD(ts::expand_dims(x, -4), Shape, "-4"),
      BAD(ts::expand_dims(x, {0, 0}), Shape, "0"),
      BAD(ts::expand_dims(x, {0, 9}), Shape, "9"),
      BAD(ts::squeeze(x, 0), Shape, "3"),
      BAD(ts::squeeze(ts::zeros({1, 3}), -3), Shape, "-3"),
      BAD(ts::squeeze(ts::zeros({1, 1}), {0, 0}), Shape, "0"),
      BAD(ts::transpose(x, {0, 0}), Shape, "0"),
      BAD(ts::transpose(x, {0}), Shape, "0"),
      BAD(ts::transpose(x, {0, 1, 2}), Shape, "2"),
      BAD(ts::transpose(x, {0, 2}), Shape, "2"),
      BAD(ts::transpose(x, {-3, 0}), Shape, "-3"),
      BAD(ts::transpose(x, {1, 5}), Shape, "5"),
      BAD(ts::concatenate({x, ts::arange(5.0)}), Shape, "5"),
      BAD(ts::concatenate({x, ts::zeros({3, 5})}, 0), Shape, "5"),
      BAD(ts::concatenate({x, x}, 2), Shape, "2"),
      BAD(ts::concatenate({x, x}, -3), Shape, "-3"),
      BAD(ts::concatenate({s, s}), Shape),
      BAD(ts::concatenate({}), Value),
      BAD(ts::stack({x, ts::zeros({4, 3})}), Shape, "4"),
      BAD(ts::stack({x, x}, 3), Shape, "3"),
      BAD(ts::stack({x, x}, -4), Shape, "-4"),
      BAD(ts::stack({}), Value),
      BAD(ts::split(x, 5), Shape, "5"),
      BAD(ts::split(x, 3, 1), Shape, "3"),
      BAD(ts::split(x, 2, 2), Shape, "2"),
      BAD(ts::split(x, 2, -3), Shape, "-3"),
      BAD(ts::split(x, std::vector<std::int64_t>{1}, 2), Shape, "2"),
      BAD(ts::split(x, 0), Value, "0"),
      BAD(ts::split(x, -2), Value, "-2"),
      BAD(ts::pad(x, {{-5, 0}, {0, 0}}), Shape, "-5"),
      BAD(ts::pad(x, {{0, 0}, {0, -9}}), Shape, "-9"),
      BAD(ts::pad(x, {{-1, -1}, {0, 0}}), Shape, "-1"),
      BAD(ts::pad(x, {{1, 1}, {1, 1}, {1, 1}}), Shape, "3"),
      BAD(ts::nn::one_hot(ts::arange(3), -1), Shape, "-1"),
      BAD(ts::nn::one_hot(ts::arange(3), -7), Shape, "-7"),
      BAD(ts::lax::rev(x, {2}), Shape, "2"),
      BAD(ts::lax::rev(x, {0, 0}), Shape, "0"),
  });
}

TEST_CASE("indexing, slicing, .at updates and dynamic slices") {
  auto x = ts::arange(12.0).reshape({3, 4});
  auto v = ts::arange(5.0);
  auto s = ts::array(1.0f);
  run({
      BAD(x.index({3}), Shape, "3"),
      BAD(x.index({-4}), Shape, "-4"),
      BAD(x.index({0, 4}), Shape, "4"),
      BAD(x.index({0, -5}), Shape, "-5"),
      BAD(x.index({0, 0, 0}), Shape, "3"),
      BAD(x.index({ts::all, ts::all, ts::all}), Shape, "3"),
      BAD(x.index({ts::newaxis, 0, 0, 0}), Shape, "3"),
      BAD(x.index({ts::ellipsis, ts::ellipsis}), Shape),
      BAD(x.index({ts::slice(0, 2, 0)}), Value, "0"),
      BAD(v.index({5}), Shape, "5"),
      BAD(v.index({p2(40)}), Shape, "1099511627776"),
      BAD(s.index({0}), Shape, "0"),
      BAD(ts::zeros({0}).index({0}), Shape, "0"),
      BAD(ts::index(x, {5}), Shape, "5"),
      BAD(x.at({3}).set(1.0), Shape, "3"),
      BAD(x.at({0, 4}).add(1.0), Shape, "4"),
      BAD(x.at({-4}).set(1.0), Shape, "-4"),
      BAD(x.at({0}).set(ts::arange(5.0)), Shape, "5"),
      BAD(x.at({ts::all, 0}).set(ts::zeros({4})), Shape, "4"),
      BAD(x.at({0}).set(ts::zeros({2, 4})), Shape, "2"),
      BAD(x.at({0, 0, 0}).set(1.0), Shape, "3"),
      BAD(x.at({0}).multiply(ts::zeros({3})), Shape, "3"),
      BAD(x.at({0}).add(ts::zeros({7})), Shape, "7"),
      BAD(ts::lax::dynamic_slice(x, {ts::array(0)}, {2, 2}), Shape, "1"),
      BAD(ts::lax::dynamic_slice(x, {ts::array(0), ts::array(0)}, {4, 4}), Shape, "4"),
      BAD(ts::lax::dynamic_slice(x, {ts::array(0), ts::array(0)}, {-1, 2}), Shape, "-1"),
      BAD(ts::lax::dynamic_slice(x, {ts::array(0), ts::array(0)}, {2}), Shape, "2"),
      BAD(ts::lax::dynamic_slice(x, {ts::array(0.5f), ts::array(0.5f)}, {2, 2}), Type, "float32"),
      BAD(ts::lax::dynamic_update_slice(x, ts::zeros({4, 4}), {ts::array(0), ts::array(0)}), Shape, "4"),
      BAD(ts::lax::dynamic_update_slice(x, ts::zeros({2}), {ts::array(0), ts::array(0)}), Shape, "2"),
      BAD(ts::lax::dynamic_update_slice(x, ts::zeros({2, 2}, ts::int32), {ts::array(0), ts::array(0)}), Type,
          "int32"),
  });
}

TEST_CASE("reductions: bad axes, repeated axes, empty reductions without identity") {
  auto x = ts::arange(12.0).reshape({3, 4});
  using R = ts::Array (*)(const ts::Array&, int);
  const std::vector<std::pair<const char*, R>> reductions = {
      {"sum", [](const ts::Array& a, int ax) { return ts::sum(a, ax); }},
      {"mean", [](const ts::Array& a, int ax) { return ts::mean(a, ax); }},
      {"max", [](const ts::Array& a, int ax) { return ts::max(a, ax); }},
      {"min", [](const ts::Array& a, int ax) { return ts::min(a, ax); }},
      {"prod", [](const ts::Array& a, int ax) { return ts::prod(a, ax); }},
      {"argmax", [](const ts::Array& a, int ax) { return ts::argmax(a, ax); }},
      {"argmin", [](const ts::Array& a, int ax) { return ts::argmin(a, ax); }},
      {"any", [](const ts::Array& a, int ax) { return ts::any(a > 0.0, ax); }},
      {"all", [](const ts::Array& a, int ax) { return ts::all(a > 0.0, ax); }},
      {"var", [](const ts::Array& a, int ax) { return ts::var(a, ax); }},
      {"std", [](const ts::Array& a, int ax) { return ts::std(a, ax); }},
      {"logsumexp", [](const ts::Array& a, int ax) { return ts::logsumexp(a, ax); }},
      {"sort", [](const ts::Array& a, int ax) { return ts::sort(a, ax); }},
      {"argsort", [](const ts::Array& a, int ax) { return ts::argsort(a, ax); }},
      {"softmax", [](const ts::Array& a, int ax) { return ts::nn::softmax(a, ax); }},
      {"log_softmax", [](const ts::Array& a, int ax) { return ts::nn::log_softmax(a, ax); }},
      {"flip", [](const ts::Array& a, int ax) { return ts::flip(a, ax); }},
      {"squeeze", [](const ts::Array& a, int ax) { return ts::squeeze(a, ax); }},
      {"x.sum", [](const ts::Array& a, int ax) { return a.sum(ax); }},
      {"x.mean", [](const ts::Array& a, int ax) { return a.mean(ax); }},
      {"x.max", [](const ts::Array& a, int ax) { return a.max(ax); }},
      {"x.min", [](const ts::Array& a, int ax) { return a.min(ax); }},
  };
  std::vector<Case> cases;
  // Axes out of range for rank 2 (JAX: AxisError; here ShapeError naming the axis).
  for (auto [name, fn] : reductions)
    for (int ax : {2, -3, 7})
      cases.push_back({std::string(name) + "(f32[3,4], axis=" + std::to_string(ax) + ")", sink([&x, fn = fn, ax] { return fn(x, ax); }),
                       K::Shape, {std::to_string(ax)}});
  // A 0-d array has no axis 0.
  cases.push_back(BAD(ts::sum(ts::array(1.0f), 0), Shape, "0"));
  cases.push_back(BAD(ts::max(ts::array(1.0f), -1), Shape, "-1"));
  // Repeated axes, also after normalising negatives.
  using RA = ts::Array (*)(const ts::Array&, ts::Axes);
  const std::vector<std::pair<const char*, RA>> multi = {
      {"sum", [](const ts::Array& a, ts::Axes ax) { return ts::sum(a, ax); }},
      {"mean", [](const ts::Array& a, ts::Axes ax) { return ts::mean(a, ax); }},
      {"max", [](const ts::Array& a, ts::Axes ax) { return ts::max(a, ax); }},
      {"min", [](const ts::Array& a, ts::Axes ax) { return ts::min(a, ax); }},
      {"prod", [](const ts::Array& a, ts::Axes ax) { return ts::prod(a, ax); }},
      {"any", [](const ts::Array& a, ts::Axes ax) { return ts::any(a > 0.0, ax); }},
      {"var", [](const ts::Array& a, ts::Axes ax) { return ts::var(a, ax); }},
      {"logsumexp", [](const ts::Array& a, ts::Axes ax) { return ts::logsumexp(a, ax); }},
      {"softmax", [](const ts::Array& a, ts::Axes ax) { return ts::nn::softmax(a, ax); }},
  };
  for (auto [name, fn] : multi) {
    cases.push_back({std::string(name) + "(axis={0, 0})", sink([&x, fn = fn] { return fn(x, {0, 0}); }), K::Shape, {"0"}});
    cases.push_back({std::string(name) + "(axis={1, -1})", sink([&x, fn = fn] { return fn(x, {1, -1}); }), K::Shape, {"1"}});
    cases.push_back({std::string(name) + "(axis={0, 2})", sink([&x, fn = fn] { return fn(x, {0, 2}); }), K::Shape, {"2"}});
  }
  // Reductions without an identity on zero-size extents: ValueError (JAX: "zero-size array to
  // reduction operation max which has no identity"). sum/prod/mean of empty are fine (below).
  const std::vector<std::pair<std::string, std::function<ts::Array(const ts::Array&)>>> no_identity = {
      {"max", [](const ts::Array& a) { return ts::max(a); }},
      {"min", [](const ts::Array& a) { return ts::min(a); }},
      {"argmax", [](const ts::Array& a) { return ts::argmax(a); }},
      {"argmin", [](const ts::Array& a) { return ts::argmin(a); }},
      {"max", [](const ts::Array& a) { return a.max(); }},
      {"min", [](const ts::Array& a) { return a.min(); }},
  };
  for (const auto& [name, fn] : no_identity)
    for (ts::Shape sh : {ts::Shape{0}, ts::Shape{2, 0, 3}})
      cases.push_back({name + " of zeros(" + ts::shape_str(sh) + ")",
                       sink([fn = fn, sh] { return fn(ts::zeros(sh)); }), K::Value, {name}});
  cases.push_back(BAD(ts::max(ts::zeros({0}, ts::int32)), Value, "max"));
  cases.push_back(BAD(ts::min(ts::zeros({0}, ts::uint32)), Value, "min"));
  cases.push_back(BAD(ts::max(ts::zeros({3, 0}), 1), Value, "max"));
  cases.push_back(BAD(ts::min(ts::zeros({3, 0}), 1), Value, "min"));
  cases.push_back(BAD(ts::argmax(ts::zeros({3, 0}), 1), Value, "argmax"));
  cases.push_back(BAD(ts::argmin(ts::zeros({3, 0}), 1), Value, "argmin"));
  cases.push_back(BAD(ts::max(ts::zeros({0, 3}), 0), Value, "max"));
  cases.push_back(BAD(ts::argmin(ts::zeros({0, 3}), 0), Value, "argmin"));
  cases.push_back(BAD(ts::max(ts::zeros({3, 0}), {0, 1}), Value, "max"));
  cases.push_back(BAD(ts::zeros({3, 0}).max(1, true), Value, "max"));
  cases.push_back(BAD(ts::zeros({3, 0}).min(-1), Value, "min"));
  run(cases);
}

TEST_CASE("elementwise: unbroadcastable shapes and wrong dtypes") {
  using B = ts::Array (*)(const ts::Array&, const ts::Array&);
  struct Op {
    const char* name;
    B fn;
    ts::DType dtype;
  };
  const std::vector<Op> ops = {
      {"+", [](const ts::Array& a, const ts::Array& b) { return a + b; }, ts::float32},
      {"-", [](const ts::Array& a, const ts::Array& b) { return a - b; }, ts::float32},
      {"*", [](const ts::Array& a, const ts::Array& b) { return a * b; }, ts::float32},
      {"/", [](const ts::Array& a, const ts::Array& b) { return a / b; }, ts::float32},
      {"==", [](const ts::Array& a, const ts::Array& b) { return a == b; }, ts::float32},
      {"!=", [](const ts::Array& a, const ts::Array& b) { return a != b; }, ts::float32},
      {"<", [](const ts::Array& a, const ts::Array& b) { return a < b; }, ts::float32},
      {"<=", [](const ts::Array& a, const ts::Array& b) { return a <= b; }, ts::float32},
      {">", [](const ts::Array& a, const ts::Array& b) { return a > b; }, ts::float32},
      {">=", [](const ts::Array& a, const ts::Array& b) { return a >= b; }, ts::float32},
      {"maximum", [](const ts::Array& a, const ts::Array& b) { return ts::maximum(a, b); }, ts::float32},
      {"minimum", [](const ts::Array& a, const ts::Array& b) { return ts::minimum(a, b); }, ts::float32},
      {"power", [](const ts::Array& a, const ts::Array& b) { return ts::power(a, b); }, ts::float32},
      {"arctan2", [](const ts::Array& a, const ts::Array& b) { return ts::arctan2(a, b); }, ts::float32},
      {"remainder", [](const ts::Array& a, const ts::Array& b) { return ts::remainder(a, b); }, ts::int32},
      {"floor_divide", [](const ts::Array& a, const ts::Array& b) { return ts::floor_divide(a, b); }, ts::int32},
      {"logical_and", [](const ts::Array& a, const ts::Array& b) { return ts::logical_and(a, b); }, ts::bool_},
      {"logical_or", [](const ts::Array& a, const ts::Array& b) { return ts::logical_or(a, b); }, ts::bool_},
      {"isclose", [](const ts::Array& a, const ts::Array& b) { return ts::isclose(a, b); }, ts::float32},
  };
  struct Pair {
    ts::Shape a, b;
    const char* needle;
  };
  const std::vector<Pair> pairs = {{{3, 4}, {5}, "5"}, {{2, 3}, {3, 2}, "2"}, {{0}, {2}, "0"}, {{2, 3, 4}, {3, 5}, "5"}};
  std::vector<Case> cases;
  for (const auto& op : ops)
    for (const auto& pr : pairs)
      cases.push_back({std::string(op.name) + " of " + ts::shape_str(pr.a) + " and " + ts::shape_str(pr.b),
                       sink([op, pr] { return op.fn(ts::zeros(pr.a, op.dtype), ts::zeros(pr.b, op.dtype)); }), K::Shape,
                       {pr.needle}});
  auto a = ts::zeros({3, 4});
  auto c = ts::zeros({3, 4}, ts::bool_);
  auto u = ts::zeros({3}, ts::uint32);
  auto i = ts::arange(3);
  auto f = ts::zeros({3});
  std::vector<Case> more = {
      BAD(ts::where(ts::zeros({3}, ts::bool_), a, a), Shape, "3"),
      BAD(ts::where(c, a, ts::zeros({2, 4})), Shape, "2"),
      BAD(ts::where(c, ts::zeros({5}), a), Shape, "5"),
      BAD(ts::allclose(a, ts::zeros({5})), Shape, "5"),
      BAD(ts::where(ts::zeros({2, 1, 4}, ts::bool_), a, ts::zeros({5, 1})), Shape, "5"),
      // Dtypes an op does not take.
      BAD(-ts::array(true), Type, "bool"),
      BAD(ts::negative(ts::ones({2}, ts::bool_)), Type, "bool"),
      BAD(ts::abs(ts::array(true)), Type, "bool"),
      BAD(ts::lax::shift_left(f, f), Type, "float32"),
      BAD(ts::lax::shift_right_logical(i, u), Type, "uint32"),
      BAD(ts::lax::bitwise_and(f, f), Type, "float32"),
      BAD(ts::lax::bitwise_or(i, f), Type, "float32"),
      BAD(ts::lax::bitwise_xor(ts::zeros({3}, ts::float64), ts::zeros({3}, ts::float64)), Type, "float64"),
      BAD(ts::lax::bitcast_convert_type(f, ts::bool_), Type, "bool"),
      BAD(ts::lax::erf_inv(i), Type, "int32"),
      BAD(ts::lax::erf(i), Type, "int32"),
      // Converting to a host scalar: only size-1 arrays.
      BAD(ts::zeros({2, 3}).item<float>(), ShapeOrType, "3"),
      BAD(ts::zeros({0}).item<float>(), ShapeOrType, "0"),
      BAD(ts::zeros({5}, ts::int32).item<int>(), ShapeOrType, "5"),
  };
  cases.insert(cases.end(), more.begin(), more.end());
  run(cases);
}

TEST_CASE("dot, matmul, tensordot, einsum, dot_general") {
  auto a = ts::zeros({3, 4}), b = ts::zeros({5, 6}), s = ts::array(1.0f);
  auto a3 = ts::zeros({2, 3, 4});
  run({
      BAD(ts::dot(a, b), Shape, "4", "5"),
      BAD(ts::dot(a, a), Shape, "4", "3"),
      BAD(ts::dot(ts::arange(3.0), ts::arange(4.0)), Shape, "3", "4"),
      BAD(ts::dot(a3, b), Shape, "4", "5"),
      BAD(ts::matmul(a, b), Shape, "4", "5"),
      BAD(ts::matmul(a3, ts::zeros({2, 5, 6})), Shape, "4", "5"),
      BAD(ts::matmul(a3, ts::zeros({3, 4, 5})), Shape, "2", "3"),
      BAD(ts::matmul(s, a), Shape, "0"),
      BAD(ts::matmul(a, s), Shape, "0"),
      BAD(ts::matmul(ts::arange(3.0), ts::arange(4.0)), Shape, "3", "4"),
      BAD(ts::tensordot(a, b, 1), Shape, "4", "5"),
      BAD(ts::tensordot(a, a, 3), Shape, "3"),
      BAD(ts::tensordot(a, b, {{1}, {0}}), Shape, "4", "5"),
      BAD(ts::tensordot(a, a, {{0, 1}, {0}}), Shape, "2", "1"),
      BAD(ts::tensordot(a, a, {{2}, {0}}), Shape, "2"),
      BAD(ts::tensordot(a, a, {{0}, {-3}}), Shape, "-3"),
      BAD(ts::einsum("ij,jk->ik", a, b), Shape, "4", "5"),
      BAD(ts::einsum("ijk", a), Shape, "ijk"),
      BAD(ts::einsum("", a), Shape),
      BAD(ts::einsum("ii", a), Shape, "3", "4"),
      BAD(ts::einsum("ij,ij->ij", a, b), Shape, "4", "5"),
      BAD(ts::einsum("ij,jk->ik", a), Value, "ij,jk->ik"),
      BAD(ts::einsum("ij->", a, a), Value, "ij->"),
      BAD(ts::einsum("ij->ik", a), Value, "k"),
      BAD(ts::einsum("ij->ii", a), Value, "i"),
      BAD(ts::einsum("i#,j", a, a), Value, "#"),
      BAD(ts::einsum("ij->j->i", a), Value, "->"),
      BAD(ts::lax::dot_general(a, b, {{1}, {0}, {}, {}}), Shape, "4", "5"),
      BAD(ts::lax::dot_general(a, a, {{2}, {0}, {}, {}}), Shape, "2"),
      BAD(ts::lax::dot_general(a, a, {{1}, {}, {}, {}}), Shape, "1", "0"),
      BAD(ts::lax::dot_general(a, ts::zeros({4, 3}), {{1, 1}, {0, 0}, {}, {}}), Shape, "1"),
      BAD(ts::lax::dot_general(a3, ts::zeros({3, 4, 5}), {{2}, {1}, {0}, {0}}), Shape, "2", "3"),
      BAD(ts::lax::dot_general(a3, ts::zeros({2, 4, 5}), {{2}, {1}, {5}, {0}}), Shape, "5"),
  });
}

TEST_CASE("device ids that do not exist") {
  const int n = ts::device_count();
  const std::string ns = std::to_string(n);
  auto x = ts::arange(4.0);
  std::vector<Case> cases = {
      BAD(ts::device_put(x, ts::Device(99)), Value, "99"),
      BAD(ts::device_put(x, ts::Device(-1)), Value, "-1"),
      BAD(ts::device_put(x, ts::Device(n)), Value, ns),
      BAD(ts::device_put(x, ts::Device(1 << 30)), Value, "1073741824"),
      BAD(ts::device_put(x, ts::SingleDeviceSharding(ts::Device(99))), Sharding, "99"),
      BAD(ts::device_put(x, ts::SingleDeviceSharding(ts::Device(-1))), Sharding, "-1"),
      BAD(ts::device_put(x, ts::SingleDeviceSharding(ts::Device(n))), Sharding, ns),
      BAD(ts::SingleDeviceSharding(ts::Device(99)).devices_indices_map({4}), Sharding, "99"),
      BAD(ts::SingleDeviceSharding(ts::Device(-2)).shard_shape({4}), Sharding, "-2"),
      BAD(ts::with_sharding_constraint(x, ts::SingleDeviceSharding(ts::Device(99))), Sharding, "99"),
      BAD(ts::jit(twice, {.in_shardings = {ts::Sharding(ts::SingleDeviceSharding(ts::Device(99)))}})(x), Sharding, "99"),
      BAD(ts::jit(twice, {.out_shardings = {ts::Sharding(ts::SingleDeviceSharding(ts::Device(77)))}})(x), Sharding, "77"),
      BAD(ts::Mesh({ts::Device(n)}, {1}, {"a"}), Sharding, ns),
      BAD(ts::Mesh({ts::Device(-1)}, {1}, {"a"}), Sharding, "-1"),
      BAD(ts::Mesh({ts::Device(99)}, "x"), Sharding, "99"),
      BAD(ts::Mesh({ts::Device(0), ts::Device(-3)}, "x"), Sharding, "-3"),
      BAD(ts::make_mesh({1}, {"x"}, {ts::Device(99)}), Sharding, "99"),
      BAD(ts::device_put(x, ts::PositionalSharding({ts::Device(99)})), Sharding, "99"),
      BAD(ts::device_put(x, ts::PositionalSharding({ts::Device(-1)})), Sharding, "-1"),
  };
  // Cases capture by reference: what they use must outlive run(cases).
  ts::Array d0 = x, d1 = x;
  if (n >= 2) {
    d0 = ts::device_put(x, ts::Device(0)), d1 = ts::device_put(x, ts::Device(1));
    cases.push_back(BAD(d0 + d1, Device, "[0]", "[1]"));
    cases.push_back(BAD(ts::jit(add2)(d0, d1), Device, "[0]", "[1]"));
    cases.push_back(BAD(ts::make_mesh({2}, {"x"}, {ts::Device(-1), ts::Device(0)}), Sharding, "-1"));
    cases.push_back(BAD(ts::make_mesh({2}, {"x"}, {ts::Device(0), ts::Device(0)}), Sharding, "0"));
  }
  run(cases);
}

TEST_CASE("meshes, partition specs, shardings, device_put, device mismatches") {
  if (ts::device_count() < 8) {
    MESSAGE("needs 8 devices");
    return;
  }
  const int n = ts::device_count();
  auto devs8 = first(8);
  auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
  auto ns = [&](ts::PartitionSpec p) { return ts::Sharding(ts::NamedSharding(mesh, p)); };
  ts::PositionalSharding ps(devs8);
  auto ps42 = ps.reshape({4, 2});
  auto sd0 = ts::SingleDeviceSharding(ts::Device(0));
  auto x8 = ts::arange(8.0);
  std::vector<ts::Device> lo(devs8.begin(), devs8.begin() + 4), hi(devs8.begin() + 4, devs8.end());
  auto y = ts::device_put(ts::arange(24.0), ts::NamedSharding(ts::Mesh(lo, "x"), P("x")));
  auto z = ts::device_put(ts::arange(24.0), ts::NamedSharding(ts::Mesh(hi, "x"), P("x")));
  auto xa = ts::device_put(x8, ns(P("a")));
  auto lo_s = ts::Sharding(ts::NamedSharding(ts::Mesh(lo, "x"), P("x")));
  auto hi_s = ts::Sharding(ts::NamedSharding(ts::Mesh(hi, "x"), P("x")));
  auto cs = ts::jit(twice).lower(xa).compile();
  auto cu = ts::jit(twice).lower(x8).compile();
  run({
      BAD(ts::make_mesh({n + 1}, {"x"}), Sharding, std::to_string(n + 1)),
      BAD(ts::make_mesh({n, 2}, {"a", "b"}), Sharding, std::to_string(n)),
      BAD(ts::make_mesh({-1, 2}, {"a", "b"}), Sharding, "-1"),
      BAD(ts::make_mesh({-2, -4}, {"a", "b"}), Sharding, "-2"),
      BAD(ts::make_mesh({0}, {"a"}), Sharding, "0"),
      BAD(ts::make_mesh({4, 2}, {"a"}), Sharding, "a"),
      BAD(ts::make_mesh({4, 2}, {"a", "a"}), Sharding, "a"),
      BAD(ts::make_mesh({2, 2}, {"a", "b", "c"}), Sharding, "c"),
      BAD(ts::make_mesh({3}, {"x"}, first(2)), Sharding, "3"),
      BAD(ts::Mesh(devs8, {4, 4}, {"a", "b"}), Sharding, "4"),
      BAD(ts::Mesh(devs8, {4, 2}, {"a"}), Sharding, "a"),
      BAD(ts::Mesh(devs8, {4, 2}, {"a", "a"}), Sharding, "a"),
      BAD(ts::Mesh(devs8, {-2, -4}, {"a", "b"}), Sharding, "-2"),
      BAD(ts::Mesh(devs8, {2, 2}, {"a", "b"}), Sharding, "2"),
      BAD(ts::Mesh({ts::Device(0), ts::Device(0)}, {2}, {"a"}), Sharding, "0"),
      BAD(ts::Mesh({ts::Device(1), ts::Device(2), ts::Device(1)}, "x"), Sharding, "1"),
      BAD(mesh.axis_size("q"), Sharding, "q"),
      BAD(mesh.axis_size("ab"), Sharding, "ab"),
      // PartitionSpecs: an axis used twice, an axis the mesh lacks (at P or at NamedSharding).
      BAD(ts::NamedSharding(mesh, P("a", "a")), Sharding, "a"),
      BAD(ts::NamedSharding(mesh, P({"a", "b"}, "b")), Sharding, "b"),
      BAD(ts::NamedSharding(mesh, P({"a", "a"})), Sharding, "a"),
      BAD(ts::NamedSharding(mesh, P("b", ts::None, "b")), Sharding, "b"),
      BAD(ts::NamedSharding(mesh, P("c")), Sharding, "c"),
      BAD(ts::NamedSharding(mesh, P("a", "z")), Sharding, "z"),
      BAD(ts::NamedSharding(mesh, P({"a", "q"})), Sharding, "q"),
      BAD(ts::NamedSharding(mesh, P("")), Sharding),
      // Specs longer than the array's rank.
      BAD(ts::device_put(ts::zeros({8}), ns(P("a", "b"))), Sharding, "P('a', 'b')"),
      BAD(ts::device_put(ts::zeros({}), ns(P("a"))), Sharding, "P('a')"),
      BAD(ts::device_put(ts::zeros({8, 8}), ns(P("a", "b", ts::None))), Sharding, "3"),
      BAD(ts::with_sharding_constraint(ts::zeros({8}), ns(P("a", "b"))), Sharding, "P('a', 'b')"),
      BAD(ts::with_sharding_constraint(ts::zeros({}), ns(P("b"))), Sharding, "P('b')"),
      BAD(ts::jit([&](const ts::Array& v) { return ts::with_sharding_constraint(v, ns(P("a", "b"))); })(x8), Sharding,
          "P('a', 'b')"),
      BAD(ts::jit(twice, {.in_shardings = {ns(P("a", "b"))}})(x8), Sharding, "P('a', 'b')"),
      BAD(ts::jit(twice, {.out_shardings = {ns(P("a", "b"))}})(x8), Sharding, "P('a', 'b')"),
      BAD(ns(P("a", "b")).shard_shape({8}), Sharding, "P('a', 'b')"),
      BAD(ns(P("a", "b")).devices_indices_map({8}), Sharding, "P('a', 'b')"),
      BAD(ns(P("a")).shard_shape({-8}), Shape, "-8"),
      // PositionalSharding.
      BAD(ps.reshape({-2, -4}), Sharding, "-2"),
      BAD(ps.reshape({3, 2}), Sharding, "3"),
      BAD(ps.reshape({-1, 3}), Sharding, "3"),
      BAD(ps.reshape({-1, -1}), Sharding, "-1"),
      BAD(ps.reshape({16}), Sharding, "16"),
      BAD(ps.reshape({0, 8}), Sharding, "0"),
      BAD(ps42.replicate(2), Sharding, "2"),
      BAD(ps42.replicate(-3), Sharding, "-3"),
      BAD(ps42.transpose({0, 0}), Sharding, "0"),
      BAD(ps42.transpose({0}), Sharding, "0"),
      BAD(ps42.transpose({0, 2}), Sharding, "2"),
      BAD(ts::device_put(x8, ts::PositionalSharding({ts::Device(0), ts::Device(0)})), Sharding, "0"),
      BAD(ts::device_put(ts::zeros({9, 8}), ps42), Sharding, "9"),
      BAD(ts::device_put(ts::zeros({8}), ps42), Sharding, "2"),
      BAD(ts::device_put(ts::zeros({8, 8, 8}), ps42), Sharding, "3"),
      BAD(ts::device_put(ts::zeros({4, 7}), ps42), Sharding, "7"),
      BAD(ts::device_put(ts::zeros({12}), ps), Sharding, "12"),
      BAD(ts::jit(twice, {.in_shardings = {ts::Sharding(ps42)}})(ts::zeros({9, 8})), Sharding, "9"),
      BAD(ps42.shard_shape({8}), Sharding, "2"),
      BAD(ts::Sharding(ns(P("a"))).as_positional(), Sharding),
      BAD(ts::Sharding(ns(P("a"))).as_single_device(), Sharding),
      BAD(ts::Sharding(sd0).as_named(), Sharding),
      BAD(ts::Sharding(ps42).as_named(), Sharding),
      BAD(ts::device_put(std::vector<ts::Array>{x8, x8}, std::vector<ts::Sharding>{sd0}), Type),
      BAD(ts::debug::sharding_text({2, 2, 2}, sd0), Shape),
      BAD(ts::debug::sharding_text({-4}, sd0), Shape, "-4"),
      BAD(ts::debug::sharding_text({}, sd0), Shape),
      // Committed arguments on different device sets or orders.
      BAD(y + z, Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(y * z, Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::maximum(y, z), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::concatenate({y, z}), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::stack({y, z}), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::where(y > 0.0, y, z), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::dot(y, z), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(y == z, Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::jit(add2)(y, z), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::jit(twice, {.in_shardings = {hi_s}})(y), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::jit(twice, {.out_shardings = {hi_s}})(y), Device, "[0, 1, 2, 3]", "[4, 5, 6, 7]"),
      BAD(ts::jit(add2, {.in_shardings = {lo_s, hi_s}})(ts::arange(24.0), ts::arange(24.0)), Device, "[0, 1, 2, 3]",
          "[4, 5, 6, 7]"),
      // A committed argument against in_shardings on the same devices.
      BAD(ts::jit(twice, {.in_shardings = {ns(P("b"))}})(xa), Sharding, "P('a')", "P('b')"),
      // A Compiled called with another sharding than it was compiled for.
      BAD(cs(ts::device_put(x8, ns(P("b")))), Sharding, "P('a')", "P('b')"),
      BAD(cs(ts::device_put(x8, ns(P()))), Sharding, "P('a')"),
      BAD(cs(ts::device_put(x8, ts::Device(3))), Sharding, "3"),
      BAD(cu(xa), Sharding, "P('a')"),
  });
}

TEST_CASE("jit options, static_argnums and Compiled calls") {
  auto x = ts::arange(4.0);
  ts::Sharding s0 = ts::SingleDeviceSharding(ts::devices()[0]);
  auto add3 = [](const ts::Array& a, const ts::Array& b, const ts::Array& c) { return a + b + c; };
  auto pair_out = [](const ts::Array& a) { return std::make_pair(a, a * 2.0); };
  auto triple_out = [](const ts::Array& a) { return std::make_tuple(a, a, a); };
  auto scaled = [](const ts::Array& a, int k) { return a * double(k); };
  auto x6 = ts::arange(6.0);
  auto c1 = ts::jit(twice).lower(ts::zeros({4})).compile();
  auto c2 = ts::jit(add2).lower(ts::zeros({4}), ts::zeros({4}, ts::int32)).compile();
  run({
      // in_shardings / out_shardings: one entry (all) or one per argument / output.
      BAD(ts::jit(add2, {.in_shardings = {s0, s0, s0}})(x, x), Sharding, "3", "2"),
      BAD(ts::jit(add3, {.in_shardings = {s0, s0}})(x, x, x), Sharding, "2", "3"),
      BAD(ts::jit(twice, {.in_shardings = {s0, s0}})(x), Sharding, "2", "1"),
      BAD(ts::jit(add2, {.in_shardings = {std::nullopt, std::nullopt, std::nullopt}})(x, x), Sharding, "3", "2"),
      BAD(ts::jit(add2, {.in_shardings = {s0, s0, s0}}).lower(x, x), Sharding, "3", "2"),
      BAD(ts::jit(pair_out, {.out_shardings = {s0, s0, s0}})(x), Sharding, "3", "2"),
      BAD(ts::jit(triple_out, {.out_shardings = {s0, s0}})(x), Sharding, "2", "3"),
      BAD(ts::jit(twice, {.out_shardings = {s0, s0}})(x), Sharding, "2", "1"),
      BAD(ts::jit(pair_out, {.out_shardings = {s0, s0, s0}}).lower(x), Sharding, "3", "2"),
      // static_argnums out of range: ValueError naming the index.
      BAD(ts::jit(twice, {.static_argnums = {1}})(x), Value, "1"),
      BAD(ts::jit(twice, {.static_argnums = {-2}})(x), Value, "-2"),
      BAD(ts::jit(twice, {.static_argnums = {7}}).lower(x), Value, "7"),
      BAD(ts::jit(scaled, {.static_argnums = {2}})(x, 3), Value, "2"),
      BAD(ts::jit(scaled, {.static_argnums = {1, 5}})(x, 3), Value, "5"),
      BAD(ts::jit(add3, {.static_argnums = {3}})(x, x, x), Value, "3"),
      BAD(ts::jit(twice, {.static_argnums = {0}})(x), Type),  // an array cannot be static
      // A Compiled called with other avals or another argument count: TypeError.
      BAD(c1(ts::zeros({5})), Type, "[5]", "[4]"),
      BAD(c1(ts::zeros({4}, ts::int32)), Type, "int32", "float32"),
      BAD(c1(ts::zeros({4}, ts::float64)), Type, "float64", "float32"),
      BAD(c1(ts::ones({4}, ts::bool_)), Type, "bool"),
      BAD(c1(ts::zeros({2, 2})), Type, "[2,2]"),
      BAD(c1(ts::zeros({})), Type, "[]"),
      BAD(c1(ts::zeros({0})), Type, "[0]"),
      BAD(c1(x, x), Type, "2", "1"),
      BAD(c1(), Type, "0", "1"),
      BAD(c1(2.0), Type),
      BAD(c1(std::vector<ts::Array>{x, x}), Type, "2"),
      BAD(c2(x), Type, "1", "2"),
      BAD(c2(x, x, x), Type, "3", "2"),
      BAD(c2(x, x), Type, "int32", "float32"),
      BAD(c2(ts::zeros({4}, ts::int32), ts::zeros({4}, ts::int32)), Type, "int32"),
      BAD(c1(ts::zeros({4})).get<std::vector<ts::Array>>(), Type),
      // Errors raised while tracing surface with their own class.
      BAD(ts::jit([](const ts::Array& v) { return v.reshape({-2, -3}); })(x6), Shape, "-2"),
      BAD(ts::jit([](const ts::Array& v) { return ts::sum(v, 5); })(x6), Shape, "5"),
      BAD(ts::jit([](const ts::Array& v) { return v + ts::zeros({5}); })(x6), Shape, "5"),
      BAD(ts::jit([](const ts::Array& v) { return ts::dot(v, ts::zeros({5})); })(x6), Shape, "6", "5"),
      BAD(ts::jit([](const ts::Array& v) { return v.index({6}); })(x6), Shape, "6"),
      BAD(ts::jit([](const ts::Array& v) { return ts::max(v); })(ts::zeros({0})), Value, "max"),
      BAD(ts::jit([](const ts::Array& v) { return ts::lax::bitwise_and(v, v); })(x6), Type, "float32"),
      BAD(ts::jit([](const ts::Array& v) { return ts::broadcast_to(v, {p2(40), p2(10)}); })(ts::zeros({})), Resource,
          "1099511627776"),
      BAD(ts::jit([](const ts::Array& v) { return v + ts::zeros({p2(40), p2(10)}); })(ts::zeros({})), Resource,
          "1099511627776"),
      BAD(ts::jit([](const ts::Array& v) { return ts::broadcast_to(v, {p2(62), 4}); })(ts::zeros({})), Shape,
          "4611686018427387904"),
  });
}

TEST_CASE("autodiff: integer inputs, non-scalar outputs, tangent and cotangent mismatches") {
  auto xf = ts::array({1.0f, 2.0f});
  auto xd = ts::array({1.0, 2.0});
  auto xi = ts::array({1, 2});
  auto ident = [](const ts::Array& v) { return v; };
  auto mul = [](const ts::Array& a, const ts::Array& b) { return ts::sum(a * b); };
  auto mul_elem = [](const ts::Array& a, const ts::Array& b) { return a * b; };
  auto vj = ts::vjp(twice, xf);
  auto back = vj.second;
  run({
      // grad requires real-valued (inexact) inputs.
      BAD(ts::grad(sumf)(xi), Type, "int32"),
      BAD(ts::grad(sumf)(ts::arange(3)), Type, "int32"),
      BAD(ts::grad(sumf)(ts::ones({3}, ts::bool_)), Type, "bool"),
      BAD(ts::grad(sumf)(ts::zeros({3}, ts::uint32)), Type, "uint32"),
      BAD(ts::grad(sumf)(ts::zeros({3}, ts::int64)), Type, "int64"),
      BAD(ts::grad(sumf)(ts::array(3)), Type, "int32"),
      BAD(ts::grad(mul, 1)(xf, xi), Type, "int32"),
      BAD(ts::grad<1>(mul)(xf, xi), Type, "int32"),
      BAD(ts::value_and_grad(sumf)(ts::arange(3)), Type, "int32"),
      BAD(ts::value_and_grad<1>(mul)(xf, xi), Type, "int32"),
      // grad requires one real scalar output.
      BAD(ts::grad(twice)(xf), Type, "2"),
      BAD(ts::grad(ident)(ts::zeros({2, 3})), Type, "3"),
      BAD(ts::grad([](const ts::Array& v) { return ts::sum(ts::astype(v, ts::int32)); })(xf), Type, "int32"),
      BAD(ts::grad([](const ts::Array& v) { return ts::sum(v) > 0.0; })(xf), Type, "bool"),
      BAD(ts::grad(sumf, 3)(xf), Type, "3"),
      BAD(ts::grad(mul, 2)(xf, xf), Type, "2"),
      BAD(ts::grad(sumf, -5)(xf), Type, "-5"),
      BAD(ts::grad([](const ts::Array& v) { return ts::sum(v.reshape({5})); })(xf), Shape, "5"),
      // jvp: tangents must match their primals' dtype (TypeError) and shape (ShapeError).
      BAD(ts::jvp(ident, xf, ts::zeros({2}, ts::float64)), Type, "float32", "float64"),
      BAD(ts::jvp(ident, xf, ts::zeros({2}, ts::int32)), Type, "float32", "int32"),
      BAD(ts::jvp(ident, xf, ts::ones({2}, ts::bool_)), Type, "bool"),
      BAD(ts::jvp(ident, xd, ts::zeros({2}, ts::float32)), Type, "float64", "float32"),
      BAD(ts::jvp(ident, xi, xi), Type, "int32"),
      BAD(ts::jvp(mul_elem, std::make_tuple(xf, xf), std::make_tuple(xf, ts::zeros({2}, ts::float64))), Type, "float64"),
      BAD(ts::jvp(ident, xf, ts::zeros({3})), Shape, "3", "2"),
      BAD(ts::jvp(ident, xf, ts::zeros({2, 1})), Shape, "1"),
      BAD(ts::jvp(ident, xf, ts::zeros({})), Shape, "2"),
      BAD(ts::jvp(mul_elem, std::make_tuple(xf, xf), std::make_tuple(ts::zeros({5}), xf)), Shape, "5"),
      // vjp: cotangents must match the output.
      BAD(back(ts::zeros({5})), Shape, "5"),
      BAD(back(ts::zeros({2, 2})), Shape, "2"),
      BAD(back(ts::zeros({2}, ts::float64)), Type, "float64"),
      BAD(back(ts::zeros({2}, ts::int32)), Type, "int32"),
  });
}

TEST_CASE("random: negative counts and shapes, wrong dtypes, bad keys") {
  auto k = ts::random::key(0);
  run({
      BAD(ts::random::split(k, -1), Shape, "-1"),
      BAD(ts::random::split(k, -5), Shape, "-5"),
      BAD(ts::random::split(k, p2(62)), Shape, "4611686018427387904"),
      BAD(ts::random::normal(k, {-1}), Shape, "-1"),
      BAD(ts::random::normal(k, {2, -3}), Shape, "-3"),
      BAD(ts::random::uniform(k, {-2}), Shape, "-2"),
      BAD(ts::random::bits(k, {-4}), Shape, "-4"),
      BAD(ts::random::randint(k, {-1}, 0, 10), Shape, "-1"),
      BAD(ts::random::bernoulli(k, 0.5, {-6}), Shape, "-6"),
      BAD(ts::random::truncated_normal(k, -1.0, 1.0, {-2}), Shape, "-2"),
      BAD(ts::random::normal(k, {p2(62), 4}), Shape, "4611686018427387904"),
      BAD(ts::random::uniform(k, {p2(32), p2(32)}), Shape, "4294967296"),
      BAD(ts::random::normal(k, {p2(40), p2(10)}), Resource, "1099511627776"),
      BAD(ts::random::uniform(k, {p2(30), p2(30)}), Resource, "1073741824"),
      BAD(ts::random::bits(k, {p2(40), p2(10)}), Resource, "1099511627776"),
      BAD(ts::random::randint(k, {p2(40), p2(10)}, 0, 10), Resource, "1099511627776"),
      BAD(ts::random::normal(k, {2}, ts::int32), Type, "int32"),
      BAD(ts::random::normal(k, {2}, ts::uint32), Type, "uint32"),
      BAD(ts::random::uniform(k, {2}, ts::int32), Type, "int32"),
      BAD(ts::random::uniform(k, {2}, ts::bool_), Type, "bool"),
      BAD(ts::random::randint(k, {2}, 0, 10, ts::float32), Type, "float32"),
      BAD(ts::random::bits(k, {2}, ts::float32), Type, "float32"),
      BAD(ts::random::bits(k, {2}, ts::bool_), Type, "bool"),
      BAD(ts::random::truncated_normal(k, -1.0, 1.0, {2}, ts::int32), Type, "int32"),
      BAD(ts::random::normal(ts::zeros({2})), Type, "float32"),
      BAD(ts::random::uniform(ts::random::split(k)), Type, "2"),
      BAD(ts::random::normal(ts::zeros({3}, ts::uint32)), Type, "3"),
      BAD(ts::random::fold_in(ts::zeros({2}), 1), Type, "float32"),
      BAD(ts::random::split(ts::zeros({2}, ts::int32)), Type, "int32"),
      BAD(ts::random::key_data(ts::zeros({3})), Type, "float32"),
      BAD(ts::random::permutation(k, ts::zeros({})), ShapeOrType),
  });
}

TEST_CASE("config: device_count cannot change once the runtime runs") {
  (void)ts::devices();  // the runtime has started
  const int n = ts::device_count();
  struct Restore {
    int v;
    ~Restore() { ts::config().device_count = v; }
  } restore{ts::config().device_count};
  for (int bad : {n == 3 ? 5 : 3, n + 1, 0, -1, 65, 1000}) {
    ts::config().device_count = bad;
    expect_error<ts::ValueError>([] { (void)ts::devices(); }, {std::to_string(bad)},
                                 "config().device_count = " + std::to_string(bad) + " after start; ts::devices()");
    ts::config().device_count = restore.v;
  }
  WORKS(CHECK(int(ts::devices().size()) == n));
}

TEST_CASE("zero-size arrays are valid everywhere (none of these throws)") {
  auto z03 = ts::zeros({0, 3});
  auto k = ts::random::key(0);
  WORKS(CHECK(z03.reshape({3, 0}).shape() == ts::Shape{3, 0}));
  WORKS(CHECK(z03.reshape({0}).shape() == ts::Shape{0}));
  WORKS(CHECK(z03.reshape({-1}).shape() == ts::Shape{0}));
  WORKS(CHECK(z03.reshape({-1, 3}).shape() == ts::Shape{0, 3}));
  WORKS(CHECK(z03.reshape({5, 0, 7}).shape() == ts::Shape{5, 0, 7}));
  WORKS(CHECK(ts::zeros({p2(62), 0}).size() == 0));
  WORKS(CHECK(ts::sum(ts::zeros({0})).item<float>() == 0));
  WORKS(CHECK(ts::sum(ts::zeros({0}, ts::int32)).item<int>() == 0));
  WORKS(CHECK(ts::prod(ts::zeros({0})).item<float>() == 1));
  WORKS(CHECK(std::isnan(ts::mean(ts::zeros({0})).item<float>())));
  WORKS(CHECK(ts::sum(ts::zeros({3, 0}), 1).to_vector<float>() == std::vector<float>{0, 0, 0}));
  WORKS(CHECK(ts::max(ts::zeros({3, 0}), 0).shape() == ts::Shape{0}));
  WORKS(CHECK(ts::argmax(z03, 1).shape() == ts::Shape{0}));
  WORKS(CHECK(ts::sort(ts::zeros({0})).shape() == ts::Shape{0}));
  WORKS(CHECK(ts::random::split(k, 0).shape() == ts::Shape{0, 2}));
  WORKS(CHECK(ts::random::split(k, 0).dtype() == ts::uint32));
  WORKS(CHECK(ts::random::normal(k, {0, 5}).shape() == ts::Shape{0, 5}));
  WORKS(CHECK(ts::concatenate({z03, ts::ones({2, 3})}).shape() == ts::Shape{2, 3}));
  WORKS(CHECK(ts::concatenate({z03, z03}).shape() == ts::Shape{0, 3}));
  WORKS(CHECK(ts::concatenate({z03, z03}, 1).shape() == ts::Shape{0, 6}));
  WORKS(CHECK(ts::stack({ts::zeros({0}), ts::zeros({0})}).shape() == ts::Shape{2, 0}));
  WORKS(CHECK(ts::transpose(z03).shape() == ts::Shape{3, 0}));
  WORKS(CHECK(z03.T().shape() == ts::Shape{3, 0}));
  WORKS(CHECK(ts::jit(twice)(z03).shape() == ts::Shape{0, 3}));
  WORKS(CHECK(ts::jit(sumf)(z03).item<float>() == 0));
  WORKS(CHECK(ts::grad(sumf)(ts::zeros({0})).shape() == ts::Shape{0}));
  WORKS(CHECK((ts::zeros({0}) + ts::zeros({1})).shape() == ts::Shape{0}));
  WORKS(CHECK(ts::broadcast_to(ts::zeros({1}), {0}).shape() == ts::Shape{0}));
  WORKS(CHECK(ts::arange(0).size() == 0));
  WORKS(CHECK(ts::arange(5, 0).size() == 0));
  WORKS(CHECK(ts::linspace(0, 1, 0).shape() == ts::Shape{0}));
  WORKS(CHECK(ts::eye(0).shape() == ts::Shape{0, 0}));
  WORKS(CHECK(ts::arange(12.0).reshape({3, 4}).index({ts::slice(2, 1)}).shape() == ts::Shape{0, 4}));
  WORKS(CHECK(ts::split(ts::zeros({0}), 2).size() == 2));
  WORKS(CHECK(ts::nn::one_hot(ts::arange(3), 0).shape() == ts::Shape{3, 0}));
  WORKS(CHECK(ts::pad(ts::zeros({0}), {{1, 1}}).shape() == ts::Shape{2}));
  WORKS(CHECK(ts::dot(ts::zeros({3, 0}), ts::zeros({0, 4})).to_vector<float>() == std::vector<float>(12, 0.0f)));
  WORKS(CHECK(ts::zeros({0}).to_vector<float>().empty()));
  WORKS(CHECK(ts::zeros({1, 1}).item<float>() == 0));
  WORKS(CHECK(ts::array(std::vector<float>{}, {0, 4}).shape() == ts::Shape{0, 4}));
  if (ts::device_count() >= 8) {
    auto mesh = ts::make_mesh({4, 2}, {"a", "b"});
    WORKS(CHECK(ts::device_put(ts::zeros({0, 8}), ts::NamedSharding(mesh, P(ts::None, "a"))).shape() ==
                ts::Shape{0, 8}));
    WORKS(CHECK(ts::device_put(ts::zeros({0}), ts::NamedSharding(mesh, P("a"))).size() == 0));
  }
}
