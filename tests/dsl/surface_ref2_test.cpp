// Sorting and searching (sort, argsort, lax::top_k, lax::sort,
// searchsorted), counting (bincount, histogram, isin), quantiles (quantile,
// percentile, median and their nan versions), index and set functions
// (unique, nonzero, argwhere, flatnonzero) and lax::associative_scan /
// lax::reduce with C++ lambdas, against reference values from NumPy:
// tests/data/numpy/surface2.json, written by tools/numpy_reference.py (no
// Python at test time; its comments say where JAX's semantics, which the
// references follow, differ from NumPy's). Every case runs eagerly, under
// jit and sharded over 1..8 devices, uneven sizes included
// (ts::testing::check_op), and checks the result's dtype (JAX's for float32
// or int32 inputs). Functions of several outputs have one case per output
// (the kwarg "output"); functions whose output size depends on the values
// (unique, nonzero, argwhere, flatnonzero) take a size in every case, and
// a TEST_CASE of its own checks that jit without one is a
// ts::ConcretizationError that names size.
//
// Tolerances (per case, in the JSON; |got - want| <= tol (1 + |want|) as
// check_op): 0 (bit-exact) for sorting, selection, counting and indices,
// 2e-5 for sums, products and interpolation.
//
// As tests/dsl/surface_ref_test.cpp: each JSON case names an op and the
// table ops() below has one lambda per op; a case whose op has no lambda
// fails, and so does a lambda that no case uses.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <tessel/tessel.hpp>

#include "tests/common/numpy_ref.hpp"
#include "tests/common/op_check.hpp"

namespace ts = tessel;
using ts::Array;
using json = nlohmann::json;
using Inputs = std::vector<Array>;
// An op: the inputs and the case's kwargs -> the result.
using RefFn = std::function<Array(const Inputs&, const json&)>;

