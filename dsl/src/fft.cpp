// ts::fft: jnp.fft's functions over the fft primitive (tracer/rules_fft.cpp).
#include <tessel/fft.hpp>

#include <cmath>

#include <tessel/creation.hpp>
#include <tessel/ops.hpp>

#include "dsl/src/compose.hpp"
#include "dsl/src/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::fft {

using detail::cat;
namespace c = detail::compose;
using NR = std::vector<NodeRef>;
using attr::FftKind;

namespace {

double norm_factor(const std::string& norm, double n, bool inverse, const char* name) {
  if (norm == "backward") return inverse ? 1.0 / n : 1.0;
  if (norm == "ortho") return 1.0 / std::sqrt(n);
  if (norm == "forward") return inverse ? 1.0 : 1.0 / n;
  throw ValueError(cat(name, ": invalid norm value '", norm, "'; should be \"backward\", \"ortho\" or \"forward\""));
}

std::vector<std::int64_t> norm_axes(const char* name, const std::vector<int>& axes, std::int64_t rank) {
  std::vector<std::int64_t> out;
  for (int a : axes) {
    const std::int64_t k = a < 0 ? a + rank : a;
    if (k < 0 || k >= rank) throw ValueError(cat(name, ": axis ", a, " is out of bounds for an array of rank ", rank));
    for (auto o : out)
      if (o == k) throw ValueError(cat(name, ": repeated axis ", a));
    out.push_back(k);
  }
  return out;
}

// x cropped or zero-padded to `size` along `axis`.
NodeRef resize(NodeTable& t, NodeRef x, std::int64_t axis, std::int64_t size, const char* name) {
  if (size < 1) throw ValueError(cat(name, ": invalid number of data points (", size, ") specified"));
  const std::int64_t cur = x->shape()[size_t(axis)];
  if (size == cur) return x;
  const int r = x->rank();
  if (size < cur) {
    std::vector<std::int64_t> lo(size_t(r), 0), hi = x->shape();
    hi[size_t(axis)] = size;
    return build::slice(t, x, lo, hi);
  }
  std::vector<std::int64_t> lo(size_t(r), 0), hi(size_t(r), 0);
  hi[size_t(axis)] = size - cur;
  return build::pad(t, x, build::scalar(t, x->dtype(), 0), lo, hi);
}

NodeRef scale(NodeTable& t, const NodeRef& x, double f) {
  if (f == 1.0) return x;
  return build::binary(t, Op::mul, x, c::full_like(t, x, f));
}

// The one implementation: kind over axes (already normalised), with the
// logical lengths `s` (one per axis, or empty: the input's; for irfft the
// output lengths).
Array transform(const char* name, FftKind kind, const Array& a, std::vector<int> axes_in, const Sizes& s_in,
                const std::string& norm) {
  return detail::apply1(name, {a}, [&](NodeTable& t, const NR& in) {
    NodeRef x = c::to_inexact(t, in[0]);
    const std::int64_t rank = x->rank();
    if (rank == 0) throw ValueError(cat(name, " needs an array of rank at least 1, got ", x->aval.str()));
    auto axes = norm_axes(name, axes_in, rank);
    if (axes.empty()) return x;
    if (s_in && s_in->size() != axes.size())
      throw ValueError(cat(name, ": ", s_in->size(), " lengths for ", axes.size(), " axes"));
    if (kind == FftKind::rfft) {
      if (is_complex(x->dtype())) throw TypeError(cat(name, " requires real input, got ", x->aval.str()));
      // 16- and 8-bit floats transform in float32 (complex64 results, as jnp.fft's).
      if (is_narrow_float(x->dtype())) x = c::cast(t, x, DType::float32, false);
    } else if (!is_complex(x->dtype())) {
      x = c::cast(t, x, complex_dtype(x->dtype()), false);
    }
    std::vector<std::int64_t> n(axes.size());
    for (size_t i = 0; i < axes.size(); ++i) n[i] = s_in ? (*s_in)[i] : x->shape()[size_t(axes[i])];
    if (kind == FftKind::irfft && !s_in) n.back() = 2 * (x->shape()[size_t(axes.back())] - 1);
    for (size_t i = 0; i < axes.size(); ++i) {
      const bool last_of_irfft = kind == FftKind::irfft && i + 1 == axes.size();
      if (last_of_irfft && n[i] < 1) throw ValueError(cat(name, ": invalid number of data points (", n[i], ") specified"));
      x = resize(t, x, axes[i], last_of_irfft ? n[i] / 2 + 1 : n[i], name);
    }
    double total = 1;
    for (auto v : n) total *= double(v);
    attr::Fft how{kind, axes, kind == FftKind::irfft ? n.back() : 0};
    NodeRef y = build::fft(t, x, how);
    const bool inverse = kind == FftKind::ifft || kind == FftKind::irfft;
    return scale(t, y, norm_factor(norm, total, inverse, name));
  });
}

std::vector<int> all_axes(const Array& a, const Sizes& s, const Axes& axes) {
  if (axes) return *axes;
  std::vector<int> r;
  const int rank = a.ndim();
  const int k = s ? int(s->size()) : rank;
  for (int i = rank - k; i < rank; ++i) r.push_back(i);
  return r;
}

Array shift(const char* name, const Array& x, const Axes& axes_in, bool inverse) {
  std::vector<int> axes = axes_in ? *axes_in : std::vector<int>{};
  if (!axes_in)
    for (int i = 0; i < x.ndim(); ++i) axes.push_back(i);
  return detail::apply1(name, {x}, [&](NodeTable& t, const NR& in) {
    NodeRef y = in[0];
    for (auto a : norm_axes(name, axes, y->rank())) {
      const std::int64_t n = y->shape()[size_t(a)];
      if (n < 2) continue;
      const std::int64_t k = inverse ? n - n / 2 : n / 2;  // roll right by k: the last k entries first
      std::vector<std::int64_t> lo(size_t(y->rank()), 0), mid = y->shape(), hi = y->shape();
      mid[size_t(a)] = n - k;
      std::vector<std::int64_t> lo2(size_t(y->rank()), 0);
      lo2[size_t(a)] = n - k;
      y = build::concatenate(t, {build::slice(t, y, lo2, hi), build::slice(t, y, lo, mid)}, a);
    }
    return y;
  });
}

}  // namespace

