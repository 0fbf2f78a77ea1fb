// The 8- and 16-bit dtypes and uint64 (issue 38): names, JAX's promotion
// table, host values in and out, conversions rounding once, and every op in
// every new dtype against the reference interpreter on 1..8 devices.
//
// The interpreter runs an op on narrow floats in float64 and rounds once
// (tracer/interpreter.cpp); compiled code computes in float32 and rounds at
// each op's result (codegen/narrow_float.hpp). For +, -, *, /, sqrt, the
// comparisons and everything that moves or picks values, both are exact
// roundings of the same value: the results must be equal bit for bit. Only
// the transcendental functions (float32's own error before the rounding)
// and sums (float32 partial sums, one rounding per device) get a tolerance.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>
#include <tessel/tessel.hpp>

#include "tests/common/golden.hpp"
#include "tests/common/interp_check.hpp"
#include "tracer/promotion.hpp"

namespace ts = tessel;
using ts::P;
using tessel::testing::host_of;
using tessel::testing::same_bits;

namespace {

const std::vector<ts::DType> kNew = {ts::bfloat16, ts::float16, ts::float8_e4m3fn, ts::float8_e5m2, ts::int8,
                                     ts::uint8,    ts::int16,   ts::uint16,        ts::uint64};

// fn's outputs under jit, on args as given (sharded), against the
// interpreter's; outputs listed in `exact` bit for bit, the others within
// `ulps` units of the narrow dtype's last place (relative).
void check_against_interpreter(const std::function<std::vector<ts::Array>(const std::vector<ts::Array>&)>& fn,
                               const std::vector<ts::Array>& args, const std::vector<bool>& exact, double ulps) {
  const auto want = ts::testing::interpret_fn(fn, args);
  const auto got = ts::jit(fn)(args);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    const ts::HostArray h = host_of(got[k]);
    if (exact.at(k)) {
      CHECK(same_bits(h, want[k]) == "");
    } else {
      const double eps = ts::is_floating(h.dtype) ? ts::finfo(h.dtype).eps : 0.0;
      CHECK(ts::testing::compare_arrays(h, want[k], ulps * eps, ulps * eps) == "");
    }
  }
}

ts::Array random_of(std::mt19937& rng, const ts::Shape& s, ts::DType t, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(std::size_t(ts::numel(s)));
  for (auto& e : v) e = ts::is_floating(t) ? u(rng) : std::floor(u(rng));
  return ts::astype(ts::array(v, s), t);
}

}  // namespace

TEST_CASE("dtypes: the new dtypes have NumPy's names, sizes and kinds") {
  struct Want {
    ts::DType t;
    const char* name;
    std::size_t size;
    char kind;
  };
  for (auto w : std::vector<Want>{{ts::bfloat16, "bfloat16", 2, 'f'}, {ts::float16, "float16", 2, 'f'},
                                  {ts::float8_e4m3fn, "float8_e4m3fn", 1, 'f'}, {ts::float8_e5m2, "float8_e5m2", 1, 'f'},
                                  {ts::int8, "int8", 1, 'i'}, {ts::uint8, "uint8", 1, 'u'}, {ts::int16, "int16", 2, 'i'},
                                  {ts::uint16, "uint16", 2, 'u'}, {ts::uint64, "uint64", 8, 'u'}}) {
    CAPTURE(w.name);
    CHECK(std::string(ts::dtype_name(w.t)) == w.name);
    CHECK(ts::dtype_from_name(w.name) == w.t);
    CHECK(ts::dtype_size(w.t) == w.size);
    CHECK(ts::dtype_kind(w.t) == w.kind);
  }
  CHECK_THROWS_AS(ts::dtype_from_name("float8_e4m3"), ts::TypeError);
}

TEST_CASE("dtypes: promote_types equals JAX's table, weak types included, float8 refusing other floats") {
  const auto data = ts::testing::jax_fact("promotion.json");
  int n = 0;
  for (const auto& c : data["cases"]) {
    const ts::DType a = ts::dtype_from_name(c["a"]), b = ts::dtype_from_name(c["b"]);
    const bool aw = c["a_weak"], bw = c["b_weak"];
    CAPTURE(c.dump());
    if (c.contains("error")) {
      CHECK_THROWS_AS(ts::promote_types(a, aw, b, bw), ts::TypeError);
    } else {
      const auto r = ts::promote_types(a, aw, b, bw);
      CHECK(std::string(ts::dtype_name(r.dtype)) == c["dtype"].get<std::string>());
      CHECK(r.weak == c["weak"].get<bool>());
    }
    ++n;
  }
  CHECK(n == 484);
  // Through the arrays: int8 + uint8 is int16, bf16 + f16 is f32, a float8
  // with float32 is JAX's TypePromotionError.
  auto i8 = ts::array(std::vector<std::int8_t>{1, -2});
  auto u8 = ts::array(std::vector<std::uint8_t>{200, 3});
  CHECK((i8 + u8).dtype() == ts::int16);
  CHECK((i8 + u8).to_vector<std::int16_t>() == std::vector<std::int16_t>{201, 1});
  CHECK((ts::astype(i8, ts::bfloat16) + ts::astype(i8, ts::float16)).dtype() == ts::float32);
  CHECK((i8 + 1).dtype() == ts::int8);
  CHECK((ts::astype(i8, ts::float8_e4m3fn) * 2.0).dtype() == ts::float8_e4m3fn);
  CHECK_THROWS_AS(ts::astype(i8, ts::float8_e4m3fn) + ts::astype(i8, ts::float32), ts::TypeError);
}

