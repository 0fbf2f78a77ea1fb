// The type a reference kernel sums in (reductions, dots, convolutions):
// double for real floats, complex<double> for complex ones, the type itself
// for integers (whose sums wrap).
#pragma once

#include <complex>
#include <type_traits>

namespace tessel {

template <class T>
struct AccOf {
  using type = std::conditional_t<std::is_floating_point_v<T>, double, T>;
};
template <class T>
struct AccOf<std::complex<T>> {
  using type = std::complex<double>;
};
template <class T>
using Acc = typename AccOf<T>::type;

}  // namespace tessel
