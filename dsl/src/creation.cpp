#include <tessel/creation.hpp>

#include <cmath>
#include <cstring>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "dsl/src/trace.hpp"
#include "tracer/build.hpp"
#include "tracer/convert.hpp"

namespace tessel {

namespace detail {

namespace {

// An uncommitted array on the default device whose buffer `fill` writes.
template <class Fill>
Array make_host(DType dtype, const Shape& shape, bool weak, Fill&& fill) {
  check_shape(shape, dtype, "creating an array");
  const std::size_t bytes = std::size_t(numel(shape)) * dtype_size(dtype);
  check_allocation(bytes, 1, "creating an array of " + aval_str(dtype, shape));
  Device dev = local_devices().at(0);  // the default device: this process's first (as JAX)
  auto buf = rt::Buffer::allocate(dev.id(), bytes);
  fill(buf->data());
  buf->ready().set();
  return make_array(dtype, shape, weak, SingleDeviceSharding(dev), replicated(flat_mesh({dev}), int(shape.size())),
                    false, {buf});
}

// Writes n values value_at(i) (as double or int64) into `dtype` storage.
template <class V, class F>
void fill_values(DType dtype, void* out, std::int64_t n, F&& value_at) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = static_cast<T*>(out);
    for (std::int64_t i = 0; i < n; ++i) p[i] = convert_element<T>(V(value_at(i)));
  });
}

}  // namespace

Array from_host(DType dtype, const Shape& shape, const void* data, bool weak_type) {
  return make_host(dtype, shape, weak_type, [&](void* out) {
    const std::size_t bytes = std::size_t(numel(shape)) * dtype_size(dtype);
    if (bytes) std::memcpy(out, data, bytes);  // an empty vector's data() may be null
  });
}

Array scalar_array(double value, DType dtype, bool weak) {
  return make_host(dtype, {}, weak, [&](void* out) { fill_values<double>(dtype, out, 1, [&](auto) { return value; }); });
}

Array scalar_array_c(std::complex<double> value, DType dtype, bool weak) {
  return make_host(dtype, {}, weak, [&](void* out) {
    fill_values<std::complex<double>>(dtype, out, 1, [&](auto) { return value; });
  });
}

Array scalar_array_i64(std::int64_t value, DType dtype, bool weak) {
  return make_host(dtype, {}, weak,
                   [&](void* out) { fill_values<std::int64_t>(dtype, out, 1, [&](auto) { return value; }); });
}

Array full_weak(const Shape& shape, double value, DType dtype, bool weak) {
  // Inside a trace, an array of one value is a broadcast of a scalar
  // constant (as jnp.zeros in a jaxpr): nothing allocated at trace time, no
  // constant captured and held on every device, fused into its readers.
  if (numel(shape) > 1)
    if (auto t = current_trace())
      return tracer_for(t, build::broadcast_in_dim(t->table, node_of(*t, scalar_literal(value, dtype, weak)), shape, {}));
  return make_host(dtype, shape, weak,
                   [&](void* out) { fill_values<double>(dtype, out, numel(shape), [&](auto) { return value; }); });
}

}  // namespace detail

Array zeros(const Shape& shape, DType dtype) { return detail::full_weak(shape, 0.0, dtype, false); }
Array ones(const Shape& shape, DType dtype) { return detail::full_weak(shape, 1.0, dtype, false); }
Array full(const Shape& shape, double value, DType dtype) { return detail::full_weak(shape, value, dtype, false); }

Array arange(double start, double stop, double step, DType dtype) {
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw ValueError(detail::cat("arange: start, stop and step must be finite, got start=", start, " stop=", stop,
                                 " step=", step));
  if (step == 0) throw ValueError(detail::cat("arange: step must not be zero (start=", start, ", stop=", stop, ")"));
  const double count = std::ceil((stop - start) / step);
  if (count > 9.2e18)
    throw ShapeError(detail::cat("arange: start=", start, " stop=", stop, " step=", step, " gives ", count,
                                 " elements, more than an int64 can count"));
  const std::int64_t n = count > 0 ? std::int64_t(count) : 0;  // (a cast of a huge negative double is undefined)
  // Inside a trace, arange(n) is an iota (as JAX's): nothing captured. The
  // counts are exact in every dtype below 2^24 (a float32's integers), as
  // the host's values are (not the 8-bit types, whose casts of large counts differ).
  if (start == 0 && step == 1 && n > 1 && n <= (std::int64_t(1) << 24) && dtype_size(dtype) >= 2 && !is_complex(dtype))
    if (auto t = detail::current_trace())
      return detail::tracer_for(t, build::iota(t->table, dtype, {n}, 0));
  return detail::make_host(dtype, {n}, false, [&](void* out) {
    if (is_inexact(dtype))
      detail::fill_values<double>(dtype, out, n, [&](std::int64_t i) { return start + double(i) * step; });
    else
      detail::fill_values<std::int64_t>(dtype, out, n, [&](std::int64_t i) {
        return std::int64_t(start) + i * std::int64_t(step);
      });
  });
}

