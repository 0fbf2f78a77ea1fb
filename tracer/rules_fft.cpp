// Rules of the fft primitive (attr::Fft): a discrete Fourier transform over
// any set of axes, run by FFTW (codegen/fft.cpp).
//
// Reference kernel: the transform along each axis in turn (the DFT is
// separable), each a direct O(n^2) sum in long double.
// Derivatives: linear. Under JAX's pairing Re(w z) the DFT matrix is
// symmetric, so fft^T = fft and ifft^T = ifft; rfft^T(c) = Re(fft(c padded
// to n)) (JAX transposes a naive rfft the same way); irfft^T(c) =
// conj(mask * rfft(c)), mask 1 at the zero (and even n's Nyquist) entry and
// 2 elsewhere (JAX's rule, unnormalised).
// Sharding: every dim is a factor of operand and result (the last axis of an
// rfft/irfft, whose sizes differ, shares one factor: a split of the real
// axis carries to the half spectrum, padded where uneven). A transformed
// axis that is split is handled by the partition rule: its split moves to
// another dim by one all-to-all, the axis is transformed locally, and the
// result moves back (pencil decomposition), never gathering the array.
#include <cmath>
#include <complex>
#include <algorithm>
#include <numbers>

#include "tracer/build.hpp"
#include "tracer/complex_build.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel {

using detail::cat;
using rule_util::avals_str;
using rule_util::expect_arity;

namespace {

using LC = std::complex<long double>;

bool is_real_kind(attr::FftKind k) { return k == attr::FftKind::rfft || k == attr::FftKind::irfft; }

std::vector<std::int64_t> normalized_axes(const attr::Fft& p, std::int64_t rank, const std::vector<Aval>& in) {
  std::vector<std::int64_t> ax = p.axes;
  if (ax.empty()) throw InternalError("fft over no axes");
  std::vector<bool> seen(size_t(rank), false);
  for (auto a : ax) {
    if (a < 0 || a >= rank || seen[size_t(a)])
      throw ShapeError(cat("fft axes out of range or repeated for ", avals_str(in)));
    seen[size_t(a)] = true;
  }
  return ax;
}

// x (complex, long double) transformed along axis a in place: sign -1 forward, +1 inverse.
void dft_axis(std::vector<LC>& x, const Shape& s, std::int64_t a, int sign) {
  const std::int64_t n = s[size_t(a)];
  if (n == 0) return;
  const auto st = row_major_strides(s);
  const std::int64_t stride = st[size_t(a)];
  std::vector<LC> w(static_cast<size_t>(n)), line(static_cast<size_t>(n));
  const long double pi = std::numbers::pi_v<long double>;
  for (std::int64_t k = 0; k < n; ++k) w[size_t(k)] = std::polar(1.0L, sign * 2 * pi * k / n);
  for (std::int64_t base = 0; base < numel(s); ++base) {
    if ((base / stride) % n != 0) continue;  // one line per start
    for (std::int64_t k = 0; k < n; ++k) {
      LC acc = 0;
      for (std::int64_t j = 0; j < n; ++j) acc += x[size_t(base + j * stride)] * w[size_t((j * k) % n)];
      line[size_t(k)] = acc;
    }
    for (std::int64_t k = 0; k < n; ++k) x[size_t(base + k * stride)] = line[size_t(k)];
  }
}

std::vector<LC> to_lc(const HostArray& h) {
  std::vector<LC> v(size_t(numel(h.shape)));
  for (std::int64_t i = 0; i < numel(h.shape); ++i) {
    auto z = h.as_complex(i);
    v[size_t(i)] = LC(z.real(), z.imag());
  }
  return v;
}

// v into out's dtype (a real dtype keeps the real parts).
void from_lc(const std::vector<LC>& v, HostArray& out) {
  visit_wide_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = reinterpret_cast<T*>(out.bytes.data());
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (is_complex_v<T>) o[i] = T(typename T::value_type(v[i].real()), typename T::value_type(v[i].imag()));
      else if constexpr (std::is_floating_point_v<T>) o[i] = T(v[i].real());
    }
  });
}

NodeRef pad_axis(NodeTable& t, const NodeRef& x, std::int64_t axis, std::int64_t to) {
  std::vector<std::int64_t> lo(size_t(x->rank()), 0), hi(size_t(x->rank()), 0);
  hi[size_t(axis)] = to - x->shape()[size_t(axis)];
  return build::pad(t, x, build::scalar(t, x->dtype(), 0), lo, hi);
}

}  // namespace

