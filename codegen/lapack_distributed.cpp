// The distributed LU and Cholesky thunks (distributed_lu_routine and
// distributed_cholesky_routine in codegen/lapack.hpp; what they share with the
// distributed triangular solve: codegen/row_blocked.hpp).
#include "codegen/lapack.hpp"

#include <optional>
#include <tuple>

#include "codegen/row_blocked.hpp"

namespace tessel::codegen {

namespace {

using namespace lapack_internal;

// distributed_lu: one device's rows of a matrix split by rows over a group
// of devices, factorised in place in its output by ScaLAPACK's blocked
// right-looking algorithm. Each panel step meets the group three times:
//   1. the panel (the active rows' nb columns) is read from every member and
//      factorised (getrf: partial pivoting over the whole column, as the
//      one-device lu's);
//   2. the pivot rows (the new top rows) are read from their owners into U,
//      and U12 = L11^-1 A12 solved from them (trsm);
//   3. each member copies the old top rows its moved rows below receive
//      straight into those rows;
// then each device updates its own rows: the top rows take the pivot rows
// and U12, the rows below the panel subtract L21 U12 (tessel's GEMM). In
// shared memory members read their peers' rows in place, and the group's
// first member factorises the panel and solves U12 for all (the library's
// calls take turns, blas_lock); across processes each member publishes only
// the rows its peers need and factorises the panel itself (the same bits).
// Workspace (the slot after the results): the panel, the pivot rows and a
// block of the update's product.
class DistributedLuThunk final : public RowBlockedThunk<DistributedLuThunk> {
 public:
  DistributedLuThunk(const Node& n, int in, std::vector<int> writes) : RowBlockedThunk(n, in, std::move(writes)) {}
  // The workspace: the panel [m, nb], the pivot rows [nb, n] and a block
  // of the trailing update's product [r, nb].
  static std::size_t workspace_bytes(const Node& n) {
    const auto& p = n.attr<attr::RowBlocked>();
    const Shape& s = n.in[0]->shape();
    const std::int64_t r = s[0], cols = s[1], nb = p.panel;
    return element_bytes(n) * std::size_t(p.rows * nb + nb * cols + r * nb);
  }
  template <class T>
  void run_typed(rt::ExecContext& ctx) const {
    const auto [group, q] = my_group(ctx);
    const std::int64_t m = p_.rows, n = n_, r = r_, nb = p_.panel, kmax = std::min(m, n), off = q * r;
    T* A = static_cast<T*>(ctx.slots[size_t(writes_[0])]);
    auto* piv = static_cast<std::int32_t*>(ctx.slots[size_t(writes_[1])]);
    auto* perm = static_cast<std::int32_t*>(ctx.slots[size_t(writes_[2])]);
    T* panel = static_cast<T*>(ctx.slots[size_t(writes_[3])]);
    T* U = panel + m * nb;
    {
      rt::ComputeSlot slot;
      const T* x = static_cast<const T*>(ctx.slots[size_t(in_)]);
      std::copy(x, x + r * n, A);
      for (std::int64_t i = 0; i < m; ++i) perm[i] = std::int32_t(i);
    }
    const bool shared = ctx.comm->shares_memory(*group);
    std::vector<T> send;  // across processes: the rows (or panel columns) this device publishes
    std::vector<int> ipiv(static_cast<std::size_t>(nb));
    std::vector<std::int64_t> pperm;
    // In shared memory a member publishes where its rows, panel, pivot rows
    // and pivots are, and the group's first member (the leader) factorises
    // the panel and solves U12 for everyone, who copy them: the library's
    // calls take turns (blas_lock), so doing them once, not once per
    // device, is what keeps the devices busy.
    struct Published {
      const T* A;
      const T* panel;
      const T* U;
      const int* ipiv;
    } mine{A, panel, U, ipiv.data()};
    auto of = [](const void* p) { return static_cast<const Published*>(p); };
    const bool leader = q == 0, factors = leader || !shared;  // whether this device runs getrf and trsm
    for (std::int64_t c0 = 0; c0 < kmax; c0 += nb) {
      const std::int64_t w = std::min(nb, kmax - c0), c1 = c0 + w, active = m - c0;
      // 1. The panel, column-major [active, w], from every member's rows
      // (in shared memory only the leader needs it).
      gather_panel<T>(ctx, *group, shared, &mine, sizeof mine, [&](const void* p) { return of(p)->A; }, A, r, n, c0, w, m,
                      factors, send, panel);
      std::vector<const void*> peers;
      if (factors) {
        rt::ComputeSlot slot;
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        int info = 0;
        Lapack::getrf(int(active), int(w), panel, int(active), ipiv.data(), info);  // info > 0: singular, the factors stand
      }
      // 2. The factored panel and its pivots from the leader, and the pivot
      // rows (global rows c0 + pperm[0..w), the new top rows) into U.
      auto pivot_row = [&](std::int64_t l) { return c0 + pperm[size_t(l)]; };
      auto old_top = [&](std::int64_t l) { return c0 + l; };
      // Across processes a member publishes the listed rows it owns, in list order.
      auto publish = [&](auto&& listed) {
        send.resize(std::size_t(w * n));
        std::int64_t k = 0;
        for (std::int64_t l = 0; l < w; ++l)
          if (listed(l) / r == q) std::copy(A + (listed(l) - off) * n, A + (listed(l) - off + 1) * n, send.data() + (k++) * n);
        return ctx.comm->exchange(ctx.position, *group, send.data(), send.size() * sizeof(T));
      };
      // Across processes: where each listed row sits among its owner's published rows.
      auto places = [&](auto&& listed) {
        std::vector<std::int64_t> at(static_cast<std::size_t>(w)), count(group->size(), 0);
        for (std::int64_t l = 0; l < w; ++l) at[size_t(l)] = count[size_t(listed(l) / r)]++;
        return at;
      };
      auto row_in = [&](const std::vector<const void*>& at, auto&& listed, const std::vector<std::int64_t>& place,
                        std::int64_t l) {
        const std::int64_t g = listed(l);
        if (shared) return of(at[size_t(g / r)])->A + (g % r) * n;
        return static_cast<const T*>(at[size_t(g / r)]) + place[size_t(l)] * n;
      };
      auto pivots = [&] {
        pperm.resize(std::size_t(active));
        for (std::int64_t i = 0; i < active; ++i) pperm[size_t(i)] = i;
        for (std::int64_t i = 0; i < w; ++i) std::swap(pperm[size_t(i)], pperm[size_t(ipiv[size_t(i)] - 1)]);
      };
      if (shared) {
        peers = ctx.comm->exchange(ctx.position, *group, &mine, sizeof mine);
        rt::ComputeSlot slot;
        if (!leader) {
          const Published* l = of(peers[0]);
          std::copy(l->ipiv, l->ipiv + w, ipiv.data());
          std::copy(l->panel, l->panel + active * w, panel);
        }
        pivots();
      } else {
        pivots();
        peers = publish(pivot_row);
      }
      {
        rt::ComputeSlot slot;
        const auto place = places(pivot_row);
        for (std::int64_t l = 0; l < w; ++l) {
          const T* from = row_in(peers, pivot_row, place, l);
          std::copy(from, from + n, U + l * n);
        }
      }
      ctx.comm->release(ctx.position, *group);
      if (factors && n > c1) {  // U12 = L11^-1 A12 on the pivot rows: x L11^T = A12^T, column-major
        rt::ComputeSlot slot;
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        Lapack::trsm<T>('R', 'L', 'T', 'U', int(n - c1), int(w), panel, int(active), U + c1, int(n));
      }
      // 3. U12 from the leader; each member copies the old top rows (c0 +
      // 0..w) its moved rows below receive straight into those rows (their
      // own contents are safe in every U by now), before the top rows'
      // owners overwrite them.
      peers = shared ? ctx.comm->exchange(ctx.position, *group, &mine, sizeof mine) : publish(old_top);
      {
        rt::ComputeSlot slot;
        if (shared && !leader && n > c1)
          for (std::int64_t l = 0; l < w; ++l) std::copy(of(peers[0])->U + l * n + c1, of(peers[0])->U + (l + 1) * n, U + l * n + c1);
        const auto place = places(old_top);
        for (std::int64_t i = 0; i < r; ++i) {
          const std::int64_t rel = off + i - c0;
          if (off + i < m && rel >= w && rel < active && pperm[size_t(rel)] != rel) {
            const T* from = row_in(peers, old_top, place, pperm[size_t(rel)]);
            std::copy(from, from + n, A + i * n);
          }
        }
      }
      ctx.comm->release(ctx.position, *group);
      // 4. This device's rows.
      rt::ComputeSlot slot;
      const auto [below0, below1] = own_rows(A, U, panel, piv, perm, off, c0, w, ipiv, pperm);
      if (below1 > below0 && n > c1)
        update(A + below0 * n + c1, n, panel + (off + below0 - c0), active, U + c1, below1 - below0, n - c1, w, U + nb * n);
    }
  }

