// Device memory. Devices share the host's memory, so a buffer is an aligned
// host allocation owned by one device; buffers are written once by the task
// that produces them and are immutable after their event is set.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>

namespace tessel::rt {

// A one-shot completion flag that can carry an error.
class Event {
 public:
  void set();
  void set_error(std::exception_ptr e);
  // Blocks until set; rethrows the error if one was set.
  void wait() const;
  bool is_set() const { return done_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
};

class Buffer {
 public:
  // Allocates `bytes` (64-byte aligned, at least one cache line) on `device`.
  static std::shared_ptr<Buffer> allocate(int device, std::size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  Event& ready() { return ready_; }
  const Event& ready() const { return ready_; }

 private:
  Buffer(int device, std::size_t bytes);
  int device_;
  std::size_t bytes_;
  void* data_;
  Event ready_;
};

using BufferRef = std::shared_ptr<Buffer>;

// Device memory comes from a caching allocator: freed blocks are kept (up to
// a cap) and handed out again for the same size, so repeated programs do not
// pay the kernel's page faults and zeroing for every new buffer.
void* device_alloc(std::size_t bytes);
void device_free(void* p, std::size_t bytes);
// Bytes held in the cache now (for tests and reports).
std::size_t cached_bytes();

}  // namespace tessel::rt