TEST_CASE("dtypes: host values keep their dtype in and out") {
  auto i8 = ts::array(std::vector<std::int8_t>{-128, 0, 127});
  CHECK(i8.dtype() == ts::int8);
  CHECK(i8.to_vector<std::int8_t>() == std::vector<std::int8_t>{-128, 0, 127});
  auto u8 = ts::array(std::vector<std::uint8_t>{0, 255});
  CHECK(u8.dtype() == ts::uint8);
  CHECK(u8.to_vector<std::uint8_t>() == std::vector<std::uint8_t>{0, 255});
  auto i16 = ts::array(std::vector<std::int16_t>{-32768, 32767});
  CHECK(i16.dtype() == ts::int16);
  auto u16 = ts::array(std::vector<std::uint16_t>{65535});
  CHECK(u16.dtype() == ts::uint16);
  CHECK(u16.item<std::uint16_t>() == 65535);
  const std::uint64_t big = std::numeric_limits<std::uint64_t>::max();
  auto u64 = ts::array(std::vector<std::uint64_t>{big, 1});
  CHECK(u64.dtype() == ts::uint64);
  CHECK(u64.to_vector<std::uint64_t>() == std::vector<std::uint64_t>{big, 1});
  CHECK(ts::array(big).dtype() == ts::uint64);
  CHECK(ts::array(std::int8_t(3)).dtype() == ts::int8);
  std::vector<ts::bfloat16_t> b = {ts::bfloat16_t(1.5f), ts::bfloat16_t(-0.0f), ts::bfloat16_t(3e38f)};
  auto bf = ts::array(b);
  CHECK(bf.dtype() == ts::bfloat16);
  auto back = bf.to_vector<ts::bfloat16_t>();
  for (size_t i = 0; i < b.size(); ++i) CHECK(back[i].bits == b[i].bits);
  CHECK(float(ts::array(ts::float16_t(0.5f)).item<ts::float16_t>()) == 0.5f);
  // Reading narrow values as another type converts them (exactly).
  CHECK(bf.to_vector<float>() == std::vector<float>{1.5f, -0.0f, float(ts::bfloat16_t(3e38f))});
}

TEST_CASE("dtypes: astype rounds once to nearest even, saturates to integers, NaN to 0, under jit and eagerly") {
  // 1 + 2^-8 + 2^-40 is above bfloat16's midpoint between 1 and 1 + 2^-7:
  // rounded through float32 it would land on the midpoint and go down.
  const double above_mid = 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  // 2^60 + 2^52 + 1 as int64: the same trap for a 64-bit integer.
  const std::int64_t big = (std::int64_t(1) << 60) + (std::int64_t(1) << 52) + 1;
  auto f64 = ts::array(std::vector<double>{above_mid, 464.0, 464.5, 1e6, -0.0, NAN, 300.7, -1e10});
  auto i64 = ts::array(std::vector<std::int64_t>{big, -big, 255});
  for (bool eager : {false, true}) {
    CAPTURE(eager);
    auto cvt = [&](const ts::Array& x, ts::DType t) {
      return eager ? ts::astype(x, t) : ts::jit([t](ts::Array a) { return ts::astype(a, t); })(x);
    };
    auto as = [&](const ts::Array& x) { return ts::astype(x, ts::float64).to_vector<double>(); };
    auto bf = as(cvt(f64, ts::bfloat16));
    CHECK(bf[0] == 1 + std::ldexp(1.0, -7));
    CHECK(bf[3] == 999424.0);  // 1e6 to 8 bits of precision
    CHECK(std::signbit(bf[4]));
    CHECK(std::isnan(bf[5]));
    auto e4 = as(cvt(f64, ts::float8_e4m3fn));
    CHECK(e4[1] == 448.0);        // the tie goes to the even 448
    CHECK(std::isnan(e4[2]));     // past it: no infinity in e4m3fn, NaN
    CHECK(std::isnan(e4[3]));
    auto e5 = as(cvt(f64, ts::float8_e5m2));
    CHECK(std::isinf(e5[3]));
    auto i8 = cvt(f64, ts::int8).to_vector<std::int8_t>();
    CHECK(i8 == std::vector<std::int8_t>{1, 127, 127, 127, 0, 0, 127, -128});
    auto u16 = cvt(f64, ts::uint16).to_vector<std::uint16_t>();
    CHECK(u16 == std::vector<std::uint16_t>{1, 464, 464, 65535, 0, 0, 300, 0});
    auto bfi = as(cvt(i64, ts::bfloat16));
    CHECK(bfi[0] == std::ldexp(1.0, 60) + std::ldexp(1.0, 53));  // up: 2^52 + 1 is past the midpoint
    CHECK(bfi[1] == -(std::ldexp(1.0, 60) + std::ldexp(1.0, 53)));
    CHECK(bfi[2] == 255.0);
    auto h = as(cvt(cvt(f64, ts::bfloat16), ts::float16));
    CHECK(h[0] == 1 + std::ldexp(1.0, -7));
    CHECK(std::isinf(h[3]));  // 999424 is past float16's 65504
    auto u64 = cvt(ts::array(std::vector<double>{1.8e19, -1.0, 5.5}), ts::uint64).to_vector<std::uint64_t>();
    CHECK(u64[0] == std::uint64_t(1.8e19));
    CHECK(u64[1] == 0);
    CHECK(u64[2] == 5);
  }
}

TEST_CASE("dtypes: every op in every new dtype equals the reference interpreter on 1..8 devices, even and uneven") {
  std::mt19937 rng(38);
  const int max_devices = std::min(8, ts::device_count());
  const std::vector<ts::Shape> shapes = {{8, 3}, {7, 5}};
  int checked = 0;
  for (ts::DType t : kNew) {
    const bool fl = ts::is_floating(t), uns = ts::is_unsigned_int(t);
    for (const auto& shape : shapes) {
      const double lo = fl ? -3 : uns ? 0 : -9, hi = fl ? 3 : 18;
      ts::Array xh = random_of(rng, shape, t, lo, hi), yh = random_of(rng, shape, t, lo, hi);
      if (!fl) yh = ts::where(yh == ts::astype(ts::zeros({}), t), ts::astype(ts::ones({}), t), yh);
      for (int k = 1; k <= max_devices; ++k) {
        CAPTURE(ts::dtype_name(t));
        CAPTURE(ts::shape_str(shape));
        CAPTURE(k);
        const auto all = ts::devices();
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
        ts::Array x = ts::device_put(xh, ts::NamedSharding(mesh, P("x")));
        ts::Array y = ts::device_put(yh, ts::NamedSharding(mesh, P("x")));
        std::vector<bool> exact;
        auto fn = [&](const std::vector<ts::Array>& a) {
          const ts::Array& u = a[0];
          const ts::Array& v = a[1];
          std::vector<ts::Array> out = {u + v, u - v, u * v, ts::maximum(u, v), ts::minimum(u, v), -u,
                                        ts::abs(u), ts::sign(u), u < v, u == v, ts::where(u < v, u, v),
                                        ts::max(u, 0), ts::argmax(u, 0), ts::sort(u, 0),
                                        ts::transpose(u), ts::concatenate({u, v}, 0), ts::astype(u, ts::float32),
                                        ts::astype(ts::astype(u, ts::float32) * 0.75f, t), u[ts::slice(1, 5)],
                                        // fused chains: rounded at each op, as the interpreter rounds
                                        (u * v + u) * v - u, (u + v) * (u - v)};
          exact.assign(out.size(), true);
          if (fl) {
            for (auto r : {u / v, ts::sqrt(ts::abs(u)), ts::floor(u), ts::round(u)}) out.push_back(r), exact.push_back(true);
            for (auto r : {ts::exp(u), ts::sin(u), ts::tanh(u), ts::log(ts::abs(u) + 1), ts::sum(u, 0), ts::cumsum(u, 0),
                           ts::matmul(u, ts::transpose(v))})
              out.push_back(r), exact.push_back(false);
          } else {
            for (auto r : {u & v, u | v, u ^ v, ts::fmod(u, v), ts::floor_divide(u, v), ts::sum(u, 0), ts::cumsum(u, 0),
                           ts::matmul(u, ts::transpose(v)), ts::left_shift(u, ts::astype(ts::abs(v) % 9, t)),
                           ts::lax::shift_right_logical(u, ts::astype(ts::abs(v) % 9, t))})
              out.push_back(r), exact.push_back(true);
          }
          return out;
        };
        fn({xh, yh});  // fills `exact`
        // Sums: float32 partial sums per device, each rounded, then a fold
        // in the dtype: a few units in the last place.
        check_against_interpreter(fn, {x, y}, exact, 4.0);
        ++checked;
      }
    }
  }
  CHECK(checked == int(kNew.size()) * 2 * max_devices);
}

