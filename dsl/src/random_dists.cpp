// The distributions of jax.random (jax/_src/random/core.py), written over
// the bit-identical draws of random.cpp (split, bits, uniform, normal,
// randint, bernoulli, permutation) with JAX's algorithms: the same key
// splits in the same order, the same formulas in the same operation order
// and dtypes, the same loops. So for a key, shape and dtype each returns
// JAX's value, up to the last-place rounding of tessel's kernels for log,
// log1p, tan, pow, sqrt, exp and sin against XLA's (and of LAPACK for
// multivariate_normal and orthogonal).
//
// gamma is JAX's random_gamma_p as lowered (use_vmap=True on every
// platform): the key split into one key per element, then
// vmap(_gamma_one)(keys, a.ravel()), _gamma_one being Marsaglia and Tsang's
// rejection loop (a while_loop over a while_loop, with its own splits).
// ts::vmap batches the loops as JAX does (every example steps until all are
// done; a finished example keeps its carry), so each element is the value of
// its own loop. poisson and binomial are JAX's whole-array loops (Knuth and
// Hormann; inversion and BTRS): both branches run on the same key and a
// select picks, as in JAX. lgamma (Hormann's acceptance test) is XLA's
// Lanczos decomposition of chlo.lgamma, op for op.
//
// Each distribution is staged: run eagerly it is one program (traced, then
// compiled once per structure), inside a trace it is inlined. Being one
// program matters for the values too: compiled multiply-adds fuse into FMAs,
// as XLA:CPU's always may in JAX's jitted samplers; op-by-op they would round
// twice.
//
// Known gaps against JAX: no gradient with respect to gamma's `a` (JAX's
// implicit reparameterisation; tessel's while_loop is not reverse-mode
// differentiable), only the default methods (gamma/poisson "exact", gumbel
// "low", categorical with replacement); choice's cumsum of p runs in
// sequence, XLA's reduce-window order for short p (XLA may regroup a long one).
#include <tessel/random.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <tuple>

#include <tessel/creation.hpp>
#include <tessel/lax.hpp>
#include <tessel/linalg.hpp>
#include <tessel/ops.hpp>
#include <tessel/vmap.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::random {

