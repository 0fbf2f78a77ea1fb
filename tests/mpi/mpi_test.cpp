// Several processes (ts::distributed over Open MPI): 2 processes x 4 devices
// under mpirun (tests/mpi/worker.cpp) against this process's 1 x 8 devices,
// bit for bit; the multihost utilities; a process that leaves early and
// processes that diverge fail with DistributedError instead of hanging.
#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>

#include "tests/mpi/checkpoint_tree.hpp"
#include "tests/mpi/scenarios.hpp"

namespace ts = tessel;

namespace {

std::filesystem::path here() { return std::filesystem::read_symlink("/proc/self/exe").parent_path(); }

// mpirun -np n worker args...: (exit status, output).
std::pair<int, std::string> mpirun(int n, const std::string& args, const std::string& env = "") {
  const std::string devices = std::to_string(8 / n);
  // Under AddressSanitizer the workers run without leak detection: Open MPI's
  // components allocate at MPI_Init and are unloaded (dlclose) at finalize,
  // so LeakSanitizer reports their memory with no frame to suppress by; our
  // own code's leaks are checked by every single-process suite.
  if (const char* a = std::getenv("ASAN_OPTIONS")) setenv("ASAN_OPTIONS", (std::string(a) + ":detect_leaks=0").c_str(), 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  const std::string cmd = env + " timeout 300 mpirun -np " + std::to_string(n) +
                          " --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x TESSEL_DEVICE_COUNT=" + devices +
                          " -x TESSEL_DISTRIBUTED_TIMEOUT " +
                          (here() / "mpi_worker").string() + " " + args + " 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), int(buf.size()), p)) out += buf.data();
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("2 processes x 4 devices and 4 x 2 equal 1 process x 8 devices bit for bit; addressability; multihost utilities") {
  REQUIRE(ts::device_count() == 8);
  const auto file = std::filesystem::temp_directory_path() / ("tessel_mpi_ref_" + std::to_string(getpid()));
  {
    std::ofstream out(file, std::ios::binary);
    for (auto& s : tessel::mpi_test::scenarios()) {
      auto b = tessel::mpi_test::whole_bytes(s.run());
      const std::uint64_t n = b.size();
      out.write(reinterpret_cast<const char*>(&n), sizeof n);
      out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(n));
    }
  }
  setenv("TESSEL_DISTRIBUTED_TIMEOUT", "120", 1);
  const auto trace = std::filesystem::temp_directory_path() / ("tessel_mpi_trace_" + std::to_string(getpid()));
  for (int np : {2, 4}) {
    CAPTURE(np);
    // 2 processes also write TESSEL_TRACE: one file per process.
    auto [rc, out] = mpirun(np, "compare " + file.string(), np == 2 ? "TESSEL_TRACE=" + trace.string() : "");
    CAPTURE(out);
    CHECK(rc == 0);
    CHECK(count(out, "OK compare") == np);
    CHECK(count(out, "FAIL") == 0);
  }
  {
    // 2 x 4 devices on 2 cores run in lockstep (one thread acts for a
    // process's devices); here the second process runs on its devices'
    // threads instead, and the two still meet with the same bits.
    auto [rc, out] = mpirun(2, "compare-mixed " + file.string());
    CAPTURE(out);
    CHECK(rc == 0);
    CHECK(count(out, "OK compare-mixed") == 2);
    CHECK(count(out, "FAIL") == 0);
  }
  for (const char* p : {".p0", ".p1"}) {
    const auto f = trace.string() + p;
    CHECK_MESSAGE(std::filesystem::exists(f), f);
    if (std::filesystem::exists(f)) {
      std::ifstream in(f);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      CHECK(text.find("all-reduce between processes") != std::string::npos);
      std::filesystem::remove(f);
    }
  }
  CHECK(!std::filesystem::exists(trace));
  std::filesystem::remove(file);
}

TEST_CASE("a process that leaves before a collective: the other raises DistributedError within the timeout") {
  setenv("TESSEL_DISTRIBUTED_TIMEOUT", "3", 1);
  auto [rc, out] = mpirun(2, "early");
  CAPTURE(out);
  CHECK(count(out, "OK early") == 2);
  CHECK(count(out, "FAIL") == 0);
  CHECK(out.find("waited 3 s for process 1") != std::string::npos);
}

TEST_CASE("processes that reach a collective with different shapes, or different constants: both raise DistributedError") {
  setenv("TESSEL_DISTRIBUTED_TIMEOUT", "30", 1);
  auto [rc, out] = mpirun(2, "mismatch");
  CAPTURE(out);
  CHECK(count(out, "OK mismatch") == 2);
  CHECK(count(out, "FAIL") == 0);
  CHECK(count(out, "another program") >= 2);
  // Programs that differ only in a constant's 9th element differ too.
  CHECK(count(out, "(constant): ") == 2);
}

TEST_CASE("checkpoints: 2 processes x 4 devices read what 1 x 8 wrote, onto any sharding, and write the same files") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tessel_mpi_ckpt_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto values = tessel::mpi_test::checkpoint_values();
  std::map<std::string, ts::Array> tree;
  for (auto& [k, t] : tessel::mpi_test::checkpoint_target(false)) tree[k] = ts::device_put(values[k], *t.sharding);
  ts::checkpoint::save((dir / "A").string(), tree);
  ts::checkpoint::save((dir / "A.zstd").string(), tree, {.compression = "zstd"});
  setenv("TESSEL_DISTRIBUTED_TIMEOUT", "120", 1);
  auto [rc, out] = mpirun(2, "checkpoint " + dir.string());
  CAPTURE(out);
  CHECK(rc == 0);
  CHECK(count(out, "OK checkpoint") == 2);
  // What the two processes wrote is, file for file, what one process wrote.
  auto files = [](const fs::path& root) {
    std::map<std::string, std::string> m;
    for (auto& e : fs::recursive_directory_iterator(root))
      if (e.is_regular_file()) {
        std::ifstream in(e.path(), std::ios::binary);
        m[fs::relative(e.path(), root).string()] = std::string(std::istreambuf_iterator<char>(in), {});
      }
    return m;
  };
  const auto a = files(dir / "A"), b = files(dir / "B"), c = files(dir / "C"), az = files(dir / "A.zstd");
  // .zarray and .zattrs per leaf, the metadata, and the non-empty chunks: 7 + 8 + 1 + 4 + 3.
  CHECK(a.size() == 5 * 2 + 1 + 23);
  CHECK(a == b);
  CHECK(az == c);
  for (const char* name : {"B", "C"}) {
    auto back = ts::checkpoint::restore((dir / name).string(), tessel::mpi_test::checkpoint_target(true));
    for (auto& [k, v] : values) CHECK(tessel::mpi_test::whole_bytes(back[k]) == tessel::mpi_test::whole_bytes(v));
  }
  fs::remove_all(dir);
}
