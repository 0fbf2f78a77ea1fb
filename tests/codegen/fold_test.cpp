// The collectives' fold (codegen/fold.hpp) on every ISA this CPU runs against
// a scalar left fold written here: every element type and combine, 0 to 7
// operands after the first, lengths around the vector blocks' edges, operands
// at every misalignment, NaN, infinities, signed zeros and wrapping integers.
// The bits must be equal (collectives promise the same bits on every path),
// and a NaN result is the one quiet NaN (x86 adds two NaNs to the payload of
// whichever operand the compiler put first: the vector body, the scalar tail
// and a -O2 build of this test put them differently).
#include "codegen/fold.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "codegen/host.hpp"

using namespace tessel::codegen;
using fold::Combine;
using fold::Type;

namespace {

using FoldFn = void (*)(Type, Combine, void*, const void*, const void* const*, int, std::int64_t);
struct Kernel {
  const char* name;
  FoldFn fn;
};
std::vector<Kernel> kernels() {
  std::vector<Kernel> v{{"sse2", &fold::fold_sse2}};
  if (host_cpu().has("avx2")) v.push_back({"avx2", &fold::fold_avx2});
  if (host_cpu().has("avx512f")) v.push_back({"avx512", &fold::fold_avx512});
  return v;
}

template <class S>
S reference(Combine c, S a, S x) {
  if constexpr (std::is_same_v<S, std::uint8_t>) {  // bool
    if (c == Combine::add) return S(a || x);
    if (c == Combine::max) return std::max(a, x);
    return std::min(a, x);
  } else if constexpr (std::is_floating_point_v<S>) {
    if (c == Combine::add) return a + x;
    if (std::isnan(a) || std::isnan(x)) return std::numeric_limits<S>::quiet_NaN();
    if (c == Combine::max) return x > a ? x : a;
    return x < a ? x : a;
  } else {
    using U = std::make_unsigned_t<S>;
    if (c == Combine::add) return S(U(a) + U(x));
    if (c == Combine::max) return std::max(a, x);
    return std::min(a, x);
  }
}

template <class S>
S draw(std::mt19937& rng) {
  if constexpr (std::is_same_v<S, std::uint8_t>) {
    return S(rng() % 2);
  } else if constexpr (std::is_floating_point_v<S>) {
    const S specials[] = {S(0), -S(0), std::numeric_limits<S>::infinity(), -std::numeric_limits<S>::infinity(),
                          std::numeric_limits<S>::quiet_NaN(), std::numeric_limits<S>::max(), S(1e-30)};
    if (rng() % 8 == 0) return specials[rng() % 7];
    return S(std::uniform_real_distribution<double>(-100, 100)(rng));
  } else {
    if (rng() % 4 == 0) return rng() % 2 ? std::numeric_limits<S>::max() : std::numeric_limits<S>::min();
    return S(rng());
  }
}

template <class S>
void check_type(Type t) {
  std::mt19937 rng(unsigned(sizeof(S)) * 7 + unsigned(t));
  for (const Kernel& k : kernels())
    for (Combine c : {Combine::add, Combine::max, Combine::min})
      for (int m : {0, 1, 2, 3, 7})
        for (std::int64_t n : {0, 1, 3, 15, 16, 17, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000}) {
          const std::string isa = k.name;
          CAPTURE(isa);
          CAPTURE(int(t));
          CAPTURE(int(c));
          CAPTURE(m);
          CAPTURE(n);
          for (int shift : {0, 1, 3}) {  // elements of misalignment of every operand
            CAPTURE(shift);
            std::vector<std::vector<S>> ops(std::size_t(m) + 1, std::vector<S>(std::size_t(n + shift)));
            for (auto& o : ops)
              for (auto& v : o) v = draw<S>(rng);
            std::vector<const void*> rest;
            for (int r = 1; r <= m; ++r) rest.push_back(ops[std::size_t(r)].data() + shift);
            std::vector<S> got(std::size_t(n + shift), S(7));
            std::vector<S> want(static_cast<std::size_t>(n));
            for (std::int64_t i = 0; i < n; ++i) {
              S a = ops[0][std::size_t(i + shift)];
              for (int r = 1; r <= m; ++r) a = reference(c, a, ops[std::size_t(r)][std::size_t(i + shift)]);
              if constexpr (std::is_floating_point_v<S>)
                if (std::isnan(a)) a = std::numeric_limits<S>::quiet_NaN();  // one NaN, whichever met
              want[std::size_t(i)] = a;
            }
            k.fn(t, c, got.data() + shift, ops[0].data() + shift, rest.data(), m, n);
            CHECK((n == 0 || std::memcmp(got.data() + shift, want.data(), std::size_t(n) * sizeof(S)) == 0));
            for (int i = 0; i < shift; ++i) CHECK(got[std::size_t(i)] == S(7));  // nothing written before dst
            // In place: dst == first (the chain folds into its received partial).
            std::vector<S> inplace = ops[0];
            k.fn(t, c, inplace.data() + shift, inplace.data() + shift, rest.data(), m, n);
            CHECK((n == 0 || std::memcmp(inplace.data() + shift, want.data(), std::size_t(n) * sizeof(S)) == 0));
          }
        }
}

}  // namespace

TEST_CASE("the collectives' fold equals a scalar left fold, bit for bit, on every ISA") {
  check_type<std::uint8_t>(Type::bool_);
  check_type<std::int32_t>(Type::i32);
  check_type<std::int64_t>(Type::i64);
  check_type<std::uint32_t>(Type::u32);
  check_type<float>(Type::f32);
  check_type<double>(Type::f64);
}