namespace {

using V = std::vector<Array>;

// fn over xs: inlined inside a trace, else traced into one graph and run as
// one compiled program (not op by op).
Array staged(const std::string& name, const V& xs, const std::function<Array(const V&)>& fn) {
  if (detail::trace_of(xs)) return fn(xs);
  std::vector<Aval> in;
  in.reserve(xs.size());
  for (auto& x : xs) in.push_back(Aval{x.dtype(), x.shape(), x.weak_type()});
  detail::TracedGraph tg = detail::trace_graph(name, in, [&](const V& v) { return V{fn(v)}; });
  V args = xs;
  args.insert(args.end(), tg.trace->captured.begin(), tg.trace->captured.end());
  return detail::call_graph(tg.g, args, name).at(0);
}

void check_key(const char* what, const Array& key) {
  if (key.dtype() != DType::uint32 || key.shape() != Shape{2})
    throw TypeError(std::string(what) + ": a PRNG key is a uint32 array of shape (2,), got " +
                    aval_str(key.dtype(), key.shape()) + " (index a batch of keys, e.g. keys.index({0}), or use ts::vmap)");
}

void check_float(const char* what, DType dtype) {
  if (dtype != DType::float32 && dtype != DType::float64)
    throw TypeError(std::string("dtype argument to `") + what + "` must be a float dtype (float32 or float64), got " +
                    dtype_name(dtype));
}

bool is_float(DType d) { return d == DType::float32 || d == DType::float64; }

// A 0-d constant of `dtype` (not weak: lax._const), baked into a trace.
Array cst(double v, DType dtype) { return detail::scalar_literal(v, dtype, false); }

// Row i of a (num, 2) array of keys.
Array row(const Array& keys, std::int64_t i) { return keys.index({i}); }

Shape broadcast_all(const std::vector<Shape>& shapes, const std::string& what) {
  Shape s;
  for (auto& x : shapes) s = detail::compose::broadcast_shapes(s, x, what);
  return s;
}

// JAX's _check_shape: the parameters' shapes broadcast to `shape` exactly.
void check_shape(const char* name, const Shape& shape, const std::vector<Shape>& params) {
  std::vector<Shape> all{shape};
  all.insert(all.end(), params.begin(), params.end());
  Shape b = broadcast_all(all, name);
  if (b != shape)
    throw ValueError(std::string(name) +
                     " parameter shapes must be broadcast-compatible with shape argument, and the result of "
                     "broadcasting the shapes must equal the shape argument, but got result " +
                     shape_str(b) + " for shape argument " + shape_str(shape) + ".");
}

// JAX's _check_broadcast_shapes: None -> the parameters' broadcast shape.
Shape resolve_shape(const char* name, const std::optional<Shape>& shape, const std::vector<Shape>& params) {
  if (!shape) return broadcast_all(params, name);
  check_shape(name, *shape, params);
  return *shape;
}

double tiny(DType d) {
  return d == DType::float32 ? double(std::numeric_limits<float>::min()) : std::numeric_limits<double>::min();
}
double eps(DType d) {
  return d == DType::float32 ? double(std::numeric_limits<float>::epsilon()) : std::numeric_limits<double>::epsilon();
}
// finfo.epsneg: 2^-(nmant + 1).
double epsneg(DType d) { return eps(d) / 2; }

Array isinf_(const Array& x) { return abs(x) == INFINITY; }

// --- the samplers, on arrays already inside a trace --------------------------

Array exponential_(const Array& key, const Shape& shape, DType dtype) {
  Array u = random::uniform(key, shape, dtype);
  // 1 - u moves the domain of log to (0, 1]
  return -log1p(-u);
}

Array gumbel_(const Array& key, const Shape& shape, DType dtype) {
  return -log(-log(random::uniform(key, shape, dtype, tiny(dtype), 1.0)));
}

// lax.lgamma as XLA lowers chlo.lgamma (materializeLgamma), op for op.
Array lgamma_(const Array& x) {
  constexpr double kBase = 0.99999999999980993227684700473478;
  static const double kCoef[8] = {676.520368121885098567009190444019, -1259.13921672240287047156078755283,
                                  771.3234287776530788486528258894,   -176.61502916214059906584551354,
                                  12.507343278686904814458936853,     -0.13857109526572011689554707,
                                  9.984369578019570859563e-6,         1.50563273514931155834e-7};
  const DType d = x.dtype();
  auto k = [d](double v) { return cst(v, d); };
  Array need_to_reflect = x < k(0.5);
  Array z = where(need_to_reflect, -x, x - k(1));
  Array a = k(kBase);
  for (int i = 0; i < 8; ++i) a = a + k(kCoef[i]) / (z + k(i + 1));
  Array lanczos_plus_half = k(7.5);
  Array t = lanczos_plus_half + z;
  Array log_t = k(std::log(7.5)) + log1p(z / lanczos_plus_half);
  Array r = ((z + k(0.5)) - t / log_t) * log_t;
  Array lg = (k((std::log(2.0) + std::log(M_PI)) / 2) + r) + log(a);
  Array ax = abs(x);
  Array frac = ax - floor(ax);
  frac = where(k(0.5) < frac, k(1) - frac, frac);
  Array denom = log(sin(k(M_PI) * frac));
  Array refl = where(isfinite(denom), (k(std::log(M_PI)) - denom) - lg, -denom);
  lg = where(need_to_reflect, refl, lg);
  return where(isinf_(x), full_like(x, INFINITY), lg);
}

// _gamma_one: one Gamma(alpha) sample (Marsaglia and Tsang), alpha a 0-d array.
Array gamma_one(const Array& key, const Array& alpha, bool log_space) {
  using C4 = std::tuple<Array, Array, Array, Array>;  // key, X, V, U
  using C3 = std::tuple<Array, Array, Array>;         // key, x, v
  const DType dt = alpha.dtype();
  Array zero = cst(0, dt), one = cst(1, dt), minus_one = cst(-1, dt), two = cst(2, dt);
  Array one_over_two = cst(0.5, dt), one_over_three = cst(1. / 3., dt), squeeze_const = cst(0.0331, dt);
  // alpha < 1 is boosted: Gamma(alpha) ~ Gamma(alpha + 1) * Uniform()^(1 / alpha)
  Array boost_mask = alpha >= one;
  Array a = where(boost_mask, alpha, alpha + one);
  Array d = a - one_over_three;
  Array c = one_over_three / sqrt(d);

  auto cond_fn = [&](const C4& s) {
    const Array &X = std::get<1>(s), &V_ = std::get<2>(s), &U = std::get<3>(s);
    return logical_and(U >= one - squeeze_const * (X * X),
                       log(U) >= X * one_over_two + d * ((one - V_) + log(V_)));
  };
  auto body_fn = [&](const C4& s) {
    Array keys = random::split(std::get<0>(s), 3);
    Array x_key = row(keys, 1), u_key = row(keys, 2);
    C3 r = lax::while_loop([&](const C3& kxv) { return std::get<2>(kxv) <= zero; },
                           [&](const C3& kxv) {
                             Array ks = random::split(std::get<0>(kxv));
                             Array x = random::normal(row(ks, 1), {}, dt);
                             return C3{row(ks, 0), x, one + x * c};
                           },
                           C3{x_key, zero, minus_one});
    const Array &x = std::get<1>(r), &v = std::get<2>(r);
    return C4{row(keys, 0), x * x, (v * v) * v, random::uniform(u_key, {}, dt)};
  };
  // the initial state makes cond_fn true
  Array ks = random::split(key);
  Array subkey = row(ks, 1);
  C4 out = lax::while_loop(cond_fn, body_fn, C4{row(ks, 0), zero, one, two});
  const Array& Vf = std::get<2>(out);
  if (log_space) {
    Array log_samples = -exponential_(subkey, {}, dt);
    Array log_boost = where(logical_or(boost_mask, log_samples == zero), zero, log_samples * (one / alpha));
    return (log(d) + log(Vf)) + log_boost;
  }
  Array samples = 1 - random::uniform(subkey, {}, dt);
  Array boost = where(boost_mask, one, pow(samples, one / alpha));
  return (d * Vf) * boost;
}

// _gamma: a converted to dtype and broadcast to shape, then random_gamma_p.
Array gamma_(const Array& key, const Array& a_in, const Shape& shape, DType dtype, bool log_space) {
  Array a = a_in.astype(dtype);
  if (a.shape() != shape) a = broadcast_to(a, shape);
  const std::int64_t n = numel(shape);
  if (n == 0) return zeros(shape, dtype);
  Array keys = random::split(key, n);
  Array alphas = reshape(a, {n});
  Array samples = vmap([log_space](const Array& k, const Array& al) { return gamma_one(k, al, log_space); })(keys, alphas);
  return reshape(samples, shape);
}

// jax.nn.softmax's formula: exp(x - max) / sum.
Array softmax_(const Array& x, int axis) {
  Array unnormalized = exp(x - max(x, axis, true));
  return unnormalized / sum(unnormalized, axis, true);
}

// --- poisson (JAX's exact method) ---

constexpr double kInt32Max = 2147483647.0;

Array poisson_knuth(const Array& key, const Array& lam, const Shape& shape, DType dtype) {
  using C = std::tuple<Array, Array, Array, Array>;  // i, k, rng, log_prod
  auto body = [&](const C& s) {
    Array ks = random::split(std::get<2>(s));
    const Array &k = std::get<1>(s), &log_prod = std::get<3>(s);
    Array k2 = where(log_prod > -lam, k + 1, k);
    Array u = random::uniform(row(ks, 1), shape, DType::float32);
    return C{std::get<0>(s) + 1, k2, row(ks, 0), log_prod + log(u)};
  };
  auto cond = [&](const C& s) {
    return logical_and(any(std::get<3>(s) > -lam), std::get<0>(s) < cst(kInt32Max, DType::int32));
  };
  C init{cst(0, DType::int32), zeros(shape, dtype), key, zeros(shape, DType::float32)};
  Array k = std::get<1>(lax::while_loop(cond, body, init));
  return (k - 1).astype(dtype);
}

Array poisson_rejection(const Array& key, const Array& lam, const Shape& shape, DType dtype) {
  Array log_lam = log(lam);
  Array b = 0.931 + 2.53 * sqrt(lam);
  Array a = -0.059 + 0.02483 * b;
  Array inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
  Array v_r = 0.9277 - 3.6224 / (b - 2);
  using C = std::tuple<Array, Array, Array, Array>;  // i, k_out, accepted, key
  auto body = [&](const C& s) {
    Array ks = random::split(std::get<3>(s), 3);
    Array u = random::uniform(row(ks, 1), shape, lam.dtype()) - 0.5;
    Array v = random::uniform(row(ks, 2), shape, lam.dtype());
    Array u_shifted = 0.5 - abs(u);
    Array k = floor((2 * a / u_shifted + b) * u + lam + 0.43);
    Array s_ = log(v * inv_alpha / (a / (u_shifted * u_shifted) + b));
    Array t_ = -lam + k * log_lam - lgamma_(k + 1);
    Array accept1 = logical_and(u_shifted >= 0.07, v <= v_r);
    Array reject = logical_or(k < 0, logical_and(u_shifted < 0.013, v > u_shifted));
    Array accept2 = s_ <= t_;
    Array accept = logical_or(accept1, logical_and(logical_not(reject), accept2));
    return C{std::get<0>(s) + 1, where(accept, k, std::get<1>(s)), logical_or(std::get<2>(s), accept), row(ks, 0)};
  };
  auto cond = [&](const C& s) {
    return logical_and(any(logical_not(std::get<2>(s))), std::get<0>(s) < cst(kInt32Max, DType::int32));
  };
  C init{cst(0, DType::int32), full(shape, -1, lam.dtype()), zeros(shape, DType::bool_), key};
  return std::get<1>(lax::while_loop(cond, body, init)).astype(dtype);
}

// --- binomial (JAX's: inversion and BTRS) ---

Array stirling_approx_tail(const Array& k_in) {
  static const std::vector<double> vals = {0.0810614667953272,  0.0413406959554092, 0.0276779256849983,
                                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                                           0.0118967099458917,  0.0104112652619720, 0.00925546218271273,
                                           0.00833056343336287};
  const DType d = k_in.dtype();
  Array table = array(vals).astype(d);
  Array use_tail_values = k_in <= 9;
  Array k = minimum(maximum(k_in, cst(0, d)), cst(9, d));  // lax.clamp(0, k, 9)
  Array kp1sq = (k + 1) * (k + 1);
  Array approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1);
  k = floor(k);
  return where(use_tail_values, take(table, k.astype(DType::int32)), approx);
}

