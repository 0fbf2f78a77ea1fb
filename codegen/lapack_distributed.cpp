// The distributed LU and Cholesky thunks (distributed_lu_routine and
// distributed_cholesky_routine in codegen/lapack.hpp; what they share with the
// distributed triangular solve: codegen/row_blocked.hpp).
#include "codegen/lapack.hpp"

#include <tuple>

#include "codegen/row_blocked.hpp"

namespace tessel::codegen {

namespace {

using namespace lapack_internal;

// distributed_lu: one device's rows of a matrix split by rows over a group
// of devices, factorised in place in its output by ScaLAPACK's blocked
// right-looking algorithm, with partial pivoting over the whole column (the
// pivots the one-device lu's getrf chooses, up to rounding).
//
// In shared memory (one process) every member's rows are at hand, so the
// group's first member (the leader) factorises the panel in a packed copy of
// its columns (LAPACK's getrf2 recursion over row pointers: a column at a
// time below 8 columns, a GEMM update between halves above), writes it back
// and swaps the pivot rows' other columns (factor_packed), and solves
// U12 = L11^-1 A12 in the top rows (trsm), while the others wait; then each
// member takes the pivots and
// subtracts L21 U12 from its rows below the panel (tessel's GEMM), reading
// U12 from the top rows' owner in place. One meeting per panel step (and
// one at the end), and a device holds nothing beside its rows in and out
// but the leader's panel copy (the GEMM subtracts in place). A panel never crosses a device's rows, so
// its top rows lie in one.
//
// Across processes each panel step meets the group three times: every
// member factorises the gathered panel itself (getrf; the same bits on
// each), gathers the pivot rows into U and solves U12, then copies the old
// top rows its moved rows receive; then each device updates its own rows.
// Workspace there: the panel and the pivot rows.
class DistributedLuThunk final : public RowBlockedThunk<DistributedLuThunk> {
 public:
  DistributedLuThunk(const Node& n, int in, std::vector<int> writes) : RowBlockedThunk(n, in, std::move(writes)) {}
  // None in shared memory (tessel's GEMM subtracts in place); across
  // processes the panel [m, nb] and the pivot rows [nb, n].
  static std::size_t workspace_bytes(const Node& n) {
    const auto& p = n.attr<attr::RowBlocked>();
    const Shape& s = n.in[0]->shape();
    const std::int64_t cols = s[1], nb = p.panel;
    if (all_local(p)) return 0;
    return element_bytes(n) * std::size_t(p.rows * nb + nb * cols);
  }
  template <class T>
  void run_typed(rt::ExecContext& ctx) const {
    const auto [group, q] = my_group(ctx);
    const bool shared = ctx.comm->shares_memory(*group);
    TESSEL_CHECK_INTERNAL(shared || !all_local_, text_, ": a group in one process that does not share memory");
    if (shared) run_shared<T>(ctx, *group, q);
    else run_across<T>(ctx, *group, q);
  }

  // A lockstep run (run_all): the same steps as run_shared, phase by phase.
  template <class T>
  void run_group(const std::vector<rt::ExecContext*>& group) const {
    const std::int64_t m = p_.rows, n = n_, r = r_, nb = p_.panel, kmax = std::min(m, n);
    std::vector<Mine<T>> M(group.size());
    for_members(group, [&](std::int64_t q) { M[size_t(q)] = start<T>(*group[size_t(q)]); });
    Rows<T> rows{std::vector<T*>(static_cast<std::size_t>(m)), n, 0, n};
    for (std::int64_t g = 0; g < m; ++g) rows.at[size_t(g)] = M[size_t(g / r)].A + (g % r) * n;
    std::vector<std::int64_t> ipiv(static_cast<std::size_t>(nb)), below0(group.size()), below1(group.size());
    std::vector<T> packed;
    for (std::int64_t c0 = 0; c0 < kmax;) {
      const std::int64_t w = panel_columns(c0), c1 = c0 + w;
      {
        rt::ComputeSlot leader;
        factor_packed(rows, c0, w, ipiv.data(), packed);
        solve_u12(rows[c0] + c0, n, rows[c0] + c1, n, w, c1);
      }
      for_members(group, [&](std::int64_t q) {
        take_pivots(M[size_t(q)], c0, w, ipiv.data());
        std::tie(below0[size_t(q)], below1[size_t(q)]) = rows_below(q, c1);
      });
      if (n > c1)
        for_row_chunks(group, below0, below1, [&](std::int64_t q, std::int64_t i0, std::int64_t i1) {
          T* own = M[size_t(q)].A + i0 * n;
          update(own + c1, n, own + c0, n, rows[c0] + c1, n, i1 - i0, n - c1, w);
        });
      c0 = c1;
    }
  }

