// AVX2 (+FMA, F16C) matmul kernels over the panel layout. A 64-byte group
// vector of a panel is two 256-bit halves, rows 0-7 and 8-15; each block is
// processed half by half while its cache lines are in L1, so the weights are
// still read from memory once.
//
// Without VNNI the byte products come from vpmaddubsw (u8 x s8 -> pairs
// summed into saturating int16) and vpmaddwd. The formats' codes are small
// enough that several groups can be summed in int16 before widening. Q8_0's
// codes are full bytes, so it uses |w| x sign(w) x instead (no offset).
//
// Decode (one token) streams each block group by group, both row halves per
// broadcast activation, its sums in registers (decode_panel); tiles of
// several tokens unpack a block half once and reuse it for every token
// (tile_panel). Both take the same float step per block and token from the
// same exact integer sums (add_block), so a token's result does not depend
// on its batch.
//
// Compiled with AVX2 flags: everything stays in this namespace (see
// matmul_avx512.cpp).
#include "kernels/immintrin_quiet.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/panel.h"

namespace llmserve::kernels::avx2 {

namespace {

constexpr int kTokenBlock = 16;
constexpr int64_t kPrefetchBytes = 2048;  // see matmul_avx512.cpp

// Decode's software prefetch: every line of the panel, Format::
// kDecodePrefetchBytes ahead into L2, one prefetch beside each line's
// loads; a burst of a group's lines at the group's start (the tiles' way)
// streams slower. The distances are measured per format. Always inlined,
// as prefetch_group below: GCC 12 drops calls to a function (a lambda too)
// that only prefetches, judging it free of side effects.
template <class Format>
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* line) {
  _mm_prefetch(reinterpret_cast<const char*>(line + Format::kDecodePrefetchBytes), _MM_HINT_T1);
}
// A group's scale lines, from `meta` (its first): the same.
template <class Format>
[[gnu::always_inline]] inline void prefetch_scales(const uint8_t* meta) {
  constexpr QuantLayout layout = Format::kLayout;
  for (int64_t l = 0; l < layout.group_bytes - layout.group_blocks * layout.code_bytes; l += 64)
    prefetch_ahead<Format>(meta + l);
}

__m256 load_f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
__m256i load256(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }

__m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Lanes [0, n) set, for stores of a partial panel half.
__m256i lane_mask(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}

// Token t's results for rows 8 half .. 8 half + 7: where they go, and what
// its sums start from there (the earlier slices' sums, PanelArgs::resume,
// or 0). Rows past the panel's last valid one are neither read nor written.
float* y_half(const PanelArgs& a, int64_t t, int half) { return a.y + t * a.y_stride + 8 * half; }
__m256 start_half(const PanelArgs& a, int64_t t, int half) {
  const int rows = a.rows - 8 * half;
  if (!a.resume || rows <= 0) return _mm256_setzero_ps();
  return rows >= 8 ? _mm256_loadu_ps(y_half(a, t, half)) : _mm256_maskload_ps(y_half(a, t, half), lane_mask(rows));
}
void store_half(const PanelArgs& a, int64_t t, int half, __m256 v) {
  const int rows = a.rows - 8 * half;
  if (rows >= 8) _mm256_storeu_ps(y_half(a, t, half), v);
  else if (rows > 0) _mm256_maskstore_ps(y_half(a, t, half), lane_mask(rows), v);
}

float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

int hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

void quantize(const float* x, int64_t cols, Q8Act* out, int64_t out_stride) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQBlock; ++b, x += kQBlock) {
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
    const __m256 m01 = _mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1]));
    const __m256 m23 = _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3]));
    const float amax = hmax(_mm256_max_ps(m01, m23));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vid));  // nearest even
    // The packs work per 128-bit lane; the permute restores element order.
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    Q8Act& a = out[b * out_stride];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.qs),
                        _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const int s0 = hsum(_mm256_add_epi32(q[0], q[1])), s1 = hsum(_mm256_add_epi32(q[2], q[3]));
    a.d = amax / 127.0f;
    a.dsum_lo = a.d * static_cast<float>(s0);
    a.dsum_hi = a.d * static_cast<float>(s1);
    a.dsum = a.d * static_cast<float>(s0 + s1);
    a.neg128_sum = -128 * (s0 + s1);
    a.neg8_sum = -8 * (s0 + s1);
    a.neg32_sum_lo = -32 * s0;
    a.neg32_sum_hi = -32 * s1;
  }
}

