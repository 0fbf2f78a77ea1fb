// The distributed triangular-solve thunk (distributed_triangular_solve_routine
// in codegen/lapack.hpp; what it shares with the distributed factorisations:
// codegen/row_blocked.hpp).
#include "codegen/lapack.hpp"

#include "codegen/row_blocked.hpp"

namespace tessel::codegen {

namespace {

using namespace lapack_internal;

// distributed_triangular_solve: x solving op(a) x = b from the left, for a
// triangular a split by rows over a group (member q holds rows q r .. q r +
// r), b and x whole on every member, in blocks of r rows: block j is the
// one whose rows of a member j holds. In the order the triangle sets
// (forward when op(a) is lower, else backward), for each block j:
//   op(a) = a: j's owner solves its residual rows with its diagonal block
//     (trsm); every member copies x_j and, if its own block is still to
//     come, subtracts a_qj x_j from its residual rows (one meeting);
//   op(a) = a^T: every member already solved puts its part of block j's
//     residual, -a_qj^T x_q, in its rows j of x; the owner adds them to b_j
//     in group order and solves; every member copies x_j (two meetings).
// conj(a) is solved as a on conj(b), x conjugated after. In shared memory
// members read each other's x in place; across processes they publish the
// block. No member holds more of a than its rows. Workspace: a block of a
// product (tessel's GEMM; complex: the library's, taking its turn).
class DistributedTriangularSolveThunk final : public RowBlockedThunk<DistributedTriangularSolveThunk> {
 public:
  DistributedTriangularSolveThunk(const Node& n, const std::vector<int>& reads, std::vector<int> writes)
      : RowBlockedThunk(n, reads.at(0), std::move(writes)), b_in_(reads.at(1)), k_(n.in[1]->shape()[1]) {
    lapack_int(k_, n);
    std::ostringstream os;
    os << op_name(n.op) << ' ' << n.in[0]->aval.str() << " of " << p_.rows << " rows over " << groups_.at(0).size()
       << " devices, " << k_ << " right-hand sides, blocks of " << r_ << " rows"
       << (p_.packed_complex ? " (packed complex, LAPACK)" : " (LAPACK)");
    text_ = os.str();
  }
  // No workspace: tessel's GEMM subtracts its products in place.
  static std::size_t workspace_bytes(const Node&) { return 0; }
  template <class T>
  void run_typed(rt::ExecContext& ctx) const {
    const auto [group, q] = my_group(ctx);
    const std::int64_t n = n_, r = r_, k = k_, P = std::int64_t(group->size());
    const T* A = static_cast<const T*>(ctx.slots[size_t(in_)]);
    const T* B = static_cast<const T*>(ctx.slots[size_t(b_in_)]);
    T* X = static_cast<T*>(ctx.slots[size_t(writes_[0])]);
    auto width = [&](std::int64_t j) { return std::clamp<std::int64_t>(n - j * r, 0, r); };
    const std::int64_t mine = width(q), off = q * r;
    {  // x starts as this member's rows of b (conjugated for conj(a)), zeros elsewhere
      rt::ComputeSlot slot;
      std::fill(X, X + n * k, T(0));
      std::copy(B + off * k, B + (off + mine) * k, X + off * k);
      if (p_.conjugate_a) conjugate(X + off * k, mine * k);
    }
    const bool forward = p_.lower != p_.transpose_a, shared = ctx.comm->shares_memory(*group);
    auto step_of = [&](std::int64_t j) { return forward ? j : P - 1 - j; };
    std::vector<T> send;  // across processes: the block this member publishes
    auto publish = [&](const T* block, std::int64_t w) {
      if (shared) return ctx.comm->exchange(ctx.position, *group, X, std::size_t(n * k) * sizeof(T));
      if (block) send.assign(block, block + w * k);
      else send.assign(std::size_t(w * k), T(0));
      return ctx.comm->exchange(ctx.position, *group, send.data(), send.size() * sizeof(T));
    };
    // Member p's block j of x as published.
    auto block_of = [&](const std::vector<const void*>& peers, std::int64_t p, std::int64_t j) {
      return static_cast<const T*>(peers[size_t(p)]) + (shared ? j * r * k : 0);
    };
    for (std::int64_t s = 0; s < P && k > 0; ++s) {
      const std::int64_t j = step_of(s), w = width(j);  // step_of is its own inverse
      if (w == 0) continue;
      const bool owner = q == j, solved = step_of(q) < s;
      T* Xj = X + j * r * k;
      const T* a_qj = A + j * r;  // this member's rows of a's block column j (row stride n)
      if (p_.transpose_a) {
        // This member's part of block j's residual, -a_qj^T x_q, into its rows j of x.
        const bool part = !owner && solved && mine > 0;
        if (part) {
          rt::ComputeSlot slot;
          std::fill(Xj, Xj + w * k, T(0));
          subtract_transposed(Xj, a_qj, X + off * k, w, mine);
        }
        auto peers = publish(part ? Xj : nullptr, w);
        if (owner) {
          rt::ComputeSlot slot;
          for (std::int64_t p = 0; p < P; ++p) {
            if (p == q || step_of(p) >= s || width(p) == 0) continue;
            const T* from = block_of(peers, p, j);
            for (std::int64_t i = 0; i < w * k; ++i) Xj[i] += from[i];
          }
        }
        ctx.comm->release(ctx.position, *group);
      }
      if (owner) {  // column-major: x^T op(a_jj)^T = b^T, a_jj read as its transpose
        rt::ComputeSlot slot;
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        Lapack::trsm<T>('R', p_.lower ? 'U' : 'L', p_.transpose_a ? 'T' : 'N', p_.unit_diagonal ? 'U' : 'N', int(k), int(w),
                        a_qj, int(n), Xj, int(k));
      }
      {
        auto peers = publish(owner ? Xj : nullptr, w);
        if (!owner) {
          rt::ComputeSlot slot;
          const T* from = block_of(peers, j, j);
          std::copy(from, from + w * k, Xj);
        }
        ctx.comm->release(ctx.position, *group);
      }
      if (!p_.transpose_a && !solved && !owner && mine > 0) {  // this member's residual rows -= a_qj x_j
        rt::ComputeSlot slot;
        T* C = X + off * k;
        subtract_block(C, a_qj, Xj, w, mine);
      }
    }
    if (p_.conjugate_a) {
      rt::ComputeSlot slot;
      conjugate(X, n * k);
    }
  }