  // A device's rows at panel step c0 (w columns), but for the trailing
  // update: each top row takes its pivot row and U12 (from U), each active
  // row its panel columns; then the step's pivots and permutation. Returns
  // its local rows [below0, below1) below the panel, which the update changes.
  template <class T>
  std::pair<std::int64_t, std::int64_t> own_rows(T* A, const T* U, const T* panel, std::int32_t* piv, std::int32_t* perm,
                                                 std::int64_t off, std::int64_t c0, std::int64_t w,
                                                 const std::vector<int>& ipiv,
                                                 const std::vector<std::int64_t>& pperm) const {
    const std::int64_t m = p_.rows, n = n_, r = r_, c1 = c0 + w, active = m - c0;
    std::int64_t below0 = 0, below1 = 0;
    for (std::int64_t i = 0; i < r; ++i) {
      const std::int64_t rel = off + i - c0;
      if (off + i >= m || rel < 0 || rel >= active) continue;
      T* row = A + i * n;
      if (rel < w) {  // a top row: the pivot row, U12 in its trailing part
        std::copy(U + rel * n, U + rel * n + c0, row);
        std::copy(U + rel * n + c1, U + (rel + 1) * n, row + c1);
      }
      for (std::int64_t j = 0; j < w; ++j) row[c0 + j] = panel[j * active + rel];
      if (rel >= w) {
        if (below1 == below0) below0 = i;  // the first (the range starts empty)
        below1 = i + 1;
      }
    }
    for (std::int64_t i = 0; i < w; ++i) piv[c0 + i] = std::int32_t(c0 + ipiv[size_t(i)] - 1);
    const std::vector<std::int32_t> tail(perm + c0, perm + m);
    for (std::int64_t i = 0; i < active; ++i) perm[c0 + i] = tail[size_t(pperm[size_t(i)])];
    return {below0, below1};
  }

