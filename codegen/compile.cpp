#include "codegen/compile.hpp"
#include "codegen/complex.hpp"
#include "codegen/library.hpp"
#include "codegen/narrow_ops.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "codegen/dot.hpp"
#include "codegen/schedule.hpp"
#include "codegen/emit.hpp"
#include "codegen/fold.hpp"
#include "codegen/fusion.hpp"
#include "codegen/transpose.hpp"
#include "codegen/transpose_folding.hpp"
#include "codegen/update.hpp"
#include "runtime/collectives.hpp"
#include "runtime/executable.hpp"
#include "runtime/device.hpp"
#include "runtime/trace.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/rules.hpp"

namespace tessel::codegen {

namespace {

class EmptyThunk final : public rt::Thunk {
 public:
  explicit EmptyThunk(std::string text) : text_(std::move(text)) {}
  void run(rt::ExecContext&) const override {}
  std::string describe() const override { return text_; }
  std::int64_t work() const override { return 0; }

 private:
  std::string text_;
};

class KernelThunk final : public rt::Thunk {
 public:
  // writable: per read, whether a launch may bind the output to its block
  // (a donated parameter the kernel reads aligned): run then uses a variant
  // of the kernel that writes over it (compile_kernel's alias_read),
  // compiled the first time it is needed.
  // stream: k writes its result with non-temporal stores (compile_kernel's
  // stream), which needs a line-aligned output block; any other block runs
  // a plain kernel, compiled the first time it is needed.
  KernelThunk(Kernel k, std::vector<int> slots, std::string text, Step step = {}, std::vector<bool> writable = {},
              bool stream = false)
      : k_(std::move(k)), slots_(std::move(slots)), text_(std::move(text)), step_(std::move(step)),
        writable_(std::move(writable)), variants_(writable_.size()), stream_(stream) {}
  void run(rt::ExecContext& ctx) const override {
    std::vector<void*> bufs(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) bufs[i] = ctx.slots[slots_[i]];
    const Kernel* k = &k_;
    for (std::size_t r = 0; r < writable_.size(); ++r)
      if (writable_[r] && bufs[0] == bufs[r + 1]) k = &variant(r);
    if (k == &k_ && stream_ && reinterpret_cast<std::uintptr_t>(bufs[0]) % kStreamAlign) k = &plain();
    // Chunks of at least ~32K elements of work each.
    const std::int64_t grain = std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, k->work_per_item));
    // Non-temporal stores are weakly ordered: each chunk drains its own
    // before the run can hand the result on.
    const bool fence = k == &k_ && stream_;
    auto chunk = [&](std::int64_t b, std::int64_t e) {
      k->fn(bufs.data(), b, e);
      if (fence) rt::stream_fence();
    };
    rt::parallel_for(ctx, 0, k->items, grain, chunk);
  }
  std::string describe() const override { return text_; }
  bool pure() const override { return true; }
  bool may_write_over(std::size_t read, int) const override { return read < writable_.size() && writable_[read]; }
  std::int64_t work() const override { return k_.items * std::max<std::int64_t>(1, k_.work_per_item); }
  // A large loop nest takes every core when no other device has work (a
  // program on one device uses the whole host, as JAX's CPU devices do).
  rt::ComputeSlot::Width width() const override { return rt::width_for_work(k_.items * k_.work_per_item); }

 private:
  const Kernel& variant(std::size_t r) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!variants_[r]) variants_[r] = compile_kernel(step_, int(r));
    return *variants_[r];
  }
  const Kernel& plain() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!plain_) plain_ = compile_kernel(step_);
    return *plain_;
  }
  Kernel k_;
  std::vector<int> slots_;
  std::string text_;
  Step step_;
  std::vector<bool> writable_;
  mutable std::mutex mutex_;
  mutable std::vector<std::optional<Kernel>> variants_;
  bool stream_ = false;
  mutable std::optional<Kernel> plain_;
};

class ConstantThunk final : public rt::Thunk {
 public:
  ConstantThunk(LiteralRef lit, int slot) : lit_(std::move(lit)), slot_(slot) {}
  void run(rt::ExecContext& ctx) const override {
    if (!lit_->bytes.empty()) std::memcpy(ctx.slots[slot_], lit_->bytes.data(), lit_->bytes.size());
  }
  std::string describe() const override { return "constant " + aval_str(lit_->dtype, lit_->shape); }
  std::int64_t work() const override { return std::int64_t(lit_->bytes.size() / 4); }
  bool pure() const override { return true; }
  const char* category() const override { return "constant"; }

 private:
  LiteralRef lit_;
  int slot_;
};

// The device's coordinate along mesh axes, from its position in the launch.
class AxisIndexThunk final : public rt::Thunk {
 public:
  AxisIndexThunk(MeshRef mesh, std::vector<int> axes, int slot) : mesh_(std::move(mesh)), axes_(std::move(axes)), slot_(slot) {}
  void run(rt::ExecContext& ctx) const override {
    std::int64_t v = 0;
    for (int a : axes_) v = v * mesh_->axes()[a].size + mesh_->coord(ctx.position, a);
    *static_cast<std::int32_t*>(ctx.slots[slot_]) = std::int32_t(v);
  }
  std::string describe() const override { return "axis-index"; }
  std::int64_t work() const override { return 1; }

