#include <tessel/device.hpp>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "runtime/device.hpp"
#include "tracer/errors.hpp"

namespace tessel {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0') throw Error(detail::cat("environment variable ", name, "='", v, "' is not an integer"));
  return int(x);
}

Config make_config() {
  Config c;
  c.device_count = env_int("TESSEL_DEVICE_COUNT", 8);
  c.threefry_partitionable = env_int("TESSEL_THREEFRY_PARTITIONABLE", 1) != 0;
  c.threads_per_device = env_int("TESSEL_THREADS_PER_DEVICE", 0);
  if (const char* d = std::getenv("TESSEL_DUMP_DIR")) c.dump_dir = d;
  return c;
}

}  // namespace

Config& config() {
  static Config c = make_config();
  return c;
}

namespace detail {
// Starts the runtime from config() on first use.
rt::Runtime& runtime() {
  if (rt::Runtime::started()) return rt::Runtime::get();
  const Config& c = config();
  if (c.device_count < 1 || c.device_count > 64)
    throw Error(cat("device_count must be in 1..64 (config().device_count or TESSEL_DEVICE_COUNT), got ",
                    c.device_count));
  int hw = int(std::thread::hardware_concurrency());
  if (hw < 1) hw = 1;
  rt::RuntimeOptions opts;
  opts.device_count = c.device_count;
  opts.threads_per_device = c.threads_per_device > 0 ? c.threads_per_device : std::max(1, hw / c.device_count);
  return rt::Runtime::start(opts);
}
}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << "CpuDevice(id=" << d.id() << ')'; }

std::string to_string(const Device& d) {
  std::ostringstream os;
  os << d;
  return os.str();
}

std::vector<Device> devices() {
  int n = detail::runtime().device_count();
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.emplace_back(i);
  return out;
}

std::vector<Device> local_devices() { return devices(); }

int device_count() { return detail::runtime().device_count(); }

int threads_per_device() { return detail::runtime().threads_per_device(); }

}  // namespace tessel