  // The same protocol for a whole group at once (run_all), phase by phase:
  // the leader gathers and factorises the panel; every member takes the
  // pivots and its pivot rows; the leader solves U12; the others copy it and
  // each member copies the old top rows its moved rows receive; each member
  // updates its rows.
  template <class T>
  void run_group(const std::vector<rt::ExecContext*>& group) const {
    const std::int64_t m = p_.rows, n = n_, r = r_, nb = p_.panel, kmax = std::min(m, n);
    struct Member {
      T* A;
      std::int32_t* piv;
      std::int32_t* perm;
      T* panel;
      T* U;
    };
    std::vector<Member> M(group.size());
    for_members(group, [&](std::int64_t q) {
      const rt::ExecContext* ctx = group[size_t(q)];
      Member& mb = M[size_t(q)];
      mb.A = static_cast<T*>(ctx->slots[size_t(writes_[0])]);
      mb.piv = static_cast<std::int32_t*>(ctx->slots[size_t(writes_[1])]);
      mb.perm = static_cast<std::int32_t*>(ctx->slots[size_t(writes_[2])]);
      mb.panel = static_cast<T*>(ctx->slots[size_t(writes_[3])]);
      mb.U = mb.panel + m * nb;
      const T* x = static_cast<const T*>(ctx->slots[size_t(in_)]);
      std::copy(x, x + r * n, mb.A);
      for (std::int64_t i = 0; i < m; ++i) mb.perm[i] = std::int32_t(i);
    });
    auto row = [&](std::int64_t g) { return M[size_t(g / r)].A + (g % r) * n; };  // global row g
    std::vector<int> ipiv(static_cast<std::size_t>(nb));
    std::vector<std::int64_t> pperm;
    for (std::int64_t c0 = 0; c0 < kmax; c0 += nb) {
      const std::int64_t w = std::min(nb, kmax - c0), c1 = c0 + w, active = m - c0;
      T* panel = M[0].panel;
      std::optional<rt::ComputeSlot> slot(std::in_place);  // the leader's part
      for (std::int64_t g = c0; g < m; ++g)
        for (std::int64_t j = 0; j < w; ++j) panel[j * active + (g - c0)] = row(g)[c0 + j];
      {
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        int info = 0;
        Lapack::getrf(int(active), int(w), panel, int(active), ipiv.data(), info);  // info > 0: singular, the factors stand
      }
      pperm.resize(std::size_t(active));
      for (std::int64_t i = 0; i < active; ++i) pperm[size_t(i)] = i;
      for (std::int64_t i = 0; i < w; ++i) std::swap(pperm[size_t(i)], pperm[size_t(ipiv[size_t(i)] - 1)]);
      slot.reset();
      for_members(group, [&](std::int64_t q) {
        if (q > 0) std::copy(panel, panel + active * w, M[size_t(q)].panel);
        for (std::int64_t l = 0; l < w; ++l) std::copy(row(c0 + pperm[size_t(l)]), row(c0 + pperm[size_t(l)]) + n, M[size_t(q)].U + l * n);
      });
      if (n > c1) {
        rt::ComputeSlot leader;  // U12 = L11^-1 A12 on the pivot rows: x L11^T = A12^T, column-major
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        Lapack::trsm<T>('R', 'L', 'T', 'U', int(n - c1), int(w), panel, int(active), M[0].U + c1, int(n));
      }
      for_members(group, [&](std::int64_t q) {
        if (q > 0 && n > c1)
          for (std::int64_t l = 0; l < w; ++l) std::copy(M[0].U + l * n + c1, M[0].U + (l + 1) * n, M[size_t(q)].U + l * n + c1);
        const std::int64_t off = q * r;
        for (std::int64_t i = 0; i < r; ++i) {  // old top rows (never written in this phase) into moved rows below
          const std::int64_t rel = off + i - c0;
          if (off + i < m && rel >= w && rel < active && pperm[size_t(rel)] != rel)
            std::copy(row(c0 + pperm[size_t(rel)]), row(c0 + pperm[size_t(rel)]) + n, M[size_t(q)].A + i * n);
        }
      });
      std::vector<std::int64_t> below0(group.size()), below1(group.size());  // local rows below the panel
      for_members(group, [&](std::int64_t q) {
        const Member& mb = M[size_t(q)];
        std::tie(below0[size_t(q)], below1[size_t(q)]) =
            own_rows(mb.A, mb.U, mb.panel, mb.piv, mb.perm, q * r, c0, w, ipiv, pperm);
      });
      if (n > c1)
        for_row_chunks(group, below0, below1, [&](std::int64_t q, std::int64_t i0, std::int64_t i1) {
          const Member& mb = M[size_t(q)];
          update(mb.A + i0 * n + c1, n, mb.panel + (q * r + i0 - c0), active, mb.U + c1, i1 - i0, n - c1, w,
                 mb.U + nb * n + i0 * nb);  // this chunk's rows of the member's [r, nb] scratch
        });
    }
  }

