// jax.numpy's sorting, searching, counting and set functions, order
// statistics, and lax's sort, top_k, associative_scan and reduce
// (API.md "Everyday surface"). Functions whose result's length depends on
// the values (unique, nonzero, argwhere) take a static `size` under jit, as
// JAX's: without one, a traced input is a ConcretizationError naming `size`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/adapt_struct.hpp>

#include <tessel/array.hpp>
#include <tessel/ops.hpp>
#include <tessel/tree.hpp>

namespace tessel {

struct SortOptions {
  bool descending = false;
  bool stable = true;  // tessel's sorts are always stable
};
// Sorted along axis; descending is the ascending sort reversed (NaNs first),
// with equal elements kept in their order by argsort.
Array sort(const Array& x, int axis, SortOptions options);
Array argsort(const Array& x, int axis, SortOptions options);

// Indices into the sorted 1-D `a` where `v`'s elements would go: "left" the
// first such, "right" the last (NaNs after every number, as sort puts them).
// Compares every element of v with every element of a (JAX's "compare_all").
Array searchsorted(const Array& a, const Array& v, const std::string& side = "left");
// The bins (of the sorted edges `bins`) that x's elements fall in, as np.digitize.
Array digitize(const Array& x, const Array& bins, bool right = false);

struct BincountOptions {
  std::optional<Array> weights;
  std::int64_t minlength = 0;
  std::optional<std::int64_t> length;  // static; needed under jit
};
// Counts (or summed weights) of each non-negative integer of x (negative
// values count in bin 0, and values past `length` are dropped, as JAX).
// Split over devices, each device counts its part and one all-reduce adds them.
Array bincount(const Array& x, BincountOptions options = {});
// (counts, bin edges): `bins` equal bins over `range` (default: x's min and
// max, needing a concrete x); counts as float32 (JAX's), the last bin closed.
std::pair<Array, Array> histogram(const Array& x, int bins = 10,
                                  std::optional<std::pair<double, double>> range = std::nullopt);
std::pair<Array, Array> histogram(const Array& x, const Array& bin_edges);
Array histogram_bin_edges(const Array& x, int bins = 10, std::optional<std::pair<double, double>> range = std::nullopt);
// Whether each element of `element` is in test_elements (or not, with invert).
Array isin(const Array& element, const Array& test_elements, bool invert = false);

// Order statistics along axis (none: of the flattened array); methods
// linear (default), lower, higher, nearest, midpoint. A NaN in a slice
// makes it NaN; the nan* versions ignore NaNs (an all-NaN slice: NaN).
Array quantile(const Array& a, double q, std::optional<int> axis = std::nullopt, const std::string& method = "linear",
               bool keepdims = false);
Array quantile(const Array& a, const Array& q, std::optional<int> axis = std::nullopt,
               const std::string& method = "linear", bool keepdims = false);
Array percentile(const Array& a, double q, std::optional<int> axis = std::nullopt, const std::string& method = "linear",
                 bool keepdims = false);
Array median(const Array& a, std::optional<int> axis = std::nullopt, bool keepdims = false);
Array nanquantile(const Array& a, double q, std::optional<int> axis = std::nullopt,
                  const std::string& method = "linear", bool keepdims = false);
Array nanpercentile(const Array& a, double q, std::optional<int> axis = std::nullopt,
                    const std::string& method = "linear", bool keepdims = false);
Array nanmedian(const Array& a, std::optional<int> axis = std::nullopt, bool keepdims = false);

struct UniqueOptions {
  std::optional<std::int64_t> size;
  std::optional<double> fill_value;  // default: the smallest unique value
};
// The sorted unique values of the flattened x (NaNs count as one value).
Array unique(const Array& x, UniqueOptions options = {});
Array unique_values(const Array& x, UniqueOptions options = {});

struct NonzeroOptions {
  std::optional<std::int64_t> size;
  std::int64_t fill_value = 0;
};
// The indices of x's nonzero elements, one int32 array per dim (row-major order).
std::vector<Array> nonzero(const Array& x, NonzeroOptions options = {});
Array argwhere(const Array& x, NonzeroOptions options = {});  // [count, ndim]
Array flatnonzero(const Array& x, NonzeroOptions options = {});

namespace lax {
struct TopK {
  Array values, indices;
};
// The k largest elements along the last axis, descending, and their int32
// indices (ties: the lower index first).
TopK top_k(const Array& x, std::int64_t k);

// lax.sort of several operands: sorted by the first num_keys (lexicographic,
// stable), the others permuted alike.
std::vector<Array> sort(const std::vector<Array>& operands, int dimension = -1, int num_keys = 1);

struct AssociativeScanOptions {
  bool reverse = false;
  int axis = 0;
};
// Inclusive scan of x along axis with an associative fn(a, b) (applied to
// whole slices; JAX's parallel-prefix algorithm, O(log n) levels).
Array associative_scan(const std::function<Array(const Array&, const Array&)>& fn, const Array& x,
                       AssociativeScanOptions options = {});
// The same over several arrays scanned together (a pytree's leaves, each of
// the same length along axis): fn combines two lists of slices.
std::vector<Array> associative_scan(
    const std::function<std::vector<Array>(const std::vector<Array>&, const std::vector<Array>&)>& fn,
    const std::vector<Array>& elems, AssociativeScanOptions options = {});
// elems a pytree of arrays (a pair, a struct, a map), as JAX's: fn(a, b)
// takes and returns pytrees of elems' structure.
template <class T, class F, std::enable_if_t<!std::is_same_v<T, Array> && !std::is_same_v<T, std::vector<Array>>, int> = 0>
T associative_scan(F fn, const T& elems, AssociativeScanOptions options = {}) {
  const std::function<std::vector<Array>(const std::vector<Array>&, const std::vector<Array>&)> flat =
      [&](const std::vector<Array>& a, const std::vector<Array>& b) {
        return tree::flatten(T(fn(tree::unflatten(elems, a), tree::unflatten(elems, b))));
      };
  return tree::unflatten(elems, associative_scan(flat, tree::flatten(elems), options));
}
// x reduced over `dimensions` with an associative, commutative fn and its
// identity init (a pairwise tree of fn over halves).
Array reduce(const Array& x, double init, const std::function<Array(const Array&, const Array&)>& fn,
             const std::vector<int>& dimensions);
// lax.reduce of several operands of one shape together (an argmax's values
// and indices, say): fn combines two lists of slices, elementwise; one
// scalar init value per operand.
std::vector<Array> reduce(
    const std::vector<Array>& operands, const std::vector<Array>& init_values,
    const std::function<std::vector<Array>(const std::vector<Array>&, const std::vector<Array>&)>& fn,
    const std::vector<int>& dimensions);
// operands a pytree of arrays (a pair, a struct, a map), init_values a pytree
// of scalars of the same structure, as JAX's: fn takes and returns pytrees.
template <class T, class F, std::enable_if_t<!std::is_same_v<T, Array> && !std::is_same_v<T, std::vector<Array>>, int> = 0>
T reduce(const T& operands, const T& init_values, F fn, const std::vector<int>& dimensions) {
  const std::function<std::vector<Array>(const std::vector<Array>&, const std::vector<Array>&)> flat =
      [&](const std::vector<Array>& a, const std::vector<Array>& b) {
        return tree::flatten(T(fn(tree::unflatten(operands, a), tree::unflatten(operands, b))));
      };
  return tree::unflatten(operands, reduce(tree::flatten(operands), tree::flatten(init_values), flat, dimensions));
}
}  // namespace lax

// jnp.top_k: lax.top_k.
using lax::top_k;

}  // namespace tessel

BOOST_HANA_ADAPT_STRUCT(tessel::lax::TopK, values, indices);