Array binomial_inversion(const Array& key, const Array& count, const Array& prob, const Shape& shape, DType dtype) {
  Array log1minusprob = log1p(-prob);
  using C = std::tuple<Array, Array, Array, Array>;  // i, num_geom, geom_sum, key
  auto body = [&](const C& s) {
    Array ks = random::split(std::get<3>(s));  // subkey, key = split(key)
    const Array &num_geom = std::get<1>(s), &geom_sum = std::get<2>(s);
    Array num_geom_out = where(geom_sum <= count, num_geom + 1, num_geom);
    Array u = random::uniform(row(ks, 0), shape, prob.dtype());
    Array geom = ceil(log(u) / log1minusprob);
    return C{std::get<0>(s) + 1, num_geom_out, geom_sum + geom, row(ks, 1)};
  };
  auto cond = [&](const C& s) {
    return logical_and(any(std::get<2>(s) <= count), std::get<0>(s) < cst(kInt32Max, DType::int32));
  };
  C init{cst(0, DType::int32), zeros(shape, prob.dtype()), zeros(shape, prob.dtype()), key};
  Array k = std::get<1>(lax::while_loop(cond, body, init));
  return (k - 1).astype(dtype);
}

Array btrs(const Array& key, const Array& count, const Array& prob, const Shape& shape, DType dtype) {
  Array stddev = sqrt(count * prob * (1 - prob));
  Array b = 1.15 + 2.53 * stddev;
  Array a = -0.0873 + 0.0248 * b + 0.01 * prob;
  Array c = count * prob + 0.5;
  Array v_r = 0.92 - 4.2 / b;
  Array r = prob / (1 - prob);
  Array alpha = (2.83 + 5.1 / b) * stddev;
  Array m = floor((count + 1) * prob);
  using C = std::tuple<Array, Array, Array, Array>;  // i, k_out, accepted, key
  auto body = [&](const C& s) {
    Array ks = random::split(std::get<3>(s), 3);
    Array u = random::uniform(row(ks, 1), shape, prob.dtype());
    Array v = random::uniform(row(ks, 2), shape, prob.dtype());
    u = u - 0.5;
    Array us = 0.5 - abs(u);
    Array accept1 = logical_and(us >= 0.07, v <= v_r);
    Array k = floor((2 * a / us + b) * u + c);
    Array reject = logical_or(k < 0, k > count);
    v = log(v * alpha / (a / (us * us) + b));
    Array ub = (m + 0.5) * log((m + 1) / (r * (count - m + 1))) + (count + 1) * log((count - m + 1) / (count - k + 1)) +
               (k + 0.5) * log(r * (count - k + 1) / (k + 1)) + stirling_approx_tail(m) +
               stirling_approx_tail(count - m) - stirling_approx_tail(k) - stirling_approx_tail(count - k);
    Array accept2 = v <= ub;
    Array accept = logical_or(accept1, logical_and(logical_not(reject), accept2));
    return C{std::get<0>(s) + 1, where(accept, k, std::get<1>(s)), logical_or(std::get<2>(s), accept), row(ks, 0)};
  };
  auto cond = [&](const C& s) {
    return logical_and(any(logical_not(std::get<2>(s))), std::get<0>(s) < cst(kInt32Max, DType::int32));
  };
  C init{cst(0, DType::int32), full(shape, -1, prob.dtype()), zeros(shape, DType::bool_), key};
  return std::get<1>(lax::while_loop(cond, body, init)).astype(dtype);
}