Aval Rule<Op::fft>::infer(const std::vector<Aval>& in, const A& p, const Aval&) {
  expect_arity(Op::fft, in, 1);
  const Aval& x = in[0];
  auto ax = normalized_axes(p, std::int64_t(x.shape.size()), in);
  Aval out = x;
  out.weak_type = false;
  const std::int64_t last = ax.back();
  switch (p.kind) {
    case attr::FftKind::fft:
    case attr::FftKind::ifft:
      if (!is_complex(x.dtype)) throw TypeError(cat("fft requires a complex operand, got ", avals_str(in)));
      break;
    case attr::FftKind::rfft:
      if (!is_floating(x.dtype) || is_narrow_float(x.dtype))
        throw TypeError(cat("rfft requires a float32 or float64 operand, got ", avals_str(in)));
      out.dtype = complex_dtype(x.dtype);
      out.shape[size_t(last)] = x.shape[size_t(last)] / 2 + 1;
      break;
    case attr::FftKind::irfft:
      if (!is_complex(x.dtype)) throw TypeError(cat("irfft requires a complex operand, got ", avals_str(in)));
      if (p.n < 0 || x.shape[size_t(last)] != p.n / 2 + 1)
        throw ShapeError(cat("irfft to ", p.n, " entries needs ", p.n / 2 + 1, " along axis ", last, ", got ", avals_str(in)));
      out.dtype = real_dtype(x.dtype);
      out.shape[size_t(last)] = p.n;
      break;
  }
  return out;
}

void Rule<Op::fft>::eval(const std::vector<const HostArray*>& in, const A& p, const Aval& aval, HostArray& out) {
  rule_util::allocate(out, aval);
  const HostArray& x = *in[0];
  std::vector<LC> v = to_lc(x);
  const std::int64_t last = p.axes.back();
  Shape s = x.shape;
  if (p.kind == attr::FftKind::irfft) {
    // The last axis's full Hermitian spectrum, X[n - k] = conj(X[k]), without
    // the imaginary parts of the zero and Nyquist entries (c2r ignores them).
    Shape full = s;
    full[size_t(last)] = p.n;
    std::vector<LC> f(size_t(numel(full)));
    const auto fs = row_major_strides(full), xs = row_major_strides(s);
    for (std::int64_t i = 0; i < numel(full); ++i) {
      std::int64_t rem = i, src = 0, k = 0;
      for (size_t d = 0; d < full.size(); ++d) {
        const std::int64_t c = rem / fs[d];
        rem %= fs[d];
        if (std::int64_t(d) == last) k = c;
        else src += c * xs[d];
      }
      const std::int64_t m = s[size_t(last)];
      if (k == 0 || (p.n % 2 == 0 && k == p.n / 2)) f[size_t(i)] = v[size_t(src + k * xs[size_t(last)])].real();
      else if (k < m) f[size_t(i)] = v[size_t(src + k * xs[size_t(last)])];
      else f[size_t(i)] = std::conj(v[size_t(src + (p.n - k) * xs[size_t(last)])]);
    }
    v = std::move(f);
    s = full;
  }
  const int sign = p.kind == attr::FftKind::fft || p.kind == attr::FftKind::rfft ? -1 : 1;
  for (auto a : p.axes) dft_axis(v, s, a, sign);
  if (p.kind == attr::FftKind::rfft) {
    // keep n/2 + 1 entries of the last axis
    const auto vs = row_major_strides(s), os = row_major_strides(aval.shape);
    std::vector<LC> kept(size_t(numel(aval.shape)));
    for (std::int64_t i = 0; i < numel(aval.shape); ++i) {
      std::int64_t rem = i, src = 0;
      for (size_t d = 0; d < aval.shape.size(); ++d) {
        src += (rem / os[d]) * vs[d];
        rem %= os[d];
      }
      kept[size_t(i)] = v[size_t(src)];
    }
    v = std::move(kept);
  }
  from_lc(v, out);
}

FactorRule Rule<Op::fft>::factors(const Node& n) {
  FactorRule r;
  const auto& p = attrs_of(n);
  const Shape &s = n.in[0]->shape(), &o = n.shape();
  std::vector<std::vector<int>> op, res;
  for (int d = 0; d < int(s.size()); ++d) {
    if (is_real_kind(p.kind) && d == p.axes.back()) {
      // The real axis and its half spectrum differ in size but share their
      // split (the partition rule moves it off the axis for the
      // real-to-complex step); the smaller size bounds how far it splits.
      const std::int64_t f = r.add_factor(std::min(s[size_t(d)], o[size_t(d)]));
      op.push_back({int(f)});
      res.push_back({int(f)});
    } else {
      int f = r.add_factor(s[size_t(d)]);
      op.push_back({f});
      res.push_back({f});
    }
  }
  r.operands = {op};
  r.result = res;
  return r;
}

