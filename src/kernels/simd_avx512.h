#pragma once
// 16 floats in a zmm register, for the ops and attention templates (see
// simd_scalar.h for the interface). Include only from AVX-512 files.
#include <cstdint>

#include "kernels/immintrin_quiet.h"

namespace llmserve::kernels::avx512 {

struct VF {
  static constexpr int N = 16;
  __m512 v;

  static float f16(uint16_t h) { return _cvtsh_ss(h); }
  static VF zero() { return {_mm512_setzero_ps()}; }
  static VF set1(float x) { return {_mm512_set1_ps(x)}; }
  static VF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  static VF load(const float* p, int n) { return {_mm512_maskz_loadu_ps(mask(n), p)}; }
  static VF load(const uint16_t* p) { return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))}; }
  static VF load(const uint16_t* p, int n) {
    return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p))};
  }
  static VF load(const int8_t* p) { return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store(float* p, int n) const { _mm512_mask_storeu_ps(p, mask(n), v); }
  void store(uint16_t* p) const { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), half()); }
  void store(uint16_t* p, int n) const { _mm256_mask_storeu_epi16(p, mask(n), half()); }
  __m256i half() const { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

  friend VF operator+(VF a, VF b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend VF operator-(VF a, VF b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend VF operator*(VF a, VF b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend VF operator/(VF a, VF b) { return {_mm512_div_ps(a.v, b.v)}; }
  friend VF fma(VF a, VF b, VF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  friend VF max(VF a, VF b) { return {_mm512_max_ps(a.v, b.v)}; }
  // Lanes [0, n) of a, the rest `fill`.
  friend VF keep_first(VF a, int n, float fill) { return {_mm512_mask_blend_ps(mask(n), _mm512_set1_ps(fill), a.v)}; }
  // Lane by lane: x >= y ? a : b.
  friend VF select_ge(VF x, VF y, VF a, VF b) {
    return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(x.v, y.v, _CMP_GE_OQ), b.v, a.v)};
  }

  float reduce_add() const {
    __m512 s = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));
    s = _mm512_add_ps(s, _mm512_shuffle_f32x4(s, s, 0xb1));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0x4e));
    s = _mm512_add_ps(s, _mm512_permute_ps(s, 0xb1));
    return _mm512_cvtss_f32(s);
  }
  float reduce_max() const {
    __m512 s = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, 0x4e));
    s = _mm512_max_ps(s, _mm512_shuffle_f32x4(s, s, 0xb1));
    s = _mm512_max_ps(s, _mm512_permute_ps(s, 0x4e));
    s = _mm512_max_ps(s, _mm512_permute_ps(s, 0xb1));
    return _mm512_cvtss_f32(s);
  }

  // e^x, relative error ~2 ulp; 0 below -87 (no denormals), +inf above 88.7.
  friend VF exp(VF x) {
    const __m512 t = _mm512_max_ps(_mm512_min_ps(x.v, _mm512_set1_ps(88.72f)), _mm512_set1_ps(-87.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), t);  // ln 2 in two parts
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __mmask16 in_range = _mm512_cmp_ps_mask(x.v, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    return {_mm512_maskz_mov_ps(in_range, _mm512_scalef_ps(p, n))};  // p * 2^n; overflows to inf
  }

  // dst[c * ds + r] = lane c of rows[r] for a 16 x 16 tile: 4x4
  // transposes inside each 128-bit lane, then two rounds of lane shuffles.
  static void transpose(const VF* rows, float* dst, int64_t ds) {
    __m512 u[16];
    for (int k = 0; k < 4; ++k) {
      const __m512 r0 = rows[4 * k].v, r1 = rows[4 * k + 1].v, r2 = rows[4 * k + 2].v, r3 = rows[4 * k + 3].v;
      const __m512 t0 = _mm512_unpacklo_ps(r0, r1), t1 = _mm512_unpackhi_ps(r0, r1);
      const __m512 t2 = _mm512_unpacklo_ps(r2, r3), t3 = _mm512_unpackhi_ps(r2, r3);
      u[4 * k] = _mm512_shuffle_ps(t0, t2, 0x44);
      u[4 * k + 1] = _mm512_shuffle_ps(t0, t2, 0xee);
      u[4 * k + 2] = _mm512_shuffle_ps(t1, t3, 0x44);
      u[4 * k + 3] = _mm512_shuffle_ps(t1, t3, 0xee);
    }
    // u[4k + m], 128-bit lane L, holds rows 4k..4k+3 of column 4L + m.
    for (int m = 0; m < 4; ++m) {
      const __m512 a = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88), b = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xdd);
      const __m512 c = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88), d = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xdd);
      _mm512_storeu_ps(dst + m * ds, _mm512_shuffle_f32x4(a, c, 0x88));
      _mm512_storeu_ps(dst + (4 + m) * ds, _mm512_shuffle_f32x4(b, d, 0x88));
      _mm512_storeu_ps(dst + (8 + m) * ds, _mm512_shuffle_f32x4(a, c, 0xdd));
      _mm512_storeu_ps(dst + (12 + m) * ds, _mm512_shuffle_f32x4(b, d, 0xdd));
    }
  }

  // Lane i: the sum of a[i]'s lanes, for 16 vectors. Each round halves the
  // vectors by adding two shuffles of a pair: unpacks leave, in each
  // 128-bit lane, two vectors' sums of 2 columns, shuffle_ps four vectors'
  // sums of the lane, then shuffle_f32x4 pairs the lanes twice.
  static VF sum_each(const VF* a) {
    __m512 two[8], four[4], eight[2];
    for (int k = 0; k < 8; ++k)
      two[k] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * k].v, a[2 * k + 1].v),
                             _mm512_unpackhi_ps(a[2 * k].v, a[2 * k + 1].v));
    for (int k = 0; k < 4; ++k)
      four[k] = _mm512_add_ps(_mm512_shuffle_ps(two[2 * k], two[2 * k + 1], 0x44),
                              _mm512_shuffle_ps(two[2 * k], two[2 * k + 1], 0xee));
    for (int k = 0; k < 2; ++k)
      eight[k] = _mm512_add_ps(_mm512_shuffle_f32x4(four[2 * k], four[2 * k + 1], 0x88),
                               _mm512_shuffle_f32x4(four[2 * k], four[2 * k + 1], 0xdd));
    return {_mm512_add_ps(_mm512_shuffle_f32x4(eight[0], eight[1], 0x88),
                          _mm512_shuffle_f32x4(eight[0], eight[1], 0xdd))};
  }

  // Lanes [0, n), n >= 0. row_softmax_step passes a chunk's key count, past
  // the vector, where a bare shift by 32 or more is undefined.
  static __mmask16 mask(int n) { return n >= N ? 0xffff : static_cast<__mmask16>((1u << n) - 1); }
};

}  // namespace llmserve::kernels::avx512