 private:
  template <class T>
  struct Mine {
    T* A = nullptr;
    std::int32_t* piv = nullptr;
    std::int32_t* perm = nullptr;
    T* work = nullptr;  // the workspace (across processes only)
  };
  // A member's buffers, its rows copied into its result and the permutation
  // started (the caller holds a compute slot).
  template <class T>
  Mine<T> start(const rt::ExecContext& ctx) const {
    Mine<T> mb{static_cast<T*>(ctx.slots[size_t(writes_[0])]), static_cast<std::int32_t*>(ctx.slots[size_t(writes_[1])]),
               static_cast<std::int32_t*>(ctx.slots[size_t(writes_[2])]),
               writes_.size() > 3 ? static_cast<T*>(ctx.slots[size_t(writes_[3])]) : nullptr};
    const T* x = static_cast<const T*>(ctx.slots[size_t(in_)]);
    std::copy(x, x + r_ * n_, mb.A);
    for (std::int64_t i = 0; i < p_.rows; ++i) mb.perm[i] = std::int32_t(i);
    return mb;
  }

  // The panel step at column c0 takes nb columns, fewer at the end and where
  // a device's rows end (so that its top rows lie in one device).
  std::int64_t panel_columns(std::int64_t c0) const {
    return std::min({p_.panel, std::min(p_.rows, n_) - c0, r_ - c0 % r_});
  }
  // A member's local rows below the panel ending at column c1: [i0, i1).
  std::pair<std::int64_t, std::int64_t> rows_below(std::int64_t q, std::int64_t c1) const {
    const std::int64_t off = q * r_;
    return {std::clamp<std::int64_t>(c1 - off, 0, r_), std::clamp<std::int64_t>(p_.rows - off, 0, r_)};
  }

  // In shared memory on the devices' own threads: one meeting per panel step.
  template <class T>
  void run_shared(rt::ExecContext& ctx, const std::vector<std::int64_t>& group, std::int64_t q) const {
    const std::int64_t m = p_.rows, n = n_, r = r_, kmax = std::min(m, n);
    const Mine<T> mb = [&] {
      rt::ComputeSlot slot;
      return start<T>(ctx);
    }();
    std::vector<std::int64_t> ipiv(static_cast<std::size_t>(p_.panel));
    struct Published {
      T* A;
      const std::int64_t* ipiv;
    } mine{mb.A, ipiv.data()};
    auto of = [](const void* p) { return static_cast<const Published*>(p); };
    Rows<T> rows{{}, n, 0, n};  // every member's rows (the leader's, from the first meeting on)
    std::vector<T> packed;      // the leader's copy of the panel
    for (std::int64_t c0 = 0; c0 < kmax;) {
      const std::int64_t w = panel_columns(c0), c1 = c0 + w;
      const std::vector<const void*> peers = ctx.comm->exchange(ctx.position, group, &mine, sizeof mine);
      if (q == 0) {
        rt::ComputeSlot slot;
        if (rows.at.empty())
          for (std::int64_t g = 0; g < m; ++g) rows.at.push_back(of(peers[size_t(g / r)])->A + (g % r) * n);
        factor_packed(rows, c0, w, ipiv.data(), packed);
        solve_u12(rows[c0] + c0, n, rows[c0] + c1, n, w, c1);
      }
      // What the members published lives until the release; the leader's
      // pivots and the top rows stay unchanged until the next meeting (the
      // last one after the loop).
      const std::int64_t* pivots = of(peers[0])->ipiv;
      const T* U12 = of(peers[size_t(c0 / r)])->A + (c0 % r) * n + c1;
      ctx.comm->release(ctx.position, group);
      rt::ComputeSlot slot;
      if (q != 0) std::copy(pivots, pivots + w, ipiv.data());
      take_pivots(mb, c0, w, ipiv.data());
      const auto [i0, i1] = rows_below(q, c1);
      if (i1 > i0 && n > c1) update(mb.A + i0 * n + c1, n, mb.A + i0 * n + c0, n, U12, n, i1 - i0, n - c1, w);
      c0 = c1;
    }
    // One last meeting: no member leaves (its rows free to be written over,
    // its pivots gone) while a peer still reads them.
    ctx.comm->exchange(ctx.position, group, &mine, sizeof mine);
    ctx.comm->release(ctx.position, group);
  }

