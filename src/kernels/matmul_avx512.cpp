// AVX-512 (F/BW/VL/DQ + VNNI) matmul kernels over the panel layout.
//
// Quantized: per 32-column block the 16 rows' codes are 8 vectors; each
// vpdpbusd multiplies one vector by 4 broadcast activation bytes, giving 16
// row sums at once. The integer sums become floats once per block:
//   acc += (S * d_x) * sum(code * q_x) - M * d_x * sum(q_x).
// Q8_0 and Q4_0, whose offset M is a fixed multiple of S, subtract it in the
// integers instead (Q8Act::neg128_sum starts a dot-product chain): three
// fewer float operations per block and token. Decode's arithmetic has to
// hide behind the memory stream, and prefill's is the bottleneck.
// A block's codes are unpacked once and reused for up to 16 tokens, which is
// what makes prefill and batched decode compute-bound instead of memory-bound.
// Float: one FMA per column updates 16 rows of a token.
//
// Compiled with AVX-512 flags: everything here stays in this namespace and
// in anonymous namespaces, so no inline function compiled for AVX-512 can be
// picked by the linker for code that runs on other CPUs.
#include "kernels/immintrin_quiet.h"

#include <algorithm>
#include <utility>

#include "kernels/panel.h"
#include "kernels/formats_avx512.h"

namespace llmserve::kernels::avx512 {

namespace {

// acc + u . (4 signed bytes at s, broadcast to every lane): vpdpbusd with a
// {1to16} memory operand, which GCC 12 does not fold _mm512_set1_epi32 of a
// load into; separate broadcasts cost decode and prefill measurably.
__m512i dot4(__m512i acc, __m512i u, const int8_t* s) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(s)));
  return acc;
}

// The kBytes of a panel at p, fetched kPrefetchBytes ahead of use, into L2
// or, kNta, non-temporally (cpu.h: prefetch_non_temporal()). Non-temporal
// only for tiles of one token, which read a panel once: tiles of several
// tokens reread a chunk's panels tile after tile, and NTA lines leave L2
// before the next tile reads them.
// The quantized kernels always prefetch (the hardware prefetchers alone
// fall behind on their streams), the float kernels when prefetch_weights()
// is on (cpu.h). Decode prefetches the codes line by line instead
// (formats_avx512.h: load_line).
// Always inlined: GCC 12 drops calls to a function that only prefetches,
// judging it free of side effects (it did so to matmul_avx2.cpp's).
template <int64_t kBytes, bool kNta>
[[gnu::always_inline]] inline void prefetch(const uint8_t* p) {
  for (int l = 0; l < kBytes; l += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + l), kNta ? _MM_HINT_NTA : _MM_HINT_T1);
}

// What token t's sums for panel i of the run start from: the earlier
// slices' sums (PanelArgs::resume) or 0.
__m512 start_sum(const PanelArgs& a, int64_t t, int64_t i = 0) {
  return a.resume ? _mm512_maskz_loadu_ps(row_mask(a, i), y_row(a, t, i)) : _mm512_setzero_ps();
}

void quantize(const float* x, int64_t cols, Q8Act* out, int64_t out_stride) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < cols / kQBlock; ++b, x += kQBlock) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    // Round to nearest even (MXCSR default), as the scalar kernel does.
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    Q8Act& a = out[b * out_stride];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.qs), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.qs + 16), _mm512_cvtepi32_epi8(q1));
    const int s0 = _mm512_reduce_add_epi32(q0), s1 = _mm512_reduce_add_epi32(q1);
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

// One block's integer products with one token's activations, as two
// chains that hide each other's latency: groups 0-3 added to lo, 4-7 to hi.
// Decode's form; several tokens interleave their chains instead
// (accumulate_tokens).
void dot_chains(const Block& k, const Q8Act* x, __m512i& lo, __m512i& hi) {
  for (int j = 0; j < 4; ++j) lo = dot4(lo, k.g[j], x->qs + 4 * j);
  for (int j = 4; j < 8; ++j) hi = dot4(hi, k.g[j], x->qs + 4 * j);
}

