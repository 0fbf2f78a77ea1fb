#include "runtime/executable.hpp"

#include <unistd.h>
#include <algorithm>
#include <thread>
#include <utility>
#include <chrono>
#include <atomic>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "runtime/communicator.hpp"
#include "runtime/device.hpp"
#include "runtime/profile.hpp"
#include "runtime/trace.hpp"
#include "tessel/core/errors.hpp"

namespace tessel::rt {

namespace {

// Frees the temporaries a run allocated, however it ends.
struct Owned {
  const Executable& e;
  std::vector<void*> blocks;
  explicit Owned(const Executable& e) : e(e), blocks(e.slots.size(), nullptr) {}
  Owned(Owned&& o) noexcept : e(o.e), blocks(std::move(o.blocks)) { o.blocks.clear(); }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    for (size_t s = 0; s < blocks.size(); ++s)
      if (blocks[s]) device_free(blocks[s], e.slots[s].bytes);
  }
};

void alloc_temporary(const Executable& e, int s, ExecContext& ctx, Owned& owned) {
  owned.blocks[s] = device_alloc(e.slots[s].bytes);
  if (e.slots[s].zero_init) std::memset(owned.blocks[s], 0, e.slots[s].bytes);
  ctx.slots[s] = owned.blocks[s];
}

// `deferred`: the slots whose writer binds them (SharedSlots), or none.
void alloc_before(const Executable& e, std::size_t t, ExecContext& ctx, Owned& owned,
                  const std::vector<bool>* deferred = nullptr) {
  for (int s : e.alloc_before[t])
    if (!ctx.slots[s] && !(deferred && (*deferred)[std::size_t(s)])) alloc_temporary(e, s, ctx, owned);
}

void free_after(const Executable& e, std::size_t t, ExecContext& ctx, Owned& owned) {
  for (int s : e.free_after[t])
    if (owned.blocks[s]) device_free(owned.blocks[s], e.slots[s].bytes), owned.blocks[s] = nullptr, ctx.slots[s] = nullptr;
}

// Runs `run`, timed for the profile (launch position 0) and the trace: one
// event on the track of each of ctxs[0, n) (one device, or every device of a
// lockstep run for a thunk run once for all of them).
template <class Run>
void timed(const Thunk& thunk, ExecContext* const* ctxs, std::size_t n, bool profiled, Run run) {
  const bool traced = trace::on();
  if (!profiled && !traced) return run();
  const double us0 = trace::now_us(), c0 = profiled ? profile::thread_cpu_seconds() : 0;
  run();
  const double us1 = trace::now_us();
  if (traced)
    for (std::size_t i = 0; i < n; ++i)
      trace::complete(trace::device_track(ctxs[i]->device), thunk.describe(), thunk.category(), us0, us1,
                      thunk.trace_args());
  if (profiled) profile::record(thunk.describe(), (us1 - us0) * 1e-6, profile::thread_cpu_seconds() - c0);
}

// A thunk that does not wait on peers, on ctx: computing thunks wait for a
// compute slot first; the profile counts the thunk's own time only.
void run_computing(const Thunk& thunk, ExecContext& ctx, bool profiled) {
  ComputeSlot slot(thunk.width());
  ctx.machine_wide = slot.machine_wide();
  ExecContext* const self = &ctx;
  timed(thunk, &self, 1, profiled, [&] { thunk.run(ctx); });
}

// Every thunk of e in order on ctx (parameters and outputs bound already).
void run_thunks(const Executable& e, ExecContext& ctx, Owned& owned, bool profiled) {
  for (size_t t = 0; t < e.thunks.size(); ++t) {
    alloc_before(e, t, ctx, owned);
    const Thunk& thunk = *e.thunks[t];
    if (thunk.waits_on_peers()) {
      ctx.machine_wide = false;
      ExecContext* const self = &ctx;
      timed(thunk, &self, 1, profiled, [&] { thunk.run(ctx); });
    } else {
      run_computing(thunk, ctx, profiled);
    }
    free_after(e, t, ctx, owned);
  }
}

// Binds position i's parameters (waiting for them) and outputs in ctx,
// but for the `deferred` slots (their writer binds them: SharedSlots).
void bind(const Executable& e, ExecContext& ctx, int dev, int i, const std::vector<BufferRef>& ins,
          const std::vector<BufferRef>& outs, const std::vector<bool>* deferred = nullptr) {
  ctx.device = dev;
  ctx.position = i;
  ctx.slots.assign(e.slots.size(), nullptr);
  for (size_t k = 0; k < ins.size(); ++k) {
    ins[k]->ready().wait();
    ctx.slots[e.param_slots[k]] = ins[k]->data();
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    const int s = e.output_slots[k];
    if (!ctx.slots[s] && !(deferred && (*deferred)[std::size_t(s)])) ctx.slots[s] = outs[k]->materialize();
  }
}

// Whether thunk t writes over slot s, which it reads too (compile.cpp gives
// a step a dead operand's slot): the slot's writer before it binds it.
bool writes_over(const Executable& e, std::size_t t, int s) {
  return std::find(e.reads[t].begin(), e.reads[t].end(), s) != e.reads[t].end();
}

// The slots that a lockstep run inside one process binds as they are
// written (SharedSlots): those of thunks that share their results or are
// pure, but for a slot such a thunk writes over.
std::vector<bool> shared_result_slots(const Executable& e) {
  std::vector<bool> slots(e.slots.size(), false);
  for (std::size_t t = 0; t < e.thunks.size(); ++t)
    if (e.thunks[t]->shares_results() || e.thunks[t]->pure())
      for (int s : e.alloc_before[t])
        if (!writes_over(e, t, s)) slots[std::size_t(s)] = true;
  return slots;
}

void set_ready(const std::vector<BufferRef>& outs) {
  for (auto& o : outs)
    if (!o->ready().is_set()) o->ready().set();
}

// The same for a run that owns `outs`: each reference is let go as its event
// is set, so that a caller woken by it finds the run holding none of its
// results (a donating training step's next call reuses their blocks).
void set_ready_and_release(std::vector<BufferRef>& outs) {
  for (auto& o : outs) {
    BufferRef b = std::move(o);
    if (b && !b->ready().is_set()) b->ready().set();
  }
}

void set_error(const std::vector<BufferRef>& outs, std::exception_ptr error) {
  for (auto& o : outs)
    if (o && !o->ready().is_set()) o->ready().set_error(error);
}

// Position i of a launch on device dev: binds the buffers, runs every
// thunk, and sets the outputs' events (with the error, if one was thrown).
void run_on_device(const Executable& e, int dev, int i, std::vector<BufferRef> ins, std::vector<BufferRef> outs,
                   Communicator* comm, bool profiled) {
  Owned owned(e);
  try {
    ExecContext ctx;
    ctx.comm = comm;
    rt::bind(e, ctx, dev, i, ins, outs);  // qualified: not std::bind by ADL
    run_thunks(e, ctx, owned, profiled);
    // The inputs are let go before the results are ready: a caller that
    // then donates one finds this run holding none of it.
    ins.clear();
    set_ready_and_release(outs);
  } catch (...) {
    if (comm) comm->abort(std::current_exception());
    set_error(outs, std::current_exception());
  }
}

// The positions of a lockstep run inside one process sharing blocks
// (SharedSlots): ctxs[j] runs positions[j], with its temporaries in owned[j].
class LockstepSlots final : public SharedSlots {
 public:
  LockstepSlots(const Executable& e, std::vector<ExecContext>& ctxs, std::vector<Owned>& owned,
                const std::vector<std::vector<BufferRef>>& outputs, const std::vector<std::size_t>& positions)
      : e_(e), ctxs_(ctxs), owned_(owned), outputs_(outputs), positions_(positions) {}