  // C [rows, cols] -= L [rows, k] (column-major, ld ldl) x U12 [k, cols],
  // C and U12 both of row stride ldc: float and double by tessel's own GEMM
  // on this device's thread, in column chunks of at most nb (scratch
  // [rows, nb]), with no lock; complex by the library's gemm, taking its turn.
  template <class T>
  void update(T* C, std::int64_t ldc, const T* L, std::int64_t ldl, const T* U12, std::int64_t rows, std::int64_t cols,
              std::int64_t k, T* scratch) const {
    if constexpr (is_cx<T>) {
      const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
      // A22^T -= U12^T L21^T, column-major
      Lapack::gemm_sub<T>('N', 'T', int(cols), int(rows), int(k), U12, int(ldc), L, int(ldl), C, int(ldc));
    } else {
      subtract_product(C, ldc, rows, cols, k, L, 1, ldl, U12, ldc, 1, p_.panel, scratch);
    }
  }

};


// distributed_cholesky: one device's rows of a Hermitian positive definite
// matrix split by rows, factorised in place into its rows of L by the
// blocked right-looking algorithm. Each panel step gathers the panel (the
// rows from c0 down, nb columns), factorises it (potrf of L11, then
// L21 = A21 L11^-H by trsm) and each device subtracts L21 L21^H from its
// rows' trailing columns (tessel's GEMM; complex: the library's, locked).
// In shared memory the group's first member gathers and factorises the panel
// and the others copy it (one meeting each way per step); across processes
// every member gathers the panel's columns and factorises it itself. A
// panel that is not positive definite makes every element NaN, as LAPACK's
// single-matrix path. Workspace: the panel and a block of the update's product.
class DistributedCholeskyThunk final : public RowBlockedThunk<DistributedCholeskyThunk> {
 public:
  DistributedCholeskyThunk(const Node& n, int in, std::vector<int> writes) : RowBlockedThunk(n, in, std::move(writes)) {}
  static std::size_t workspace_bytes(const Node& n) {
    const auto& p = n.attr<attr::RowBlocked>();
    const Shape& s = n.in[0]->shape();
    return element_bytes(n) * std::size_t(s[1] * p.panel + s[0] * p.panel);
  }
  template <class T>
  void run_typed(rt::ExecContext& ctx) const {
    const auto [group, q] = my_group(ctx);
    const std::int64_t n = n_, r = r_, nb = p_.panel, off = q * r, mine_rows = std::max<std::int64_t>(0, std::min(r, n - off));
    T* A = static_cast<T*>(ctx.slots[size_t(writes_[0])]);
    T* panel = static_cast<T*>(ctx.slots[size_t(writes_[1])]);
    {
      rt::ComputeSlot slot;
      const T* x = static_cast<const T*>(ctx.slots[size_t(in_)]);
      std::copy(x, x + r * n, A);
    }
    const bool shared = ctx.comm->shares_memory(*group), leader = q == 0, factors = leader || !shared;
    struct Published {
      const T* A;
      const T* panel;
      const int* info;
    };
    int info = 0;
    const Published mine{A, panel, &info};
    auto of = [](const void* p) { return static_cast<const Published*>(p); };
    std::vector<T> send;
    for (std::int64_t c0 = 0; c0 < n; c0 += nb) {
      const std::int64_t w = std::min(nb, n - c0), active = n - c0;
      // 1. The panel, column-major [active, w]: its rows from every member.
      gather_panel<T>(ctx, *group, shared, &mine, sizeof mine, [&](const void* p) { return of(p)->A; }, A, r, n, c0, w, n,
                      factors, send, panel);
      std::vector<const void*> peers;
      if (factors) {
        rt::ComputeSlot slot;
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        Lapack::potrf('L', int(w), panel, int(active), info);
        if (info == 0 && active > w)  // L21 L11^H = A21
          Lapack::trsm<T>('R', 'L', 'C', 'N', int(active - w), int(w), panel, int(active), panel + w, int(active));
      }
      // 2. In shared memory, the leader's factored panel.
      if (shared) {
        peers = ctx.comm->exchange(ctx.position, *group, &mine, sizeof mine);
        if (!leader) {
          rt::ComputeSlot slot;
          info = *of(peers[0])->info;
          if (info == 0) std::copy(of(peers[0])->panel, of(peers[0])->panel + active * w, panel);
        }
        ctx.comm->release(ctx.position, *group);
      }
      rt::ComputeSlot slot;
      if (info != 0) {  // not positive definite: NaN everywhere (every device stops at this step)
        fill_nan(A, mine_rows * n);
        return;
      }
      // 3. This device's rows: L's panel columns, then the trailing update.
      const std::int64_t below0 = panel_columns(A, panel, off, mine_rows, c0, w);
      if (below0 < mine_rows) trailing(A, panel, off, c0, w, below0, mine_rows, panel + n * nb);
    }
    // Zeros above the diagonal.
    rt::ComputeSlot slot;
    for (std::int64_t i = 0; i < mine_rows; ++i) std::fill(A + i * n + (off + i) + 1, A + (i + 1) * n, T(0));
  }


