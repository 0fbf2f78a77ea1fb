// Processes: the MPI world tessel runs in (jax.distributed's processes), or
// one process alone when MPI was never initialised. The only file that sees
// <mpi.h> is runtime/mpi.cpp; everything else speaks in bytes and ranks.
//
// Every wait here is bounded: it polls MPI's requests against a deadline
// (timeout_seconds(), env TESSEL_DISTRIBUTED_TIMEOUT) and throws
// DistributedError naming the peer that did not come, so a process that
// died or diverged makes the others fail instead of hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::rt::mpi {

// MPI_Init_thread with MPI_THREAD_MULTIPLE (device threads call MPI at
// once); DistributedError when MPI cannot give that. Idempotent.
void initialize();
bool initialized();
// 0 and 1 without MPI.
int rank();
int size();
// log2(MPI_TAG_UB + 1) for the devices' messages (at least 15).
int tag_bits();
// The bound on every wait for a peer, in seconds.
void set_timeout_seconds(double s);

// Blocking collectives over the world, each bounded by the timeout; `what`
// names the operation in errors.
// Every rank's `bytes` bytes, rank by rank (all ranks give the same size,
// else DistributedError).
std::vector<char> allgather(const void* data, std::size_t bytes, const std::string& what);
// root's bytes on every rank.
void broadcast(void* data, std::size_t bytes, int root, const std::string& what);

// One round of point-to-point messages under `tag`: to each peer of `send`
// its blocks (sent in place, no copy), and from each peer of `recv` its
// blocks, received in place. Each peer's blocks are preceded by a header
// (the collective's fingerprint, the blocks' count and sizes) checked
// before any block is received: a peer that reached another collective
// (another program, other shapes) is a DistributedError, not a truncation.
struct Block {
  void* data;
  std::size_t bytes;
};
struct PeerBlocks {
  int peer;
  std::vector<Block> blocks;
};
// `host`: sent on the host threads' channel (transfers outside programs),
// apart from the devices' messages.
void exchange(const std::vector<PeerBlocks>& send, const std::vector<PeerBlocks>& recv, std::uint64_t fingerprint,
              int tag, const std::string& what, bool host = false);

// The messages of one collective that streams its data in pieces (the
// all-reduce's chain between processes): sends and receives are posted as
// they become known and waited for one by one, each wait bounded by the
// timeout. Messages between two processes match in the order they are
// posted (one tag: MPI keeps the order), so both sides must post in the
// same order. The pipe opens with a header (the fingerprint) each way
// between this process and each of `peers`; a receive from a peer
// completes only once that peer's header matched (else DistributedError:
// another program or shapes). A
// pipe destroyed with messages pending (after an error) keeps its own
// memory forever; the caller keeps the buffers it passed.
class Pipe {
 public:
  Pipe(const std::vector<int>& peers, std::uint64_t fingerprint, int tag, std::string what);
  ~Pipe();
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  // Posts a message; returns its index for wait().
  std::size_t send(int peer, const void* data, std::size_t bytes);
  std::size_t recv(int peer, void* data, std::size_t bytes);
  // Returns once message `index` is done (a receive: its bytes are in place).
  void wait(std::size_t index);
  void wait_all();
  // Lets MPI move the messages under way (without waiting for any).
  void progress();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Keeps memory MPI may still read or write after a failed exchange: never
// freed, and reachable (so leak checkers see it as kept, not lost).
void keep_forever(void* p);

// Ends MPI (after the devices drained): called at exit.
void finalize();

}  // namespace tessel::rt::mpi
