#pragma once
// Internal to the AVX-512 matmul files (matmul_avx512.cpp, matmul_amx.cpp):
// the panel formats loaded into registers (a quantized block's codes and
// scales, a float panel's columns), and the float steps that turn a
// block's exact int32 sums into a token's f32 results. The
// VNNI kernels and the AMX-INT8 tiles share them, which is what makes the
// two paths give the same bits (matmul.h). Include only from files
// compiled with the AVX-512 flags; everything here has internal linkage,
// and the functions are inline so that a file using part of it
// (matmul_int16.cpp: the float formats) leaves the rest unused quietly.
#include "kernels/immintrin_quiet.h"

#include "kernels/panel.h"

namespace llmserve::kernels::avx512 {
namespace {

inline __m512 load_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Where token t's 16 row results of panel i of the run go, and which of
// the rows are valid.
inline __mmask16 row_mask(const PanelArgs& a, int64_t i) {
  return static_cast<__mmask16>((1u << panel_rows(a, i)) - 1);
}
inline float* y_row(const PanelArgs& a, int64_t t, int64_t i) { return a.y + t * a.y_stride + i * kPanelRows; }
inline void store(const PanelArgs& a, int64_t t, __m512 v, int64_t i = 0) {
  _mm512_mask_storeu_ps(y_row(a, t, i), row_mask(a, i), v);
}

// How far ahead of its reads decode prefetches the weights it streams
// (matmul_avx512.cpp: prefetch).
constexpr int kPrefetchBytes = 8192;

// A 64-byte line of codes; with kHint (_MM_HINT_T1 or _MM_HINT_NTA, -1:
// none) the line kPrefetchBytes on is prefetched just before it, in one asm
// statement so that the two stay together: written as intrinsics, GCC
// gathered a block's prefetches into a burst again. Decode's quantized
// formats prefetch this way, one line per line read, as the f16 kernel
// does: prefetching a group's lines at once read measurably slower.
// Each such load is followed by its format's kLineNops nops (3,
// kLinePadNops, for Q8_0; more for the nibble formats, which have more
// instructions a line). They do no work; our guess is that by taking slots
// in the reorder buffer they keep the core from running its demand loads
// far past the prefetched lines, which brings the stream up to the read
// probe's rate. The counts are measured per format.
constexpr int kLinePadNops = 3;

template <int kHint, int kNops = kLinePadNops>
[[gnu::always_inline]] inline __m512i load_line(const uint8_t* p) {
  if constexpr (kHint < 0) {
    return _mm512_load_si512(p);
  } else {
    __m512i v;
    // The mnemonic has to be part of the template's string literal.
#define LLMSERVE_LOAD_LINE(prefetch)                                                                \
  asm(prefetch " %c2(%1)\n\tvmovdqa64 (%1), %0\n\t.rept %c4\n\tnop\n\t.endr"                      \
      : "=v"(v)                                                                                     \
      : "r"(p), "i"(kPrefetchBytes), "m"(*reinterpret_cast<const uint8_t(*)[64]>(p)), "i"(kNops))
    if constexpr (kHint == _MM_HINT_NTA) LLMSERVE_LOAD_LINE("prefetchnta");
    else LLMSERVE_LOAD_LINE("prefetcht1");
#undef LLMSERVE_LOAD_LINE
    return v;
  }
}

// One block of a panel, unpacked: w[r][4j+i] = s * code - m, with code byte
// r*4+i of g[j]. Formats with one scale per block use s_lo / m_lo only,
// Q6_K s_lo / s_hi (its offsets fold into the dot products).
struct Block {
  __m512i g[8];
  __m512 s_lo, s_hi, m_lo;
};

// Q4_0's nibbles without shifting the high ones down: g[j + 4] holds 16
// times the codes, so their sums, with Q8_0's offset of -128 per code
// (16 n - 128 = 16 (n - 8)), are 16 times what they stand for; the kernel
// shifts them down once per block instead of every vector once.
template <int kHint, int kNops>
inline void nibbles_hi16(const uint8_t* p, __m512i* g) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), high4 = _mm512_set1_epi8(static_cast<char>(0xf0));
  for (int j = 0; j < 4; ++j) {
    __m512i v = load_line<kHint, kNops>(p + 64 * j);
    asm("" : "+v"(v));  // one load: GCC otherwise folds it into both ANDs, a load each
    g[j] = _mm512_and_si512(v, low4);
    g[j + 4] = _mm512_and_si512(v, high4);
  }
}

