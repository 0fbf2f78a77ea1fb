#include "codegen/compile.hpp"
#include "codegen/complex.hpp"
#include "codegen/library.hpp"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "codegen/dot.hpp"
#include "codegen/schedule.hpp"
#include "codegen/emit.hpp"
#include "codegen/fold.hpp"
#include "codegen/fusion.hpp"
#include "codegen/transpose_folding.hpp"
#include "runtime/collectives.hpp"
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

 private:
  std::string text_;
};

class KernelThunk final : public rt::Thunk {
 public:
  KernelThunk(Kernel k, std::vector<int> slots, std::string text)
      : k_(std::move(k)), slots_(std::move(slots)), text_(std::move(text)) {}
  void run(rt::ExecContext& ctx) const override {
    std::vector<void*> bufs(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) bufs[i] = ctx.slots[slots_[i]];
    // Chunks of at least ~32K elements of work each.
    const std::int64_t grain = std::max<std::int64_t>(1, 32768 / std::max<std::int64_t>(1, k_.work_per_item));
    auto chunk = [&](std::int64_t b, std::int64_t e) { k_.fn(bufs.data(), b, e); };
    if (ctx.machine_wide) rt::parallel_for_machine(0, k_.items, grain, chunk);
    else rt::parallel_for(0, k_.items, grain, chunk);
  }
  std::string describe() const override { return text_; }
  bool pure() const override { return true; }
  // A large loop nest takes every core when no other device has work (a
  // program on one device uses the whole host, as JAX's CPU devices do).
  rt::ComputeSlot::Width width() const override {
    return k_.items * k_.work_per_item >= kMachineWork ? rt::ComputeSlot::Width::machine_if_idle
                                                       : rt::ComputeSlot::Width::device;
  }

 private:
  // Elements of work (~1 ms on one core) below which a turn on every core costs more than it saves.
  static constexpr std::int64_t kMachineWork = std::int64_t(1) << 20;
  Kernel k_;
  std::vector<int> slots_;
  std::string text_;
};

class ConstantThunk final : public rt::Thunk {
 public:
  ConstantThunk(LiteralRef lit, int slot) : lit_(std::move(lit)), slot_(slot) {}
  void run(rt::ExecContext& ctx) const override {
    if (!lit_->bytes.empty()) std::memcpy(ctx.slots[slot_], lit_->bytes.data(), lit_->bytes.size());
  }
  std::string describe() const override { return "constant " + aval_str(lit_->dtype, lit_->shape); }
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

// dst[0, count) = the reduction over peers of peer[offset, offset + count).
void reduce_peers(DType t, Op op, char* dst, const std::vector<const void*>& peers, std::int64_t offset,
                  std::int64_t count) {
  const std::size_t es = dtype_size(t);
  std::vector<const void*> rest;
  for (std::size_t p = 1; p < peers.size(); ++p) rest.push_back(static_cast<const char*>(peers[p]) + offset * es);
  fold_tiles(t, op, dst, static_cast<const char*>(peers[0]) + offset * es, rest, count);
}

// A lockstep run_all whose results over all members pass this many bytes
// runs its items on every core.
constexpr std::size_t kParallelAllBytes = std::size_t(1) << 20;
// Collectives that write one operand's data into several results (all-gather;
// an all-reduce's folded part) copy it this many bytes at a time: a piece
// is read from memory once and from the cache for its other copies.
constexpr std::size_t kPieceBytes = std::size_t(32) << 10;

// Every collective reads peers' buffers in place (shared memory): publish,
// read, release.
class CollectiveThunk final : public rt::Thunk {
 public:
  CollectiveThunk(const Node& n, int in, int out) : op_(n.op), in_(in), out_(out), p_(n.attrs) {
    in_shape_ = n.in[0]->shape();
    out_shape_ = n.shape();
    dtype_ = n.dtype();
    const CollectiveAxes ca = collective_axes(n);
    if (op_family(op_) != OpFamily::Collective || !ca.mesh)
      throw InternalError(std::string(op_name(op_)) + " is not a collective");
    if (ca.axes) groups_ = collective_groups(**ca.mesh, *ca.axes);  // collective_permute: pairs, not groups
    const std::size_t members = ca.axes ? groups_.size() * groups_.front().size()
                                        : std::size_t(p_.as<attr::CollectivePermute>().mesh->size());
    const std::size_t result_bytes = std::size_t(numel(out_shape_)) * dtype_size(dtype_);
    stream_ = result_bytes * members >= rt::kStreamBytes;
    stream_shared_ = result_bytes * (ca.axes ? groups_.size() : members) >= rt::kStreamBytes;
    std::ostringstream os;
    os << op_name(op_) << ' ' << n.in[0]->aval.str() << " -> " << n.aval.str();
    text_ = os.str();
  }