TEST_CASE("dtypes: arrays print as NumPy with ml_dtypes prints them") {
  auto bits16 = [](ts::DType t, std::vector<std::uint16_t> b) {
    return ts::lax::bitcast_convert_type(ts::array(b), t);
  };
  auto of = [](std::vector<double> v, ts::DType t) { return ts::astype(ts::array(v), t); };
  // bfloat16 and the float8s: each element "%g" of its value, unpadded.
  CHECK(of({1.5, 2}, ts::bfloat16).str() == "Array([1.5, 2], dtype=bfloat16)");
  CHECK(ts::astype(ts::array(0.1), ts::bfloat16).str() == "Array(0.100098, dtype=bfloat16)");
  CHECK(of({3.14159}, ts::bfloat16).str() == "Array([3.14062], dtype=bfloat16)");
  CHECK(of({1e6, 1048576}, ts::bfloat16).str() == "Array([999424, 1.04858e+06], dtype=bfloat16)");
  CHECK(of({INFINITY, -INFINITY, NAN, -0.0}, ts::bfloat16).str() == "Array([inf, -inf, nan, -0], dtype=bfloat16)");
  CHECK(of({0.001, 1000}, ts::bfloat16).str() == "Array([0.000999451, 1000], dtype=bfloat16)");
  CHECK(ts::reshape(of({1.5, -2, 0.25, 1000}, ts::bfloat16), {2, 2}).str() ==
        "Array([[1.5, -2],\n       [0.25, 1000]], dtype=bfloat16)");
  CHECK(of({0.1, 0.3, 3.14159}, ts::float8_e4m3fn).str() == "Array([0.101562, 0.3125, 3.25], dtype=float8_e4m3fn)");
  CHECK(of({std::ldexp(1.0, -9), std::ldexp(1.0, -6)}, ts::float8_e4m3fn).str() ==
        "Array([0.00195312, 0.015625], dtype=float8_e4m3fn)");
  CHECK(of({std::ldexp(1.0, -16), std::ldexp(1.0, -14)}, ts::float8_e5m2).str() ==
        "Array([1.52588e-05, 6.10352e-05], dtype=float8_e5m2)");
  CHECK(of({3.14159, 1000}, ts::float8_e5m2).str() == "Array([3, 1024], dtype=float8_e5m2)");
  // float16: NumPy's float format with float16's shortest digits.
  CHECK(of({1, 2}, ts::float16).str() == "Array([1., 2.], dtype=float16)");
  CHECK(of({1.5, 2, 3.14159}, ts::float16).str() == "Array([1.5 , 2.  , 3.14], dtype=float16)");
  CHECK(of({0.1, 0.2, 0.3}, ts::float16).str() == "Array([0.1, 0.2, 0.3], dtype=float16)");
  CHECK(of({65504}, ts::float16).str() == "Array([65504.], dtype=float16)");
  CHECK(of({65504, 1}, ts::float16).str() == "Array([6.55e+04, 1.00e+00], dtype=float16)");
  CHECK(bits16(ts::float16, {0x0001}).str() == "Array([6.e-08], dtype=float16)");
  CHECK(of({INFINITY, -INFINITY, NAN}, ts::float16).str() == "Array([ inf, -inf,  nan], dtype=float16)");
  CHECK(bits16(ts::float16, {0x53d2, 0x2c01}).str() == "Array([62.56   ,  0.06256], dtype=float16)");
  CHECK(of({40032}, ts::float16).str() == "Array([40032.], dtype=float16)");
  CHECK(of({1000.5, 1.03125, 0.5}, ts::float16).str() == "Array([1.0005e+03, 1.0312e+00, 5.0000e-01], dtype=float16)");
  CHECK(of({0.1, 1000.5}, ts::float16).str() == "Array([9.9976e-02, 1.0005e+03], dtype=float16)");
  CHECK(ts::astype(ts::array(0.1), ts::float16).str() == "Array(0.1, dtype=float16)");
  // The integers: right-aligned to the widest.
  CHECK(ts::array(std::vector<std::int8_t>{-128, 127, 0}).str() == "Array([-128,  127,    0], dtype=int8)");
  CHECK(ts::array(std::vector<std::uint64_t>{0, 18446744073709551615ull}).str() ==
        "Array([                   0, 18446744073709551615], dtype=uint64)");
  CHECK(ts::array(std::vector<std::uint16_t>{0, 65535}).str() == "Array([    0, 65535], dtype=uint16)");
}

