// Seeing what tessel does: the Chrome trace (ts::profiler), the compile log
// (config().log_compiles) and the persistent compilation cache
// (config().compilation_cache_dir).
#include <doctest/doctest.h>

#include <thread>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <tessel/tessel.hpp>

#include "codegen/jit.hpp"
#include "dsl/src/pipeline.hpp"

namespace ts = tessel;
namespace fs = std::filesystem;
using ts::P;

namespace {

fs::path fresh_dir(const std::string& what) {
  fs::path d = fs::temp_directory_path() / ("tessel-" + what + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

// Restores a config field at the end of a scope.
template <class T>
struct Setting {
  T& field;
  T old;
  Setting(T& f, T v) : field(f), old(f) { field = std::move(v); }
  ~Setting() { field = old; }
};

// std::cerr's text while it lives.
struct CaptureCerr {
  std::ostringstream text;
  std::streambuf* old;
  CaptureCerr() : old(std::cerr.rdbuf(text.rdbuf())) {}
  ~CaptureCerr() { std::cerr.rdbuf(old); }
};

// Drops every program from the compile cache (and with it, once nobody holds
// them, their kernels' machine code).
void forget_programs() {
  static int fresh = 0;
  auto& cfg = ts::config();
  Setting<std::size_t> one(cfg.compile_cache_max_entries, 1);
  const double c = 1000.0 + ++fresh;  // a program not in the cache: inserting it evicts the rest
  ts::jit([c](ts::Array v) { return v * c; })(ts::ones({5})).block_until_ready();
}

}  // namespace

TEST_CASE("a trace has a track per device, dispatch and compile, with kernels, dots, collectives and waits") {
  if (ts::device_count() < 8) return;
  // 8 x 8: cheap, run by the calling thread for every device in lockstep
  // (no waits); 256 x 256: a lockstep launch where the devices' threads
  // outnumber the cores (no waits), and on the devices' own threads, each
  // waiting for its peers in the collective.
  const bool share_cores =
      std::int64_t(ts::device_count()) * ts::threads_per_device() > std::int64_t(std::thread::hardware_concurrency());
  std::set<std::int64_t> compiled_sizes;
  for (const auto& [size, lockstep] : {std::pair<std::int64_t, bool>{8, true}, {256, true}, {256, false}}) {
    CAPTURE(size);
    CAPTURE(lockstep);
    Setting<bool> launches(ts::config().lockstep_launches, lockstep);
    const bool compiles = compiled_sizes.insert(size).second;  // the first run of a size compiles its program
    const bool waits = size != 8 && !(lockstep && share_cores);
    const fs::path dir = fresh_dir("trace");
    auto mesh = ts::make_mesh({2, 4}, {"x", "y"});
    auto a = ts::device_put(ts::arange(size * size, ts::float32).reshape({size, size}), ts::NamedSharding(mesh, P("x", "y")));
    auto b = ts::device_put(ts::ones({size, size}), ts::NamedSharding(mesh, P("x", "y")));
    auto f = ts::jit([](ts::Array a, ts::Array b) { return ts::sum(ts::matmul(ts::sin(a), b)); },
                     {.name = "traced_fn"});
    std::string path;
    {
      ts::profiler::start_trace(dir.string());
      CHECK_THROWS_AS(ts::profiler::start_trace(dir.string()), ts::ValueError);  // one at a time
      {
        ts::profiler::TraceAnnotation note("my step");
        f(a, b).block_until_ready();
      }
      path = ts::profiler::stop_trace();
    }
    CHECK_THROWS_AS(ts::profiler::stop_trace(), ts::ValueError);
    REQUIRE(fs::exists(path));
    CHECK(fs::path(path).parent_path() == dir);
    nlohmann::json j;
    {
      std::ifstream in(path);
      REQUIRE_NOTHROW(j = nlohmann::json::parse(in));  // well-formed JSON
    }
    REQUIRE(j.contains("traceEvents"));
    std::map<int, std::string> track_name;
    std::map<int, std::vector<nlohmann::json>> by_track;
    for (auto& e : j["traceEvents"]) {
      // The trace-event format: a phase, a process and thread id, and for
      // complete events a timestamp and a duration in microseconds.
      REQUIRE(e.contains("ph"));
      REQUIRE(e["pid"].is_number_integer());
      if (e["ph"] == "M") {
        if (e["name"] == "thread_name") track_name[e["tid"].get<int>()] = e["args"]["name"];
        continue;
      }
      REQUIRE(e["ph"] == "X");
      REQUIRE(e["name"].is_string());
      REQUIRE(e["cat"].is_string());
      REQUIRE(e["ts"].is_number());
      REQUIRE(e["dur"].get<double>() >= 0);
      by_track[e["tid"].get<int>()].push_back(e);
    }
    std::set<std::string> names;
    for (auto& [tid, n] : track_name) names.insert(n);
    CHECK(names.count("host dispatch"));
    CHECK(names.count("compile"));
    for (int d = 0; d < 8; ++d) CHECK(names.count("device " + std::to_string(d)));
    // Every event is on a named track, and events of one track nest (what
    // Perfetto requires of complete events on one thread).
    for (auto& [tid, events] : by_track) {
      CAPTURE(tid);
      CHECK(track_name.count(tid));
      std::sort(events.begin(), events.end(), [](auto& x, auto& y) {
        return x["ts"].template get<double>() < y["ts"].template get<double>() ||
               (x["ts"] == y["ts"] && x["dur"].template get<double>() > y["dur"].template get<double>());
      });
      std::vector<double> open_ends;
      for (auto& e : events) {
        const double t0 = e["ts"], t1 = t0 + e["dur"].get<double>();
        while (!open_ends.empty() && open_ends.back() <= t0 + 1e-3) open_ends.pop_back();
        if (!open_ends.empty()) CHECK(t1 <= open_ends.back() + 1e-3);
        open_ends.push_back(t1);
      }
    }
    auto track_of = [&](const std::string& n) {
      for (auto& [tid, name] : track_name)
        if (name == n) return tid;
      return -1;
    };
    // Each device ran the program: a fused kernel, a dot and a collective with
    // its bytes, and (on the devices' threads) waited for its peers inside the
    // collective.
    for (int d = 0; d < 8; ++d) {
      CAPTURE(d);
      std::multiset<std::string> cats;
      bool bytes = false;
      for (auto& e : by_track[track_of("device " + std::to_string(d))]) {
        cats.insert(e["cat"].get<std::string>());
        if (e["cat"] == "collective") {
          REQUIRE(e.contains("args"));
          CHECK(e["args"]["bytes_in"].get<std::size_t>() > 0);
          bytes = true;
        }
      }
      CHECK(cats.count("kernel") >= 1);
      CHECK(cats.count("dot") >= 1);
      CHECK(cats.count("collective") >= 1);
      CHECK((cats.count("wait") >= 1) == waits);
      CHECK(bytes);
    }
    // Dispatch: the call and the annotation around it; compile: tracing and
    // every pass of the pipeline, and the LLVM kernels.
    std::set<std::string> dispatch, compile;
    for (auto& e : by_track[track_of("host dispatch")]) dispatch.insert(e["name"].get<std::string>());
    for (auto& e : by_track[track_of("compile")]) compile.insert(e["name"].get<std::string>());
    CHECK(dispatch.count("my step"));
    CHECK(dispatch.count("traced_fn"));
    // (A later run of the same function may trace again: the new trace's
    // program is then found in the cache, and no pass runs.)
    if (compiles) CHECK(compile.count("trace traced_fn"));
    for (std::string pass : {"rewrite-for-mesh", "propagate", "partition", "fold-transposes", "plan-fusion",
                             "schedule-for-memory", "sink-collectives", "compile"}) {
      CAPTURE(pass);
      CHECK(compile.count(pass + " traced_fn") == (compiles ? 1 : 0));
    }
    if (compiles) CHECK((compile.count("llvm kernel") || compile.count("kernel from disk cache")));
    fs::remove_all(dir);
  }
}

TEST_CASE("profiler misuse is a ts::Error") {
  CHECK_THROWS_AS(ts::profiler::start_trace(""), ts::ValueError);
  CHECK_THROWS_AS(ts::profiler::start_trace("/proc/self/status/x"), ts::ValueError);
  CHECK_THROWS_AS(ts::profiler::stop_trace(), ts::ValueError);
  // The scoped form writes its file when it ends.
  const fs::path dir = fresh_dir("trace-scope");
  std::string path;
  {
    ts::profiler::Trace t(dir.string());
    (ts::ones({3}) + 1.0).block_until_ready();
    path = t.stop();
  }
  CHECK(fs::exists(path));
  fs::remove_all(dir);
}

TEST_CASE("log_compiles says what compiled, why, and each pass's time") {
  Setting<bool> on(ts::config().log_compiles, true);
  auto f = ts::jit([](ts::Array v) { return ts::exp(v) * 2.0; }, {.name = "logged_fn"});
  auto line_of = [](const std::string& text) {
    std::istringstream is(text);
    std::string line, found;
    while (std::getline(is, line))
      if (line.find("jit(logged_fn)") != std::string::npos) found = line;
    return found;
  };
  std::string first, second, third, again;
  {
    CaptureCerr c;
    f(ts::ones({8})).block_until_ready();
    first = line_of(c.text.str());
  }
  {
    CaptureCerr c;
    f(ts::ones({16})).block_until_ready();
    second = line_of(c.text.str());
  }
  {
    CaptureCerr c;
    f(ts::ones({16})).block_until_ready();  // cached: no compile, no line
    again = line_of(c.text.str());
  }
  if (ts::device_count() >= 2) {
    CaptureCerr c;
    auto mesh = ts::make_mesh({2}, {"x"});
    f(ts::device_put(ts::ones({16}), ts::NamedSharding(mesh, P("x")))).block_until_ready();
    third = line_of(c.text.str());
  }
  CAPTURE(first);
  CAPTURE(second);
  CAPTURE(third);
  CHECK(first.find("tessel: compiled jit(logged_fn) for (float32[8] (uncommitted))") == 0);
  CHECK(first.find("because: first compile") != std::string::npos);
  for (std::string pass : {"trace ", "rewrite-for-mesh ", "propagate ", "partition ", "compile ", "LLVM: "}) {
    CAPTURE(pass);
    CHECK(first.find(pass) != std::string::npos);
  }
  CHECK(second.find("because: argument 0 is float32[16] (uncommitted), was float32[8] (uncommitted)") !=
        std::string::npos);
  CHECK(again.empty());
  if (ts::device_count() >= 2) CHECK(third.find("argument 0 is float32[16] NamedSharding(") != std::string::npos);
}

namespace {

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::exists(dir))
    for (auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".tko") out.push_back(e.path());
  return out;
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_all(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

// The entry's checksum (FNV-1a 64 over everything before its last 8 bytes), recomputed.
void reseal(std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i + 8 < s.size(); ++i) h = (h ^ std::uint8_t(s[i])) * 1099511628211ull;
  std::memcpy(s.data() + s.size() - 8, &h, 8);
}

}  // namespace

TEST_CASE("the disk compilation cache: stored, reused without LLVM, corrupt and foreign entries ignored") {
  const fs::path dir = fresh_dir("cache");
  Setting<std::string> cache(ts::config().compilation_cache_dir, dir.string());
  using ts::codegen::Jit;
  // A program of its own (constants no other test uses): its kernels are new.
  auto run = [] {
    auto f = ts::jit([](ts::Array v) { return ts::tanh(v * 1.2345678 + 0.0625) / 3.0; });
    return f(ts::arange(37, ts::float32)).to_vector<float>();
  };
  std::vector<float> want(37);
  for (int i = 0; i < 37; ++i) want[i] = float(std::tanh(float(i) * 1.2345678f + 0.0625f) / 3.0f);
  auto check = [&](const std::vector<float>& got) {
    REQUIRE(got.size() == want.size());
    for (int i = 0; i < 37; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  };

  auto s0 = Jit::thread_stats();
  const std::vector<float> first = run();
  check(first);
  auto s1 = Jit::thread_stats();
  CHECK(s1.llvm_compiles > s0.llvm_compiles);
  CHECK(s1.disk_stores > s0.disk_stores);
  const auto stored = entries(dir);
  CHECK(stored.size() >= 1);

  // A process that has forgotten the program links the stored code: no LLVM.
  forget_programs();
  auto s2 = Jit::thread_stats();
  CHECK(run() == first);
  auto s3 = Jit::thread_stats();
  CHECK(s3.disk_hits > s2.disk_hits);
  CHECK(s3.llvm_compiles == s2.llvm_compiles + 0);

  // Damage: a truncated entry, a flipped byte, garbage, a foreign CPU (a
  // well-formed entry whose host line differs). None is loaded; the kernels
  // compile again and the answers are right.
  for (int damage = 0; damage < 4; ++damage) {
    CAPTURE(damage);
    for (auto& p : entries(dir)) {
      std::string s = read_all(p);
      REQUIRE(s.size() > 64);
      if (damage == 0) s.resize(s.size() / 2);
      if (damage == 1) s[s.size() / 2] ^= 0x20;
      if (damage == 2) s = std::string(s.size(), 'x');
      if (damage == 3) {
        // (Entries other programs left damaged above are skipped.)
        const std::size_t host = s.find("tessel-jit-1;");
        if (host == std::string::npos) continue;
        s[host + 7] = 'J';  // "tessel-Jit-1": made by another host or build
        reseal(s);
      }
      write_all(p, s);
    }
    forget_programs();
    auto a = Jit::thread_stats();
    CHECK(run() == first);
    auto b = Jit::thread_stats();
    CHECK(b.disk_hits == a.disk_hits);
    CHECK(b.disk_rejected > a.disk_rejected);
    CHECK(b.llvm_compiles > a.llvm_compiles);
    CHECK(b.disk_stores > a.disk_stores);  // rewritten whole
  }
  // The rewritten entries are good again.
  forget_programs();
  auto c0 = Jit::thread_stats();
  CHECK(run() == first);
  CHECK(Jit::thread_stats().disk_hits > c0.disk_hits);
  fs::remove_all(dir);
}