// One panel half of one block (see avx512's Block): its scales, and its
// codes unpacked to one byte each.
struct Scales {
  __m256 s_lo, s_hi, m_lo, m_hi;
};
struct Block : Scales {
  __m256i g[8];
};

// One token's exact integer sums over one block and row half: groups 0-3
// and 4-7 apart for Q6_K, whose halves have scales of their own; the
// one-scale formats may sum everything into lo.
struct Sums {
  __m256i lo, hi;
};

void unpack_nibbles(const uint8_t* p, int half, __m256i* g) {
  const __m256i low4 = _mm256_set1_epi8(15);
  for (int j = 0; j < 4; ++j) {
    const __m256i v = load256(p + 64 * j + 32 * half);
    g[j] = _mm256_and_si256(v, low4);
    g[j + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
  }
}

// Codes small enough that maddubs cannot saturate: product pairs of
// `kInt16Groups` groups may be summed in int16 before widening.
__m256i dot_unsigned(const Block& k, int j, __m256i x) { return _mm256_maddubs_epi16(k.g[j], x); }

// Signed codes w times activations x.
__m256i dot_signed(__m256i w, __m256i x) { return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)); }
// The panel's Q8_0 codes (code + 128) as signed bytes.
__m256i load_signed(const uint8_t* p) { return _mm256_xor_si256(load256(p), _mm256_set1_epi8(static_cast<char>(0x80))); }

// Q4_0 and Q4_K decode: one block's nibble codes times one token, all 8
// groups summed in int16 before widening (8 * 2 * 15 * 127 < 32768), both
// row halves per broadcast.
template <class Format>
[[gnu::always_inline]] inline void nibble_sums(const uint8_t* codes, const Q8Act& x, Sums s[2]) {
  const __m256i low4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
  __m256i pairs[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int j = 0; j < 4; ++j) {
    prefetch_ahead<Format>(codes + 64 * j);
    const __m256i x_lo = broadcast4(x.qs + 4 * j), x_hi = broadcast4(x.qs + 4 * (j + 4));
    for (int h = 0; h < 2; ++h) {
      __m256i v = load256(codes + 64 * j + 32 * h);
      asm("" : "+x"(v));  // one load: GCC otherwise folds it into the AND too
      const __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(v, low4), x_lo);
      const __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), x_hi);
      pairs[h] = _mm256_add_epi16(pairs[h], _mm256_add_epi16(lo, hi));
    }
  }
  for (int h = 0; h < 2; ++h) s[h] = {_mm256_madd_epi16(pairs[h], ones), _mm256_setzero_si256()};
}

// Q8_0 and Q4_0: one f16 scale per row and block.
void load_d(const uint8_t* panel, const QuantLayout& layout, int64_t b, int half, Scales& k) {
  k.s_lo = load_f16x8(panel + layout.meta(b) + 16 * half);
}

