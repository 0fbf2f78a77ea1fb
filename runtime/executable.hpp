// Executables: a compiled per-device program as a list of thunks over buffer
// slots (XLA:CPU's thunk runtime, in small). The same executable runs on
// every device of a launch; a thunk sees its device through the context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "runtime/buffer.hpp"
#include "runtime/device.hpp"

namespace tessel::rt {

class Communicator;
struct ExecContext;

// A lockstep run inside one process (Executable::launch) gives several
// positions one block for a result that is the same on each: written once,
// not once per device. A thunk that runs once for all its positions and
// shares_results() (an all-reduce, an all-gather) binds what it writes
// itself; a pure() thunk whose operands are the same blocks on several
// positions runs once for them (the run binds its results). The run binds
// no block to the slots such thunks write: own() takes one for each
// distinct result, and share(to, from, slot) makes `to`'s slot `from`'s
// block (a temporary: every position frees its temporaries after the same
// thunk; an output: `to`'s Buffer becomes a view, Buffer::view). Every
// position's slot must be bound one way or the other.
class SharedSlots {
 public:
  virtual ~SharedSlots() = default;
  virtual void* own(ExecContext& ctx, int slot) = 0;
  virtual void share(ExecContext& to, const ExecContext& from, int slot) = 0;
};

// One device's view of one run.
struct ExecContext {
  int device = 0;                 // device id
  int position = 0;               // flat position in the launch's device list (the mesh)
  std::vector<void*> slots;       // buffer of every slot
  Communicator* comm = nullptr;   // the launch's collectives (null when it has none)
  bool machine_wide = false;      // the running thunk holds every core (ComputeSlot)
  SharedSlots* shared = nullptr;  // set in a lockstep run inside one process
  bool parallel = false;          // a lockstep run spreading positions over the machine's cores
};

class Thunk {
 public:
  virtual ~Thunk() = default;
  virtual void run(ExecContext& ctx) const = 0;
  // One line for Compiled::as_text and profiles.
  virtual std::string describe() const = 0;
  // For traces (runtime/trace.hpp): the kind of work ("kernel", "dot",
  // "library", "collective", "control", "constant") and extra JSON members
  // (`"bytes": 64`), or none.
  virtual const char* category() const { return "kernel"; }
  virtual std::string trace_args() const { return {}; }
  // True for thunks that block until other devices arrive (collectives):
  // they take their compute slots themselves, around their copies.
  virtual bool waits_on_peers() const { return false; }
  // Whether the thunk can run for every position of a launch at one thread's
  // command (a cheap launch on idle devices, Runtime::Inline, or a lockstep
  // launch, Executable::launch): every thunk that does
  // not wait on peers can, one position after another; one that waits must
  // run once for all of them (run_all).
  virtual bool can_run_all() const { return !waits_on_peers(); }
  // Whether run_all, given ExecContext::shared, binds the slots it writes
  // itself (SharedSlots): its results are the same on several positions.
  virtual bool shares_results() const { return false; }
  // Whether what the thunk writes is a function of the bytes of the slots it
  // reads (Executable::reads) alone: not of its position or device, with no
  // effects. Positions whose operands are the same blocks then need it once.
  virtual bool pure() const { return false; }
  // Whether the thunk may write its output in slot `out` over its `read`-th
  // operand's block (Executable::reads[t][read]) when a launch binds the two
  // to one block: it reads each element of that operand before writing over
  // it (an aligned read of an elementwise kernel, an update's operand, a
  // loop's carry's initial value). Donation uses it.
  virtual bool may_write_over(std::size_t /*read*/, int /*out*/) const { return false; }
  // Whether a peer may read the thunk's `read`-th operand's block in place
  // (a collective reads its members' operands): then no output of this
  // position may take that block.
  virtual bool peers_read(std::size_t /*read*/) const { return waits_on_peers(); }
  // A thunk that waits on peers and can_run_all, once for ctxs[position] of
  // every position of the launch, each having run every earlier thunk
  // (collectives: read every member's operand, no waiting).
  virtual void run_all(const std::vector<ExecContext*>& ctxs) const;
  // Elements of work one position's run does, where the thunk knows (a
  // loop nest's iterations times their work; unknown: the most there is). A
  // lockstep run spreads positions over the machine's cores only where
  // their work together is worth waking the cores.
  virtual std::int64_t work() const { return std::numeric_limits<std::int64_t>::max(); }
  // The cores a computing thunk asks for (large dots ask for every core);
  // ExecContext::machine_wide says what it got.
  virtual ComputeSlot::Width width() const { return ComputeSlot::Width::device; }
};

// The one rule for a loop's width: from 2^20 elements of work (about a
// millisecond on one core) every core when no other device computes
// (machine_if_idle), below that a turn on every core costs more than it saves.
inline ComputeSlot::Width width_for_work(std::int64_t work) {
  return work >= (std::int64_t(1) << 20) ? ComputeSlot::Width::machine_if_idle : ComputeSlot::Width::device;
}

// Runs f over [begin, end) in chunks of at least `grain` on the cores the
// running thunk holds: every core's (parallel_for_machine) when its slot is
// machine-wide, else its device's (parallel_for).
inline void parallel_for(const ExecContext& ctx, std::int64_t begin, std::int64_t end, std::int64_t grain,
                         const std::function<void(std::int64_t, std::int64_t)>& f) {
  if (ctx.machine_wide) parallel_for_machine(begin, end, grain, f);
  else parallel_for(begin, end, grain, f);
}

struct Slot {
  std::size_t bytes = 0;
  bool zero_init = false;  // padding of uneven shards must read as zeros
};

class Executable : public std::enable_shared_from_this<Executable> {
 public:
  std::vector<Slot> slots;
  std::vector<int> param_slots;   // slot of each parameter
  std::vector<int> output_slots;  // slot of each output (may repeat, may be a parameter's)
  std::vector<std::unique_ptr<Thunk>> thunks;
  // Temporaries live from the thunk that first writes them to the one that
  // last reads them: allocated before thunk i runs, freed after it.
  std::vector<std::vector<int>> alloc_before, free_after;
  // The slots each thunk reads (its operands); it writes alloc_before's.
  std::vector<std::vector<int>> reads;
  bool uses_collectives = false;
  // Small enough that waking devices would cost more than running it: a
  // launch on idle devices runs every position on the caller's thread,
  // thunk by thunk (set by whoever knows its cost, for programs whose every
  // thunk can_run_all).
  bool cheap = false;
  // The program's identity across processes (the digest of its exact
  // structural key, set by the compile driver): the processes of a launch
  // must run the same one (every meeting's messages carry it, runtime/mpi.cpp
  // compares).
  std::uint64_t fingerprint = 0;