  // The same solve for a whole group at once (run_all), step by step: the
  // members' parts of the residual (op(a) = a^T), the owner's sum and solve,
  // every member's copy of x_j, their residual updates (op(a) = a).
  template <class T>
  void run_group(const std::vector<rt::ExecContext*>& group) const {
    const std::int64_t n = n_, r = r_, k = k_, P = std::int64_t(group.size());
    std::vector<const T*> A(group.size());
    std::vector<T*> X(group.size());
    auto width = [&](std::int64_t j) { return std::clamp<std::int64_t>(n - j * r, 0, r); };
    for_members(group, [&](std::int64_t q) {
      const rt::ExecContext& ctx = *group[size_t(q)];
      A[size_t(q)] = static_cast<const T*>(ctx.slots[size_t(in_)]);
      T* x = X[size_t(q)] = static_cast<T*>(ctx.slots[size_t(writes_[0])]);
      const T* B = static_cast<const T*>(ctx.slots[size_t(b_in_)]);
      const std::int64_t off = q * r, mine = width(q);
      std::fill(x, x + n * k, T(0));
      std::copy(B + off * k, B + (off + mine) * k, x + off * k);
      if (p_.conjugate_a) conjugate(x + off * k, mine * k);
    });
    const bool forward = p_.lower != p_.transpose_a;
    auto step_of = [&](std::int64_t j) { return forward ? j : P - 1 - j; };
    for (std::int64_t s = 0; s < P && k > 0; ++s) {
      const std::int64_t j = step_of(s), w = width(j);
      if (w == 0) continue;
      T* Xj = X[size_t(j)] + j * r * k;
      if (p_.transpose_a) {
        for_members(group, [&](std::int64_t q) {
          const std::int64_t mine = width(q);
          if (q == j || step_of(q) >= s || mine == 0) return;
          T* part = X[size_t(q)] + j * r * k;  // -a_qj^T x_q
          std::fill(part, part + w * k, T(0));
          const T* a_qj = A[size_t(q)] + j * r;
          const T* xq = X[size_t(q)] + q * r * k;
          subtract_transposed(part, a_qj, xq, w, mine);
        });
        rt::ComputeSlot owner;
        for (std::int64_t p = 0; p < P; ++p) {
          if (p == j || step_of(p) >= s || width(p) == 0) continue;
          const T* from = X[size_t(p)] + j * r * k;
          for (std::int64_t i = 0; i < w * k; ++i) Xj[i] += from[i];
        }
      }
      {
        rt::ComputeSlot owner;
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        Lapack::trsm<T>('R', p_.lower ? 'U' : 'L', p_.transpose_a ? 'T' : 'N', p_.unit_diagonal ? 'U' : 'N', int(k), int(w),
                        A[size_t(j)] + j * r, int(n), Xj, int(k));
      }
      for_members(group, [&](std::int64_t q) {
        if (q != j) std::copy(Xj, Xj + w * k, X[size_t(q)] + j * r * k);
      });
      if (!p_.transpose_a)
        for_members(group, [&](std::int64_t q) {  // residual rows -= a_qj x_j
          const std::int64_t mine = width(q);
          if (q == j || step_of(q) < s || mine == 0) return;
          T* C = X[size_t(q)] + q * r * k;
          const T* a_qj = A[size_t(q)] + j * r;
          const T* xj = X[size_t(q)] + j * r * k;
          subtract_block(C, a_qj, xj, w, mine);
        });
    }
    if (p_.conjugate_a) for_members(group, [&](std::int64_t q) { conjugate(X[size_t(q)], n * k); });
  }