  void* own(ExecContext& ctx, int slot) override {
    const std::size_t j = index(ctx), s = std::size_t(slot);
    TESSEL_CHECK_INTERNAL(!ctx.slots[s], "SharedSlots::own: slot ", slot, " is bound already");
    for (std::size_t k = 0; k < e_.output_slots.size(); ++k)
      if (e_.output_slots[k] == slot) ctx.slots[s] = outputs_[positions_[j]][k]->materialize();
    if (!ctx.slots[s]) alloc_temporary(e_, slot, ctx, owned_[j]);
    return ctx.slots[s];
  }

  void share(ExecContext& to, const ExecContext& from, int slot) override {
    const std::size_t j = index(to), i = index(from), s = std::size_t(slot);
    TESSEL_CHECK_INTERNAL(!to.slots[s] && from.slots[s], "SharedSlots::share: slot ", slot,
                          " is bound already, or its source is not");
    to.slots[s] = from.slots[s];
    for (std::size_t k = 0; k < e_.output_slots.size(); ++k) {
      if (e_.output_slots[k] != slot) continue;
      const BufferRef& out = outputs_[positions_[j]][k];
      const BufferRef& src = outputs_[positions_[i]][k];
      if (!out->is_view()) {
        out->view(src);
      } else if (out->owner() != src.get() && out->data() != from.slots[s]) {
        // The output took a donated block (Executable::launch): the twin's
        // bytes are copied into it.
        std::memcpy(out->data(), from.slots[s], e_.slots[s].bytes);
        to.slots[s] = out->data();
      }
    }
  }

