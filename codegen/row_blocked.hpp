// What the distributed factorisations and the distributed triangular solve
// share (codegen/lapack_distributed.cpp, codegen/lapack_triangular.cpp): the
// panel gather, the trailing product, and the row-blocked thunk's face
// (attributes, groups, run_all for a lockstep run).
#pragma once

#include <algorithm>
#include <array>
#include <functional>
#include <mutex>
#include <sstream>

#include "codegen/gemm.hpp"
#include "codegen/lapack_blocked.hpp"
#include "codegen/lapack_internal.hpp"
#include "runtime/communicator.hpp"
#include "runtime/device.hpp"
#include "tessel/core/errors.hpp"
#include "tracer/sharding.hpp"

namespace tessel::codegen::lapack_internal {

// The two distributed factorisations' shared steps.
//
// Step 1 of a panel step: the panel, column-major [end - c0, w] (rows c0 up
// to `end` of columns c0 .. c0 + w), or row-major [end - c0, w] where
// `row_major`, into `panel` on the devices that factorise it. In shared
// memory each member publishes `published` (whose rows `peer_rows` finds)
// and the panel is read from its peers' rows in place; across processes
// each publishes its rows' panel columns.
template <class T, class PeerRows>
void gather_panel(rt::ExecContext& ctx, const std::vector<std::int64_t>& group, bool shared, const void* published,
                  std::size_t published_bytes, PeerRows peer_rows, const T* A, std::int64_t r, std::int64_t n,
                  std::int64_t c0, std::int64_t w, std::int64_t end, bool factors, std::vector<T>& send, T* panel,
                  bool row_major = false) {
  std::vector<const void*> peers;
  if (shared) {
    peers = ctx.comm->exchange(ctx.position, group, published, published_bytes);
  } else {
    send.resize(std::size_t(r * w));
    for (std::int64_t i = 0; i < r; ++i) std::copy(A + i * n + c0, A + i * n + c0 + w, send.data() + i * w);
    peers = ctx.comm->exchange(ctx.position, group, send.data(), send.size() * sizeof(T));
  }
  if (factors) {
    rt::ComputeSlot slot;
    const std::int64_t active = end - c0;
    for (std::int64_t g = c0; g < end; ++g) {
      const T* row = shared ? peer_rows(peers[size_t(g / r)]) + (g % r) * n + c0
                            : static_cast<const T*>(peers[size_t(g / r)]) + (g % r) * w;
      if (row_major) std::copy(row, row + w, panel + (g - c0) * w);
      else
        for (std::int64_t j = 0; j < w; ++j) panel[j * active + (g - c0)] = row[j];
    }
  }
  ctx.comm->release(ctx.position, group);
}

// What the two distributed factorisations share: their attributes, their
// element type, this device's group, and the thunk's face.
template <class Derived>
class RowBlockedThunk : public rt::Thunk {
 public:
  RowBlockedThunk(const Node& n, int in, std::vector<int> writes)
      : p_(n.attr<attr::RowBlocked>()), in_(in), writes_(std::move(writes)), dtype_(n.in[0]->dtype()) {
    const Shape& s = n.in[0]->shape();
    r_ = s[0];
    n_ = s[1];
    lapack_int(std::max({p_.rows, n_, r_}), n);
    groups_ = collective_groups(*p_.mesh, p_.axes);
    all_local_ = all_local(p_);
    std::ostringstream os;
    os << op_name(n.op) << ' ' << n.in[0]->aval.str() << " of " << p_.rows << " rows over " << groups_.at(0).size()
       << " devices, panels of " << p_.panel << (p_.packed_complex ? " (packed complex, LAPACK)" : " (LAPACK)");
    text_ = os.str();
  }
  bool waits_on_peers() const override { return true; }
  // Whether every device of the mesh is in this process.
  static bool all_local(const attr::RowBlocked& p) {
    for (int id : p.mesh->device_ids())
      if (!rt::Runtime::get().is_local(id)) return false;
    return true;
  }
  // A lockstep run (run_all) has every member of every group at hand when
  // the whole mesh is in this process: each group's protocol then runs as
  // its phases, each for every member, on this one thread (run_group: the
  // same calls on the same values as the members' own threads make, so the
  // same bits), without a meeting. Groups that span processes meet through
  // the communicator on the devices' threads.
  bool can_run_all() const override { return all_local_; }
  void run_all(const std::vector<rt::ExecContext*>& ctxs) const override {
    with_element(dtype_, p_.packed_complex, [&](auto tag) {
      for (auto& g : groups_) {
        std::vector<rt::ExecContext*> members;
        for (auto pos : g) {
          auto it = std::find_if(ctxs.begin(), ctxs.end(), [&](const rt::ExecContext* c) { return c->position == pos; });
          TESSEL_CHECK_INTERNAL(it != ctxs.end(), text_, ": position ", pos, " is not in the lockstep run");
          members.push_back(*it);
        }
        static_cast<const Derived*>(this)->template run_group<decltype(tag)>(members);
      }
    });
  }
  // f(i) for i in [0, count) in a run_all: side by side on the machine's
  // cores where the lockstep run spreads positions so (ExecContext::parallel:
  // the devices' threads would have used them), else one after another;
  // each under a compute slot.
  template <class F>
  static void for_each(const std::vector<rt::ExecContext*>& group, std::int64_t count, F&& f) {
    if (group[0]->parallel && count > 1) {
      rt::parallel_for_machine(0, count, 1, [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) {
          rt::ComputeSlot slot;
          f(i);
        }
      });
    } else {
      rt::ComputeSlot slot;
      for (std::int64_t i = 0; i < count; ++i) f(i);
    }
  }
  // f(q) for every member q of the group.
  template <class F>
  static void for_members(const std::vector<rt::ExecContext*>& group, F&& f) {
    for_each(group, std::int64_t(group.size()), std::forward<F>(f));
  }
  // The trailing updates of a panel step, the bulk of the work, as chunks of
  // at most kChunkRows rows of one member: f(q, i0, i1) for its local rows
  // [i0, i1) of [begin[q], end[q]). Chunks keep the machine's cores evenly
  // busy where members' shares differ (the rows above a panel have none
  // left). tessel's GEMM computes each row alike however rows are grouped,
  // so the bits do not change; the complex path's library gemm (a serial
  // OpenBLAS) does too, which tests/dsl/linalg_test.cpp checks.
  // 128: each chunk's GEMM packs U12 (or L21^T) whole again; with chunks of
  // 32 rows a 4096^2 float32 solve on 8 devices (2 cores) took 441 ms, with
  // 128 316-336 (64: 368, 256: 335-347).
  static constexpr std::int64_t kChunkRows = 128;
  template <class F>
  static void for_row_chunks(const std::vector<rt::ExecContext*>& group, const std::vector<std::int64_t>& begin,
                             const std::vector<std::int64_t>& end, F&& f) {
    std::vector<std::array<std::int64_t, 3>> chunks;
    for (size_t q = 0; q < begin.size(); ++q)
      for (std::int64_t i0 = begin[q]; i0 < end[q]; i0 += kChunkRows)
        chunks.push_back({std::int64_t(q), i0, std::min(end[q], i0 + kChunkRows)});
    for_each(group, std::int64_t(chunks.size()), [&](std::int64_t c) { f(chunks[size_t(c)][0], chunks[size_t(c)][1], chunks[size_t(c)][2]); });
  }
  // Bytes of one element as the library sees it (a packed complex: two).
  static std::size_t element_bytes(const Node& n) {
    return dtype_size(n.in[0]->dtype()) * (n.attr<attr::RowBlocked>().packed_complex ? 2 : 1);
  }
  void run(rt::ExecContext& ctx) const override {
    with_element(dtype_, p_.packed_complex,
                 [&](auto tag) { static_cast<const Derived*>(this)->template run_typed<decltype(tag)>(ctx); });
  }
  std::string describe() const override { return text_; }
  const char* category() const override { return "library"; }

 protected:
  // This device's group (its row tiles, in order) and its tile in it.
  std::pair<const std::vector<std::int64_t>*, std::int64_t> my_group(const rt::ExecContext& ctx) const {
    TESSEL_CHECK_INTERNAL(ctx.comm, text_, ": a launch without a communicator");
    for (auto& g : groups_)
      for (size_t k = 0; k < g.size(); ++k)
        if (g[k] == ctx.position) return {&g, std::int64_t(k)};
    TESSEL_CHECK_INTERNAL(false, text_, ": position ", ctx.position, " is in no group");
    return {nullptr, 0};
  }
  attr::RowBlocked p_;
  int in_;
  std::vector<int> writes_;
  DType dtype_;
  std::int64_t n_ = 0, r_ = 0;
  std::vector<std::vector<std::int64_t>> groups_;
  std::string text_;
  bool all_local_ = true;
};

}  // namespace tessel::codegen::lapack_internal
