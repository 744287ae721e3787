#pragma once
// 8 floats in a ymm register, for the ops and attention templates (see
// simd_scalar.h for the interface). Include only from AVX2 files.
#include <cstdint>

#include "kernels/immintrin_quiet.h"

namespace llmserve::kernels::avx2 {

struct VF {
  static constexpr int N = 8;
  __m256 v;

  static float f16(uint16_t h) { return _cvtsh_ss(h); }
  static VF zero() { return {_mm256_setzero_ps()}; }
  static VF set1(float x) { return {_mm256_set1_ps(x)}; }
  static VF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  static VF load(const float* p, int n) { return {_mm256_maskload_ps(p, mask(n))}; }
  static VF load(const uint16_t* p) { return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))}; }
  static VF load(const uint16_t* p, int n) {
    alignas(16) uint16_t tmp[8] = {};
    for (int i = 0; i < n; ++i) tmp[i] = p[i];
    return {_mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)))};
  }
  static VF load(const int8_t* p) {
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store(float* p, int n) const { _mm256_maskstore_ps(p, mask(n), v); }
  void store(uint16_t* p) const { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), half()); }
  void store(uint16_t* p, int n) const {
    alignas(16) uint16_t tmp[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), half());
    for (int i = 0; i < n; ++i) p[i] = tmp[i];
  }
  __m128i half() const { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

  friend VF operator+(VF a, VF b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend VF operator-(VF a, VF b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend VF operator*(VF a, VF b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend VF operator/(VF a, VF b) { return {_mm256_div_ps(a.v, b.v)}; }
  friend VF fma(VF a, VF b, VF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  friend VF max(VF a, VF b) { return {_mm256_max_ps(a.v, b.v)}; }
  friend VF keep_first(VF a, int n, float fill) {
    return {_mm256_blendv_ps(_mm256_set1_ps(fill), a.v, _mm256_castsi256_ps(mask(n)))};
  }
  friend VF select_ge(VF x, VF y, VF a, VF b) {
    return {_mm256_blendv_ps(b.v, a.v, _mm256_cmp_ps(x.v, y.v, _CMP_GE_OQ))};
  }

  float reduce_add() const {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  float reduce_max() const {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }

  // e^x, relative error ~2 ulp; 0 below -87 (no denormals), +inf above 88
  // (callers only need it to saturate there).
  friend VF exp(VF x) {
    const __m256 t = _mm256_max_ps(_mm256_min_ps(x.v, _mm256_set1_ps(88.0f)), _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), t);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    // 2^n from the exponent bits; n is in [-126, 127] after the clamp.
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    const __m256 in_range = _mm256_cmp_ps(x.v, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
    const __m256 over = _mm256_cmp_ps(x.v, _mm256_set1_ps(88.0f), _CMP_GT_OQ);
    return {_mm256_blendv_ps(_mm256_and_ps(y, in_range), _mm256_set1_ps(__builtin_inff()), over)};
  }

  // dst[c * ds + r] = lane c of rows[r] for an 8 x 8 tile: 4x4 transposes
  // inside each 128-bit lane, then a lane exchange.
  static void transpose(const VF* rows, float* dst, int64_t ds) {
    __m256 u[8];
    for (int k = 0; k < 2; ++k) {
      const __m256 r0 = rows[4 * k].v, r1 = rows[4 * k + 1].v, r2 = rows[4 * k + 2].v, r3 = rows[4 * k + 3].v;
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      u[4 * k] = _mm256_shuffle_ps(t0, t2, 0x44);
      u[4 * k + 1] = _mm256_shuffle_ps(t0, t2, 0xee);
      u[4 * k + 2] = _mm256_shuffle_ps(t1, t3, 0x44);
      u[4 * k + 3] = _mm256_shuffle_ps(t1, t3, 0xee);
    }
    for (int m = 0; m < 4; ++m) {
      _mm256_storeu_ps(dst + m * ds, _mm256_permute2f128_ps(u[m], u[4 + m], 0x20));
      _mm256_storeu_ps(dst + (4 + m) * ds, _mm256_permute2f128_ps(u[m], u[4 + m], 0x31));
    }
  }

  // Lane i: the sum of a[i]'s lanes. Two hadd rounds leave, for each of
  // a[0..3] and a[4..7], a sum of each 128-bit half; the halves are then
  // paired across the lanes and added.
  static VF sum_each(const VF* a) {
    __m256 g[2];
    for (int k = 0; k < 2; ++k) {
      const VF* b = a + 4 * k;
      g[k] = _mm256_hadd_ps(_mm256_hadd_ps(b[0].v, b[1].v), _mm256_hadd_ps(b[2].v, b[3].v));
    }
    return {_mm256_add_ps(_mm256_permute2f128_ps(g[0], g[1], 0x20), _mm256_permute2f128_ps(g[0], g[1], 0x31))};
  }

  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

}  // namespace llmserve::kernels::avx2