 private:
  std::size_t index(const ExecContext& c) const {
    const std::size_t j = std::size_t(&c - ctxs_.data());
    TESSEL_CHECK_INTERNAL(j < ctxs_.size(), "SharedSlots::share: a context of another run");
    return j;
  }
  const Executable& e_;
  std::vector<ExecContext>& ctxs_;
  std::vector<Owned>& owned_;
  const std::vector<std::vector<BufferRef>>& outputs_;
  const std::vector<std::size_t>& positions_;
};

// Before a thunk writes over the `over` slots of the positions that compute
// it (`runs`; each of `same` shares its twin's results): a block that a
// position outside a run's twins also holds (a lockstep run let positions
// share a temporary computed once) would change under that position, so
// every run but the block's owner first takes a copy of its own. Twins then
// follow their run's block.
void own_blocks_written_over(const Executable& e, std::vector<ExecContext>& ctxs, std::vector<Owned>& owned,
                             const std::vector<std::size_t>& runs,
                             const std::vector<std::pair<std::size_t, std::size_t>>& same, const std::vector<int>& over,
                             std::vector<std::size_t>& twin_of) {
  const std::size_t n = ctxs.size();
  for (std::size_t k = 0; k < n; ++k) twin_of[k] = k;
  for (auto [j, twin] : same) twin_of[j] = twin;
  for (int s : over)
    for (std::size_t j : runs) {
      void* const block = ctxs[j].slots[std::size_t(s)];
      if (!block || owned[j].blocks[std::size_t(s)] == block) continue;
      bool elsewhere = false;
      for (std::size_t k = 0; k < n && !elsewhere; ++k)
        elsewhere = k != j && twin_of[k] != j && ctxs[k].slots[std::size_t(s)] == block;
      if (!elsewhere) continue;
      // A block it still owns but left for its twin's at an earlier write
      // over this slot: no position holds it any more.
      if (void* left = owned[j].blocks[std::size_t(s)]) {
        for (std::size_t k = 0; k < n; ++k)
          TESSEL_CHECK_INTERNAL(ctxs[k].slots[std::size_t(s)] != left, "a block written over in place: slot ", s,
                                " of position ", j, " still holds its own block elsewhere");
        device_free(left, e.slots[std::size_t(s)].bytes);
        owned[j].blocks[std::size_t(s)] = nullptr;
      }
      ctxs[j].slots[std::size_t(s)] = nullptr;
      alloc_temporary(e, s, ctxs[j], owned[j]);
      std::memcpy(ctxs[j].slots[std::size_t(s)], block, e.slots[std::size_t(s)].bytes);
    }
}

// Elements of work (a few microseconds on one core: a core's wake-up) below
// which a lockstep run computes a thunk's positions one after another on its
// own thread rather than side by side on the machine's cores (a loop's
// step of 16 floats per device woke the other core for every thunk).
constexpr std::int64_t kSpreadWork = 32768;

// The thunks of e, in order, for every context of ctxs (bound, each with
// its temporaries in owned[j]) on one thread's command: a thunk that waits
// on peers runs once for all positions (run_all), after every position
// computed its operands; a computing thunk runs for every position, one
// after another on this thread, or side by side on the machine's cores
// (`parallel`). With `shared` (a lockstep run inside one process) the
// `defer`red slots are bound as they are written, and a pure thunk runs once
// for the positions whose operands are the same blocks.
void run_thunks_lockstep(const Executable& e, std::vector<ExecContext>& ctxs, std::vector<Owned>& owned, bool profiled,
                         bool parallel, SharedSlots* shared, const std::vector<bool>* defer) {
  const std::size_t n = ctxs.size();
  std::vector<ExecContext*> all;
  for (auto& c : ctxs) all.push_back(&c);
  auto compute = [&](const Thunk& thunk, std::size_t j) {
    ActAs as(ctxs[j].device);
    run_computing(thunk, ctxs[j], profiled && j == 0);
  };
  std::vector<std::size_t> runs;                          // the positions that compute a thunk
  std::vector<std::pair<std::size_t, std::size_t>> same;  // (position, the one whose results it shares)
  std::vector<std::size_t> twin_of(n);
  std::vector<int> over;  // the slots a thunk writes over
  for (std::size_t t = 0; t < e.thunks.size(); ++t) {
    const Thunk& thunk = *e.thunks[t];
    over.clear();
    for (int s : e.alloc_before[t])
      if (writes_over(e, t, s)) over.push_back(s);
    for (std::size_t i = 0; i < n; ++i) alloc_before(e, t, ctxs[i], owned[i], defer);
    if (thunk.waits_on_peers()) {
      // Once for all: on every device's track in a trace.
      ActAs as(ctxs[0].device);
      timed(thunk, all.data(), n, profiled, [&] { thunk.run_all(all); });
    } else {
      // A pure thunk runs once for the positions whose operands are the
      // same blocks (a replicated value's work, done once per process).
      const bool once = shared && defer && thunk.pure();
      runs.clear();
      same.clear();
      for (std::size_t j = 0; j < n; ++j) {
        std::size_t twin = j;
        if (once)
          for (std::size_t r : runs) {
            bool equal = true;
            for (int s : e.reads[t]) equal = equal && ctxs[r].slots[std::size_t(s)] == ctxs[j].slots[std::size_t(s)];
            if (equal) {
              twin = r;
              break;
            }
          }
        if (twin != j) {
          same.push_back({j, twin});
          continue;
        }
        runs.push_back(j);
        if (once)
          for (int s : e.alloc_before[t])
            if (std::find(over.begin(), over.end(), s) == over.end()) shared->own(ctxs[j], s);
      }
      if (!over.empty()) own_blocks_written_over(e, ctxs, owned, runs, same, over, twin_of);
      if (parallel && runs.size() > 1 && thunk.work() >= kSpreadWork / std::int64_t(runs.size())) {
        parallel_for_machine(0, std::int64_t(runs.size()), 1, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t i = lo; i < hi; ++i) compute(thunk, runs[std::size_t(i)]);
        });
      } else {
        for (std::size_t j : runs) compute(thunk, j);
      }
      if (shared)  // else none shares
        for (auto [j, twin] : same)
          for (int s : e.alloc_before[t]) {
            if (std::find(over.begin(), over.end(), s) == over.end()) shared->share(ctxs[j], ctxs[twin], s);
            else ctxs[j].slots[std::size_t(s)] = ctxs[twin].slots[std::size_t(s)];  // its twin's block, written over
          }
    }
    for (std::size_t i = 0; i < n; ++i) free_after(e, t, ctxs[i], owned[i]);
  }
}

