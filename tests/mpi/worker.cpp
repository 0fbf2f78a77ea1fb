// The multi-process side of tests/mpi/mpi_test.cpp, started by mpirun:
//   worker compare FILE   the scenarios' bytes must equal FILE's (written by
//                         one process over 8 devices); also the multihost
//                         utilities and addressability
//   worker compare-mixed FILE   the same, with process 1 on its devices' threads
//                         and process 0 in lockstep
//   worker early          process 1 leaves before a collective: process 0
//                         must raise DistributedError within the timeout
//   worker mismatch       the processes reach a collective with different
//                         shapes: both raise DistributedError
//   worker checkpoint DIR  restores DIR/A (written by one process x 8
//                         devices) onto the same and other shardings, and
//                         saves it again as DIR/B (sync) and DIR/C (async, zstd)
// Prints "OK <mode>" on success (exit 0), "FAIL ..." otherwise (exit 1).
#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <fstream>
#include <iostream>

#include "tests/mpi/checkpoint_tree.hpp"
#include "tests/mpi/scenarios.hpp"

namespace ts = tessel;
using ts::Array;
using ts::P;

namespace {

int fails = 0;
void expect(bool ok, const std::string& what) {
  if (ok) return;
  ++fails;
  std::cout << "FAIL process " << ts::process_index() << ": " << what << std::endl;
}

std::vector<std::vector<unsigned char>> read_reference(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::vector<unsigned char>> out;
  std::uint64_t n;
  while (in.read(reinterpret_cast<char*>(&n), sizeof n)) {
    std::vector<unsigned char> b(n);
    in.read(reinterpret_cast<char*>(b.data()), std::streamsize(n));
    out.push_back(std::move(b));
  }
  return out;
}

void compare(const std::string& path) {
  const int np = ts::process_count(), per = 8 / np;
  expect(ts::device_count() == 8 && ts::local_device_count() == per, "8 devices in all");
  auto local = ts::local_devices();
  expect(local.front().id() == per * ts::process_index(), "local ids start at (devices per process) x process");
  for (auto& d : ts::devices()) expect(d.process_index() == d.id() / per, "device " + std::to_string(d.id()) + "'s process");
  // The scenarios against one process's bytes.
  auto want = read_reference(path);
  auto sc = tessel::mpi_test::scenarios();
  expect(want.size() == sc.size(), "reference has every scenario");
  for (std::size_t i = 0; i < sc.size() && i < want.size(); ++i) {
    Array r = sc[i].run();
    expect(tessel::mpi_test::whole_bytes(r) == want[i], "bit-equal to one process: " + sc[i].name);
  }
  // A program on process 0's devices only, then one across processes: every
  // process counts the launches that span processes alike (else tags differ and it hangs).
  {
    const auto devs = ts::devices();
    std::vector<ts::Device> first(devs.begin(), devs.begin() + per);
    ts::Mesh m0(first, "a");
    Array y = ts::device_put(ts::ones({2 * per}), ts::NamedSharding(m0, P("a")));
    Array ys = ts::jit([](const Array& a) { return ts::sum(a); })(y);
    if (ts::process_index() == 0) expect(ys.item<float>() == float(2 * per), "a program on process 0's devices");
    ts::Mesh all(ts::devices(), "b");
    Array z = ts::device_put(ts::ones({16}), ts::NamedSharding(all, P("b")));
    expect(ts::jit([](const Array& a) { return ts::sum(a); })(z).item<float>() == 16.0f, "then one across processes");
    // An array of process 0's devices moved onto every process's: no one
    // source (each process may hold its own such array), so the processes
    // that need its data say so.
    try {
      (void)ts::device_put(ts::device_put(ts::ones({16}), ts::NamedSharding(m0, P("a"))), ts::NamedSharding(all, P("b")));
      expect(ts::process_index() == 0, "process 0 builds its devices' parts from its own array");
    } catch (const ts::DistributedError& e) {
      expect(ts::process_index() != 0 && std::string(e.what()).find("one process's devices") != std::string::npos,
             std::string("the other processes raise: ") + e.what());
    }
  }
  // Addressability.
  ts::Mesh mesh(ts::devices(), {4, 2}, {"x", "y"});
  Array g = ts::device_put(ts::arange(0, 64, 1, ts::float32).reshape({8, 8}), ts::NamedSharding(mesh, P("x", "y")));
  expect(!g.is_fully_addressable(), "a global array is not fully addressable");
  expect(int(g.addressable_shards().size()) == per, "a shard per local device");
  for (auto& s : g.addressable_shards()) expect(s.device().process_index() == ts::process_index(), "shards are local");
  try {
    (void)g.to_vector<float>();
    expect(false, "reading a global array raises");
  } catch (const ts::DistributedError& e) {
    expect(std::string(e.what()).find("process") != std::string::npos, "the error names the process");
  }
  // make_array_from_callback: each shard from its index.
  Array c = ts::make_array_from_callback({8, 8}, ts::NamedSharding(mesh, P("x", "y")), [](const ts::Index& idx) {
    std::vector<float> v;
    for (auto i = idx[0].start; i < idx[0].stop; ++i)
      for (auto j = idx[1].start; j < idx[1].stop; ++j) v.push_back(float(i * 8 + j));
    return ts::array(v, {idx[0].stop - idx[0].start, idx[1].stop - idx[1].start});
  });
  expect(ts::process_allgather(c).to_vector<float>() == ts::arange(0, 64, 1, ts::float32).to_vector<float>(),
         "make_array_from_callback then process_allgather");
  // make_array_from_process_local_data: process p gives its rows (8 / np of them) in order.
  const int r = 8 / np;
  Array rows = ts::arange(r * 8 * ts::process_index(), r * 8 * (ts::process_index() + 1), 1, ts::float32).reshape({r, 8});
  Array m = ts::make_array_from_process_local_data(ts::NamedSharding(mesh, P("x", "y")), rows);
  expect(m.shape() == ts::Shape{8, 8}, "global shape from local rows");
  expect(ts::process_allgather(m).to_vector<float>() == ts::arange(0, 64, 1, ts::float32).to_vector<float>(),
         "make_array_from_process_local_data");
  expect(ts::process_allgather(ts::jit([](const Array& a) { return a * 2.0f; })(m)).to_vector<float>() ==
             (ts::arange(0, 64, 1, ts::float32) * 2.0f).to_vector<float>(),
         "jit on a process-local-data array");
  // Resharding a global array outside jit (device_put): pieces move
  // between processes.
  // Uneven (10 x 6 over 4 x 2), to a transposed spec, replicated, a mesh in
  // another device order, int32.
  {
    const Array want = ts::arange(0, 60, 1, ts::int32).reshape({10, 6});
    Array src = ts::device_put(want, ts::NamedSharding(mesh, P("x", "y")));
    auto devs = ts::devices();
    std::reverse(devs.begin(), devs.end());
    ts::Mesh rev(devs, {2, 4}, {"a", "b"});
    for (const auto& to : {ts::NamedSharding(mesh, P("y", "x")), ts::NamedSharding(mesh, P()),
                           ts::NamedSharding(mesh, P(ts::None, "x")), ts::NamedSharding(rev, P("b", "a"))}) {
      Array moved = ts::device_put(src, to);
      expect(moved.sharding() == ts::Sharding(to), "device_put keeps the sharding asked for");
      expect(ts::process_allgather(moved).to_vector<std::int32_t>() == want.to_vector<std::int32_t>(),
             "device_put between processes: " + ts::Sharding(to).str());
    }
    // And back: a program on the moved array.
    Array back = ts::device_put(ts::device_put(src, ts::NamedSharding(rev, P("a"))), ts::NamedSharding(mesh, P("x")));
    expect(ts::process_allgather(ts::jit([](const Array& a) { return a * 2; })(back)).to_vector<std::int32_t>() ==
               (want * 2).to_vector<std::int32_t>(),
           "a program on an array moved between processes");
  }
  // The notebook's process_allgather cells.
  Array mine = ts::array(std::vector<float>{float(2 * ts::process_index()), float(2 * ts::process_index() + 1)});
  expect(ts::process_allgather(mine, true).to_vector<float>() == ts::arange(0, 2 * np, 1, ts::float32).to_vector<float>(),
         "tiled allgather");
  expect(ts::process_allgather(mine, false).shape() == ts::Shape{np, 2}, "stacked allgather");
  // broadcast_one_to_all and sync_global_devices.
  Array b = ts::broadcast_one_to_all(ts::array(std::vector<float>{float(10 + ts::process_index())}));
  expect(b.to_vector<float>() == std::vector<float>{10}, "broadcast_one_to_all");
  ts::sync_global_devices("end of compare");
}

void early() {
  ts::Mesh mesh(ts::devices(), {8}, {"x"});
  Array x = ts::device_put(ts::ones({8}), ts::NamedSharding(mesh, P("x")));
  if (ts::process_index() == 1) return;  // leaves: never reaches the collective
  const auto t0 = std::chrono::steady_clock::now();
  try {
    (void)ts::jit([](const Array& a) { return ts::sum(a); })(x).to_vector<float>();
    expect(false, "a collective without process 1 raises");
  } catch (const ts::DistributedError& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "process 0: " << e.what() << " (after " << s << " s)" << std::endl;
    expect(std::string(e.what()).find("process 1") != std::string::npos, "the error names process 1");
    expect(s < 30, "within the timeout");
  }
}

void mismatch() {
  ts::Mesh mesh(ts::devices(), {8}, {"x"});
  const std::int64_t n = ts::process_index() == 0 ? 8 : 16;
  Array x = ts::device_put(ts::ones({n}), ts::NamedSharding(mesh, P("x")));
  try {
    (void)ts::jit([](const Array& a) { return ts::sum(a); })(x).to_vector<float>();
    expect(false, "different shapes at a collective raise");
  } catch (const ts::DistributedError& e) {
    std::cout << "process " << ts::process_index() << ": " << e.what() << std::endl;
    expect(std::string(e.what()).find("another program") != std::string::npos, "the error says the programs differ");
  }
  // The same shapes and the same text, but a constant differs in its last
  // bit (a program's text shows 6 digits of a constant, and its first 8
  // elements): two programs.
  Array y = ts::device_put(ts::ones({16}), ts::NamedSharding(mesh, P("x")));
  try {
    const float c = ts::process_index() == 1 ? std::nextafter(1.0f, 2.0f) : 1.0f;
    (void)ts::jit([c](const Array& a) { return ts::sum(a * c); })(y).to_vector<float>();
    expect(false, "a constant that differs raises");
  } catch (const ts::DistributedError& e) {
    std::cout << "process " << ts::process_index() << " (constant): " << e.what() << std::endl;
    expect(std::string(e.what()).find("another program") != std::string::npos, "the error says the programs differ");
  }
}

void checkpoint(const std::string& dir) {
  auto values = tessel::mpi_test::checkpoint_values();
  for (bool resharded : {false, true}) {
    auto tree = ts::checkpoint::restore(dir + "/A", tessel::mpi_test::checkpoint_target(resharded));
    for (auto& [k, v] : values) {
      expect(tree[k].sharding() == *tessel::mpi_test::checkpoint_target(resharded)[k].sharding, k + "'s sharding");
      expect(tessel::mpi_test::whole_bytes(tree[k]) == tessel::mpi_test::whole_bytes(v),
             k + (resharded ? " restored onto other shardings" : " restored"));
    }
    if (!resharded) {
      ts::checkpoint::save(dir + "/B", tree);
      ts::checkpoint::save(dir + "/C", tree, {.async = true, .compression = "zstd"}).wait();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    // compare-mixed: the second process runs its launches on its devices'
    // threads while the first runs them in lockstep or inline (one thread
    // for all its devices, runtime/executable.cpp): the two meet with the
    // same messages.
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (mode == "compare-mixed" && rank && std::string(rank) == "1") {
      ts::config().lockstep_launches = false;
      ts::config().inline_cheap_programs = false;
    }
    ts::distributed::initialize();
    if ((mode == "compare" || mode == "compare-mixed") && argc > 2) compare(argv[2]);
    else if (mode == "early") early();
    else if (mode == "mismatch") mismatch();
    else if (mode == "checkpoint" && argc > 2) checkpoint(argv[2]);
    else {
      std::cout << "FAIL usage: worker compare FILE | compare-mixed FILE | early | mismatch" << std::endl;
      return 2;
    }
  } catch (const std::exception& e) {
    std::cout << "FAIL process " << ts::process_index() << ": " << e.what() << std::endl;
    return 1;
  }
  if (fails) return 1;
  std::cout << "OK " << mode << " process " << ts::process_index() << std::endl;
  return 0;
}