  bool waits_on_peers() const override { return true; }

  void run(rt::ExecContext& ctx) const override {
    const std::size_t es = dtype_size(dtype_);
    const void* mine = ctx.slots[in_];
    char* out = static_cast<char*>(ctx.slots[out_]);
    if (op_ == Op::collective_permute) {
      const std::vector<std::int64_t> all = all_positions();
      auto peers = ctx.comm->exchange(ctx.position, all, mine, std::size_t(numel(in_shape_)) * es);
      {
        rt::ComputeSlot slot;
        permute(ctx.position, peers, out);
      }
      ctx.comm->release(ctx.position, all);
      return;
    }
    const std::vector<std::int64_t>* group = nullptr;
    std::size_t rank = 0;
    for (auto& g : groups_)
      for (std::size_t k = 0; k < g.size(); ++k)
        if (g[k] == ctx.position) group = &g, rank = k;
    TESSEL_CHECK_INTERNAL(group, "position ", ctx.position, " is in no group");
    if (op_ == Op::all_reduce) {
      // The communicator's own algorithm (shared memory in one process, a
      // chain between processes), with this dtype's fold.
      ctx.comm->all_reduce(ctx.position, *group, mine, out, numel(in_shape_), es, fold());
      return;
    }
    if (op_ == Op::all_gather && ctx.comm->shares_memory(*group)) {
      gather_one_pass(ctx, *group, rank, mine, out);
      return;
    }
    auto peers = ctx.comm->exchange(ctx.position, *group, mine, std::size_t(numel(in_shape_)) * es);
    {
      // The copies and sums hold a compute slot (runtime/device.hpp); the
      // waits for peers do not.
      rt::ComputeSlot slot;
      member(rank, peers, out);
    }
    ctx.comm->release(ctx.position, *group);
  }

  // Every member's operand is computed (a launch run in lockstep): each
  // member's result straight from the others' operands, as items that each
  // write their own part of the results (one per member of every group):
  // side by side on the machine's cores when the results are large.
  //
  // An all-reduce's or all-gather's result is the same on every member of
  // its group: where the run lets positions share blocks (SharedSlots: a
  // lockstep run inside one process), it is written once, into the group's
  // first member's result, and the others' results are that block. (8 x
  // 16 MiB psums wrote 128 MiB of identical results; an all-gather of
  // 64 MiB over 8 devices 4 GiB.)
  void run_all(const std::vector<rt::ExecContext*>& ctxs) const override {
    if (ctxs.front()->comm) return run_all_spanning(ctxs);
    rt::SharedSlots* const shared = shares_results() ? ctxs.front()->shared : nullptr;
    if (shared)
      for (const auto& g : groups_) shared->own(*ctxs[std::size_t(g[0])], out_);
    const std::size_t members = op_ == Op::collective_permute ? ctxs.size() : groups_.size() * groups_.front().size();
    auto items = [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t k = lo; k < hi; ++k) run_item(ctxs, std::size_t(k), shared != nullptr);
    };
    if (std::size_t(numel(out_shape_)) * dtype_size(dtype_) * members >= kParallelAllBytes) {
      rt::ComputeSlot slot(rt::ComputeSlot::Width::machine);
      rt::parallel_for_machine(0, std::int64_t(members), 1, items);
    } else {
      rt::ComputeSlot slot;
      items(0, std::int64_t(members));
    }
    if (shared)
      for (const auto& g : groups_)
        for (std::size_t m = 1; m < g.size(); ++m) shared->share(*ctxs[std::size_t(g[m])], *ctxs[std::size_t(g[0])], out_);
  }
  bool can_run_all() const override { return true; }
  bool shares_results() const override { return op_ == Op::all_reduce || op_ == Op::all_gather; }