TEST_CASE("dtypes: finfo and iinfo give NumPy's and ml_dtypes' values") {
  auto bf = ts::finfo(ts::bfloat16);
  CHECK(bf.bits == 16);
  CHECK(bf.eps == std::ldexp(1.0, -7));
  CHECK(bf.epsneg == std::ldexp(1.0, -8));
  CHECK(bf.max == std::ldexp(255.0, 120));
  CHECK(bf.min == -bf.max);
  CHECK(bf.tiny == std::ldexp(1.0, -126));
  CHECK(bf.smallest_subnormal == std::ldexp(1.0, -133));
  CHECK(bf.precision == 2);
  CHECK(bf.resolution == double(float(ts::bfloat16_t(0.01))));
  CHECK(bf.nmant == 7);
  CHECK(bf.nexp == 8);
  CHECK(bf.maxexp == 128);
  CHECK(bf.minexp == -126);
  auto h = ts::finfo(ts::float16);
  CHECK(h.max == 65504.0);
  CHECK(h.eps == std::ldexp(1.0, -10));
  CHECK(h.tiny == std::ldexp(1.0, -14));
  CHECK(h.smallest_subnormal == std::ldexp(1.0, -24));
  CHECK(h.precision == 3);
  CHECK(h.maxexp == 16);
  auto e4 = ts::finfo(ts::float8_e4m3fn);
  CHECK(e4.max == 448.0);
  CHECK(e4.eps == 0.125);
  CHECK(e4.tiny == std::ldexp(1.0, -6));
  CHECK(e4.smallest_subnormal == std::ldexp(1.0, -9));
  CHECK(e4.maxexp == 9);
  CHECK(e4.precision == 1);
  auto e5 = ts::finfo(ts::float8_e5m2);
  CHECK(e5.max == 57344.0);
  CHECK(e5.eps == 0.25);
  CHECK(e5.maxexp == 16);
  CHECK(e5.minexp == -14);
  auto f = ts::finfo(ts::float32);
  CHECK(f.eps == double(std::numeric_limits<float>::epsilon()));
  CHECK(f.precision == 6);
  CHECK(f.resolution == double(1e-6f));
  CHECK(ts::finfo(ts::complex128).dtype == ts::float64);
  CHECK_THROWS_AS(ts::finfo(ts::int8), ts::ValueError);
  auto i8 = ts::iinfo(ts::int8);
  CHECK(i8.min == -128);
  CHECK(i8.max == 127u);
  CHECK(i8.bits == 8);
  CHECK(ts::iinfo(ts::uint64).max == std::numeric_limits<std::uint64_t>::max());
  CHECK(ts::iinfo(ts::uint16).min == 0);
  CHECK_THROWS_AS(ts::iinfo(ts::float32), ts::ValueError);
}

TEST_CASE("dtypes: can_cast, isdtype and issubdtype follow NumPy") {
  // np.can_cast(a, b) (safe), as NumPy 1.24 answers for its own types.
  CHECK(ts::can_cast(ts::int8, ts::float16));
  CHECK_FALSE(ts::can_cast(ts::int16, ts::float16));
  CHECK(ts::can_cast(ts::uint16, ts::float32));
  CHECK_FALSE(ts::can_cast(ts::int32, ts::float32));
  CHECK(ts::can_cast(ts::int64, ts::float64));
  CHECK(ts::can_cast(ts::uint8, ts::int16));
  CHECK_FALSE(ts::can_cast(ts::uint8, ts::int8));
  CHECK_FALSE(ts::can_cast(ts::int8, ts::uint64));
  CHECK(ts::can_cast(ts::float16, ts::float32));
  CHECK(ts::can_cast(ts::float32, ts::complex64));
  CHECK_FALSE(ts::can_cast(ts::float64, ts::complex64));
  CHECK(ts::can_cast(ts::bool_, ts::int8));
  CHECK_FALSE(ts::can_cast(ts::float32, ts::int64));
  // bfloat16 and float16 hold each other's values in neither direction.
  CHECK_FALSE(ts::can_cast(ts::bfloat16, ts::float16));
  CHECK_FALSE(ts::can_cast(ts::float16, ts::bfloat16));
  CHECK(ts::can_cast(ts::bfloat16, ts::float32));
  CHECK(ts::can_cast(ts::float8_e4m3fn, ts::float16));
  CHECK_FALSE(ts::can_cast(ts::float8_e5m2, ts::float8_e4m3fn));
  CHECK(ts::can_cast(ts::float64, ts::float32, "same_kind"));
  CHECK_FALSE(ts::can_cast(ts::float32, ts::int32, "same_kind"));
  CHECK(ts::can_cast(ts::float32, ts::int32, "unsafe"));
  CHECK_FALSE(ts::can_cast(ts::int32, ts::int64, "no"));
  CHECK_THROWS_AS(ts::can_cast(ts::int32, ts::int64, "sometimes"), ts::ValueError);
  CHECK(ts::isdtype(ts::bfloat16, "real floating"));
  CHECK(ts::isdtype(ts::uint8, "unsigned integer"));
  CHECK(ts::isdtype(ts::int16, std::vector<std::string>{"bool", "integral"}));
  CHECK_FALSE(ts::isdtype(ts::bool_, "numeric"));
  CHECK(ts::isdtype(ts::float16, "float16"));
  CHECK_THROWS_AS(ts::isdtype(ts::float16, "floaty"), ts::ValueError);
  CHECK(ts::issubdtype(ts::bfloat16, "floating"));
  CHECK(ts::issubdtype(ts::float8_e5m2, "inexact"));
  CHECK(ts::issubdtype(ts::uint64, "unsignedinteger"));
  CHECK_FALSE(ts::issubdtype(ts::int8, "unsignedinteger"));
  CHECK(ts::issubdtype(ts::complex64, "number"));
  CHECK(ts::issubdtype(ts::int8, ts::int8));
  CHECK_THROWS_AS(ts::issubdtype(ts::int8, "whole"), ts::ValueError);
}