// Per format: load_scales, one block half's scales; load, its codes too (a
// tile's operand); decode_sums, one token's Sums for the block, both row
// halves, each line of its codes prefetched ahead (prefetch_ahead).
// kFoldedOffset: the format's code offset is folded into the integer sums
// (offset()), and its float step is add_block's first; m_lo is then unused.
// kTwoPasses: a tile takes a block half's groups 0-3 for all its tokens,
// then groups 4-7 (load()'s j0), instead of all 8 at once. Q8_0's codes
// and their absolute values take two registers a group, and all 8 groups'
// spilled to the stack.
// kDecodePrefetchBytes: see prefetch_ahead.
struct Q8_0 {
  static constexpr const QuantLayout& kLayout = kQ8_0Layout;
  static constexpr bool kTwoScales = false, kFoldedOffset = true, kTwoPasses = true;
  static constexpr int kInt16Groups = 1;  // |w| <= 128: one pair sum is up to 32512
  static constexpr int64_t kDecodePrefetchBytes = 8192;
  static int32_t offset(const Q8Act&) { return 0; }  // codes made signed
  static void load_scales(const uint8_t* panel, int64_t b, int half, Scales& k) { load_d(panel, kLayout, b, half, k); }
  static void load(const uint8_t* panel, int64_t b, int half, int j0, Block& k) {
    for (int j = j0; j < j0 + 4; ++j) k.g[j] = load_signed(panel + kLayout.codes(b) + 64 * j + 32 * half);
    load_scales(panel, b, half, k);
  }
  static __m256i dot(const Block& k, int j, __m256i x) { return dot_signed(k.g[j], x); }
  static void decode_sums(const uint8_t* codes, const Q8Act& x, Sums s[2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    s[0] = s[1] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 8; ++j) {
      prefetch_ahead<Q8_0>(codes + 64 * j);
      const __m256i xj = broadcast4(x.qs + 4 * j);
      for (int h = 0; h < 2; ++h) {
        const __m256i w = load_signed(codes + 64 * j + 32 * h);
        s[h].lo = _mm256_add_epi32(s[h].lo, _mm256_madd_epi16(dot_signed(w, xj), ones));
      }
    }
  }
};

struct Q4_0 {
  static constexpr const QuantLayout& kLayout = kQ4_0Layout;
  static constexpr bool kTwoScales = false, kFoldedOffset = true, kTwoPasses = false;
  static constexpr int kInt16Groups = 4;  // 4 * 2 * 15 * 127 < 32768
  static constexpr int64_t kDecodePrefetchBytes = 2048;
  static int32_t offset(const Q8Act& x) { return x.neg8_sum; }
  static void load_scales(const uint8_t* panel, int64_t b, int half, Scales& k) { load_d(panel, kLayout, b, half, k); }
  static void load(const uint8_t* panel, int64_t b, int half, Block& k) {
    unpack_nibbles(panel + kLayout.codes(b), half, k.g);
    load_scales(panel, b, half, k);
  }
  static __m256i dot(const Block& k, int j, __m256i x) { return dot_unsigned(k, j, x); }
  static void decode_sums(const uint8_t* codes, const Q8Act& x, Sums s[2]) { nibble_sums<Q4_0>(codes, x, s); }
};