// Decode's (T = 1) integer sum for one block, its offset folded in: its
// Q4_0 high codes are 16 times over (nibbles_hi16), so the hi chain starts
// from Q8_0's offset (-128 = 16 x -8 per code) and is shifted down
// kHighShift bits once: exact, every term being a multiple of 16.
template <class Format>
__m512i folded_sum_one(const Block& k, const Q8Act* x) {
  __m512i lo = _mm512_setzero_si512(), hi = _mm512_set1_epi32(x->neg128_sum);
  dot_chains(k, x, lo, hi);
  return _mm512_add_epi32(lo, _mm512_srai_epi32(hi, Format::kHighShift));
}

// Adds one block's products with one token's activations x to acc.
// Every token goes through the same float operations whatever the batch,
// and its integer sums are exact, so a token's result does not depend on
// the batch it came in (batched decode must give the tokens that decoding
// alone gives).
template <class Format, int T>
void accumulate_block(const Block& k, const Q8Act* x, __m512& acc) {
  static_assert(T == 1 || !Format::kFoldedOffset, "several tokens go through accumulate_tokens");
  if constexpr (Format::kTwoScales) {
    __m512i lo = _mm512_set1_epi32(Format::offset_lo(*x)), hi = _mm512_set1_epi32(Format::offset_hi(*x));
    dot_chains(k, x, lo, hi);
    add_scaled_halves(lo, hi, k, *x, acc);
  } else if constexpr (Format::kFoldedOffset) {
    add_scaled<Format>(folded_sum_one<Format>(k, x), k, *x, acc);
  } else {
    __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
    dot_chains(k, x, lo, hi);
    add_scaled<Format>(_mm512_add_epi32(lo, hi), k, *x, acc);
  }
}

// Adds one block's products with T tokens' activations (token t's at
// x + t) to acc. With several tokens, formats with one scale
// per block sum each token's integers in one chain through the 8 groups,
// with the groups as the outer loop: consecutive vpdpbusd belong to
// different tokens, so none waits for the one before it, and no second
// chain is left to add. Token by token, as decode does it, the compiler
// kept only two tokens' chains in flight at a time. The sum is
// exact, so it is the integer decode's chains give, and the float steps
// after it are decode's (add_scaled): a token's result does not depend on
// its batch. Q6_K sums each half in a chain of its own, token after token.
template <class Format, int T>
[[gnu::always_inline]] inline void accumulate_tokens(const Block& k, const Q8Act* x, __m512* acc) {
  if constexpr (T > 1 && Format::kTwoScales) {
    __m512i lo[T], hi[T];
    for (int t = 0; t < T; ++t) {
      lo[t] = _mm512_set1_epi32(Format::offset_lo(x[t]));
      hi[t] = _mm512_set1_epi32(Format::offset_hi(x[t]));
    }
    for (int j = 0; j < 4; ++j)
      for (int t = 0; t < T; ++t) lo[t] = dot4(lo[t], k.g[j], x[t].qs + 4 * j);
    for (int j = 4; j < 8; ++j)
      for (int t = 0; t < T; ++t) hi[t] = dot4(hi[t], k.g[j], x[t].qs + 4 * j);
    for (int t = 0; t < T; ++t) add_scaled_halves(lo[t], hi[t], k, x[t], acc[t]);
  } else if constexpr (T > 1) {
    __m512i sum[T];
    for (int t = 0; t < T; ++t) {
      if constexpr (Format::kFoldedOffset) sum[t] = _mm512_set1_epi32(Format::offset(x[t]));
      else sum[t] = _mm512_setzero_si512();
    }
    for (int j = 0; j < 8; ++j)
      for (int t = 0; t < T; ++t) sum[t] = dot4(sum[t], k.g[j], x[t].qs + 4 * j);
    for (int t = 0; t < T; ++t) add_scaled<Format>(sum[t], k, x[t], acc[t]);
  } else {
    for (int t = 0; t < T; ++t) accumulate_block<Format, T>(k, x + t, acc[t]);
  }
}