// JAX's _binomial after promotion: count and prob of one float dtype, broadcast to shape.
Array binomial_(const Array& key, Array count, Array prob, const Shape& shape, DType dtype) {
  count = broadcast_to(count.astype(prob.dtype()), shape);
  prob = broadcast_to(prob, shape);
  Array p_lt_half = prob < 0.5;
  Array q = where(p_lt_half, prob, 1.0 - prob);
  Array count_nan_or_neg = logical_or(isnan(count), count < 0.0);
  Array count_inf = isinf_(count);
  Array q_is_nan = isnan(q);
  Array q_l_0 = q < 0.0;
  q = where(logical_or(q_is_nan, q_l_0), full_like(q, 0.01), q);
  Array use_inversion = logical_or(count_nan_or_neg, count * q <= 10.0);
  count = floor(count);
  Array count_inv = where(use_inversion, count, full_like(count, 0.0));
  Array count_btrs = where(use_inversion, full_like(count, 1e4), count);
  Array q_btrs = where(use_inversion, full_like(q, 0.5), q);
  Array samples = where(use_inversion, binomial_inversion(key, count_inv, q, shape, dtype),
                        btrs(key, count_btrs, q_btrs, shape, dtype));
  Array invalid = logical_or(logical_or(q_l_0, q_is_nan), count_nan_or_neg);
  samples = where(invalid, full_like(samples, NAN), samples);
  samples = where(logical_and(count_inf, logical_not(invalid)), full_like(samples, INFINITY), samples);
  return where(logical_or(logical_or(logical_or(p_lt_half, count_nan_or_neg), q_is_nan), count_inf), samples,
               count.astype(dtype) - samples);
}

