// The AVX-512 register-block transposes (transpose.hpp), compiled with
// -mavx512f and called only on CPUs that have it.
#include <immintrin.h>

#include <cstdint>

namespace tessel::codegen {

// dst rows 0..15 (ldd apart) = the columns of the 16 x 16 float32 block at
// src (rows lds apart).
void transpose16x16_f32_avx512(const float* src, std::int64_t lds, float* dst, std::int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  // Pairs of rows interleaved, then pairs of pairs, then 128-bit lanes twice.
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
  for (int k = 0; k < 16; ++k) _mm512_storeu_ps(dst + k * ldd, r[k]);
}

// The same for an 8 x 8 float64 block.
void transpose8x8_f64_avx512(const double* src, std::int64_t lds, double* dst, std::int64_t ldd) {
  __m512d r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm512_loadu_pd(src + i * lds);
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_pd(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_pd(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      r[4 * i + j] = _mm512_shuffle_f64x2(t[4 * i + j], t[4 * i + 2 + j], 0x88);
      r[4 * i + 2 + j] = _mm512_shuffle_f64x2(t[4 * i + j], t[4 * i + 2 + j], 0xdd);
    }
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_f64x2(r[j], r[4 + j], 0x88);
    t[4 + j] = _mm512_shuffle_f64x2(r[j], r[4 + j], 0xdd);
  }
  for (int k = 0; k < 8; ++k) _mm512_storeu_pd(dst + k * ldd, t[k]);
}

}  // namespace tessel::codegen
