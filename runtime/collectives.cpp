#include "runtime/collectives.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/buffer.hpp"
#include "runtime/device.hpp"
#include "runtime/mpi.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::rt {

namespace {

// What both communicators share: the meetings of the current rounds, keyed
// by (the member's round, the group's first position), and the error that
// wakes every waiter.
template <class Meeting>
class Meetings : public Communicator {
 public:
  void abort(std::exception_ptr error) override {
    std::lock_guard<std::mutex> lk(m_);
    if (!error_) error_ = error;
    for (auto& [k, m] : meetings_) m.cv.notify_all();
  }

 protected:
  explicit Meetings(std::size_t n) : round_(n, 0) {}
  struct Key {
    std::uint64_t round;
    std::int64_t leader;
    bool operator<(const Key& o) const { return round != o.round ? round < o.round : leader < o.leader; }
  };
  Key key_of(int pos, const std::vector<std::int64_t>& group) const { return Key{round_[std::size_t(pos)], group.front()}; }
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

struct LocalMeeting {
  std::vector<const void*> ptrs;
  std::size_t arrived = 0, released = 0, left = 0;
  std::condition_variable cv;
};

class SharedMemoryCommunicator final : public Meetings<LocalMeeting> {
 public:
  explicit SharedMemoryCommunicator(std::size_t n) : Meetings(n) {}

  // Each meeting has its own condition variable, woken once, by the member
  // completing it (not every waiter of every group at every arrival).
  std::vector<const void*> exchange(int pos, const std::vector<std::int64_t>& group, const void* mine,
                                    std::size_t) override {
    std::unique_lock<std::mutex> lk(m_);
    Key key = key_of(pos, group);
    LocalMeeting& m = meetings_[key];
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
    Key key = key_of(pos, group);
    LocalMeeting& m = meetings_[key];
    if (++m.released == group.size()) m.cv.notify_all();
    else m.cv.wait(lk, [&] { return error_ || m.released == group.size(); });
    if (error_) std::rethrow_exception(error_);
    if (++m.left == group.size()) meetings_.erase(key);
    ++round_[pos];
  }
};

// Devices in several processes: the meeting of a group's local members is
// the shared-memory one; its last arrival moves the buffers between the
// processes (runtime/mpi.hpp), and every member then reads local buffers in
// place and remote ones from the staging copies, which live until every
// local member has released the round.
struct SpanningMeeting : LocalMeeting {
  std::size_t local = 0, bytes = 0;  // members in this process; bytes per member
  bool moved = false;
  std::vector<void*> staging;  // the remote members' buffers (device pool blocks of `bytes`)
};

class ProcessSpanningCommunicator final : public Meetings<SpanningMeeting> {
 public:
  ProcessSpanningCommunicator(const std::vector<int>& device_ids, std::uint64_t launch, std::uint64_t program)
      : Meetings(device_ids.size()), launch_(launch), program_(program) {
    const Runtime& rt = Runtime::get();
    for (int id : device_ids) {
      process_.push_back(rt.process_of(id));
      local_.push_back(rt.is_local(id));
    }
    me_ = mpi::rank();
  }
  // Meetings left after a failure keep their staging blocks: MPI may still write them.
  ~ProcessSpanningCommunicator() override {
    for (auto& [k, m] : meetings_)
      for (void* b : m.staging) mpi::keep_forever(b);
  }

  std::vector<const void*> exchange(int pos, const std::vector<std::int64_t>& group, const void* mine,
                                    std::size_t bytes) override {
    std::unique_lock<std::mutex> lk(m_);
    Key key = key_of(pos, group);
    SpanningMeeting& m = meetings_[key];
    if (m.ptrs.empty()) {
      m.ptrs.assign(group.size(), nullptr);
      for (auto p : group) m.local += local_[std::size_t(p)] ? 1 : 0;
      m.bytes = bytes;
    }
    if (m.bytes != bytes) throw InternalError("members of one collective give different sizes");
    m.ptrs[index_in(group, pos)] = mine;
    if (++m.arrived == m.local) {
      lk.unlock();
      std::exception_ptr failed;
      try {
        move(group, key, m);
      } catch (...) {
        failed = std::current_exception();
      }
      lk.lock();
      if (failed && !error_) error_ = failed;
      m.moved = true;
      m.cv.notify_all();
    } else {
      // Once every local member has arrived the mover's messages may read
      // any of their buffers: wait for it even after an abort (its wait is
      // bounded by the timeout), so no buffer is reused under MPI.
      m.cv.wait(lk, [&] { return m.moved || (error_ && m.arrived < m.local); });
    }
    if (error_) std::rethrow_exception(error_);
    return m.ptrs;
  }