// Every position of a launch on one thread's command (run_thunks_lockstep):
// a cheap launch on claimed idle devices, one position after another on
// this thread, or a lockstep launch whose devices' threads wait for it
// (`parallel`). `positions` are the launch positions (of device_ids, inputs
// and outputs) in this process: every one in a launch inside it, whose
// collectives read every operand in place and may share their results'
// blocks (SharedSlots); in a launch across processes, whose collectives
// meet the other processes through `comm` (Communicator::meet, for every
// member here at once), only its own. `result_slots`:
// shared_result_slots(e), which the launch computed.
void run_lockstep(const Executable& e, const std::vector<int>& device_ids, std::vector<std::vector<BufferRef>>& inputs,
                  std::vector<std::vector<BufferRef>>& outputs, bool profiled, bool parallel,
                  const std::vector<std::size_t>& positions, Communicator* comm, const std::vector<bool>& result_slots,
                  bool release) {
  const std::size_t n = positions.size();
  std::vector<ExecContext> ctxs(n);
  std::vector<Owned> owned;
  owned.reserve(n);
  LockstepSlots shared(e, ctxs, owned, outputs, positions);
  // Inside one process the thunks that share their results bind what they write.
  const std::vector<bool>* defer = comm ? nullptr : &result_slots;
  try {
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t i = positions[j];
      owned.emplace_back(e);
      rt::bind(e, ctxs[j], device_ids[i], int(i), inputs[i], outputs[i], defer);
      ctxs[j].comm = comm;
      ctxs[j].parallel = parallel;
      if (!comm) ctxs[j].shared = &shared;
    }
    run_thunks_lockstep(e, ctxs, owned, profiled, parallel, comm ? nullptr : &shared, defer);
    if (release) {
      // The run owns the buffers: it lets go of its inputs, then of each
      // result as it is set ready (set_ready_and_release).
      for (auto& v : inputs) v.clear();
      for (std::size_t i : positions) set_ready_and_release(outputs[i]);
    } else {
      for (std::size_t i : positions) set_ready(outputs[i]);
    }
  } catch (...) {
    if (comm) comm->abort(std::current_exception());
    for (std::size_t i : positions) set_error(outputs[i], std::current_exception());
  }
}

