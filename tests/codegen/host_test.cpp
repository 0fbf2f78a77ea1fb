#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "codegen/host.hpp"

using namespace tessel::codegen;

TEST_CASE("LLVM sees the host CPU that /proc/cpuinfo describes") {
  const HostCpu& cpu = host_cpu();
  CHECK_FALSE(cpu.name.empty());
  CHECK(cpu.float32_lanes() >= 4);
  std::ifstream f("/proc/cpuinfo");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string info = ss.str();
  auto flags_at = info.find("\nflags");
  REQUIRE(flags_at != std::string::npos);
  std::string flags = info.substr(flags_at, info.find('\n', flags_at + 1) - flags_at) + " ";
  for (std::string feat : {"avx2", "fma", "avx512f", "sse4.2"}) {
    std::string proc = feat == "sse4.2" ? "sse4_2" : feat;
    bool in_proc = flags.find(" " + proc + " ") != std::string::npos;
    CAPTURE(feat);
    CHECK(cpu.has(feat) == in_proc);
  }
}
