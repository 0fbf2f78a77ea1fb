// The communicator behind collectives (MLX's GroupImpl, in small): devices of
// one launch meet in rendezvous and read each other's buffers through shared
// memory, so no data is copied that a direct read of a peer can serve.
// Across processes (runtime/mpi.hpp) the same interface stages the remote
// members' buffers: once a group's members in this process have arrived,
// the last of them sends their buffers to every other process of the group
// and receives theirs (one message per process pair), so a collective reads
// every member's buffer in the same order as in one process: the same
// bits, whichever processes the devices live in. An all-reduce between
// processes moves less: its fold passes from process to process along the
// group (a chain, streamed in chunks), one buffer per process instead of
// one per member, in the same order and so with the same bits.
//
// Protocol: every device runs the same program, so the k-th collective of
// each device is the same collective. A device publishes its send buffer with
// exchange(), which returns the group's buffers once all have published; it
// reads what it needs, then calls release(), which returns once every member
// has read (so no buffer is freed or overwritten while a peer reads it).
// Launches run in lockstep (runtime/executable.hpp: cheap ones, and all
// where the devices' threads outnumber the cores) meet no communicator: a
// collective runs once for all members from their operands (Thunk::run_all).
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

class Communicator {
 public:
  virtual ~Communicator() = default;
  // The send buffers of every member of `group` (flat positions, in order),
  // once all have called exchange for this round; every member's buffer
  // holds `bytes` bytes. The wait is a trace event on the device's track.
  std::vector<const void*> exchange(int position, const std::vector<std::int64_t>& group, const void* mine,
                                    std::size_t bytes);
  // Waits until every member of `group` has finished reading this round.
  void release(int position, const std::vector<std::int64_t>& group);

  // out[0, count) = the left fold over the group's members, in group order,
  // of their `mine` (count elements of element_bytes each): every member gets
  // the same bits, wherever the members live. `fold` applies the reduction.
  // In one process: each member folds 1/n of the elements from every
  // operand and writes them into every member's result (one meeting).
  virtual void all_reduce(int position, const std::vector<std::int64_t>& group, const void* mine, void* out,
                          std::int64_t count, std::size_t element_bytes, const Fold& fold);

  // A lockstep run (runtime/executable.hpp) over the launch's positions in
  // this process: one thread acts for every member of `group` here at once
  // (`positions`, in group order, with their buffers), so nothing waits for
  // a member's thread; members in other processes meet as in exchange,
  // release and all_reduce, with the same messages and bits (a process may
  // run in lockstep while its peer runs on its devices' threads). Every
  // member of every group in this process takes part in each collective,
  // as it would on its own thread.
  virtual std::vector<const void*> exchange_local(const std::vector<std::int64_t>& group,
                                                  const std::vector<int>& positions,
                                                  const std::vector<const void*>& mine, std::size_t bytes);
  virtual void release_local(const std::vector<std::int64_t>& group, const std::vector<int>& positions);
  virtual void all_reduce_local(const std::vector<std::int64_t>& group, const std::vector<int>& positions,
                                const std::vector<const void*>& mine, const std::vector<void*>& out,
                                std::int64_t count, std::size_t element_bytes, const Fold& fold);

  // Whether exchange() hands out the members' own buffers (every member of
  // `group` in this process), so that a member may publish its whole data
  // and its peers read the parts they need in place; otherwise remote
  // members' buffers are copied whole: publish only what peers need.
  virtual bool shares_memory(const std::vector<std::int64_t>& group) const = 0;

  // Wakes every waiting member with this error (a device failed).
  virtual void abort(std::exception_ptr error) = 0;

 protected:
  virtual std::vector<const void*> do_exchange(int position, const std::vector<std::int64_t>& group,
                                               const void* mine, std::size_t bytes) = 0;
  virtual void do_release(int position, const std::vector<std::int64_t>& group) = 0;
};

// A copy whose destination bypasses the cache (non-temporal stores, no read
// for ownership) where the CPU has them, for results too large to be read
// from the cache again soon; a plain memcpy elsewhere and for small copies.
// Collectives move their large results with it (kStreamBytes: the results of
// one collective over all its devices, above which they outgrow the caches).
void stream_copy(void* dst, const void* src, std::size_t bytes);
constexpr std::size_t kStreamBytes = std::size_t(32) << 20;

// The communicator of one launch over these devices (position i is
// device_ids[i]): shared memory when all are this process's, else staged
// through MPI between processes.
// `program` identifies the program across processes (its members must agree).
std::shared_ptr<Communicator> make_communicator(const std::vector<int>& device_ids, std::uint64_t program = 0);

}  // namespace tessel::rt