// jnp.cumsum of a 1-D vector, added in sequence (lax.cumsum lowers to a reduce-window).
Array cumsum_1d(const Array& p) {
  auto r = lax::scan([](const Array& c, const Array& x) { Array s = c + x; return std::pair<Array, Array>{s, s}; },
                     zeros({}, p.dtype()), p);
  return r.second;
}

// jnp.searchsorted(a, v) (side "left", JAX's default method "scan"): a binary
// search of ceil(log2(n + 1)) halvings, the first index with v <= a[i].
Array searchsorted_left(const Array& a, const Array& v) {
  const std::int64_t n = a.shape()[0];
  const int levels = int(std::ceil(std::log2(double(n) + 1)));
  Array low = zeros(v.shape(), DType::int32), high = full(v.shape(), double(n), DType::int32);
  for (int l = 0; l < levels; ++l) {
    Array mid = floor_divide(low.astype(DType::uint32) + high.astype(DType::uint32), 2u).astype(DType::int32);
    Array go_left = v <= take(a, mid, std::nullopt, "clip");
    Array new_low = where(go_left, low, mid);
    high = where(go_left, mid, high);
    low = new_low;
  }
  return high;
}

// jax.random.choice; arr empty for an integer population.
Array choice_(const Array& key, const std::optional<Array>& arr, std::int64_t n_inputs, const Shape& shape, bool replace,
              const std::optional<Array>& p, int axis) {
  const std::int64_t n_draws = numel(shape);
  Shape out_shape = shape;
  if (arr) {
    const Shape& as = arr->shape();
    out_shape = Shape(as.begin(), as.begin() + axis);
    out_shape.insert(out_shape.end(), shape.begin(), shape.end());
    out_shape.insert(out_shape.end(), as.begin() + axis + 1, as.end());
  }
  Array ind;
  if (!p) {
    if (replace) {
      ind = random::randint(key, shape, 0, n_inputs);
    } else {
      // permutation(key, n or arr, axis)[:n_draws]: arr's rows follow arange's shuffle
      ind = random::permutation(key, n_inputs).index({slice(0, n_draws)});
    }
  } else {
    Array pa = *p;
    if (replace) {
      Array p_cuml = cumsum_1d(pa);
      Array total = p_cuml.index({n_inputs - 1});
      Array r = total * (1 - random::uniform(key, shape, p_cuml.dtype()));
      ind = searchsorted_left(p_cuml, r);
    } else {
      // the Gumbel top-k trick; top_k as a stable sort (ties: the lower index first)
      Array g = gumbel_(key, {n_inputs}, pa.dtype()) + log(pa);
      ind = argsort(-g).index({slice(0, n_draws)});
    }
  }
  Array result = arr ? take(*arr, ind, axis) : ind;
  return reshape(result, out_shape);
}

Array to_dtype_scalar(double v, DType dtype) { return full({}, v, dtype); }

}  // namespace

// --- the simple ones --------------------------------------------------------

Array exponential(const Array& key, const Shape& shape, DType dtype) {
  check_key("exponential", key);
  check_float("exponential", dtype);
  return staged("random.exponential", {key}, [=](const V& in) { return exponential_(in[0], shape, dtype); });
}

Array gumbel(const Array& key, const Shape& shape, DType dtype) {
  check_key("gumbel", key);
  check_float("gumbel", dtype);
  return staged("random.gumbel", {key}, [=](const V& in) { return gumbel_(in[0], shape, dtype); });
}

Array laplace(const Array& key, const Shape& shape, DType dtype) {
  check_key("laplace", key);
  check_float("laplace", dtype);
  return staged("random.laplace", {key}, [=](const V& in) {
    Array u = random::uniform(in[0], shape, dtype, -1. + epsneg(dtype), 1.);
    return sign(u) * log1p(-abs(u));
  });
}

Array logistic(const Array& key, const Shape& shape, DType dtype) {
  check_key("logistic", key);
  check_float("logistic", dtype);
  return staged("random.logistic", {key}, [=](const V& in) {
    Array x = random::uniform(in[0], shape, dtype, tiny(dtype), 1.);
    return log(x) - log1p(-x);
  });
}

Array cauchy(const Array& key, const Shape& shape, DType dtype) {
  check_key("cauchy", key);
  check_float("cauchy", dtype);
  return staged("random.cauchy", {key}, [=](const V& in) {
    Array u = random::uniform(in[0], shape, dtype, eps(dtype), 1.);
    return tan(cst(M_PI, dtype) * (u - cst(0.5, dtype)));
  });
}

Array rademacher(const Array& key, const Shape& shape, DType dtype) {
  check_key("rademacher", key);
  if (dtype == DType::bool_) throw TypeError("dtype argument to `rademacher` must be numeric, got bool");
  return staged("random.rademacher", {key}, [=](const V& in) {
    Array b = random::bernoulli(in[0], 0.5, shape).astype(dtype);
    return (2 * b - 1).astype(dtype);
  });
}

