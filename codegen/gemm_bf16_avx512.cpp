// The bfloat16 matrix-product kernel for AVX512_BF16 (gemm_bf16.hpp), compiled
// with -mavx512f -mavx512vl -mavx512bw -mavx512bf16. Like gemm_kernel.inc,
// everything but the entry point is in an anonymous namespace and uses no
// out-of-line library templates: code compiled for AVX-512 must not be merged
// by the linker into callers that run on other machines.
//
// Packed operands hold bfloat16 pairs along k as 32-bit words, low half the
// even k: a B sliver is kp x NR words (word [q][j] = B[2q][j], B[2q+1][j]), an
// A sliver kp x MR words (word [q][i] = A[i][2q], A[i][2q+1]), kp = ceil(kc/2).
// The micro-kernel's step over one pair: 2 B vectors, MR broadcasts (GCC emits
// vpbroadcastd from memory: load ports only), 2*MR vdpbf16ps into an MR x NR
// tile of float32 accumulators (24 of 32 zmm).
//
// Blocks: KC 512 (a B sliver, 256 x 32 words, is 32 KiB: in L1), MC 240 (an A
// block 240 KiB of a 2 MiB L2), NC 2048 (a B panel 2 MiB, in L3).

#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <ctime>

#include "codegen/gemm_bf16.hpp"

namespace tessel::codegen::gemm {
namespace {

using i64 = std::int64_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;

constexpr int MR = 12;     // tile rows
constexpr int NR = 32;     // tile columns: two zmm of 16 floats
constexpr i64 KC = 512;    // depth of a packed block (even: pairs never straddle blocks)
constexpr i64 MC = 240;    // rows of a packed A block, a multiple of MR
constexpr i64 NC = 2048;   // columns of a task's packed B panel, at most

inline i64 min_i(i64 a, i64 b) { return a < b ? a : b; }
inline i64 div_up(i64 a, i64 b) { return (a + b - 1) / b; }

// The pair (x[0], x[ks]) as one word; x[ks] is read only when `two`.
inline u32 pair(const u16* x, i64 ks, bool two) { return u32(x[0]) | (two ? u32(x[ks]) << 16 : 0u); }

// 16 pairs (lo[j], hi[j]) for the j set in `mask` (zeros elsewhere); hi may be null (zeros).
// (The maskz forms: GCC 12's unmasked ones warn -Wmaybe-uninitialized from its own headers.)
inline __m512i pairs16(const u16* lo, const u16* hi, __mmask16 mask) {
  const __m512i l = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, lo));
  if (!hi) return l;
  const __m512i h = _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, hi));
  return _mm512_or_si512(l, _mm512_maskz_slli_epi32(mask, h, 16));
}

