#include "runtime/buffer.hpp"

#include <cstdlib>
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
}

Buffer::Buffer(int device, std::size_t bytes) : device_(device), bytes_(bytes) {
  std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded == 0) rounded = kAlign;
  data_ = std::aligned_alloc(kAlign, rounded);
  if (!data_) throw std::bad_alloc();
}

Buffer::~Buffer() { std::free(data_); }

std::shared_ptr<Buffer> Buffer::allocate(int device, std::size_t bytes) {
  return std::shared_ptr<Buffer>(new Buffer(device, bytes));
}

}  // namespace tessel::rt
