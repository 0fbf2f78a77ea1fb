// The NumPy surface (elementwise functions, nan-reductions, scans, shape
// functions), ts::nn's activations and ts::scipy::special against reference
// values from NumPy and SciPy: tests/data/numpy/surface.json, written once by
// tools/numpy_reference.py (no Python at test time). Every case runs eagerly,
// under jit and sharded over 1..8 devices, uneven sizes included
// (ts::testing::check_op); gradients (float64) are checked against central
// differences, of the NumPy/SciPy function (in the JSON) and of tessel's own.
//
// Tolerances (per case, in the JSON; |got - want| <= tol (1 + |want|) as
// check_op): 0 (bit-exact) for data movement, selection and predicates, 2e-5
// for arithmetic, sums and products, 1e-4 for transcendental functions; none
// looser. References are float64 values of the float32 inputs, so the
// tolerance covers only the float32 function's own error. Gradients: 1e-5;
// f itself in float64: 1e-9.
//
// Each JSON case names an op; the table ops() below has one lambda per op,
// which reads the case's kwargs. A case whose op has no lambda fails, and so
// does a lambda that no case uses: data and code cannot drift apart silently.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
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
  static const json j = load("surface.json");
  return j;
}

// kwargs readers. An axis of null means none (all axes, or the flattened array).
ts::Axes axes(const json& kw, const char* key = "axis") {
  if (!kw.contains(key) || kw.at(key).is_null()) return {};
  if (kw.at(key).is_array()) return ts::Axes(kw.at(key).get<std::vector<int>>());
  return ts::Axes(kw.at(key).get<int>());
}
std::optional<int> opt_axis(const json& kw) {
  if (!kw.contains("axis") || kw.at("axis").is_null()) return std::nullopt;
  return kw.at("axis").get<int>();
}
int geti(const json& kw, const char* key) { return kw.at(key).get<int>(); }
double getd(const json& kw, const char* key) { return kw.at(key).get<double>(); }
bool getb(const json& kw, const char* key) { return kw.at(key).get<bool>(); }

#define UNARY(NAME, FN) \
  { NAME, [](const Inputs& x, const json&) { return FN(x[0]); } }
#define BINARY(NAME, FN) \
  { NAME, [](const Inputs& x, const json&) { return FN(x[0], x[1]); } }
#define STACKING(NAME, FN) \
  { NAME, [](const Inputs& x, const json&) { return FN(x); } }

