#include "runtime/device.hpp"

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "tessel/core/errors.hpp"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace tessel::rt {

namespace {
thread_local int tls_device = -1;
thread_local tbb::task_arena* tls_arena = nullptr;
std::mutex g_start_mutex;
std::unique_ptr<Runtime> g_runtime;
}  // namespace

class Device {
 public:
  // busy counts the devices running a task (ComputeSlot::Width::machine_if_idle).
  Device(int id, int threads, std::atomic<int>* busy) : id_(id), arena_(threads, 1), busy_(busy) {
    thread_ = std::thread([this] { drive(); });
  }
  ~Device() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // The device counts as busy from its task's enqueueing until its queue is
  // empty and nothing runs: a launch's devices are busy before any of them
  // starts (Runtime::launch), so the first to start does not take every core
  // for a thunk its peers are about to run too.
  void enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lk(m_);
      queue_.push_back(std::move(task));
      ++enqueued_;
      if (pending_++ == 0) busy_->fetch_add(1);
    }
    cv_.notify_all();
  }

  // Claims the idle device for a task the caller runs itself: true when no
  // task is queued or running; then the driver starts nothing until release().
  bool claim() {
    std::lock_guard<std::mutex> lk(m_);
    if (running_ || claimed_ || !queue_.empty()) return false;
    claimed_ = true;
    return true;
  }
  void release() {
    bool queued;
    {
      std::lock_guard<std::mutex> lk(m_);
      claimed_ = false;
      queued = !queue_.empty();
    }
    if (queued) cv_.notify_all();
  }

  // Waits until every task enqueued before the call has finished.
  void drain() {
    std::unique_lock<std::mutex> lk(m_);
    std::uint64_t target = enqueued_;
    done_cv_.wait(lk, [&] { return finished_ >= target; });
  }

 private:
  void drive() {
    tls_device = id_;
    tls_arena = &arena_;
    arena_.execute([this] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> lk(m_);
          cv_.wait(lk, [&] { return stop_ || (!queue_.empty() && !claimed_); });
          if (queue_.empty()) return;
          task = std::move(queue_.front());
          queue_.pop_front();
          running_ = true;
        }
        try {
          task();
        } catch (const std::exception& e) {
          // Tasks report their own errors through buffer events; reaching
          // here is a bug, but the device must keep running.
          std::fprintf(stderr, "tessel: device %d: uncaught error in a task: %s\n", id_, e.what());
        } catch (...) {
          std::fprintf(stderr, "tessel: device %d: uncaught error in a task\n", id_);
        }
        task = nullptr;
        {
          std::lock_guard<std::mutex> lk(m_);
          ++finished_;
          running_ = false;
          if (--pending_ == 0) busy_->fetch_sub(1);
        }
        done_cv_.notify_all();
      }
    });
  }

  int id_;
  tbb::task_arena arena_;
  std::atomic<int>* busy_;
  std::thread thread_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t enqueued_ = 0, finished_ = 0;
  std::int64_t pending_ = 0;  // tasks queued or running
  bool stop_ = false;
  bool running_ = false;  // the driver runs a task
  bool claimed_ = false;  // the caller runs the device's work itself (Runtime::Inline)
};

struct Runtime::Impl {
  std::mutex launch_mutex;
  // The core budget (ComputeSlot).
  std::mutex slot_mutex;
  std::condition_variable slot_cv;
  int cores = 1, cores_free = 1, machine_waiters = 0, device_waiters = 0;
  std::atomic<int> busy_devices{0};
  // TESSEL_DOT_TURNS=1: large library calls take every core in turn where the
  // devices' threads fit the cores (ComputeSlot::machine_wide_pays).
  bool dot_turns = false;
  // Where machine-wide thunks run their loops: every core, the caller's slot
  // reserved. Owned by the runtime so that it outlives every launch.
  std::unique_ptr<tbb::task_arena> machine_arena;
};

Runtime::Runtime(const RuntimeOptions& opts) : opts_(opts), impl_(std::make_unique<Impl>()) {
  impl_->cores = std::max(int(std::max(1u, std::thread::hardware_concurrency())), opts.threads_per_device);
  impl_->cores_free = impl_->cores;
  impl_->machine_arena = std::make_unique<tbb::task_arena>(impl_->cores, 1);
  for (int i = 0; i < opts.device_count; ++i)
    devices_.push_back(std::make_unique<Device>(opts.first_device_id + i, opts.threads_per_device, &impl_->busy_devices));
}

Runtime::~Runtime() {
  // Devices drain their queues and join in their destructors.
  devices_.clear();
}

