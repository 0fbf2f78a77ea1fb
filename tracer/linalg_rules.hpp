// What the rules of the dense linear-algebra primitives share
// (rules_linalg.cpp, rules_eig.cpp): shape checks, batch loops, loads and
// stores of the reference kernels' matrices, and the batch factor rule.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "tessel/core/errors.hpp"
#include "tracer/linalg_kernels.hpp"
#include "tracer/rules.hpp"

namespace tessel::linalg_rules {

using detail::cat;
using namespace linalg_kernels;

// ------------------------------------------------------------- shapes

inline void expect_matrix(Op op, const Aval& a, bool square) {
  if (a.shape.size() < 2)
    throw ShapeError(cat(op_name(op), " needs a matrix (or a batch of them: rank >= 2), got ", a.str()));
  if (square && a.shape[a.shape.size() - 1] != a.shape[a.shape.size() - 2])
    throw ShapeError(cat(op_name(op), " needs square matrices, got ", a.str()));
  if (!is_inexact(a.dtype) || is_narrow_float(a.dtype))
    throw TypeError(cat(op_name(op), " needs a float32, float64, complex64 or complex128 array (LAPACK has no ",
                        is_narrow_float(a.dtype) ? "16- or 8-bit floats" : "integers", "), got ", a.str(),
                        "; convert it first"));
}
inline Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
inline Shape with(const Shape& batch, std::initializer_list<std::int64_t> minor) {
  Shape r = batch;
  r.insert(r.end(), minor);
  return r;
}

// ------------------------------------------------------------- batches, loads and stores

template <class F>
void each_matrix(std::int64_t batch, F&& f) {
  for (std::int64_t b = 0; b < batch; ++b) f(b);
}
inline std::int64_t batch_count(const Shape& s) { return numel(batch_of(s)); }
// f(S{}) with S = C for complex dtypes, R for real ones.
template <class F>
void with_scalar(DType t, F&& f) {
  if (is_complex(t)) f(C{});
  else f(R{});
}

// Matrix b (of r x c) of the batch at p, as S (S = C for complex dtypes).
template <class S>
Mat<S> load(DType t, const void* p, std::int64_t b, std::int64_t r, std::int64_t c) {
  Mat<S> m(r, c);
  visit_wide_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<S, C> && is_complex_v<T>) {
      const T* x = static_cast<const T*>(p) + b * r * c;
      for (std::int64_t i = 0; i < r * c; ++i) m.v[std::size_t(i)] = C(R(x[i].real()), R(x[i].imag()));
    } else if constexpr (std::is_same_v<S, R> && std::is_floating_point_v<T>) {
      const T* x = static_cast<const T*>(p) + b * r * c;
      for (std::int64_t i = 0; i < r * c; ++i) m.v[std::size_t(i)] = R(x[i]);
    }
  });
  return m;
}
template <class S>
void store(DType t, void* p, std::int64_t b, const Mat<S>& m) {
  visit_wide_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    T* x = static_cast<T*>(p) + b * m.rows * m.cols;
    if constexpr (std::is_same_v<S, C> && is_complex_v<T>) {
      using E = typename T::value_type;
      for (std::int64_t i = 0; i < m.rows * m.cols; ++i) x[i] = T(E(m.v[size_t(i)].real()), E(m.v[size_t(i)].imag()));
    } else if constexpr (std::is_same_v<S, R> && std::is_floating_point_v<T>) {
      for (std::int64_t i = 0; i < m.rows * m.cols; ++i) x[i] = T(m.v[std::size_t(i)]);
    }
  });
}
// A real vector (eigenvalues, singular values) as a 1 x n matrix.
inline Mat<R> row_of(const std::vector<R>& v) {
  Mat<R> m(1, std::int64_t(v.size()));
  m.v = v;
  return m;
}
inline void store_ints(void* p, std::int64_t b, const std::vector<std::int64_t>& v) {
  auto* x = static_cast<std::int32_t*>(p) + b * std::int64_t(v.size());
  for (size_t i = 0; i < v.size(); ++i) x[i] = std::int32_t(v[i]);
}

// Factor rules: the batch dims shared by every participant, each matrix dim
// a factor of its own that is never split (free: the columns of
// triangular_solve's right-hand side).
struct BatchFactors {
  FactorRule r;
  std::vector<std::vector<int>> batch;
  BatchFactors(const Shape& s) {
    for (size_t d = 0; d + 2 < s.size(); ++d) batch.push_back({r.add_factor(s[d])});
  }
  std::vector<std::vector<int>> dims(std::initializer_list<std::int64_t> replicated_sizes) {
    auto d = batch;
    for (auto n : replicated_sizes) d.push_back({r.add_factor(n, false, true)});
    return d;
  }
};


}  // namespace tessel::linalg_rules
