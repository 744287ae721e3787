// The int16 path (panel.h: namespace int16): f16 and bf16 weights' prompt
// tokens on AVX-512 VNNI where there is no AMX. vpdpwssd multiplies 32
// int16 pairs per instruction, twice the f32 FMA's 16, so a matmul of many
// tokens can run at up to twice the f32 kernels' rate. The codes are 13
// bits plus sign, per 32-column block with an f32 scale: a block's dot
// product is exact in int32, and the one rounding each weight and
// activation takes (at most half a step of max |block| / 8191) puts a
// row's error at about 4e-6 of sum |w x| on Gaussian data, against 7e-6
// when the activations are rounded to f16 (llama.cpp's f16 matmuls), 1e-7
// on the AMX-BF16 path and 8e-5 when both sides are rounded to bf16.
//
// Compiled with the AVX-512 flags; run only where the avx512 level is
// active (matmul.cpp).
#include "kernels/immintrin_quiet.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/formats_avx512.h"
#include "kernels/panel.h"

namespace llmserve::kernels::int16 {

namespace {

// kMaxCode / amax, 0 where amax is 0, and finite where amax is so small
// that the quotient would overflow (the codes then stay under kMaxCode).
__m512 code_scale(__m512 amax) {
  const __m512 q = _mm512_div_ps(_mm512_set1_ps(kMaxCode), amax);
  return _mm512_maskz_min_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ), q,
                             _mm512_set1_ps(3.0e38f));
}

// Block by block: the 16 rows' max |w| over the block's 32 columns (a
// column's 16 rows are one vector), then the columns again, two at a time,
// as codes: lane r of pair vector j holds row r's code of column 2j in its
// low half, of column 2j + 1 in its high half. Loading the columns twice
// (from L1) keeps the loop in registers.
template <class Format>
void unpack_format(const uint8_t* panel, int64_t cols, uint8_t* out) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512i low = _mm512_set1_epi32(0xffff);
  for (int64_t c0 = 0; c0 + kQBlock <= cols; c0 += kQBlock, out += kBlockBytes) {
    __m512 amax = _mm512_setzero_ps();
    for (int c = 0; c < kQBlock; ++c) amax = _mm512_max_ps(amax, _mm512_andnot_ps(sign, Format::load(panel, c0 + c)));
    const __m512 inv = code_scale(amax);
    for (int j = 0; j < 16; ++j) {
      // Nearest even, as the activations' codes (quantize_row).
      const __m512i even = _mm512_cvtps_epi32(_mm512_mul_ps(Format::load(panel, c0 + 2 * j), inv));
      const __m512i odd = _mm512_cvtps_epi32(_mm512_mul_ps(Format::load(panel, c0 + 2 * j + 1), inv));
      _mm512_store_si512(out + 64 * j, _mm512_or_si512(_mm512_and_si512(even, low), _mm512_slli_epi32(odd, 16)));
    }
    _mm512_store_ps(reinterpret_cast<float*>(out + kScalesOffset), _mm512_div_ps(amax, _mm512_set1_ps(kMaxCode)));
  }
}

// acc + the pairwise products of w and x's int16 values, in place: as the
// intrinsic, GCC 12 copied each sum to a new register and back around
// every vpdpwssd, twice the instructions.
[[gnu::always_inline]] inline void dot_pairs(__m512i& acc, __m512i w, __m512i x) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(x));
}

