#include "runtime/profile.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace tessel::rt::profile {

namespace {

struct Entry {
  double seconds = 0, cpu = 0;
  long count = 0;
};

struct Profile {
  std::mutex mu;
  std::map<std::string, Entry> entries;
  ~Profile() {
    std::vector<std::pair<std::string, Entry>> v(entries.begin(), entries.end());
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0, cpu = 0;
    for (auto& e : v) total += e.second.seconds, cpu += e.second.cpu;
    std::fprintf(stderr, "tessel profile (launch position 0): %.1f ms in thunks, %.1f ms of it on the CPU\n",
                 total * 1e3, cpu * 1e3);
    std::fprintf(stderr, "%10s %6s %10s %7s\n", "wall (ms)", "wall%", "cpu (ms)", "count");
    for (auto& [what, e] : v)
      std::fprintf(stderr, "%10.2f %5.1f%% %10.2f %6ldx  %s\n", e.seconds * 1e3, 100 * e.seconds / total, e.cpu * 1e3,
                   e.count, what.c_str());
  }
};

Profile& instance() {
  static Profile p;
  return p;
}

}  // namespace

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSEL_PROFILE");
    return v && *v && std::string(v) != "0";
  }();
  return on;
}

void record(const std::string& what, double wall_seconds, double cpu_seconds) {
  Profile& p = instance();
  std::lock_guard<std::mutex> lock(p.mu);
  Entry& e = p.entries[what];
  e.seconds += wall_seconds;
  e.cpu += cpu_seconds;
  e.count += 1;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace tessel::rt::profile