NodeRef Rule<Op::fft>::jvp(NodeTable& t, const Node& n, const std::vector<NodeRef>&, const std::vector<NodeRef>& tx,
                           const NodeRef&) {
  return tx[0] ? build::fft(t, tx[0], attrs_of(n)) : nullptr;
}

void Rule<Op::fft>::transpose(NodeTable& t, const Node& n, const NodeRef& ct, const std::vector<bool>&,
                              std::vector<NodeRef>& cts) {
  const auto& p = attrs_of(n);
  const std::int64_t last = p.axes.back();
  switch (p.kind) {
    case attr::FftKind::fft:
    case attr::FftKind::ifft: cts[0] = build::fft(t, ct, p); break;
    case attr::FftKind::rfft: {
      attr::Fft f = p;
      f.kind = attr::FftKind::fft;
      NodeRef full = pad_axis(t, ct, last, n.in[0]->shape()[size_t(last)]);
      cts[0] = build::unary(t, Op::real, build::fft(t, full, f));
      break;
    }
    case attr::FftKind::irfft: {
      attr::Fft f = p;
      f.kind = attr::FftKind::rfft;
      f.n = 0;
      NodeRef x = build::fft(t, ct, f);
      const std::int64_t m = x->shape()[size_t(last)];
      // mask: 1 at entry 0 (and at n/2 for even n), 2 elsewhere
      NodeRef k = build::iota(t, DType::int32, x->shape(), last);
      NodeRef one = build::binary(t, Op::eq, k, ad::scalar_like(t, k, 0));
      if (p.n % 2 == 0) one = build::binary(t, Op::or_, one, build::binary(t, Op::eq, k, ad::scalar_like(t, k, double(m - 1))));
      NodeRef mask = build::select(t, one, ad::scalar_like(t, x, 1), ad::scalar_like(t, x, 2));
      cts[0] = build::unary(t, Op::conj, build::binary(t, Op::mul, mask, x));
      break;
    }
  }
}

NodeRef Rule<Op::fft>::batch(NodeTable& t, const Node& n, const std::vector<NodeRef>& x, const std::vector<bool>&,
                             const BatchInfo&) {
  attr::Fft p = attrs_of(n);
  for (auto& a : p.axes) ++a;
  return build::fft(t, x[0], p);
}

namespace {
// Whether `to` is `from` with mesh axes moved from the minor end of one dim
// to the minor end of another (one all-to-all over them).
bool one_move(const AxisSharding& from, const AxisSharding& to) {
  auto prefix = [](const std::vector<int>& a, const std::vector<int>& b) {
    return a.size() < b.size() && std::equal(a.begin(), a.end(), b.begin());
  };
  int src = -1, dst = -1;
  for (size_t d = 0; d < from.dims.size(); ++d) {
    const auto &F = from.dims[d], &T = to.dims[d];
    if (F == T) continue;
    if (prefix(T, F) && src < 0) src = int(d);
    else if (prefix(F, T) && dst < 0) dst = int(d);
    else return false;
  }
  if (src < 0 || dst < 0) return false;
  const auto &S = from.dims[size_t(src)], &D = to.dims[size_t(dst)];
  const size_t k = S.size() - to.dims[size_t(src)].size();
  return k == D.size() - from.dims[size_t(dst)].size() && std::equal(S.end() - std::ptrdiff_t(k), S.end(), D.end() - std::ptrdiff_t(k));
}
}  // namespace