// A region's context within `parent`'s run (run_inline, run_inline_all):
// its parameters and outputs bound (an output whose slot is its own is
// computed in place: direct[k]; the others, parameters and repeated slots,
// are copied at the end).
ExecContext region_context(const Executable& e, const ExecContext& parent, const std::vector<void*>& params,
                           const std::vector<void*>& outs, std::vector<bool>& direct) {
  TESSEL_CHECK_INTERNAL(params.size() == e.param_slots.size() && outs.size() == e.output_slots.size(),
                        "run_inline: wrong number of buffers");
  ExecContext ctx;
  ctx.device = parent.device;
  ctx.position = parent.position;
  ctx.comm = parent.comm;
  ctx.parallel = parent.parallel;
  ctx.slots.assign(e.slots.size(), nullptr);
  for (size_t k = 0; k < params.size(); ++k) ctx.slots[e.param_slots[k]] = params[k];
  direct.assign(outs.size(), false);
  for (size_t k = 0; k < outs.size(); ++k) {
    const int s = e.output_slots[k];
    if (ctx.slots[s]) continue;
    ctx.slots[s] = outs[k];
    if (e.slots[s].zero_init) std::memset(outs[k], 0, e.slots[s].bytes);
    direct[k] = true;
  }
  return ctx;
}

void copy_indirect(const Executable& e, const ExecContext& ctx, const std::vector<void*>& outs,
                   const std::vector<bool>& direct) {
  for (size_t k = 0; k < outs.size(); ++k)
    if (!direct[k] && e.slots[e.output_slots[k]].bytes)
      std::memcpy(outs[k], ctx.slots[e.output_slots[k]], e.slots[e.output_slots[k]].bytes);
}

}  // namespace

void Thunk::run_all(const std::vector<ExecContext*>&) const {
  throw InternalError(describe() + " has no run_all (only thunks that wait on peers and can_run_all have one)");
}

void Executable::run_inline(const ExecContext& parent, const std::vector<void*>& params,
                            const std::vector<void*>& outs) const {
  std::vector<bool> direct;
  ExecContext ctx = region_context(*this, parent, params, outs, direct);
  Owned owned(*this);
  run_thunks(*this, ctx, owned, false);
  copy_indirect(*this, ctx, outs, direct);
}

void Executable::run_inline_all(const std::vector<ExecContext*>& parents, const std::vector<std::vector<void*>>& params,
                                const std::vector<std::vector<void*>>& outs) const {
  const std::size_t n = parents.size();
  TESSEL_CHECK_INTERNAL(params.size() == n && outs.size() == n, "run_inline_all: buffers for other positions");
  std::vector<ExecContext> ctxs;
  std::vector<std::vector<bool>> direct(n);
  std::vector<Owned> owned;
  ctxs.reserve(n);
  owned.reserve(n);
  for (std::size_t j = 0; j < n; ++j) {
    ctxs.push_back(region_context(*this, *parents[j], params[j], outs[j], direct[j]));
    owned.emplace_back(*this);
  }
  run_thunks_lockstep(*this, ctxs, owned, false, n > 0 && parents[0]->parallel, nullptr, nullptr);
  for (std::size_t j = 0; j < n; ++j) copy_indirect(*this, ctxs[j], outs[j], direct[j]);
}