Array eye(std::int64_t n, std::optional<std::int64_t> m_opt, std::int64_t k, DType dtype) {
  std::int64_t m = m_opt.value_or(n);
  // Inside a trace, eye is a compare of two iotas (column - row == k), as
  // JAX's: nothing captured, 0 and 1 exact in every dtype.
  constexpr std::int64_t kLimit = std::int64_t(1) << 30;  // column - row - k stays an int32
  if (n > 0 && m > 0 && n * m > 1 && n < kLimit && m < kLimit && k > -kLimit && k < kLimit)
    if (auto t = detail::current_trace()) {
      NodeTable& nt = t->table;
      const NodeRef diag = build::binary(nt, Op::sub, build::iota(nt, DType::int32, {n, m}, 1),
                                         build::iota(nt, DType::int32, {n, m}, 0));
      const NodeRef on = build::binary(
          nt, Op::eq, diag, build::broadcast_in_dim(nt, build::scalar(nt, DType::int32, double(k)), {n, m}, {}));
      return detail::tracer_for(t, build::convert(nt, on, dtype));
    }
  return detail::make_host(dtype, {n, m}, false, [&](void* out) {
    detail::fill_values<double>(dtype, out, n * m, [&](std::int64_t i) { return (i % m) - (i / m) == k ? 1.0 : 0.0; });
  });
}

Array linspace(double start, double stop, std::int64_t num, bool endpoint, DType dtype) {
  if (num < 0) throw ValueError("linspace: number of samples, " + std::to_string(num) + ", must be non-negative");
  const std::int64_t div = endpoint ? num - 1 : num;
  // As JAX: start + i * delta, computed in the dtype's own arithmetic (in
  // float64 for integer dtypes), with the endpoint exactly `stop`. float32's
  // multiply-add is done in float64, where i * delta is exact, and rounded
  // once: the bits of XLA:CPU's fused multiply-add but in a double
  // rounding's rare halfway case, and the same whether or not the compiled
  // code contracts it (codegen/jit.cpp). Inside a trace that float32
  // arithmetic runs on an iota (exact below 2^24): nothing captured.
  const bool f32 = dtype == DType::float32;
  const float lo = float(start), hi = float(stop), delta = div > 0 ? (hi - lo) / float(div) : 0.0f;
  if (f32 && num > 1 && num <= (std::int64_t(1) << 24))
    if (auto t = detail::current_trace()) {
      NodeTable& nt = t->table;
      auto full = [&](DType d, double v) { return build::broadcast_in_dim(nt, build::scalar(nt, d, v), {num}, {}); };
      const NodeRef i = build::iota(nt, DType::float64, {num}, 0);
      NodeRef v = build::convert(
          nt, build::binary(nt, Op::add, full(DType::float64, lo), build::binary(nt, Op::mul, i, full(DType::float64, delta))),
          DType::float32);
      if (endpoint)
        v = build::select(nt, build::binary(nt, Op::eq, i, full(DType::float64, double(num - 1))), full(DType::float32, hi), v);
      return detail::tracer_for(t, v);
    }
  return detail::make_host(dtype, {num}, false, [&](void* out) {
    if (f32) {
      float* p = static_cast<float*>(out);
      for (std::int64_t i = 0; i < num; ++i)
        p[i] = (endpoint && i == num - 1 && num > 1) ? hi : float(double(lo) + double(i) * double(delta));
      return;
    }
    visit_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
      const C delta = div > 0 ? (C(stop) - C(start)) / C(div) : C(0);
      T* p = static_cast<T*>(out);
      for (std::int64_t i = 0; i < num; ++i) {
        C v = (endpoint && i == num - 1 && num > 1) ? C(stop) : C(start) + C(i) * delta;
        p[i] = convert_element<T>(v);
      }
    });
  });
}

Array zeros_like(const Array& x, std::optional<DType> dtype) { return full_like(x, 0.0, dtype); }
Array ones_like(const Array& x, std::optional<DType> dtype) { return full_like(x, 1.0, dtype); }
Array full_like(const Array& x, double value, std::optional<DType> dtype) {
  return detail::full_weak(x.shape(), value, dtype.value_or(x.dtype()), dtype ? false : x.weak_type());
}

}  // namespace tessel