  // The same protocol for a whole group at once (run_all): the leader
  // gathers and factorises each panel, the others copy it, each member
  // updates its rows.
  template <class T>
  void run_group(const std::vector<rt::ExecContext*>& group) const {
    const std::int64_t n = n_, r = r_, nb = p_.panel;
    std::vector<T*> A(group.size()), panels(group.size());
    for_members(group, [&](std::int64_t q) {
      const rt::ExecContext* ctx = group[size_t(q)];
      A[size_t(q)] = static_cast<T*>(ctx->slots[size_t(writes_[0])]);
      panels[size_t(q)] = static_cast<T*>(ctx->slots[size_t(writes_[1])]);
      const T* x = static_cast<const T*>(ctx->slots[size_t(in_)]);
      std::copy(x, x + r * n, A[size_t(q)]);
    });
    auto mine_rows = [&](std::int64_t q) { return std::max<std::int64_t>(0, std::min(r, n - q * r)); };
    for (std::int64_t c0 = 0; c0 < n; c0 += nb) {
      const std::int64_t w = std::min(nb, n - c0), active = n - c0;
      T* panel = panels[0];
      int info = 0;
      {
        rt::ComputeSlot leader;
        for (std::int64_t g = c0; g < n; ++g)
          for (std::int64_t j = 0; j < w; ++j) panel[j * active + (g - c0)] = A[size_t(g / r)][(g % r) * n + c0 + j];
        const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
        Lapack::potrf('L', int(w), panel, int(active), info);
        if (info == 0 && active > w)  // L21 L11^H = A21
          Lapack::trsm<T>('R', 'L', 'C', 'N', int(active - w), int(w), panel, int(active), panel + w, int(active));
      }
      if (info != 0) {  // not positive definite: NaN everywhere
        for_members(group, [&](std::int64_t q) { fill_nan(A[size_t(q)], mine_rows(q) * n); });
        return;
      }
      // Every copy before any update: a complex update conjugates its panel in place.
      for_members(group, [&](std::int64_t q) {
        if (q > 0) std::copy(panel, panel + active * w, panels[size_t(q)]);
      });
      std::vector<std::int64_t> below0(group.size()), end(group.size());
      for_members(group, [&](std::int64_t q) {
        end[size_t(q)] = mine_rows(q);
        below0[size_t(q)] = panel_columns(A[size_t(q)], panels[size_t(q)], q * r, mine_rows(q), c0, w);
      });
      for_row_chunks(group, below0, end, [&](std::int64_t q, std::int64_t i0, std::int64_t i1) {
        T* panel_q = panels[size_t(q)];
        trailing(A[size_t(q)], panel_q, q * r, c0, w, i0, i1, panel_q + n * nb + i0 * nb);  // this chunk's rows of [r, nb]
      });
    }
    for_members(group, [&](std::int64_t q) {
      for (std::int64_t i = 0; i < mine_rows(q); ++i) std::fill(A[size_t(q)] + i * n + (q * r + i) + 1, A[size_t(q)] + (i + 1) * n, T(0));
    });
  }

