// Devices and configuration (API.md "Devices and configuration").
#pragma once

#include <compare>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace tessel {

// Settings read at first use of the devices; change them before that.
struct Config {
  // Number of devices (1..64) of this process (every process has as many).
  // Default 8, or env TESSEL_DEVICE_COUNT.
  int device_count = 8;
  // Threads per device; 0 means max(1, hardware threads / device_count).
  int threads_per_device = 0;
  // JAX's jax_threefry_partitionable (default true; env TESSEL_THREEFRY_PARTITIONABLE=0/1).
  bool threefry_partitionable = true;
  // Where each compiled program's IR stages are written (env TESSEL_DUMP_DIR); empty: nowhere.
  std::string dump_dir;
  // Bounds of the compile cache (programs of jit and eager ops): the least
  // recently used program goes when either is exceeded; a program nobody
  // holds is then freed, its machine code too. Read at every compile.
  std::size_t compile_cache_max_entries = 4096;
  std::size_t compile_cache_max_bytes = std::size_t(512) << 20;
  // jax_log_compiles (env TESSEL_LOG_COMPILES=0/1): one line on stderr per
  // compile, with the function, why it compiled (first call, or which
  // argument's shape, dtype or sharding, or the traced program, changed) and
  // the time of each pass.
  bool log_compiles = false;
  // The persistent compilation cache (env TESSEL_CACHE_DIR); empty: none.
  // Kernels' object code is stored there keyed by their exact IR, the host
  // CPU and tessel's version, so a later process skips LLVM for kernels it
  // has seen. Entries that are corrupt or made for another CPU are ignored.
  std::string compilation_cache_dir;
  // Cheap programs (a few microseconds of kernels and small collectives) run
  // on the calling thread when their devices are idle, every device in
  // lockstep, instead of waking the devices' threads (env
  // TESSEL_INLINE_CHEAP=0/1). The same results, bit for bit, either way.
  bool inline_cheap_programs = true;
  // Where the devices' threads outnumber the cores (8 devices on 2), a
  // program over several devices runs in lockstep: the devices' threads take
  // it in turn and the last runs every device's part, thunk by thunk, the
  // devices side by side on all cores, collectives once for all members; no
  // device sleeps waiting for a peer or a core mid-program (env
  // TESSEL_LOCKSTEP=0/1). Programs with control flow or library calls that
  // meet peers run on the devices' threads. The same bits either way.
  bool lockstep_launches = true;
};

// The process-wide settings.
Config& config();

// Bounds of the settings (and of their environment variables).
inline constexpr int kMaxDevices = 64;
inline constexpr int kMaxThreadsPerDevice = 1024;

namespace detail {
// Parses an environment variable's value strictly: a decimal integer in
// [lo, hi], else ValueError naming the variable, its value and the range.
int parse_env_int(const char* name, const char* text, int lo, int hi);
}  // namespace detail

class Device {
 public:
  explicit Device(int id) : id_(id) {}
  int id() const { return id_; }
  std::string platform() const { return "cpu"; }
  // The process that holds the device (ts::distributed); 0 in one process.
  int process_index() const;
  auto operator<=>(const Device&) const = default;

 private:
  int id_;
};

// "CpuDevice(id=3)"
std::ostream& operator<<(std::ostream& os, const Device& d);
std::string to_string(const Device& d);

// All devices of every process, ordered by id (starts the runtime on first
// use); process p holds ids p * local_device_count() onwards.
std::vector<Device> devices();
// This process's devices (all of them in a single process).
std::vector<Device> local_devices();
int device_count();
int local_device_count();
// This process among the processes of ts::distributed::initialize() (0 of 1 without it).
int process_index();
int process_count();
// Threads each device's arena runs with.
int threads_per_device();

}  // namespace tessel