  // A member's part of block j's residual when op(a) = a^T: part [w, k] -=
  // a_qj^T x_q, for its rows a_qj [mine, w] (row stride n) of a's block
  // column j and its block x_q [mine, k] (tessel's GEMM;
  // complex: the library's, taking its turn; column-major part^T -= x_q^T a_qj).
  template <class T>
  void subtract_transposed(T* part, const T* a_qj, const T* xq, std::int64_t w, std::int64_t mine) const {
    const std::int64_t n = n_, k = k_;
    if constexpr (is_cx<T>) {
      const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
      Lapack::gemm_sub<T>('N', 'T', int(k), int(w), int(mine), xq, int(k), a_qj, int(n), part, int(k));
    } else {
      subtract_product(part, k, w, k, mine, a_qj, 1, n, xq, k, 1);
    }
  }
  // A member's residual rows when op(a) = a: C [mine, k] -= a_qj x_j
  // (column-major C^T -= x_j^T a_qj^T).
  template <class T>
  void subtract_block(T* C, const T* a_qj, const T* xj, std::int64_t w, std::int64_t mine) const {
    const std::int64_t n = n_, k = k_;
    if constexpr (is_cx<T>) {
      const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
      Lapack::gemm_sub<T>('N', 'N', int(k), int(mine), int(w), xj, int(k), a_qj, int(n), C, int(k));
    } else {
      subtract_product(C, k, mine, k, w, a_qj, n, 1, xj, k, 1);
    }
  }

 private:
  int b_in_;
  std::int64_t k_;
};

}  // namespace

std::unique_ptr<rt::Thunk> distributed_triangular_solve_routine(const Node& n, const std::vector<int>& reads,
                                                                const std::vector<int>& writes) {
  return std::make_unique<DistributedTriangularSolveThunk>(n, reads, writes);
}
std::size_t distributed_triangular_solve_workspace(const Node& n) {
  return DistributedTriangularSolveThunk::workspace_bytes(n);
}

}  // namespace tessel::codegen