__m256 u8x8_to_ps(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
__m256 i8x8_to_ps(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

struct Q4_K {
  static constexpr const QuantLayout& kLayout = kQ4_KLayout;
  static constexpr bool kTwoScales = false, kFoldedOffset = false, kTwoPasses = false;
  static constexpr int kInt16Groups = 4;
  static constexpr int64_t kDecodePrefetchBytes = 2048;
  static void load_scales(const uint8_t* panel, int64_t b, int half, Scales& k) {
    const int64_t c = b % 8;
    const uint8_t* meta = panel + kLayout.meta(b);
    k.s_lo = _mm256_mul_ps(load_f16x8(meta + 16 * half), u8x8_to_ps(meta + kQ4_KSc + c * 16 + 8 * half));
    k.m_lo = _mm256_mul_ps(load_f16x8(meta + kQ4_KDmin + 16 * half), u8x8_to_ps(meta + kQ4_KM + c * 16 + 8 * half));
  }
  static void load(const uint8_t* panel, int64_t b, int half, Block& k) {
    unpack_nibbles(panel + kLayout.codes(b), half, k.g);
    load_scales(panel, b, half, k);
  }
  static __m256i dot(const Block& k, int j, __m256i x) { return dot_unsigned(k, j, x); }
  static void decode_sums(const uint8_t* codes, const Q8Act& x, Sums s[2]) { nibble_sums<Q4_K>(codes, x, s); }
};

struct Q6_K {
  static constexpr const QuantLayout& kLayout = kQ6_KLayout;
  static constexpr bool kTwoScales = true, kFoldedOffset = false, kTwoPasses = false;
  static constexpr int kInt16Groups = 2;  // 2 * 2 * 63 * 127 < 32768
  static constexpr int64_t kDecodePrefetchBytes = 2048;
  // Group 4 h + i's top two bits, from top-bit vector h, at bits 4-5.
  static __m256i top_bits(__m256i v, int i) {
    const __m256i shifted = i == 0 ? _mm256_slli_epi16(v, 4)
                            : i == 1 ? _mm256_slli_epi16(v, 2)
                            : i == 2 ? v
                                     : _mm256_srli_epi16(v, 2);
    return _mm256_and_si256(shifted, _mm256_set1_epi8(0x30));
  }
  static void load_scales(const uint8_t* panel, int64_t b, int half, Scales& k) {
    const int64_t c = b % 8;
    const uint8_t* meta = panel + kLayout.meta(b);
    const __m256 d = load_f16x8(meta + 16 * half);
    k.s_lo = _mm256_mul_ps(d, i8x8_to_ps(meta + kQ6_KSc + (2 * c) * 16 + 8 * half));
    k.s_hi = _mm256_mul_ps(d, i8x8_to_ps(meta + kQ6_KSc + (2 * c + 1) * 16 + 8 * half));
    k.m_lo = _mm256_mul_ps(k.s_lo, _mm256_set1_ps(32.0f));
    k.m_hi = _mm256_mul_ps(k.s_hi, _mm256_set1_ps(32.0f));
  }
  static void load(const uint8_t* panel, int64_t b, int half, Block& k) {
    const uint8_t* codes = panel + kLayout.codes(b);
    unpack_nibbles(codes, half, k.g);
    for (int h = 0; h < 2; ++h) {
      const __m256i v = load256(codes + 256 + 64 * h + 32 * half);
      for (int i = 0; i < 4; ++i) k.g[4 * h + i] = _mm256_or_si256(k.g[4 * h + i], top_bits(v, i));
    }
    load_scales(panel, b, half, k);
  }
  static __m256i dot(const Block& k, int j, __m256i x) { return dot_unsigned(k, j, x); }
  // Groups j and j + 4 come from nibble vector j; pairs of groups are
  // summed in int16 (kInt16Groups), lo and hi apart.
  static void decode_sums(const uint8_t* codes, const Q8Act& x, Sums s[2]) {
    const __m256i low4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    for (int l = 0; l < 6; ++l) prefetch_ahead<Q6_K>(codes + 64 * l);
    for (int h = 0; h < 2; ++h) {
      const __m256i top[2] = {load256(codes + 256 + 32 * h), load256(codes + 320 + 32 * h)};
      __m256i pairs[4];  // groups 0-1, 2-3, 4-5, 6-7
      for (int j = 0; j < 4; ++j) {
        const __m256i v = load256(codes + 64 * j + 32 * h);
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, low4), top_bits(top[0], j));
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), top_bits(top[1], j));
        const __m256i p_lo = _mm256_maddubs_epi16(lo, broadcast4(x.qs + 4 * j));
        const __m256i p_hi = _mm256_maddubs_epi16(hi, broadcast4(x.qs + 4 * (j + 4)));
        pairs[j / 2] = j % 2 ? _mm256_add_epi16(pairs[j / 2], p_lo) : p_lo;
        pairs[2 + j / 2] = j % 2 ? _mm256_add_epi16(pairs[2 + j / 2], p_hi) : p_hi;
      }
      s[h].lo = _mm256_add_epi32(_mm256_madd_epi16(pairs[0], ones), _mm256_madd_epi16(pairs[1], ones));
      s[h].hi = _mm256_add_epi32(_mm256_madd_epi16(pairs[2], ones), _mm256_madd_epi16(pairs[3], ones));
    }
  }
};

// Integer sum over groups j0..j0+3 for 8 rows.
template <class Format>
__m256i dot_groups(const Block& k, int j0, const int8_t* xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
  for (int j = j0; j < j0 + 4; j += Format::kInt16Groups) {
    __m256i pairs = Format::dot(k, j, broadcast4(xq + 4 * j));
    for (int u = 1; u < Format::kInt16Groups; ++u)
      pairs = _mm256_add_epi16(pairs, Format::dot(k, j + u, broadcast4(xq + 4 * (j + u))));
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
  }
  return sum;
}

