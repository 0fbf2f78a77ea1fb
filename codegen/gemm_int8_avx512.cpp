// The 8-bit integer matrix-product kernel for AVX512_VNNI (gemm_int8.hpp),
// compiled with -mavx512f -mavx512vl -mavx512bw -mavx512vnni. Like
// gemm_kernel.inc, everything but the entry points is in an anonymous
// namespace and uses no out-of-line library templates: code compiled for
// AVX-512 must not be merged by the linker into callers that run on other
// machines.
//
// Packed operands hold groups of 4 bytes along k as 32-bit words, lowest byte
// the lowest k: a B sliver is kq x NR words (word [q][j] = B[4q..4q+3][j])
// followed by NR int32 column corrections, an A sliver kq x MR words (word
// [q][i] = A[i][4q..4q+3], bytes flipped by 0x80 when A and B have the same
// signedness), kq = ceil(kc/4). Padding bytes are zeros in B, so whatever A
// holds there adds nothing. The micro-kernel's step over one group: 2 B
// vectors, MR broadcasts (vpbroadcastd from memory: load ports only), 2*MR
// vpdpbusd into an MR x NR tile of int32 accumulators (24 of 32 zmm); the
// sliver's corrections are added as the tile is stored.
//
// Blocks: KC 2048 (a B sliver, 512 x 32 words, is 64 KiB: it streams from L2
// beside a 24 KiB A sliver; on Zen 5, 4096^3, one thread, KC 1024 / MC 240 ran
// about 8% slower, each tile's C loads and stores coming twice as often), MC
// 120 (an A block 240 KiB of a 1 MiB L2), NC 2048 (a B panel 4 MiB, in L3).

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>

#include "codegen/gemm_int8.hpp"

namespace tessel::codegen::gemm {
namespace {

using i64 = std::int64_t;
using u8 = std::uint8_t;
using u32 = std::uint32_t;

constexpr int MR = 12;    // tile rows
constexpr int NR = 32;    // tile columns: two zmm of 16 int32
constexpr i64 KC = 2048;  // depth of a packed block, a multiple of 4 (groups never straddle blocks)
constexpr i64 MC = 120;   // rows of a packed A block, a multiple of MR
constexpr i64 NC = 2048;  // columns of a task's packed B panel, at most

inline i64 min_i(i64 a, i64 b) { return a < b ? a : b; }
inline i64 div_up(i64 a, i64 b) { return (a + b - 1) / b; }

// The group x[0], x[s], .., x[(count-1)*s] (count 1..4) as one word, zeros above.
inline u32 quad(const u8* x, i64 s, i64 count) {
  if (count == 4 && s == 1) {
    u32 w;
    __builtin_memcpy(&w, x, 4);
    return w;
  }
  u32 w = 0;
  for (i64 t = 0; t < count; ++t) w |= u32(x[t * s]) << (8 * t);
  return w;
}

inline __mmask16 first_lanes(i64 n) { return n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1); }

// 16 groups (x[j], x[j+s], .., x[j+(count-1)*s]) for the j set in `mask` (zeros elsewhere).
// (The maskz forms: GCC 12's unmasked ones warn -Wmaybe-uninitialized from its own headers.)
inline __m512i quads16(const u8* x, i64 s, i64 count, __mmask16 mask) {
  __m512i w = _mm512_maskz_cvtepu8_epi32(mask, _mm_maskz_loadu_epi8(mask, x));
  for (i64 t = 1; t < count; ++t) {
    const __m512i v = _mm512_maskz_cvtepu8_epi32(mask, _mm_maskz_loadu_epi8(mask, x + t * s));
    w = _mm512_or_si512(w, _mm512_maskz_sll_epi32(mask, v, _mm_cvtsi32_si128(int(8 * t))));
  }
  return w;
}

// One MR x NR tile: C (ldc apart) = or += sliver corrections + A sliver . B sliver over kq groups.
// kSwap: B's bytes are the unsigned operand of vpdpbusd, A's the signed one.
template <bool kSwap>
__attribute__((always_inline)) inline void micro_kernel(i64 kq, const u32* __restrict ap, const u32* __restrict bp,
                                                        std::int32_t* __restrict c, i64 ldc, bool accumulate) {
  // Two empty asm fences keep GCC 12 from moving every accumulator through a copy and the stack each
  // step (half the speed): one hides that callers never pass kq 0, one ends the accumulators' chains.
  __asm__("" : "+r"(kq));
  __m512i acc[MR][2];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {  // the tile is read or written after the loop: fetch it now
    __builtin_prefetch(c + i * ldc, 1);
    __builtin_prefetch(c + i * ldc + 16, 1);
  }
#pragma GCC unroll 2
  for (i64 q = 0; q < kq; ++q) {
    const __m512i b0 = _mm512_load_si512(bp + q * NR);
    const __m512i b1 = _mm512_load_si512(bp + q * NR + 16);
#pragma GCC unroll 32
    for (int i = 0; i < MR; ++i) {
      const __m512i a = _mm512_set1_epi32(int(ap[q * MR + i]));
      if (kSwap) {
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], b0, a);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], b1, a);
      } else {
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], a, b0);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], a, b1);
      }
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) __asm__("" : "+v"(acc[i][0]), "+v"(acc[i][1]));
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      std::int32_t* dst = c + i * ldc + h * 16;
      const __m512i v = _mm512_add_epi32(acc[i][h], _mm512_load_si512(bp + kq * NR + h * 16));
      _mm512_storeu_si512(dst, accumulate ? _mm512_add_epi32(v, _mm512_loadu_si512(dst)) : v);
    }
}