Runtime& Runtime::start(const RuntimeOptions& opts) {
  std::lock_guard<std::mutex> lk(g_start_mutex);
  if (g_runtime) {
    if (g_runtime->opts_.device_count != opts.device_count ||
        g_runtime->opts_.threads_per_device != opts.threads_per_device ||
        g_runtime->opts_.first_device_id != opts.first_device_id)
      throw Error(detail::cat("the runtime already runs ", g_runtime->opts_.device_count, " devices with ",
                              g_runtime->opts_.threads_per_device,
                              " threads each; device_count and threads_per_device must be set before first use"));
    return *g_runtime;
  }
  if (opts.device_count < 1 || opts.device_count > 64)
    throw Error(detail::cat("device_count must be in 1..64, got ", opts.device_count));
  if (opts.threads_per_device < 1)
    throw Error(detail::cat("threads_per_device must be >= 1, got ", opts.threads_per_device));
  const char* turns = std::getenv("TESSEL_DOT_TURNS");
  if (turns && *turns && std::string(turns) != "0" && std::string(turns) != "1")
    throw ValueError(detail::cat("environment variable TESSEL_DOT_TURNS='", turns,
                                 "' is not a decimal integer (expected 0..1)"));
  g_runtime.reset(new Runtime(opts));
  g_runtime->impl_->dot_turns = turns && std::string(turns) == "1";
  return *g_runtime;
}

ComputeSlot::ComputeSlot(Width w) {
  if (!g_runtime) return;
  auto& im = *g_runtime->impl_;
  std::unique_lock<std::mutex> lk(im.slot_mutex);
  if (w == Width::machine_if_idle) {
    // Idle: no other device has a task under way, so none will want cores
    // while this one computes.
    const bool alone = im.busy_devices.load() <= (current_device() >= 0 ? 1 : 0);
    const bool idle = alone && im.cores_free == im.cores && im.device_waiters == 0 && im.machine_waiters == 0;
    w = idle ? Width::machine : Width::device;
  }
  const int want = w == Width::machine ? im.cores : g_runtime->opts_.threads_per_device;
  if (w == Width::machine) {
    ++im.machine_waiters;
    im.slot_cv.wait(lk, [&] { return im.cores_free >= want; });
    --im.machine_waiters;
  } else {
    ++im.device_waiters;
    im.slot_cv.wait(lk, [&] { return im.cores_free >= want && im.machine_waiters == 0; });
    --im.device_waiters;
  }
  im.cores_free -= want;
  held_ = want;
  machine_ = w == Width::machine;
}

ComputeSlot::~ComputeSlot() {
  if (!held_) return;
  auto& im = *g_runtime->impl_;
  bool machine_waiting;
  {
    std::lock_guard<std::mutex> lk(im.slot_mutex);
    im.cores_free += held_;
    machine_waiting = im.machine_waiters > 0;
  }
  // Device-wide waiters all want the same number of cores: waking one is
  // enough (and on a 2-core host waking all of them costs measurably).
  if (machine_waiting || held_ > g_runtime->opts_.threads_per_device) im.slot_cv.notify_all();
  else im.slot_cv.notify_one();
}

int ComputeSlot::machine_threads() { return g_runtime ? g_runtime->impl_->cores : 1; }

bool ComputeSlot::machine_wide_pays() {
  if (!g_runtime || !g_runtime->impl_->dot_turns) return false;
  const auto& o = g_runtime->opts_;
  return o.threads_per_device < g_runtime->impl_->cores && o.device_count * o.threads_per_device <= g_runtime->impl_->cores;
}

Runtime& Runtime::get() {
  TESSEL_CHECK_INTERNAL(g_runtime, "the runtime was not started");
  return *g_runtime;
}

bool Runtime::started() {
  std::lock_guard<std::mutex> lk(g_start_mutex);
  return bool(g_runtime);
}

void Runtime::launch(const std::vector<int>& device_ids,
                     const std::function<std::function<void()>(int)>& task_for) {
  std::vector<std::function<void()>> tasks;
  tasks.reserve(device_ids.size());
  for (size_t i = 0; i < device_ids.size(); ++i) {
    TESSEL_CHECK_INTERNAL(is_local(device_ids[i]), "device id ", device_ids[i], " is not this process's");
    tasks.push_back(task_for(int(i)));
  }
  std::lock_guard<std::mutex> lk(impl_->launch_mutex);
  // Every device of the launch busy before the first starts (Device::enqueue):
  // the ones not yet enqueued counted here until they are.
  const int later = int(device_ids.size()) - 1;
  impl_->busy_devices.fetch_add(later);
  for (size_t i = 0; i < device_ids.size(); ++i) devices_[device_ids[i] - opts_.first_device_id]->enqueue(std::move(tasks[i]));
  impl_->busy_devices.fetch_sub(later);
}