// The float step of one block, token and row half from its exact integer
// sums: decode's and the tiles' alike, so a token's result does not depend
// on its batch.
template <class Format>
__m256 add_block(Sums s, const Scales& k, const Q8Act& x, __m256 out) {
  if constexpr (Format::kFoldedOffset) {
    const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(s.lo, s.hi), _mm256_set1_epi32(Format::offset(x)));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(k.s_lo, _mm256_set1_ps(x.d)), out);
  } else if constexpr (Format::kTwoScales) {
    const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s.hi), k.s_hi, _mm256_mul_ps(_mm256_cvtepi32_ps(s.lo), k.s_lo));
    out = _mm256_fmadd_ps(f, _mm256_set1_ps(x.d), out);
    out = _mm256_fnmadd_ps(k.m_lo, _mm256_set1_ps(x.dsum_lo), out);
    return _mm256_fnmadd_ps(k.m_hi, _mm256_set1_ps(x.dsum_hi), out);
  } else {
    const __m256 sum = _mm256_cvtepi32_ps(_mm256_add_epi32(s.lo, s.hi));
    out = _mm256_fmadd_ps(sum, _mm256_mul_ps(k.s_lo, _mm256_set1_ps(x.d)), out);
    return _mm256_fnmadd_ps(k.m_lo, _mm256_set1_ps(x.dsum), out);
  }
}

// Always inlined: as a function of its own GCC 12 found it free of side
// effects and dropped the calls, prefetches and all.
template <class Format>
[[gnu::always_inline]] inline void prefetch_group(const uint8_t* panel, int64_t b) {
  constexpr QuantLayout layout = Format::kLayout;
  if (b % layout.group_blocks == 0)
    for (int64_t l = 0; l < layout.group_bytes; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(panel + layout.codes(b) + kPrefetchBytes + l), _MM_HINT_T0);
}

// One token times one panel, a group at a time: the integer sums of its
// blocks, each broadcast activation serving both row halves, then their
// float steps. Held a block half at a time, as the tiles hold it, Q8_0's
// codes and their absolute values spilled to the stack. Faster than decode
// through the tiles, though decode from memory is bound by the stream more
// than by the arithmetic.
// The prefetches go in address order: the scale lines, which start every
// group (panel.h), then the codes; out of order they read slower.
template <class Format>
void decode_panel(const PanelArgs& a) {
  constexpr QuantLayout layout = Format::kLayout;
  static_assert(layout.meta_offset == 0, "the scale lines are prefetched first, as they come");
  constexpr int64_t kGroupBlocks = layout.group_blocks;
  const int64_t nb = a.cols / kQBlock;
  const Q8Act* x = act_row(a, 0).x;  // one token: its blocks are consecutive
  __m256 acc[2] = {start_half(a, 0, 0), start_half(a, 0, 1)};
  for (int64_t b0 = 0; b0 < nb; b0 += kGroupBlocks) {
    const int64_t n = std::min(kGroupBlocks, nb - b0);
    prefetch_scales<Format>(a.panel + layout.meta(b0));
    Sums s[kGroupBlocks][2];
    for (int64_t i = 0; i < n; ++i) Format::decode_sums(a.panel + layout.codes(b0 + i), x[b0 + i], s[i]);
    for (int64_t i = 0; i < n; ++i)
      for (int h = 0; h < 2; ++h) {
        Scales k;
        Format::load_scales(a.panel, b0 + i, h, k);
        acc[h] = add_block<Format>(s[i][h], k, x[b0 + i], acc[h]);
      }
  }
  for (int h = 0; h < 2; ++h) store_half(a, 0, h, acc[h]);
}

