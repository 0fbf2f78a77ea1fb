#include <tessel/device.hpp>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <sstream>
#include <thread>

#include "runtime/device.hpp"
#include "dsl/src/array_impl.hpp"
#include "runtime/mpi.hpp"
#include "tessel/core/errors.hpp"

namespace tessel {

namespace {

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;  // unset or set to nothing: the default
  return detail::parse_env_int(name, v, lo, hi);
}

Config make_config() {
  Config c;
  c.device_count = env_int("TESSEL_DEVICE_COUNT", 8, 1, kMaxDevices);
  c.threefry_partitionable = env_int("TESSEL_THREEFRY_PARTITIONABLE", 1, 0, 1) != 0;
  c.threads_per_device = env_int("TESSEL_THREADS_PER_DEVICE", 0, 0, kMaxThreadsPerDevice);
  if (const char* d = std::getenv("TESSEL_DUMP_DIR")) c.dump_dir = d;
  c.log_compiles = env_int("TESSEL_LOG_COMPILES", 0, 0, 1) != 0;
  if (const char* d = std::getenv("TESSEL_CACHE_DIR")) c.compilation_cache_dir = d;
  c.inline_cheap_programs = env_int("TESSEL_INLINE_CHEAP", 1, 0, 1) != 0;
  c.lockstep_launches = env_int("TESSEL_LOCKSTEP", 1, 0, 1) != 0;
  return c;
}

}  // namespace

Config& config() {
  static Config c = make_config();
  return c;
}

namespace detail {

int parse_env_int(const char* name, const char* text, int lo, int hi) {
  // Strictly: optional sign, decimal digits, nothing else, within [lo, hi].
  std::string s(text);
  bool ok = !s.empty();
  for (size_t i = 0; ok && i < s.size(); ++i) ok = std::isdigit((unsigned char)s[i]) || (i == 0 && s[i] == '-' && s.size() > 1);
  long long x = 0;
  if (ok) {
    errno = 0;
    char* end = nullptr;
    x = std::strtoll(s.c_str(), &end, 10);
    ok = errno == 0 && *end == '\0';
  }
  if (!ok)
    throw ValueError(cat("environment variable ", name, "='", s, "' is not a decimal integer (expected ", lo, "..", hi,
                         ")"));
  if (x < lo || x > hi)
    throw ValueError(cat("environment variable ", name, "=", s, " is out of range: expected ", lo, "..", hi));
  return int(x);
}

// Starts the runtime from config() on first use.
rt::Runtime& runtime() {
  if (rt::Runtime::started()) {
    rt::Runtime& r = rt::Runtime::get();
    const Config& c = config();
    if (c.device_count != r.device_count())
      throw ValueError(cat("config().device_count was changed to ", c.device_count, " after the runtime started with ",
                           r.device_count(), " devices; set it (or TESSEL_DEVICE_COUNT) before first use"));
    if (c.threads_per_device != 0 && c.threads_per_device != r.threads_per_device())
      throw ValueError(cat("config().threads_per_device was changed to ", c.threads_per_device,
                           " after the runtime started with ", r.threads_per_device(),
                           " threads per device; set it (or TESSEL_THREADS_PER_DEVICE) before first use"));
    return r;
  }
  const Config& c = config();
  if (c.device_count < 1 || c.device_count > kMaxDevices)
    throw ValueError(cat("device_count must be in 1..", kMaxDevices,
                         " (config().device_count or TESSEL_DEVICE_COUNT), got ", c.device_count));
  if (c.threads_per_device < 0 || c.threads_per_device > kMaxThreadsPerDevice)
    throw ValueError(cat("threads_per_device must be in 0..", kMaxThreadsPerDevice,
                         " (config().threads_per_device or TESSEL_THREADS_PER_DEVICE; 0: cores / devices), got ",
                         c.threads_per_device));
  int hw = int(std::thread::hardware_concurrency());
  if (hw < 1) hw = 1;
  rt::RuntimeOptions opts;
  opts.device_count = c.device_count;
  opts.first_device_id = rt::mpi::initialized() ? rt::mpi::rank() * c.device_count : 0;
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
  const int n = device_count();
  std::vector<Device> out;
  for (int i = 0; i < n; ++i) out.emplace_back(i);
  return out;
}

std::vector<Device> local_devices() {
  rt::Runtime& r = detail::runtime();
  std::vector<Device> out;
  for (int i = 0; i < r.device_count(); ++i) out.emplace_back(r.first_device_id() + i);
  return out;
}

int device_count() { return detail::runtime().device_count() * process_count(); }
int local_device_count() { return detail::runtime().device_count(); }

int process_index() { return rt::mpi::initialized() ? rt::mpi::rank() : 0; }
int process_count() { return rt::mpi::initialized() ? rt::mpi::size() : 1; }

namespace detail {
int process_of_device(int id) { return rt::mpi::initialized() ? runtime().process_of(id) : 0; }
}  // namespace detail

int Device::process_index() const { return detail::process_of_device(id_); }

int threads_per_device() { return detail::runtime().threads_per_device(); }

}  // namespace tessel
