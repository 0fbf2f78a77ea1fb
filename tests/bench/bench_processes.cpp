// All-reduce across processes: a psum over every device of every process
// (shard_map, so the time is the collective's plus one dispatch) against,
// in the same run, two peers called directly on the same bytes:
//  - MPI_Allreduce of one device's bytes per process (MPI's part alone:
//    it reduces 2 buffers where the psum reduces 8);
//  - the hand-written hierarchical all-reduce the psum replaces: each
//    process sums its devices' buffers, MPI_Allreduce of the sum, a copy of
//    the result into every device's buffer (the same work as tessel's, but
//    not the one-process bits: its order is (d0+..+d3)+(d4+..+d7)).
// Floor: the bytes each process must send and receive at least (its
// partial sum out, the others' in), at the best bandwidth measured here
// (bench::memory_floor).
//
//   ./tessel bench processes          (2 processes x 4 devices, under mpirun)
//   mpirun -np 2 build/tests/bench/bench_processes [max MiB per device, default 256]
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <tessel/tessel.hpp>

#include "tests/bench/bench_util.hpp"

namespace ts = tessel;
using ts::P;

int main(int argc, char** argv) {
  ts::distributed::initialize();
  const double max_mib = argc > 1 ? std::atof(argv[1]) : 256;
  const int n = ts::device_count(), procs = ts::process_count(), me = ts::process_index();
  ts::Mesh mesh(ts::devices(), "x");
  if (me == 0)
    std::printf("\nall-reduce (psum) over %d devices in %d processes (%d cores); size = bytes per device\n"
                "%-20s %10s %12s %8s %14s %7s %16s %7s\n",
                n, procs, bench::cores(), "case", "floor (ms)", "tessel (ms)", "x floor", "MPI_Allreduce", "x MPI",
                "hierarchical MPI", "x hier");
  // The floors, measured by the first process alone (the others wait
  // without spinning, so that they do not slow it).
  std::vector<double> floors;
  if (me == 0)
    for (double kib = 1; kib <= max_mib * 1024; kib *= 4) {
      const std::size_t bytes = std::size_t(kib * 1024 / 4) * 4;
      floors.push_back(bench::memory_floor(bytes, bytes).seconds);
    }
  {
    MPI_Request done;
    MPI_Ibarrier(MPI_COMM_WORLD, &done);
    for (int flag = 0; MPI_Test(&done, &flag, MPI_STATUS_IGNORE), !flag;)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int size_index = 0;
  for (double kib = 1; kib <= max_mib * 1024; kib *= 4, ++size_index) {
    const std::int64_t per = std::int64_t(kib * 1024 / 4);
    ts::Array x = ts::make_array_from_callback({per * n}, ts::NamedSharding(mesh, P("x")), [&](const ts::Index& idx) {
      return ts::ones({idx[0].stop - idx[0].start});
    });
    auto f = ts::shard_map([](const ts::Array& b) { return ts::psum(b, "x"); }, mesh, {P("x")}, {P()});
    const int reps = kib >= 16384 ? 5 : kib >= 4096 ? 15 : 61;
    std::vector<float> buf(std::size_t(per), 1.0f);
    const int local = ts::local_device_count();
    std::vector<std::vector<float>> dev(std::size_t(local), std::vector<float>(std::size_t(per), 1.0f)),
        outs = dev;
    std::vector<float> sum(static_cast<std::size_t>(per));
    auto ours_once = [&] { f(x).block_until_ready(); };
    auto mpi_once = [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), int(per), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
    auto hier_once = [&] {
      for (std::int64_t i = 0; i < per; ++i) {
        float a = dev[0][std::size_t(i)];
        for (int d = 1; d < local; ++d) a += dev[std::size_t(d)][std::size_t(i)];
        sum[std::size_t(i)] = a;
      }
      MPI_Allreduce(MPI_IN_PLACE, sum.data(), int(per), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      for (auto& o : outs) std::copy(sum.begin(), sum.end(), o.begin());
    };
    // Interleaved rounds (each of the three once per round), medians: the
    // host is shared and its speed drifts; all three see the same drift.
    ts::sync_global_devices("warm");
    ours_once(), mpi_once(), hier_once();
    std::vector<double> t_ours, t_mpi, t_hier;
    for (int r = 0; r < reps; ++r) {
      t_ours.push_back(bench::seconds(ours_once, 1, 0));
      t_mpi.push_back(bench::seconds(mpi_once, 1, 0));
      t_hier.push_back(bench::seconds(hier_once, 1, 0));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    double ours = median(t_ours);
    const double peer = median(t_mpi), hier = median(t_hier);
    if (me == 0) {
      double floor = floors[std::size_t(size_index)];
      char name[64];
      std::snprintf(name, sizeof name, "psum %g KiB", kib);
      bench::check(name, floor, ours);
      std::printf("%-20s %10.3f %12.3f %8.2f %14.3f %7.2f %16.3f %7.2f\n", name, floor * 1e3, ours * 1e3,
                  ours / floor, peer * 1e3, ours / peer, hier * 1e3, ours / hier);
      std::fflush(stdout);
    }
    ts::sync_global_devices("next size");
  }
  return bench::status();
}
