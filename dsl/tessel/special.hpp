// jax.scipy.special: the functions users reach for first, with JAX's
// definitions and derivatives (integers become float32).
#pragma once

#include <tessel/array.hpp>
#include <tessel/ops.hpp>

namespace tessel::scipy::special {

Array erf(const Array& x);
Array erfc(const Array& x);
Array erfinv(const Array& x);
Array gammaln(const Array& x);   // log|Gamma(x)|; +inf at 0 and the negative integers
Array digamma(const Array& x);   // NaN at 0 and the negative integers
Array logit(const Array& p);
Array expit(const Array& x);
Array xlogy(const Array& x, const Array& y);    // 0 where x == 0; d/dx = log(y)
Array xlog1py(const Array& x, const Array& y);  // 0 where x == 0; d/dx = log1p(y)
Array betaln(const Array& a, const Array& b);
// The exponentially scaled modified Bessel functions of order 0 and 1: exp(-|x|) I0(x), exp(-|x|) I1(x).
Array i0e(const Array& x);
Array i1e(const Array& x);
Array ndtr(const Array& x);      // the standard normal CDF
Array log_ndtr(const Array& x);  // its log, accurate far into the left tail
Array ndtri(const Array& p);     // its inverse; -inf at (and below) 0, +inf at (and above) 1

}  // namespace tessel::scipy::special