// A tile cut by C's edge: computed whole into scratch, then its mr x nr part written or added (wrapping).
template <bool kSwap>
void edge_kernel(i64 kq, const u32* ap, const u32* bp, std::int32_t* c, i64 ldc, bool accumulate, i64 mr, i64 nr) {
  alignas(64) std::int32_t tile[MR * NR];
  micro_kernel<kSwap>(kq, ap, bp, tile, NR, false);
  for (i64 i = 0; i < mr; ++i)
    for (i64 j = 0; j < nr; ++j)
      c[i * ldc + j] = accumulate ? std::int32_t(u32(c[i * ldc + j]) + u32(tile[i * NR + j])) : tile[i * NR + j];
}

// One sliver: R lanes (rows of A, columns of B) by kc, element (r, p) at x[r*ls + p*ks], as kq x R
// words (word [q][r] = lane r's group q, bytes xor `flip`), lanes from n on zeros.
void pack_sliver(const u8* x, i64 ls, i64 ks, i64 n, int R, i64 kc, u32 flip, u32* dst) {
  const i64 kq = div_up(kc, 4);
  const __m512i vflip = _mm512_set1_epi32(int(flip));
  i64 q0 = 0;
  if (ks == 1 && n == R && R % 4 == 0) {
    // k contiguous (A row-major, B transposed), all lanes: 4 lanes x 16 groups at a time, transposed as
    // 4 x 4 words in each 128-bit lane, stored a 128-bit lane (4 lanes of one group) at a time.
    for (; q0 + 16 <= kc / 4; q0 += 16)
      for (int i = 0; i < R; i += 4) {
        const u8* row = x + i * ls + 4 * q0;
        __m512i r[4], t[4];
        for (int u = 0; u < 4; ++u) r[u] = _mm512_xor_si512(_mm512_loadu_si512(row + u * ls), vflip);
        t[0] = _mm512_maskz_unpacklo_epi32(0xffff, r[0], r[1]), t[1] = _mm512_maskz_unpackhi_epi32(0xffff, r[0], r[1]);
        t[2] = _mm512_maskz_unpacklo_epi32(0xffff, r[2], r[3]), t[3] = _mm512_maskz_unpackhi_epi32(0xffff, r[2], r[3]);
        r[0] = _mm512_maskz_unpacklo_epi64(0xff, t[0], t[2]), r[1] = _mm512_maskz_unpackhi_epi64(0xff, t[0], t[2]);
        r[2] = _mm512_maskz_unpacklo_epi64(0xff, t[1], t[3]), r[3] = _mm512_maskz_unpackhi_epi64(0xff, t[1], t[3]);
        u32* out = dst + q0 * R + i;  // r[u]'s 128-bit lane l: group q0 + 4l + u
        for (int u = 0; u < 4; ++u) {
          _mm_storeu_si128((__m128i*)(out + u * R), _mm512_maskz_extracti32x4_epi32(0xf, r[u], 0));
          _mm_storeu_si128((__m128i*)(out + (4 + u) * R), _mm512_maskz_extracti32x4_epi32(0xf, r[u], 1));
          _mm_storeu_si128((__m128i*)(out + (8 + u) * R), _mm512_maskz_extracti32x4_epi32(0xf, r[u], 2));
          _mm_storeu_si128((__m128i*)(out + (12 + u) * R), _mm512_maskz_extracti32x4_epi32(0xf, r[u], 3));
        }
      }
  }
  // The rest lane by lane, group by group (with ks == 1 a whole group is one 32-bit load).
  for (i64 i = 0; i < R; ++i)
    for (i64 q = q0; q < kq; ++q)
      dst[q * R + i] = i < n ? quad(x + i * ls + 4 * q * ks, ks, min_i(4, kc - 4 * q)) ^ flip : 0u;
}