namespace {

using namespace ts::testing::numpy_ref;

const json& data() {
  static const json j = load("surface2.json");
  return j;
}

// kwargs readers. An axis of null means none (the flattened array).
std::optional<int> opt_axis(const json& kw) {
  if (!kw.contains("axis") || kw.at("axis").is_null()) return std::nullopt;
  return kw.at("axis").get<int>();
}
int geti(const json& kw, const char* key) { return kw.at(key).get<int>(); }
std::int64_t geti64(const json& kw, const char* key) { return kw.at(key).get<std::int64_t>(); }
double getd(const json& kw, const char* key) { return num(kw.at(key)); }
bool getb(const json& kw, const char* key) { return kw.at(key).get<bool>(); }
std::string gets(const json& kw, const char* key) { return kw.at(key).get<std::string>(); }

// The output kwarg of a function of several outputs: outs[output], after
// checking that there are `expected` outputs.
Array pick(const std::vector<Array>& outs, const json& kw, std::size_t expected, const char* what) {
  if (outs.size() != expected)
    throw std::runtime_error(std::string(what) + " gave " + std::to_string(outs.size()) + " arrays, want " +
                             std::to_string(expected));
  return outs.at(std::size_t(geti(kw, "output")));
}

[[noreturn]] void bad_kwarg(const char* op, const json& kw, const char* key) {
  throw std::runtime_error(std::string(op) + ": bad kwarg " + key + " = " + kw.at(key).dump());
}

ts::NonzeroOptions nonzero_options(const json& kw) {
  ts::NonzeroOptions o;
  o.size = geti64(kw, "size");
  if (!kw.at("fill_value").is_null()) o.fill_value = geti(kw, "fill_value");
  return o;
}

#define QUANTILE(NAME, FN)                                                                              \
  {                                                                                                     \
    NAME, [](const Inputs& x, const json& kw) {                                                         \
      return FN(x[0], getd(kw, "q"), opt_axis(kw), gets(kw, "method"), getb(kw, "keepdims"));           \
    }                                                                                                   \
  }
#define MEDIAN(NAME, FN) \
  { NAME, [](const Inputs& x, const json& kw) { return FN(x[0], opt_axis(kw), getb(kw, "keepdims")); } }

const std::map<std::string, RefFn>& ops() {
  static const std::map<std::string, RefFn> table = {
      // ---------------------------------------------------- sorting and searching
      {"sort",
       [](const Inputs& x, const json& kw) {
         return ts::sort(x[0], geti(kw, "axis"), ts::SortOptions{.descending = getb(kw, "descending")});
       }},
      {"argsort",
       [](const Inputs& x, const json& kw) {
         return ts::argsort(x[0], geti(kw, "axis"), ts::SortOptions{.descending = getb(kw, "descending")});
       }},
      {"lax.top_k",
       [](const Inputs& x, const json& kw) -> Array {
         auto r = ts::lax::top_k(x[0], geti(kw, "k"));
         const std::string out = gets(kw, "output");
         if (out == "values") return r.values;
         if (out == "indices") return r.indices;
         bad_kwarg("lax.top_k", kw, "output");
       }},
      {"lax.sort",
       [](const Inputs& x, const json& kw) {
         std::vector<Array> outs = ts::lax::sort(x, geti(kw, "dimension"), geti(kw, "num_keys"));
         return pick(outs, kw, x.size(), "lax::sort");
       }},
      {"searchsorted",
       [](const Inputs& x, const json& kw) { return ts::searchsorted(x[0], x[1], gets(kw, "side")); }},
      // ---------------------------------------------------- counting
      {"bincount",
       [](const Inputs& x, const json& kw) {
         ts::BincountOptions o;
         if (x.size() > 1) o.weights = x[1];
         o.minlength = geti64(kw, "minlength");
         o.length = geti64(kw, "length");
         return ts::bincount(x[0], o);
       }},
      {"histogram",
       [](const Inputs& x, const json& kw) -> Array {
         const auto range = kw.at("range").get<std::vector<double>>();
         const std::pair<double, double> lo_hi(range.at(0), range.at(1));
         std::pair<Array, Array> r = ts::histogram(x[0], geti(kw, "bins"), lo_hi);
         const std::string out = gets(kw, "output");
         if (out == "counts") return r.first;
         if (out == "edges") return r.second;
         bad_kwarg("histogram", kw, "output");
       }},
      {"isin", [](const Inputs& x, const json& kw) { return ts::isin(x[0], x[1], getb(kw, "invert")); }},
      // ---------------------------------------------------- quantiles
      QUANTILE("quantile", ts::quantile),
      QUANTILE("percentile", ts::percentile),
      QUANTILE("nanquantile", ts::nanquantile),
      QUANTILE("nanpercentile", ts::nanpercentile),
      MEDIAN("median", ts::median),
      MEDIAN("nanmedian", ts::nanmedian),
      // ---------------------------------------------------- unique and the nonzero family (always with a size)
      {"unique",
       [](const Inputs& x, const json& kw) {
         ts::UniqueOptions o;
         o.size = geti64(kw, "size");
         if (!kw.at("fill_value").is_null()) o.fill_value = getd(kw, "fill_value");
         return ts::unique(x[0], o);
       }},
      {"nonzero",
       [](const Inputs& x, const json& kw) {
         std::vector<Array> outs = ts::nonzero(x[0], nonzero_options(kw));
         return pick(outs, kw, std::size_t(x[0].ndim()), "nonzero");
       }},
      {"argwhere", [](const Inputs& x, const json& kw) { return ts::argwhere(x[0], nonzero_options(kw)); }},
      {"flatnonzero", [](const Inputs& x, const json& kw) { return ts::flatnonzero(x[0], nonzero_options(kw)); }},
      // ---------------------------------------------------- lax with C++ lambdas
      {"lax.associative_scan",
       [](const Inputs& x, const json& kw) -> Array {
         const bool reverse = getb(kw, "reverse");
         const int axis = geti(kw, "axis");
         const std::string fn = gets(kw, "fn");
         if (fn == "add")
           return ts::lax::associative_scan([](const Array& a, const Array& b) -> Array { return a + b; }, x[0],
                                            {.reverse = reverse, .axis = axis});
         if (fn == "maximum")
           return ts::lax::associative_scan([](const Array& a, const Array& b) -> Array { return ts::maximum(a, b); },
                                            x[0], {.reverse = reverse, .axis = axis});
         bad_kwarg("lax.associative_scan", kw, "fn");
       }},
      {"lax.reduce",
       [](const Inputs& x, const json& kw) -> Array {
         const double init = getd(kw, "init");
         const auto dims = kw.at("dimensions").get<std::vector<int>>();
         const std::string fn = gets(kw, "fn");
         if (fn == "add")
           return ts::lax::reduce(x[0], init, [](const Array& a, const Array& b) -> Array { return a + b; }, dims);
         if (fn == "max")
           return ts::lax::reduce(x[0], init, [](const Array& a, const Array& b) -> Array { return ts::maximum(a, b); },
                                  dims);
         if (fn == "multiply")
           return ts::lax::reduce(x[0], init, [](const Array& a, const Array& b) -> Array { return a * b; }, dims);
         bad_kwarg("lax.reduce", kw, "fn");
       }},
  };
  return table;
}

#undef QUANTILE
#undef MEDIAN

const std::set<std::string> kGroups = {"sort", "count", "quantile", "index", "lax"};


const RefFn* find_op(const json& c) {
  const auto op = c.at("op").get<std::string>();
  auto it = ops().find(op);
  return it == ops().end() ? nullptr : &it->second;
}

Inputs inputs_of(const json& c) {
  Inputs xs;
  for (const auto& a : c.at("inputs")) xs.push_back(make_input(a));
  return xs;
}

void check_case(const json& c) {
  const auto name = c.at("name").get<std::string>();
  CAPTURE(name);
  const RefFn* f = find_op(c);
  if (!f) {
    FAIL_CHECK("surface2.json case " << name << ": no lambda for op " << c.at("op").get<std::string>());
    return;
  }
  const Inputs xs = inputs_of(c);
  const json kw = c.at("kwargs");
  const RefFn op = *f;
  const ts::testing::OpFn fn = [op, kw](const Inputs& v) { return op(v, kw); };
  const auto& expected = c.at("expected");
  const auto want = nums(expected.at("values"));
  const auto shape = shape_of(expected);
  const double tol = c.at("tol").get<double>();
  try {
    // The dtype JAX gives (float32 or int32 as the input; int32 indices and
    // counts; bool for isin; float32 for weighted bincount and histogram).
    CHECK(std::string(ts::dtype_name(fn(xs).dtype())) == expected.at("dtype").get<std::string>());
    ts::testing::check_op(name, fn, xs, want, shape, tol);
  } catch (const std::exception& e) {
    FAIL_CHECK(name << " threw: " << e.what());
  }
}

void run_group(const std::string& group) {
  int n = 0;
  for (const auto& c : data().at("cases"))
    if (c.at("group").get<std::string>() == group) {
      check_case(c);
      ++n;
    }
  CHECK(n > 0);
}

const json& case_named(const std::string& name) {
  for (const auto& c : data().at("cases"))
    if (c.at("name").get<std::string>() == name) return c;
  throw std::runtime_error("surface2.json has no case " + name);
}

// What f threw: whether it was a ts::ConcretizationError, and the message.
struct Thrown {
  bool concretization = false;
  std::string message;
};
template <class F>
Thrown thrown_by(F&& f) {
  try {
    f();
  } catch (const ts::ConcretizationError& e) {
    return {true, e.what()};
  } catch (const std::exception& e) {
    return {false, std::string("not a ConcretizationError: ") + e.what()};
  }
  return {false, "nothing thrown"};
}

}  // namespace