 private:
  MeshRef mesh_;
  std::vector<int> axes_;
  int slot_;
};

// ------------------------------------------------------------------ collectives

// dst[0, count) = first[0, count) folded with each of rest[0, count) in
// order, in one pass over every operand (fold.hpp), tiles of 32 KiB spread
// over the device's threads. `first` may be dst.
void fold_tiles(DType t, Op op, char* dst, const char* first, const std::vector<const void*>& rest,
                std::int64_t count) {
  fold::Type ft = fold::Type::f32;
  switch (t) {
    case DType::bool_: ft = fold::Type::bool_; break;
    case DType::int32: ft = fold::Type::i32; break;
    case DType::int64: ft = fold::Type::i64; break;
    case DType::uint32: ft = fold::Type::u32; break;
    case DType::float32: ft = fold::Type::f32; break;
    case DType::float64: ft = fold::Type::f64; break;
    case DType::int8: ft = fold::Type::i8; break;
    case DType::uint8: ft = fold::Type::u8; break;
    case DType::int16: ft = fold::Type::i16; break;
    case DType::uint16: ft = fold::Type::u16; break;
    case DType::uint64: ft = fold::Type::u64; break;
    case DType::bfloat16: ft = fold::Type::bf16; break;
    case DType::float16: ft = fold::Type::f16; break;
    case DType::float8_e4m3fn: ft = fold::Type::f8e4m3fn; break;
    case DType::float8_e5m2: ft = fold::Type::f8e5m2; break;
    case DType::float8_e8m0fnu: ft = fold::Type::f8e8m0fnu; break;
    case DType::float4_e2m1fn: ft = fold::Type::f4e2m1fn; break;
    case DType::complex64:
    case DType::complex128:
      throw InternalError("a complex collective reached the runtime (codegen/complex.cpp makes them real)");
  }
  if (op != Op::add && op != Op::max && op != Op::min)
    throw InternalError(std::string("a collective reduction by ") + op_name(op) + " reached the runtime");
  const fold::Combine c = op == Op::add ? fold::Combine::add : op == Op::max ? fold::Combine::max : fold::Combine::min;
  const std::size_t es = dtype_size(t);
  const std::int64_t tile = std::int64_t(32 * 1024 / es);
  rt::parallel_for(0, (count + tile - 1) / tile, 1, [&](std::int64_t b, std::int64_t e) {
    std::vector<const void*> at(rest.size());
    for (std::int64_t k = b; k < e; ++k) {
      const std::int64_t lo = k * tile, len = std::min(tile, count - lo);
      for (std::size_t r = 0; r < rest.size(); ++r) at[r] = static_cast<const char*>(rest[r]) + lo * es;
      fold::fold(ft, c, dst + lo * es, first + lo * es, at.data(), int(at.size()), len);
    }
  });
}

// A collective op as the runtime's collective (runtime/collectives.hpp,
// where its one algorithm lives, for every way a launch runs).
rt::Collective describe_collective(const Node& n, int in, int out) {
  const CollectiveAxes ca = collective_axes(n);
  if (op_family(n.op) != OpFamily::Collective || !ca.mesh)
    throw InternalError(std::string(op_name(n.op)) + " is not a collective");
  rt::Collective c;
  c.element_bytes = dtype_size(n.dtype());
  c.in_shape = n.in[0]->shape();
  c.out_shape = n.shape();
  c.in_slot = in;
  c.out_slot = out;
  if (ca.axes) c.groups = collective_groups(**ca.mesh, *ca.axes);
  auto reduction = [&](Op reduce) {
    const DType t = n.dtype();
    c.fold = [t, reduce](void* dst, const void* first, const std::vector<const void*>& rest, std::int64_t count) {
      fold_tiles(t, reduce, static_cast<char*>(dst), static_cast<const char*>(first), rest, count);
    };
  };
  switch (n.op) {
    case Op::all_reduce:
      c.kind = rt::CollectiveKind::all_reduce;
      reduction(n.attr<attr::AllReduce>().reduce_op);
      break;
    case Op::all_gather:
      c.kind = rt::CollectiveKind::all_gather;
      c.dimension = n.attr<attr::AllGather>().dimension;
      break;
    case Op::reduce_scatter:
      c.kind = rt::CollectiveKind::reduce_scatter;
      c.dimension = n.attr<attr::ReduceScatter>().dimension;
      reduction(n.attr<attr::ReduceScatter>().reduce_op);
      break;
    case Op::all_to_all:
      c.kind = rt::CollectiveKind::all_to_all;
      c.dimension = n.attr<attr::AllToAll>().split_dimension;
      c.concat = n.attr<attr::AllToAll>().concat_dimension;
      break;
    case Op::collective_permute: {
      // Pairs, not groups: it meets as one group, every position of its mesh.
      const auto& p = n.attr<attr::CollectivePermute>();
      c.kind = rt::CollectiveKind::permute;
      c.groups.assign(1, {});
      for (std::int64_t i = 0; i < p.mesh->size(); ++i) c.groups[0].push_back(i);
      for (auto [s, t] : p.pairs) c.pairs.push_back({s, t});
      break;
    }
    default: throw InternalError(std::string(op_name(n.op)) + " is not a collective");
  }
  return c;
}

