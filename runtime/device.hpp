// Devices. A device is a oneTBB task arena plus one driver thread that owns a
// FIFO of tasks; the driver enters the arena and runs its tasks in order, and
// parallel loops inside a task use the arena's other threads.
//
// Why a driver thread per device: collectives block until every participant
// arrives. With devices as arenas fed from TBB's shared worker pool, two
// devices could hold every worker while waiting for a third that never gets
// one. A thread per device guarantees each device makes progress.
//
// Why launches are atomic: a program on several devices is enqueued on all of
// them under one lock, so every device sees launches in the same global order;
// a task only ever waits on work enqueued before it, so the wait graph has no
// cycle and concurrent launches from many host threads cannot deadlock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace tessel::rt {

struct RuntimeOptions {
  int device_count = 8;  // this process's devices
  int threads_per_device = 1;
  // Global id of this process's first device: devices are numbered across
  // processes (process p holds ids p * device_count ...), runtime/mpi.hpp.
  int first_device_id = 0;
};

class Device;

class Runtime {
 public:
  // Starts the devices. Throws tessel::Error if already started with other options.
  static Runtime& start(const RuntimeOptions& opts);
  // The started runtime; throws InternalError when none was started.
  static Runtime& get();
  static bool started();

  // This process's devices (ids first_device_id() .. + device_count() - 1).
  int device_count() const { return int(devices_.size()); }
  int first_device_id() const { return opts_.first_device_id; }
  bool is_local(int device_id) const {
    return device_id >= opts_.first_device_id && device_id < opts_.first_device_id + device_count();
  }
  // The process holding a device (every process holds device_count() of them, in order).
  int process_of(int device_id) const { return device_id / device_count(); }
  int threads_per_device() const { return opts_.threads_per_device; }
  // Whether the devices' threads outnumber the host's cores (8 devices on 2
  // cores): then a launch over several devices runs in lockstep
  // (Executable::launch), not on every device's thread at once.
  bool devices_share_cores() const;
  // Enqueues task_for(i) on device_ids[i] for every i, as one atomic step
  // with respect to other launches. Every id must be this process's.
  void launch(const std::vector<int>& device_ids, const std::function<std::function<void()>(int)>& task_for);
  // A launch run by one device for all: when device_ids[1..] are all idle
  // (nothing queued or running), claims them and enqueues `task` on
  // device_ids[0], as one step with respect to other launches, so one
  // thread wakes instead of every device's; the task calls
  // release_claimed(device_ids) when done. False, claiming and enqueuing
  // nothing, when one of them is busy.
  bool launch_claiming(const std::vector<int>& device_ids, std::function<void()> task);
  void release_claimed(const std::vector<int>& device_ids);
  // Devices claimed for work the calling thread runs itself: cheap
  // programs, whose work costs less than waking device threads. Claims
  // every device of device_ids when all are idle (nothing queued or
  // running) and holds them until destroyed, so that later launches queue
  // behind the work; claims none (false) when one is busy or another
  // process's. The work must not wait on other devices' threads.
  class Inline {
   public:
    Inline(Runtime& runtime, const std::vector<int>& device_ids);
    ~Inline();
    Inline(const Inline&) = delete;
    Inline& operator=(const Inline&) = delete;
    explicit operator bool() const { return !devices_.empty(); }

   private:
    Runtime& runtime_;
    std::vector<int> ids_;
    std::vector<Device*> devices_;
  };
  // Waits until every task enqueued so far on every device has run.
  void synchronize();
  // Makes exit() wait for the devices before it destroys anything constructed
  // up to now. Launches are asynchronous, so work may still be running when
  // main() returns; exit() destroys function-local statics (the JIT's code
  // among them) in reverse order of construction, and the runtime itself
  // is older than all of them. Call it after constructing something kernels
  // use: the handler registered last runs first.
  static void synchronize_at_exit();

  ~Runtime();

 private:
  friend class ComputeSlot;
  friend void parallel_for_machine(std::int64_t, std::int64_t, std::int64_t,
                                   const std::function<void(std::int64_t, std::int64_t)>&);
  explicit Runtime(const RuntimeOptions& opts);
  RuntimeOptions opts_;
  std::vector<std::unique_ptr<Device>> devices_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The host's cores as a budget that thunks draw on while they compute.
// Devices are virtual on a shared-memory host, so two effects need a referee:
// with more device threads than cores (8 devices on 2 cores), time-slicing
// every device's matmul through the same caches is slower than letting
// cores / threads_per_device devices compute at once; and a program on one
// device should use the whole host, as JAX's does. A thunk holds
// `threads_per_device` cores; a machine-wide one holds all of them and runs
// on all of them, waiters for it going first. Large library calls (dots,
// convolutions, FFTs, LAPACK) ask for machine_if_idle: every core when no
// other device computes, else their device's. Taking every core in turn
// instead (TESSEL_DOT_TURNS=1, where the devices' threads fit the cores) was
// measured once to pay (8 concurrent 1024x8192x8192 matmuls on 2 threads each
// ran at a third of one on 16 threads) but on a 16-core Emerald Rapids (300
// MiB of L3) it serialised the devices: the MLP step data parallel over 8
// devices took 1.27x one device's time in turns, 1.00x side by side (4x2:
// 1.44x, 1.08x). Thunks that wait on other devices (collectives) hold
// nothing while they wait, so the waiting cannot deadlock.
class ComputeSlot {
 public:
  // machine_if_idle: every core when no other device has a task under way
  // and no thunk computes or waits for cores, else the device's share. For
  // oversubscribed hosts, where taking turns machine-wide does not pay while
  // every device computes, but a program on one device would otherwise leave
  // all cores but its own idle (JAX's CPU devices share one pool: a
  // one-device program uses the host).
  enum class Width { device, machine, machine_if_idle };
  explicit ComputeSlot(Width w = Width::device);
  ~ComputeSlot();
  ComputeSlot(const ComputeSlot&) = delete;
  ComputeSlot& operator=(const ComputeSlot&) = delete;
  // Whether this slot holds every core (the holder runs on parallel_for_machine).
  bool machine_wide() const { return machine_; }
  // Threads a machine-wide thunk may use: every core.
  static int machine_threads();
  // Whether large library calls take every core in turn (Width::machine):
  // only with TESSEL_DOT_TURNS=1, and never when the host is oversubscribed
  // (measured on 2 cores x 8 devices: one 2-thread matmul at a time ran the
  // MLP step 1.5x slower than two 1-thread ones side by side).
  static bool machine_wide_pays();

 private:
  int held_ = 0;
  bool machine_ = false;
};

// Runs f(i) for i in [begin, end) in chunks on the calling device's arena
// (plain loop when the device has one thread).
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& f);
// The same on every core of the host: for a thunk holding a machine-wide
// ComputeSlot (ComputeSlot::machine_threads() threads).
void parallel_for_machine(std::int64_t begin, std::int64_t end, std::int64_t grain,
                          const std::function<void(std::int64_t, std::int64_t)>& f);

// Id of the device whose driver runs the calling thread, or -1 on a host thread.
int current_device();

// While it lives, the calling thread acts as `device` (current_device()),
// its parallel_for running plain loops: a worker of a lockstep launch that
// runs one device's part of a thunk.
class ActAs {
 public:
  explicit ActAs(int device);
  ~ActAs();
  ActAs(const ActAs&) = delete;
  ActAs& operator=(const ActAs&) = delete;

 private:
  int saved_device_;
  void* saved_arena_;
};

}  // namespace tessel::rt
