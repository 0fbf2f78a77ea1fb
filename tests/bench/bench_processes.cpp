// All-reduce across processes: a psum over every device of every process
// (shard_map, so the time is the collective's plus one dispatch) against
// MPI_Allreduce called directly on the same bytes per process, in the same
// run. Floor: the bytes each process must send and receive at least (its
// partial sum out, the others' in), at the copy bandwidth measured here.
//
//   ./tessel bench processes          (2 processes x 4 devices, under mpirun)
//   mpirun -np 2 build/tests/bench/bench_processes [max MiB per device, default 64]
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

int main(int argc, char** argv) {
  ts::distributed::initialize();
  const double max_mib = argc > 1 ? std::atof(argv[1]) : 64;
  const int n = ts::device_count(), procs = ts::process_count(), me = ts::process_index();
  ts::Mesh mesh(ts::devices(), "x");
  if (me == 0)
    std::printf("\nall-reduce (psum) over %d devices in %d processes (%d cores); size = bytes per device\n"
                "%-28s %12s %12s %8s %14s %9s\n",
                n, procs, bench::cores(), "case", "floor (ms)", "tessel (ms)", "x floor", "MPI_Allreduce", "x MPI");
  for (double kib = 1; kib <= max_mib * 1024; kib *= 16) {
    const std::int64_t per = std::int64_t(kib * 1024 / 4);
    ts::Array x = ts::make_array_from_callback({per * n}, ts::NamedSharding(mesh, P("x")), [&](const ts::Index& idx) {
      return ts::ones({idx[0].stop - idx[0].start});
    });
    auto f = ts::shard_map([](const ts::Array& b) { return ts::psum(b, "x"); }, mesh, {P("x")}, {P()});
    const int reps = kib >= 16384 ? 3 : 9;
    ts::sync_global_devices("warm");
    const double ours = bench::seconds([&] { f(x).block_until_ready(); }, reps, 1);
    std::vector<float> buf(std::size_t(per), 1.0f);
    ts::sync_global_devices("peer");
    const double peer = bench::seconds([&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(per), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }, reps, 1);
    const double floor = bench::copy_seconds(std::size_t(2 * per * 4));
    if (me == 0) {
      char name[64];
      std::snprintf(name, sizeof name, "psum %g KiB", kib);
      std::printf("%-28s %12.3f %12.3f %8.2f %14.3f %9.2f\n", name, floor * 1e3, ours * 1e3, ours / floor, peer * 1e3,
                  ours / peer);
      std::fflush(stdout);
    }
    ts::sync_global_devices("next size");
  }
  return 0;
}
