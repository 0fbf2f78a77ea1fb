// "More of jax.numpy" (dsl/tessel/numpy.hpp): the Array API spellings and
// aliases, fmax/fmin, modf, i0, creation and index helpers, windows,
// polynomials, convolve/correlate, statistics (cov, corrcoef, gradient,
// unwrap, interp, trapezoid), insert/delete_, lexsort, sort_complex,
// select/choose, the splits, block, the set functions and
// extract/compress/trim_zeros, against reference values from NumPy:
// tests/data/numpy/surface3.json, written by tools/numpy_reference.py (no
// Python at test time; its comments say where JAX's semantics, which the
// references follow, differ from NumPy's). Every case runs eagerly, under
// jit and sharded over 1..8 devices, uneven sizes included
// (ts::testing::check_op), and checks the result's dtype (JAX's for
// float32, int32 or bool inputs); constructors (logspace, indices, the
// windows, ...) are cases with no inputs. Functions of several outputs have
// one case per output (the kwarg "output", with "n_outputs" the number of
// arrays they must return).
//
// The group "eager" holds what is eager-only in tessel because the result's
// size depends on the values: trim_zeros, compress, extract without size
// and the set functions without size. Those cases are checked eagerly only,
// and jit of the same lambda must throw ts::ConcretizationError.
//
// Gradients (float64) are checked against central differences of the
// NumPy function (in the JSON) and of tessel's own, w.r.t. the inputs the
// case's "wrt" names (the others held fixed), as surface_ref_test.cpp.
//
// Tolerances (per case, in the JSON; |got - want| <= tol (1 + |want|) as
// check_op): 0 (bit-exact) for data movement, selection, indices and
// predicates, 2e-5 for arithmetic, sums, products and interpolation, 1e-4
// for transcendental functions, windows and logspace/geomspace.
//
// As tests/dsl/surface_ref_test.cpp: each JSON case names an op and the
// table ops() below has one lambda per op; a case whose op has no lambda
// fails, and so does a lambda that no case uses.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
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
  static const json j = load("surface3.json");
  return j;
}

// kwargs readers. null means none (an axis of null: the flattened array).
std::optional<int> opt_axis(const json& kw) {
  if (!kw.contains("axis") || kw.at("axis").is_null()) return std::nullopt;
  return kw.at("axis").get<int>();
}
std::optional<int> opt_int(const json& kw, const char* key) {
  if (!kw.contains(key) || kw.at(key).is_null()) return std::nullopt;
  return kw.at(key).get<int>();
}
std::optional<std::int64_t> opt_i64(const json& kw, const char* key) {
  if (!kw.contains(key) || kw.at(key).is_null()) return std::nullopt;
  return kw.at(key).get<std::int64_t>();
}
std::optional<double> opt_d(const json& kw, const char* key) {
  if (!kw.contains(key) || kw.at(key).is_null()) return std::nullopt;
  return num(kw.at(key));
}
int geti(const json& kw, const char* key) { return kw.at(key).get<int>(); }
std::int64_t geti64(const json& kw, const char* key) { return kw.at(key).get<std::int64_t>(); }
double getd(const json& kw, const char* key) { return num(kw.at(key)); }
bool getb(const json& kw, const char* key) { return kw.at(key).get<bool>(); }
std::string gets(const json& kw, const char* key) { return kw.at(key).get<std::string>(); }

[[noreturn]] void bad_kwarg(const char* op, const json& kw, const char* key) {
  throw std::runtime_error(std::string(op) + ": bad kwarg " + key + " = " + kw.at(key).dump());
}

// The output kwarg of a function of several outputs: outs[output], after
// checking that there are n_outputs of them.
Array pick(const std::vector<Array>& outs, const json& kw, const char* what) {
  const auto expected = kw.at("n_outputs").get<std::size_t>();
  if (outs.size() != expected)
    throw std::runtime_error(std::string(what) + " gave " + std::to_string(outs.size()) + " arrays, want " +
                             std::to_string(expected));
  return outs.at(kw.at("output").get<std::size_t>());
}