LaunchMode choose_launch_mode(const Executable& e, std::size_t local_devices, bool inputs_ready, bool allow_inline,
                              bool allow_lockstep) {
  // Cheap programs on idle devices run on the caller's thread: waking
  // device threads costs more than the work (XLA:CPU runs cheap
  // computations inline too). Only with every input computed already, so
  // nothing waits on a device thread (and only while the devices are idle:
  // Executable::launch claims them, else it asks again without).
  if (e.cheap && allow_inline && local_devices > 0 && inputs_ready) return LaunchMode::here;
  // Devices whose threads outnumber the cores run a launch over several of
  // them in lockstep: each device's thread takes the launch in its turn (so
  // launches keep their order on every device) and waits, asleep; one
  // thread runs every position's part, thunk by thunk, the positions side
  // by side on the machine's cores, and a collective once for all members
  // from their operands. No device waits for a peer's thread or for a core
  // in the middle of a program: with 8 device threads on 2 cores each such
  // wait was a sleep and a wake-up (sin of 8192^2 over 8 devices: 1.49 of 2
  // cores busy, 10.3 ms against 8.0 on one device; in lockstep 8.1). Across
  // processes, a process runs its positions so and meets the others from
  // that one thread (2 processes x 4 devices on 2 cores: a 1 KiB psum took
  // 0.25 ms on the devices' threads, each collective waking four of them).
  // It takes a program whose every thunk can run for all positions at once.
  bool lockstep = allow_lockstep && local_devices > 1 && Runtime::get().devices_share_cores();
  for (auto& t : e.thunks) lockstep = lockstep && t->can_run_all();
  if (lockstep) return LaunchMode::lockstep;
  // Else each device runs its part on its own thread, and collectives meet
  // through a communicator.
  return LaunchMode::per_device;
}

namespace {

// A lockstep launch (LaunchMode::lockstep) of this process's positions.
void launch_lockstep(std::shared_ptr<const Executable> self, const std::vector<int>& device_ids,
                     const std::vector<int>& local_ids, const std::vector<std::size_t>& local_pos,
                     const std::vector<std::vector<BufferRef>>& inputs, const std::vector<std::vector<BufferRef>>& outputs,
                     std::shared_ptr<Communicator> comm, std::vector<bool> deferred) {
  const bool profiled = profile::enabled();
  // Every device but the first idle: they are claimed and the first
  // device's thread runs the launch (one wake-up, not one per device).
  auto run = [self, ids = device_ids, local = local_ids, here = local_pos, comm, ins = inputs, outs = outputs, profiled,
              deferred]() mutable {
    // The buffers die with this call, not with the task (see below).
    auto in_bufs = std::move(ins);
    auto out_bufs = std::move(outs);
    run_lockstep(*self, ids, in_bufs, out_bufs, profiled, true, here, comm.get(), deferred, true);
    Runtime::get().release_claimed(local);
  };
  if (Runtime::get().launch_claiming(local_ids, std::move(run))) return;
  // Else every device's thread takes the launch in its turn; the last to
  // arrive runs it.
  struct Gang {
    std::vector<int> device_ids;
    std::vector<std::size_t> here;
    std::shared_ptr<Communicator> comm;
    std::size_t members = 0;  // this process's devices
    std::vector<std::vector<BufferRef>> inputs, outputs;
    std::vector<bool> deferred;  // shared_result_slots
    std::atomic<std::size_t> arrived{0};
    Event done;
  };
  auto gang = std::make_shared<Gang>();
  gang->device_ids = device_ids;
  gang->here = local_pos;
  gang->comm = comm;
  gang->members = local_ids.size();
  gang->deferred = std::move(deferred);
  gang->inputs = inputs;
  gang->outputs = outputs;
  Runtime::get().launch(local_ids, [&](int) -> std::function<void()> {
    return [self, gang, profiled] {
      if (gang->arrived.fetch_add(1) + 1 < gang->members) return gang->done.wait();
      // The buffers leave the gang before the outputs are ready: the
      // sleeping devices' tasks hold the gang until they wake, and a
      // caller that drops the results and launches again must find their
      // blocks free (else each launch takes fresh pages).
      auto ins = std::move(gang->inputs);
      auto outs = std::move(gang->outputs);
      gang->inputs.clear();
      gang->outputs.clear();
      run_lockstep(*self, gang->device_ids, ins, outs, profiled, true, gang->here, gang->comm.get(), gang->deferred, true);
      gang->done.set();
    };
  });
}

}  // namespace