inline __mmask16 first_lanes(i64 n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// One MR x NR tile: C (ldc apart) = or += A sliver . B sliver over kp pairs.
__attribute__((always_inline)) inline void micro_kernel(i64 kp, const u32* __restrict ap, const u32* __restrict bp,
                                                        float* __restrict c, i64 ldc, bool accumulate) {
  __m512 acc[MR][2];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {  // the tile is read or written after the loop: fetch it now
    __builtin_prefetch(c + i * ldc, 1);
    __builtin_prefetch(c + i * ldc + 16, 1);
  }
#pragma GCC unroll 2
  for (i64 q = 0; q < kp; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(bp + q * NR);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(bp + q * NR + 16);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(ap[q * MR + i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, b1);
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      float* dst = c + i * ldc + h * 16;
      _mm512_storeu_ps(dst, accumulate ? _mm512_add_ps(acc[i][h], _mm512_loadu_ps(dst)) : acc[i][h]);
    }
}

// A tile cut by C's edge: computed whole into scratch, then its mr x nr part written or added.
void edge_kernel(i64 kp, const u32* ap, const u32* bp, float* c, i64 ldc, bool accumulate, i64 mr, i64 nr) {
  alignas(64) float tile[MR * NR];
  micro_kernel(kp, ap, bp, tile, NR, false);
  for (i64 i = 0; i < mr; ++i)
    for (i64 j = 0; j < nr; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * NR + j] : tile[i * NR + j];
}

// A[rows, 0:kc] (element (i, p) at a[i*rs + p*cs]) into MR-row slivers of pairs, zero-padded to MR rows.
void pack_a(const u16* a, i64 rs, i64 cs, i64 rows, i64 kc, u32* out) {
  const i64 kp = div_up(kc, 2);
  for (i64 r0 = 0; r0 < rows; r0 += MR) {
    const i64 mr = min_i(MR, rows - r0);
    u32* dst = out + r0 * kp;
    if (rs == 1) {
      // Column-major A (a transposed operand): the rows of k 2q and 2q+1 are contiguous.
      const __mmask16 mask = first_lanes(mr);
      for (i64 q = 0; q < kp; ++q) {
        const u16* lo = a + r0 + 2 * q * cs;
        const __m512i v = pairs16(lo, 2 * q + 1 < kc ? lo + cs : nullptr, mask);
        _mm512_mask_storeu_epi32(dst + q * MR, first_lanes(MR), v);  // lanes past mr are zero
      }
    } else {
      // Row by row: with cs == 1 a pair is one 32-bit load.
      for (i64 i = 0; i < MR; ++i) {
        const u16* row = a + (r0 + i) * rs;
        for (i64 q = 0; q < kp; ++q)
          dst[q * MR + i] = i < mr ? pair(row + 2 * q * cs, cs, 2 * q + 1 < kc) : 0u;
      }
    }
  }
}

// B[0:kc, cols] (element (p, j) at b[p*rs + j*cs]) into NR-column slivers of pairs, zero-padded to NR columns
// and to `height` pairs (at least kc/2, rounded up) per sliver.
void pack_b(const u16* b, i64 rs, i64 cs, i64 kc, i64 cols, u32* out, i64 height) {
  const i64 kp = div_up(kc, 2);
  for (i64 c0 = 0; c0 < cols && height > kp; c0 += NR)
    for (i64 q = kp; q < height; ++q) {
      _mm512_store_si512(out + c0 * height + q * NR, _mm512_setzero_si512());
      _mm512_store_si512(out + c0 * height + q * NR + 16, _mm512_setzero_si512());
    }
  if (cs == 1) {
    // Row-major B: two rows at a time, read in order (see gemm_kernel.inc's pack_b), 16 columns per vector.
    for (i64 q = 0; q < kp; ++q) {
      const u16* lo = b + 2 * q * rs;
      const u16* hi = 2 * q + 1 < kc ? lo + rs : nullptr;
      for (i64 j = 0; j < cols; j += 16) {
        const i64 sliver = j / NR, h = j % NR;
        _mm512_store_si512(out + sliver * NR * height + q * NR + h,
                           pairs16(lo + j, hi ? hi + j : nullptr, first_lanes(cols - j)));
      }
      if (cols % NR && cols % NR <= 16)  // the last sliver's second half: zeros
        _mm512_store_si512(out + (cols / NR) * NR * height + q * NR + 16, _mm512_setzero_si512());
    }
  } else {
    // Transposed or strided B: sliver by sliver, column by column (with rs == 1 a pair is one 32-bit load).
    for (i64 c0 = 0; c0 < cols; c0 += NR) {
      u32* dst = out + c0 * height;
      const i64 nr = min_i(NR, cols - c0);
      for (i64 j = 0; j < NR; ++j) {
        const u16* col = b + (c0 + j) * cs;
        for (i64 q = 0; q < kp; ++q) dst[q * NR + j] = j < nr ? pair(col + 2 * q * rs, rs, 2 * q + 1 < kc) : 0u;
      }
    }
  }
}

#include "codegen/gemm_blocking.inc"

// A task's corners: A's first row, B's first column and C's first element
// for C[r0:r0+rows, c0:c0+cols] of batch element bi. With k = 0 it writes
// C's zeros itself and gives no A (the task is done).
struct Task {
  const u16* a;
  const u16* b;
  float* c;
};
Task task(const OperandsBf16& op, i64 bi, i64 r0, i64 rows, i64 c0, i64 cols) {
  float* c = op.c + bi * op.m * op.n + r0 * op.n + c0;
  if (op.k == 0) {
    for (i64 i = 0; i < rows; ++i)
      for (i64 j = 0; j < cols; ++j) c[i * op.n + j] = 0.0f;
    return {nullptr, nullptr, c};
  }
  return {op.a + bi * op.a_bs + r0 * op.a_rs, op.b + bi * op.b_bs + c0 * op.b_cs, c};
}

// One task: C[r0:r0+rows, c0:c0+cols] of batch element bi.
void run_task(const OperandsBf16& op, i64 bi, i64 r0, i64 rows, i64 c0, i64 cols) {
  const Task t = task(op, bi, r0, rows, c0, cols);
  if (!t.a) return;
  const u16 *a = t.a, *b = t.b;
  float* c = t.c;
  const i64 ldc = op.n;
  const i64 kc_max = min_i(KC, op.k), kp_max = div_up(kc_max, 2);
  const i64 mc = min_i(MC, div_up(rows, MR) * MR);
  u32* bp = static_cast<u32*>(PackBuffers::grow(tls_pack.b, tls_pack.b_bytes, sizeof(u32) * kp_max * div_up(cols, NR) * NR));
  u32* ap = static_cast<u32*>(PackBuffers::grow(tls_pack.a, tls_pack.a_bytes, sizeof(u32) * kp_max * mc));
  for (i64 k0 = 0; k0 < op.k; k0 += KC) {
    const i64 kc = min_i(KC, op.k - k0), kp = div_up(kc, 2);
    const bool accumulate = k0 > 0;
    pack_b(b + k0 * op.b_rs, op.b_rs, op.b_cs, kc, cols, bp, kp);
    for (i64 i0 = 0; i0 < rows; i0 += mc) {
      const i64 mb = min_i(mc, rows - i0);
      pack_a(a + i0 * op.a_rs + k0 * op.a_cs, op.a_rs, op.a_cs, mb, kc, ap);
      for (i64 j = 0; j < cols; j += NR) {
        const i64 nr = min_i(NR, cols - j);
        const u32* bs = bp + j * kp;
        for (i64 i = 0; i < mb; i += MR) {
          const i64 mr = min_i(MR, mb - i);
          float* ct = c + (i0 + i) * ldc + j;
          const u32* as = ap + i * kp;
          if (mr == MR && nr == NR) micro_kernel(kp, as, bs, ct, ldc, accumulate);
          else edge_kernel(kp, as, bs, ct, ldc, accumulate, mr, nr);
        }
      }
    }
  }
}

// ------------------------------------------------------------------ AMX

// The same product on AMX tiles (Sapphire and Emerald Rapids): a 32 x 32
// block of C in four 16 x 16 float32 tiles (tmm0-3), two A tiles of 16 rows x
// 16 pairs (tmm4-5) and two B tiles of 16 pairs x 16 columns (tmm6-7) per k
// step of 32; tdpbf16ps adds a tile's 16 x 16 x 32 products. B is packed as
// above (its slivers zero-padded to whole k steps); A into tiles of 16 rows,
// each row 16 pairs (64 bytes): the tile at [row block][k step], 1 KiB apart.
namespace amx {

constexpr i64 TM = 32;   // rows of a C block (two tiles)
constexpr i64 KS = 16;   // pairs per k step: a tile row's 64 bytes
constexpr i64 KC = 512;  // depth of a packed block (a multiple of 2 * KS)
constexpr i64 MC = 256;  // rows of a packed A block: 256 KiB at KC
static_assert(NR == 32, "a C block is two B tiles wide");

struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

void configure() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
}

// A[0:rows, 0:kc] (element (i, p) at a[i*rs + p*cs]) as tiles: the word of row
// i, pair q at ((i/16 * steps + q/16) * 16 + i%16) * 16 + q%16, zero past rows
// (up to `padded`, a multiple of 16) and past kc.
void pack_a(const u16* a, i64 rs, i64 cs, i64 rows, i64 padded, i64 kc, i64 steps, u32* out) {
  const i64 kp = div_up(kc, 2);
  for (i64 i = 0; i < padded; ++i) {
    u32* base = out + ((i / 16) * steps * 16 + i % 16) * 16;  // its row of step s at + s * 256
    const u16* row = a + i * rs;
    for (i64 s = 0; s < steps; ++s) {
      const i64 left = kc - 32 * s;  // elements of k from this step on
      if (i >= rows || left <= 0) _mm512_store_si512(base + s * 256, _mm512_setzero_si512());
      else if (cs == 1)  // 32 consecutive elements are the step's 16 pairs
        _mm512_store_si512(base + s * 256, left >= 32 ? _mm512_loadu_si512(row + 32 * s)
                                                      : _mm512_maskz_loadu_epi16(__mmask32((1u << left) - 1), row + 32 * s));
      else
        for (i64 w = 0; w < 16; ++w) {
          const i64 q = s * 16 + w;
          base[s * 256 + w] = q < kp ? pair(row + 2 * q * cs, cs, 2 * q + 1 < kc) : 0u;
        }
    }
  }
}

// One 32 x 32 block: C (ldc apart) = or += two A row tiles' steps x the B sliver's.
__attribute__((always_inline)) inline void block(i64 steps, const u32* a0, const u32* bs, float* c, i64 ldc,
                                                 bool accumulate) {
  const u32* a1 = a0 + steps * 256;
  const i64 cb = ldc * i64(sizeof(float));
  if (accumulate) {
    _tile_loadd(0, c, cb);
    _tile_loadd(1, c + 16, cb);
    _tile_loadd(2, c + 16 * ldc, cb);
    _tile_loadd(3, c + 16 * ldc + 16, cb);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (i64 s = 0; s < steps; ++s) {
    _tile_loadd(4, a0 + s * 256, 64);
    _tile_loadd(5, a1 + s * 256, 64);
    _tile_loadd(6, bs + s * KS * NR, NR * 4);
    _tile_loadd(7, bs + s * KS * NR + 16, NR * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, cb);
  _tile_stored(1, c + 16, cb);
  _tile_stored(2, c + 16 * ldc, cb);
  _tile_stored(3, c + 16 * ldc + 16, cb);
}

void run_task(const OperandsBf16& op, i64 bi, i64 r0, i64 rows, i64 c0, i64 cols) {
  const Task t = task(op, bi, r0, rows, c0, cols);
  if (!t.a) return;
  const u16 *a = t.a, *b = t.b;
  float* c = t.c;
  const i64 ldc = op.n;
  const i64 steps_max = div_up(div_up(min_i(KC, op.k), 2), KS);
  const i64 mc = min_i(MC, div_up(rows, TM) * TM);
  u32* bp = static_cast<u32*>(
      PackBuffers::grow(tls_pack.b, tls_pack.b_bytes, sizeof(u32) * steps_max * KS * div_up(cols, NR) * NR));
  u32* ap = static_cast<u32*>(PackBuffers::grow(tls_pack.a, tls_pack.a_bytes, sizeof(u32) * steps_max * KS * mc));
  alignas(64) float tile[TM * NR];
  configure();
  for (i64 k0 = 0; k0 < op.k; k0 += KC) {
    const i64 kc = min_i(KC, op.k - k0), steps = div_up(div_up(kc, 2), KS), height = steps * KS;
    const bool accumulate = k0 > 0;
    pack_b(b + k0 * op.b_rs, op.b_rs, op.b_cs, kc, cols, bp, height);
    for (i64 i0 = 0; i0 < rows; i0 += mc) {
      const i64 mb = min_i(mc, rows - i0);
      pack_a(a + i0 * op.a_rs + k0 * op.a_cs, op.a_rs, op.a_cs, mb, div_up(mb, TM) * TM, kc, steps, ap);
      for (i64 j = 0; j < cols; j += NR) {
        const i64 nr = min_i(NR, cols - j);
        const u32* bs = bp + j * height;
        for (i64 i = 0; i < mb; i += TM) {
          const i64 mr = min_i(TM, mb - i);
          float* ct = c + (i0 + i) * ldc + j;
          const u32* as = ap + (i / 16) * steps * 256;
          if (mr == TM && nr == NR) {
            block(steps, as, bs, ct, ldc, accumulate);
            continue;
          }
          // Cut by C's edge: the whole block into scratch, then its mr x nr part.
          block(steps, as, bs, tile, NR, false);
          for (i64 r = 0; r < mr; ++r)
            for (i64 q = 0; q < nr; ++q) ct[r * ldc + q] = accumulate ? ct[r * ldc + q] + tile[r * NR + q] : tile[r * NR + q];
        }
      }
    }
  }
  _tile_release();
}

}  // namespace amx

using TaskRunner = void (*)(const OperandsBf16&, i64 bi, i64 r0, i64 rows, i64 c0, i64 cols);

// C cut into tasks of whole mr x NR tiles, each run by `runner`.
void run_grid(const OperandsBf16& op, int threads, ParallelForFn parallel, void* parallel_ctx, i64 mr, i64 nc,
              TaskRunner runner) {
  if (op.batch == 0 || op.m == 0 || op.n == 0) return;
  struct Ctx {
    const OperandsBf16* op;
    Grid g;
    TaskRunner runner;
  } ctx{&op, make_grid(op.batch, op.m, op.n, threads, mr, NR, nc), runner};
  auto task = [](void* p, i64 lo, i64 hi) {
    const Ctx& c = *static_cast<const Ctx*>(p);
    const i64 per_batch = c.g.tm * c.g.tn;
    for (i64 t = lo; t < hi; ++t) {
      const i64 bi = t / per_batch, rest = t % per_batch, ti = rest / c.g.tn, tj = rest % c.g.tn;
      const i64 r0 = ti * c.g.rows, c0 = tj * c.g.cols;
      c.runner(*c.op, bi, r0, min_i(c.g.rows, c.op->m - r0), c0, min_i(c.g.cols, c.op->n - c0));
    }
  };
  const i64 tasks = op.batch * ctx.g.tm * ctx.g.tn;
  if (tasks == 1) task(&ctx, 0, 1);
  else parallel(parallel_ctx, tasks, task, &ctx);
}

}  // namespace

void matmul_bf16_avx512(const OperandsBf16& op, int threads, ParallelForFn parallel, void* parallel_ctx) {
  run_grid(op, threads, parallel, parallel_ctx, MR, NC, run_task);
}

void matmul_bf16_amx(const OperandsBf16& op, int threads, ParallelForFn parallel, void* parallel_ctx) {
  run_grid(op, threads, parallel, parallel_ctx, amx::TM, NC, amx::run_task);
}

bool amx_bf16_usable() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 0, a, b, c, d);
    if (!((d >> 22) & 1u) || !((d >> 24) & 1u)) return false;  // AMX-BF16, AMX-TILE
    // Linux hands a process the tiles' register state only on request
    // (ARCH_REQ_XCOMP_PERM for XTILEDATA, feature 18); refused before 5.16.
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return yes;
}

}  // namespace tessel::codegen::gemm