// A collective: the runtime runs it, whichever way the launch runs.
class CollectiveThunk final : public rt::Thunk {
 public:
  CollectiveThunk(const Node& n, int in, int out) : c_(describe_collective(n, in, out)) {
    std::ostringstream os;
    os << op_name(n.op) << ' ' << n.in[0]->aval.str() << " -> " << n.aval.str();
    text_ = os.str();
  }
  bool waits_on_peers() const override { return true; }
  void run(rt::ExecContext& ctx) const override { rt::run_collective(c_, {&ctx}); }
  void run_all(const std::vector<rt::ExecContext*>& ctxs) const override { rt::run_collective(c_, ctxs); }
  bool can_run_all() const override { return true; }
  bool shares_results() const override { return c_.same_result(); }
  std::string describe() const override { return text_; }
  const char* category() const override { return "collective"; }
  // The bytes each device contributes and receives.
  std::string trace_args() const override {
    return "\"bytes_in\": " + std::to_string(c_.in_bytes()) + ", \"bytes_out\": " + std::to_string(c_.out_bytes()) +
           ", \"group_size\": " + std::to_string(c_.groups.empty() ? 0 : c_.groups.front().size());
  }

 private:
  rt::Collective c_;
  std::string text_;
};

// ------------------------------------------------------------------ control flow

// cond, while and scan: each region is an executable of its own, run
// inline within this thunk: for one device on its thread (run, the
// regions' Executable::run_inline), or for every position of a lockstep run
// at once (run_all, Executable::run_inline_all: the regions' collectives
// then meet no one inside one process, only other processes, and no device
// thread wakes per step). Loops keep two
// sets of carry buffers per position, the results' own and temporaries,
// and swap them each step; a scan's steps read their x slices and write
// their y slices in place (the leading axis is the outermost). A while
// loop runs until every position's predicate is false, each position
// leaving when its own is.
class ControlThunk final : public rt::Thunk {
 public:
  ControlThunk(const Node& n, std::vector<int> reads, std::vector<int> writes,
               std::vector<std::shared_ptr<rt::Executable>> regions, const std::vector<std::vector<int>>& in_place,
               std::string text)
      : op_(n.op), reads_(std::move(reads)), writes_(std::move(writes)), regions_(std::move(regions)),
        text_(std::move(text)) {
    for (auto& x : n.in) in_bytes_.push_back(std::size_t(numel(x->shape())) * dtype_size(x->dtype()));
    for (auto& e : n.aval.elements) out_bytes_.push_back(std::size_t(numel(e.shape)) * dtype_size(e.dtype));
    if (op_ == Op::while_) {
      first_ = std::size_t(n.attr<attr::While>().cond_consts);
      consts_ = std::size_t(n.attr<attr::While>().body_consts);
      carries_ = out_bytes_.size();
    } else if (op_ == Op::scan) {
      const auto& s = n.attr<attr::Scan>();
      consts_ = std::size_t(s.consts);
      carries_ = std::size_t(s.carries);
      length_ = s.length;
      reverse_ = s.reverse;
    }
    for (auto& r : regions_)
      for (auto& t : r->thunks) run_all_ = run_all_ && t->can_run_all();
    // The carries the body updates in place (its output k written over its
    // parameter for carry k): one buffer for every step.
    if (op_ == Op::while_ || op_ == Op::scan) {
      const std::vector<int>& body = in_place.at(op_ == Op::while_ ? 1 : 0);
      for (std::size_t k = 0; k < carries_; ++k)
        if (k < body.size() && body[k] == int(consts_ + k)) in_place_.push_back(k);
      if (!in_place_.empty()) {
        std::ostringstream os;
        os << " carries updated in place:";
        for (std::size_t k : in_place_) os << ' ' << k;
        text_ += os.str();
      }
    }
  }
  // Its regions' thunks take compute slots (and meet peers) themselves.
  bool waits_on_peers() const override { return true; }
  // A loop reads a carry's initial value once, copying it into the carry's
  // result before any step (skipped where the two are one block): that
  // result may take the initial value's block, which no peer reads (the
  // regions' collectives read the carries). Constants and a branch's
  // operands are read in place by the regions.
  bool may_write_over(std::size_t read, int out) const override {
    const std::optional<std::size_t> k = carry_of(read);
    return k && writes_[*k] == out;
  }
  bool peers_read(std::size_t read) const override { return !carry_of(read); }
  // Where every thunk of its regions can (a distributed factorisation over groups that span processes cannot).
  bool can_run_all() const override { return run_all_; }
  std::string describe() const override { return text_; }
  const char* category() const override { return "control"; }