TEST_CASE("dtypes: preferred_element_type: bfloat16 products accumulate in float32, int8 in int32") {
  std::mt19937 rng(7);
  // bfloat16 operands whose float32 dot differs from one rounded in bfloat16.
  const ts::Shape sa = {4, 64}, sb = {64, 3};
  ts::Array a = random_of(rng, sa, ts::bfloat16, -2, 2), b = random_of(rng, sb, ts::bfloat16, -2, 2);
  const auto av = ts::astype(a, ts::float64).to_vector<double>(), bv = ts::astype(b, ts::float64).to_vector<double>();
  std::vector<double> want(12, 0.0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 64; ++k) want[size_t(i * 3 + j)] += av[size_t(i * 64 + k)] * bv[size_t(k * 3 + j)];
  const ts::DotOptions f32{.preferred_element_type = ts::float32};
  for (bool jit : {false, true}) {
    CAPTURE(jit);
    ts::Array m = jit ? ts::jit([&](ts::Array x, ts::Array y) { return ts::matmul(x, y, f32); })(a, b) : ts::matmul(a, b, f32);
    CHECK(m.dtype() == ts::float32);
    const auto got = ts::astype(m, ts::float64).to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
    CHECK(ts::einsum("ik,kj->ij", {a, b}, f32).dtype() == ts::float32);
    CHECK(ts::dot(a, b, f32).dtype() == ts::float32);
    // Without it: a bfloat16 result, the float32 value rounded once.
    ts::Array r = ts::matmul(a, b);
    CHECK(r.dtype() == ts::bfloat16);
    const auto rv = ts::astype(r, ts::float64).to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) CHECK(rv[i] == double(float(ts::bfloat16_t(float(got[i])))));
  }
  // int8 x int8 -> int32: no wrap in int8.
  auto i8 = ts::array(std::vector<std::int8_t>{127, 127, -128, 100}, {2, 2});
  auto p = ts::matmul(i8, i8, {.preferred_element_type = ts::int32});
  CHECK(p.dtype() == ts::int32);
  CHECK(p.to_vector<std::int32_t>() == std::vector<std::int32_t>{127 * 127 - 127 * 128, 127 * 127 + 127 * 100,
                                                                  -128 * 127 - 128 * 100, -128 * 127 + 100 * 100});
  CHECK(ts::lax::dot_general(i8, i8, {{1}, {0}, {}, {}}, {.preferred_element_type = ts::int32}).dtype() == ts::int32);
  // Narrower than the operands: computed in float32, rounded once.
  auto f = ts::array(std::vector<float>{1.001f, 2.003f}, {1, 2});
  auto g = ts::array(std::vector<float>{3.007f, 4.009f}, {2, 1});
  CHECK(ts::matmul(f, g, {.preferred_element_type = ts::bfloat16}).item<ts::bfloat16_t>().bits ==
        ts::bfloat16_t(1.001f * 3.007f + 2.003f * 4.009f).bits);
  CHECK_THROWS_AS(ts::matmul(f, g, {.preferred_element_type = ts::int32}), ts::TypeError);
}

TEST_CASE("dtypes: random bits of 8 and 16 bits and narrow-float draws, as jax.random draws them") {
  // JAX's 8- and 16-bit draws come from its 32-bit stream (checked against
  // JAX's own values elsewhere: tests/data/jax/prng.json): partitionable,
  // the low bits of each element's 32-bit draw; else each 32-bit word of the
  // flat stream cut in pieces, the low piece first.
  for (bool part : {true, false}) {
  CAPTURE(part);
  const bool saved = ts::config().threefry_partitionable;
  ts::config().threefry_partitionable = part;
  auto key = ts::random::key(42);
  const ts::Shape shape = {3, 5};
  auto b32 = ts::random::bits(key, shape, ts::uint32).to_vector<std::uint32_t>();
  auto b16 = ts::random::bits(key, shape, ts::uint16).to_vector<std::uint16_t>();
  auto b8 = ts::random::bits(key, shape, ts::uint8).to_vector<std::uint8_t>();
  REQUIRE(b16.size() == 15);
  if (part) {
    for (size_t i = 0; i < 15; ++i) {
      CHECK(b16[i] == std::uint16_t(b32[i]));
      CHECK(b8[i] == std::uint8_t(b32[i]));
    }
  } else {
    // The flat stream of 8 (for 16 bits) and 4 (for 8 bits) words.
    auto w16 = ts::random::bits(key, {8}, ts::uint32).to_vector<std::uint32_t>();
    for (size_t i = 0; i < 15; ++i) CHECK(b16[i] == std::uint16_t(w16[i / 2] >> (16 * (i % 2))));
    auto w8 = ts::random::bits(key, {4}, ts::uint32).to_vector<std::uint32_t>();
    for (size_t i = 0; i < 15; ++i) CHECK(b8[i] == std::uint8_t(w8[i / 4] >> (8 * (i % 4))));
  }
  // uniform: the top mantissa bits under 1.0's exponent, minus 1. With
  // fewer than 8 mantissa bits JAX draws 8 bits: bfloat16's 7 come from 8.
  auto u = ts::random::uniform(key, shape, ts::bfloat16).to_vector<ts::bfloat16_t>();
  for (size_t i = 0; i < 15; ++i) {
    const float want = float(ts::bfloat16_t::from_bits(std::uint16_t((b8[i] >> 1) | 0x3F80))) - 1.0f;
    CHECK(float(u[i]) == want);
  }
  auto h = ts::random::uniform(key, shape, ts::float16, -2.0, 2.0).to_vector<ts::float16_t>();
  for (size_t i = 0; i < 15; ++i) {
    const float base = float(ts::float16_t::from_bits(std::uint16_t((b16[i] >> 6) | 0x3C00))) - 1.0f;
    const float want = std::max(-2.0f, float(ts::float16_t(float(ts::float16_t(base * 4.0f)) - 2.0f)));
    CHECK(float(h[i]) == want);
  }
  // float8: 8 bits drawn, the top mantissa bits (3 for e4m3fn) under 1.0.
  auto e4 = ts::random::uniform(key, shape, ts::float8_e4m3fn).to_vector<ts::float8_e4m3fn_t>();
  for (size_t i = 0; i < 15; ++i)
    CHECK(float(e4[i]) == float(ts::float8_e4m3fn_t::from_bits(std::uint8_t((b8[i] >> 5) | 0x38))) - 1.0f);
  // normal: in the dtype, finite, of about unit spread over many draws.
  auto n = ts::astype(ts::random::normal(ts::random::key(1), {4096}, ts::bfloat16), ts::float64);
  CHECK(ts::all(ts::isfinite(n)).item<bool>());
  CHECK(std::fabs(ts::mean(n).item<double>()) < 0.1);
  CHECK(std::fabs(ts::std(n).item<double>() - 1.0) < 0.1);
  CHECK_THROWS_AS(ts::random::bits(key, shape, ts::int8), ts::TypeError);
  ts::config().threefry_partitionable = saved;
  }
}