Array categorical(const Array& key, const Array& logits, int axis, std::optional<Shape> shape) {
  check_key("categorical", key);
  if (!is_float(logits.dtype()))
    throw TypeError(std::string("categorical: logits must be float32 or float64, got ") + dtype_name(logits.dtype()));
  const int nd = logits.ndim();
  if (nd == 0) throw ValueError("categorical: logits must have at least one dimension");
  if (axis < -nd || axis >= nd)
    throw ValueError("categorical: axis " + std::to_string(axis) + " is out of bounds for logits of shape " +
                     shape_str(logits.shape()));
  const int ax = axis < 0 ? axis + nd : axis;
  Shape batch_shape = logits.shape();
  batch_shape.erase(batch_shape.begin() + ax);
  Shape s = shape ? *shape : batch_shape;
  if (shape) check_shape("categorical", s, {batch_shape});
  const std::size_t nprefix = s.size() - batch_shape.size();
  Shape prefix(s.begin(), s.begin() + std::ptrdiff_t(nprefix));
  Shape logits_shape(s.begin() + std::ptrdiff_t(nprefix), s.end());
  logits_shape.insert(logits_shape.begin() + ax, logits.shape()[std::size_t(ax)]);
  Shape draw = prefix;
  draw.insert(draw.end(), logits_shape.begin(), logits_shape.end());
  const int neg_axis = ax - nd;
  return staged("random.categorical", {key, logits}, [=](const V& in) {
    std::vector<int> lead(nprefix);
    std::iota(lead.begin(), lead.end(), 0);
    Array l = nprefix ? expand_dims(in[1], Axes(lead)) : in[1];
    return argmax(gumbel_(in[0], draw, in[1].dtype()) + l, neg_axis);
  });
}

Array choice(const Array& key, std::int64_t n, const Shape& shape, bool replace, const std::optional<Array>& p,
             int axis) {
  check_key("choice", key);
  const std::int64_t n_draws = numel(shape);
  if (n_draws == 0) return zeros(shape, DType::int32);
  if (n <= 0) throw ValueError("a must be greater than 0 unless no samples are taken");
  if (!replace && n_draws > n)
    throw ValueError("Cannot take a larger sample (size " + std::to_string(n_draws) + ") than population (size " +
                     std::to_string(n) + ") when 'replace=False'");
  (void)axis;
  if (p) {
    if (p->shape() != Shape{n})
      throw ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. p has shape " +
                       shape_str(p->shape()) + " and a.shape[axis] is " + std::to_string(n) + ".");
    Array pf = is_float(p->dtype()) ? *p : p->astype(DType::float32);
    return staged("random.choice", {key, pf}, [=](const V& in) {
      return choice_(in[0], std::nullopt, n, shape, replace, in[1], 0);
    });
  }
  return staged("random.choice", {key}, [=](const V& in) {
    return choice_(in[0], std::nullopt, n, shape, replace, std::nullopt, 0);
  });
}

Array choice(const Array& key, const Array& a, const Shape& shape, bool replace, const std::optional<Array>& p,
             int axis) {
  check_key("choice", key);
  if (a.ndim() == 0) {
    if (a.is_tracer())
      throw ConcretizationError("choice: a 0-d `a` is a population size and must be concrete, got a traced " +
                                aval_str(a.dtype(), a.shape()));
    if (is_float(a.dtype())) throw TypeError("choice: a 0-d `a` must be an integer, got " + std::string(dtype_name(a.dtype())));
    return choice(key, a.item<std::int64_t>(), shape, replace, p, axis);
  }
  const int nd = a.ndim();
  if (axis < -nd || axis >= nd)
    throw ValueError("choice: axis " + std::to_string(axis) + " is out of bounds for a of shape " + shape_str(a.shape()));
  const int ax = axis < 0 ? axis + nd : axis;
  const std::int64_t n = a.shape()[std::size_t(ax)];
  const std::int64_t n_draws = numel(shape);
  if (n_draws == 0) return zeros(shape, a.dtype());
  if (n <= 0) throw ValueError("a must be greater than 0 unless no samples are taken");
  if (!replace && n_draws > n)
    throw ValueError("Cannot take a larger sample (size " + std::to_string(n_draws) + ") than population (size " +
                     std::to_string(n) + ") when 'replace=False'");
  if (p) {
    if (p->shape() != Shape{n})
      throw ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. p has shape " +
                       shape_str(p->shape()) + " and a.shape[axis] is " + std::to_string(n) + ".");
    Array pf = is_float(p->dtype()) ? *p : p->astype(DType::float32);
    return staged("random.choice", {key, a, pf}, [=](const V& in) {
      return choice_(in[0], in[1], n, shape, replace, in[2], ax);
    });
  }
  return staged("random.choice", {key, a}, [=](const V& in) {
    return choice_(in[0], in[1], n, shape, replace, std::nullopt, ax);
  });
}