TEST_CASE("surface2.json: every case has a lambda, every lambda a case, names unique") {
  std::set<std::string> used, names;
  REQUIRE(data().contains("cases"));
  CHECK(data().at("cases").size() > 0);
  for (const auto& c : data().at("cases")) {
    const auto name = c.at("name").get<std::string>();
    const auto op = c.at("op").get<std::string>();
    CAPTURE(name);
    CHECK_MESSAGE(names.insert(name).second, "duplicate case name " << name);
    CHECK_MESSAGE(ops().count(op) == 1, "case " << name << ": no lambda for op " << op);
    CHECK_MESSAGE(kGroups.count(c.at("group").get<std::string>()) == 1, "case " << name << ": unknown group");
    used.insert(op);
  }
  for (const auto& entry : ops())
    CHECK_MESSAGE(used.count(entry.first) == 1, "lambda " << entry.first << " has no case in surface2.json");
}

TEST_CASE("NumPy reference: sort, argsort (descending, stable, NaNs), lax.top_k, lax.sort, searchsorted") {
  run_group("sort");
}

TEST_CASE("NumPy reference: bincount (with length), histogram, isin") { run_group("count"); }

TEST_CASE("NumPy reference: quantile, percentile, median and the nan versions (five methods)") {
  run_group("quantile");
}

