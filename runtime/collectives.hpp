// The communicator behind collectives (MLX's GroupImpl, in small): devices of
// one launch meet in rendezvous and read each other's buffers through shared
// memory, so no data is copied that a direct read of a peer can serve.
// Across processes (runtime/mpi.hpp) the same interface stages the remote
// members' buffers: once a group's members in this process have arrived,
// the last of them sends their buffers to every other process of the group
// and receives theirs (one message per process pair), so a collective reads
// every member's buffer in the same order as in one process: the same
// bits, whichever processes the devices live in.
//
// Protocol: every device runs the same program, so the k-th collective of
// each device is the same collective. A device publishes its send buffer with
// exchange(), which returns the group's buffers once all have published; it
// reads what it needs, then calls release(), which returns once every member
// has read (so no buffer is freed or overwritten while a peer reads it).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

namespace tessel::rt {

class Communicator {
 public:
  virtual ~Communicator() = default;
  // The send buffers of every member of `group` (flat positions, in order),
  // once all have called exchange for this round; every member's buffer
  // holds `bytes` bytes.
  virtual std::vector<const void*> exchange(int position, const std::vector<std::int64_t>& group, const void* mine,
                                            std::size_t bytes) = 0;
  // Waits until every member of `group` has finished reading this round.
  virtual void release(int position, const std::vector<std::int64_t>& group) = 0;
  // Wakes every waiting member with this error (a device failed).
  virtual void abort(std::exception_ptr error) = 0;
};

// The communicator of one launch over these devices (position i is
// device_ids[i]): shared memory when all are this process's, else staged
// through MPI between processes.
// `program` identifies the program across processes (its members must agree).
std::shared_ptr<Communicator> make_communicator(const std::vector<int>& device_ids, std::uint64_t program = 0);

}  // namespace tessel::rt