// The kwarg "complex": the input is ts::complex(inputs[0], inputs[1]).
Array maybe_complex(const Inputs& x, const json& kw) {
  return getb(kw, "complex") ? ts::complex(x.at(0), x.at(1)) : x.at(0);
}

ts::UniqueOptions unique_options(const json& kw) {
  ts::UniqueOptions o;
  o.size = opt_i64(kw, "size");
  o.fill_value = opt_d(kw, "fill_value");
  return o;
}

#define UNARY(NAME, FN) \
  { NAME, [](const Inputs& x, const json&) { return FN(x[0]); } }
#define BINARY(NAME, FN) \
  { NAME, [](const Inputs& x, const json&) { return FN(x[0], x[1]); } }
#define WINDOW(NAME, FN) \
  { NAME, [](const Inputs&, const json& kw) { return FN(geti64(kw, "M")); } }
#define TRI_INDICES(NAME, FN)                                                               \
  {                                                                                         \
    NAME, [](const Inputs&, const json& kw) {                                               \
      return pick(FN(geti64(kw, "n"), geti64(kw, "k"), opt_i64(kw, "m")), kw, NAME);        \
    }                                                                                       \
  }
#define SPLIT(NAME, FN) \
  { NAME, [](const Inputs& x, const json& kw) { return pick(FN(x[0], geti(kw, "sections")), kw, NAME); } }
#define SET(NAME, FN) \
  { NAME, [](const Inputs& x, const json& kw) { return FN(x[0], x[1], unique_options(kw)); } }