  // A lockstep run of this process's positions of a launch across processes
  // (ctxs: those positions, each with the launch's communicator): for each
  // group with members here, they meet the others at once
  // (Communicator::exchange_local: the remote members' operands staged here,
  // or all_reduce_local's chain), and each local member's result is made
  // from the group's operands as on its own thread.
  void run_all_spanning(const std::vector<rt::ExecContext*>& ctxs) const {
    rt::Communicator& comm = *ctxs.front()->comm;
    std::map<std::int64_t, rt::ExecContext*> here;  // by position
    for (auto* c : ctxs) here[c->position] = c;
    const std::size_t es = dtype_size(dtype_);
    const auto groups = op_ == Op::collective_permute ? std::vector<std::vector<std::int64_t>>{all_positions()} : groups_;
    for (const auto& g : groups) {
      std::vector<int> positions;
      std::vector<const void*> mine;
      std::vector<void*> outs;
      for (std::int64_t p : g)
        if (auto it = here.find(p); it != here.end()) {
          positions.push_back(int(p));
          mine.push_back(it->second->slots[in_]);
          outs.push_back(it->second->slots[out_]);
        }
      if (positions.empty()) continue;
      if (op_ == Op::all_reduce) {
        comm.all_reduce_local(g, positions, mine, outs, numel(in_shape_), es, fold());
        continue;
      }
      auto peers = comm.exchange_local(g, positions, mine, std::size_t(numel(in_shape_)) * es);
      {
        rt::ComputeSlot slot;
        for (std::size_t k = 0; k < positions.size(); ++k) {
          char* out = static_cast<char*>(outs[k]);
          if (op_ == Op::collective_permute) permute(positions[k], peers, out);
          else member(std::size_t(std::find(g.begin(), g.end(), positions[k]) - g.begin()), peers, out);
        }
      }
      comm.release_local(g, positions);
    }
  }

  std::string describe() const override { return text_; }
  const char* category() const override { return "collective"; }
  // The bytes each device contributes and receives.
  std::string trace_args() const override {
    const std::size_t es = dtype_size(dtype_);
    return "\"bytes_in\": " + std::to_string(std::size_t(numel(in_shape_)) * es) +
           ", \"bytes_out\": " + std::to_string(std::size_t(numel(out_shape_)) * es) + ", \"group_size\": " +
           std::to_string(groups_.empty() ? 0 : groups_.front().size());
  }