  // Runs on `device_ids` (position i of the launch is device_ids[i]) with
  // inputs[i][param]; returns outputs[i][k] at once, ready when computed.
  // choose_launch_mode says how (allow_inline: LaunchMode::here may be
  // chosen; allow_lockstep: LaunchMode::lockstep may).
  //
  // `donated` (per parameter, or null): the caller gives those inputs up
  // (JAX's donate_argnums). An output may then take a donated input's block
  // on a position where this launch holds the input's only reference, the
  // sizes agree, and write_over_safe says every read of it comes first.
  std::vector<std::vector<BufferRef>> launch(const std::vector<int>& device_ids,
                                             const std::vector<std::vector<BufferRef>>& inputs,
                                             bool allow_inline = true, bool allow_lockstep = true,
                                             const std::vector<bool>* donated = nullptr) const;
  // Whether output slot `out` may be written into parameter `param`'s block:
  // it is the same size, not a parameter's, not zero-initialized, the
  // parameter is not itself an output, and every thunk that reads the parameter runs
  // before the one that writes `out` (or is that one, and may_write_over it)
  // and reads only its own position's block (no thunk whose peers_read it).
  bool write_over_safe(int param, int out) const;

  // Runs on the calling thread, within a thunk of an enclosing executable
  // running on parent's device (a region of a loop or a branch): params[k]
  // is parameter k's buffer, outs[k] receives output k. Collectives meet in
  // the parent's communicator; each thunk takes its own compute slot, so the
  // calling thunk must hold none (waits_on_peers).
  void run_inline(const ExecContext& parent, const std::vector<void*>& params, const std::vector<void*>& outs) const;
  // The same for several positions at once, within a thunk's run_all (a
  // lockstep run): parents[j]'s region with params[j] and outs[j], thunk by
  // thunk for all of them as the lockstep run does (a collective once for
  // all members: every member of its groups must be among the parents).
  void run_inline_all(const std::vector<ExecContext*>& parents, const std::vector<std::vector<void*>>& params,
                      const std::vector<std::vector<void*>>& outs) const;

  std::string describe() const;
  // The most memory one device holds at once for a run: its outputs plus the
  // largest set of temporaries alive together (parameters exist already).
  std::size_t peak_bytes() const;
};

// How a launch runs (docs/runtime.md, "Launch modes"):
//   here        every position on the caller's thread, one after another
//               (a cheap program on idle devices)
//   lockstep    one thread runs every position of this process, thunk by
//               thunk, side by side on the machine's cores; the devices'
//               threads wait, asleep (devices that outnumber the cores)
//   per_device  each device runs its part on its own thread
enum class LaunchMode { here, lockstep, per_device };
// The one place that decides, with its reasons (executable.cpp): for `e`
// over `local_devices` of this process, whose inputs are all computed or
// not; allow_* as Executable::launch's.
LaunchMode choose_launch_mode(const Executable& e, std::size_t local_devices, bool inputs_ready, bool allow_inline,
                              bool allow_lockstep);

// The host's physical memory: no run may need more (ResourceExhaustedError).
std::size_t host_memory_bytes();
// True when `bytes` on each of `devices` devices fit in the host's memory
// together (all devices share it): the one rule RESOURCE_EXHAUSTED applies.
bool fits_host(std::size_t bytes, std::size_t devices);

}  // namespace tessel::rt