const std::map<std::string, RefFn>& ops() {
  static const std::map<std::string, RefFn> table = {
      // ---------------------------------------------------- elementwise
      UNARY("absolute", ts::absolute),
      UNARY("acos", ts::acos),
      UNARY("acosh", ts::acosh),
      UNARY("asin", ts::asin),
      UNARY("asinh", ts::asinh),
      UNARY("atan", ts::atan),
      UNARY("atanh", ts::atanh),
      BINARY("atan2", ts::atan2),
      {"around", [](const Inputs& x, const json& kw) { return ts::around(x[0], geti(kw, "decimals")); }},
      UNARY("rint", ts::rint),
      BINARY("fmax", ts::fmax),
      BINARY("fmin", ts::fmin),
      {"modf",
       [](const Inputs& x, const json& kw) {
         const std::pair<Array, Array> r = ts::modf(x[0]);
         return pick({r.first, r.second}, kw, "modf");
       }},
      UNARY("i0", ts::i0),
      {"isreal", [](const Inputs& x, const json& kw) { return ts::isreal(maybe_complex(x, kw)); }},
      {"iscomplex", [](const Inputs& x, const json& kw) { return ts::iscomplex(maybe_complex(x, kw)); }},
      // ---------------------------------------------------- creation (no inputs) and resize
      {"logspace",
       [](const Inputs&, const json& kw) {
         return ts::logspace(getd(kw, "start"), getd(kw, "stop"), geti64(kw, "num"), getb(kw, "endpoint"),
                             getd(kw, "base"));
       }},
      {"geomspace",
       [](const Inputs&, const json& kw) {
         return ts::geomspace(getd(kw, "start"), getd(kw, "stop"), geti64(kw, "num"), getb(kw, "endpoint"));
       }},
      {"indices", [](const Inputs&, const json& kw) { return ts::indices(kw.at("dimensions").get<ts::Shape>()); }},
      {"diag_indices",
       [](const Inputs&, const json& kw) {
         return pick(ts::diag_indices(geti64(kw, "n"), geti(kw, "ndim")), kw, "diag_indices");
       }},
      TRI_INDICES("tril_indices", ts::tril_indices),
      TRI_INDICES("triu_indices", ts::triu_indices),
      {"diagflat", [](const Inputs& x, const json& kw) { return ts::diagflat(x[0], geti(kw, "k")); }},
      {"vander",
       [](const Inputs& x, const json& kw) { return ts::vander(x[0], opt_i64(kw, "N"), getb(kw, "increasing")); }},
      WINDOW("bartlett", ts::bartlett),
      WINDOW("blackman", ts::blackman),
      WINDOW("hamming", ts::hamming),
      WINDOW("hanning", ts::hanning),
      {"kaiser", [](const Inputs&, const json& kw) { return ts::kaiser(geti64(kw, "M"), getd(kw, "beta")); }},
      {"resize", [](const Inputs& x, const json& kw) { return ts::resize(x[0], kw.at("new_shape").get<ts::Shape>()); }},
      // ---------------------------------------------------- indexing
      {"unravel_index",
       [](const Inputs& x, const json& kw) {
         return pick(ts::unravel_index(x[0], kw.at("shape").get<ts::Shape>()), kw, "unravel_index");
       }},
      {"ravel_multi_index",
       [](const Inputs& x, const json& kw) {
         return ts::ravel_multi_index(x, kw.at("dims").get<ts::Shape>(), gets(kw, "mode"));
       }},
      {"fill_diagonal",
       [](const Inputs& x, const json& kw) { return ts::fill_diagonal(x[0], getd(kw, "val"), getb(kw, "wrap")); }},
      {"insert",
       [](const Inputs& x, const json& kw) { return ts::insert(x[0], geti64(kw, "index"), x[1], opt_axis(kw)); }},
      {"delete_", [](const Inputs& x, const json& kw) { return ts::delete_(x[0], geti64(kw, "index"), opt_axis(kw)); }},
      {"select",
       [](const Inputs& x, const json& kw) {
         // The first n inputs are the conditions, the next n the choices.
         const auto n = kw.at("n").get<std::size_t>();
         if (x.size() != 2 * n)
           throw std::runtime_error("select: " + std::to_string(x.size()) + " inputs for n = " + std::to_string(n));
         const Inputs conds(x.begin(), x.begin() + std::ptrdiff_t(n)), choices(x.begin() + std::ptrdiff_t(n), x.end());
         return ts::select(conds, choices, getd(kw, "default"));
       }},
      {"choose",
       [](const Inputs& x, const json& kw) {
         return ts::choose(x[0], Inputs(x.begin() + 1, x.end()), gets(kw, "mode"));
       }},
      {"lexsort", [](const Inputs& x, const json& kw) { return ts::lexsort(x, geti(kw, "axis")); }},
      {"place", [](const Inputs& x, const json&) { return ts::place(x[0], x[1], x[2]); }},
      {"sort_complex",
       [](const Inputs& x, const json& kw) -> Array {
         const Array r = ts::sort_complex(maybe_complex(x, kw));
         const std::string out = gets(kw, "output");
         if (out == "real") return ts::real(r);
         if (out == "imag") return ts::imag(r);
         bad_kwarg("sort_complex", kw, "output");
       }},
      {"extract",
       [](const Inputs& x, const json& kw) {
         ts::NonzeroOptions o;
         o.size = opt_i64(kw, "size");
         o.fill_value = geti64(kw, "fill_value");
         return ts::extract(x[0], x[1], o);
       }},
      // ---------------------------------------------------- polynomials, convolve, correlate
      BINARY("polyval", ts::polyval),
      BINARY("polyadd", ts::polyadd),
      BINARY("polysub", ts::polysub),
      BINARY("polymul", ts::polymul),
      {"polyder", [](const Inputs& x, const json& kw) { return ts::polyder(x[0], geti(kw, "m")); }},
      {"polyint", [](const Inputs& x, const json& kw) { return ts::polyint(x[0], geti(kw, "m"), getd(kw, "k")); }},
      UNARY("poly", ts::poly),
      {"polydiv",
       [](const Inputs& x, const json& kw) {
         auto qr = ts::polydiv(x[0], x[1]);
         return pick({qr.first, qr.second}, kw, "polydiv");
       }},
      {"convolve", [](const Inputs& x, const json& kw) { return ts::convolve(x[0], x[1], gets(kw, "mode")); }},
      {"correlate", [](const Inputs& x, const json& kw) { return ts::correlate(x[0], x[1], gets(kw, "mode")); }},
      // ---------------------------------------------------- statistics and calculus
      UNARY("ediff1d", ts::ediff1d),
      {"trapezoid",
       [](const Inputs& x, const json& kw) {
         // With the kwarg dx: the spacing form; else the second input holds the sample points.
         if (kw.contains("dx")) return ts::trapezoid(x[0], getd(kw, "dx"), geti(kw, "axis"));
         return ts::trapezoid(x[0], x.at(1), geti(kw, "axis"));
       }},
      {"vecdot", [](const Inputs& x, const json& kw) { return ts::vecdot(x[0], x[1], geti(kw, "axis")); }},
      BINARY("matvec", ts::matvec),
      BINARY("vecmat", ts::vecmat),
      {"cov",
       [](const Inputs& x, const json& kw) {
         return ts::cov(x[0], getb(kw, "rowvar"), getb(kw, "bias"), opt_int(kw, "ddof"));
       }},
      {"corrcoef", [](const Inputs& x, const json& kw) { return ts::corrcoef(x[0], getb(kw, "rowvar")); }},
      {"gradient",
       [](const Inputs& x, const json& kw) { return ts::gradient(x[0], getd(kw, "dx"), geti(kw, "axis")); }},
      {"gradient_axes",
       [](const Inputs& x, const json& kw) {
         // "spacing": a number each, or "coords" for the next input after f.
         std::vector<Array> spacing;
         std::size_t next = 1;
         for (const auto& h : kw.at("spacing")) spacing.push_back(h.is_string() ? x.at(next++) : ts::array(h.get<double>()));
         if (next != x.size()) throw std::runtime_error("gradient_axes: inputs left over");
         return pick(ts::gradient(x[0], spacing, kw.at("axes").get<std::vector<int>>()), kw, "gradient_axes");
       }},
      {"unwrap",
       [](const Inputs& x, const json& kw) {
         // discont null: tessel's default (-1, which means period / 2, as NumPy's and JAX's None).
         const double discont = kw.at("discont").is_null() ? -1.0 : getd(kw, "discont");
         return ts::unwrap(x[0], discont, geti(kw, "axis"), getd(kw, "period"));
       }},
      {"interp",
       [](const Inputs& x, const json& kw) {
         return ts::interp(x[0], x[1], x[2], opt_d(kw, "left"), opt_d(kw, "right"));
       }},
      // ---------------------------------------------------- shapes
      {"block",
       [](const Inputs& x, const json& kw) {
         // The inputs row by row; "rows" holds the number of arrays in each row.
         std::vector<std::vector<Array>> rows;
         std::size_t at = 0;
         for (const auto n : kw.at("rows").get<std::vector<std::size_t>>()) {
           if (at + n > x.size()) throw std::runtime_error("block: the rows need more inputs than the case has");
           rows.emplace_back(x.begin() + std::ptrdiff_t(at), x.begin() + std::ptrdiff_t(at + n));
           at += n;
         }
         if (at != x.size()) throw std::runtime_error("block: inputs left over");
         return ts::block(rows);
       }},
      {"array_split",
       [](const Inputs& x, const json& kw) {
         return pick(ts::array_split(x[0], geti(kw, "sections"), geti(kw, "axis")), kw, "array_split");
       }},
      SPLIT("hsplit", ts::hsplit),
      SPLIT("vsplit", ts::vsplit),
      SPLIT("dsplit", ts::dsplit),
      {"unstack",
       [](const Inputs& x, const json& kw) { return pick(ts::unstack(x[0], geti(kw, "axis")), kw, "unstack"); }},
      UNARY("matrix_transpose", ts::matrix_transpose),
      {"permute_dims",
       [](const Inputs& x, const json& kw) { return ts::permute_dims(x[0], kw.at("axes").get<std::vector<int>>()); }},
      {"concat", [](const Inputs& x, const json& kw) { return ts::concat(x, geti(kw, "axis")); }},
      {"broadcast_arrays",
       [](const Inputs& x, const json& kw) { return pick(ts::broadcast_arrays(x), kw, "broadcast_arrays"); }},
      {"array_equal",
       [](const Inputs& x, const json& kw) { return ts::array_equal(x[0], x[1], getb(kw, "equal_nan")); }},
      BINARY("array_equiv", ts::array_equiv),
      // ---------------------------------------------------- sets (with size; without: the group "eager")
      SET("union1d", ts::union1d),
      SET("intersect1d", ts::intersect1d),
      SET("setdiff1d", ts::setdiff1d),
      SET("setxor1d", ts::setxor1d),
      // ---------------------------------------------------- eager only
      {"compress",
       [](const Inputs& x, const json& kw) {
         ts::NonzeroOptions o;
         o.size = opt_i64(kw, "size");
         o.fill_value = geti64(kw, "fill_value");
         return ts::compress(x[0], x[1], opt_axis(kw), o);
       }},
      {"trim_zeros", [](const Inputs& x, const json& kw) { return ts::trim_zeros(x[0], gets(kw, "trim")); }},
  };
  return table;
}

