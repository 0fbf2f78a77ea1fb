// The NumPy-named operations (API.md "Operations"). Every one is a
// composition of primitives; each works eagerly on concrete arrays and traced
// inside ts::jit. Shapes broadcast as in NumPy; dtypes promote as in JAX
// (C++ scalars are weakly typed: 2 * f32 stays float32).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <tessel/array.hpp>
#include <tessel/creation.hpp>
#include <tessel/sharding.hpp>

namespace tessel {

// An `axis` argument: one axis, several, or (default) all. Negative counts from the end.
class Axes {
 public:
  Axes() = default;
  Axes(int axis) : axes_(std::vector<int>{axis}) {}
  Axes(std::initializer_list<int> axes) : axes_(std::vector<int>(axes)) {}
  Axes(std::vector<int> axes) : axes_(std::move(axes)) {}
  bool all() const { return !axes_; }
  const std::vector<int>& list() const { return *axes_; }

 private:
  std::optional<std::vector<int>> axes_;
};

namespace detail {
Array scalar_literal(double value, DType dtype, bool weak);
Array scalar_literal_c(std::complex<double> value, DType dtype, bool weak);
template <class T>
Array scalar_operand(T v) {
  static_assert(is_host_scalar_v<T>);
  auto st = scalar_type<T>();
  // A std::complex<double> likewise: a weakly typed complex128 constant.
  if constexpr (std::is_same_v<T, std::complex<double>>) return scalar_literal_c(v, DType::complex128, true);
  else if constexpr (is_complex_v<T>) return scalar_literal_c(std::complex<double>(v), st.dtype, st.weak);
  else {
  // A C++ double keeps its full value (a weakly typed float64 constant): it
  // takes the other operand's float dtype, rounded once, and float64 operands
  // see it exactly. (tracer/promotion.cpp: a weak float is float32 unless
  // every float in the operation is float64.)
  if constexpr (std::is_floating_point_v<T> && !std::is_same_v<T, float>)
    return scalar_literal(double(v), DType::float64, true);
  return scalar_literal(double(v), st.dtype, st.weak);
  }
}
}  // namespace detail

// ---------------------------------------------------------------- elementwise
Array negative(const Array& x);
Array sin(const Array& x);
Array cos(const Array& x);
Array tan(const Array& x);
Array tanh(const Array& x);
Array exp(const Array& x);
Array log(const Array& x);
Array log1p(const Array& x);
Array expm1(const Array& x);
Array sqrt(const Array& x);
Array rsqrt(const Array& x);
Array abs(const Array& x);
Array sign(const Array& x);
Array floor(const Array& x);
Array ceil(const Array& x);
Array round(const Array& x);  // half to even, as jnp.round
Array square(const Array& x);
Array reciprocal(const Array& x);
Array logical_not(const Array& x);
Array isnan(const Array& x);
Array isfinite(const Array& x);
// Complex numbers (jnp.real, imag, conj, angle; lax.complex): real/imag of a
// real array are the array and zeros; conj of a real array is the array;
// angle is atan2(imag, real) in radians (integers become float32 first).
Array real(const Array& x);
Array imag(const Array& x);
Array conj(const Array& x);
Array conjugate(const Array& x);
Array angle(const Array& x);
// re + i im, from two real arrays (promoted together, broadcast; integers
// become float32): complex64 from float32, complex128 from float64.
Array complex(const Array& re, const Array& im);
bool iscomplexobj(const Array& x);

Array add(const Array& a, const Array& b);
Array subtract(const Array& a, const Array& b);
Array multiply(const Array& a, const Array& b);
Array divide(const Array& a, const Array& b);  // true division: integers give float32
Array floor_divide(const Array& a, const Array& b);
Array remainder(const Array& a, const Array& b);  // sign of the divisor, as numpy
Array power(const Array& a, const Array& b);
Array pow(const Array& a, const Array& b);
// x ** n for a C++ integer n: repeated multiplication (JAX's integer_pow).
Array pow(const Array& x, int n);
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array arctan2(const Array& a, const Array& b);
Array logical_and(const Array& a, const Array& b);
Array logical_or(const Array& a, const Array& b);
Array equal(const Array& a, const Array& b);
Array not_equal(const Array& a, const Array& b);
Array less(const Array& a, const Array& b);
Array less_equal(const Array& a, const Array& b);
Array greater(const Array& a, const Array& b);
Array greater_equal(const Array& a, const Array& b);
Array where(const Array& condition, const Array& x, const Array& y);
Array clip(const Array& x, std::optional<double> lo, std::optional<double> hi);
Array astype(const Array& x, DType dtype);

// ---------------------------------------------------------------- reductions
Array sum(const Array& x, Axes axis = {}, bool keepdims = false);
Array mean(const Array& x, Axes axis = {}, bool keepdims = false);
Array max(const Array& x, Axes axis = {}, bool keepdims = false);
Array min(const Array& x, Axes axis = {}, bool keepdims = false);
Array prod(const Array& x, Axes axis = {}, bool keepdims = false);
Array argmax(const Array& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array argmin(const Array& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
// Truth reductions (bool results; ts::all(x) is the call of the indexing tag
// ts::all, below), and closeness as numpy: |a - b| <= atol + rtol * |b|.
Array any(const Array& x, Axes axis = {}, bool keepdims = false);
Array isclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-8);
Array allclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-8);
// Sorted along axis (stable; NaNs last), and the indices that sort it (int32).
Array sort(const Array& x, int axis = -1);
Array argsort(const Array& x, int axis = -1);
Array var(const Array& x, Axes axis = {}, int ddof = 0, bool keepdims = false);
Array std(const Array& x, Axes axis = {}, int ddof = 0, bool keepdims = false);
Array logsumexp(const Array& x, Axes axis = {}, bool keepdims = false);

// ---------------------------------------------------------------- shapes
Array reshape(const Array& x, Shape shape);  // one -1 is inferred
Array ravel(const Array& x);
Array transpose(const Array& x, std::vector<int> perm = {});
Array broadcast_to(const Array& x, const Shape& shape);
Array expand_dims(const Array& x, Axes axis);
Array squeeze(const Array& x, Axes axis = {});
Array concatenate(const std::vector<Array>& xs, int axis = 0);
Array stack(const std::vector<Array>& xs, int axis = 0);
std::vector<Array> split(const Array& x, int sections, int axis = 0);
std::vector<Array> split(const Array& x, const std::vector<std::int64_t>& indices, int axis = 0);
Array pad(const Array& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& widths, double value = 0);
Array flip(const Array& x, Axes axis = {});
Array swapaxes(const Array& x, int axis1, int axis2);
// The lower (tril) or upper (triu) triangle of each matrix (the two minor
// dims), from diagonal k (k > 0 above the main one); zeros elsewhere.
Array tril(const Array& x, int k = 0);
Array triu(const Array& x, int k = 0);
Array copy(const Array& x);

// ---------------------------------------------------------------- linear algebra
// A product's keyword arguments (lax.dot_general's): preferred_element_type
// is the result's dtype and the one its products and sums are computed in
// (bfloat16 operands with float32: float32 accumulation; int8 with int32:
// int32). A narrower one than the operands' (float32 operands, bfloat16)
// rounds the result computed in the operands' dtype. A float product with
// an integer preferred_element_type is a TypeError.
struct DotOptions {
  std::optional<DType> preferred_element_type;
};
Array dot(const Array& a, const Array& b);
Array dot(const Array& a, const Array& b, const DotOptions& options);
Array matmul(const Array& a, const Array& b);
Array matmul(const Array& a, const Array& b, const DotOptions& options);
Array tensordot(const Array& a, const Array& b, int axes = 2);
Array tensordot(const Array& a, const Array& b, const std::pair<std::vector<int>, std::vector<int>>& axes);
Array outer(const Array& a, const Array& b);
Array einsum(const std::string& subscripts, const std::vector<Array>& operands);
Array einsum(const std::string& subscripts, const std::vector<Array>& operands, const DotOptions& options);
template <class... A>
Array einsum(const std::string& subscripts, const Array& first, const A&... rest) {
  return einsum(subscripts, std::vector<Array>{first, rest...});
}
// The order einsum contracts in: pairs of positions in the shrinking operand
// list, each result appended at the end, and a printable account of the
// steps and their multiply-adds. optimize: "auto" (JAX's default, and
// einsum's: opt_einsum's optimal path up to four operands, greedy beyond),
// "optimal" or "greedy".
std::pair<std::vector<std::vector<int>>, std::string> einsum_path(const std::string& subscripts,
                                                                  const std::vector<Array>& operands,
                                                                  const std::string& optimize = "auto");

// ---------------------------------------------------------------- sharding
// jax.lax.with_sharding_constraint: inside jit a hint for the propagation;
// outside jit the array placed with that sharding.
Array with_sharding_constraint(const Array& x, const Sharding& sharding);

namespace lax {
struct DotDimensionNumbers {
  std::vector<std::int64_t> lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
};
Array dot_general(const Array& a, const Array& b, const DotDimensionNumbers& dims);
Array dot_general(const Array& a, const Array& b, const DotDimensionNumbers& dims, const DotOptions& options);
Array convert_element_type(const Array& x, DType dtype);
Array iota(DType dtype, std::int64_t size);
Array broadcasted_iota(DType dtype, const Shape& shape, int dimension);
Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices, const Shape& sizes);
Array dynamic_update_slice(const Array& x, const Array& update, const std::vector<Array>& start_indices);
Array rev(const Array& x, const std::vector<int>& dims);
// Bits and shifts (uint32/int32), as lax.
Array shift_left(const Array& a, const Array& b);
Array shift_right_logical(const Array& a, const Array& b);
Array bitwise_and(const Array& a, const Array& b);
Array bitwise_or(const Array& a, const Array& b);
Array bitwise_xor(const Array& a, const Array& b);
Array bitcast_convert_type(const Array& x, DType dtype);
Array erf_inv(const Array& x);
Array erf(const Array& x);
}  // namespace lax