  // The rows a panel is factorised in: rows[g] + c is element (g, c) of
  // global row g (g >= the panel's first column), rows ld apart within a
  // device's rows; a pivot swaps columns [lo, hi) of two rows. In place in
  // the members' rows: ld n, whole rows. Across processes, a gathered copy of
  // the panel's columns: ld w, the panel's columns.
  template <class T>
  struct Rows {
    std::vector<T*> at;
    std::int64_t ld = 0, lo = 0, hi = 0;
    T* operator[](std::int64_t g) const { return at[size_t(g)]; }
  };

  // U12 [w, n - c1] (row stride ldu) = L11^-1 U12, L11 the unit lower
  // [w, w] at l11 (row stride ldl): X L11^T = U12^T, column-major.
  template <class T>
  void solve_u12(const T* l11, std::int64_t ldl, T* u12, std::int64_t ldu, std::int64_t w, std::int64_t c1) const {
    if (n_ <= c1) return;
    const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
    Lapack::trsm<T>('R', 'U', 'N', 'U', int(n_ - c1), int(w), l11, int(ldl), u12, int(ldu));
  }
  // The panel step at c0 on the members' rows in place (ld n): its columns
  // of rows c0 .. m factorised in a packed copy (row stride w) and written
  // back, then the pivots' swaps applied to the rows' other columns in
  // order. The same operations on the same values as factorising in place,
  // where a column at a time touched one cache line per row, n elements
  // apart (a fifth of a 4096^2 solve's time on 8 devices).
  template <class T>
  void factor_packed(const Rows<T>& rows, std::int64_t c0, std::int64_t w, std::int64_t* ipiv, std::vector<T>& buf) const {
    const std::int64_t m = p_.rows, n = n_, c1 = c0 + w;
    buf.resize(static_cast<std::size_t>((m - c0) * w));
    Rows<T> packed{std::vector<T*>(static_cast<std::size_t>(m)), w, c0, c1};
    for (std::int64_t g = c0; g < m; ++g) {
      T* row = buf.data() + (g - c0) * w;
      packed.at[size_t(g)] = row - c0;
      std::copy(rows[g] + c0, rows[g] + c1, row);
    }
    factor(packed, c0, w, ipiv);
    for (std::int64_t g = c0; g < m; ++g) std::copy(packed[g] + c0, packed[g] + c1, rows[g] + c0);
    for (std::int64_t l = 0; l < w; ++l) {
      // factor_columns swaps exactly where the pivot is another row.
      const std::int64_t j = c0 + l, p = ipiv[l];
      if (p == j) continue;
      std::swap_ranges(rows[p], rows[p] + c0, rows[j]);
      std::swap_ranges(rows[p] + c1, rows[p] + n, rows[j] + c1);
    }
  }
  // getrf2's recursion on columns [j0, j0 + w) of rows j0 .. m: the left
  // half, its U12 (a unit lower solve in the top rows) and the rows below
  // less L21 U12 (one device's rows at a time), then the right half.
  static constexpr std::int64_t kLeafColumns = 8;
  template <class T>
  void factor(const Rows<T>& rows, std::int64_t j0, std::int64_t w, std::int64_t* ipiv) const {
    if (w <= kLeafColumns) return factor_columns(rows, j0, w, ipiv);
    const std::int64_t m = p_.rows, ld = rows.ld, n1 = w / 2, j1 = j0 + n1, j2 = j0 + w;
    factor(rows, j0, n1, ipiv);
    T* top = rows[j0];
    for (std::int64_t i = 1; i < n1; ++i)
      for (std::int64_t k = 0; k < i; ++k) {
        const T l = top[i * ld + j0 + k];
        for (std::int64_t c = j1; c < j2; ++c) top[i * ld + c] -= l * top[k * ld + c];
      }
    for (std::int64_t g0 = j1; g0 < m;) {
      const std::int64_t g1 = std::min(m, (g0 / r_ + 1) * r_);
      update(rows[g0] + j1, ld, rows[g0] + j0, ld, top + j1, ld, g1 - g0, j2 - j1, n1);
      g0 = g1;
    }
    factor(rows, j1, w - n1, ipiv + n1);
  }
  // A column at a time (getrf2's one-column case, then the rank-1 update of
  // the columns to j0 + w): the pivot is the first largest |re| + |im|
  // (LAPACK's i?amax), its row swapped with row j; a zero pivot leaves its
  // column unscaled (info > 0 in LAPACK: the factors stand). One pass over
  // the rows per column scales it, updates the rest and finds the next pivot.
  template <class T>
  void factor_columns(const Rows<T>& rows, std::int64_t j0, std::int64_t w, std::int64_t* ipiv) const {
    using R = real_of<T>;
    const std::int64_t m = p_.rows, j2 = j0 + w;
    auto abs1 = [](const T& v) {
      if constexpr (is_cx<T>) return R(std::abs(v.real()) + std::abs(v.imag()));
      else return std::abs(v);
    };
    std::int64_t p = j0;
    R best = abs1(rows[j0][j0]);
    for (std::int64_t g = j0 + 1; g < m; ++g)
      if (abs1(rows[g][j0]) > best) best = abs1(rows[g][j0]), p = g;
    for (std::int64_t j = j0; j < j2; ++j) {
      ipiv[j - j0] = p;
      if (p != j && rows[p][j] != T(0)) std::swap_ranges(rows[p] + rows.lo, rows[p] + rows.hi, rows[j] + rows.lo);
      const T* top = rows[j];
      const T pivot = top[j];
      const bool scale = pivot != T(0), reciprocal = std::abs(pivot) >= std::numeric_limits<R>::min();
      const T inverse = reciprocal ? T(1) / pivot : T(1);
      const bool next = j + 1 < j2;
      p = j + 1;
      for (std::int64_t g = j + 1; g < m; ++g) {
        T* row = rows[g];
        T l = row[j];
        if (scale) l = reciprocal ? l * inverse : l / pivot;
        row[j] = l;
        for (std::int64_t c = j + 1; c < j2; ++c) row[c] -= l * top[c];
        if (next && (g == j + 1 || abs1(row[j + 1]) > best)) best = abs1(row[j + 1]), p = g;
      }
    }
  }
  // A member's pivots and permutation after a panel step.
  template <class T>
  void take_pivots(const Mine<T>& mb, std::int64_t c0, std::int64_t w, const std::int64_t* ipiv) const {
    for (std::int64_t l = 0; l < w; ++l) {
      mb.piv[c0 + l] = std::int32_t(ipiv[l]);
      std::swap(mb.perm[c0 + l], mb.perm[ipiv[l]]);
    }
  }

