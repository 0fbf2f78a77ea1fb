#include "runtime/profile.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace tessel::rt::profile {

namespace {

struct Entry {
  double seconds = 0;
  long count = 0;
};

struct Profile {
  std::mutex mu;
  std::map<std::string, Entry> entries;
  ~Profile() {
    std::vector<std::pair<std::string, Entry>> v(entries.begin(), entries.end());
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    for (auto& e : v) total += e.second.seconds;
    std::fprintf(stderr, "tessel profile (launch position 0): %.1f ms in thunks\n", total * 1e3);
    for (auto& [what, e] : v)
      std::fprintf(stderr, "%10.2f ms %5.1f%% %6ld x  %s\n", e.seconds * 1e3, 100 * e.seconds / total, e.count,
                   what.c_str());
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

void record(const std::string& what, double seconds) {
  Profile& p = instance();
  std::lock_guard<std::mutex> lock(p.mu);
  Entry& e = p.entries[what];
  e.seconds += seconds;
  e.count += 1;
}

}  // namespace tessel::rt::profile