TEST_CASE("NumPy reference: unique, nonzero, argwhere, flatnonzero with size (padded, equal, cut)") {
  run_group("index");
}

TEST_CASE("NumPy reference: lax.associative_scan and lax.reduce with C++ lambdas") { run_group("lax"); }

TEST_CASE("unique and the nonzero family without size: eager works, jit is a ConcretizationError naming size") {
  const std::string hint = "the message should name the size argument";
  // The expected values and shape of a JSON case.
  auto expect = [](const std::string& name) {
    const json& c = case_named(name);
    return std::pair<std::vector<double>, ts::Shape>(nums(c.at("expected").at("values")), shape_of(c.at("expected")));
  };
  SUBCASE("unique") {
    // "unique/vector_size_equal": size is the number of unique values, so without one the result is the same.
    const Array x = inputs_of(case_named("unique/vector_size_equal")).at(0);
    const auto [want, shape] = expect("unique/vector_size_equal");
    CHECK(ts::testing::diff(ts::unique(x, ts::UniqueOptions{}), want, shape, 0) == "");
    const Thrown t = thrown_by([&] { ts::jit([](ts::Array v) { return ts::unique(v, ts::UniqueOptions{}); })(x); });
    CAPTURE(t.message);
    CHECK(t.concretization);
    CHECK_MESSAGE(t.message.find("size") != std::string::npos, hint);
  }
  SUBCASE("nonzero") {
    const Array x = inputs_of(case_named("nonzero/matrix_equal_0")).at(0);
    const std::vector<Array> got = ts::nonzero(x, ts::NonzeroOptions{});
    REQUIRE(got.size() == 2);
    for (std::size_t k = 0; k < 2; ++k) {
      const auto [want, shape] = expect("nonzero/matrix_equal_" + std::to_string(k));
      CHECK(ts::testing::diff(got[k], want, shape, 0) == "");
    }
    const Thrown t =
        thrown_by([&] { ts::jit([](ts::Array v) { return ts::nonzero(v, ts::NonzeroOptions{}); })(x); });
    CAPTURE(t.message);
    CHECK(t.concretization);
    CHECK_MESSAGE(t.message.find("size") != std::string::npos, hint);
  }
  SUBCASE("argwhere") {
    const Array x = inputs_of(case_named("argwhere/matrix_equal")).at(0);
    const auto [want, shape] = expect("argwhere/matrix_equal");
    CHECK(ts::testing::diff(ts::argwhere(x, ts::NonzeroOptions{}), want, shape, 0) == "");
    const Thrown t =
        thrown_by([&] { ts::jit([](ts::Array v) { return ts::argwhere(v, ts::NonzeroOptions{}); })(x); });
    CAPTURE(t.message);
    CHECK(t.concretization);
    CHECK_MESSAGE(t.message.find("size") != std::string::npos, hint);
  }
  SUBCASE("flatnonzero") {
    const Array x = inputs_of(case_named("flatnonzero/vector_equal")).at(0);
    const auto [want, shape] = expect("flatnonzero/vector_equal");
    CHECK(ts::testing::diff(ts::flatnonzero(x, ts::NonzeroOptions{}), want, shape, 0) == "");
    const Thrown t =
        thrown_by([&] { ts::jit([](ts::Array v) { return ts::flatnonzero(v, ts::NonzeroOptions{}); })(x); });
    CAPTURE(t.message);
    CHECK(t.concretization);
    CHECK_MESSAGE(t.message.find("size") != std::string::npos, hint);
  }
}