// Pencils: a transformed axis that is split has its mesh axes moved to
// another dim (one all-to-all over them: preferring dims not waiting for a
// transform, then the largest), is transformed locally, and at the end
// the moves are undone (or one move reaches the natural layout directly).
// A split real axis (rfft's input, irfft's half spectrum) first moves off
// it. rfft's real-to-complex step then runs over the axes that are whole;
// irfft's complex-to-real step runs last, over its last axis alone, and its
// result moves to the natural layout (the split back on the real axis).
NodeRef Rule<Op::fft>::local(LocalBuilder& b, const Node& n, const std::vector<NodeRef>& ops,
                             const std::vector<AxisSharding>& op_sh, const AxisSharding& natural) {
  const auto& p = attrs_of(n);
  NodeTable& t = b.table();
  AxisSharding cur = op_sh[0];
  NodeRef x = ops[0];
  Shape G = n.in[0]->shape();  // the global shape of the value x holds
  const std::int64_t last = p.axes.back();
  const bool real = is_real_kind(p.kind);
  auto transformed = [&](int d) { return std::find(p.axes.begin(), p.axes.end(), std::int64_t(d)) != p.axes.end(); };
  // Where a mesh axis leaving dim `a` goes: a dim not transformed if any,
  // else the largest; -1 for a 1-D array (the axis is then gathered).
  auto destination = [&](int a, const std::vector<bool>& pending) {
    int dst = -1;
    for (int d = 0; d < int(G.size()); ++d) {
      // rfft's last axis is complex once its real-to-complex step ran,
      // irfft's until its last step: both may hold a moved split meanwhile.
      if (d == a) continue;
      auto better = [&](int e) {
        if (dst < 0) return true;
        if (pending[size_t(e)] != pending[size_t(dst)]) return !pending[size_t(e)];
        return G[size_t(e)] > G[size_t(dst)];
      };
      if (better(d)) dst = d;
    }
    return dst;
  };
  std::vector<AxisSharding> trail{cur};
  // All of dim a's mesh axes move at once: one all-to-all over them.
  auto move_off = [&](int a, const std::vector<bool>& pending) {
    if (cur.dims[size_t(a)].empty()) return;
    const int dst = destination(a, pending);
    AxisSharding to = cur;
    if (dst >= 0) to.dims[size_t(dst)].insert(to.dims[size_t(dst)].end(), cur.dims[size_t(a)].begin(), cur.dims[size_t(a)].end());
    to.dims[size_t(a)].clear();
    x = b.reshard(x, G, cur, to);
    cur = to;
    trail.push_back(cur);
  };
  // The real axis must be whole for the real-to-complex (or complex-to-real)
  // step: its split (carried by the shared factor) moves off it first.
  if (real && !cur.dims[size_t(last)].empty()) {
    std::vector<bool> other(G.size(), false);
    for (int d = 0; d < int(G.size()); ++d) other[size_t(d)] = transformed(d);
    move_off(int(last), other);
    trail = {cur};
  }
  const AxisSharding moved = cur;  // irfft's layout for its last step
  std::vector<std::int64_t> split, unsplit;
  for (auto a : p.axes) (cur.dims[size_t(a)].empty() ? unsplit : split).push_back(a);
  if (split.empty() && cur.dims == op_sh[0].dims) return build::with_operands(t, n, ops);
  attr::Fft c2c = p;
  c2c.kind = p.kind == attr::FftKind::irfft || p.kind == attr::FftKind::ifft ? attr::FftKind::ifft : attr::FftKind::fft;
  c2c.n = 0;
  auto apply = [&](attr::Fft how, std::vector<std::int64_t> axes) {
    if (axes.empty()) return;
    how.axes = std::move(axes);
    x = build::fft(t, x, how);
  };
  if (p.kind == attr::FftKind::rfft) {
    apply(p, unsplit);  // holds the last axis
    G = n.shape();
  } else if (p.kind == attr::FftKind::ifft || p.kind == attr::FftKind::fft) {
    apply(c2c, unsplit);
  } else {
    std::vector<std::int64_t> whole;
    for (auto a : unsplit)
      if (a != last) whole.push_back(a);
    apply(c2c, whole);
  }
  std::vector<bool> pending(G.size(), false);
  for (auto a : split) pending[size_t(a)] = true;
  for (auto a : split) {
    move_off(int(a), pending);
    apply(c2c, {a});
    pending[size_t(a)] = false;
  }
  // Back to the input's layout (for irfft: before its complex-to-real step).
  const AxisSharding& home = p.kind == attr::FftKind::irfft ? moved : natural;
  while (cur.dims != home.dims) {
    if (one_move(cur, home) || trail.size() < 2) {
      x = b.reshard(x, G, cur, home);
      cur = home;
      break;
    }
    trail.pop_back();
    x = b.reshard(x, G, cur, trail.back());
    cur = trail.back();
  }
  if (p.kind == attr::FftKind::irfft) {
    attr::Fft r = p;
    apply(r, {last});
    G = n.shape();
    x = b.reshard(x, G, cur, natural);
  }
  return x;
}

// ------------------------------------------------------------------ complex expansion, cost

// FFTW reads and writes the packed arrays as they are (codegen/fft.cpp).
NodeRef Rule<Op::fft>::expand_complex(ComplexBuilder& b, const Node& n, const std::vector<NodeRef>& ops) {
  return b.table().make(Op::fft, {ops[0]}, packed_aval(n.aval), n.attrs);
}
TESSEL_COST(fft, memory_cost)

}  // namespace tessel