// Panels [p0, p0 + P) x T tokens of one group (slot s0 on), every block:
// per block and token P x 16 vpdpwssd into int32 sums, each broadcast
// activation pair feeding the P panels, then one conversion and FMA into
// the f32 sum. Every token's sum is one chain through the blocks in
// column order, whatever P and T.
template <int P, int T>
void tile(const Panels& a, int64_t p0, const uint8_t* x, int s0, int64_t t0) {
  __m512 acc[P][T];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  const uint8_t* w = a.w + p0 * a.nb * kBlockBytes;
  const int64_t panel_stride = a.nb * kBlockBytes;
  for (int64_t b = 0; b < a.nb; ++b, w += kBlockBytes, x += kBlockBytes) {
    __m512i sum[P][T];
    for (int p = 0; p < P; ++p)
      for (int t = 0; t < T; ++t) sum[p][t] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      __m512i wv[P];
      for (int p = 0; p < P; ++p) wv[p] = _mm512_load_si512(w + p * panel_stride + 64 * j);
      for (int t = 0; t < T; ++t) {
        int32_t pair;
        std::memcpy(&pair, x + 64 * (s0 + t) + 4 * j, sizeof pair);
        const __m512i xv = _mm512_set1_epi32(pair);
        for (int p = 0; p < P; ++p) dot_pairs(sum[p][t], wv[p], xv);
      }
    }
    const float* x_scales = reinterpret_cast<const float*>(x + kScalesOffset) + s0;
    for (int p = 0; p < P; ++p) {
      const __m512 w_scales = _mm512_load_ps(reinterpret_cast<const float*>(w + p * panel_stride + kScalesOffset));
      for (int t = 0; t < T; ++t) {
        const __m512 scale = _mm512_mul_ps(w_scales, _mm512_set1_ps(x_scales[t]));
        acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[p][t]), scale, acc[p][t]);
      }
    }
  }
  for (int p = 0; p < P; ++p) {
    const int rows = p0 + p + 1 == a.n_panels ? a.rows : kPanelRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(a.y + (t0 + t) * a.y_stride + (p0 + p) * kPanelRows, mask, acc[p][t]);
  }
}

// Two panels x six tokens: 12 int32 and 12 f32 sums, two weight vectors
// and a broadcast in the 32 registers.
constexpr int kTilePanels = 2, kTileTokens = 6;

template <int... T>
void panels_impl(const Panels& a, std::integer_sequence<int, T...>) {
  static constexpr void (*tiles[kTilePanels][kTileTokens])(const Panels&, int64_t, const uint8_t*, int, int64_t) = {
      {tile<1, T + 1>...}, {tile<2, T + 1>...}};
  for (int64_t p0 = 0; p0 < a.n_panels; p0 += kTilePanels) {
    const int64_t np = std::min<int64_t>(kTilePanels, a.n_panels - p0);
    for (int64_t g0 = 0; g0 < a.n_tokens; g0 += 16) {
      // The group's tokens in tiles of as even a size as kTileTokens allows.
      const int64_t w = std::min<int64_t>(16, a.n_tokens - g0), n_tiles = (w + kTileTokens - 1) / kTileTokens;
      const uint8_t* x = a.x + g0 / 16 * a.nb * kBlockBytes;
      for (int64_t i = 0; i < n_tiles; ++i) {
        const int s0 = static_cast<int>(w * i / n_tiles), s1 = static_cast<int>(w * (i + 1) / n_tiles);
        tiles[np - 1][s1 - s0 - 1](a, p0, x, s0, g0 + s0);
      }
    }
  }
}

}  // namespace

void unpack(PanelFormat format, const uint8_t* panel, int64_t cols, uint8_t* out) {
  if (format == PanelFormat::f16) unpack_format<avx512::F16>(panel, cols, out);
  else unpack_format<avx512::BF16>(panel, cols, out);
}

void quantize_row(const float* x, int64_t cols, uint8_t* records, int slot) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQBlock; ++b, x += kQBlock, records += kBlockBytes) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const __m512 amax = _mm512_set1_ps(
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1))));
    const __m512 inv = code_scale(amax);
    const __m256i q0 = _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)));
    const __m256i q1 = _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inv)));
    _mm512_store_si512(records + 64 * slot, _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1));
    reinterpret_cast<float*>(records + kScalesOffset)[slot] = _mm512_cvtss_f32(amax) / kMaxCode;
  }
}

void panels(const Panels& a) { panels_impl(a, std::make_integer_sequence<int, kTileTokens>()); }

}  // namespace llmserve::kernels::int16
