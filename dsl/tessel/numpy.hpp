// More of jax.numpy (API.md "Everyday surface"): elementwise functions,
// NaN-aware reductions, cumulative scans, shape helpers, stop_gradient and
// the bitwise and compound-assignment operators. Each is a composition of
// primitives with JAX's semantics (promotion, weak types, NaN handling,
// keyword defaults), eager and under jit, following the data's sharding.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include <tessel/array.hpp>
#include <tessel/ops.hpp>
#include <tessel/sorting.hpp>
#include <tessel/tree.hpp>

namespace tessel {

// lax.stop_gradient: x, through which no derivative flows (every leaf of a pytree).
Array stop_gradient(const Array& x);
template <class T, class = std::enable_if_t<!std::is_same_v<T, Array>>>
T stop_gradient(const T& tree) {
  return tree::map([](const Array& x) { return stop_gradient(x); }, tree);
}

// ---------------------------------------------------------------- elementwise
Array sinh(const Array& x);
Array cosh(const Array& x);
Array arcsin(const Array& x);
Array arccos(const Array& x);
Array arctan(const Array& x);
Array arcsinh(const Array& x);
Array arccosh(const Array& x);
Array arctanh(const Array& x);
Array log2(const Array& x);
Array log10(const Array& x);
Array exp2(const Array& x);
Array trunc(const Array& x);  // toward zero; integers unchanged
Array cbrt(const Array& x);
Array deg2rad(const Array& x);
Array rad2deg(const Array& x);
Array radians(const Array& x);
Array degrees(const Array& x);
Array isinf(const Array& x);
Array isposinf(const Array& x);
Array isneginf(const Array& x);
Array signbit(const Array& x);
Array fabs(const Array& x);
Array positive(const Array& x);
Array sinc(const Array& x);  // sin(pi x) / (pi x), 1 at 0
Array fix(const Array& x);   // trunc
// np.fmod: the remainder with the dividend's sign (C's fmod).
Array fmod(const Array& a, const Array& b);
// np.mod: the remainder with the divisor's sign (ts::remainder).
Array mod(const Array& a, const Array& b);
// (a // b, a % b), as np.divmod.
std::pair<Array, Array> divmod(const Array& a, const Array& b);
Array logaddexp(const Array& a, const Array& b);
Array logaddexp2(const Array& a, const Array& b);
Array hypot(const Array& a, const Array& b);
Array copysign(const Array& a, const Array& b);
// 0 where x < 0, h0 where x == 0, 1 where x > 0 (NaN stays NaN).
Array heaviside(const Array& x, const Array& h0);
Array float_power(const Array& a, const Array& b);  // in float64 when it exists, else float32
Array true_divide(const Array& a, const Array& b);
// Bitwise ops on integers and booleans (promoted as jnp), as & | ^ ~ << >>.
Array bitwise_and(const Array& a, const Array& b);
Array bitwise_or(const Array& a, const Array& b);
Array bitwise_xor(const Array& a, const Array& b);
Array bitwise_not(const Array& x);
Array invert(const Array& x);
Array left_shift(const Array& a, const Array& b);
// Arithmetic for signed integers (the sign fills in), logical for unsigned.
Array right_shift(const Array& a, const Array& b);
Array logical_xor(const Array& a, const Array& b);

struct NanToNumOptions {
  double nan = 0.0;
  std::optional<double> posinf;  // default: the dtype's largest finite value
  std::optional<double> neginf;  // default: the dtype's lowest finite value
};
Array nan_to_num(const Array& x, NanToNumOptions options = {});

// ---------------------------------------------------------------- reductions
// NaN-ignoring reductions (an all-NaN slice: nansum 0, nanprod 1, nanmean,
// nanvar, nanstd, nanmax and nanmin NaN).
Array nansum(const Array& x, Axes axis = {}, bool keepdims = false);
Array nanprod(const Array& x, Axes axis = {}, bool keepdims = false);
Array nanmean(const Array& x, Axes axis = {}, bool keepdims = false);
Array nanmax(const Array& x, Axes axis = {}, bool keepdims = false);
Array nanmin(const Array& x, Axes axis = {}, bool keepdims = false);
Array nanvar(const Array& x, Axes axis = {}, int ddof = 0, bool keepdims = false);
Array nanstd(const Array& x, Axes axis = {}, int ddof = 0, bool keepdims = false);
Array nanargmax(const Array& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array nanargmin(const Array& x, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array count_nonzero(const Array& x, Axes axis = {}, bool keepdims = false);  // int32
Array ptp(const Array& x, Axes axis = {}, bool keepdims = false);            // max - min
Array amax(const Array& x, Axes axis = {}, bool keepdims = false);
Array amin(const Array& x, Axes axis = {}, bool keepdims = false);
// Weighted mean along axis (weights broadcast along it when 1-D).
Array average(const Array& x, Axes axis = {}, const std::optional<Array>& weights = std::nullopt, bool keepdims = false);

// ---------------------------------------------------------------- scans
// Along axis (none: of the flattened array). Booleans and small integers
// accumulate in int32, as jnp. Split along the axis over devices, each
// device scans its block and only the blocks' totals move.
Array cumsum(const Array& x, std::optional<int> axis = std::nullopt);
Array cumprod(const Array& x, std::optional<int> axis = std::nullopt);
Array cumulative_sum(const Array& x, std::optional<int> axis = std::nullopt);
Array cumulative_prod(const Array& x, std::optional<int> axis = std::nullopt);
Array nancumsum(const Array& x, std::optional<int> axis = std::nullopt);
Array nancumprod(const Array& x, std::optional<int> axis = std::nullopt);

// ---------------------------------------------------------------- shapes
Array roll(const Array& x, std::int64_t shift, std::optional<int> axis = std::nullopt);
Array diff(const Array& x, int n = 1, int axis = -1);
Array repeat(const Array& x, std::int64_t repeats, std::optional<int> axis = std::nullopt);
Array tile(const Array& x, const std::vector<std::int64_t>& reps);
// Coordinate arrays: "xy" (Cartesian: the first two outputs' dims swapped) or "ij" (matrix).
std::vector<Array> meshgrid(const std::vector<Array>& xs, const std::string& indexing = "xy");
// 1-D x: a square matrix with x on diagonal k; 2-D x: its diagonal k.
Array diag(const Array& x, int k = 0);
// The diagonal (offset) of the matrices in dims axis1, axis2: moved to the end.
Array diagonal(const Array& x, int offset = 0, int axis1 = 0, int axis2 = 1);
Array trace(const Array& x, int offset = 0, int axis1 = 0, int axis2 = 1);
Array hstack(const std::vector<Array>& xs);
Array vstack(const std::vector<Array>& xs);
Array dstack(const std::vector<Array>& xs);
Array column_stack(const std::vector<Array>& xs);
Array row_stack(const std::vector<Array>& xs);
Array atleast_1d(const Array& x);
Array atleast_2d(const Array& x);
Array atleast_3d(const Array& x);
Array moveaxis(const Array& x, int source, int destination);
Array rollaxis(const Array& x, int axis, int start = 0);
Array rot90(const Array& x, int k = 1);
Array fliplr(const Array& x);
Array flipud(const Array& x);
Array append(const Array& a, const Array& b, std::optional<int> axis = std::nullopt);
// Cross products of 3-vectors (or 2-vectors: the z component) along the last axis.
Array cross(const Array& a, const Array& b);
Array kron(const Array& a, const Array& b);
Array vdot(const Array& a, const Array& b);
Array inner(const Array& a, const Array& b);
// An n x m matrix with ones at and below diagonal k.
Array tri(std::int64_t n, std::optional<std::int64_t> m = std::nullopt, std::int64_t k = 0, DType dtype = DType::float32);

// ---------------------------------------------------------------- more of jax.numpy
// Array API spellings and NumPy aliases.
Array absolute(const Array& x);
Array acos(const Array& x);
Array acosh(const Array& x);
Array asin(const Array& x);
Array asinh(const Array& x);
Array atan(const Array& x);
Array atanh(const Array& x);
Array atan2(const Array& a, const Array& b);
Array around(const Array& x, int decimals = 0);  // half to even, as jnp.round
Array round(const Array& x, int decimals);
Array rint(const Array& x);
Array bitwise_invert(const Array& x);
Array bitwise_left_shift(const Array& a, const Array& b);
Array bitwise_right_shift(const Array& a, const Array& b);
Array concat(const std::vector<Array>& xs, int axis = 0);
Array permute_dims(const Array& x, const std::vector<int>& axes);
Array matrix_transpose(const Array& x);  // swaps the last two dims
// NaN-ignoring elementwise max / min (a NaN only where both are).
Array fmax(const Array& a, const Array& b);
Array fmin(const Array& a, const Array& b);
Array empty(const Shape& shape, DType dtype = DType::float32);  // zeros: tessel has no uninitialised memory
Array empty_like(const Array& x, std::optional<DType> dtype = std::nullopt);
Array identity(std::int64_t n, DType dtype = DType::float32);
Array asarray(const Array& x, std::optional<DType> dtype = std::nullopt);
int ndim(const Array& x);
Shape shape(const Array& x);
std::int64_t size(const Array& x, std::optional<int> axis = std::nullopt);
Array isreal(const Array& x);
Array iscomplex(const Array& x);
bool isrealobj(const Array& x);
// Whether a and b have one shape and equal elements (NaNs equal with equal_nan); a bool scalar.
Array array_equal(const Array& a, const Array& b, bool equal_nan = false);
Array array_equiv(const Array& a, const Array& b);  // equal after broadcasting
std::vector<Array> broadcast_arrays(const std::vector<Array>& xs);
Shape broadcast_shapes(const std::vector<Shape>& shapes);
// Into `sections` parts as equal as may be (the first ones one longer), as np.array_split.
std::vector<Array> array_split(const Array& x, int sections, int axis = 0);
std::vector<Array> hsplit(const Array& x, int sections);
std::vector<Array> vsplit(const Array& x, int sections);
std::vector<Array> dsplit(const Array& x, int sections);
std::vector<Array> unstack(const Array& x, int axis = 0);
// choicelist[i] where condlist[i] is the first true one, else default.
Array select(const std::vector<Array>& condlist, const std::vector<Array>& choicelist, double default_value = 0);
Array choose(const Array& a, const std::vector<Array>& choices, const std::string& mode = "raise");
std::pair<Array, Array> modf(const Array& x);  // (fractional, integral) parts, the sign of x
Array logspace(double start, double stop, std::int64_t num = 50, bool endpoint = true, double base = 10.0,
               DType dtype = DType::float32);
Array geomspace(double start, double stop, std::int64_t num = 50, bool endpoint = true, DType dtype = DType::float32);
// Coordinate grids [ndim, *dimensions], as np.indices.
Array indices(const Shape& dimensions, DType dtype = DType::int32);
std::vector<Array> diag_indices(std::int64_t n, int ndim = 2);
std::vector<Array> diag_indices_from(const Array& x);
std::vector<Array> tril_indices(std::int64_t n, std::int64_t k = 0, std::optional<std::int64_t> m = std::nullopt);
std::vector<Array> triu_indices(std::int64_t n, std::int64_t k = 0, std::optional<std::int64_t> m = std::nullopt);
std::vector<Array> tril_indices_from(const Array& x, std::int64_t k = 0);
std::vector<Array> triu_indices_from(const Array& x, std::int64_t k = 0);
std::vector<Array> unravel_index(const Array& indices, const Shape& shape);
Array ravel_multi_index(const std::vector<Array>& multi_index, const Shape& dims, const std::string& mode = "raise");
Array diagflat(const Array& v, int k = 0);
Array fill_diagonal(const Array& a, double val, bool wrap = false);
Array ediff1d(const Array& x);
Array trapezoid(const Array& y, double dx = 1.0, int axis = -1);
Array trapezoid(const Array& y, const Array& x, int axis = -1);
Array vecdot(const Array& a, const Array& b, int axis = -1);   // sum(conj(a) * b) along axis
Array matvec(const Array& a, const Array& v);                  // [..., m, n] x [..., n]
Array vecmat(const Array& v, const Array& a);                  // conj([..., m]) x [..., m, n]
Array i0(const Array& x);  // the modified Bessel function of order 0
Array vander(const Array& x, std::optional<std::int64_t> n = std::nullopt, bool increasing = false);
// Polynomials as coefficient vectors, highest power first (np.poly*).
Array polyval(const Array& p, const Array& x);
Array polyadd(const Array& a, const Array& b);
Array polysub(const Array& a, const Array& b);
Array polymul(const Array& a, const Array& b);
Array polyder(const Array& p, int m = 1);
Array polyint(const Array& p, int m = 1, double k = 0);
// The coefficients of the polynomial with these zeros (1-D), or the
// characteristic polynomial of a square matrix (np.poly).
Array poly(const Array& seq_of_zeros);
// The zeros of the polynomial p (highest power first), complex: the
// eigenvalues of its companion matrix (np.roots). strip_zeros (JAX's
// default) drops leading zeros and needs concrete values.
Array roots(const Array& p, bool strip_zeros = true);
// (quotient, remainder) of u / v, as JAX's: the remainder keeps u's length
// unless trim_leading_zeros (concrete inputs) drops leading entries below
// sqrt(eps).
std::pair<Array, Array> polydiv(const Array& u, const Array& v, bool trim_leading_zeros = false);
// np.convolve / np.correlate of 1-D arrays: mode "full", "same" or "valid".
Array convolve(const Array& a, const Array& v, const std::string& mode = "full");
Array correlate(const Array& a, const Array& v, const std::string& mode = "valid");
// Covariance of the variables in rows (rowvar) or columns; ddof default 1 (0 with bias).
Array cov(const Array& m, bool rowvar = true, bool bias = false, std::optional<int> ddof = std::nullopt);
Array corrcoef(const Array& x, bool rowvar = true);
// Central differences inside, one-sided at the ends, spacing dx, along axis.
Array gradient(const Array& f, double dx = 1.0, int axis = -1);
// np.gradient over several axes (empty: every axis), one array per axis.
// spacing: none (1), one for every axis, or one per axis; each a scalar or
// the axis's coordinates (second-order accurate on an uneven grid).
std::vector<Array> gradient(const Array& f, const std::vector<Array>& spacing, const std::vector<int>& axes = {});
Array unwrap(const Array& p, double discont = -1, int axis = -1, double period = 6.283185307179586);
Array interp(const Array& x, const Array& xp, const Array& fp, std::optional<double> left = std::nullopt,
             std::optional<double> right = std::nullopt);
// Windows of length M.
Array bartlett(std::int64_t M);
Array blackman(std::int64_t M);
Array hamming(std::int64_t M);
Array hanning(std::int64_t M);
Array kaiser(std::int64_t M, double beta);
Array insert(const Array& x, std::int64_t index, const Array& values, std::optional<int> axis = std::nullopt);
Array delete_(const Array& x, std::int64_t index, std::optional<int> axis = std::nullopt);
// Sorted by the last key, then the one before, ...: the indices (np.lexsort).
Array lexsort(const std::vector<Array>& keys, int axis = -1);
Array sort_complex(const Array& x);
// A full sort satisfies partition's contract (the kth element in place,
// none larger before it, none smaller after).
Array partition(const Array& x, std::int64_t kth, int axis = -1);
Array argpartition(const Array& x, std::int64_t kth, int axis = -1);
Array block(const std::vector<std::vector<Array>>& rows);
// The set functions of 1-D results (sorted, unique); a static size pads with fill_value.
Array union1d(const Array& a, const Array& b, UniqueOptions options = {});
Array intersect1d(const Array& a, const Array& b, UniqueOptions options = {});
Array setdiff1d(const Array& a, const Array& b, UniqueOptions options = {});
Array setxor1d(const Array& a, const Array& b, UniqueOptions options = {});
// The elements of a where condition is true (concrete, or with a static size).
Array extract(const Array& condition, const Array& a, NonzeroOptions options = {});
// a's slices along axis (a flattened without one) where condition holds; a
// static options.size pads with options.fill_value (and works under jit).
Array compress(const Array& condition, const Array& a, std::optional<int> axis = std::nullopt,
               NonzeroOptions options = {});
Array trim_zeros(const Array& x, const std::string& trim = "fb");
Array resize(const Array& x, const Shape& new_shape);

// ---------------------------------------------------------------- integer and floating-point bits
Array gcd(const Array& a, const Array& b);  // integers; gcd(0, 0) = 0
Array lcm(const Array& a, const Array& b);
// x * 2^e, exactly (e an integer array).
Array ldexp(const Array& x, const Array& e);
// (mantissa in [0.5, 1) with x's sign, exponent as int32): x = m * 2^e; 0, inf and NaN give (x, 0).
std::pair<Array, Array> frexp(const Array& x);
// The next representable value after a toward b.
Array nextafter(const Array& a, const Array& b);
// The distance from x to the next representable value away from zero.
Array spacing(const Array& x);
// The number of 1 bits of each integer (of |x| for signed, as NumPy's bitwise_count).
Array bitwise_count(const Array& x);
// jnp.packbits: each element > 0 a bit, eight to a uint8 along `axis` (the
// flattened array without one), zero-padded; bitorder "big" (the first
// element in the high bit) or "little". jnp.unpackbits: the bits of a uint8
// array, `count` of them along the axis (zero-padded or cut; all without).
Array packbits(const Array& x, std::optional<int> axis = std::nullopt, const std::string& bitorder = "big");
Array unpackbits(const Array& x, std::optional<int> axis = std::nullopt, std::optional<std::int64_t> count = std::nullopt,
                 const std::string& bitorder = "big");
// jnp.frombuffer: `count` elements (all: -1) of `dtype` from raw bytes
// (native byte order), starting `offset` bytes in. ValueError when the bytes
// are not a whole number of elements or fewer than asked.
Array frombuffer(const void* data, std::size_t size, DType dtype = DType::float32, std::int64_t count = -1,
                 std::int64_t offset = 0);
Array frombuffer(const std::string& buffer, DType dtype = DType::float32, std::int64_t count = -1, std::int64_t offset = 0);
// jnp.fromstring with its (keyword-only, required) `sep`: numbers separated
// by `sep` (whitespace around them ignored; sep " " means any whitespace),
// `count` of them (all: -1), parsed as `dtype`. ValueError for text that is
// not such numbers.
Array fromstring(const std::string& string, const std::string& sep, DType dtype = DType::float32,
                 std::int64_t count = -1);
// jnp.array_str: NumPy's str() of the values ("[1. 2. 3.]").
std::string array_str(const Array& x);

// jnp.get_printoptions / set_printoptions / printoptions (NumPy's, which
// JAX's Array repr, array_str and debug::print use): how arrays print.
// precision: digits after the point at most ("fixed": exactly); threshold:
// more elements than this print summarised ("..." with edgeitems at each
// edge); linewidth: characters per line; suppress: no scientific notation
// for small values; sign: '-', '+' (always) or ' ' (a space for positives);
// floatmode: "maxprec" (default), "maxprec_equal", "fixed" or "unique"
// (shortest round-trip digits, precision ignored). As in NumPy and JAX, a
// 0-d array's str (array_str, debug::print) is its scalar's, which ignores
// the float options, and bfloat16 and float8 elements keep ml_dtypes' text.
struct PrintOptions {
  int precision = 8;
  std::int64_t threshold = 1000;
  int edgeitems = 3;
  int linewidth = 75;
  bool suppress = false;
  std::string nanstr = "nan";
  std::string infstr = "inf";
  char sign = '-';
  std::string floatmode = "maxprec";
};
PrintOptions get_printoptions();
// The options named change; the others keep their values. ValueError (as
// NumPy's) for a negative precision, an unknown sign or floatmode.
struct PrintOptionsUpdate {
  std::optional<int> precision;
  std::optional<std::int64_t> threshold;
  std::optional<int> edgeitems;
  std::optional<int> linewidth;
  std::optional<bool> suppress;
  std::optional<std::string> nanstr;
  std::optional<std::string> infstr;
  std::optional<char> sign;
  std::optional<std::string> floatmode;
};
void set_printoptions(const PrintOptionsUpdate& update);
// jnp.printoptions, the context manager: the update holds until the guard
// is destroyed, then every option is as it was.
class printoptions {
 public:
  explicit printoptions(const PrintOptionsUpdate& update);
  ~printoptions();
  printoptions(const printoptions&) = delete;
  printoptions& operator=(const printoptions&) = delete;

 private:
  PrintOptions saved_;
};

// ---------------------------------------------------------------- unique with extras
struct UniqueCounts {
  Array values, counts;
};
struct UniqueInverse {
  Array values, inverse_indices;
};
struct UniqueAll {
  Array values, indices, inverse_indices, counts;
};
UniqueCounts unique_counts(const Array& x, UniqueOptions options = {});
UniqueInverse unique_inverse(const Array& x, UniqueOptions options = {});
UniqueAll unique_all(const Array& x, UniqueOptions options = {});

// ---------------------------------------------------------------- functional helpers
// fn applied to each 1-D slice of arr along axis (vmapped); fn's result dims replace that axis.
Array apply_along_axis(const std::function<Array(const Array&)>& fn, int axis, const Array& arr);
// fn(a, axis) for each axis in turn, a result one dim short expanded back.
Array apply_over_axes(const std::function<Array(const Array&, int)>& fn, const Array& a, const std::vector<int>& axes);
// fn of the coordinate arrays of `shape` (each of dtype).
Array fromfunction(const std::function<Array(const std::vector<Array>&)>& fn, const Shape& shape,
                   DType dtype = DType::float32);
// funclist[i](x) where condlist[i] holds (the last one first); a funclist one longer gives the default.
Array piecewise(const Array& x, const std::vector<Array>& condlist,
                const std::vector<std::function<Array(const Array&)>>& funclist);
// The indices (rows, cols) where mask_func(ones(n, n), k) is nonzero.
std::vector<Array> mask_indices(std::int64_t n, const std::function<Array(const Array&, int)>& mask_func, int k = 0);
bool isscalar(const Array& x);
// Open-mesh index arrays: the i-th of shape (1, .., n_i, .., 1).
std::vector<Array> ix_(const std::vector<Array>& args);
std::string array_repr(const Array& x);
// a with the flattened positions ind set to v (JAX's put, never in place).
Array put(const Array& a, const Array& ind, const Array& v, const std::string& mode = "clip");
// arr with its elements where mask holds set to vals in turn (cycling), as
// np.place; JAX requires inplace=False (arrays are immutable), and so does
// tessel: true raises its ValueError.
Array place(const Array& arr, const Array& mask, const Array& vals, bool inplace = false);
// arr with values placed at indices along axis (take_along_axis's inverse; never in place).
Array put_along_axis(const Array& arr, const Array& indices, const Array& values, int axis);
// Least-squares polynomial coefficients of degree deg, highest power first (through QR).
Array polyfit(const Array& x, const Array& y, int deg);
// The dtype two dtypes (or arrays) promote to, with JAX's lattice.
DType promote_types(DType a, DType b);
DType result_type(const std::vector<Array>& xs);
// Counts of samples in the bins of a 2-D (x, y) or D-dimensional ([N, D]) histogram, and the bin edges.
std::tuple<Array, Array, Array> histogram2d(const Array& x, const Array& y, int bins = 10,
                                            std::optional<std::vector<std::pair<double, double>>> range = std::nullopt);
std::pair<Array, std::vector<Array>> histogramdd(const Array& sample, int bins = 10,
                                                 std::optional<std::vector<std::pair<double, double>>> range = std::nullopt);

// ---------------------------------------------------------------- operators
// Bitwise operators as jnp (integers and booleans), % as ts::remainder, and
// compound assignments that rebind the handle (arrays stay immutable).
Array operator%(const Array& a, const Array& b);
Array operator&(const Array& a, const Array& b);
Array operator|(const Array& a, const Array& b);
Array operator^(const Array& a, const Array& b);
Array operator~(const Array& x);
Array operator<<(const Array& a, const Array& b);
Array operator>>(const Array& a, const Array& b);
Array& operator+=(Array& a, const Array& b);
Array& operator-=(Array& a, const Array& b);
Array& operator*=(Array& a, const Array& b);
Array& operator/=(Array& a, const Array& b);

#define TESSEL_SCALAR_OPERATOR2(OP)                                     \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array operator OP(const Array& a, T b) {                              \
    return a OP detail::scalar_operand(b);                              \
  }                                                                     \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array operator OP(T a, const Array& b) {                              \
    return detail::scalar_operand(a) OP b;                              \
  }
TESSEL_SCALAR_OPERATOR2(%)
TESSEL_SCALAR_OPERATOR2(&)
TESSEL_SCALAR_OPERATOR2(|)
TESSEL_SCALAR_OPERATOR2(^)
TESSEL_SCALAR_OPERATOR2(<<)
TESSEL_SCALAR_OPERATOR2(>>)
#undef TESSEL_SCALAR_OPERATOR2
#define TESSEL_SCALAR_COMPOUND(OP)                                      \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array& operator OP(Array& a, T b) {                                   \
    return a OP detail::scalar_operand(b);                              \
  }
TESSEL_SCALAR_COMPOUND(+=)
TESSEL_SCALAR_COMPOUND(-=)
TESSEL_SCALAR_COMPOUND(*=)
TESSEL_SCALAR_COMPOUND(/=)
#undef TESSEL_SCALAR_COMPOUND
#define TESSEL_SCALAR_FN2(FN)                                           \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array FN(const Array& a, T b) {                                       \
    return FN(a, detail::scalar_operand(b));                            \
  }                                                                     \
  template <class T, class = std::enable_if_t<is_host_scalar_v<T>>>     \
  Array FN(T a, const Array& b) {                                       \
    return FN(detail::scalar_operand(a), b);                            \
  }