  void release(int pos, const std::vector<std::int64_t>& group) override {
    std::unique_lock<std::mutex> lk(m_);
    Key key = key_of(pos, group);
    SpanningMeeting& m = meetings_[key];
    if (++m.released == m.local) m.cv.notify_all();
    else m.cv.wait(lk, [&] { return error_ || m.released == m.local; });
    if (error_) std::rethrow_exception(error_);
    if (++m.left == m.local) {
      for (void* b : m.staging) device_free(b, std::max<std::size_t>(m.bytes, 1));
      meetings_.erase(key);
    }
    ++round_[std::size_t(pos)];
  }

 private:
  // This process's members' buffers to every other process of the group,
  // the others' into staging blocks from the device pool (runs unlocked:
  // every local member has arrived and only waits). Blocks move in place,
  // one message each after a header per process pair. On a failure the
  // staging blocks are never freed (MPI may still write them).
  void move(const std::vector<std::int64_t>& group, const Key& key, SpanningMeeting& m) {
    std::vector<int> peers;
    std::vector<mpi::Block> mine;
    for (std::size_t k = 0; k < group.size(); ++k) {
      const int q = process_[std::size_t(group[k])];
      if (q == me_) mine.push_back({const_cast<void*>(m.ptrs[k]), m.bytes});
      else if (std::find(peers.begin(), peers.end(), q) == peers.end()) peers.push_back(q);
    }
    if (peers.empty()) return;
    std::vector<mpi::PeerBlocks> send, recv;
    for (int q : peers) {
      send.push_back({q, mine});
      mpi::PeerBlocks in{q, {}};
      for (std::size_t k = 0; k < group.size(); ++k) {
        if (process_[std::size_t(group[k])] != q) continue;
        void* block = device_alloc(std::max<std::size_t>(m.bytes, 1));
        m.staging.push_back(block);
        in.blocks.push_back({block, m.bytes});
        m.ptrs[k] = block;
      }
      recv.push_back(std::move(in));
    }
    // Tags tell apart the meetings under way at once between two processes:
    // the group (its first position), the round and the launch, folded into
    // the tags MPI allows (MPI_TAG_UB: 2^23 - 1 under UCX).
    const int bits = mpi::tag_bits();  // >= 15
    const std::uint64_t round_bits = std::uint64_t(std::min(12, bits - 8));
    const std::uint64_t launch_bits = std::uint64_t(bits) - 8 - round_bits;
    const int tag = int(std::uint64_t(key.leader % 256) | ((key.round % (1ull << round_bits)) << 8) |
                        ((launch_ % (1ull << launch_bits)) << (8 + round_bits)));
    const std::uint64_t fingerprint = (std::uint64_t(m.bytes) * 1000003u) ^ (std::uint64_t(group.size()) << 48) ^
                                      (std::uint64_t(key.leader) << 40) ^ (key.round << 20) ^ launch_ ^
                                      (program_ * 0x9E3779B97F4A7C15ull);
    mpi::exchange(send, recv, fingerprint, tag,
                  detail::cat("a collective of ", m.bytes, " bytes per device over ", group.size(), " devices"));
  }

  std::vector<int> process_;
  std::vector<bool> local_;
  int me_ = 0;
  std::uint64_t launch_, program_;
};

std::atomic<std::uint64_t> g_spanning_launches{0};

}  // namespace

std::shared_ptr<Communicator> make_communicator(const std::vector<int>& device_ids, std::uint64_t program) {
  // Whether the launch spans processes is judged from the device ids alone,
  // so every process decides (and counts spanning launches) the same way,
  // also one that holds none of the devices.
  const Runtime& rt = Runtime::get();
  for (int id : device_ids)
    if (rt.process_of(id) != rt.process_of(device_ids.front()))
      return std::make_shared<ProcessSpanningCommunicator>(device_ids, g_spanning_launches++, program);
  return std::make_shared<SharedMemoryCommunicator>(device_ids.size());
}

}  // namespace tessel::rt