TEST_CASE("dtypes: packbits and unpackbits give NumPy's bytes (uint8)") {
  // Values from NumPy 1.24 (np.packbits / np.unpackbits on these arrays).
  auto a = ts::array(std::vector<std::int32_t>{1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 1, 1}, {2, 9});
  auto u8 = [](const ts::Array& x) {
    CHECK(x.dtype() == ts::uint8);
    auto v = x.to_vector<std::uint8_t>();
    return std::vector<int>(v.begin(), v.end());
  };
  CHECK(u8(ts::packbits(a)) == std::vector<int>{178, 181, 192});
  CHECK(u8(ts::packbits(a, 1)) == std::vector<int>{178, 128, 107, 128});
  CHECK(u8(ts::packbits(a, 0)) == std::vector<int>{128, 64, 192, 128, 64, 0, 192, 64, 192});
  CHECK(u8(ts::packbits(a, -1, "little")) == std::vector<int>{77, 1, 214, 1});
  // JAX packs elements > 0 (a negative one is a 0 bit, where NumPy packs any nonzero).
  CHECK(u8(ts::packbits(ts::array(std::vector<std::int8_t>{-1, 1}))) == std::vector<int>{64});
  CHECK(ts::jit([](ts::Array x) { return ts::packbits(x, 1); })(a).to_vector<std::uint8_t>() ==
        ts::packbits(a, 1).to_vector<std::uint8_t>());
  auto u = ts::array(std::vector<std::uint8_t>{2, 255, 7, 128}, {2, 2});
  CHECK(u8(ts::unpackbits(u)) == std::vector<int>{0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                  0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0});
  CHECK(u8(ts::unpackbits(u, 1, 11)) == std::vector<int>{0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0});
  CHECK(u8(ts::unpackbits(u, 0, 3, "little")) == std::vector<int>{0, 1, 1, 1, 0, 1});
  CHECK(ts::unpackbits(u, 0, 20).shape() == ts::Shape{20, 2});
  CHECK_THROWS_AS(ts::unpackbits(ts::array(std::vector<std::int32_t>{1})), ts::TypeError);
  CHECK_THROWS_AS(ts::packbits(ts::ones({2})), ts::TypeError);
  CHECK_THROWS_AS(ts::packbits(a, 0, "middle"), ts::ValueError);
  CHECK_THROWS_AS(ts::packbits(a, 2), ts::ValueError);
}

TEST_CASE("dtypes: frombuffer, fromstring and array_str as NumPy's") {
  const std::vector<std::int16_t> v = {1, -2, 300, -32768};
  std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * 2);
  auto a = ts::frombuffer(bytes, ts::int16);
  CHECK(a.dtype() == ts::int16);
  CHECK(a.to_vector<std::int16_t>() == v);
  CHECK(ts::frombuffer(bytes, ts::int16, 2, 2).to_vector<std::int16_t>() == std::vector<std::int16_t>{-2, 300});
  CHECK(ts::frombuffer(bytes, ts::uint8).size() == 8);
  const std::vector<ts::bfloat16_t> h = {ts::bfloat16_t(1.5f), ts::bfloat16_t(-2.0f)};
  auto hb = ts::frombuffer(h.data(), 4, ts::bfloat16);
  CHECK(hb.to_vector<float>() == std::vector<float>{1.5f, -2.0f});
  CHECK_THROWS_AS(ts::frombuffer(bytes, ts::float32, -1, 2), ts::ValueError);  // 6 bytes: not whole float32s
  CHECK_THROWS_AS(ts::frombuffer(bytes, ts::int16, 5), ts::ValueError);
  CHECK_THROWS_AS(ts::frombuffer(bytes, ts::int16, -1, 9), ts::ValueError);
  // np.fromstring('1 2  3.5', sep=' ') and with a comma.
  CHECK(ts::fromstring("1 2  3.5", " ").to_vector<float>() == std::vector<float>{1, 2, 3.5f});
  CHECK(ts::fromstring(" 1, 2 ,3 ", ",", ts::int8).to_vector<std::int8_t>() == std::vector<std::int8_t>{1, 2, 3});
  CHECK(ts::fromstring("4 5 6", " ", ts::float32, 2).to_vector<float>() == std::vector<float>{4, 5});
  CHECK_THROWS_AS(ts::fromstring("1 x 3", " "), ts::ValueError);
  CHECK_THROWS_AS(ts::fromstring("1 2", " ", ts::float32, 3), ts::ValueError);
  CHECK_THROWS_AS(ts::fromstring("1 2", ""), ts::ValueError);
  // np.array_str
  CHECK(ts::array_str(ts::array(std::vector<float>{1, 2, 3})) == "[1. 2. 3.]");
  CHECK(ts::array_str(ts::astype(ts::array(std::vector<float>{1.5f, 2}), ts::bfloat16)) == "[1.5 2]");
  CHECK(ts::array_str(ts::array(std::vector<std::int8_t>{-1, 10}, {1, 2})) == "[[-1 10]]");
  CHECK(ts::array_str(ts::array(1.5f)) == "1.5");
}

TEST_CASE("dtypes: randint in 8-, 16- and 32-bit integers, JAX's formula in the width's wrapping arithmetic") {
  // jax.random._randint: offset = ((hi % span) * mult + lo % span) % span in
  // the width's unsigned type, mult = ((2^(nbits/2) % span)^2 wrapping) % span,
  // hi and lo the draws of split(key)[0] and [1]; XLA's x % 0 is x.
  auto key = ts::random::key(7);
  const ts::Shape shape = {64};
  auto keys = ts::random::split(key, 2);
  struct Case {
    ts::DType dtype;
    std::int64_t lo, hi;
  };
  for (auto c : std::vector<Case>{{ts::int8, -100, 100}, {ts::uint8, 0, 256}, {ts::uint8, 3, 9}, {ts::int16, 0, 10},
                                  {ts::uint16, 0, 1000}, {ts::int32, 0, 100000}, {ts::int32, -5, 1000}}) {
    CAPTURE(ts::dtype_name(c.dtype));
    CAPTURE(c.lo);
    CAPTURE(c.hi);
    const int nbits = int(8 * ts::dtype_size(c.dtype));
    const ts::DType ut = nbits == 8 ? ts::uint8 : nbits == 16 ? ts::uint16 : ts::uint32;
    auto hb = ts::astype(ts::random::bits(keys.index({0}), shape, ut), ts::int64).to_vector<std::int64_t>();
    auto lb = ts::astype(ts::random::bits(keys.index({1}), shape, ut), ts::int64).to_vector<std::int64_t>();
    const std::uint64_t mask = (std::uint64_t(1) << nbits) - 1;
    const auto info = ts::iinfo(c.dtype);
    const std::int64_t lo = std::max(c.lo, info.min), hi = std::min<std::int64_t>(c.hi, std::int64_t(info.max));
    std::uint64_t span = std::uint64_t(hi - lo) & mask;
    if (c.hi > std::int64_t(info.max)) span = (span + 1) & mask;
    auto rem = [](std::uint64_t a, std::uint64_t b) { return b == 0 ? a : a % b; };
    const std::uint64_t m = rem(std::uint64_t(1) << (nbits / 2), span), mult = rem((m * m) & mask, span);
    auto got = ts::astype(ts::random::randint(key, shape, c.lo, c.hi, c.dtype), ts::int64).to_vector<std::int64_t>();
    for (size_t i = 0; i < got.size(); ++i) {
      const std::uint64_t off =
          rem(((rem(std::uint64_t(hb[i]), span) * mult & mask) + rem(std::uint64_t(lb[i]), span)) & mask, span);
      // minval + the offset, wrapping in the dtype.
      std::int64_t want = std::int64_t((std::uint64_t(lo) + off) & mask);
      if (ts::is_signed_int(c.dtype) && want > std::int64_t(info.max)) want -= std::int64_t(mask + 1);
      CHECK(got[i] == want);
      CHECK(got[i] >= lo);
      if (c.hi <= std::int64_t(info.max)) CHECK(got[i] < c.hi);
    }
  }
  CHECK_THROWS_AS(ts::random::randint(key, shape, 0, 5, ts::float32), ts::TypeError);
}

