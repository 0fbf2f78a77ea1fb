#include "runtime/communicator.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/buffer.hpp"
#include "runtime/device.hpp"
#include "runtime/mpi.hpp"
#include "runtime/trace.hpp"
#include "tessel/core/errors.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessel::rt {

#if defined(__x86_64__)
namespace {
// 64 bytes a store where the CPU has AVX-512 (whole lines combine best),
// else 16 (SSE2, every x86-64): the destination's unaligned head and tail
// by memcpy.
__attribute__((target("avx512f"))) void stream_lines512(char* dst, const char* src, std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + 64 * i),
                        _mm512_loadu_si512(reinterpret_cast<const void*>(src + 64 * i)));
}
void stream_lines128(char* dst, const char* src, std::size_t lines) {
  for (std::size_t i = 0; i < 4 * lines; ++i)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16 * i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16 * i)));
}
const bool kHasAvx512 = __builtin_cpu_supports("avx512f");
}  // namespace

void stream_copy(void* dst, const void* src, std::size_t bytes) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64);
  if (bytes < 4096) return void(std::memcpy(d, s, bytes));
  std::memcpy(d, s, head);
  const std::size_t lines = (bytes - head) / 64;
  if (kHasAvx512) stream_lines512(d + head, s + head, lines);
  else stream_lines128(d + head, s + head, lines);
  _mm_sfence();  // the stores are visible (ordered) before the copy returns
  const std::size_t done = head + 64 * lines;
  std::memcpy(d + done, s + done, bytes - done);
}
void stream_fence() { _mm_sfence(); }
#else
void stream_copy(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void stream_fence() {}
#endif

GroupView Communicator::meet(const std::vector<std::int64_t>& group, const std::vector<Member>& here,
                              std::size_t bytes) {
  trace::Span wait(trace::device_track(current_device()), "wait");
  if (wait.active()) wait.name = "wait for peers (meet)";
  return do_meet(group, here, bytes);
}

void Communicator::release(const std::vector<std::int64_t>& group, const std::vector<int>& here) {
  trace::Span wait(trace::device_track(current_device()), "wait");
  if (wait.active()) wait.name = "wait for peers (release)";
  do_release(group, here);
}

void Communicator::reduce_between_processes(const std::vector<std::int64_t>&, const std::vector<Member>&,
                                            std::int64_t, std::size_t, const Fold&) {
  throw InternalError("an all-reduce between processes reached a communicator inside one process");
}

namespace {

// A larger all-reduce's chunks are folded and copied pieces of this many
// bytes at a time: a piece of every operand and the result's fit the L2.
constexpr std::size_t kAllReducePieceBytes = 32 << 10;

std::vector<const void*> offset_all(const std::vector<const void*>& ptrs, std::size_t from, std::size_t bytes) {
  std::vector<const void*> out;
  for (std::size_t k = from; k < ptrs.size(); ++k) out.push_back(static_cast<const char*>(ptrs[k]) + bytes);
  return out;
}

}  // namespace

namespace {

// A meeting of members that wait on a condition variable (the process-spanning one's base).
struct LocalMeeting {
  std::vector<const void*> ptrs;  // the members' operands
  std::vector<void*> outs;        // the results of the members here
  std::size_t arrived = 0, released = 0, left = 0;
  std::condition_variable cv;
};
void wake(LocalMeeting& m) { m.cv.notify_all(); }

// One process's meeting: arrivals count under the lock; a member that must
// wait yields its core a few times, then sleeps on the count itself
// (std::atomic::wait, a futex) with no lock held, so the members woken by the
// last arrival do not queue for the mutex again. With a condition variable
// (notify_all, then every waiter retaking the lock) an exchange and release
// of 8 devices on 2 cores took ~160 us; this ~20-35 us (a /tmp probe of the
// two patterns, 2000 rounds).
struct SharedMeeting {
  static constexpr std::uint32_t kAborted = 1u << 30;  // added to both counts by abort: every wait ends
  std::vector<const void*> ptrs;  // the members' operands
  std::vector<void*> outs;        // and results
  std::atomic<std::uint32_t> arrived{0}, released{0};
  std::size_t left = 0;
};
void wake(SharedMeeting& m) {
  m.arrived.fetch_add(SharedMeeting::kAborted);
  m.arrived.notify_all();
  m.released.fetch_add(SharedMeeting::kAborted);
  m.released.notify_all();
}
// Until count reaches want (or an abort adds kAborted).
void await(const std::atomic<std::uint32_t>& count, std::uint32_t want) {
  for (int i = 0; i < 64; ++i) {
    if (count.load(std::memory_order_acquire) >= want) return;
    std::this_thread::yield();
  }
  for (std::uint32_t v; (v = count.load(std::memory_order_acquire)) < want;) count.wait(v, std::memory_order_acquire);
}

// What both communicators share: the meetings of the current rounds, keyed
// by (the member's round, the group's first position), and the error that
// wakes every waiter.
template <class Meeting>
class Meetings : public Communicator {
 public:
  void abort(std::exception_ptr error) override {
    std::lock_guard<std::mutex> lk(m_);
    if (!error_) error_ = error;
    for (auto& [k, m] : meetings_) wake(m);
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

class SharedMemoryCommunicator final : public Meetings<SharedMeeting> {
 public:
  explicit SharedMemoryCommunicator(std::size_t n) : Meetings(n) {}
  bool shares_memory(const std::vector<std::int64_t>&) const override { return true; }

  // The meeting is found (or made) under the lock; the wait is outside it.
  // A meeting lives until its last member leaves its release.
  GroupView do_meet(const std::vector<std::int64_t>& group, const std::vector<Member>& here, std::size_t) override {
    const auto size = std::uint32_t(group.size()), count = std::uint32_t(here.size());
    SharedMeeting* m = nullptr;
    {
      std::lock_guard<std::mutex> lk(m_);
      if (error_) std::rethrow_exception(error_);
      m = &meetings_[key_of(here.front().position, group)];
      if (m->ptrs.empty()) m->ptrs.assign(group.size(), nullptr), m->outs.assign(group.size(), nullptr);
      for (const Member& h : here) {
        const std::size_t k = index_in(group, h.position);
        m->ptrs[k] = h.in;
        m->outs[k] = h.out;
      }
      if (m->arrived.fetch_add(count, std::memory_order_acq_rel) + count == size) {
        m->arrived.notify_all();
        return {m->ptrs, m->outs};
      }
    }
    await(m->arrived, size);
    if (m->arrived.load() >= SharedMeeting::kAborted) rethrow();
    return {m->ptrs, m->outs};
  }

  void do_release(const std::vector<std::int64_t>& group, const std::vector<int>& here) override {
    const auto size = std::uint32_t(group.size()), count = std::uint32_t(here.size());
    const Key key = key_of(here.front(), group);
    SharedMeeting* m = nullptr;
    {
      std::lock_guard<std::mutex> lk(m_);
      if (error_) std::rethrow_exception(error_);
      m = &meetings_[key];
      if (m->released.fetch_add(count, std::memory_order_acq_rel) + count == size) m->released.notify_all();
    }
    await(m->released, size);
    std::lock_guard<std::mutex> lk(m_);
    if (error_) std::rethrow_exception(error_);
    if ((m->left += here.size()) == group.size()) meetings_.erase(key);
    for (int p : here) ++round_[std::size_t(p)];
  }

 private:
  void rethrow() {
    std::lock_guard<std::mutex> lk(m_);
    std::rethrow_exception(error_);
  }
};

// Devices in several processes: a group's local members meet under the
// communicator's lock (a condition variable, not SharedMeeting's futex
// waits: a meeting across processes waits for messages anyway); the last
// local arrival moves the buffers between the
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
  bool shares_memory(const std::vector<std::int64_t>& group) const override {
    return std::all_of(group.begin(), group.end(), [&](std::int64_t p) { return local_[size_t(p)]; });
  }
  // Meetings left after a failure keep their staging blocks: MPI may still write them.
  ~ProcessSpanningCommunicator() override {
    for (auto& [k, m] : meetings_)
      for (void* b : m.staging) mpi::keep_forever(b);
  }

  GroupView do_meet(const std::vector<std::int64_t>& group, const std::vector<Member>& here,
                    std::size_t bytes) override {
    std::unique_lock<std::mutex> lk(m_);
    auto [m, mover] = arrive(lk, here, group, bytes, [&](const Key& key, SpanningMeeting& mt) { move(group, key, mt); });
    // Once every local member has arrived the mover's messages may read
    // any of their buffers: wait for it even after an abort (its wait is
    // bounded by the timeout), so no buffer is reused under MPI.
    if (!mover) m->cv.wait(lk, [&] { return m->moved || (error_ && m->arrived < m->local); });
    if (error_) std::rethrow_exception(error_);
    return {m->ptrs, m->outs};
  }

  void do_release(const std::vector<std::int64_t>& group, const std::vector<int>& here) override {
    std::unique_lock<std::mutex> lk(m_);
    const Key key = key_of(here.front(), group);
    SpanningMeeting& m = meetings_[key];
    if ((m.released += here.size()) == m.local) m.cv.notify_all();
    else m.cv.wait(lk, [&] { return error_ || m.released == m.local; });
    if (error_) std::rethrow_exception(error_);  // the staging blocks stay (MPI may still write them)
    if ((m.left += here.size()) == m.local) {
      for (void* b : m.staging) device_free(b, std::max<std::size_t>(m.bytes, 1));
      meetings_.erase(key);
    }
    for (int p : here) ++round_[std::size_t(p)];
  }

  // The chain (below) is run by the last member here to arrive, which
  // copies each chunk of the result into every local member's result as
  // soon as it is here (in pieces, with MPI's progress between them); the
  // others wait for it. One round, as a meeting and its release: every
  // member of every group counts the same rounds per collective.
  void reduce_between_processes(const std::vector<std::int64_t>& group, const std::vector<Member>& here,
                                std::int64_t count, std::size_t es, const Fold& fold) override {
    {
      trace::Span wait(trace::device_track(current_device()), "wait");
      if (wait.active()) wait.name = "all-reduce between processes";
      auto fan_out = [&](const SpanningMeeting& mt, const char* result, std::int64_t lo, std::int64_t hi,
                         const std::function<void()>& progress) {
        const std::int64_t piece = std::max<std::int64_t>(1, std::int64_t(kAllReducePieceBytes / es));
        for (std::int64_t a = lo; a < hi; a += piece) {
          const std::size_t at = std::size_t(a) * es, len = std::size_t(std::min(piece, hi - a)) * es;
          {
            ComputeSlot slot;
            for (void* o : mt.outs)
              if (o) std::memcpy(static_cast<char*>(o) + at, result + at, len);
          }
          progress();
        }
      };
      std::unique_lock<std::mutex> lk(m_);
      auto [m, mover] = arrive(lk, here, group, std::size_t(count) * es, [&](const Key& key, SpanningMeeting& mt) {
        chain(group, key, mt, count, es, fold,
              [&](const char* result, std::int64_t lo, std::int64_t hi, const std::function<void()>& progress) {
                fan_out(mt, result, lo, hi, progress);
              });
      });
      // As in do_meet: the chain reads every local member's buffer, so wait
      // for its end even after an error.
      if (!mover) m->cv.wait(lk, [&] { return m->moved || (error_ && m->arrived < m->local); });
      if (error_) std::rethrow_exception(error_);
    }
    std::vector<int> positions;
    for (const Member& h : here) positions.push_back(h.position);
    release(group, positions);
  }

 private:
  // Joins this round's meeting of `group` (lk held) as the members `here`
  // (one on its own thread; every local member in a lockstep run). The last local member to arrive runs `work` unlocked (the moving
  // between processes: every local member's buffer is published and its
  // owner waits) and marks the meeting moved; it runs nothing when an error
  // is already known (a member that arrived before may have left with its
  // buffer; the other processes then time out). Returns the meeting and
  // whether these members were the last.
  template <class Work>
  std::pair<SpanningMeeting*, bool> arrive(std::unique_lock<std::mutex>& lk, const std::vector<Member>& here,
                                           const std::vector<std::int64_t>& group, std::size_t bytes, Work&& work) {
    const Key key = key_of(here.front().position, group);
    SpanningMeeting& m = meetings_[key];
    if (m.ptrs.empty()) {
      m.ptrs.assign(group.size(), nullptr);
      m.outs.assign(group.size(), nullptr);
      for (auto p : group) m.local += local_[std::size_t(p)] ? 1 : 0;
      m.bytes = bytes;
    }
    if (m.bytes != bytes) throw InternalError("members of one collective give different sizes");
    for (const Member& h : here) {
      const std::size_t k = index_in(group, h.position);
      m.ptrs[k] = h.in;
      m.outs[k] = h.out;
    }
    m.arrived += here.size();
    if (m.arrived < m.local) return {&m, false};
    if (!error_) {
      lk.unlock();
      std::exception_ptr failed;
      try {
        work(key, m);
      } catch (...) {
        failed = std::current_exception();
      }
      lk.lock();
      if (failed && !error_) error_ = failed;
    }
    m.moved = true;
    m.cv.notify_all();
    return {&m, true};
  }

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
    mpi::exchange(send, recv, fingerprint(key, group, m.bytes), tag(key),
                  detail::cat("a collective of ", m.bytes, " bytes per device over ", group.size(), " devices"));
  }

  // Tags tell apart the meetings under way at once between two processes:
  // the group (its first position), the round and the launch, folded into
  // the tags MPI allows (MPI_TAG_UB: 2^23 - 1 under UCX).
  int tag(const Key& key) const {
    const int bits = mpi::tag_bits();  // >= 15
    const std::uint64_t round_bits = std::uint64_t(std::min(12, bits - 8));
    const std::uint64_t launch_bits = std::uint64_t(bits) - 8 - round_bits;
    return int(std::uint64_t(key.leader % 256) | ((key.round % (1ull << round_bits)) << 8) |
               ((launch_ % (1ull << launch_bits)) << (8 + round_bits)));
  }
  // What the processes of one meeting agree on exactly: the program, the
  // launch, the round, the group and the bytes.
  // Each field is mixed in whole (a splitmix64 step per field), so no two
  // fields' bits overlap as shifted XORs would let them.
  std::uint64_t fingerprint(const Key& key, const std::vector<std::int64_t>& group, std::size_t bytes) const {
    auto mix = [](std::uint64_t h, std::uint64_t v) {
      std::uint64_t x = h + v + 0x9E3779B97F4A7C15ull;
      x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
      x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
      return x ^ (x >> 31);
    };
    std::uint64_t h = mix(0, program_);
    for (std::uint64_t v : {std::uint64_t(bytes), std::uint64_t(group.size()), std::uint64_t(key.leader), key.round, launch_})
      h = mix(h, v);
    return h;
  }

  // The all-reduce's chain between processes (run by the last local member
  // to arrive, unlocked). The fold visits the members in group order; runs
  // of consecutive members in one process are its segments. The process of
  // segment 0 folds its members, sends the partial to segment 1's process,
  // which folds its members into it and passes it on; the last segment's
  // process holds the result and sends it to every other process. So each
  // process moves one buffer per segment, not its members' buffers, and the
  // bits are the one-process fold's. The buffer streams in chunks: while
  // one chunk travels, the next is folded.
  //
  // `fan_out` is called with the result and each chunk's elements [lo, hi)
  // once the chunk is in place here, and copies it into the local members'
  // results between the chain's messages; `progress` lets MPI move them
  // while it copies.
  using FanOut = std::function<void(const char* result, std::int64_t lo, std::int64_t hi,
                                    const std::function<void()>& progress)>;
  void chain(const std::vector<std::int64_t>& group, const Key& key, SpanningMeeting& m, std::int64_t count,
             std::size_t es, const Fold& fold, const FanOut& fan_out) {
    struct Segment {
      int process;
      std::size_t begin, end;  // members [begin, end) of the group
    };
    std::vector<Segment> segs;
    for (std::size_t k = 0; k < group.size(); ++k) {
      const int q = process_[std::size_t(group[k])];
      if (segs.empty() || segs.back().process != q) segs.push_back({q, k, k + 1});
      else segs.back().end = k + 1;
    }
    const std::size_t J = segs.size();
    const int last = segs.back().process;
    std::vector<int> finals;  // every process of the group but the last segment's
    for (auto& g : segs)
      if (g.process != last && std::find(finals.begin(), finals.end(), g.process) == finals.end())
        finals.push_back(g.process);
    auto stage = [&] {
      void* b = device_alloc(std::max<std::size_t>(m.bytes, 1));
      m.staging.push_back(b);
      return static_cast<char*>(b);
    };
    std::vector<char*> acc(J, nullptr);  // my segments' partial folds (staging: MPI reads or writes them)
    for (std::size_t j = 0; j < J; ++j)
      if (segs[j].process == me_) acc[j] = stage();
    char* result = last == me_ ? acc[J - 1] : stage();

    // Chunks of about 1/16 of the buffer, 64 KiB to 4 MiB.
    const std::int64_t per = std::clamp<std::int64_t>(count / 16, std::int64_t((64 << 10) / es),
                                                      std::int64_t((4 << 20) / es));
    const std::int64_t chunks = std::max<std::int64_t>(1, (count + per - 1) / per);
    auto range = [&](std::int64_t c) { return std::pair{c * per, std::min(count, (c + 1) * per)}; };

    std::vector<int> peers;  // every other process of the group
    for (auto& g : segs)
      if (g.process != me_ && std::find(peers.begin(), peers.end(), g.process) == peers.end())
        peers.push_back(g.process);
    mpi::Pipe pipe(peers, fingerprint(key, group, m.bytes) ^ 0xC4A1Bull, tag(key),
                   detail::cat("an all-reduce of ", m.bytes, " bytes per device over ", group.size(), " devices"));
    // Every receive, posted first, in the order its sender sends: chunk by
    // chunk, segment by segment (sender segment j's partial goes to segment
    // j + 1's process; the last segment's result to every other process).
    std::vector<std::size_t> partial_in(std::size_t(chunks) * J, SIZE_MAX);
    std::vector<std::size_t> final_in(std::size_t(chunks), SIZE_MAX);
    for (std::int64_t c = 0; c < chunks; ++c) {
      const auto [lo, hi] = range(c);
      const std::size_t off = std::size_t(lo) * es, len = std::size_t(hi - lo) * es;
      for (std::size_t j = 0; j < J; ++j) {
        if (j + 1 < J && segs[j + 1].process == me_)
          partial_in[std::size_t(c) * J + j + 1] = pipe.recv(segs[j].process, acc[j + 1] + off, len);
        if (j + 1 == J && last != me_) final_in[std::size_t(c)] = pipe.recv(last, result + off, len);
      }
    }
    // Chunks [0, c] of the result are in place: into the local members' results.
    auto publish = [&](std::int64_t c) {
      const auto [lo, hi] = range(c);
      fan_out(result, lo, hi, [&] { pipe.progress(); });
    };
    for (std::int64_t c = 0; c < chunks; ++c) {
      const auto [lo, hi] = range(c);
      const std::size_t off = std::size_t(lo) * es, len = std::size_t(hi - lo) * es;
      for (std::size_t j = 0; j < J; ++j) {
        if (segs[j].process != me_) continue;
        // This segment's members, in group order: segment 0's fold starts
        // from its first member, a later one's from the partial received.
        const std::vector<const void*> seg(m.ptrs.begin() + std::ptrdiff_t(segs[j].begin),
                                           m.ptrs.begin() + std::ptrdiff_t(segs[j].end));
        const std::size_t from = j == 0 ? 1 : 0;
        char* dst = acc[j] + off;
        if (j > 0) pipe.wait(partial_in[std::size_t(c) * J + j]);
        // In pieces, driving MPI between them: a message larger than the
        // transport's eager size moves only while its sender (and receiver)
        // call into MPI, so folding a whole chunk without would stall the
        // chunks already sent.
        const std::int64_t piece = std::max<std::int64_t>(1, std::int64_t((32 << 10) / es));
        for (std::int64_t a = 0; a < hi - lo; a += piece) {
          const std::int64_t n = std::min(piece, hi - lo - a);
          const std::size_t at = std::size_t(a) * es;
          const char* first = j == 0 ? static_cast<const char*>(seg[0]) + off + at : dst + at;
          {
            ComputeSlot slot;
            fold(dst + at, first, offset_all(seg, from, off + at), n);
          }
          pipe.progress();
        }
        if (j + 1 < J) {
          pipe.send(segs[j + 1].process, dst, len);
        } else {
          for (int q : finals) pipe.send(q, dst, len);
          publish(c);
        }
      }
    }
    if (last != me_)
      for (std::int64_t c = 0; c < chunks; ++c) {
        pipe.wait(final_in[std::size_t(c)]);
        publish(c);
      }
    pipe.wait_all();
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