namespace nn {
Array relu(const Array& x);
Array sigmoid(const Array& x);
Array softmax(const Array& x, Axes axis = -1);
Array log_softmax(const Array& x, Axes axis = -1);
Array gelu(const Array& x, bool approximate = true);
Array one_hot(const Array& x, std::int64_t num_classes, DType dtype = DType::float32);
}  // namespace nn

// ---------------------------------------------------------------- operators
Array operator-(const Array& x);
Array operator+(const Array& a, const Array& b);
Array operator-(const Array& a, const Array& b);
Array operator*(const Array& a, const Array& b);
Array operator/(const Array& a, const Array& b);
Array operator==(const Array& a, const Array& b);
Array operator!=(const Array& a, const Array& b);
Array operator<(const Array& a, const Array& b);
Array operator<=(const Array& a, const Array& b);
Array operator>(const Array& a, const Array& b);
Array operator>=(const Array& a, const Array& b);

#define TESSEL_SCALAR_OPERATOR(OP)                                      \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array operator OP(const Array& a, T b) {                              \
    return a OP detail::scalar_operand(b);                              \
  }                                                                     \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array operator OP(T a, const Array& b) {                              \
    return detail::scalar_operand(a) OP b;                              \
  }
TESSEL_SCALAR_OPERATOR(+)
TESSEL_SCALAR_OPERATOR(-)
TESSEL_SCALAR_OPERATOR(*)
TESSEL_SCALAR_OPERATOR(/)
TESSEL_SCALAR_OPERATOR(==)
TESSEL_SCALAR_OPERATOR(!=)
TESSEL_SCALAR_OPERATOR(<)
TESSEL_SCALAR_OPERATOR(<=)
TESSEL_SCALAR_OPERATOR(>)
TESSEL_SCALAR_OPERATOR(>=)
#undef TESSEL_SCALAR_OPERATOR