// A[rows, 0:kc] (element (i, p) at a[i*rs + p*cs]) into MR-row slivers, bytes xor `flip`, zero-padded to MR rows.
void pack_a(const u8* a, i64 rs, i64 cs, i64 rows, i64 kc, u32 flip, u32* out) {
  const i64 kq = div_up(kc, 4);
  if (rs != 1) {
    for (i64 r0 = 0; r0 < rows; r0 += MR)
      pack_sliver(a + r0 * rs, rs, cs, min_i(MR, rows - r0), MR, kc, flip, out + r0 * kq);
    return;
  }
  // Column-major A (a transposed operand): four of its columns at a time, read in order (a sliver's
  // walk down k alone would touch a page per column), MR rows (16 bytes) per vector.
  const __m512i vflip = _mm512_set1_epi32(int(flip));
  for (i64 q = 0; q < kq; ++q)
    for (i64 r0 = 0; r0 < rows; r0 += MR) {
      const __mmask16 mask = first_lanes(min_i(MR, rows - r0));
      const __m512i v = quads16(a + r0 + 4 * q * cs, cs, min_i(4, kc - 4 * q), mask);
      _mm512_mask_storeu_epi32(out + r0 * kq + q * MR, first_lanes(MR), _mm512_mask_xor_epi32(v, mask, v, vflip));
    }
}

// B[0:kc, cols] (element (p, j) at b[p*rs + j*cs]) into NR-column slivers of groups, zero-padded to NR
// columns, each followed by its NR corrections: 0, or -128 (corr < 0) or +128 (corr > 0) times the
// column sums of B over kc, B's bytes read as signed (corr < 0) or unsigned (corr > 0).
void pack_b(const u8* b, i64 rs, i64 cs, i64 kc, i64 cols, int corr, u32* out) {
  const i64 kq = div_up(kc, 4), sliver_words = (kq + 1) * NR, slivers = div_up(cols, NR);
  if (cs == 1) {
    // Row-major B: four rows at a time, read in order (see gemm_kernel.inc's pack_b), 16 columns per vector.
    for (i64 q = 0; q < kq; ++q) {
      const u8* src = b + 4 * q * rs;
      const i64 count = min_i(4, kc - 4 * q);
      for (i64 j = 0; j < cols; j += 16)
        _mm512_store_si512(out + (j / NR) * sliver_words + q * NR + j % NR,
                           quads16(src + j, rs, count, first_lanes(cols - j)));
      if (cols % NR && cols % NR <= 16)  // the last sliver's second half: zeros
        _mm512_store_si512(out + (slivers - 1) * sliver_words + q * NR + 16, _mm512_setzero_si512());
    }
  } else {
    // Transposed or strided B: sliver by sliver.
    for (i64 s = 0; s < slivers; ++s)
      pack_sliver(b + s * NR * cs, cs, rs, min_i(NR, cols - s * NR), NR, kc, 0u, out + s * sliver_words);
  }
  // The corrections, from the packed words (sums of 4 bytes times ones by vpdpbusd itself).
  const __m512i ones = _mm512_set1_epi32(0x01010101);
  for (i64 s = 0; s < slivers; ++s) {
    u32* sl = out + s * sliver_words;
    for (int h = 0; h < NR; h += 16) {
      __m512i sum = _mm512_setzero_si512();
      if (corr < 0)
        for (i64 q = 0; q < kq; ++q) sum = _mm512_dpbusd_epi32(sum, ones, _mm512_load_si512(sl + q * NR + h));
      else if (corr > 0)
        for (i64 q = 0; q < kq; ++q) sum = _mm512_dpbusd_epi32(sum, _mm512_load_si512(sl + q * NR + h), ones);
      sum = _mm512_maskz_slli_epi32(0xffff, sum, 7);
      _mm512_store_si512(sl + kq * NR + h, corr < 0 ? _mm512_sub_epi32(_mm512_setzero_si512(), sum) : sum);
    }
  }
}

#include "codegen/gemm_blocking.inc"