Array fft(const Array& a, std::optional<std::int64_t> n, int axis, const std::string& norm) {
  return transform("tessel.fft.fft", FftKind::fft, a, {axis}, n ? Sizes(std::vector<std::int64_t>{*n}) : std::nullopt, norm);
}
Array ifft(const Array& a, std::optional<std::int64_t> n, int axis, const std::string& norm) {
  return transform("tessel.fft.ifft", FftKind::ifft, a, {axis}, n ? Sizes(std::vector<std::int64_t>{*n}) : std::nullopt, norm);
}
Array rfft(const Array& a, std::optional<std::int64_t> n, int axis, const std::string& norm) {
  return transform("tessel.fft.rfft", FftKind::rfft, a, {axis}, n ? Sizes(std::vector<std::int64_t>{*n}) : std::nullopt, norm);
}
Array irfft(const Array& a, std::optional<std::int64_t> n, int axis, const std::string& norm) {
  return transform("tessel.fft.irfft", FftKind::irfft, a, {axis}, n ? Sizes(std::vector<std::int64_t>{*n}) : std::nullopt,
                   norm);
}
Array fft2(const Array& a, const Sizes& s, const std::vector<int>& axes, const std::string& norm) {
  return transform("tessel.fft.fft2", FftKind::fft, a, axes, s, norm);
}
Array ifft2(const Array& a, const Sizes& s, const std::vector<int>& axes, const std::string& norm) {
  return transform("tessel.fft.ifft2", FftKind::ifft, a, axes, s, norm);
}
Array rfft2(const Array& a, const Sizes& s, const std::vector<int>& axes, const std::string& norm) {
  return transform("tessel.fft.rfft2", FftKind::rfft, a, axes, s, norm);
}
Array irfft2(const Array& a, const Sizes& s, const std::vector<int>& axes, const std::string& norm) {
  return transform("tessel.fft.irfft2", FftKind::irfft, a, axes, s, norm);
}
Array fftn(const Array& a, const Sizes& s, const Axes& axes, const std::string& norm) {
  return transform("tessel.fft.fftn", FftKind::fft, a, all_axes(a, s, axes), s, norm);
}
Array ifftn(const Array& a, const Sizes& s, const Axes& axes, const std::string& norm) {
  return transform("tessel.fft.ifftn", FftKind::ifft, a, all_axes(a, s, axes), s, norm);
}
Array rfftn(const Array& a, const Sizes& s, const Axes& axes, const std::string& norm) {
  return transform("tessel.fft.rfftn", FftKind::rfft, a, all_axes(a, s, axes), s, norm);
}
Array irfftn(const Array& a, const Sizes& s, const Axes& axes, const std::string& norm) {
  return transform("tessel.fft.irfftn", FftKind::irfft, a, all_axes(a, s, axes), s, norm);
}

Array fftfreq(std::int64_t n, double d, DType dtype) {
  if (n < 1) throw ValueError(cat("tessel.fft.fftfreq: n must be positive, got ", n));
  std::vector<double> v(static_cast<size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i < (n + 1) / 2 ? i : i - n) / (d * double(n));
  return array(v).astype(dtype);
}
Array rfftfreq(std::int64_t n, double d, DType dtype) {
  if (n < 1) throw ValueError(cat("tessel.fft.rfftfreq: n must be positive, got ", n));
  std::vector<double> v(static_cast<size_t>(n / 2 + 1));
  for (std::int64_t i = 0; i <= n / 2; ++i) v[size_t(i)] = double(i) / (d * double(n));
  return array(v).astype(dtype);
}
Array fftshift(const Array& x, const Axes& axes) { return shift("tessel.fft.fftshift", x, axes, false); }
Array ifftshift(const Array& x, const Axes& axes) { return shift("tessel.fft.ifftshift", x, axes, true); }

}  // namespace tessel::fft
