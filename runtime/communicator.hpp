// The communicator: how the members of a collective group meet and see
// each other's buffers (MLX's GroupImpl, in small). It moves bytes and
// meets, nothing more: what a collective computes from the group's buffers
// is runtime/collectives.hpp's, written once for every way a launch runs
// (docs/runtime.md).
//
// In one process the members read each other's buffers through shared
// memory, so no data is copied that a direct read of a peer can serve.
// Across processes (runtime/mpi.hpp) a meeting stages the remote members'
// operands: once a group's members in this process have arrived, the last
// of them sends their buffers to every other process of the group and
// receives theirs (one message per process pair), so a collective reads
// every member's operand in the same order as in one process: the same
// bits, whichever processes the devices live in. An all-reduce between
// processes moves less: its fold passes from process to process along the
// group (a chain, streamed in chunks), one buffer per process instead of
// one per member, in the same order and so with the same bits.
//
// Protocol: every device runs the same program, so the k-th collective of
// each device is the same collective. The members of a group in this
// process meet() (each on its own thread, or all at once from the one
// thread of a lockstep run): meet returns the group's view once every
// member has arrived; they read (and write) what they need, then release(),
// which returns once every member has finished (so no buffer is freed or
// overwritten while a peer reads it). A lockstep run inside one process
// meets no communicator: its thread sees every member's buffers already.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

namespace tessel::rt {

// A left fold of equal runs of `count` elements in a collective's dtype and
// reduction: dst[i] = (...((first[i] op rest[0][i]) op rest[1][i]) ...) op
// rest[m-1][i]. `first` may be dst. Runs on the calling device's threads.
using Fold = std::function<void(void* dst, const void* first, const std::vector<const void*>& rest,
                                std::int64_t count)>;

// A member of a group that meets here: its flat position in the launch,
// its operand and its result (null where the caller writes none).
struct Member {
  int position = 0;
  const void* in = nullptr;
  void* out = nullptr;
};

// A group as its members here see it once they met: every member's operand
// in group order (a peer's in place, or another process's staged here), and
// the members' results that may be written from here (null for another
// process's members, or where the caller restricts what it writes).
struct GroupView {
  std::vector<const void*> in;
  std::vector<void*> out;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  // The members of `group` (flat positions, in order) that are here arrive
  // with `bytes` bytes of operand each; returns the group's view once every
  // member has arrived. The wait is a trace event on the device's track.
  GroupView meet(const std::vector<std::int64_t>& group, const std::vector<Member>& here, std::size_t bytes);
  // Waits until every member of `group` has finished with this round.
  void release(const std::vector<std::int64_t>& group, const std::vector<int>& here);

  // One member's meeting with its operand alone: the group's operands.
  std::vector<const void*> exchange(int position, const std::vector<std::int64_t>& group, const void* mine,
                                    std::size_t bytes) {
    return meet(group, {Member{position, mine, nullptr}}, bytes).in;
  }
  void release(int position, const std::vector<std::int64_t>& group) { release(group, std::vector<int>{position}); }

  // An all-reduce over a group that spans processes, for its members here:
  // the chain between processes (see above), the left fold in group order;
  // every member here receives the result in its `out`. One round, as a
  // meeting and its release. Only a communicator across processes has one.
  virtual void reduce_between_processes(const std::vector<std::int64_t>& group, const std::vector<Member>& here,
                                        std::int64_t count, std::size_t element_bytes, const Fold& fold);

  // Whether every member of `group` is in this process, so that meet()
  // hands out the members' own buffers, results included, and a member may
  // publish its whole data for its peers to read the parts they need in
  // place; otherwise remote members' operands are copied whole: publish
  // only what peers need.
  virtual bool shares_memory(const std::vector<std::int64_t>& group) const = 0;

  // Wakes every waiting member with this error (a device failed).
  virtual void abort(std::exception_ptr error) = 0;

 protected:
  virtual GroupView do_meet(const std::vector<std::int64_t>& group, const std::vector<Member>& here,
                            std::size_t bytes) = 0;
  virtual void do_release(const std::vector<std::int64_t>& group, const std::vector<int>& here) = 0;
};

// A copy whose destination bypasses the cache (non-temporal stores, no read
// for ownership) where the CPU has them, for results too large to be read
// from the cache again soon; a plain memcpy elsewhere and for small copies.
// Collectives move their large results with it (kStreamBytes: the results of
// one collective over all its devices, above which they outgrow the caches),
// and a fused loop's result over the process's devices streams above it too
// (codegen's KernelThunk).
void stream_copy(void* dst, const void* src, std::size_t bytes);
// Orders the calling thread's non-temporal stores before its later stores
// (an sfence), so that whoever it then signals reads them.
void stream_fence();
constexpr std::size_t kStreamBytes = std::size_t(32) << 20;

// The communicator of one launch over these devices (position i is
// device_ids[i]): shared memory when all are this process's, else staged
// through MPI between processes.
// `program` identifies the program across processes (its members must agree).
std::shared_ptr<Communicator> make_communicator(const std::vector<int>& device_ids, std::uint64_t program = 0);

}  // namespace tessel::rt