#undef UNARY
#undef BINARY
#undef WINDOW
#undef TRI_INDICES
#undef SPLIT
#undef SET

const std::set<std::string> kGroups = {"elementwise", "creation", "indexing", "poly",
                                       "stats",       "shapes",   "sets",     "eager"};
// The ops whose result's size depends on the values: without a static size they are eager-only.
const std::set<std::string> kSized = {"extract", "compress", "union1d", "intersect1d", "setdiff1d", "setxor1d"};

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

const json& case_named(const std::string& name) {
  for (const auto& c : data().at("cases"))
    if (c.at("name").get<std::string>() == name) return c;
  throw std::runtime_error("surface3.json has no case " + name);
}

void check_case(const json& c) {
  const auto name = c.at("name").get<std::string>();
  CAPTURE(name);
  const RefFn* f = find_op(c);
  if (!f) {
    FAIL_CHECK("surface3.json case " << name << ": no lambda for op " << c.at("op").get<std::string>());
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
    // The dtype JAX gives (float32 for float32 inputs and for the integer
    // inputs of convolve, correlate, polymul, polyder, polyint; int32 for
    // indices and int32 data; bool for the predicates).
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

// An eager-only case: the value eagerly, and jit of the same lambda a ConcretizationError.
void check_eager_case(const json& c) {
  const auto name = c.at("name").get<std::string>();
  CAPTURE(name);
  const RefFn* f = find_op(c);
  if (!f) {
    FAIL_CHECK("surface3.json case " << name << ": no lambda for op " << c.at("op").get<std::string>());
    return;
  }
  const Inputs xs = inputs_of(c);
  const json kw = c.at("kwargs");
  const RefFn op = *f;
  const ts::testing::OpFn fn = [op, kw](const Inputs& v) { return op(v, kw); };
  const auto& expected = c.at("expected");
  try {
    const Array got = fn(xs);
    CHECK(std::string(ts::dtype_name(got.dtype())) == expected.at("dtype").get<std::string>());
    CHECK(ts::testing::diff(got, nums(expected.at("values")), shape_of(expected), c.at("tol").get<double>()) == "");
  } catch (const std::exception& e) {
    FAIL_CHECK(name << " threw: " << e.what());
  }
  auto jitted = ts::jit([fn](const Inputs& v) { return fn(v); });
  const Thrown t = thrown_by([&] { (void)jitted(xs); });
  CAPTURE(t.message);
  CHECK_MESSAGE(t.concretization, "jit of an eager-only function (no size) should be a ts::ConcretizationError");
}

// ---------------------------------------------------------------- gradients

void check_grad_case(const json& c) {
  const auto name = c.at("name").get<std::string>();
  CAPTURE(name);
  const RefFn* f = find_op(c);
  if (!f) {
    FAIL_CHECK("surface3.json gradient case " << name << ": no lambda for op " << c.at("op").get<std::string>());
    return;
  }
  const Inputs xs = inputs_of(c);
  const json kw = c.at("kwargs");
  const auto wrt = c.at("wrt").get<std::vector<std::size_t>>();
  const RefFn op = *f;
  const Fn value = [op, kw](const Inputs& v) { return op(v, kw); };
  // sum(f) as a function of the inputs named by wrt, the others held at their values.
  const Fn total = [op, kw, xs, wrt](const Inputs& v) {
    Inputs all = xs;
    for (std::size_t k = 0; k < wrt.size(); ++k) all.at(wrt[k]) = v.at(k);
    return ts::sum(op(all, kw));
  };
  Inputs args;
  for (const auto i : wrt) args.push_back(xs.at(i));
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
    // Autodiff against the NumPy differences, eagerly and jitted on 3 and 5 devices (uneven splits).
    CHECK(compare_grads(g(args), want, tol) == "");
    auto jg = ts::jit(g);
    for (int n : {3, 5}) {
      CAPTURE(n);
      CHECK(compare_grads(jg(shard_inputs(args, n)), want, tol) == "");
    }
    // Autodiff against central differences of tessel's own f.
    CHECK(compare_grads(g(args), tessel_differences(total, args, h), tol) == "");
  } catch (const std::exception& e) {
    FAIL_CHECK(name << " threw: " << e.what());
  }
}

}  // namespace