 private:
  // run_all's item k: for a permute, position k's result; else member
  // k % size of group k / size: its result (reduce-scatter, all-to-all), its
  // operand copied into every member's result (all-gather), or its 1/size of
  // the elements folded and copied into every member's result (all-reduce:
  // the left fold in group order, as Communicator::all_reduce: the same bits).
  // `shared`: the all-reduce or all-gather writes the group's first
  // member's result only (run_all shares it).
  void run_item(const std::vector<rt::ExecContext*>& ctxs, std::size_t k, bool shared) const {
    auto operand = [&](std::int64_t position) -> const void* { return ctxs[std::size_t(position)]->slots[in_]; };
    auto result = [&](std::int64_t position) { return static_cast<char*>(ctxs[std::size_t(position)]->slots[out_]); };
    const std::size_t es = dtype_size(dtype_);
    if (op_ == Op::collective_permute) {
      std::vector<const void*> peers;
      for (std::size_t i = 0; i < ctxs.size(); ++i) peers.push_back(operand(std::int64_t(i)));
      permute(int(k), peers, result(std::int64_t(k)));
      return;
    }
    const auto& g = groups_[k / groups_.front().size()];
    const std::size_t rank = k % g.size();
    const std::int64_t n = std::int64_t(g.size());
    if (op_ == Op::all_reduce) {
      const std::int64_t count = numel(in_shape_), lo = count * std::int64_t(rank) / n,
                         hi = count * std::int64_t(rank + 1) / n;
      // A piece at a time (as the communicator's): each piece is folded
      // into this member's result and copied from the cache into the others'.
      const rt::Fold f = fold();
      const std::int64_t piece = std::int64_t(kPieceBytes / es);
      std::vector<const void*> rest(g.size() - 1);
      for (std::int64_t a = lo; a < hi; a += piece) {
        const std::size_t at = std::size_t(a) * es, bytes = std::size_t(std::min(piece, hi - a)) * es;
        for (std::size_t m = 1; m < g.size(); ++m) rest[m - 1] = static_cast<const char*>(operand(g[m])) + at;
        char* mine = result(g[shared ? 0 : rank]) + at;
        f(mine, static_cast<const char*>(operand(g[0])) + at, rest, std::min(piece, hi - a));
        if (!shared)
          for (std::size_t m = 0; m < g.size(); ++m)
            if (m != rank) copy_out(result(g[m]) + at, mine, bytes);
      }
      return;
    }
    if (op_ == Op::all_gather) {
      // A piece of the operand at a time into every member's result: the
      // operand is read from memory once (row by row it was read once per
      // member: 8 x 64 MiB over 8 devices, beyond the L3).
      auto [outer, len] = blocks(in_shape_, p_.as<attr::AllGather>().dimension);
      const std::size_t row = std::size_t(len) * es;
      const char* in = static_cast<const char*>(operand(g[rank]));
      const std::size_t copies = shared ? 1 : g.size();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::size_t at = 0; at < row; at += kPieceBytes)
          for (std::size_t m = 0; m < copies; ++m)
            copy_out(result(g[m]) + std::size_t(o * n + std::int64_t(rank)) * row + at, in + std::size_t(o) * row + at,
                     std::min(kPieceBytes, row - at), shared);
      return;
    }
    std::vector<const void*> peers;
    for (std::int64_t p : g) peers.push_back(operand(p));
    member(rank, peers, result(g[rank]));
  }

  // This dtype's reduction as the communicator's fold.
  rt::Fold fold() const {
    const Op reduce = p_.as<attr::AllReduce>().reduce_op;
    const DType t = dtype_;
    return [t, reduce](void* dst, const void* first, const std::vector<const void*>& rest, std::int64_t n) {
      fold_tiles(t, reduce, static_cast<char*>(dst), static_cast<const char*>(first), rest, n);
    };
  }
  // An all-gather in one pass over the memory (the group in this process):
  // the members publish their results too, and each member copies its own
  // operand into every member's result, a piece at a time, so each piece is
  // read from memory once and from the cache for its other copies. Every
  // operand byte is read once and every result byte written once (each
  // member copying every peer's operand into its own result reads every
  // operand n times: 1.4x the time at 64 MiB over 8 devices here). The
  // release waits until every result is whole.
  void gather_one_pass(rt::ExecContext& ctx, const std::vector<std::int64_t>& group, std::size_t rank,
                       const void* mine, char* out) const {
    struct Ends {
      const void* in;
      char* out;
    } ends{mine, out};
    auto published = ctx.comm->exchange(ctx.position, group, &ends, sizeof ends);
    {
      rt::ComputeSlot slot;
      const std::size_t es = dtype_size(dtype_);
      const std::int64_t n = std::int64_t(group.size());
      auto [outer, len] = blocks(in_shape_, p_.as<attr::AllGather>().dimension);  // len: elements of one block
      const std::size_t row = std::size_t(len) * es, piece = kPieceBytes;
      const char* in = static_cast<const char*>(mine);
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::size_t at = 0; at < row; at += piece) {
          const std::size_t m = std::min(piece, row - at);
          for (std::int64_t k = 0; k < n; ++k)
            copy_out(static_cast<const Ends*>(published[std::size_t(k)])->out +
                            std::size_t(o * n + std::int64_t(rank)) * row + at,
                        in + std::size_t(o) * row + at, m);
        }
    }
    ctx.comm->release(ctx.position, group);
  }

  // A collective permute meets as one group: every position of its mesh.
  std::vector<std::int64_t> all_positions() const {
    std::vector<std::int64_t> all;
    for (std::int64_t i = 0; i < p_.as<attr::CollectivePermute>().mesh->size(); ++i) all.push_back(i);
    return all;
  }
  // A collective permute's result at `position`: its source's operand, or zeros.
  void permute(int position, const std::vector<const void*>& peers, char* out) const {
    std::int64_t source = -1;
    for (auto [s, t] : p_.as<attr::CollectivePermute>().pairs)
      if (t == position) source = s;
    const std::size_t bytes = std::size_t(numel(in_shape_)) * dtype_size(dtype_);
    if (source >= 0) copy_out(out, peers[std::size_t(source)], bytes);
    else std::memset(out, 0, bytes);
  }
  // The result of the group member at `rank` (all_gather, reduce_scatter,
  // all_to_all) from the group's operands.
  void member(std::size_t rank, const std::vector<const void*>& peers, char* out) const {
    const std::size_t es = dtype_size(dtype_);
    const std::int64_t n = std::int64_t(peers.size());
    switch (op_) {
      case Op::all_gather: {
        auto [outer, len] = blocks(in_shape_, p_.as<attr::AllGather>().dimension);  // len: elements of one block
        for (std::int64_t o = 0; o < outer; ++o)
          for (std::int64_t k = 0; k < n; ++k)
            std::memcpy(out + ((o * n + k) * len) * es, static_cast<const char*>(peers[k]) + o * len * es, len * es);
        break;
      }
      case Op::reduce_scatter: {
        const auto& a = p_.as<attr::ReduceScatter>();
        auto [outer, len] = blocks(out_shape_, a.dimension);  // my block of each outer row
        for (std::int64_t o = 0; o < outer; ++o) {
          reduce_peers(dtype_, a.reduce_op, out + o * len * es, peers, (o * n + std::int64_t(rank)) * len, len);
        }
        break;
      }
      case Op::all_to_all: {
        // Output chunk k along the concat dim = member k's chunk `rank` along the split dim.
        const std::int64_t split = p_.as<attr::AllToAll>().split_dimension, concat = p_.as<attr::AllToAll>().concat_dimension;
        Shape chunk = in_shape_;
        chunk[split] /= n;
        auto ist = row_major_strides(in_shape_), ost = row_major_strides(out_shape_);
        if (chunk.empty() || numel(chunk) == 0) break;
        // The chunk's trailing elements that are contiguous in both the
        // peer's input and this output are copied as one run: the minor dims
        // the chunk spans whole in both, and the dim that ends them. (Copying
        // only the last dim's rows made a run of 8 bytes of a packed complex
        // array's all-to-all over its last logical dim.)
        int inner = int(chunk.size()) - 1;
        std::int64_t run = chunk[size_t(inner)];
        while (inner > 0 && chunk[size_t(inner)] == in_shape_[size_t(inner)] && chunk[size_t(inner)] == out_shape_[size_t(inner)]) {
          --inner;
          run *= chunk[size_t(inner)];
        }
        // Each peer's chunk starts at `rank` along split in its input, and
        // lands at k along concat in this output.
        const std::size_t bytes = std::size_t(run) * es;
        const std::int64_t src0 = std::int64_t(rank) * chunk[size_t(split)] * ist[size_t(split)];
        const std::int64_t rows = numel(chunk) / run;
        std::vector<std::int64_t> idx(size_t(inner), 0);
        std::int64_t src = 0, dst = 0;  // the row's offset within a chunk, in the input's and the output's strides
        for (std::int64_t f = 0; f < rows; ++f) {
          for (std::int64_t k = 0; k < n; ++k)
            copy_out(out + (dst + k * chunk[size_t(concat)] * ost[size_t(concat)]) * es,
                        static_cast<const char*>(peers[k]) + (src0 + src) * es, bytes);
          for (int d = inner - 1; d >= 0; --d) {
            src += ist[size_t(d)];
            dst += ost[size_t(d)];
            if (++idx[size_t(d)] < chunk[size_t(d)]) break;
            src -= idx[size_t(d)] * ist[size_t(d)];
            dst -= idx[size_t(d)] * ost[size_t(d)];
            idx[size_t(d)] = 0;
          }
        }
        break;
      }
      default: throw InternalError("not a collective");
    }
  }

  // A copy into a result: with non-temporal stores (rt::stream_copy) when
  // the results of this collective over all its devices outgrow the caches.
  // `shared`: one result per group is written (run_all), not one per member.
  void copy_out(void* dst, const void* src, std::size_t bytes, bool shared = false) const {
    if (shared ? stream_shared_ : stream_) rt::stream_copy(dst, src, bytes);
    else std::memcpy(dst, src, bytes);
  }

  // (rows before dim d, elements from dim d on) of a shape.
  static std::pair<std::int64_t, std::int64_t> blocks(const Shape& s, std::int64_t d) {
    std::int64_t outer = 1, len = 1;
    for (std::int64_t i = 0; i < std::int64_t(s.size()); ++i) (i < d ? outer : len) *= s[i];
    return {outer, len};
  }
  Op op_;
  int in_, out_;
  Attrs p_;
  Shape in_shape_, out_shape_;
  DType dtype_;
  std::vector<std::vector<std::int64_t>> groups_;
  bool stream_ = false;         // copy_out streams
  bool stream_shared_ = false;  // copy_out streams the one result of each group
  std::string text_;
};

