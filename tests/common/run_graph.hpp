// Runs a graph through the code generator on one device, with host arrays in
// and out, for tests that compare against the reference interpreter.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include <tessel/tessel.hpp>

#include "codegen/compile.hpp"
#include "runtime/device.hpp"
#include "tracer/interpreter.hpp"

namespace tessel::testing {

// local_devices: as codegen::CompileOptions (the devices running the program side by side).
inline std::vector<HostArray> run_compiled(const Graph& g, const std::vector<HostArray>& args, int device = 0,
                                           int local_devices = 1) {
  devices();  // start the runtime
  codegen::CompileOptions options;
  options.threads_per_device = rt::Runtime::get().threads_per_device();
  options.local_devices = local_devices;
  auto compiled = codegen::compile(g, options);
  std::vector<rt::BufferRef> ins;
  for (auto& a : args) {
    auto b = rt::Buffer::allocate(device, a.bytes.size());
    if (!a.bytes.empty()) std::memcpy(b->data(), a.bytes.data(), a.bytes.size());
    b->ready().set();
    ins.push_back(b);
  }
  auto outs = compiled.executable->launch({device}, {ins});
  std::vector<HostArray> result;
  for (size_t i = 0; i < outs[0].size(); ++i) {
    outs[0][i]->ready().wait();
    const Aval& a = g.outputs[i]->aval;
    result.push_back(host_array(a.dtype, a.shape, outs[0][i]->data()));
  }
  return result;
}

// Element i of a host array as double.
inline double element(const HostArray& h, std::int64_t i) { return h.as_double(i); }

// "" when equal within tolerance (NaNs match NaNs), else where they differ.
inline std::string compare_arrays(const HostArray& got, const HostArray& want, double rtol = 2e-5, double atol = 1e-5) {
  std::ostringstream os;
  if (got.dtype != want.dtype || got.shape != want.shape) {
    os << "aval " << aval_str(got.dtype, got.shape) << " vs " << aval_str(want.dtype, want.shape);
    return os.str();
  }
  const std::int64_t n = numel(got.shape);
  // A complex element: each part within atol + rtol |want| (its modulus).
  const int parts = is_complex(got.dtype) ? 2 : 1;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::complex<double> za = got.as_complex(i), zb = want.as_complex(i);
    for (int k = 0; k < parts; ++k) {
      double a = k ? za.imag() : za.real(), b = k ? zb.imag() : zb.real();
      const double scale = parts == 2 && std::isfinite(std::abs(zb)) ? std::abs(zb) : std::fabs(b);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::isinf(a) || std::isinf(b)) {
        if (a == b) continue;
      } else if (std::fabs(a - b) <= atol + rtol * scale) {
        continue;
      }
      os.precision(9);
      os << "element " << i << (parts == 2 ? (k ? " (imaginary part)" : " (real part)") : "") << " of "
         << aval_str(got.dtype, got.shape) << ": got " << a << ", want " << b;
      return os.str();
    }
  }
  return "";
}

template <class T>
HostArray random_host(DType dtype, const Shape& shape, std::mt19937& rng, double lo = -2, double hi = 2) {
  HostArray h;
  h.dtype = dtype;
  h.shape = shape;
  h.bytes.resize(std::size_t(numel(shape)) * dtype_size(dtype));
  std::uniform_real_distribution<double> u(lo, hi);
  visit_dtype(dtype, [&](auto tag) {
    using E = decltype(tag);
    E* p = reinterpret_cast<E*>(h.bytes.data());
    for (std::int64_t i = 0; i < numel(shape); ++i) {
      if constexpr (std::is_same_v<E, bool>) p[i] = u(rng) > 0;
      else if constexpr (std::is_floating_point_v<E>) p[i] = E(u(rng));
      else p[i] = E(std::floor(u(rng) * 10));
    }
  });
  return h;
}

}  // namespace tessel::testing
