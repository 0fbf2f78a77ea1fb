// The communicator behind collectives (MLX's GroupImpl, in small): devices of
// one launch meet in rendezvous and read each other's buffers through shared
// memory, so no data is copied that a direct read of a peer can serve. MPI
// will implement the same interface across processes.
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
  // once all have called exchange for this round.
  virtual std::vector<const void*> exchange(int position, const std::vector<std::int64_t>& group,
                                            const void* mine) = 0;
  // Waits until every member of `group` has finished reading this round.
  virtual void release(int position, const std::vector<std::int64_t>& group) = 0;
  // Wakes every waiting member with this error (a device failed).
  virtual void abort(std::exception_ptr error) = 0;
};

// The shared-memory communicator of one launch over these devices.
std::shared_ptr<Communicator> make_communicator(const std::vector<int>& device_ids);

}  // namespace tessel::rt
