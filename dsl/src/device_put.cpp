#include <tessel/device_put.hpp>
#include <tessel/ops.hpp>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "runtime/transfer.hpp"

namespace tessel {

Array device_put(const Array& x, const Sharding& sharding) {
  // Inside jit, as JAX: a sharding constraint on the traced value.
  if (x.is_tracer()) return with_sharding_constraint(x, sharding);
  const auto& a = detail::concrete(x);
  AxisSharding dst = detail::axis_sharding(sharding, a.shape);
  const std::size_t elem = dtype_size(a.dtype);
  auto plan = rt::plan_transfer(a.shape, elem, a.layout, dst);
  auto bufs = rt::run_transfer(plan, a.shape, elem, a.layout, a.buffers, dst);
  return detail::make_array(a.dtype, a.shape, a.weak_type, sharding, dst, true, std::move(bufs));
}

Array device_put(const Array& x, const Device& device) {
  const int n = device_count();
  if (device.id() < 0 || device.id() >= n)
    throw ValueError(detail::cat("device_put: device id ", device.id(), " does not exist; there are ", n,
                                 " devices (ids 0..", n - 1, ")"));
  return device_put(x, Sharding(SingleDeviceSharding(device)));
}

}  // namespace tessel