// ------------------------------------------------------------------ does it pay?

namespace tessel::codegen::gemm {

namespace {

double now_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Flops per second of 12 independent chains of `step` on this core, run for
// about a millisecond after a warm-up (the AVX-512 clocks settle).
template <class Step>
double chain_rate(Step step, double flops_per_step) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  long iters = 256, done = 0;
  double t = 0;
  for (int round = 0; round < 16 && t < 1e-3; ++round) {
    const double t0 = now_seconds();
    for (long k = 0; k < iters; ++k)
      for (int i = 0; i < 12; ++i) acc[i] = step(acc[i]);
    const double dt = now_seconds() - t0;
    if (round >= 2) t += dt, done += iters;  // the first rounds warm up
    iters *= 2;
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return t > 0 ? double(done) * 12 * flops_per_step / t : 0.0;
}

}  // namespace

double bf16_dot_rate_over_fma() {
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3F803F80), b = (__m512bh)_mm512_set1_epi32(0x33803380);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  const double dot = chain_rate([&](__m512 acc) { return _mm512_dpbf16_ps(acc, a, b); }, 64);
  const double fma = chain_rate([&](__m512 acc) { return _mm512_fmadd_ps(acc, x, y); }, 32);
  return fma > 0 ? dot / fma : 0.0;
}

}  // namespace tessel::codegen::gemm
