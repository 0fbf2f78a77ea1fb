// Several processes, as jax.distributed: one program per process over one
// global set of devices. Run it as
//
//   ./tessel run --np 2 samples/processes.cpp
//
// (or mpirun -np 2 build/samples/processes). Each process holds
// config().device_count devices (TESSEL_DEVICE_COUNT); ts::devices() lists
// every process's. The notebook's process_allgather cells, a global array
// whose shards live in two processes, a jit program over it whose
// collectives cross processes, and the multihost utilities.
#include <tessel/tessel.hpp>

#include <iostream>

namespace ts = tessel;
using ts::Array;
using ts::P;

int main() {
  ts::distributed::initialize();
  const int me = ts::process_index();
  // Output of process 0 only, as a notebook shows one kernel's.
  auto say = [&](const auto&... parts) {
    if (me == 0) ((std::cout << parts), ...) << std::endl;
  };
  say("processes: ", ts::process_count(), ", devices: ", ts::device_count(), " (", ts::local_device_count(),
      " per process)");
  for (int p = 0; p < ts::process_count(); ++p) {
    ts::sync_global_devices("print order");
    if (p == me) {
      std::cout << "process " << me << " holds";
      for (auto& d : ts::local_devices()) std::cout << ' ' << d;
      std::cout << std::endl;
    }
  }
  ts::sync_global_devices("after the device list");

  // The notebook's cells: each process's local data, gathered on every process.
  Array x = ts::arange(2 * me, 2 * me + 2, 1, ts::float32);
  say("process_allgather(x, tiled=True):  ", ts::process_allgather(x, true));
  say("process_allgather(x, tiled=False): ", ts::process_allgather(x, false));

  // A global array: each process builds only its own shards.
  ts::Mesh mesh(ts::devices(), {ts::device_count() / 2, 2}, {"x", "y"});
  const std::int64_t rows = 2 * ts::device_count();
  Array local = ts::arange(rows / ts::process_count() * me * 8, rows / ts::process_count() * (me + 1) * 8, 1, ts::float32)
                    .reshape({rows / ts::process_count(), 8});
  Array g = ts::make_array_from_process_local_data(ts::NamedSharding(mesh, P("x", "y")), local);
  say("global array ", ts::shape_str(g.shape()), " ", g.sharding().str(), ": fully addressable here? ",
      g.is_fully_addressable() ? "yes" : "no", ", ", g.addressable_shards().size(), " of its ", ts::device_count(),
      " shards in this process");
  try {
    (void)g.to_vector<float>();
  } catch (const ts::DistributedError& e) {
    say("reading it whole: DistributedError: ", e.what());
  }

  // jit over both processes' devices: the sums cross processes (all-reduces over MPI).
  auto f = ts::jit([](const Array& a) { return std::make_pair(ts::sum(a, 0), ts::matmul(a, ts::transpose(a))); });
  auto [col_sums, gram] = f(g);
  say("column sums (replicated, readable everywhere): ", col_sums);
  Array whole = ts::process_allgather(gram);
  say("a a^T gathered: ", ts::shape_str(whole.shape()), ", its sum ", ts::sum(whole));
  Array check = ts::arange(0, rows * 8, 1, ts::float32).reshape({rows, 8});
  say("equal to the single-process product: ",
      ts::all(ts::matmul(check, ts::transpose(check)) == whole).item<bool>() ? "yes" : "NO");
  say("broadcast_one_to_all(process index): ", ts::broadcast_one_to_all(ts::array(float(me))));
  return 0;
}
