#include "runtime/collectives.hpp"

#include <condition_variable>
#include <map>
#include <mutex>

#include "tracer/errors.hpp"

namespace tessel::rt {

namespace {

class SharedMemoryCommunicator final : public Communicator {
 public:
  explicit SharedMemoryCommunicator(std::size_t n) : round_(n, 0) {}

  // Each meeting has its own condition variable, woken once, by the member
  // completing it (not every waiter of every group at every arrival).
  std::vector<const void*> exchange(int pos, const std::vector<std::int64_t>& group, const void* mine) override {
    std::unique_lock<std::mutex> lk(m_);
    Key key{round_[pos], group.front()};
    Meeting& m = meetings_[key];
    if (m.ptrs.empty()) m.ptrs.assign(group.size(), nullptr);
    std::size_t me = index_in(group, pos);
    m.ptrs[me] = mine;
    if (++m.arrived == group.size()) m.cv.notify_all();
    else m.cv.wait(lk, [&] { return error_ || m.arrived == group.size(); });
    if (error_) std::rethrow_exception(error_);
    return m.ptrs;
  }

  void release(int pos, const std::vector<std::int64_t>& group) override {
    std::unique_lock<std::mutex> lk(m_);
    Key key{round_[pos], group.front()};
    Meeting& m = meetings_[key];
    if (++m.released == group.size()) m.cv.notify_all();
    else m.cv.wait(lk, [&] { return error_ || m.released == group.size(); });
    if (error_) std::rethrow_exception(error_);
    if (++m.left == group.size()) meetings_.erase(key);
    ++round_[pos];
  }

  void abort(std::exception_ptr error) override {
    std::lock_guard<std::mutex> lk(m_);
    if (!error_) error_ = error;
    for (auto& [k, m] : meetings_) m.cv.notify_all();
  }

 private:
  struct Key {
    std::uint64_t round;
    std::int64_t leader;
    bool operator<(const Key& o) const { return round != o.round ? round < o.round : leader < o.leader; }
  };
  struct Meeting {
    std::vector<const void*> ptrs;
    std::size_t arrived = 0, released = 0, left = 0;
    std::condition_variable cv;
  };
  static std::size_t index_in(const std::vector<std::int64_t>& group, int pos) {
    for (std::size_t i = 0; i < group.size(); ++i)
      if (group[i] == pos) return i;
    throw InternalError("a device joined a collective group it is not in");
  }

  std::mutex m_;
  std::vector<std::uint64_t> round_;
  std::map<Key, Meeting> meetings_;
  std::exception_ptr error_;
};

}  // namespace

std::shared_ptr<Communicator> make_communicator(const std::vector<int>& device_ids) {
  return std::make_shared<SharedMemoryCommunicator>(device_ids.size());
}

}  // namespace tessel::rt