// T tokens starting at t0, all in one group of activations (act_row). The
// int32 sums of a block live in registers; across blocks, one token's
// float accumulators stay in registers, several tokens' in memory: loads
// and stores have ports of their own, the vector ports are what prefill
// is short of, and 16 tokens' sums plus a block's 8 code vectors fill the
// registers. The panel is walked group by group, so a
// block's offsets within its group are constants: index arithmetic in the
// loop cost decode measurably.
template <class Format, bool kNta, int T>
void quant_tile(const PanelArgs& a, int64_t t0) {
  constexpr QuantLayout layout = Format::kLayout;
  constexpr int64_t kGroupBlocks = layout.group_blocks;
  // Decode prefetches the codes line by line as it loads them (load_line).
  constexpr int kLineHint = T == 1 ? (kNta ? _MM_HINT_NTA : _MM_HINT_T1) : -1;
  const int64_t nb = a.cols / kQBlock;
  const ActRow acts = act_row(a, t0);
  // A lone token is a group of its own (see panel_quant_impl): its blocks
  // are adjacent.
  const int64_t bs = T == 1 ? 1 : acts.block_stride;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = start_sum(a, t0 + t);
  const uint8_t* group = a.panel;
  const Q8Act* x = acts.x;
  for (int64_t b0 = 0; b0 < nb; b0 += kGroupBlocks, group += layout.group_bytes, x += kGroupBlocks * bs)
    for (int64_t i = 0; i < kGroupBlocks && b0 + i < nb; ++i) {
      // The group's scales, which no load_line reads, at its first block;
      // tiles of several tokens also each block's codes at once, not NTA
      // (see prefetch), block by block rather than the whole group at its
      // first block. Issued from inside the block loop: written before it,
      // GCC 12 kept it for the first group only.
      if (i == 0) prefetch<layout.meta_bytes(), kNta && T == 1>(group + layout.meta_offset);
      if constexpr (T > 1) {
        prefetch<layout.code_bytes, false>(group + layout.codes_offset + i * layout.code_bytes);
        asm("" : "+m"(acc));  // in memory (see above)
      }
      Block k;
      if constexpr (kLineHint >= 0) Format::template load<T, kLineHint>(group, i, k);
      else Format::template load<T>(group, i, k);
      accumulate_tokens<Format, T>(k, x + i * bs, acc);
    }
  for (int t = 0; t < T; ++t) store(a, t0 + t, acc[t]);
}

// Each group of activations (kActGroup tokens) in tiles of as even a size
// as Format::kTileTokens allows; a tile of one token only for a group of
// one.
template <class Format, bool kNta, int... T>
void panel_quant_impl(const PanelArgs& a, std::integer_sequence<int, T...>) {
  static constexpr void (*tiles[])(const PanelArgs&, int64_t) = {quant_tile<Format, kNta, T + 1>...};
  for (int64_t g0 = 0; g0 < a.n_tokens; g0 += kActGroup) {
    const int64_t w = act_group_width(g0, a.n_tokens), n_tiles = (w + Format::kTileTokens - 1) / Format::kTileTokens;
    for (int64_t i = 0; i < n_tiles; ++i) {
      const int64_t t0 = g0 + w * i / n_tiles, t1 = g0 + w * (i + 1) / n_tiles;
      tiles[t1 - t0 - 1](a, t0);
    }
  }
}

template <class Format, bool kNta>
void panel_quant(const PanelArgs& a) {
  static_assert(Format::kTileTokens >= 2 && Format::kTileTokens <= kActGroup);
  panel_quant_impl<Format, kNta>(a, std::make_integer_sequence<int, Format::kTileTokens>());
}