  void run(rt::ExecContext& ctx) const override { execute({&ctx}, false); }
  void run_all(const std::vector<rt::ExecContext*>& ctxs) const override { execute(ctxs, true); }

 private:
  using Buffers = std::vector<std::vector<void*>>;  // per position
  // The carry whose initial value is read `read`, for a loop.
  std::optional<std::size_t> carry_of(std::size_t read) const {
    if (op_ != Op::while_ && op_ != Op::scan) return std::nullopt;
    const std::size_t at = carry_at();
    if (read < at || read >= at + carries_) return std::nullopt;
    return read - at;
  }
  std::size_t carry_at() const { return op_ == Op::while_ ? first_ + consts_ : consts_; }
  // ctxs: one device on its thread (together: false), or every position of
  // a lockstep run.
  void execute(const std::vector<rt::ExecContext*>& ctxs, bool together) const {
    const std::size_t n = ctxs.size();
    auto slot = [&](std::size_t j, int s) { return ctxs[j]->slots[size_t(s)]; };
    // Region r for the positions `who` (indices into ctxs), params[k] and
    // outs[k] for who[k].
    std::vector<rt::ExecContext*> parents;
    auto run_region = [&](std::size_t r, const std::vector<std::size_t>& who, const Buffers& params,
                          const Buffers& outs) {
      if (!together) return regions_[r]->run_inline(*ctxs[who[0]], params[0], outs[0]);
      parents.clear();
      for (std::size_t j : who) parents.push_back(ctxs[j]);
      regions_[r]->run_inline_all(parents, params, outs);
    };
    std::vector<std::size_t> everyone(n);
    for (std::size_t j = 0; j < n; ++j) everyone[j] = j;
    if (op_ == Op::cond) {
      // The positions that take one branch run it together.
      const std::int64_t branches = std::int64_t(regions_.size());
      for (std::int64_t b = 0; b < branches; ++b) {
        std::vector<std::size_t> who;
        Buffers params, outs;
        for (std::size_t j = 0; j < n; ++j) {
          if (std::clamp<std::int64_t>(*static_cast<const std::int32_t*>(slot(j, reads_[0])), 0, branches - 1) != b)
            continue;
          who.push_back(j);
          params.emplace_back();
          for (size_t k = 1; k < reads_.size(); ++k) params.back().push_back(slot(j, reads_[k]));
          outs.emplace_back();
          for (int w : writes_) outs.back().push_back(slot(j, w));
        }
        if (!who.empty()) run_region(std::size_t(b), who, params, outs);
      }
      return;
    }
    // Carries: cur[j] starts as position j's results' buffers, holding the init.
    const size_t first_carry = carry_at();
    Buffers cur(n), next(n);
    std::vector<void*> temps;
    struct Free {
      std::vector<void*>& t;
      const std::vector<std::size_t>& bytes;
      std::size_t carries;
      ~Free() {
        for (size_t k = 0; k < t.size(); ++k) rt::device_free(t[k], std::max<std::size_t>(bytes[k % carries], 1));
      }
    } free_temps{temps, out_bytes_, std::max<std::size_t>(carries_, 1)};
    for (std::size_t j = 0; j < n; ++j) {
      for (size_t k = 0; k < carries_; ++k) {
        cur[j].push_back(slot(j, writes_[k]));
        if (out_bytes_[k] && cur[j][k] != slot(j, reads_[first_carry + k]))  // one block where a donated init took it
          std::memcpy(cur[j][k], slot(j, reads_[first_carry + k]), out_bytes_[k]);
        // A carry written over in place: cur and next stay one buffer (no temporary; freeing null is nothing).
        const bool own = std::find(in_place_.begin(), in_place_.end(), k) != in_place_.end();
        temps.push_back(own ? nullptr : rt::device_alloc(std::max<std::size_t>(out_bytes_[k], 1)));
        next[j].push_back(own ? cur[j][k] : temps.back());
      }
    }
    // The regions' buffers, per position taking part: reused from step to
    // step (their capacity kept: a step allocates nothing).
    Buffers params(n), outs(n);
    auto start = [&](std::size_t count) {
      params.resize(count);
      outs.resize(count);
      for (std::size_t k = 0; k < count; ++k) params[k].clear(), outs[k].clear();
    };
    if (op_ == Op::while_) {
      std::vector<std::size_t> active = everyone, going;
      std::vector<char> pred(n, 0);
      going.reserve(n);
      while (!active.empty()) {
        start(active.size());
        for (std::size_t k = 0; k < active.size(); ++k) {
          const std::size_t j = active[k];
          for (size_t c = 0; c < first_; ++c) params[k].push_back(slot(j, reads_[c]));
          params[k].insert(params[k].end(), cur[j].begin(), cur[j].end());
          outs[k].push_back(&pred[j]);
        }
        run_region(0, active, params, outs);
        going.clear();
        for (std::size_t j : active)
          if (pred[j]) going.push_back(j);
        if (going.empty()) break;
        start(going.size());
        for (std::size_t k = 0; k < going.size(); ++k) {
          const std::size_t j = going[k];
          for (size_t c = first_; c < first_ + consts_; ++c) params[k].push_back(slot(j, reads_[c]));
          params[k].insert(params[k].end(), cur[j].begin(), cur[j].end());
          outs[k] = next[j];
        }
        run_region(1, going, params, outs);
        for (std::size_t j : going) std::swap(cur[j], next[j]);
        std::swap(active, going);
      }
    } else {
      const size_t q = reads_.size() - consts_ - carries_, ny = writes_.size() - carries_;
      for (std::int64_t step = 0; step < length_; ++step) {
        const std::int64_t i = reverse_ ? length_ - 1 - step : step;
        start(n);
        for (std::size_t j = 0; j < n; ++j) {
          for (size_t k = 0; k < consts_; ++k) params[j].push_back(slot(j, reads_[k]));
          params[j].insert(params[j].end(), cur[j].begin(), cur[j].end());
          for (size_t k = 0; k < q; ++k) {
            const size_t x = consts_ + carries_ + k;
            const std::size_t sb = length_ ? in_bytes_[x] / std::size_t(length_) : 0;
            params[j].push_back(static_cast<char*>(slot(j, reads_[x])) + std::size_t(i) * sb);
          }
          outs[j].insert(outs[j].end(), next[j].begin(), next[j].end());
          for (size_t k = 0; k < ny; ++k) {
            const std::size_t sb = out_bytes_[carries_ + k] / std::size_t(length_);
            outs[j].push_back(static_cast<char*>(slot(j, writes_[carries_ + k])) + std::size_t(i) * sb);
          }
        }
        run_region(0, everyone, params, outs);
        for (std::size_t j = 0; j < n; ++j) std::swap(cur[j], next[j]);
      }
    }
    for (std::size_t j = 0; j < n; ++j)
      for (size_t k = 0; k < carries_; ++k)
        if (cur[j][k] != slot(j, writes_[k]) && out_bytes_[k]) std::memcpy(slot(j, writes_[k]), cur[j][k], out_bytes_[k]);
  }