TEST_CASE("surface3.json: every case has a lambda, every lambda a case, names unique") {
  std::set<std::string> used, names;
  for (const char* list : {"cases", "grad_cases"}) {
    REQUIRE(data().contains(list));
    CHECK(data().at(list).size() > 0);
    for (const auto& c : data().at(list)) {
      const auto name = c.at("name").get<std::string>();
      const auto op = c.at("op").get<std::string>();
      const auto group = c.at("group").get<std::string>();
      CAPTURE(name);
      CHECK_MESSAGE(names.insert(name).second, "duplicate case name " << name);
      CHECK_MESSAGE(ops().count(op) == 1, "case " << name << ": no lambda for op " << op);
      CHECK_MESSAGE(kGroups.count(group) == 1, "case " << name << ": unknown group");
      // A size-dependent op goes through check_op (jit) only with a static size.
      if (kSized.count(op) == 1)
        CHECK_MESSAGE(c.at("kwargs").at("size").is_null() == (group == "eager"),
                      "case " << name << ": eager exactly when it has no size");
      used.insert(op);
    }
  }
  for (const auto& entry : ops())
    CHECK_MESSAGE(used.count(entry.first) == 1, "lambda " << entry.first << " has no case in surface3.json");
}

TEST_CASE("NumPy reference: absolute, acos ... atan2, around, rint, fmax, fmin, modf, i0, isreal, iscomplex") {
  run_group("elementwise");
}

