// ts::random: JAX's counter-based PRNG, Threefry-2x32, bit for bit (API.md
// "Random"). A key is a uint32 array of shape (2,) (split gives (n, 2)).
//
// Both of JAX's modes, per config().threefry_partitionable (read when an op
// runs or a function is traced): on (JAX's default since 0.5), element i of a
// draw uses counter i, so each device draws its own shard with no
// communication; off (the seeds' era), the counters are one flat range cut
// in halves. Values equal JAX's for the same key, shape, dtype and mode.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <tessel/array.hpp>

namespace tessel::random {

Array key(std::int64_t seed);
Array split(const Array& key, std::int64_t num = 2);
Array fold_in(const Array& key, std::uint32_t data);
Array key_data(const Array& key);

// Raw bits: uint32 (or, with dtype int64, 64 bits in an int64).
Array bits(const Array& key, const Shape& shape, DType dtype = DType::uint32);
Array uniform(const Array& key, const Shape& shape = {}, DType dtype = DType::float32, double minval = 0.0,
              double maxval = 1.0);
Array normal(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
Array randint(const Array& key, const Shape& shape, std::int64_t minval, std::int64_t maxval, DType dtype = DType::int32);
Array bernoulli(const Array& key, double p = 0.5, const Shape& shape = {});
// A shuffled arange(n), or x shuffled along its first axis.
Array permutation(const Array& key, std::int64_t n);
Array permutation(const Array& key, const Array& x);
Array truncated_normal(const Array& key, double lower, double upper, const Shape& shape = {},
                       DType dtype = DType::float32);

// The distributions of jax.random (dsl/src/random_dists.cpp), each JAX's
// algorithm over the draws above: the same key splits in the same order, the
// same formulas, so the same key, shape and dtype give JAX's values (up to
// the rounding of tessel's elementwise kernels where a formula calls log,
// tan, pow, sqrt, ..., and of LAPACK for multivariate_normal and orthogonal).
// A std::optional<Shape> left out (JAX's None) is the parameters' broadcast
// shape; note that `{}` passed there also means "left out".
Array exponential(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
// JAX's default mode "low": -log(-log(uniform(key, shape, dtype, tiny, 1))).
Array gumbel(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
Array laplace(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
Array logistic(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
Array cauchy(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
// -1 or 1 with probability 1/2 each, as `dtype`.
Array rademacher(const Array& key, const Shape& shape = {}, DType dtype = DType::int32);
// Indices (int32) drawn from softmax(logits) along `axis` (the Gumbel-max
// trick); shape defaults to logits' shape without `axis`, and a longer shape
// draws that many more samples per distribution (leading dims).
Array categorical(const Array& key, const Array& logits, int axis = -1, std::optional<Shape> shape = std::nullopt);
// Samples of arange(n), or of a's slices along `axis`, uniform or with
// probabilities p (1-D, length n), with or without replacement.
Array choice(const Array& key, std::int64_t n, const Shape& shape = {}, bool replace = true,
             const std::optional<Array>& p = std::nullopt, int axis = 0);
Array choice(const Array& key, const Array& a, const Shape& shape = {}, bool replace = true,
             const std::optional<Array>& p = std::nullopt, int axis = 0);
// Gamma(a, 1) by Marsaglia-Tsang, one rejection loop per element (JAX's
// random_gamma_p: the key split into one key per element, a vmapped
// while_loop); loggamma: its log, accurate for small a.
Array gamma(const Array& key, const Array& a, std::optional<Shape> shape = std::nullopt, DType dtype = DType::float32);
Array gamma(const Array& key, double a, std::optional<Shape> shape = std::nullopt, DType dtype = DType::float32);
Array loggamma(const Array& key, const Array& a, std::optional<Shape> shape = std::nullopt,
               DType dtype = DType::float32);
Array loggamma(const Array& key, double a, std::optional<Shape> shape = std::nullopt, DType dtype = DType::float32);
Array beta(const Array& key, const Array& a, const Array& b, std::optional<Shape> shape = std::nullopt,
           DType dtype = DType::float32);
Array beta(const Array& key, double a, double b, std::optional<Shape> shape = std::nullopt,
           DType dtype = DType::float32);
// alpha: (..., n); the result is shape + (n,) (shape defaults to alpha's batch shape).
Array dirichlet(const Array& key, const Array& alpha, std::optional<Shape> shape = std::nullopt,
                DType dtype = DType::float32);
// Student's t with df degrees of freedom.
Array t(const Array& key, const Array& df, std::optional<Shape> shape = std::nullopt, DType dtype = DType::float32);
Array t(const Array& key, double df, std::optional<Shape> shape = std::nullopt, DType dtype = DType::float32);
// JAX's exact method: Knuth's below lam = 10, Hormann's transformed rejection above.
Array poisson(const Array& key, const Array& lam, std::optional<Shape> shape = std::nullopt,
              DType dtype = DType::int32);
Array poisson(const Array& key, double lam, std::optional<Shape> shape = std::nullopt, DType dtype = DType::int32);
// Counts as floats (JAX's): inversion where n * min(p, 1 - p) <= 10, BTRS elsewhere.
Array binomial(const Array& key, const Array& n, const Array& p, std::optional<Shape> shape = std::nullopt,
               DType dtype = DType::float32);
Array binomial(const Array& key, double n, double p, std::optional<Shape> shape = std::nullopt,
               DType dtype = DType::float32);
// mean: (..., n), cov: (..., n, n); the result is shape + (n,). dtype defaults
// to mean's; method "cholesky", "eigh" or "svd" (for singular covariances).
Array multivariate_normal(const Array& key, const Array& mean, const Array& cov,
                          std::optional<Shape> shape = std::nullopt, std::optional<DType> dtype = std::nullopt,
                          const std::string& method = "cholesky");
// Haar-distributed orthogonal matrices, shape + (n, m) (m defaults to n;
// semi-orthogonal when m != n).
Array orthogonal(const Array& key, std::int64_t n, const Shape& shape = {}, DType dtype = DType::float32,
                 std::optional<std::int64_t> m = std::nullopt);

// More of JAX's distributions (their formulas over the draws above), and
// key helpers: keys are raw uint32[2] arrays here, so PRNGKey is key,
// wrap_key_data and clone return the key, and key_impl names the PRNG.
Array PRNGKey(std::int64_t seed);
Array clone(const Array& key);
Array wrap_key_data(const Array& key_data);
std::string key_impl(const Array& key);
Array chisquare(const Array& key, double df, std::optional<Shape> shape = std::nullopt, DType dtype = DType::float32);
Array f(const Array& key, double dfnum, double dfden, std::optional<Shape> shape = std::nullopt,
        DType dtype = DType::float32);
Array geometric(const Array& key, double p, const Shape& shape = {}, DType dtype = DType::int32);
Array lognormal(const Array& key, double sigma = 1.0, const Shape& shape = {}, DType dtype = DType::float32);
Array maxwell(const Array& key, const Shape& shape = {}, DType dtype = DType::float32);
Array double_sided_maxwell(const Array& key, double loc, double scale, const Shape& shape = {},
                           DType dtype = DType::float32);
Array pareto(const Array& key, double b, const Shape& shape = {}, DType dtype = DType::float32);
Array rayleigh(const Array& key, double scale, const Shape& shape = {}, DType dtype = DType::float32);
Array triangular(const Array& key, double left, double mode, double right, const Shape& shape = {},
                 DType dtype = DType::float32);
Array wald(const Array& key, double mean, const Shape& shape = {}, DType dtype = DType::float32);
Array weibull_min(const Array& key, double scale, double concentration, const Shape& shape = {},
                  DType dtype = DType::float32);
Array generalized_normal(const Array& key, double p, const Shape& shape = {}, DType dtype = DType::float32);
// Uniform in the d-dimensional unit p-ball: shape + (d,).
Array ball(const Array& key, std::int64_t d, double p = 2.0, const Shape& shape = {}, DType dtype = DType::float32);

}  // namespace tessel::random
