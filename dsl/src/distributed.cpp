// ts::distributed and the multihost utilities over runtime/mpi.hpp.
#include <tessel/creation.hpp>
#include <tessel/distributed.hpp>
#include <tessel/jit.hpp>
#include <tessel/ops.hpp>

#include <cstdlib>
#include <cstring>
#include <set>

#include "dsl/src/array_impl.hpp"
#include "dsl/src/sharding_impl.hpp"
#include "runtime/device.hpp"
#include "runtime/mpi.hpp"
#include "runtime/transfer.hpp"
#include "tessel/core/errors.hpp"
#include "tessel/core/shape.hpp"

namespace tessel {

using detail::cat;

namespace distributed {

void initialize(const InitializeOptions& o) {
  if (!rt::mpi::initialized()) {
    if (rt::Runtime::started())
      throw DistributedError(cat("distributed::initialize() must come before the first use of the devices: the runtime "
                                 "already runs ",
                                 rt::Runtime::get().device_count(), " devices in this process alone"));
    rt::mpi::initialize();
    // Devices drain before MPI ends (the runtime's own exit handlers, registered later, run first).
    std::atexit([] {
      if (rt::Runtime::started()) rt::Runtime::get().synchronize();
      rt::mpi::finalize();
    });
  }
  if (o.timeout_seconds) rt::mpi::set_timeout_seconds(*o.timeout_seconds);
  if (o.num_processes && *o.num_processes != rt::mpi::size())
    throw ValueError(cat("distributed::initialize: num_processes=", *o.num_processes, " but the MPI launcher started ",
                         rt::mpi::size(), " processes"));
  if (o.process_id && *o.process_id != rt::mpi::rank())
    throw ValueError(cat("distributed::initialize: process_id=", *o.process_id, " but MPI says this is process ",
                         rt::mpi::rank()));
  // Every process must hold as many devices (global ids depend on it).
  const std::int32_t mine = config().device_count;
  auto all = rt::mpi::allgather(&mine, sizeof mine, "distributed::initialize");
  for (int q = 0; q < rt::mpi::size(); ++q) {
    std::int32_t n;
    std::memcpy(&n, all.data() + std::size_t(q) * sizeof n, sizeof n);
    if (n != mine)
      throw DistributedError(cat("distributed::initialize: process ", q, " has ", n, " devices and process ",
                                 rt::mpi::rank(), " has ", mine,
                                 "; every process needs the same config().device_count (TESSEL_DEVICE_COUNT)"));
  }
}

bool is_initialized() { return rt::mpi::initialized(); }

}  // namespace distributed

namespace {

std::vector<unsigned char> host_bytes(const Array& x) {
  std::vector<unsigned char> b(std::size_t(numel(x.shape())) * dtype_size(x.dtype()) + 1);
  detail::gather_to_host(detail::concrete(x), b.data());
  b.pop_back();
  return b;
}

// A host-side description of (dtype, shape) every process must agree on.
std::string aval_of(const Array& x) { return aval_str(x.dtype(), x.shape()); }

void agree(const std::string& what, const std::string& mine) {
  if (!rt::mpi::initialized()) return;
  char buf[256] = {};
  std::strncpy(buf, mine.c_str(), sizeof buf - 1);
  auto all = rt::mpi::allgather(buf, sizeof buf, what);
  for (int q = 0; q < rt::mpi::size(); ++q) {
    std::string theirs(all.data() + std::size_t(q) * sizeof buf);
    if (theirs != std::string(buf))
      throw DistributedError(cat(what, ": process ", q, " gives ", theirs, " and process ", rt::mpi::rank(), " gives ",
                                 buf, "; every process must pass the same"));
  }
}

}  // namespace

Array make_array_from_callback(const Shape& shape, const Sharding& sharding,
                               const std::function<Array(const Index&)>& data_callback) {
  check_shape(shape, DType::float32, "make_array_from_callback");
  AxisSharding layout = detail::axis_sharding(sharding, shape);
  const auto& ids = layout.mesh->device_ids();
  rt::Runtime& runtime = detail::runtime();
  const Shape tile = layout.tile_shape(shape);
  std::vector<rt::BufferRef> bufs(ids.size());
  std::optional<DType> dtype;
  auto index_of = [&](const Box& b) {
    Index idx;
    for (size_t d = 0; d < shape.size(); ++d) idx.push_back({b.start[d], b.stop[d]});
    return idx;
  };
  for (std::size_t p = 0; p < ids.size(); ++p) {
    if (!runtime.is_local(ids[p])) continue;
    const Box box = layout.shard_box(shape, std::int64_t(p));
    Array data = data_callback(index_of(box));
    if (data.shape() != box.extent())
      throw ShapeError(cat("make_array_from_callback: the callback gave shape ", shape_str(data.shape()),
                           " for the shard ", to_string(index_of(box)), " of device ", ids[p], ", which has shape ",
                           shape_str(box.extent())));
    if (dtype && data.dtype() != *dtype)
      throw TypeError(cat("make_array_from_callback: the callback gave ", dtype_name(data.dtype()), " for device ", ids[p],
                          " after ", dtype_name(*dtype), " for another device"));
    dtype = data.dtype();
    const std::size_t es = dtype_size(*dtype);
    detail::check_allocation(std::size_t(numel(tile)) * es, 1, "make_array_from_callback");
    auto host = host_bytes(data);
    auto buf = rt::Buffer::allocate(ids[p], std::size_t(numel(tile)) * es);
    if (numel(box.extent()) != numel(tile)) std::memset(buf->data(), 0, buf->bytes());  // padding reads as zeros
    rt::copy_region(host.data(), box.extent(), box.start, buf->data(), tile, box.start, box, es);
    buf->ready().set();
    bufs[p] = buf;
  }
  if (!dtype) dtype = data_callback(index_of(layout.shard_box(shape, 0))).dtype();  // no local shard: its dtype only
  return detail::make_array(*dtype, shape, false, sharding, layout, true, std::move(bufs));
}

Array make_array_from_process_local_data(const Sharding& sharding, const Array& local_data,
                                         std::optional<Shape> global_shape) {
  const Shape& ls = local_data.shape();
  if (ls.empty())
    throw ShapeError("make_array_from_process_local_data: local_data must have rank >= 1 (its rows are split over processes)");
  AxisSharding by_rank = detail::axis_sharding_for_rank(sharding, int(ls.size()));
  const auto& ids = by_rank.mesh->device_ids();
  rt::Runtime& runtime = detail::runtime();
  // The row blocks (tiles along dim 0) in all, and this process's.
  std::set<std::int64_t> all_tiles, my_tiles;
  for (std::size_t p = 0; p < ids.size(); ++p) {
    const std::int64_t t = by_rank.tile_index(std::int64_t(p))[0];
    all_tiles.insert(t);
    if (runtime.is_local(ids[p])) my_tiles.insert(t);
  }
  Shape g = global_shape ? *global_shape : ls;
  if (!global_shape && !my_tiles.empty())
    g[0] = ls[0] * std::int64_t(all_tiles.size()) / std::int64_t(my_tiles.size());
  if (g.size() != ls.size())
    throw ShapeError(cat("make_array_from_process_local_data: global_shape ", shape_str(g), " and local_data ",
                         shape_str(ls), " differ in rank"));
  agree("make_array_from_process_local_data (the global shape; pass global_shape when the rows are uneven)", shape_str(g));
  AxisSharding layout = detail::axis_sharding(sharding, g);
  // This process's rows: from the first of its shards' rows.
  std::int64_t lo = g[0], hi = 0;
  for (std::size_t p = 0; p < ids.size(); ++p)
    if (runtime.is_local(ids[p])) {
      Box b = layout.shard_box(g, std::int64_t(p));
      lo = std::min(lo, b.start[0]);
      hi = std::max(hi, b.stop[0]);
    }
  if (hi > lo && (hi - lo != ls[0] || !std::equal(g.begin() + 1, g.end(), ls.begin() + 1)))
    throw ShapeError(cat("make_array_from_process_local_data: process ", process_index(), " holds rows ", lo, ":", hi,
                         " of the global shape ", shape_str(g), " (", sharding.str(), "), so local_data must have shape ",
                         shape_str([&] {
                           Shape want = g;
                           want[0] = hi - lo;
                           return want;
                         }()),
                         ", got ", shape_str(ls)));
  return make_array_from_callback(g, sharding, [&](const Index& idx) {
    std::vector<IndexItem> items;
    for (size_t d = 0; d < idx.size(); ++d)
      items.push_back(slice(idx[d].start - (d == 0 ? lo : 0), idx[d].stop - (d == 0 ? lo : 0)));
    return local_data.index(items);
  });
}

Array process_allgather(const Array& x, bool tiled) {
  // A global array (its devices in several processes, judged the same way
  // in every process) is gathered whole; anything else is this process's data.
  bool spans = false;
  {
    const auto& ids = detail::concrete(x).layout.mesh->device_ids();
    for (int id : ids) spans = spans || detail::process_of_device(id) != detail::process_of_device(ids.front());
  }
  if (spans) {
    // A global array: its whole value on every process, gathered by a compiled all-gather.
    const auto& a = detail::concrete(x);
    std::vector<Device> devs;
    for (int id : a.layout.mesh->device_ids()) devs.emplace_back(id);
    auto whole = jit([](const Array& v) { return v; },
                     JitOptions{.out_shardings = {Sharding(NamedSharding(Mesh(devs, "all"), P()))}});
    Array r = whole(x);
    auto bytes = host_bytes(r);
    return detail::from_host(x.dtype(), x.shape(), bytes.data(), x.weak_type());
  }
  auto mine = host_bytes(x);
  const bool several = rt::mpi::initialized();
  agree("process_allgather", aval_of(x));
  auto all = several ? rt::mpi::allgather(mine.data(), mine.size(), "process_allgather")
                     : std::vector<char>(mine.begin(), mine.end());
  Shape s = x.shape();
  const std::int64_t n = several ? rt::mpi::size() : 1;
  if (tiled && !s.empty()) s[0] *= n;  // rows of process 0, then 1, ...: bytes in process order are that
  else s.insert(s.begin(), n);
  return detail::from_host(x.dtype(), s, all.data(), x.weak_type());
}

void sync_global_devices(const std::string& name) {
  if (rt::Runtime::started()) rt::Runtime::get().synchronize();
  agree("sync_global_devices", name);
}

Array broadcast_one_to_all(const Array& x) {
  if (!rt::mpi::initialized()) return x;
  agree("broadcast_one_to_all", aval_of(x));
  auto bytes = host_bytes(x);
  rt::mpi::broadcast(bytes.data(), bytes.size(), 0, "broadcast_one_to_all");
  return detail::from_host(x.dtype(), x.shape(), bytes.data(), x.weak_type());
}

}  // namespace tessel