  // Across processes: every member factorises a gathered copy of the panel.
  template <class T>
  void run_across(rt::ExecContext& ctx, const std::vector<std::int64_t>& group, std::int64_t q) const {
    const std::int64_t m = p_.rows, n = n_, r = r_, nb = p_.panel, kmax = std::min(m, n), off = q * r;
    const Mine<T> mb = [&] {
      rt::ComputeSlot slot;
      return start<T>(ctx);
    }();
    T* A = mb.A;
    T* panel = mb.work;  // the panel's rows c0 .. m, row stride w
    T* U = panel + m * nb;  // the pivot rows [w, n]
    std::vector<T> send;  // the rows (or panel columns) this device publishes
    std::vector<std::int64_t> ipiv(static_cast<std::size_t>(nb)), pperm;
    for (std::int64_t c0 = 0; c0 < kmax;) {
      const std::int64_t w = panel_columns(c0), c1 = c0 + w, active = m - c0;
      // 1. The panel's columns of every member's rows, row-major.
      gather_panel<T>(ctx, group, false, nullptr, 0, [](const void*) -> const T* { return nullptr; }, A, r, n, c0, w, m, true,
                      send, panel, true);
      Rows<T> rows{std::vector<T*>(static_cast<std::size_t>(m)), w, c0, c1};
      for (std::int64_t g = c0; g < m; ++g) rows.at[size_t(g)] = panel + (g - c0) * w - c0;
      {
        rt::ComputeSlot slot;
        factor(rows, c0, w, ipiv.data());
      }
      pperm.resize(std::size_t(active));  // new active row i is old active row pperm[i]
      for (std::int64_t i = 0; i < active; ++i) pperm[size_t(i)] = i;
      for (std::int64_t l = 0; l < w; ++l) std::swap(pperm[size_t(l)], pperm[size_t(ipiv[size_t(l)] - c0)]);
      // 2. The pivot rows (global rows c0 + pperm[0..w), the new top rows)
      // into U: each member publishes the listed rows it owns, in list order.
      auto pivot_row = [&](std::int64_t l) { return c0 + pperm[size_t(l)]; };
      auto old_top = [&](std::int64_t l) { return c0 + l; };
      auto publish = [&](auto&& listed) {
        send.resize(std::size_t(w * n));
        std::int64_t k = 0;
        for (std::int64_t l = 0; l < w; ++l)
          if (listed(l) / r == q) std::copy(A + (listed(l) - off) * n, A + (listed(l) - off + 1) * n, send.data() + (k++) * n);
        return ctx.comm->exchange(ctx.position, group, send.data(), send.size() * sizeof(T));
      };
      auto row_in = [&](const std::vector<const void*>& at, auto&& listed, std::int64_t l) {
        std::int64_t place = 0;  // where row l sits among its owner's published rows
        for (std::int64_t k = 0; k < l; ++k) place += listed(k) / r == listed(l) / r;
        return static_cast<const T*>(at[size_t(listed(l) / r)]) + place * n;
      };
      auto peers = publish(pivot_row);
      {
        rt::ComputeSlot slot;
        for (std::int64_t l = 0; l < w; ++l) std::copy(row_in(peers, pivot_row, l), row_in(peers, pivot_row, l) + n, U + l * n);
      }
      ctx.comm->release(ctx.position, group);
      {
        rt::ComputeSlot slot;
        solve_u12(panel, w, U + c1, n, w, c1);
      }
      // 3. The old top rows (c0 + 0..w) into the moved rows below, before
      // the top rows' owners overwrite them.
      peers = publish(old_top);
      {
        rt::ComputeSlot slot;
        for (std::int64_t i = 0; i < r; ++i) {
          const std::int64_t rel = off + i - c0;
          if (off + i < m && rel >= w && rel < active && pperm[size_t(rel)] != rel) {
            const T* from = row_in(peers, old_top, pperm[size_t(rel)]);
            std::copy(from, from + n, A + i * n);
          }
        }
      }
      ctx.comm->release(ctx.position, group);
      // 4. This device's rows: each top row takes its pivot row and U12 (from
      // U), each active row its panel columns; then the pivots, and the rows
      // below the panel less L21 U12.
      rt::ComputeSlot slot;
      for (std::int64_t i = 0; i < r; ++i) {
        const std::int64_t rel = off + i - c0;
        if (off + i >= m || rel < 0 || rel >= active) continue;
        T* row = A + i * n;
        if (rel < w) {
          std::copy(U + rel * n, U + rel * n + c0, row);
          std::copy(U + rel * n + c1, U + (rel + 1) * n, row + c1);
        }
        std::copy(panel + rel * w, panel + (rel + 1) * w, row + c0);
      }
      take_pivots(mb, c0, w, ipiv.data());
      const auto [i0, i1] = rows_below(q, c1);
      if (i1 > i0 && n > c1) update(A + i0 * n + c1, n, panel + (off + i0 - c0) * w, w, U + c1, n, i1 - i0, n - c1, w);
      c0 = c1;
    }
  }