const std::map<std::string, RefFn>& ops() {
  namespace sp = ts::scipy::special;
  static const std::map<std::string, RefFn> table = {
      // ---------------------------------------------------- elementwise, one array
      UNARY("sinh", ts::sinh),
      UNARY("cosh", ts::cosh),
      UNARY("arcsin", ts::arcsin),
      UNARY("arccos", ts::arccos),
      UNARY("arctan", ts::arctan),
      UNARY("arcsinh", ts::arcsinh),
      UNARY("arccosh", ts::arccosh),
      UNARY("arctanh", ts::arctanh),
      UNARY("log2", ts::log2),
      UNARY("log10", ts::log10),
      UNARY("exp2", ts::exp2),
      UNARY("trunc", ts::trunc),
      UNARY("cbrt", ts::cbrt),
      UNARY("deg2rad", ts::deg2rad),
      UNARY("rad2deg", ts::rad2deg),
      UNARY("isinf", ts::isinf),
      UNARY("isposinf", ts::isposinf),
      UNARY("isneginf", ts::isneginf),
      UNARY("signbit", ts::signbit),
      UNARY("fabs", ts::fabs),
      UNARY("sinc", ts::sinc),
      {"nan_to_num",
       [](const Inputs& x, const json& kw) {
         ts::NanToNumOptions o;
         o.nan = getd(kw, "nan");
         if (!kw.at("posinf").is_null()) o.posinf = getd(kw, "posinf");
         if (!kw.at("neginf").is_null()) o.neginf = getd(kw, "neginf");
         return ts::nan_to_num(x[0], o);
       }},
      // ---------------------------------------------------- elementwise, two arrays
      BINARY("fmod", ts::fmod),
      BINARY("mod", ts::mod),
      BINARY("logaddexp", ts::logaddexp),
      BINARY("logaddexp2", ts::logaddexp2),
      BINARY("hypot", ts::hypot),
      BINARY("copysign", ts::copysign),
      BINARY("heaviside", ts::heaviside),
      // ---------------------------------------------------- reductions
      {"nansum", [](const Inputs& x, const json& kw) { return ts::nansum(x[0], axes(kw), getb(kw, "keepdims")); }},
      {"nanmean", [](const Inputs& x, const json& kw) { return ts::nanmean(x[0], axes(kw), getb(kw, "keepdims")); }},
      {"nanmax", [](const Inputs& x, const json& kw) { return ts::nanmax(x[0], axes(kw), getb(kw, "keepdims")); }},
      {"nanmin", [](const Inputs& x, const json& kw) { return ts::nanmin(x[0], axes(kw), getb(kw, "keepdims")); }},
      {"nanprod", [](const Inputs& x, const json& kw) { return ts::nanprod(x[0], axes(kw), getb(kw, "keepdims")); }},
      {"ptp", [](const Inputs& x, const json& kw) { return ts::ptp(x[0], axes(kw), getb(kw, "keepdims")); }},
      {"nanvar",
       [](const Inputs& x, const json& kw) { return ts::nanvar(x[0], axes(kw), geti(kw, "ddof"), getb(kw, "keepdims")); }},
      {"nanstd",
       [](const Inputs& x, const json& kw) { return ts::nanstd(x[0], axes(kw), geti(kw, "ddof"), getb(kw, "keepdims")); }},
      {"count_nonzero",
       [](const Inputs& x, const json& kw) { return ts::count_nonzero(x[0], axes(kw), getb(kw, "keepdims")); }},
      // ---------------------------------------------------- scans
      {"cumsum", [](const Inputs& x, const json& kw) { return ts::cumsum(x[0], opt_axis(kw)); }},
      {"cumprod", [](const Inputs& x, const json& kw) { return ts::cumprod(x[0], opt_axis(kw)); }},
      {"cummax", [](const Inputs& x, const json& kw) { return ts::lax::cummax(x[0], geti(kw, "axis")); }},
      {"cummin", [](const Inputs& x, const json& kw) { return ts::lax::cummin(x[0], geti(kw, "axis")); }},
      {"cumlogsumexp", [](const Inputs& x, const json& kw) { return ts::lax::cumlogsumexp(x[0], geti(kw, "axis")); }},
      // ---------------------------------------------------- shapes
      {"roll", [](const Inputs& x, const json& kw) { return ts::roll(x[0], geti(kw, "shift"), opt_axis(kw)); }},
      {"diff", [](const Inputs& x, const json& kw) { return ts::diff(x[0], geti(kw, "n"), geti(kw, "axis")); }},
      {"repeat", [](const Inputs& x, const json& kw) { return ts::repeat(x[0], geti(kw, "repeats"), opt_axis(kw)); }},
      {"tile",
       [](const Inputs& x, const json& kw) { return ts::tile(x[0], kw.at("reps").get<std::vector<std::int64_t>>()); }},
      {"meshgrid",
       [](const Inputs& x, const json& kw) {
         std::vector<Array> grids = ts::meshgrid(x, kw.at("indexing").get<std::string>());
         if (grids.size() != x.size())
           throw std::runtime_error("meshgrid of " + std::to_string(x.size()) + " arrays gave " +
                                    std::to_string(grids.size()));
         return grids.at(size_t(geti(kw, "output")));
       }},
      {"diag", [](const Inputs& x, const json& kw) { return ts::diag(x[0], geti(kw, "k")); }},
      {"diagonal",
       [](const Inputs& x, const json& kw) {
         return ts::diagonal(x[0], geti(kw, "offset"), geti(kw, "axis1"), geti(kw, "axis2"));
       }},
      {"trace",
       [](const Inputs& x, const json& kw) {
         return ts::trace(x[0], geti(kw, "offset"), geti(kw, "axis1"), geti(kw, "axis2"));
       }},
      STACKING("hstack", ts::hstack),
      STACKING("vstack", ts::vstack),
      STACKING("column_stack", ts::column_stack),
      STACKING("dstack", ts::dstack),
      {"moveaxis",
       [](const Inputs& x, const json& kw) { return ts::moveaxis(x[0], geti(kw, "source"), geti(kw, "destination")); }},
      BINARY("cross", ts::cross),
      BINARY("kron", ts::kron),
      {"rot90", [](const Inputs& x, const json& kw) { return ts::rot90(x[0], geti(kw, "k")); }},
      UNARY("fliplr", ts::fliplr),
      UNARY("flipud", ts::flipud),
      {"append", [](const Inputs& x, const json& kw) { return ts::append(x[0], x[1], opt_axis(kw)); }},
      // ---------------------------------------------------- ts::nn
      UNARY("nn.silu", ts::nn::silu),
      UNARY("nn.swish", ts::nn::swish),
      {"nn.elu", [](const Inputs& x, const json& kw) { return ts::nn::elu(x[0], getd(kw, "alpha")); }},
      {"nn.celu", [](const Inputs& x, const json& kw) { return ts::nn::celu(x[0], getd(kw, "alpha")); }},
      UNARY("nn.selu", ts::nn::selu),
      {"nn.leaky_relu",
       [](const Inputs& x, const json& kw) { return ts::nn::leaky_relu(x[0], getd(kw, "negative_slope")); }},
      UNARY("nn.softplus", ts::nn::softplus),
      UNARY("nn.log_sigmoid", ts::nn::log_sigmoid),
      {"nn.glu", [](const Inputs& x, const json& kw) { return ts::nn::glu(x[0], geti(kw, "axis")); }},
      UNARY("nn.relu6", ts::nn::relu6),
      UNARY("nn.hard_tanh", ts::nn::hard_tanh),
      UNARY("nn.hard_sigmoid", ts::nn::hard_sigmoid),
      UNARY("nn.hard_silu", ts::nn::hard_silu),
      UNARY("nn.hard_swish", ts::nn::hard_swish),
      UNARY("nn.soft_sign", ts::nn::soft_sign),
      UNARY("nn.mish", ts::nn::mish),
      {"nn.squareplus", [](const Inputs& x, const json& kw) { return ts::nn::squareplus(x[0], getd(kw, "b")); }},
      UNARY("nn.sparse_plus", ts::nn::sparse_plus),
      {"nn.standardize",
       [](const Inputs& x, const json& kw) { return ts::nn::standardize(x[0], axes(kw), std::nullopt, std::nullopt, getd(kw, "epsilon")); }},
      {"nn.logsumexp",
       [](const Inputs& x, const json& kw) { return ts::nn::logsumexp(x[0], axes(kw), getb(kw, "keepdims")); }},
      // ---------------------------------------------------- ts::scipy::special
      UNARY("special.erf", sp::erf),
      UNARY("special.erfc", sp::erfc),
      UNARY("special.erfinv", sp::erfinv),
      UNARY("special.gammaln", sp::gammaln),
      UNARY("special.digamma", sp::digamma),
      UNARY("special.logit", sp::logit),
      UNARY("special.expit", sp::expit),
      BINARY("special.xlogy", sp::xlogy),
      BINARY("special.xlog1py", sp::xlog1py),
      UNARY("special.i0e", sp::i0e),
      UNARY("special.i1e", sp::i1e),
      BINARY("special.betaln", sp::betaln),
      UNARY("special.log_ndtr", sp::log_ndtr),
      UNARY("special.ndtr", sp::ndtr),
      UNARY("special.ndtri", sp::ndtri),
  };
  return table;
}

