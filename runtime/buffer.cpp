#include <atomic>
#include "runtime/buffer.hpp"
#include "tessel/core/errors.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>

namespace tessel::rt {

void Event::set() {
  {
    std::lock_guard<std::mutex> lk(m_);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Event::set_error(std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lk(m_);
    error_ = std::move(e);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

void Event::wait() const {
  if (!done_.load(std::memory_order_acquire)) {
    std::unique_lock<std::mutex> lk(m_);
    cv_.wait(lk, [&] { return done_.load(std::memory_order_acquire); });
  }
  std::lock_guard<std::mutex> lk(m_);
  if (error_) std::rethrow_exception(error_);
}

namespace {

constexpr std::size_t kAlign = 64;

std::size_t rounded(std::size_t bytes) {
  // Large blocks by pages, so sizes that differ a little share blocks.
  const std::size_t unit = bytes >= (1u << 20) ? 4096 : kAlign;
  std::size_t r = (bytes + unit - 1) / unit * unit;
  return r ? r : kAlign;
}

// A fresh block from the system. Blocks of 2 MiB and more are 2 MiB-aligned
// and asked to be backed by huge pages: a fresh 256 MiB gradient is 65536
// page faults (each zeroing 4 KiB) otherwise, and the data-parallel MLP step
// on 8 devices spent a third of its CPU time in the kernel on them (measured:
// 4.9 M minor faults, 87 s system of 267 s CPU for two full-size steps on
// 2 cores). Huge pages also spare the matrix product's TLB.
void* system_alloc(std::size_t r) {
  constexpr std::size_t kHuge = std::size_t(2) << 20;
  if (r < kHuge) return std::aligned_alloc(kAlign, r);
  // posix_memalign: aligned_alloc requires the size to be a multiple of the alignment.
  void* block = nullptr;
  if (posix_memalign(&block, kHuge, r) != 0) return nullptr;
  madvise(block, r, MADV_HUGEPAGE);  // advice only: failure changes nothing but speed
  return block;
}

ResourceExhaustedError out_of_memory(std::size_t bytes) {
  return ResourceExhaustedError("RESOURCE_EXHAUSTED: could not allocate " + std::to_string(bytes) +
                                " bytes of device memory (the host is out of memory)");
}

// Half of the machine's memory, and at most 32 GiB: the data-parallel MLP step
// on 8 devices frees and reallocates about 10 GiB per step at full size; what
// the cache cannot hold comes back from the system as fresh pages that the
// kernel zeroes (a quarter of all CPU time with an old 6 GiB cap on a 24 GiB
// host).
std::size_t default_cap() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  std::size_t phys = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : (std::size_t(8) << 30);
  return std::min(phys / 2, std::size_t(32) << 30);
}

BlockCache& pool() {
  static BlockCache* p = new BlockCache(default_cap());  // outlives every buffer freed at exit
  return *p;
}

}  // namespace

BlockCache::~BlockCache() { clear(); }

template <class More>
std::vector<BlockCache::Entry> BlockCache::evict_oldest(More more) {
  std::vector<Entry> out;
  while (!by_age_.empty() && more(by_age_.front())) {
    Entry e = by_age_.front();
    // The oldest block of a size is the first of its equal range (allocate
    // takes the newest), so this finds it at once.
    auto [lo, hi] = by_size_.equal_range(e.size);
    for (auto it = lo; it != hi; ++it)
      if (it->second == by_age_.begin()) {
        by_size_.erase(it);
        break;
      }
    by_age_.pop_front();
    cached_ -= e.size;
    out.push_back(e);
  }
  return out;
}

bool BlockCache::stale(const Entry& e) const { return e.freed_at + 2 * cap_ < clock_; }

void BlockCache::give_back(const std::vector<Entry>& blocks) {
  for (auto& e : blocks) std::free(e.block);
}

void* BlockCache::allocate(std::size_t bytes) {
  const std::size_t r = rounded(bytes);
  std::vector<Entry> stale_blocks;
  void* block = nullptr;
  {
    std::lock_guard<std::mutex> lk(m_);
    clock_ += r;
    auto it = by_size_.upper_bound(r);
    if (it != by_size_.begin() && (--it)->first == r) {  // the newest block of this size
      block = it->second->block;
      by_age_.erase(it->second);
      by_size_.erase(it);
      cached_ -= r;
    } else {
      fresh_ += r;
    }
    stale_blocks = evict_oldest([&](const Entry& e) { return stale(e); });
  }
  give_back(stale_blocks);
  if (block) return block;
  block = system_alloc(r);
  if (!block) {
    // Out of memory: give the cache back and try once more.
    clear();
    block = system_alloc(r);
    if (!block) throw out_of_memory(bytes);
  }
  return block;
}

void BlockCache::free(void* block, std::size_t bytes) {
  if (!block) return;
  const std::size_t r = rounded(bytes);
  std::vector<Entry> stale_blocks;
  {
    std::lock_guard<std::mutex> lk(m_);
    stale_blocks = evict_oldest([&](const Entry& e) { return stale(e); });
    if (cached_ + r <= cap_) {
      by_age_.push_back({r, block, clock_});
      by_size_.emplace(r, std::prev(by_age_.end()));
      cached_ += r;
      block = nullptr;
    }
  }
  give_back(stale_blocks);
  std::free(block);  // the cache is full of blocks still being reused: keep those
}

std::size_t BlockCache::cached() const {
  std::lock_guard<std::mutex> lk(m_);
  return cached_;
}

std::size_t BlockCache::fresh() const {
  std::lock_guard<std::mutex> lk(m_);
  return fresh_;
}

void BlockCache::clear() {
  std::vector<Entry> all;
  {
    std::lock_guard<std::mutex> lk(m_);
    all = evict_oldest([](const Entry&) { return true; });
  }
  give_back(all);
}

namespace {

// Blocks under this size are not the BlockCache's: malloc's heap holds them
// without page faults. Held in the cache, each cost two list and map nodes
// per free, and thousands of them pinned between malloc's chunks made every
// later allocation slower (measured: a cached jit call over 8 devices took
// 6.5-10.8 us, and 10.5-14.2 us after 20,000 eager results had been kept and
// dropped, malloc's chunk search a third of its time).
constexpr std::size_t kCachedFrom = std::size_t(64) << 10;

// A few freed small blocks per size, for the next request of that size (an
// eager op's result: malloc's aligned path skips its own per-thread cache,
// 0.8 us more per call). A stack per size class threaded through the blocks
// themselves (no node to allocate), at most kPerSize blocks and kMaxBytes in
// all; the rest go back to malloc, where they can merge with their
// neighbours.
class SmallBlocks {
 public:
  void* allocate(std::size_t r) {
    {
      std::lock_guard<std::mutex> lk(m_);
      Size& s = sizes_[r / kAlign - 1];
      if (s.head) {
        void* b = s.head;
        s.head = *static_cast<void**>(b);
        --s.count;
        held_ -= r;
        return b;
      }
    }
    return std::aligned_alloc(kAlign, r);
  }
  void free(void* b, std::size_t r) {
    {
      std::lock_guard<std::mutex> lk(m_);
      Size& s = sizes_[r / kAlign - 1];
      if (s.count < kPerSize && held_ + r <= kMaxBytes) {
        *static_cast<void**>(b) = s.head;
        s.head = b;
        ++s.count;
        held_ += r;
        return;
      }
    }
    std::free(b);
  }

 private:
  static constexpr int kPerSize = 64;
  static constexpr std::size_t kMaxBytes = std::size_t(16) << 20;
  struct Size {
    void* head = nullptr;
    int count = 0;
  };
  std::mutex m_;
  Size sizes_[kCachedFrom / kAlign];
  std::size_t held_ = 0;
};

SmallBlocks& small_blocks() {
  static SmallBlocks* p = new SmallBlocks;  // outlives every buffer freed at exit
  return *p;
}

}  // namespace

namespace {
std::atomic<std::size_t> live{0}, peak{0};
void count_alloc(std::size_t bytes) {
  const std::size_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  std::size_t p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}
}  // namespace

std::size_t live_bytes() { return live.load(std::memory_order_relaxed); }
std::size_t peak_live_bytes() { return peak.load(std::memory_order_relaxed); }
void reset_peak_live_bytes() { peak.store(live.load(std::memory_order_relaxed), std::memory_order_relaxed); }

void* device_alloc(std::size_t bytes) {
  const std::size_t r = rounded(bytes);
  void* block = r >= kCachedFrom ? pool().allocate(bytes) : small_blocks().allocate(r);
  if (!block) throw out_of_memory(bytes);
  count_alloc(bytes);
  return block;
}

void device_free(void* block, std::size_t bytes) {
  if (!block) return;
  live.fetch_sub(bytes, std::memory_order_relaxed);
  const std::size_t r = rounded(bytes);
  if (r >= kCachedFrom) pool().free(block, bytes);
  else small_blocks().free(block, r);
}

std::size_t cached_bytes() { return pool().cached(); }

std::size_t fresh_bytes() { return pool().fresh(); }

Buffer::Buffer(int device, std::size_t bytes, bool deferred)
    : device_(device), bytes_(bytes), data_(deferred ? nullptr : device_alloc(bytes)) {}

void* Buffer::materialize() {
  if (owner_) return data();
  if (!data_) data_ = device_alloc(bytes_);
  return data_;
}

void Buffer::drop_block() noexcept {
  if (owner_) return;
  if (release_) {  // even over no bytes (an empty array's null data): its owner waits for it
    // A destructor cannot throw: a release that does is reported, not propagated.
    try {
      auto release = std::move(release_);
      release_ = nullptr;
      release();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tessel: the release of an external buffer threw: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "tessel: the release of an external buffer threw\n");
    }
  } else if (data_) {
    device_free(data_, bytes_);
  }
  data_ = nullptr;
}

Buffer::~Buffer() {
  if (owner_) owner_->viewers_.fetch_sub(1, std::memory_order_acq_rel);
  drop_block();
}

void Buffer::view(std::shared_ptr<Buffer> owner) {
  TESSEL_CHECK_INTERNAL(owner && owner.get() != this && owner->bytes_ == bytes_ && !ready_.is_set(),
                        "Buffer::view: a ready buffer, itself, or a block of another size");
  // A settled owner that views another: view the block's own buffer (no
  // chains through re-placed arrays). An owner not ready yet may still
  // change its block (deferred, or a view to be): data() follows it then.
  while (owner->owner_ && owner->ready_.is_set()) owner = owner->owner_;
  drop_block();
  owner->viewers_.fetch_add(1, std::memory_order_acq_rel);
  if (owner_) owner_->viewers_.fetch_sub(1, std::memory_order_acq_rel);
  owner_ = std::move(owner);
}

std::shared_ptr<Buffer> Buffer::allocate(int device, std::size_t bytes) {
  // One allocation for the buffer and its count (make_shared cannot reach
  // the private constructor).
  struct Made : Buffer {
    Made(int device, std::size_t bytes, bool deferred) : Buffer(device, bytes, deferred) {}
  };
  return std::make_shared<Made>(device, bytes, false);
}

std::shared_ptr<Buffer> Buffer::deferred(int device, std::size_t bytes) {
  struct Made : Buffer {
    Made(int device, std::size_t bytes) : Buffer(device, bytes, true) {}
  };
  return std::make_shared<Made>(device, bytes);
}

std::shared_ptr<Buffer> Buffer::external(int device, std::size_t bytes, void* data, std::function<void()> release) {
  struct Made : Buffer {
    Made(int device, std::size_t bytes) : Buffer(device, bytes, true) {}
  };
  auto b = std::make_shared<Made>(device, bytes);
  b->data_ = data;
  // Never empty, so that drop_block tells the block from the cache's.
  b->release_ = release ? std::move(release) : std::function<void()>([] {});
  b->ready_.set();
  return b;
}

}  // namespace tessel::rt