// Scalars where arrays are taken, for the binary functions.
#define TESSEL_SCALAR_FN(FN)                                            \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array FN(const Array& a, T b) {                                       \
    return FN(a, detail::scalar_operand(b));                            \
  }                                                                     \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array FN(T a, const Array& b) {                                       \
    return FN(detail::scalar_operand(a), b);                            \
  }
TESSEL_SCALAR_FN(maximum)
TESSEL_SCALAR_FN(minimum)
TESSEL_SCALAR_FN(power)
TESSEL_SCALAR_FN(add)
TESSEL_SCALAR_FN(subtract)
TESSEL_SCALAR_FN(multiply)
TESSEL_SCALAR_FN(divide)
TESSEL_SCALAR_FN(remainder)
TESSEL_SCALAR_FN(floor_divide)
#undef TESSEL_SCALAR_FN
template <class T, class U, class = std::enable_if_t<std::is_arithmetic_v<T> && std::is_arithmetic_v<U>>>
Array where(const Array& c, T x, U y) {
  // Two scalars and no array: JAX's weak types (a double is a weak float32).
  auto tx = detail::scalar_type<T>(), ty = detail::scalar_type<U>();
  return where(c, detail::scalar_literal(double(x), tx.dtype, tx.weak), detail::scalar_literal(double(y), ty.dtype, ty.weak));
}
template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>
Array where(const Array& c, const Array& x, T y) {
  return where(c, x, detail::scalar_operand(y));
}
template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>
Array where(const Array& c, T x, const Array& y) {
  return where(c, detail::scalar_operand(x), y);
}