#undef UNARY
#undef BINARY
#undef STACKING

const std::set<std::string> kGroups = {"elementwise", "reductions", "scans", "shapes", "nn", "special"};


const RefFn* find_op(const json& c) {
  const auto op = c.at("op").get<std::string>();
  auto it = ops().find(op);
  return it == ops().end() ? nullptr : &it->second;
}

void check_case(const json& c) {
  const auto name = c.at("name").get<std::string>();
  CAPTURE(name);
  const RefFn* f = find_op(c);
  if (!f) {
    FAIL_CHECK("surface.json case " << name << ": no lambda for op " << c.at("op").get<std::string>());
    return;
  }
  Inputs xs;
  for (const auto& a : c.at("inputs")) xs.push_back(make_input(a));
  const json kw = c.at("kwargs");
  const RefFn op = *f;
  const ts::testing::OpFn fn = [op, kw](const Inputs& v) { return op(v, kw); };
  const auto& expected = c.at("expected");
  const auto want = nums(expected.at("values"));
  const auto shape = shape_of(expected);
  const double tol = c.at("tol").get<double>();
  try {
    // The dtype JAX gives for float32 inputs (float32; bool for the predicates; int32 for count_nonzero).
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

// ---------------------------------------------------------------- gradients

void check_grad_case(const json& c) {
  const auto name = c.at("name").get<std::string>();
  CAPTURE(name);
  const RefFn* f = find_op(c);
  if (!f) {
    FAIL_CHECK("surface.json gradient case " << name << ": no lambda for op " << c.at("op").get<std::string>());
    return;
  }
  Inputs xs;
  for (const auto& a : c.at("inputs")) xs.push_back(make_input(a));
  const json kw = c.at("kwargs");
  const RefFn op = *f;
  const Fn value = [op, kw](const Inputs& v) { return op(v, kw); };
  const Fn total = [op, kw](const Inputs& v) { return ts::sum(op(v, kw)); };
  const double h = c.at("h").get<double>();
  const double tol = c.at("tol").get<double>();
  std::vector<std::vector<double>> want;
  for (const auto& g : c.at("expected_grad")) want.push_back(nums(g.at("values")));
  try {
    // f itself in float64: central differences of tessel's f need it accurate far
    // beyond float32 (an error e in f is an error e / h in the differences).
    const auto& ev = c.at("expected_value");
    CHECK(ts::testing::diff(value(xs), nums(ev.at("values")), shape_of(ev), 1e-9) == "");
    auto g = ts::grad(total);
    // Autodiff against the NumPy/SciPy differences, eagerly and jitted on 3 and 5 devices (uneven splits).
    CHECK(compare_grads(g(xs), want, tol) == "");
    auto jg = ts::jit(g);
    for (int n : {3, 5}) {
      CAPTURE(n);
      CHECK(compare_grads(jg(shard_inputs(xs, n)), want, tol) == "");
    }
    // Autodiff against central differences of tessel's own f.
    CHECK(compare_grads(g(xs), tessel_differences(total, xs, h), tol) == "");
  } catch (const std::exception& e) {
    FAIL_CHECK(name << " threw: " << e.what());
  }
}

void run_grad_group(const std::string& group) {
  int n = 0;
  for (const auto& c : data().at("grad_cases"))
    if (c.at("group").get<std::string>() == group) {
      check_grad_case(c);
      ++n;
    }
  CHECK(n > 0);
}

}  // namespace

TEST_CASE("surface.json: every case has a lambda, every lambda a case, names unique") {
  std::set<std::string> used, names;
  for (const char* list : {"cases", "grad_cases"}) {
    REQUIRE(data().contains(list));
    CHECK(data().at(list).size() > 0);
    for (const auto& c : data().at(list)) {
      const auto name = c.at("name").get<std::string>();
      const auto op = c.at("op").get<std::string>();
      CAPTURE(name);
      CHECK_MESSAGE(names.insert(name).second, "duplicate case name " << name);
      CHECK_MESSAGE(ops().count(op) == 1, "case " << name << ": no lambda for op " << op);
      CHECK_MESSAGE(kGroups.count(c.at("group").get<std::string>()) == 1, "case " << name << ": unknown group");
      used.insert(op);
    }
  }
  for (const auto& [op, fn] : ops()) CHECK_MESSAGE(used.count(op) == 1, "lambda " << op << " has no case in surface.json");
}

TEST_CASE("NumPy reference: elementwise functions (sinh ... sinc, nan_to_num, fmod ... heaviside)") {
  run_group("elementwise");
}

TEST_CASE("NumPy reference: nan-reductions, ptp, nanvar, nanstd, count_nonzero") { run_group("reductions"); }

TEST_CASE("NumPy reference: cumsum, cumprod, lax.cummax, cummin, cumlogsumexp") { run_group("scans"); }

TEST_CASE("NumPy reference: roll, diff, repeat, tile, meshgrid, diag ... append") { run_group("shapes"); }

TEST_CASE("NumPy reference: ts::nn activations, glu, standardize, logsumexp (jax.nn's closed forms)") {
  run_group("nn");
}

TEST_CASE("SciPy reference: ts::scipy::special") { run_group("special"); }

TEST_CASE("gradients against central differences: sinh cosh log2 log10 exp2 logaddexp arcsinh arctan") {
  run_grad_group("elementwise");
}

TEST_CASE("gradients against central differences: ts::nn") { run_grad_group("nn"); }

TEST_CASE("gradients against central differences: ts::scipy::special") { run_grad_group("special"); }