  // C [rows, cols] -= L [rows, k] x U12 [k, cols], each of its own row
  // stride: float and double by tessel's own GEMM on this device's thread,
  // subtracting in place, with no lock;
  // complex by the library's gemm, taking its turn. The bits depend on
  // neither the strides nor how rows are grouped.
  template <class T>
  void update(T* C, std::int64_t ldc, const T* L, std::int64_t ldl, const T* U12, std::int64_t ldu, std::int64_t rows,
              std::int64_t cols, std::int64_t k) const {
    if constexpr (is_cx<T>) {
      const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
      // C^T -= U12^T L^T, column-major
      Lapack::gemm_sub<T>('N', 'N', int(cols), int(rows), int(k), U12, int(ldu), L, int(ldl), C, int(ldc));
    } else {
      subtract_product(C, ldc, rows, cols, k, L, ldl, 1, U12, ldu, 1);
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
// single-matrix path. Workspace: the panel.
class DistributedCholeskyThunk final : public RowBlockedThunk<DistributedCholeskyThunk> {
 public:
  DistributedCholeskyThunk(const Node& n, int in, std::vector<int> writes) : RowBlockedThunk(n, in, std::move(writes)) {}
  static std::size_t workspace_bytes(const Node& n) {
    const auto& p = n.attr<attr::RowBlocked>();
    const Shape& s = n.in[0]->shape();
    return element_bytes(n) * std::size_t(s[1] * p.panel);
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
      if (below0 < mine_rows) trailing(A, panel, off, c0, w, below0, mine_rows);
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
        for (std::int64_t g = c0; g < n; g = (g / r + 1) * r)  // each member's rows, by tiles
          transpose(A[size_t(g / r)] + (g % r) * n + c0, std::min(n, (g / r + 1) * r) - g, w, n, panel + (g - c0), active);
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
        trailing(A[size_t(q)], panel_q, q * r, c0, w, i0, i1);
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
    const std::int64_t first = std::clamp<std::int64_t>(c0 - off, 0, mine_rows);  // the first row at or below c0
    if (first < mine_rows) transpose(panel + (off + first - c0), w, mine_rows - first, active, A + first * n + c0, n);
    for (std::int64_t i = first; i < mine_rows; ++i)
      if (off + i - c0 >= w) {
        below0 = i;
        break;
      }
    if (c0 + w == n) return mine_rows;
    // Complex: C -= L_mine L21^H. Column-major C^T -= conj(L21) L_mine^T;
    // with the panel (this device's copy) conjugated, that is P21 P_mine^H.
    if constexpr (is_cx<T>)
      if (below0 < mine_rows) conjugate(panel, active * w);
    return below0;
  }
  // The trailing update of local rows [i0, i1) (below the panel): their
  // columns from c0 + w minus L_rows L21^T (tessel's GEMM, in place;
  // complex: the library's, taking its turn).
  template <class T>
  void trailing(T* A, const T* panel, std::int64_t off, std::int64_t c0, std::int64_t w, std::int64_t i0,
                std::int64_t i1) const {
    const std::int64_t n = n_, c1 = c0 + w, active = n - c0;
    const std::int64_t rows = i1 - i0, rel0 = off + i0 - c0, cols = n - c1;
    T* C = A + i0 * n + c1;
    if constexpr (is_cx<T>) {
      const std::lock_guard<std::mutex> one_at_a_time(blas_lock());
      Lapack::gemm_sub<T>('N', 'C', int(cols), int(rows), int(w), panel + w, int(active), panel + rel0, int(active), C,
                          int(n));
    } else {
      subtract_product(C, n, rows, cols, w, panel + rel0, 1, active, panel + w, active, 1);  // L_mine L21^T
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