// ------------------------------------------------------------------ control flow

// cond, while and scan: each region is an executable of its own, run inline
// on this device's thread (runtime/executable.hpp, run_inline). Loops keep
// two sets of carry buffers, the results' own and temporaries, and swap
// them each step; a scan's steps read their x slices and write their y
// slices in place (the leading axis is the outermost).
class ControlThunk final : public rt::Thunk {
 public:
  ControlThunk(const Node& n, std::vector<int> reads, std::vector<int> writes,
               std::vector<std::shared_ptr<rt::Executable>> regions, std::string text)
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
  }
  // Its regions' thunks take compute slots (and meet peers) themselves.
  bool waits_on_peers() const override { return true; }
  std::string describe() const override { return text_; }
  const char* category() const override { return "control"; }

  void run(rt::ExecContext& ctx) const override {
    auto slot = [&](int s) { return ctx.slots[size_t(s)]; };
    if (op_ == Op::cond) {
      const std::int64_t n = std::int64_t(regions_.size());
      const std::int64_t b = std::clamp<std::int64_t>(*static_cast<const std::int32_t*>(slot(reads_[0])), 0, n - 1);
      std::vector<void*> params, outs;
      for (size_t k = 1; k < reads_.size(); ++k) params.push_back(slot(reads_[k]));
      for (int w : writes_) outs.push_back(slot(w));
      regions_[size_t(b)]->run_inline(ctx, params, outs);
      return;
    }
    // Carries: `cur` starts as the results' buffers, holding the init.
    const size_t carry_at = op_ == Op::while_ ? first_ + consts_ : consts_;
    std::vector<void*> cur, next;
    std::vector<void*> temps;
    struct Free {
      std::vector<void*>& t;
      const std::vector<std::size_t>& bytes;
      ~Free() {
        for (size_t k = 0; k < t.size(); ++k) rt::device_free(t[k], std::max<std::size_t>(bytes[k], 1));
      }
    } free_temps{temps, out_bytes_};
    for (size_t k = 0; k < carries_; ++k) {
      cur.push_back(slot(writes_[k]));
      if (out_bytes_[k]) std::memcpy(cur[k], slot(reads_[carry_at + k]), out_bytes_[k]);
      temps.push_back(rt::device_alloc(std::max<std::size_t>(out_bytes_[k], 1)));
      next.push_back(temps.back());
    }
    if (op_ == Op::while_) {
      bool pred = false;
      std::vector<void*> cparams, bparams;
      for (size_t k = 0; k < first_; ++k) cparams.push_back(slot(reads_[k]));
      for (size_t k = first_; k < first_ + consts_; ++k) bparams.push_back(slot(reads_[k]));
      const size_t cfixed = cparams.size(), bfixed = bparams.size();
      while (true) {
        cparams.resize(cfixed);
        cparams.insert(cparams.end(), cur.begin(), cur.end());
        regions_[0]->run_inline(ctx, cparams, {&pred});
        if (!pred) break;
        bparams.resize(bfixed);
        bparams.insert(bparams.end(), cur.begin(), cur.end());
        regions_[1]->run_inline(ctx, bparams, next);
        std::swap(cur, next);
      }
    } else {
      const size_t q = reads_.size() - consts_ - carries_, ny = writes_.size() - carries_;
      std::vector<void*> params, outs;
      for (std::int64_t step = 0; step < length_; ++step) {
        const std::int64_t i = reverse_ ? length_ - 1 - step : step;
        params.clear();
        for (size_t k = 0; k < consts_; ++k) params.push_back(slot(reads_[k]));
        params.insert(params.end(), cur.begin(), cur.end());
        for (size_t k = 0; k < q; ++k) {
          const size_t x = consts_ + carries_ + k;
          const std::size_t sb = length_ ? in_bytes_[x] / std::size_t(length_) : 0;
          params.push_back(static_cast<char*>(slot(reads_[x])) + std::size_t(i) * sb);
        }
        outs = next;
        for (size_t k = 0; k < ny; ++k) {
          const std::size_t sb = out_bytes_[carries_ + k] / std::size_t(length_);
          outs.push_back(static_cast<char*>(slot(writes_[carries_ + k])) + std::size_t(i) * sb);
        }
        regions_[0]->run_inline(ctx, params, outs);
        std::swap(cur, next);
      }
    }
    for (size_t k = 0; k < carries_; ++k)
      if (cur[k] != slot(writes_[k]) && out_bytes_[k]) std::memcpy(slot(writes_[k]), cur[k], out_bytes_[k]);
  }

 private:
  Op op_;
  std::vector<int> reads_, writes_;
  std::vector<std::shared_ptr<rt::Executable>> regions_;
  std::string text_;
  std::vector<std::size_t> in_bytes_, out_bytes_;
  std::size_t first_ = 0, consts_ = 0, carries_ = 0;
  std::int64_t length_ = 0;
  bool reverse_ = false;
};

}  // namespace