bool Executable::write_over_safe(int param, int out) const {
  const int ps = param_slots[std::size_t(param)];
  if (ps == out || slots[std::size_t(ps)].bytes != slots[std::size_t(out)].bytes || slots[std::size_t(out)].bytes == 0 ||
      slots[std::size_t(out)].zero_init)
    return false;
  for (int s : param_slots)
    if (s == out) return false;
  for (int s : output_slots)  // the parameter is returned as it is: its block stays its own
    if (s == ps) return false;
  int writer = -1;
  for (std::size_t t = 0; t < thunks.size() && writer < 0; ++t)
    for (int s : alloc_before[t])
      if (s == out) writer = int(t);
  if (writer < 0) return false;
  for (std::size_t t = 0; t < thunks.size(); ++t)
    for (std::size_t i = 0; i < reads[t].size(); ++i) {
      if (reads[t][i] != ps) continue;
      if (thunks[t]->peers_read(i) || int(t) > writer) return false;
      if (int(t) == writer && (!thunks[t]->may_write_over(i, out) || std::count(reads[t].begin(), reads[t].end(), ps) != 1))
        return false;
    }
  return true;
}

namespace {
// Whether a launch holding b may take its block. Beside the launch, b may be
// held by buffers that view it or by other arrays (then it stays theirs), or
// for a moment by the run that wrote or read it, which lets go as it sets its
// results ready: a buffer that is ready and that nothing views waits up to
// 10 ms for such a holder to let go.
bool sole_holder(const BufferRef& b) {
  if (b.use_count() == 1) return true;
  if (b->viewers() > 0 || !b->ready().is_set()) return false;
  for (int k = 0; k < 500 && b.use_count() != 1; ++k) std::this_thread::sleep_for(std::chrono::microseconds(20));
  return b.use_count() == 1;
}
}  // namespace