// Panels [p0, p0 + P) of the run x T tokens starting at t0, all in
// registers: each broadcast activation feeds the P panels' FMAs, which
// halves the loads per FMA (two panels of six tokens run faster than one
// panel of eight, close to the FMA peak from L2). The columns alternate between
// two chains per token, which halves the FMA latency decode sees; the same
// for every T and P, so results do not depend on the batch (see quant_tile).
template <class Format, bool kPrefetch, bool kNta, int P, int T>
void float_tile(const PanelArgs& a, int64_t p0, int64_t t0) {
  constexpr int C = 2;
  __m512 acc[C][P][T];
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < T; ++t) {
      acc[0][p][t] = start_sum(a, t0 + t, p0 + p);
      for (int u = 1; u < C; ++u) acc[u][p][t] = _mm512_setzero_ps();
    }
  const uint8_t* panel = a.panel + p0 * a.panel_stride;
  const float* x = static_cast<const float*>(a.x) + t0 * a.x_stride;
  const int64_t xs = a.x_stride;
  auto column = [&](int u, int64_t c) {
    __m512 w[P];
    for (int p = 0; p < P; ++p) w[p] = Format::load(panel + p * a.panel_stride, c);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_set1_ps(x[t * xs + c]);
      for (int p = 0; p < P; ++p) acc[u][p][t] = _mm512_fmadd_ps(w[p], xv, acc[u][p][t]);
    }
  };
  int64_t c = 0;
  for (; c + C <= a.cols; c += C) {
    if (kPrefetch)
      for (int p = 0; p < P; ++p) {
        const uint8_t* column_pair = panel + p * a.panel_stride + c * Format::kColumnBytes;
        prefetch<C * Format::kColumnBytes, kNta && P == 1 && T == 1>(column_pair);
      }
    for (int u = 0; u < C; ++u) column(u, c + u);
  }
  for (; c < a.cols; ++c) column(0, c);
  for (int p = 0; p < P; ++p)
    for (int t = 0; t < T; ++t) {
      __m512 sum = acc[0][p][t];
      for (int u = 1; u < C; ++u) sum = _mm512_add_ps(sum, acc[u][p][t]);
      store(a, t0 + t, sum, p0 + p);
    }
}

// Two panels x six tokens: 24 accumulators, the two weight vectors and a
// broadcast fit the 32 registers. Decode (one token) streams one panel at
// a time, the stream the hardware prefetchers follow best.
constexpr int kFloatPanels = 2, kFloatTokens = 6;

template <class Format, bool kPrefetch, bool kNta, int... T>
void panel_float_impl(const PanelArgs& a, std::integer_sequence<int, T...>) {
  static constexpr void (*tiles[kFloatPanels][kFloatTokens])(const PanelArgs&, int64_t, int64_t) = {
      {float_tile<Format, kPrefetch, kNta, 1, T + 1>...}, {float_tile<Format, kPrefetch, kNta, 2, T + 1>...}};
  const int64_t panels_per_tile = a.n_tokens > 1 ? kFloatPanels : 1;
  // Tiles of as even a size as kFloatTokens allows: 32 tokens as 6+6+5+5+5+5,
  // not 6 x 5 + 2, whose small last tile runs far below the others' rate.
  const int64_t n_tiles = (a.n_tokens + kFloatTokens - 1) / kFloatTokens;
  for (int64_t p0 = 0; p0 < a.n_panels; p0 += panels_per_tile) {
    const int64_t np = std::min(panels_per_tile, a.n_panels - p0);
    for (int64_t i = 0; i < n_tiles; ++i) {
      const int64_t t0 = a.n_tokens * i / n_tiles, t1 = a.n_tokens * (i + 1) / n_tiles;
      tiles[np - 1][t1 - t0 - 1](a, p0, t0);
    }
  }
}

template <class Format, bool kPrefetch, bool kNta>
void panel_float(const PanelArgs& a) {
  panel_float_impl<Format, kPrefetch, kNta>(a, std::make_integer_sequence<int, kFloatTokens>());
}

template <class Format>
void widen_panel(const uint8_t* panel, int64_t cols, float* out) {
  for (int64_t c = 0; c < cols; ++c) _mm512_store_ps(out + c * kPanelRows, Format::load(panel, c));
}

void widen(PanelFormat from, const uint8_t* panel, int64_t cols, float* out) {
  if (from == PanelFormat::f16) widen_panel<F16>(panel, cols, out);
  else widen_panel<BF16>(panel, cols, out);
}

template <bool kPrefetch, bool kNta>
constexpr PanelKernels kPanels = {
    each_panel<panel_quant<Q8_0, kNta>>, each_panel<panel_quant<Q4_0, kNta>>,
    each_panel<panel_quant<Q4_K, kNta>>, each_panel<panel_quant<Q6_K, kNta>>,
    panel_float<F32, kPrefetch, kNta>,             panel_float<F16, kPrefetch, kNta>,
    panel_float<BF16, kPrefetch, kNta>};

}  // namespace

const MatmulKernels kMatmulKernels = {
    quantize,
    widen,
    {{kPanels<false, false>, kPanels<false, true>}, {kPanels<true, false>, kPanels<true, true>}}};

}  // namespace llmserve::kernels::avx512