// The tiles of one packed A block against one packed B panel.
template <bool kSwap>
void block(i64 kq, const u32* ap, i64 mb, const u32* bp, i64 cols, std::int32_t* c, i64 ldc, bool accumulate) {
  for (i64 j = 0; j < cols; j += NR) {
    const i64 nr = min_i(NR, cols - j);
    const u32* bs = bp + (j / NR) * (kq + 1) * NR;
    for (i64 i = 0; i < mb; i += MR) {
      const i64 mr = min_i(MR, mb - i);
      if (mr == MR && nr == NR)
        micro_kernel<kSwap>(kq, ap + i * kq, bs, c + i * ldc + j, ldc, accumulate);
      else
        edge_kernel<kSwap>(kq, ap + i * kq, bs, c + i * ldc + j, ldc, accumulate, mr, nr);
    }
  }
}

// One task: C[r0:r0+rows, c0:c0+cols] of batch element bi.
void run_task(const OperandsI8& op, i64 bi, i64 r0, i64 rows, i64 c0, i64 cols) {
  const u8* a = op.a + bi * op.a_bs + r0 * op.a_rs;
  const u8* b = op.b + bi * op.b_bs + c0 * op.b_cs;
  std::int32_t* c = op.c + bi * op.m * op.n + r0 * op.n + c0;
  const i64 ldc = op.n;
  if (op.k == 0) {
    for (i64 i = 0; i < rows; ++i)
      for (i64 j = 0; j < cols; ++j) c[i * ldc + j] = 0;
    return;
  }
  // u8 . s8 as is; s8 . u8 swapped (kSwap); s8 . s8 and u8 . u8 with A's bytes flipped and corrections.
  const bool swap = !op.b_signed, same = op.a_signed == op.b_signed;
  const u32 flip = same ? 0x80808080u : 0u;
  const int corr = !same ? 0 : op.a_signed ? -1 : 1;
  const i64 kq_max = div_up(min_i(KC, op.k), 4);
  const i64 mc = min_i(MC, div_up(rows, MR) * MR);
  u32* bp = static_cast<u32*>(PackBuffers::grow(tls_pack.b, tls_pack.b_bytes, sizeof(u32) * (kq_max + 1) * div_up(cols, NR) * NR));
  u32* ap = static_cast<u32*>(PackBuffers::grow(tls_pack.a, tls_pack.a_bytes, sizeof(u32) * kq_max * mc));
  for (i64 k0 = 0; k0 < op.k; k0 += KC) {
    const i64 kc = min_i(KC, op.k - k0), kq = div_up(kc, 4);
    pack_b(b + k0 * op.b_rs, op.b_rs, op.b_cs, kc, cols, corr, bp);
    for (i64 i0 = 0; i0 < rows; i0 += mc) {
      const i64 mb = min_i(mc, rows - i0);
      pack_a(a + i0 * op.a_rs + k0 * op.a_cs, op.a_rs, op.a_cs, mb, kc, flip, ap);
      if (swap)
        block<true>(kq, ap, mb, bp, cols, c + i0 * ldc, ldc, k0 > 0);
      else
        block<false>(kq, ap, mb, bp, cols, c + i0 * ldc, ldc, k0 > 0);
    }
  }
}

}  // namespace

void matmul_int8_avx512vnni(const OperandsI8& op, int threads, ParallelForFn parallel, void* parallel_ctx) {
  if (op.batch == 0 || op.m == 0 || op.n == 0) return;
  struct Ctx {
    const OperandsI8* op;
    Grid g;
  } ctx{&op, make_grid(op.batch, op.m, op.n, threads, MR, NR, NC)};
  auto task = [](void* p, i64 lo, i64 hi) {
    const Ctx& c = *static_cast<const Ctx*>(p);
    const i64 per_batch = c.g.tm * c.g.tn;
    for (i64 t = lo; t < hi; ++t) {
      const i64 bi = t / per_batch, rest = t % per_batch, ti = rest / c.g.tn, tj = rest % c.g.tn;
      const i64 r0 = ti * c.g.rows, c0 = tj * c.g.cols;
      run_task(*c.op, bi, r0, min_i(c.g.rows, c.op->m - r0), c0, min_i(c.g.cols, c.op->n - c0));
    }
  };
  const i64 tasks = op.batch * ctx.g.tm * ctx.g.tn;
  if (tasks == 1)
    task(&ctx, 0, 1);
  else
    parallel(parallel_ctx, tasks, task, &ctx);
}

}  // namespace tessel::codegen::gemm