std::vector<std::vector<BufferRef>> Executable::launch(const std::vector<int>& device_ids,
                                                       const std::vector<std::vector<BufferRef>>& inputs,
                                                       bool allow_inline, bool allow_lockstep,
                                                       const std::vector<bool>* donated) const {
  const std::size_t n = device_ids.size();
  TESSEL_CHECK_INTERNAL(inputs.size() == n, "inputs for ", inputs.size(), " devices, launch on ", n);
  std::vector<int> param_of_slot(slots.size(), -1);
  for (size_t k = 0; k < param_slots.size(); ++k) param_of_slot[param_slots[k]] = int(k);

  // Only this process's positions run here (the others in their own
  // processes); their outputs stay empty.
  const Runtime& runtime = Runtime::get();
  std::vector<int> local_ids;
  std::vector<std::size_t> local_pos;
  local_ids.reserve(n);
  local_pos.reserve(n);
  for (size_t i = 0; i < n; ++i)
    if (runtime.is_local(device_ids[i])) local_ids.push_back(device_ids[i]), local_pos.push_back(i);
  std::vector<std::vector<BufferRef>> outputs(n);
  // The results that devices may share take their blocks when written.
  std::vector<bool> deferred = shared_result_slots(*this);
  // Per output slot, the donated parameters whose blocks it may take (the
  // same on every position: decided once per launch).
  std::vector<std::vector<std::size_t>> donors(slots.size());
  if (donated)
    for (int s : output_slots)
      for (std::size_t k = 0; k < param_slots.size(); ++k)
        if ((*donated)[k] && write_over_safe(int(k), s)) donors[std::size_t(s)].push_back(k);
  for (size_t i : local_pos) {
    TESSEL_CHECK_INTERNAL(inputs[i].size() == param_slots.size(), "wrong number of inputs");
    std::vector<BufferRef> by_slot(slots.size());
    std::vector<bool> taken(param_slots.size(), false);
    // A donated input's block for an output: a buffer of its own viewing it
    // (the output's readiness is its own), the input's last reference once
    // the run drops its inputs. An input that views another's block (an
    // output of an earlier donating step) gives that block where the view is
    // its only holder, along the whole chain: the new output views the
    // block's owner itself, so a training loop's chain of views stays one long.
    auto donor = [&](int s) -> BufferRef {
      for (std::size_t k : donors[std::size_t(s)]) {
        const BufferRef& b = inputs[i][k];
        if (taken[k] || !b || !sole_holder(b)) continue;
        const BufferRef* block = &b;
        while ((*block)->is_view() && (*block)->owner_ref().use_count() == 1) block = &(*block)->owner_ref();
        if ((*block)->is_view() || (*block)->is_external() || (*block)->bytes() < slots[s].bytes) continue;
        taken[k] = true;
        BufferRef out = Buffer::deferred(device_ids[i], slots[s].bytes);
        out->view(*block);
        return out;
      }
      return nullptr;
    };
    for (int s : output_slots) {
      if (param_of_slot[s] >= 0) by_slot[s] = inputs[i][param_of_slot[s]];
      else if (!by_slot[s] && (by_slot[s] = donor(s))) {
      } else if (!by_slot[s] && deferred[std::size_t(s)] && !slots[s].zero_init) {
        by_slot[s] = Buffer::deferred(device_ids[i], slots[s].bytes);
      } else if (!by_slot[s]) {
        by_slot[s] = Buffer::allocate(device_ids[i], slots[s].bytes);
        if (slots[s].zero_init) std::memset(by_slot[s]->data(), 0, slots[s].bytes);
      }
      outputs[i].push_back(by_slot[s]);
    }
  }
  bool inputs_ready = true;
  for (std::size_t i : local_pos)
    for (auto& b : inputs[i]) inputs_ready = inputs_ready && b->ready().is_set();
  LaunchMode mode = choose_launch_mode(*this, local_ids.size(), inputs_ready, allow_inline, allow_lockstep);
  // A launch across processes meets the other processes through its
  // communicator, whichever way this process runs its part (made now: every
  // process makes one per launch across processes, so that they count such
  // launches alike); inside one process only a launch on the devices'
  // threads meets through one.
  const bool spans = local_ids.size() < n;
  std::shared_ptr<Communicator> comm = uses_collectives && spans ? make_communicator(device_ids, fingerprint) : nullptr;
  if (mode == LaunchMode::here) {
    Runtime::Inline claimed(Runtime::get(), local_ids);
    if (claimed) {
      // On the caller's thread: the caller holds the inputs anyway, and the outputs are returned.
      auto ins = inputs;
      run_lockstep(*this, device_ids, ins, outputs, profile::enabled(), false, local_pos, comm.get(), deferred, false);
      return outputs;
    }
    mode = choose_launch_mode(*this, local_ids.size(), inputs_ready, false, allow_lockstep);
  }
  std::shared_ptr<const Executable> self = shared_from_this();
  if (mode == LaunchMode::lockstep) {
    launch_lockstep(self, device_ids, local_ids, local_pos, inputs, outputs, comm, std::move(deferred));
    return outputs;
  }
  if (uses_collectives && !spans) comm = make_communicator(device_ids, fingerprint);
  Runtime::get().launch(local_ids, [&](int j) -> std::function<void()> {
    const int i = int(local_pos[std::size_t(j)]);
    std::vector<BufferRef> ins = inputs[i], outs = outputs[i];
    int dev = device_ids[i];
    const bool profiled = j == 0 && profile::enabled();  // this process's first device
    // The buffers die with this call, not with the task.
    return [self, ins, outs, dev, i, comm, profiled]() mutable {
      run_on_device(*self, dev, i, std::move(ins), std::move(outs), comm.get(), profiled);
    };
  });
  return outputs;
}

std::size_t Executable::peak_bytes() const {
  std::vector<bool> fixed(slots.size(), false);
  for (int s : param_slots) fixed[s] = true;
  std::size_t outs = 0;
  for (int s : output_slots)
    if (!fixed[s]) outs += slots[s].bytes, fixed[s] = true;
  // A slot two steps write (a step writing over the temporary it reads) is
  // allocated once.
  std::vector<bool> held(slots.size(), false);
  std::size_t live = 0, peak = 0;
  for (size_t t = 0; t < thunks.size(); ++t) {
    for (int s : alloc_before[t])
      if (!fixed[s] && !held[s]) live += slots[s].bytes, held[s] = true;
    peak = std::max(peak, live);
    for (int s : free_after[t])
      if (!fixed[s] && held[s]) live -= slots[s].bytes, held[s] = false;
  }
  return outs + peak;
}

std::size_t host_memory_bytes() {
  static const std::size_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? std::size_t(pages) * std::size_t(size) : std::size_t(1) << 40;
  }();
  return bytes;
}

bool fits_host(std::size_t bytes, std::size_t devices) { return devices == 0 || bytes <= host_memory_bytes() / devices; }

std::string Executable::describe() const {
  std::ostringstream os;
  for (auto& t : thunks) os << "  " << t->describe() << '\n';
  return os.str();
}

}  // namespace tessel::rt
