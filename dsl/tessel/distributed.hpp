// Several processes (jax.distributed and jax.experimental.multihost_utils):
// one program per process over one global set of devices, the processes
// started by an MPI launcher (./tessel run --np N FILE.cpp, or mpirun).
//
// Each process holds config().device_count devices; process p's have ids
// p * device_count ... (p + 1) * device_count - 1, and ts::devices() lists
// every process's. A global array keeps on each process only the shards of
// that process's devices (addressable_shards()); jit and shard_map programs
// over a mesh of several processes' devices run SPMD: every process runs the
// same program on its devices, and collectives between processes go over
// MPI (runtime/communicator.cpp). The processes must make the same calls in
// the same order (as with JAX); a peer that diverges, fails or exits makes
// the others raise DistributedError within the timeout, never hang.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <tessel/array.hpp>
#include <tessel/sharding.hpp>

namespace tessel::distributed {

struct InitializeOptions {
  // Checked against the MPI launcher's world when given (jax.distributed's
  // num_processes and process_id).
  std::optional<int> num_processes, process_id;
  // The bound on every wait for another process, in seconds (default: env
  // TESSEL_DISTRIBUTED_TIMEOUT, else 300).
  std::optional<double> timeout_seconds;
};

// Joins the processes the MPI launcher started (reads its environment
// through MPI_Init_thread). Call it before anything uses the devices;
// without it tessel runs in one process as always. Idempotent.
void initialize(const InitializeOptions& options = {});
bool is_initialized();

}  // namespace tessel::distributed

namespace tessel {

// jax.make_array_from_callback: the global array of `shape` laid out by
// `sharding`, each of this process's shards made by data_callback(index)
// (an array of the shard's shape; called once per local device).
Array make_array_from_callback(const Shape& shape, const Sharding& sharding,
                               const std::function<Array(const Index&)>& data_callback);

// jax.make_array_from_process_local_data: each process gives the rows of
// the global array its devices hold, in order (`local_data`, the same on
// every process for what is replicated): for a sharding split along dim 0
// over processes, the global shape is local_data's with dim 0 times the
// number of processes splitting it (or `global_shape` when given).
Array make_array_from_process_local_data(const Sharding& sharding, const Array& local_data,
                                         std::optional<Shape> global_shape = std::nullopt);

// multihost_utils.process_allgather (tiled by default, as API.md): every process's x, stacked along a new
// leading axis (tiled=false) or concatenated along axis 0 (tiled=true), on
// every process as an ordinary local array. x may be a global array (then
// its value is gathered whole first: every process gets the same array) or
// this process's local data.
Array process_allgather(const Array& x, bool tiled = true);

// multihost_utils.sync_global_devices: a barrier of every process (after
// this process's devices finished their work); `name` must agree.
void sync_global_devices(const std::string& name);

// multihost_utils.broadcast_one_to_all: process 0's x on every process.
Array broadcast_one_to_all(const Array& x);

}  // namespace tessel
