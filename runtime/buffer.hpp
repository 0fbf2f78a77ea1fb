// Device memory. Devices share the host's memory, so a buffer is an aligned
// host allocation owned by one device; buffers are written once by the task
// that produces them and are immutable after their event is set. Being
// immutable, one block may serve several devices of a process: a result the
// same on each (an all-reduce's, an all-gather's) is written once and the
// other devices' buffers view it (Buffer::view).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

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
  // A buffer whose block is taken when its writer asks (materialize) or
  // that becomes a view: a result that devices of a process may share
  // takes no block on the devices that view another's (a block allocated
  // and never written would go back to the cache untouched, and the next
  // run to write it pays its page faults).
  static std::shared_ptr<Buffer> deferred(int device, std::size_t bytes);
  // A buffer over memory that is not tessel's (ts::from_buffer, DLPack),
  // ready at once: `release` runs, once, when the buffer is destroyed (on
  // whichever thread drops the last reference), where another buffer's
  // block would go back to the cache. `data` need not be 64-byte aligned:
  // kernels assume only their element type's alignment (the caller checks it).
  static std::shared_ptr<Buffer> external(int device, std::size_t bytes, void* data, std::function<void()> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // A view's is its owner's, read when it is ready (the owner's block is
  // fixed by then: it may be deferred, or become a view itself, until its
  // writer is done).
  void* data() { return owner_ ? owner_->data() : data_; }
  // The writer's block: allocated now if the buffer was deferred.
  void* materialize();
  const void* data() const { return owner_ ? static_cast<const Buffer&>(*owner_).data() : data_; }
  std::size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  Event& ready() { return ready_; }
  const Event& ready() const { return ready_; }

  // Before this buffer is ready (by the task that would write it): gives its
  // block back (if it has one) and makes it a view of `owner`'s, which holds
  // the same bytes, written before this buffer's event is set. The view
  // keeps `owner` alive. Whoever reads data() waits for ready() first, so no
  // reader sees the old block, and the owner's is settled.
  void view(std::shared_ptr<Buffer> owner);
  // Whether this buffer views another's block, and whose.
  bool is_view() const { return owner_ != nullptr; }
  const Buffer* owner() const { return owner_.get(); }
  const std::shared_ptr<Buffer>& owner_ref() const { return owner_; }
  // How many buffers view this one's block now (each holds a reference to it).
  int viewers() const { return viewers_.load(std::memory_order_acquire); }
  // Whether the block is someone else's memory (Buffer::external).
  bool is_external() const { return bool(release_); }

 private:
  Buffer(int device, std::size_t bytes, bool deferred = false);
  // Gives the block back: to its owner for an external one, else to the cache.
  void drop_block() noexcept;
  int device_;
  std::size_t bytes_;
  void* data_;
  Event ready_;
  std::shared_ptr<Buffer> owner_;  // the block's owner, for a view
  std::atomic<int> viewers_{0};    // buffers whose owner_ is this one
  std::function<void()> release_;  // an external block's owner's release
};

using BufferRef = std::shared_ptr<Buffer>;

// Freed blocks kept for reuse, by size, so that repeated programs do not pay
// the kernel's page faults and zeroing for every new buffer. Holds at most
// `cap` bytes. A block that is not asked for again before twice `cap` more
// bytes have been asked for is stale: what runs now wants other sizes (the
// program or its layout changed), and the block goes back to the system.
// Twice, so that two programs taking turns whose blocks together exceed the
// cap keep reusing what the cache holds (measured: the data-parallel and
// 4x2 MLP steps taking turns, about 10 and 8 GiB of requests each against a
// 12 GiB cap, took 43-44 and 38-40 s with a window of one cap, each block's
// next use being further than that; with two, 34.5-36.7 and 36.6-37.3 s,
// the data-parallel step taking 0.7-1.2 GiB fresh). When the cache is full,
// a freed block goes back instead of one the cache holds (a repeated
// program larger than the cap then reuses a fixed part of its blocks every
// run, where evicting the oldest would reuse none). Thread-safe.
class BlockCache {
 public:
  explicit BlockCache(std::size_t cap) : cap_(cap) {}
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  // A block of `bytes` (rounded up), from the cache if it holds one of that size.
  void* allocate(std::size_t bytes);
  void free(void* block, std::size_t bytes);
  // Bytes held now.
  std::size_t cached() const;
  // Bytes taken from the system so far (the misses).
  std::size_t fresh() const;
  // Gives every cached block back to the system.
  void clear();

 private:
  struct Entry {
    std::size_t size;
    void* block;
    std::size_t freed_at;  // clock_ when freed
  };
  bool stale(const Entry& e) const;
  // Removes the oldest blocks while more(oldest); returns them, for
  // give_back outside the lock.
  template <class More>
  std::vector<Entry> evict_oldest(More more);
  static void give_back(const std::vector<Entry>& blocks);
  const std::size_t cap_;
  mutable std::mutex m_;
  std::list<Entry> by_age_;  // oldest first
  std::multimap<std::size_t, std::list<Entry>::iterator> by_size_;
  std::size_t cached_ = 0, fresh_ = 0;
  std::size_t clock_ = 0;  // bytes handed out so far
};

// Device memory: blocks of 64 KiB and more through the process's BlockCache,
// its cap half the machine's memory and at most 32 GiB; smaller ones from
// malloc, which keeps them for reuse itself.
void* device_alloc(std::size_t bytes);
void device_free(void* p, std::size_t bytes);
// Bytes held in the cache now, and taken from the system so far (for tests and reports).
std::size_t cached_bytes();
std::size_t fresh_bytes();
// Bytes of device blocks handed out and not yet freed (every device of the
// process), and the most there were since reset_peak_live_bytes: what
// programs actually hold, to hold memory_analysis to (tests).
std::size_t live_bytes();
std::size_t peak_live_bytes();
void reset_peak_live_bytes();

}  // namespace tessel::rt