  // A device's rows (A, `mine_rows` of them from global row off) at panel
  // step c0 of width w: L's panel columns from its copy of the panel; returns
  // the local rows [below0, mine_rows) the trailing update then changes (none:
  // below0 = mine_rows), its panel copy conjugated for a complex update.
  template <class T>
  std::int64_t panel_columns(T* A, T* panel, std::int64_t off, std::int64_t mine_rows, std::int64_t c0, std::int64_t w) const {
    const std::int64_t n = n_, active = n - c0;
    std::int64_t below0 = mine_rows;
    for (std::int64_t i = 0; i < mine_rows; ++i) {
      const std::int64_t rel = off + i - c0;
      if (rel < 0) continue;
      for (std::int64_t j = 0; j < w; ++j) A[i * n + c0 + j] = panel[j * active + rel];
      if (rel >= w && below0 == mine_rows) below0 = i;
    }
    if (c0 + w == n) return mine_rows;
    // Complex: C -= L_mine L21^H. Column-major C^T -= conj(L21) L_mine^T;
    // with the panel (this device's copy) conjugated, that is P21 P_mine^H.
    if constexpr (is_cx<T>)
      if (below0 < mine_rows) conjugate(panel, active * w);
    return below0;
  }
  // The trailing update of local rows [i0, i1) (below the panel): their
  // columns from c0 + w minus L_rows L21^T (tessel's GEMM through scratch
  // [i1 - i0, nb]; complex: the library's, taking its turn).
  template <class T>
  void trailing(T* A, const T* panel, std::int64_t off, std::int64_t c0, std::int64_t w, std::int64_t i0, std::int64_t i1,
                T* scratch) const {
    const std::int64_t n = n_, nb = p_.panel, c1 = c0 + w, active = n - c0;
    const std::int64_t rows = i1 - i0, rel0 = off + i0 - c0, cols = n - c1;
    T* C = A + i0 * n + c1;
    if constexpr (is_cx<T>) {
      const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
      Lapack::gemm_sub<T>('N', 'C', int(cols), int(rows), int(w), panel + w, int(active), panel + rel0, int(active), C,
                          int(n));
    } else {
      subtract_product(C, n, rows, cols, w, panel + rel0, 1, active, panel + w, active, 1, nb, scratch);  // L_mine L21^T
    }
  }

};

}  // namespace

std::unique_ptr<rt::Thunk> distributed_lu_routine(const Node& n, const std::vector<int>& reads, const std::vector<int>& writes) {
  return std::make_unique<DistributedLuThunk>(n, reads.at(0), writes);
}
std::size_t distributed_lu_workspace(const Node& n) { return DistributedLuThunk::workspace_bytes(n); }
std::unique_ptr<rt::Thunk> distributed_cholesky_routine(const Node& n, const std::vector<int>& reads,
                                                        const std::vector<int>& writes) {
  return std::make_unique<DistributedCholeskyThunk>(n, reads.at(0), writes);
}
std::size_t distributed_cholesky_workspace(const Node& n) { return DistributedCholeskyThunk::workspace_bytes(n); }

}  // namespace tessel::codegen