// --- gamma and its family -----------------------------------------------------

Array gamma(const Array& key, const Array& a, std::optional<Shape> shape, DType dtype) {
  check_key("gamma", key);
  check_float("gamma", dtype);
  Shape s = resolve_shape("gamma", shape, {a.shape()});
  return staged("random.gamma", {key, a}, [=](const V& in) { return gamma_(in[0], in[1], s, dtype, false); });
}
Array gamma(const Array& key, double a, std::optional<Shape> shape, DType dtype) {
  return gamma(key, to_dtype_scalar(a, dtype), std::move(shape), dtype);
}

Array loggamma(const Array& key, const Array& a, std::optional<Shape> shape, DType dtype) {
  check_key("loggamma", key);
  check_float("loggamma", dtype);
  Shape s = resolve_shape("loggamma", shape, {a.shape()});
  return staged("random.loggamma", {key, a}, [=](const V& in) { return gamma_(in[0], in[1], s, dtype, true); });
}
Array loggamma(const Array& key, double a, std::optional<Shape> shape, DType dtype) {
  return loggamma(key, to_dtype_scalar(a, dtype), std::move(shape), dtype);
}

Array beta(const Array& key, const Array& a, const Array& b, std::optional<Shape> shape, DType dtype) {
  check_key("beta", key);
  check_float("beta", dtype);
  Shape s = resolve_shape("beta", shape, {a.shape(), b.shape()});
  return staged("random.beta", {key, a, b}, [=](const V& in) {
    Array ks = random::split(in[0]);
    Array aa = broadcast_to(in[1].astype(dtype), s), bb = broadcast_to(in[2].astype(dtype), s);
    Array log_gamma_a = gamma_(row(ks, 0), aa, s, dtype, true);
    Array log_gamma_b = gamma_(row(ks, 1), bb, s, dtype, true);
    // gamma_a / (gamma_a + gamma_b) without losing precision
    Array log_max = maximum(log_gamma_a, log_gamma_b);
    Array gamma_a_scaled = exp(log_gamma_a - log_max);
    Array gamma_b_scaled = exp(log_gamma_b - log_max);
    return gamma_a_scaled / (gamma_a_scaled + gamma_b_scaled);
  });
}
Array beta(const Array& key, double a, double b, std::optional<Shape> shape, DType dtype) {
  return beta(key, to_dtype_scalar(a, dtype), to_dtype_scalar(b, dtype), std::move(shape), dtype);
}

Array dirichlet(const Array& key, const Array& alpha, std::optional<Shape> shape, DType dtype) {
  check_key("dirichlet", key);
  check_float("dirichlet", dtype);
  if (alpha.ndim() < 1)
    throw ValueError("dirichlet requires alpha.ndim >= 1, got alpha.ndim == " + std::to_string(alpha.ndim()));
  Shape batch(alpha.shape().begin(), alpha.shape().end() - 1);
  Shape s = shape ? *shape : batch;
  if (shape) check_shape("dirichlet", s, {batch});
  s.push_back(alpha.shape().back());
  return staged("random.dirichlet", {key, alpha}, [=](const V& in) {
    // in log space: small alpha would underflow otherwise
    Array log_gamma_samples = gamma_(in[0], in[1].astype(dtype), s, dtype, true);
    return softmax_(log_gamma_samples, -1);
  });
}

Array t(const Array& key, const Array& df, std::optional<Shape> shape, DType dtype) {
  check_key("t", key);
  check_float("t", dtype);
  Shape s = resolve_shape("t", shape, {df.shape()});
  return staged("random.t", {key, df}, [=](const V& in) {
    Array d = in[1].astype(dtype);
    Array ks = random::split(in[0]);
    Array n = random::normal(row(ks, 0), s, dtype);
    Array half_df = d / cst(2, dtype);
    Array g = gamma_(row(ks, 1), half_df, s, dtype, false);
    return n * sqrt(half_df / g);
  });
}
Array t(const Array& key, double df, std::optional<Shape> shape, DType dtype) {
  return t(key, to_dtype_scalar(df, dtype), std::move(shape), dtype);
}

Array poisson(const Array& key, const Array& lam, std::optional<Shape> shape, DType dtype) {
  check_key("poisson", key);
  if (dtype != DType::int32 && dtype != DType::int64 && dtype != DType::uint32)
    throw TypeError(std::string("dtype argument to `poisson` must be an integer dtype, got ") + dtype_name(dtype));
  Shape s = shape ? *shape : lam.shape();
  if (shape) check_shape("poisson", s, {lam.shape()});
  return staged("random.poisson", {key, lam}, [=](const V& in) {
    Array l = broadcast_to(in[1], s).astype(DType::float32);
    Array use_knuth = logical_or(isnan(l), l < 10);
    Array lam_knuth = where(use_knuth, l, full_like(l, 0.0));
    // the rejection sampler's acceptance maxes out at 89% as lam grows: any large value will do
    Array lam_rejection = where(use_knuth, full_like(l, 1e5), l);
    Array result = where(use_knuth, poisson_knuth(in[0], lam_knuth, s, dtype),
                         poisson_rejection(in[0], lam_rejection, s, dtype));
    return where(l == 0, zeros_like(result), result);
  });
}
Array poisson(const Array& key, double lam, std::optional<Shape> shape, DType dtype) {
  return poisson(key, to_dtype_scalar(lam, DType::float32), std::move(shape), dtype);
}