  Op op_;
  std::vector<int> reads_, writes_;
  std::vector<std::shared_ptr<rt::Executable>> regions_;
  std::string text_;
  std::vector<std::size_t> in_bytes_, out_bytes_;
  std::vector<std::size_t> in_place_;  // carries whose body writes over their buffer
  std::size_t first_ = 0, consts_ = 0, carries_ = 0;
  std::int64_t length_ = 0;
  bool reverse_ = false;
  bool run_all_ = true;
};

// Whether a loop step's expression is little work an element: at most
// kStreamOps cheap operations (a rounding to a 16- or 8-bit float counts
// two more), none costlier. Only such kernels write their results with
// non-temporal stores: on the Zen 5 host they took 2*x+1 over 8192^2
// floats from 7.9 to 7.1 ms, but made every transcendental slower (log 10
// -> 13 ms, exp 9.5 -> 13), as if the stores no longer overlapped the
// arithmetic.
bool memory_bound(const Step& step) {
  constexpr int kStreamOps = 6;
  std::unordered_set<const Node*> leaves, seen;
  for (auto& r : step.reads) leaves.insert(r.get());
  std::vector<const Node*> stack{step.node.get()};
  int ops = 0;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (leaves.count(n) || !seen.insert(n).second) continue;
    switch (op_cost(n->op)) {
      case OpCost::Free: break;
      case OpCost::Cheap: ++ops; break;
      default: return false;
    }
    if (!n->aval.tuple && is_narrow_float(n->dtype()) && n->op != Op::parameter && n->op != Op::constant) ops += 2;
    if (ops > kStreamOps) return false;
    for (auto& x : n->in) stack.push_back(x.get());
  }
  return true;
}

// A fusion plan's steps, one line each: kind, the value made, what it reads.
std::string steps_text(const std::vector<Step>& steps) {
  static const char* const kinds[] = {"loop", "reduce", "dot", "collective", "constant", "axis-index", "library",
                                      "control", "update"};
  const auto numbers = [&] {
    std::unordered_map<const Node*, int> n;
    for (auto& s : steps) n.emplace(s.node.get(), int(n.size()));
    return n;
  }();
  auto name = [&](const NodeRef& x) {
    auto it = numbers.find(x.get());
    if (it == numbers.end()) return std::string(op_name(x->op));
    std::string s = std::to_string(it->second);
    return s.insert(0, 1, 's');
  };
  std::ostringstream os;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    os << 's' << k << " = " << kinds[int(s.kind)] << ' ' << op_name(s.node->op) << ' ' << s.node->aval.str() << " reads(";
    for (std::size_t r = 0; r < s.reads.size(); ++r) os << (r ? ", " : "") << name(s.reads[r]);
    os << ")\n";
  }
  return os.str();
}

