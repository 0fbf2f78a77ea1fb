// What an Array handle points to. A concrete array is a sharding plus one
// buffer per position of its mesh, each holding that device's padded tile.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <tessel/array.hpp>

#include "runtime/buffer.hpp"
#include "tracer/ir.hpp"
#include "runtime/device.hpp"
#include "tracer/sharding.hpp"

namespace tessel::detail {

struct TraceState;

struct ArrayImpl {
  DType dtype = DType::float32;
  Shape shape;
  bool weak_type = false;
  std::optional<Sharding> sharding;  // as the user sees it
  AxisSharding layout;               // the same, in axis form
  bool committed = false;
  std::vector<rt::BufferRef> buffers;  // per flat mesh position of layout.mesh

  // A tracer (inside jit) has a trace and the node it stands for instead.
  std::shared_ptr<TraceState> trace;
  NodeRef node;
  // Made from a C++ scalar in an expression: traced as a constant, not an input.
  bool literal = false;
  // Its buffers were given up (Array::delete_buffers, donation): `buffers` is empty.
  bool deleted = false;

  std::size_t tile_bytes() const { return std::size_t(numel(layout.tile_shape(shape))) * dtype_size(dtype); }
};

// The impl of any array (tracer or concrete); throws Error for an empty handle.
const ArrayImpl& impl_of(const Array& x);
// A ValueError (JAX's message) if a's buffers were given up.
void check_not_deleted(const ArrayImpl& a);
// The impl of a concrete array; throws Error for an empty handle and
// ConcretizationError for a tracer.
const ArrayImpl& concrete(const Array& x);

// A concrete array from its parts.
Array make_array(DType dtype, Shape shape, bool weak_type, Sharding sharding, AxisSharding layout, bool committed,
                 std::vector<rt::BufferRef> buffers);

// Gathers the whole array to host memory in its own dtype (waits for it).
void gather_to_host(const ArrayImpl& a, void* out);

rt::Runtime& runtime();
// The process holding a device (id / devices per process).
int process_of_device(int id);

// RESOURCE_EXHAUSTED unless rt::fits_host; `what` says what needed the memory.
void check_allocation(std::size_t bytes, std::size_t devices, const std::string& what);

}  // namespace tessel::detail