TEST_CASE("dtypes: what JAX refuses for 16- and 8-bit floats on CPU is a TypeError naming the op and dtype") {
  auto m = ts::astype(ts::eye(3), ts::bfloat16);
  CHECK_THROWS_WITH_AS(ts::linalg::cholesky(m), doctest::Contains("bf16[3,3]"), ts::TypeError);
  CHECK_THROWS_WITH_AS(ts::linalg::solve(ts::astype(ts::eye(2), ts::float16), ts::astype(ts::ones({2}), ts::float16)),
                       doctest::Contains("16- or 8-bit floats"), ts::TypeError);
  CHECK_THROWS_AS(ts::linalg::qr(ts::astype(ts::eye(2), ts::float8_e4m3fn)), ts::TypeError);
  CHECK_THROWS_AS(ts::lax::erf_inv(ts::array(std::vector<std::int8_t>{1})), ts::TypeError);
  // jnp.fft.rfft transforms a bfloat16 array in float32: a complex64 result.
  auto r = ts::fft::rfft(ts::astype(ts::array(std::vector<float>{1, 2, 3, 4}), ts::bfloat16));
  CHECK(r.dtype() == ts::complex64);
  CHECK(ts::real(r).to_vector<float>()[0] == 10.0f);
}

namespace {

// The bytes of an array, whatever its dtype.
std::vector<std::uint8_t> bytes_of(const ts::Array& a) { return host_of(a).bytes; }

template <class T>
ts::Array of_bits(const std::vector<std::uint32_t>& bits, const ts::Shape& s) {
  std::vector<T> v;
  for (auto b : bits) v.push_back(T::from_bits(decltype(T{}.bits)(b)));
  return ts::array(v, s);
}

}  // namespace

TEST_CASE("dtypes: moving data keeps every bit of a narrow NaN (payload, sign, signaling), as XLA's data movement does") {
  struct Case {
    ts::DType t;
    std::vector<std::uint32_t> bits;  // 8 patterns: NaNs with payloads among numbers
  };
  const std::vector<Case> cases = {
      {ts::bfloat16, {0x7F81, 0xFFC5, 0x3FC0, 0x7FC0, 0xFF80, 0x8000, 0x7FBF, 0x0001}},
      {ts::float16, {0x7C01, 0xFE05, 0x3E00, 0x7E00, 0xFC00, 0x8000, 0x7DFF, 0x0001}},
      {ts::float8_e5m2, {0x7D, 0xFE, 0x3C, 0x7F, 0xFC, 0x80, 0xFD, 0x01}},
      {ts::float8_e4m3fn, {0x7F, 0xFF, 0x38, 0x80, 0x01, 0x7E, 0xFE, 0x40}},
  };
  for (const auto& c : cases) {
    CAPTURE(ts::dtype_name(c.t));
    ts::Array x = c.t == ts::bfloat16  ? of_bits<ts::bfloat16_t>(c.bits, {8})
                  : c.t == ts::float16 ? of_bits<ts::float16_t>(c.bits, {8})
                  : c.t == ts::float8_e5m2 ? of_bits<ts::float8_e5m2_t>(c.bits, {8})
                                           : of_bits<ts::float8_e4m3fn_t>(c.bits, {8});
    const std::vector<std::uint8_t> in = bytes_of(x);
    const std::size_t es = ts::dtype_size(c.t);
    // The input's bytes in the order of the given element indices.
    auto picked = [&](const std::vector<int>& idx) {
      std::vector<std::uint8_t> out;
      for (int i : idx) out.insert(out.end(), in.begin() + i * es, in.begin() + (i + 1) * es);
      return out;
    };
    const std::function<std::vector<ts::Array>(const std::vector<ts::Array>&)> fn = [](const std::vector<ts::Array>& a) {
      const ts::Array& u = a[0];
      ts::Array t = ts::lax::bitcast_convert_type(u, u.dtype());  // the identity op, to start from a node
      return std::vector<ts::Array>{
          u[ts::slice(2, 7)],
          ts::reshape(ts::transpose(ts::reshape(u, {2, 4})), {8}),
          ts::flip(u, 0),
          ts::concatenate({u, t}, 0),
          ts::where(ts::arange(8) % 2 == 0, u, ts::flip(u, 0)),
          ts::reshape(ts::broadcast_to(u, {2, 8}), {16}),
          ts::take(u, ts::array(std::vector<std::int32_t>{7, 0, 1, 1})),
          ts::lax::dynamic_slice(u, {ts::array(std::int32_t(3))}, {4}),
          ts::lax::dynamic_update_slice(u, ts::flip(u, 0)[ts::slice(0, 2)], {ts::array(std::int32_t(1))}),
          ts::pad(u, {{1, 0}}, 0.0)[ts::slice(1, 9)],
      };
    };
    const std::vector<std::vector<int>> want = {{2, 3, 4, 5, 6},
                                                {0, 4, 1, 5, 2, 6, 3, 7},
                                                {7, 6, 5, 4, 3, 2, 1, 0},
                                                {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7},
                                                {0, 6, 2, 4, 4, 2, 6, 0},
                                                {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7},
                                                {7, 0, 1, 1},
                                                {3, 4, 5, 6},
                                                {0, 7, 6, 3, 4, 5, 6, 7},
                                                {0, 1, 2, 3, 4, 5, 6, 7}};
    // The reference interpreter, eagerly, and compiled on 1..8 devices, sharded.
    const auto ref = ts::testing::interpret_fn(fn, {x});
    const auto eager = fn({x});
    for (size_t k = 0; k < want.size(); ++k) {
      CAPTURE(k);
      CHECK(ref[k].bytes == picked(want[k]));
      CHECK(bytes_of(eager[k]) == picked(want[k]));
    }
    for (int d = 1; d <= std::min(8, ts::device_count()); ++d) {
      CAPTURE(d);
      const auto all = ts::devices();
      ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + d), {d}, {"x"});
      const auto got = ts::jit(fn)(std::vector<ts::Array>{ts::device_put(x, ts::NamedSharding(mesh, P("x")))});
      for (size_t k = 0; k < want.size(); ++k) {
        CAPTURE(k);
        CHECK(bytes_of(got[k]) == picked(want[k]));
      }
    }
  }
}

