// Environment variables are parsed strictly, with bounds: a bad value is a
// ts::Error naming the variable and the value, never a silent fallback, a
// wrapped integer, std::terminate or a foreign exception.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <tessel/tessel.hpp>

namespace {

struct Outcome {
  int code = -1;
  std::string out;
};

Outcome run_child(const std::string& env) {
  const auto exe = std::filesystem::read_symlink("/proc/self/exe").parent_path() / "env_child";
  REQUIRE(std::filesystem::exists(exe));
  // The child gets a clean tessel environment plus `env`.
  std::string cmd = "env -u TESSEL_DEVICE_COUNT -u TESSEL_THREADS_PER_DEVICE -u TESSEL_THREEFRY_PARTITIONABLE "
                    "-u TESSEL_DUMP_DIR -u TESSEL_LOG_COMPILES -u TESSEL_CACHE_DIR -u TESSEL_TRACE -u TESSEL_DOT_TURNS " + env + " " + exe.string() + " 2>&1";
  Outcome o;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) o.out += buf;
  int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

}  // namespace

TEST_CASE("bad environment variables are ts::Errors naming the variable and the value") {
  struct Bad {
    std::string env, needle;
  };
  const std::vector<Bad> bad = {
      {"TESSEL_DEVICE_COUNT=4294967297", "4294967297"},  // wrapped to 1 before
      {"TESSEL_DEVICE_COUNT=0", "TESSEL_DEVICE_COUNT"},
      {"TESSEL_DEVICE_COUNT=-3", "-3"},
      {"TESSEL_DEVICE_COUNT=65", "65"},
      {"TESSEL_DEVICE_COUNT=abc", "abc"},
      {"TESSEL_DEVICE_COUNT=8x", "8x"},
      {"TESSEL_DEVICE_COUNT=0x8", "0x8"},
      {"'TESSEL_DEVICE_COUNT= 8'", "TESSEL_DEVICE_COUNT"},
      {"TESSEL_DEVICE_COUNT=99999999999999999999", "99999999999999999999"},
      {"TESSEL_THREADS_PER_DEVICE=100000000", "100000000"},  // std::terminate before
      {"TESSEL_THREADS_PER_DEVICE=-1", "-1"},
      {"TESSEL_THREEFRY_PARTITIONABLE=2", "TESSEL_THREEFRY_PARTITIONABLE"},
      {"TESSEL_THREEFRY_PARTITIONABLE=yes", "yes"},
      {"TESSEL_DUMP_DIR=/proc/self/status", "/proc/self/status"},  // a file, not a directory
      {"TESSEL_LOG_COMPILES=2", "TESSEL_LOG_COMPILES"},
      {"TESSEL_LOG_COMPILES=yes", "yes"},
      {"TESSEL_DOT_TURNS=2", "TESSEL_DOT_TURNS"},
      {"TESSEL_DOT_TURNS=on", "on"},
  };
  for (auto& b : bad) {
    CAPTURE(b.env);
    Outcome o = run_child(b.env);
    CAPTURE(o.out);
    CHECK(o.code == 3);
    CHECK(o.out.find("ts::Error") != std::string::npos);
    CHECK(o.out.find(b.needle) != std::string::npos);
  }
}

TEST_CASE("good environment variables are honoured") {
  Outcome o = run_child("TESSEL_DEVICE_COUNT=3 TESSEL_THREADS_PER_DEVICE=2");
  CAPTURE(o.out);
  CHECK(o.code == 0);
  CHECK(o.out.find("ok devices=3 threads=2 y[3]=6") != std::string::npos);
  o = run_child("TESSEL_DEVICE_COUNT=");  // set to nothing: the default
  CHECK(o.code == 0);
  CHECK(o.out.find("ok devices=8") != std::string::npos);
  for (const char* turns : {"TESSEL_DOT_TURNS=0", "TESSEL_DOT_TURNS=1", "TESSEL_NO_AMX=1"}) {
    o = run_child(turns);
    CHECK(o.code == 0);
  }
}

TEST_CASE("parse_env_int is strict and bounded") {
  using tessel::detail::parse_env_int;
  CHECK(parse_env_int("V", "7", 1, 64) == 7);
  CHECK(parse_env_int("V", "-2", -5, 5) == -2);
  for (const char* bad : {"", "+3", " 3", "3 ", "3.0", "1e2", "65", "0", "4294967297", "-", "--1", "0x10"})
    CHECK_THROWS_AS(parse_env_int("V", bad, 1, 64), tessel::ValueError);
}

TEST_CASE("a second process links the kernels the first stored (TESSEL_CACHE_DIR), and TESSEL_TRACE writes a trace") {
  const auto dir = std::filesystem::temp_directory_path() / ("tessel-env-cache-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const std::string env = "TESSEL_LOG_COMPILES=1 TESSEL_CACHE_DIR=" + dir.string();
  Outcome first = run_child(env);
  Outcome second = run_child(env + " TESSEL_TRACE=" + (dir / "child.trace.json").string());
  CAPTURE(first.out);
  CAPTURE(second.out);
  CHECK(first.code == 0);
  CHECK(second.code == 0);
  // The log line of the jitted function: compiled by LLVM first, linked from disk second.
  CHECK(first.out.find("because: first compile") != std::string::npos);
  CHECK(first.out.find("(LLVM: 1 kernel(s) in") != std::string::npos);
  CHECK(first.out.find("from the disk cache") == std::string::npos);
  CHECK(second.out.find("(LLVM: 0 kernel(s) in 0.00 ms, 1 from the disk cache)") != std::string::npos);
  CHECK(second.out.find("ok devices=8 threads=") != std::string::npos);
  CHECK(second.out.find("y[3]=6") != std::string::npos);
  // The trace, written at exit.
  CHECK(second.out.find("trace events to " + (dir / "child.trace.json").string()) != std::string::npos);
  std::ifstream trace(dir / "child.trace.json");
  std::stringstream text;
  text << trace.rdbuf();
  CHECK(text.str().find("\"traceEvents\"") != std::string::npos);
  CHECK(text.str().find("\"name\":\"device 7\"") != std::string::npos);
  std::filesystem::remove_all(dir);
}