CompiledProgram compile(const Graph& program, const CompileOptions& options) {
  const Graph g = fold_transposes_into_dots(has_complex(program) ? expand_complex(program) : program);
  FusionPlan plan = plan_fusion(g);
  sink_collectives(plan.steps);
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
    slot[n.get()] = s;
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
  std::ostringstream text;
  std::size_t code_bytes = 0;
  for (auto& step : plan.steps) {
    std::vector<int> writes = writes_of(step);
    const int out = writes[0];
    int scratch = -1;
    std::vector<int> reads;
    for (auto& r : step.reads) reads.push_back(slot_of(r));
    std::unique_ptr<rt::Thunk> thunk;
    // An empty result needs no work (and no kernel: its loops would divide
    // by zero sizes). Every device holds the same shapes, so collectives
    // skipped here are skipped on every device.
    if (step.kind == StepKind::Control) {
      std::vector<std::shared_ptr<rt::Executable>> regions;
      std::ostringstream os;
      os << op_name(step.node->op) << ' ' << step.node->aval.str() << " {";
      for (auto& r : step.node->regions()) {
        CompiledProgram sub = compile(*r, options);
        code_bytes += sub.code_bytes;
        exe->uses_collectives = exe->uses_collectives || sub.executable->uses_collectives;
        regions.push_back(sub.executable);
        std::string body = sub.thunks_text;
        std::string indented;
        for (size_t p = 0; p < body.size(); ++p) {
          indented += body[p];
          if (body[p] == '\n' && p + 1 < body.size()) indented += "  ";
        }
        os << "\n  " << r->name << ":\n  " << indented;
      }
      os << "  }";
      thunk = std::make_unique<ControlThunk>(*step.node, reads, writes, std::move(regions), os.str());
    } else if (!step.node->aval.tuple && numel(step.node->shape()) == 0)
      thunk = std::make_unique<EmptyThunk>("empty " + step.node->aval.str() + " root=" + op_name(step.node->op));
    else switch (step.kind) {
      case StepKind::Loop:
      case StepKind::Reduce: {
        Kernel k = compile_kernel(step);
        code_bytes += k.code->code_bytes;
        std::vector<int> bufs{out};
        bufs.insert(bufs.end(), reads.begin(), reads.end());
        std::ostringstream os;
        os << (step.kind == StepKind::Loop ? "fusion " : "reduction ") << step.node->aval.str() << " root="
           << op_name(step.node->op) << " reads=" << reads.size() << " items=" << k.items;
        thunk = std::make_unique<KernelThunk>(std::move(k), std::move(bufs), os.str());
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
  // The first compile creates the JIT's statics; exit() must let running
  // launches finish before destroying them: one handler, registered after
  // them (the JIT itself is never destroyed, later compiles add no statics).
  static std::once_flag exit_sync;
  std::call_once(exit_sync, [] { rt::Runtime::synchronize_at_exit(); });
  return {exe, text.str(), code_bytes};
}

}  // namespace tessel::codegen