// CompiledProgram::in_place: output k may share parameter p's block where
// its slot is returned once and Executable::write_over_safe(p, slot) holds:
// the thunk that first writes it reads p last and may write over it (an
// update of p), and no thunk after it nor a collective reads p.
std::vector<int> in_place_outputs(const rt::Executable& e) {
  std::vector<int> in_place(e.output_slots.size(), -1);
  for (std::size_t k = 0; k < e.output_slots.size(); ++k) {
    const int so = e.output_slots[k];
    if (std::count(e.output_slots.begin(), e.output_slots.end(), so) != 1) continue;
    for (std::size_t p = 0; p < e.param_slots.size() && in_place[k] < 0; ++p)
      if (e.write_over_safe(int(p), so)) in_place[k] = int(p);
  }
  return in_place;
}

}  // namespace

CompiledProgram compile(const Graph& program, const CompileOptions& options) {
  auto report = [&](const char* pass, const Graph* graph, auto&& text) {
    if (options.on_pass) options.on_pass(pass, graph, text());
  };
  // A program of complex values becomes one of packed pairs of reals, whose
  // ops no longer meet their shape rules (an fft of f32[..., 2]): its graphs
  // are reported as text, not verified.
  // Reductions, dots and library calls on narrow floats run in float32
  // (codegen/narrow_ops.hpp).
  const bool narrow = has_narrow_compute(program);
  const Graph widened_program = narrow ? widen_narrow_compute(program) : Graph{};
  if (narrow) report("widen-narrow-floats", nullptr, [&] { return to_text(widened_program); });
  const Graph& source = narrow ? widened_program : program;
  const bool complex = has_complex(source);
  const Graph expanded = complex ? expand_complex(source) : Graph{};
  if (complex) report("expand-complex", nullptr, [&] { return to_text(expanded); });
  const Graph g = fold_transposes_into_dots(complex ? expanded : source);
  report("fold-transposes", complex || narrow ? nullptr : &g,
         [&] { return complex || narrow ? to_text(g) : std::string(); });
  FusionPlan plan = plan_fusion(g);
  report("plan-fusion", nullptr, [&] { return steps_text(plan.steps); });
  schedule_for_memory(plan.steps, g.outputs);
  report("schedule-for-memory", nullptr, [&] { return steps_text(plan.steps); });
  sink_collectives(plan.steps);
  report("sink-collectives", nullptr, [&] { return steps_text(plan.steps); });
  // The regions' compiles report nothing: their graphs are the program's.
  CompileOptions region_options = options;
  region_options.on_pass = nullptr;
  region_options.region = true;
  auto exe = std::make_shared<rt::Executable>();
  std::unordered_map<const Node*, int> slot;
  // A tuple-valued op's results (control flow, lu, qr, ...): a slot per
  // element, which its get_tuple_elements share.
  std::map<std::pair<const Node*, std::int64_t>, int> element_slot;
  auto element = [&](const Node* c, std::int64_t k) {
    auto it = element_slot.find({c, k});
    if (it != element_slot.end()) return it->second;
    const Aval& a = c->aval.elements.at(size_t(k));
    int s = int(exe->slots.size());
    exe->slots.push_back({std::size_t(numel(a.shape)) * dtype_size(a.dtype), false});
    element_slot[{c, k}] = s;
    return s;
  };
  // The values each slot holds over the program: one, or several where a
  // step writes over its operand or a reshape reads its operand's bytes.
  std::unordered_map<int, std::vector<const Node*>> holders;
  auto hold = [&](const NodeRef& n, int s) {
    slot[n.get()] = s;
    holders[s].push_back(n.get());
  };
  auto slot_of = [&](const NodeRef& n) {
    auto it = slot.find(n.get());
    if (it != slot.end()) return it->second;
    int s;
    if (n->op == Op::get_tuple_element && n->in[0]->aval.tuple)
      s = element(n->in[0].get(), n->attr<attr::TupleIndex>().index);
    else {
      s = int(exe->slots.size());
      exe->slots.push_back({std::size_t(numel(n->shape())) * dtype_size(n->dtype()), false});
    }
    hold(n, s);
    return s;
  };
  // The slots a step writes.
  auto writes_of = [&](const Step& step) {
    std::vector<int> w;
    if (!step.node->aval.tuple) return std::vector<int>{slot_of(step.node)};
    for (size_t k = 0; k < step.node->aval.elements.size(); ++k) w.push_back(element(step.node.get(), std::int64_t(k)));
    return w;
  };
  for (auto& p : g.params) exe->param_slots.push_back(slot_of(p));
  // An update takes its operand's slot where the operand is a temporary it
  // reads last, and so does a loop kernel reading one aligned: the step
  // writes over it in place. At the top level the result must be a
  // temporary too: a lockstep launch may let positions share one block of a
  // temporary, or of a result (another position's output viewing it), and
  // gives a position that writes over a shared temporary a copy of its own
  // first (runtime/executable.cpp), which an output's view cannot take.
  std::unordered_map<const Node*, std::size_t> last_read;
  for (std::size_t t = 0; t < plan.steps.size(); ++t)
    for (auto& r : plan.steps[t].reads) last_read[r.get()] = t;
  std::unordered_set<const Node*> returned;
  for (auto& o : g.outputs) returned.insert(o.get());
  std::ostringstream text;
  std::size_t code_bytes = 0;
  for (std::size_t at = 0; at < plan.steps.size(); ++at) {
    auto& step = plan.steps[at];
    int over_temporary = -1;  // the read a loop kernel writes over
    // The reads a loop kernel takes at the index it writes (codegen/emit.cpp).
    const std::vector<bool> aligned = step.kind == StepKind::Loop ? aligned_reads(step) : std::vector<bool>{};
    // A row-major reshape of a value in memory is its bytes as they lie
    // (XLA's bitcast): it takes the value's slot and runs nothing. Not where
    // a parameter's block or another result would be returned as well.
    bool bitcast = false;
    if (step.kind == StepKind::Loop && step.node->op == Op::reshape && !slot.count(step.node.get()) &&
        step.reads.size() == 1 && step.reads[0] == step.node->in[0]) {
      const int s = slot_of(step.node->in[0]);
      bitcast = true;
      // Returned at the top level: only a slot no step wrote over (a
      // lockstep launch may give a position writing over a shared block a
      // copy of its own, which an output's buffer cannot take).
      if (returned.count(step.node.get()))
        for (const Node* h : holders[s])
          bitcast = bitcast && h->op != Op::parameter && !returned.count(h) &&
                    (options.region || h == step.node->in[0].get());
      if (bitcast) hold(step.node, s);
    }
    if ((options.region || !returned.count(step.node.get())) && !step.node->aval.tuple && !slot.count(step.node.get())) {
      // Dead after this step: no value its slot holds is a parameter, a
      // tuple's element or returned, or read later, and the step reads the
      // slot only there.
      auto dead_temporary = [&](const NodeRef& x) {
        if (!slot.count(x.get()) || last_read.at(x.get()) != at) return false;
        // The step reads the slot once: not also as another value it holds
        // (a bitcast of x among the step's other reads).
        const int sx = slot.at(x.get());
        if (std::count_if(step.reads.begin(), step.reads.end(),
                          [&](const NodeRef& r) { return slot.count(r.get()) && slot.at(r.get()) == sx; }) != 1)
          return false;
        for (const Node* h : holders[sx]) {
          if (h->op == Op::parameter || h->op == Op::get_tuple_element || returned.count(h)) return false;
          if (auto r = last_read.find(h); r != last_read.end() && r->second > at) return false;
        }
        return true;
      };
      // An update of a box or a scatter writes over its operand in place
      // (not where it also reads the operand as its indices or updates:
      // dead_temporary counts the step's reads of the slot).
      const bool updates_operand = step.kind == StepKind::Update || step.node->op == Op::scatter;
      if (updates_operand && dead_temporary(step.node->in[0])) {
        hold(step.node, slot.at(step.node->in[0].get()));
      } else if (step.kind == StepKind::Loop && numel(step.node->shape()) > 0) {
        for (std::size_t r = 0; r < aligned.size() && over_temporary < 0; ++r)
          if (aligned[r] && dead_temporary(step.reads[r])) {
            hold(step.node, slot.at(step.reads[r].get()));
            over_temporary = int(r);
          }
      }
    }
    std::vector<int> writes = writes_of(step);
    const int out = writes[0];
    int scratch = -1;
    std::vector<int> reads;
    for (auto& r : step.reads) reads.push_back(slot_of(r));
    std::unique_ptr<rt::Thunk> thunk;
    // An empty result needs no work (and no kernel: its loops would divide
    // by zero sizes). Every device holds the same shapes, so collectives
    // skipped here are skipped on every device.
    if (bitcast) {
      // Nothing to run, allocate or read: its readers read the slot.
      exe->alloc_before.push_back({});
      exe->reads.push_back({});
      exe->free_after.push_back({});
      exe->thunks.push_back(std::make_unique<EmptyThunk>("bitcast " + step.node->aval.str() + " of " +
                                                         step.node->in[0]->aval.str()));
      continue;
    }
    if (step.kind == StepKind::Control) {
      std::vector<std::shared_ptr<rt::Executable>> regions;
      std::vector<std::vector<int>> in_place;
      std::ostringstream os;
      os << op_name(step.node->op) << ' ' << step.node->aval.str() << " {";
      for (auto& r : step.node->regions()) {
        CompiledProgram sub = compile(*r, region_options);
        code_bytes += sub.code_bytes;
        exe->uses_collectives = exe->uses_collectives || sub.executable->uses_collectives;
        regions.push_back(sub.executable);
        in_place.push_back(sub.in_place);
        std::string body = sub.thunks_text;
        std::string indented;
        for (size_t p = 0; p < body.size(); ++p) {
          indented += body[p];
          if (body[p] == '\n' && p + 1 < body.size()) indented += "  ";
        }
        os << "\n  " << r->name << ":\n  " << indented;
      }
      os << "  }";
      thunk = std::make_unique<ControlThunk>(*step.node, reads, writes, std::move(regions), in_place, os.str());
    } else if (!step.node->aval.tuple && numel(step.node->shape()) == 0)
      thunk = std::make_unique<EmptyThunk>("empty " + step.node->aval.str() + " root=" + op_name(step.node->op));
    else switch (step.kind) {
      case StepKind::Loop:
      case StepKind::Reduce: {
        // A result too large for the caches (the local devices' together),
        // not written over an operand, whose rows keep vector stores
        // line-aligned, bypasses the caches where the kernel is little work
        // an element (memory_bound).
        const std::size_t esize = dtype_size(step.node->dtype());
        const Shape& shape = step.node->shape();
        const bool stream = step.kind == StepKind::Loop && over_temporary < 0 && !shape.empty() &&
                            numel(shape) * esize * std::max(1, options.local_devices) >= rt::kStreamBytes &&
                            shape.back() * esize % kStreamAlign == 0 && memory_bound(step);
        Kernel k = compile_kernel(step, over_temporary, stream);
        code_bytes += k.code->code_bytes;
        std::vector<int> bufs{out};
        bufs.insert(bufs.end(), reads.begin(), reads.end());
        std::ostringstream os;
        os << (step.kind == StepKind::Loop ? "fusion " : "reduction ") << step.node->aval.str() << " root="
           << op_name(step.node->op) << " reads=" << reads.size() << " items=" << k.items;
        if (over_temporary >= 0) os << " over read " << over_temporary;
        if (stream) os << " streamed";
        // Reads a parameter may share the output's block with: a donated
        // argument, or a region's carry its loop keeps in one buffer.
        std::vector<bool> writable;
        if (step.kind == StepKind::Loop && over_temporary < 0) {
          writable = aligned;
          bool any = false;
          for (std::size_t r = 0; r < writable.size(); ++r) {
            writable[r] = writable[r] && step.reads[r]->op == Op::parameter;
            any = any || writable[r];
          }
          if (!any) writable.clear();
        }
        thunk = std::make_unique<KernelThunk>(std::move(k), std::move(bufs), os.str(),
                                              writable.empty() && !stream ? Step{} : step, std::move(writable), stream);
        break;
      }
      case StepKind::Dot:
        thunk = make_dot_thunk(*step.node, reads[0], reads[1], out, options.threads_per_device);
        break;
      case StepKind::Collective:
        thunk = std::make_unique<CollectiveThunk>(*step.node, reads[0], out);
        exe->uses_collectives = true;
        break;
      case StepKind::Constant: thunk = std::make_unique<ConstantThunk>(step.node->attr<attr::Constant>().value, out); break;
      case StepKind::Library:
        if (std::size_t ws = library_workspace(*step.node)) {
          // A workspace slot, live for this step only (memory_analysis counts it).
          scratch = int(exe->slots.size());
          exe->slots.push_back({ws, false});
          writes.push_back(scratch);
        }
        if (collective_axes(*step.node).mesh) exe->uses_collectives = true;  // a routine that meets its peers
        thunk = library_thunk(*step.node, reads, writes);
        break;
      case StepKind::Control: break;  // above
      case StepKind::Update: thunk = make_update_thunk(*step.node, reads, out); break;
      case StepKind::Transpose: thunk = make_transpose_thunk(*step.node, reads[0], out); break;
      case StepKind::AxisIndex:
        thunk = std::make_unique<AxisIndexThunk>(step.node->attr<attr::AxisIndex>().mesh,
                                                 step.node->attr<attr::AxisIndex>().axes, out);
        break;
    }
    exe->alloc_before.push_back(writes);
    exe->reads.push_back(reads);
    exe->free_after.push_back({});
    if (scratch >= 0) exe->free_after.back().push_back(scratch);
    exe->thunks.push_back(std::move(thunk));
  }
  for (auto& o : g.outputs) exe->output_slots.push_back(slot_of(o));
  // Temporaries die after their last reader.
  std::vector<bool> keep(exe->slots.size(), false);
  for (int s : exe->param_slots) keep[s] = true;
  for (int s : exe->output_slots) keep[s] = true;
  std::vector<int> last(exe->slots.size(), -1);
  for (size_t t = 0; t < plan.steps.size(); ++t) {
    for (auto& r : plan.steps[t].reads) last[slot.at(r.get())] = int(t);
    for (int own : writes_of(plan.steps[t]))
      if (last[own] < int(t)) last[own] = int(t);
  }
  for (size_t s = 0; s < last.size(); ++s)
    if (!keep[s] && last[s] >= 0) exe->free_after[last[s]].push_back(int(s));
  for (auto& t : exe->thunks) text << "  " << t->describe() << '\n';
  std::vector<int> in_place = in_place_outputs(*exe);
  // The first compile creates the JIT's statics; exit() must let running
  // launches finish before destroying them: one handler, registered after
  // them (the JIT itself is never destroyed, later compiles add no statics).
  static std::once_flag exit_sync;
  std::call_once(exit_sync, [] { rt::Runtime::synchronize_at_exit(); });
  return {exe, text.str(), code_bytes, std::move(in_place)};
}

}  // namespace tessel::codegen