TEST_CASE("dtypes: a NaN rounded into a narrow float keeps its sign and its payload's top bits, quiet, as on the host") {
  const std::vector<std::uint32_t> nans = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFA12345u, 0x7FE00000u, 0x7F812345u};
  std::vector<float> v;
  for (auto n : nans) v.push_back(std::bit_cast<float>(n));
  ts::Array x = ts::array(v);
  for (ts::DType t : {ts::bfloat16, ts::float16, ts::float8_e5m2, ts::float8_e4m3fn}) {
    CAPTURE(ts::dtype_name(t));
    const std::function<std::vector<ts::Array>(const std::vector<ts::Array>&)> fn = [t](const std::vector<ts::Array>& a) {
      return std::vector<ts::Array>{ts::astype(a[0], t)};
    };
    const auto ref = ts::testing::interpret_fn(fn, {x});
    CHECK(bytes_of(ts::jit(fn)(std::vector<ts::Array>{x})[0]) == ref[0].bytes);
    CHECK(bytes_of(ts::astype(x, t)) == ref[0].bytes);
    // The host's rule (float_types.hpp), the interpreter's.
    std::vector<std::uint8_t> host;
    for (float f : v) {
      const std::uint32_t b = t == ts::bfloat16  ? ts::bfloat16_t(f).bits
                              : t == ts::float16 ? ts::float16_t(f).bits
                              : t == ts::float8_e5m2 ? ts::float8_e5m2_t(f).bits
                                                     : ts::float8_e4m3fn_t(f).bits;
      for (std::size_t i = 0; i < ts::dtype_size(t); ++i) host.push_back(std::uint8_t(b >> (8 * i)));
    }
    CHECK(ref[0].bytes == host);
  }
}

TEST_CASE("dtypes: 8-bit integer products (VNNI where the CPU has it) equal the interpreter's, every signedness and width") {
  std::mt19937 rng(8);
  auto bytes = [&](const ts::Shape& s, ts::DType t) {
    std::uniform_int_distribution<int> u(0, 255);
    std::vector<std::int32_t> v(std::size_t(ts::numel(s)));
    for (auto& e : v) e = t == ts::int8 ? u(rng) - 128 : u(rng);
    v[0] = t == ts::int8 ? -128 : 255;  // the extremes, where offsets would overflow a byte
    return ts::astype(ts::array(v, s), t);
  };
  using Fn = std::function<std::vector<ts::Array>(const std::vector<ts::Array>&)>;
  const int max_devices = std::min(8, ts::device_count());
  for (ts::DType ta : {ts::int8, ts::uint8})
    for (ts::DType tb : {ts::int8, ts::uint8}) {
      CAPTURE(ts::dtype_name(ta));
      CAPTURE(ts::dtype_name(tb));
      // k = 37 (not a multiple of 4), 13 rows (uneven on most device counts).
      ts::Array a = bytes({13, 37}, ta), b = bytes({37, 21}, tb), bt = bytes({21, 37}, tb), c = bytes({3, 5, 37}, ta),
                d = bytes({3, 37, 6}, tb);
      const Fn fn = [&](const std::vector<ts::Array>& x) {
        std::vector<ts::Array> out = {ts::matmul(x[0], x[1], {.preferred_element_type = ts::int32}),
                                      ts::matmul(x[0], ts::transpose(x[2]), {.preferred_element_type = ts::int32}),
                                      ts::matmul(x[0], x[1], {.preferred_element_type = ts::uint32}),
                                      ts::matmul(x[0], x[1], {.preferred_element_type = ts::int16}),
                                      ts::matmul(x[3], x[4], {.preferred_element_type = ts::int32}),
                                      ts::einsum("ik,jk->ij", {x[0], x[2]}, {.preferred_element_type = ts::int32})};
        if (x[0].dtype() == x[1].dtype()) out.push_back(ts::matmul(x[0], x[1]));  // wraps in 8 bits
        return out;
      };
      for (int k = 1; k <= max_devices; ++k) {
        CAPTURE(k);
        const auto all = ts::devices();
        ts::Mesh mesh(std::vector<ts::Device>(all.begin(), all.begin() + k), {k}, {"x"});
        auto put = [&](const ts::Array& x) { return ts::device_put(x, ts::NamedSharding(mesh, P("x"))); };
        check_against_interpreter(fn, {put(a), b, bt, c, d}, std::vector<bool>(7, true), 0);
      }
    }
  // A sum that wraps int32: 70,000 products of -128 x -128 (2^14 each).
  const std::int64_t K = 70000;
  ts::Array a = ts::astype(ts::full({2, K}, -128.0), ts::int8), b = ts::astype(ts::full({K, 3}, -128.0), ts::int8);
  const auto got = ts::jit([](ts::Array x, ts::Array y) { return ts::matmul(x, y, {.preferred_element_type = ts::int32}); })(a, b);
  const std::int32_t want = std::int32_t(std::uint32_t(std::uint64_t(K) << 14));
  for (auto v : got.to_vector<std::int32_t>()) CHECK(v == want);
  // The compiled text says which kernel runs: VNNI where the CPU has it.
  const std::string text = ts::jit([](ts::Array x, ts::Array y) { return ts::matmul(x, y, {.preferred_element_type = ts::int32}); })
                               .lower(a, b).compile().as_text();
  CHECK((text.find("avx512_vnni") != std::string::npos || text.find("int8 via int32") != std::string::npos));
}