TESSEL_SCALAR_FN2(fmod)
TESSEL_SCALAR_FN2(mod)
TESSEL_SCALAR_FN2(logaddexp)
TESSEL_SCALAR_FN2(logaddexp2)
TESSEL_SCALAR_FN2(hypot)
TESSEL_SCALAR_FN2(copysign)
TESSEL_SCALAR_FN2(heaviside)
TESSEL_SCALAR_FN2(float_power)
TESSEL_SCALAR_FN2(true_divide)
TESSEL_SCALAR_FN2(bitwise_and)
TESSEL_SCALAR_FN2(bitwise_or)
TESSEL_SCALAR_FN2(bitwise_xor)
TESSEL_SCALAR_FN2(left_shift)
TESSEL_SCALAR_FN2(right_shift)
TESSEL_SCALAR_FN2(logical_xor)
#undef TESSEL_SCALAR_FN2

namespace lax {
Array stop_gradient(const Array& x);
// Cumulative reductions along axis (reverse: from the end), JAX's primitives.
Array cumsum(const Array& x, int axis = 0, bool reverse = false);
Array cumprod(const Array& x, int axis = 0, bool reverse = false);
Array cummax(const Array& x, int axis = 0, bool reverse = false);
Array cummin(const Array& x, int axis = 0, bool reverse = false);
Array cumlogsumexp(const Array& x, int axis = 0, bool reverse = false);
}  // namespace lax

}  // namespace tessel

BOOST_HANA_ADAPT_STRUCT(tessel::UniqueCounts, values, counts);
BOOST_HANA_ADAPT_STRUCT(tessel::UniqueInverse, values, inverse_indices);
BOOST_HANA_ADAPT_STRUCT(tessel::UniqueAll, values, indices, inverse_indices, counts);