Array binomial(const Array& key, const Array& n, const Array& p, std::optional<Shape> shape, DType dtype) {
  check_key("binomial", key);
  check_float("binomial", dtype);
  Shape s = resolve_shape("binomial", shape, {n.shape(), p.shape()});
  return staged("random.binomial", {key, n, p}, [=](const V& in) {
    Array prob = is_float(in[2].dtype()) ? in[2] : in[2].astype(DType::float32);  // promote_dtypes_inexact
    return binomial_(in[0], in[1], prob, s, dtype);
  });
}
Array binomial(const Array& key, double n, double p, std::optional<Shape> shape, DType dtype) {
  return binomial(key, to_dtype_scalar(n, dtype), to_dtype_scalar(p, dtype), std::move(shape), dtype);
}

// --- multivariate normal and orthogonal --------------------------------------

Array multivariate_normal(const Array& key, const Array& mean, const Array& cov, std::optional<Shape> shape,
                          std::optional<DType> dtype, const std::string& method) {
  check_key("multivariate_normal", key);
  if (method != "svd" && method != "eigh" && method != "cholesky")
    throw ValueError("method must be one of {'svd', 'eigh', 'cholesky'}, got '" + method + "'");
  // promote_dtypes_inexact(mean, cov)
  const DType common =
      mean.dtype() == DType::float64 || cov.dtype() == DType::float64 ? DType::float64 : DType::float32;
  if (is_complex(mean.dtype()))
    throw TypeError("multivariate_normal: mean must be real, got " + std::string(dtype_name(mean.dtype())));
  if (is_complex(cov.dtype()))
    throw TypeError("multivariate_normal: cov must be real, got " + std::string(dtype_name(cov.dtype())));
  const DType dt = dtype ? *dtype : common;
  check_float("multivariate_normal", dt);
  if (mean.ndim() < 1)
    throw ValueError("multivariate_normal requires mean.ndim >= 1, got mean.ndim == " + std::to_string(mean.ndim()));
  if (cov.ndim() < 2)
    throw ValueError("multivariate_normal requires cov.ndim >= 2, got cov.ndim == " + std::to_string(cov.ndim()));
  const std::int64_t n = mean.shape().back();
  const Shape& cs = cov.shape();
  if (cs[cs.size() - 2] != n || cs.back() != n)
    throw ValueError("multivariate_normal requires cov.shape == (..., n, n) for n=" + std::to_string(n) +
                     ", but got cov.shape == " + shape_str(cs) + ".");
  Shape mb(mean.shape().begin(), mean.shape().end() - 1), cb(cs.begin(), cs.end() - 2);
  Shape s = shape ? *shape : broadcast_all({mb, cb}, "multivariate_normal");
  if (shape) check_shape("normal", s, {mb, cb});
  Shape draw = s;
  draw.push_back(n);
  return staged("random.multivariate_normal", {key, mean, cov}, [=](const V& in) {
    Array m = in[1].astype(common), c = in[2].astype(common);
    Array factor;
    if (method == "svd") {
      auto r = linalg::svd(c);
      factor = r.u * expand_dims(sqrt(r.s), -2);
    } else if (method == "eigh") {
      auto r = linalg::eigh(c);
      factor = r.eigenvectors * expand_dims(sqrt(r.eigenvalues), -2);
    } else {
      factor = linalg::cholesky(c);
    }
    Array z = random::normal(in[0], draw, dt);
    // einsum('...ij,...j->...i', factor, z)
    return m + sum(factor * expand_dims(z, -2), -1);
  });
}

Array orthogonal(const Array& key, std::int64_t n, const Shape& shape, DType dtype, std::optional<std::int64_t> m_opt) {
  check_key("orthogonal", key);
  check_float("orthogonal", dtype);
  const std::int64_t m = m_opt ? *m_opt : n;
  if (n < 0 || m < 0) throw ValueError("orthogonal: n and m must be nonnegative");
  Shape draw = shape;
  draw.push_back(std::max(n, m));
  draw.push_back(std::min(n, m));
  const std::int64_t k = std::min(n, m);
  return staged("random.orthogonal", {key}, [=](const V& in) {
    Array z = random::normal(in[0], draw, dtype);
    auto qr = linalg::qr(z);
    Array d = sum(qr.r * eye(k, std::nullopt, 0, dtype), -1);  // the diagonal of r
    Array x = qr.q * expand_dims(sign(d), -2);
    return n < m ? swapaxes(x, -1, -2) : x;
  });
}

}  // namespace tessel::random