template <class Format>
void tile_panel(const PanelArgs& a) {
  const int64_t nb = a.cols / kQBlock;
  static_assert(kTokenBlock == kActGroup, "a tile is one group of activations");
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTokenBlock) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokenBlock, a.n_tokens - t0));
    const ActRow acts = act_row(a, t0);
    __m256 acc[kTokenBlock][2];
    for (int t = 0; t < nt; ++t)
      for (int half = 0; half < 2; ++half) acc[t][half] = start_half(a, t0 + t, half);
    for (int64_t b = 0; b < nb; ++b) {
      prefetch_group<Format>(a.panel, b);
      for (int half = 0; half < 2; ++half) {
        const Q8Act* x = acts.x + b * acts.block_stride;
        Block k;
        __m256i lo_sums[kTokenBlock];
        if constexpr (Format::kTwoPasses) {
          Format::load(a.panel, b, half, 0, k);
          for (int t = 0; t < nt; ++t) lo_sums[t] = dot_groups<Format>(k, 0, x[t].qs);
          Format::load(a.panel, b, half, 4, k);
        } else {
          Format::load(a.panel, b, half, k);
        }
        for (int t = 0; t < nt; ++t, ++x) {
          const __m256i lo = Format::kTwoPasses ? lo_sums[t] : dot_groups<Format>(k, 0, x->qs);
          acc[t][half] = add_block<Format>({lo, dot_groups<Format>(k, 4, x->qs)}, k, *x, acc[t][half]);
        }
      }
    }
    for (int t = 0; t < nt; ++t)
      for (int half = 0; half < 2; ++half) store_half(a, t0 + t, half, acc[t][half]);
  }
}

template <class Format>
void panel_quant(const PanelArgs& a) {
  if (a.n_tokens == 1) return decode_panel<Format>(a);
  tile_panel<Format>(a);
}

struct F32 {
  static __m256 load(const uint8_t* p, int64_t c, int half) {
    return _mm256_load_ps(reinterpret_cast<const float*>(p + c * 64 + 32 * half));
  }
};
struct F16 {
  static __m256 load(const uint8_t* p, int64_t c, int half) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p + c * 32 + 16 * half)));
  }
};
struct BF16 {
  static __m256 load(const uint8_t* p, int64_t c, int half) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + c * 32 + 16 * half)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
};

// T tokens x both halves in registers (16 ymm registers allow T <= 4). One
// chain per token and half whatever T is, so results do not depend on the
// batch (see matmul_avx512.cpp).
template <class Format, int T>
void float_tile(const PanelArgs& a, int64_t t0) {
  __m256 acc[T][2];
  for (int t = 0; t < T; ++t)
    for (int half = 0; half < 2; ++half) acc[t][half] = start_half(a, t0 + t, half);
  const float* x = static_cast<const float*>(a.x) + t0 * a.x_stride;
  for (int64_t c = 0; c < a.cols; ++c) {
    const __m256 w0 = Format::load(a.panel, c, 0), w1 = Format::load(a.panel, c, 1);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_set1_ps(x[t * a.x_stride + c]);
      acc[t][0] = _mm256_fmadd_ps(w0, xv, acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(w1, xv, acc[t][1]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int half = 0; half < 2; ++half) store_half(a, t0 + t, half, acc[t][half]);
}

constexpr int kFloatTokens = 4;

template <class Format, int... T>
void panel_float_impl(const PanelArgs& a, std::integer_sequence<int, T...>) {
  static constexpr void (*tiles[])(const PanelArgs&, int64_t) = {float_tile<Format, T + 1>...};
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kFloatTokens)
    tiles[std::min<int64_t>(kFloatTokens, a.n_tokens - t0) - 1](a, t0);
}

template <class Format>
void panel_float(const PanelArgs& a) {
  panel_float_impl<Format>(a, std::make_integer_sequence<int, kFloatTokens>());
}

}  // namespace

// The quantized kernels always prefetch (panel_quant), the float ones never:
// the same in both settings.
constexpr PanelKernels kPanels = {each_panel<panel_quant<Q8_0>>, each_panel<panel_quant<Q4_0>>,
                                  each_panel<panel_quant<Q4_K>>, each_panel<panel_quant<Q6_K>>,
                                  each_panel<panel_float<F32>>,  each_panel<panel_float<F16>>,
                                  each_panel<panel_float<BF16>>};
const MatmulKernels kMatmulKernels = {quantize, nullptr, {{kPanels, kPanels}, {kPanels, kPanels}}};

}  // namespace llmserve::kernels::avx2