bool Runtime::launch_claiming(const std::vector<int>& device_ids, std::function<void()> task) {
  std::vector<Device*> devs;
  devs.reserve(device_ids.size());
  for (int id : device_ids) {
    TESSEL_CHECK_INTERNAL(is_local(id), "device id ", id, " is not this process's");
    devs.push_back(devices_[std::size_t(id - opts_.first_device_id)].get());
  }
  std::lock_guard<std::mutex> lk(impl_->launch_mutex);
  for (std::size_t i = 1; i < devs.size(); ++i)
    if (!devs[i]->claim()) {
      while (i > 1) devs[--i]->release();
      return false;
    }
  impl_->busy_devices.fetch_add(int(devs.size()) - 1);
  devs[0]->enqueue(std::move(task));
  return true;
}

void Runtime::release_claimed(const std::vector<int>& device_ids) {
  impl_->busy_devices.fetch_sub(int(device_ids.size()) - 1);
  for (std::size_t i = 1; i < device_ids.size(); ++i)
    devices_[std::size_t(device_ids[i] - opts_.first_device_id)]->release();
}

Runtime::Inline::Inline(Runtime& runtime, const std::vector<int>& device_ids) : runtime_(runtime), ids_(device_ids) {
  std::vector<Device*> devs;
  devs.reserve(device_ids.size());
  for (int id : device_ids) {
    if (!runtime.is_local(id)) return;
    devs.push_back(runtime.devices_[std::size_t(id - runtime.opts_.first_device_id)].get());
  }
  // Under the launch lock: every launch after this one queues behind it.
  std::lock_guard<std::mutex> lk(runtime.impl_->launch_mutex);
  for (std::size_t i = 0; i < devs.size(); ++i)
    if (!devs[i]->claim()) {
      while (i > 0) devs[--i]->release();
      return;
    }
  devices_ = std::move(devs);
  runtime.impl_->busy_devices.fetch_add(int(devices_.size()));
}

Runtime::Inline::~Inline() {
  if (devices_.empty()) return;
  runtime_.impl_->busy_devices.fetch_sub(int(devices_.size()));
  for (Device* d : devices_) d->release();
}

bool Runtime::devices_share_cores() const {
  return std::int64_t(opts_.device_count) * opts_.threads_per_device > impl_->cores;
}

void Runtime::synchronize() {
  for (auto& d : devices_) d->drain();
}

void Runtime::synchronize_at_exit() {
  std::atexit([] {
    if (g_runtime) g_runtime->synchronize();
  });
}

namespace {
// Under ThreadSanitizer: Debian's oneTBB is not instrumented, so TSan cannot
// see that spawning a task orders the spawner's writes before the thief's
// reads, nor that the loop's join orders the workers' writes before the
// caller's. LoopBody marks both edges on the loop's own sync object; its call
// operator is left uninstrumented because the body object itself lives in a
// task that oneTBB copied and handed over (reading its fields is the first
// thing a thief does, before any edge can be marked).
#if defined(__SANITIZE_THREAD__)
void tsan_release(void* sync) { __tsan_release(sync); }
void tsan_acquire(void* sync) { __tsan_acquire(sync); }
#define TESSEL_NO_TSAN __attribute__((no_sanitize("thread")))
#else
void tsan_release(void*) {}
void tsan_acquire(void*) {}
#define TESSEL_NO_TSAN
#endif

struct LoopBody {
  const std::function<void(std::int64_t, std::int64_t)>* f;
  char* sync;
  TESSEL_NO_TSAN void operator()(const tbb::blocked_range<std::int64_t>& r) const {
    tsan_acquire(sync);
    (*f)(r.begin(), r.end());
    tsan_release(sync);
  }
};

// f over [begin, end) in chunks of at least `grain`, on the arena the caller is in.
void blocked_loop(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& f) {
  char sync = 0;
  tsan_release(&sync);
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(begin, end, std::max<std::int64_t>(grain, 1)), LoopBody{&f, &sync});
  tsan_acquire(&sync);
}
}  // namespace

void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& f) {
  if (end <= begin) return;
  if (!tls_arena || tls_arena->max_concurrency() <= 1 || end - begin <= grain) {
    f(begin, end);
    return;
  }
  blocked_loop(begin, end, grain, f);
}

void parallel_for_machine(std::int64_t begin, std::int64_t end, std::int64_t grain,
                          const std::function<void(std::int64_t, std::int64_t)>& f) {
  if (end <= begin) return;
  if (!g_runtime || g_runtime->impl_->cores <= 1 || end - begin <= grain) {
    f(begin, end);
    return;
  }
  g_runtime->impl_->machine_arena->execute([&] { blocked_loop(begin, end, grain, f); });
}

int current_device() { return tls_device; }

ActAs::ActAs(int device) : saved_device_(tls_device), saved_arena_(tls_arena) {
  tls_device = device;
  tls_arena = nullptr;
}

ActAs::~ActAs() {
  tls_device = saved_device_;
  tls_arena = static_cast<tbb::task_arena*>(saved_arena_);
}

}  // namespace tessel::rt