template <int kHint = -1, int kNops = kLinePadNops>
inline void unpack_nibbles(const uint8_t* p, __m512i* g) {
  const __m512i low4 = _mm512_set1_epi8(15);
  for (int j = 0; j < 4; ++j) {
    const __m512i v = load_line<kHint, kNops>(p + 64 * j);
    g[j] = _mm512_and_si512(v, low4);
    g[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  }
}

// kFoldedOffset: w = S * (code - M / S), the integer offset -M / S per code
// folded into the dot products (see accumulate_block); m_lo is then unused.
// Otherwise (Q4_K) each block subtracts M * dsum from the sum after adding
// its products (add_scaled).
// load<T> unpacks a block for tiles of T tokens (only Q4_0 differs by T).
struct Q8_0 {
  static constexpr const QuantLayout& kLayout = kQ8_0Layout;
  static constexpr bool kTwoScales = false, kFoldedOffset = true;
  static constexpr int kTileTokens = 16;
  static constexpr int kHighShift = 0;
  static constexpr int kLineNops = kLinePadNops;
  static constexpr float kCodeZero = 128;  // w = S * (code - kCodeZero)
  static int32_t offset(const Q8Act& x) { return x.neg128_sum; }
  template <int T, int kHint = -1>
  static void load(const uint8_t* panel, int64_t b, Block& k) {
    for (int j = 0; j < 8; ++j) k.g[j] = load_line<kHint, kLineNops>(panel + kLayout.codes(b) + 64 * j);
    k.s_lo = load_f16x16(panel + kLayout.meta(b));
  }
};

// Decode (T = 1) keeps the high nibbles 16 times over (nibbles_hi16) and
// shifts its sum down once per block; several tokens share one shift per
// vector instead (unpack_nibbles), so each token's sum needs none.
struct Q4_0 {
  static constexpr const QuantLayout& kLayout = kQ4_0Layout;
  static constexpr bool kTwoScales = false, kFoldedOffset = true;
  static constexpr int kTileTokens = 16;
  static constexpr int kHighShift = 4;
  static constexpr int kLineNops = 10;
  static constexpr float kCodeZero = 8;
  static int32_t offset(const Q8Act& x) { return x.neg8_sum; }
  template <int T, int kHint = -1>
  static void load(const uint8_t* panel, int64_t b, Block& k) {
    if constexpr (T == 1) nibbles_hi16<kHint, kLineNops>(panel + kLayout.codes(b), k.g);
    else unpack_nibbles(panel + kLayout.codes(b), k.g);
    k.s_lo = load_f16x16(panel + kLayout.meta(b));
  }
};

inline __m512 u8x16_to_ps(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 i8x16_to_ps(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

struct Q4_K {
  static constexpr const QuantLayout& kLayout = kQ4_KLayout;
  static constexpr bool kTwoScales = false, kFoldedOffset = false;
  static constexpr int kTileTokens = 16;
  static constexpr int kLineNops = 6;
  template <int T, int kHint = -1>
  static void load(const uint8_t* panel, int64_t b, Block& k) {
    const int64_t c = b % 8;
    unpack_nibbles<kHint, kLineNops>(panel + kLayout.codes(b), k.g);
    const uint8_t* meta = panel + kLayout.meta(b);
    k.s_lo = _mm512_mul_ps(load_f16x16(meta), u8x16_to_ps(meta + kQ4_KSc + c * 16));
    k.m_lo = _mm512_mul_ps(load_f16x16(meta + kQ4_KDmin), u8x16_to_ps(meta + kQ4_KM + c * 16));
  }
};

// Two scales per block, one per 16-column half (groups 0-3 and 4-7), each
// half's offset of -32 per code folded into that half's chain.
struct Q6_K {
  static constexpr const QuantLayout& kLayout = kQ6_KLayout;
  static constexpr bool kTwoScales = true, kFoldedOffset = true;
  static constexpr int kTileTokens = 8;  // two chains per token
  static constexpr int kLineNops = 6;
  static constexpr float kCodeZero = 32;
  static int32_t offset_lo(const Q8Act& x) { return x.neg32_sum_lo; }
  static int32_t offset_hi(const Q8Act& x) { return x.neg32_sum_hi; }
  template <int T, int kHint = -1>
  static void load(const uint8_t* panel, int64_t b, Block& k) {
    const int64_t c = b % 8;
    const uint8_t* codes = panel + kLayout.codes(b);
    unpack_nibbles<kHint, kLineNops>(codes, k.g);
    // Group 4h+i's top bits are bits 2i..2i+1 of vector h: move them to bits
    // 4..5 (16-bit shifts; the 0x30 mask drops what crossed a byte) and OR.
    const __m512i top = _mm512_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {
      const __m512i v = load_line<kHint, kLineNops>(codes + 256 + 64 * h);
      const __m512i shifted[4] = {_mm512_slli_epi16(v, 4), _mm512_slli_epi16(v, 2), v, _mm512_srli_epi16(v, 2)};
      for (int i = 0; i < 4; ++i) k.g[4 * h + i] = _mm512_ternarylogic_epi32(k.g[4 * h + i], shifted[i], top, 0xf8);
    }
    const uint8_t* meta = panel + kLayout.meta(b);
    const __m512 d = load_f16x16(meta);
    k.s_lo = _mm512_mul_ps(d, i8x16_to_ps(meta + kQ6_KSc + (2 * c) * 16));
    k.s_hi = _mm512_mul_ps(d, i8x16_to_ps(meta + kQ6_KSc + (2 * c + 1) * 16));
  }
};

// One-scale formats' float steps for one block and token, from its int32
// sum: the same for decode and for tokens in a batch, which with exact
// integer sums is what keeps a token's result independent of its batch.
// One running sum per token, offsets included, so that a column slice can
// go on from where the slice before it stopped (PanelArgs::resume). The
// offsets had a sum of their own, subtracted at the end, so that a block
// added one FMA latency to a token's chain instead of two; decode's chain is
// far from its limit (a block's 256 bytes take the stream ~40 cycles), and
// prefill interleaves 16 tokens' chains.
template <class Format>
void add_scaled(__m512i sum, const Block& k, const Q8Act& x, __m512& acc) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(k.s_lo, _mm512_set1_ps(x.d)), acc);
  if constexpr (!Format::kFoldedOffset) acc = _mm512_fnmadd_ps(k.m_lo, _mm512_set1_ps(x.dsum), acc);
}

// Q6_K's float steps for one block and token from its two halves' sums,
// likewise the same for decode and for tokens in a batch.
inline void add_scaled_halves(__m512i lo, __m512i hi, const Block& k, const Q8Act& x, __m512& acc) {
  const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), k.s_hi, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), k.s_lo));
  acc = _mm512_fmadd_ps(f, _mm512_set1_ps(x.d), acc);
}

struct F32 {
  static constexpr int64_t kColumnBytes = 64;
  static __m512 load(const uint8_t* p, int64_t c) { return _mm512_load_ps(reinterpret_cast<const float*>(p + c * 64)); }
};
struct F16 {
  static constexpr int64_t kColumnBytes = 32;
  static __m512 load(const uint8_t* p, int64_t c) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + c * 32)));
  }
};
struct BF16 {
  static constexpr int64_t kColumnBytes = 32;
  static __m512 load(const uint8_t* p, int64_t c) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + c * 32)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
};

}  // namespace
}  // namespace llmserve::kernels::avx512
