#include "tessel/warnings.hpp"

#include <cstdio>
#include <mutex>
#include <set>

namespace tessel {

namespace {
std::mutex& mutex() {
  static std::mutex m;
  return m;
}
WarningHandler& handler() {
  static WarningHandler h;
  return h;
}
}  // namespace

WarningHandler set_warning_handler(WarningHandler h) {
  std::lock_guard<std::mutex> lock(mutex());
  std::swap(handler(), h);
  return h;
}

void warn(const std::string& message) {
  WarningHandler h;
  {
    std::lock_guard<std::mutex> lock(mutex());
    h = handler();
    if (!h) {
      static std::set<std::string> shown;
      if (shown.insert(message).second) std::fprintf(stderr, "UserWarning: %s\n", message.c_str());
      return;
    }
  }
  h(message);
}

}  // namespace tessel
