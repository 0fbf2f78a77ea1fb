// Issue 39's "done when": the seed MLP's training, stopped and resumed from
// its checkpoint (samples/resume.cpp, CheckpointManager with async saves on
// a 4x2 mesh), prints the losses of a run that was never stopped, bit for bit.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::string run(const std::string& args) {
  const fs::path exe = fs::read_symlink("/proc/self/exe").parent_path() / ".." / "samples" / "resume";
  FILE* p = popen((exe.string() + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  CHECK(pclose(p) == 0);
  return out;
}

// The "step i loss L" lines.
std::vector<std::string> losses(const std::string& out) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("step ", 0) == 0) v.push_back(line);
  return v;
}

}  // namespace

TEST_CASE("the seed MLP stopped after 3 steps and resumed from its checkpoint gives the uninterrupted run's losses") {
  const fs::path dir = fs::temp_directory_path() / ("tessel_resume_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string args = " --steps 7 --sizes 64,128,128,128,10 --batch 128";
  const std::string whole = run("--dir " + (dir / "whole").string() + args);
  const std::string first = run("--dir " + (dir / "cut").string() + args + " --stop-at 3");
  const std::string rest = run("--dir " + (dir / "cut").string() + args);
  INFO(whole, first, rest);
  CHECK(first.find("stopped after step 3") != std::string::npos);
  CHECK(rest.find("resumed from step 3") != std::string::npos);
  auto a = losses(whole), b = losses(first), c = losses(rest);
  REQUIRE(a.size() == 7);
  CHECK(b.size() == 3);
  CHECK(c.size() == 4);
  b.insert(b.end(), c.begin(), c.end());
  CHECK(b == a);
  // max_to_keep = 3: the newest three steps are kept.
  CHECK(rest.find("done: steps 5 6 7") != std::string::npos);
  fs::remove_all(dir);
}