// ---------------------------------------------------------------- indexing
// x.index({...}) items: an integer, ts::slice(start, stop, step), ts::all,
// ts::ellipsis, ts::newaxis, or an integer Array (traced or not; negative
// values count from the end; out of bounds, a read clamps and an update is
// dropped, as JAX). A scalar Array is a dynamic index; one integer array of
// any shape is NumPy's integer-array indexing (a gather; in x.at(), a
// scatter, the other items whole dims). A boolean mask over x's leading dims,
// alone: x.at({mask}) updates where it is set (any mask, traced too; the
// value broadcast to x); x.index({mask}) needs a concrete mask (its result's
// length is the count).
struct SliceItem {
  std::optional<std::int64_t> start, stop, step;
};
inline SliceItem slice(std::optional<std::int64_t> start, std::optional<std::int64_t> stop = std::nullopt,
                       std::optional<std::int64_t> step = std::nullopt) {
  return {start, stop, step};
}
// A window of static `size` at a start that may be traced: ts::slice(i, 3)
// (lax.dynamic_slice_in_dim; a negative start counts from the end, then the
// start is clamped so the window fits, for reads and updates alike).
struct DynamicSliceItem {
  Array start;
  std::int64_t size = 0;
};
inline DynamicSliceItem slice(const Array& start, std::int64_t size) { return {start, size}; }
// ts::all is both the "whole dimension" index item and jnp.all: ts::all(x, axis).
struct AllTag {
  Array operator()(const Array& x, Axes axis = {}, bool keepdims = false) const;
};
struct EllipsisTag {};
struct NewAxisTag {};
inline constexpr AllTag all{};
inline constexpr EllipsisTag ellipsis{};
inline constexpr NewAxisTag newaxis{};

class IndexItem {
 public:
  IndexItem(int i) : v_(std::int64_t(i)) {}
  IndexItem(long i) : v_(std::int64_t(i)) {}
  IndexItem(long long i) : v_(std::int64_t(i)) {}
  IndexItem(SliceItem s) : v_(s) {}
  IndexItem(AllTag) : v_(SliceItem{}) {}
  IndexItem(EllipsisTag e) : v_(e) {}
  IndexItem(NewAxisTag n) : v_(n) {}
  IndexItem(const Array& i) : v_(i) {}
  IndexItem(DynamicSliceItem s) : v_(std::move(s)) {}
  using Variant = std::variant<std::int64_t, SliceItem, EllipsisTag, NewAxisTag, Array, DynamicSliceItem>;
  const Variant& v() const { return v_; }

 private:
  Variant v_;
};

// x.at({...}): .set(v), .add(v) return updated copies.
class IndexUpdate {
 public:
  IndexUpdate(Array x, std::vector<IndexItem> items) : x_(std::move(x)), items_(std::move(items)) {}
  Array set(const Array& v) const;
  Array add(const Array& v) const;
  Array multiply(const Array& v) const;
  Array min(const Array& v) const;
  Array max(const Array& v) const;
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>
  Array set(T v) const {
    return set(detail::scalar_operand(v));
  }
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>
  Array add(T v) const {
    return add(detail::scalar_operand(v));
  }
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>
  Array multiply(T v) const {
    return multiply(detail::scalar_operand(v));
  }
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  Array min(T v) const {
    return min(detail::scalar_operand(v));
  }
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  Array max(T v) const {
    return max(detail::scalar_operand(v));
  }

 private:
  Array x_;
  std::vector<IndexItem> items_;
};

Array index(const Array& x, const std::vector<IndexItem>& items);

// jnp.take: elements of a at integer `indices` along `axis` (none: of the
// flattened array); the result is a.shape[:axis] + indices.shape +
// a.shape[axis+1:]. mode "fill" (JAX's default: out-of-bounds positions
// give NaN, the lowest signed or highest unsigned integer, or true) or
// "clip" (clamped). Negative indices count from the end.
Array take(const Array& a, const Array& indices, std::optional<int> axis = std::nullopt,
           const std::string& mode = "fill");
// jnp.take_along_axis: at each position, the element `indices` names along
// `axis` (indices and a broadcast against each other elsewhere).
Array take_along_axis(const Array& a, const Array& indices, int axis, const std::string& mode = "fill");

}  // namespace tessel
