#include "runtime/buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

struct Pool {
  std::mutex m;
  std::multimap<std::size_t, void*> free_blocks;
  std::size_t cached = 0;
  std::size_t cap = 0;
  Pool() {
    // At most half of the machine's memory, and 32 GiB: the data-parallel
    // MLP step on 8 devices frees and reallocates about 10 GiB per step at
    // full size; what the cache cannot hold comes back from the system as
    // fresh pages that the kernel zeroes (a quarter of all CPU time with the
    // old 6 GiB cap on a 24 GiB host).
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    std::size_t phys = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : (std::size_t(8) << 30);
    cap = std::min(phys / 2, std::size_t(32) << 30);
  }
  ~Pool() {
    for (auto& [size, p] : free_blocks) std::free(p);
  }
};

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

Pool& pool() {
  static Pool* p = new Pool();  // outlives every buffer freed at exit
  return *p;
}

}  // namespace

void* device_alloc(std::size_t bytes) {
  const std::size_t r = rounded(bytes);
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lk(p.m);
    auto it = p.free_blocks.find(r);
    if (it != p.free_blocks.end()) {
      void* block = it->second;
      p.free_blocks.erase(it);
      p.cached -= r;
      return block;
    }
  }
  void* block = system_alloc(r);
  if (!block) {
    // Out of memory: give the cache back and try once more.
    std::lock_guard<std::mutex> lk(p.m);
    for (auto& [size, q] : p.free_blocks) std::free(q);
    p.free_blocks.clear();
    p.cached = 0;
    block = system_alloc(r);
    if (!block) throw std::bad_alloc();
  }
  return block;
}

void device_free(void* block, std::size_t bytes) {
  if (!block) return;
  const std::size_t r = rounded(bytes);
  Pool& p = pool();
  std::lock_guard<std::mutex> lk(p.m);
  if (p.cached + r > p.cap) {
    std::free(block);
    return;
  }
  p.free_blocks.emplace(r, block);
  p.cached += r;
}

std::size_t cached_bytes() {
  std::lock_guard<std::mutex> lk(pool().m);
  return pool().cached;
}

Buffer::Buffer(int device, std::size_t bytes) : device_(device), bytes_(bytes), data_(device_alloc(bytes)) {}

Buffer::~Buffer() { device_free(data_, bytes_); }

std::shared_ptr<Buffer> Buffer::allocate(int device, std::size_t bytes) {
  return std::shared_ptr<Buffer>(new Buffer(device, bytes));
}

}  // namespace tessel::rt