TEST_CASE("NumPy reference: logspace, geomspace, indices, *_indices, diagflat, vander, windows, resize") {
  run_group("creation");
}

TEST_CASE("NumPy reference: unravel_index, ravel_multi_index, fill_diagonal, insert, delete_, select, choose, "
          "lexsort, sort_complex, place, extract and compress with size") {
  run_group("indexing");
}

TEST_CASE("NumPy reference: polyval, polyadd, polysub, polymul, polyder, polyint, poly, polydiv, convolve, correlate") {
  run_group("poly");
}

TEST_CASE("NumPy reference: ediff1d, trapezoid, vecdot, matvec, vecmat, cov, corrcoef, gradient (one axis, several, "
          "coordinates), unwrap, interp") {
  run_group("stats");
}

TEST_CASE("NumPy reference: block, array_split, h/v/dsplit, unstack, transposes, concat, broadcast_arrays, "
          "array_equal, array_equiv") {
  run_group("shapes");
}

TEST_CASE("NumPy reference: union1d, intersect1d, setdiff1d, setxor1d with size (padded, equal, cut)") {
  run_group("sets");
}

TEST_CASE("eager only: trim_zeros, compress, extract and the set functions without size; "
          "jit is a ConcretizationError") {
  int n = 0;
  for (const auto& c : data().at("cases"))
    if (c.at("group").get<std::string>() == "eager") {
      check_eager_case(c);
      ++n;
    }
  CHECK(n > 0);
}

TEST_CASE("sort_complex gives complex64, for real and for complex inputs") {
  for (const char* name : {"sort_complex/real_vector_real", "sort_complex/complex_vector_real"}) {
    CAPTURE(name);
    const json& c = case_named(name);
    const Array got = ts::sort_complex(maybe_complex(inputs_of(c), c.at("kwargs")));
    CHECK(std::string(ts::dtype_name(got.dtype())) == "complex64");
  }
}

TEST_CASE("gradients against central differences: polyval, interp, trapezoid, cov, i0, fmax") {
  int n = 0;
  for (const auto& c : data().at("grad_cases")) {
    check_grad_case(c);
    ++n;
  }
  CHECK(n > 0);
}
