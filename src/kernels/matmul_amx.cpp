// The AMX tile kernels (matmul.h, panel.h: namespace amx), for tokens in
// whole groups of 16.
//
// AMX-INT8, quantized weights: each tdpbsud multiplies 16 tokens x 32
// columns of int8 activations (an A tile, read in place from the Q8Act
// blocks) by 32 columns x 16 weight rows of unsigned codes (a B tile) into
// 16 x 16 int32 sums (a C tile): one block of the VNNI kernels' integer
// sums for 16 tokens and 16 rows, the work of 128 vpdpbusd. Every block has
// scales of its own, so each block's C tiles go through the VNNI kernels'
// float steps (formats_avx512.h) before the next: the same integers, the
// same float operations in the same order, hence the same bits whichever
// path a token takes.
//
// AMX-BF16, f16 and bf16 weights: tdpbf16ps on bf16 parts of the weights
// and activations (panel.h: bf16_weight_parts), f32 sums.
//
// With 8 tile registers the kernels hold 2 x 2 C tiles (two token groups by
// two panels; Q6_K's two half-block sums, two groups by one panel) and
// load one A or B tile per product. The unpacked panels and the
// activations come from L2: the chunk unpacked them a moment before
// (matmul.cpp).
//
// Compiled with -mamx-tile -mamx-int8 -mamx-bf16 -mavx512bf16 on top of
// the AVX-512 flags and run only where use_amx() (cpu.h) says the CPU and
// OS allow it.
#include "kernels/immintrin_quiet.h"

#include <array>

#include "kernels/formats_avx512.h"
#include "kernels/panel.h"

namespace llmserve::kernels::amx {

namespace {

using avx512::Block;
static_assert(sizeof(Block) == kInt8BlockBytes);

// Palette 1: C tiles 0-3 of 16 rows x 64 bytes, A tiles 4-5 of 16 rows x
// a_bytes, B tiles 6-7 of b_rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles(int a_bytes, int b_rows) {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    const bool a = i == 4 || i == 5, b = i >= 6;
    cfg.rows[i] = static_cast<uint8_t>(b ? b_rows : 16);
    cfg.colsb[i] = static_cast<uint16_t>(a ? a_bytes : 64);
  }
  _tile_loadconfig(&cfg);
}

// Tile instructions with the tile numbers as template arguments: GCC's
// intrinsics are macros that paste literal numbers into the assembly.
template <int T>
void tile_load(const void* p, int64_t stride) {
  asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(p), "r"(stride), "i"(T) : "memory");
}
template <int T>
void tile_store(void* p, int64_t stride) {
  asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(p), "r"(stride), "i"(T) : "memory");
}
template <int C, int A, int B>
void tile_dpbssd_zeroed() {  // C = A . B, int8 x int8 into int32
  asm volatile("tilezero %%tmm%c0\n\ttdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
}

// ---- AMX-INT8 ----

// A block's codes as signed bytes: code - M / S for the formats that fold
// their offset into the integers (Q8_0 code - 128 = qs, Q4_0 code - 8, Q6_K
// code - 32), so that tdpbssd's sums are the VNNI kernels' sums with the
// offset term added (accumulate_tokens starts them at Q8Act's neg128_sum,
// ...); Q4_K's codes (0-15) as they are.
template <class Format>
void unpack_format(const uint8_t* panel, int64_t cols, Block* out) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    Block k{};
    Format::template load<kActGroup>(panel, b, k);
    if constexpr (Format::kFoldedOffset) {
      const __m512i zero = _mm512_set1_epi8(static_cast<char>(static_cast<int>(Format::kCodeZero)));
      for (__m512i& g : k.g) g = _mm512_sub_epi8(g, zero);
    }
    out[b] = k;
  }
}

// The kernel walks a run of at most kInt8MaxPanels panels times one or two
// groups of 16 tokens (G) in units of one block of one panel, b-major: the
// activations' A tiles are loaded once per block and shared by its panels.
// A unit's C tiles: one per group, or, for Q6_K (a scale per 16 columns),
// one per half block for one group.
template <class Format, int G>
constexpr int kUnitSums = Format::kTwoScales ? 2 : G;

// Block b's A tiles (4, and 5 for a second group or Q6_K's second half),
// from groups' block-major activations (x[g][b * 16 + t], token t).
template <class Format, int G>
void load_activations(const Q8Act* const (&x)[G], int64_t b) {
  if constexpr (Format::kTwoScales) {
    tile_load<4>(x[0][b * kActGroup].qs, sizeof(Q8Act));
    tile_load<5>(x[0][b * kActGroup].qs + kQBlock / 2, sizeof(Q8Act));
  } else {
    tile_load<4>(x[0][b * kActGroup].qs, sizeof(Q8Act));
    if constexpr (G == 2) tile_load<5>(x[1][b * kActGroup].qs, sizeof(Q8Act));
  }
}

// One unit's int32 sums, block k of a panel against the loaded A tiles,
// into C tiles 2 Set and 2 Set + 1 (B tiles 6-7).
template <class Format, int G, int Set>
void unit_sums(const Block& k) {
  constexpr int c = 2 * Set;
  if constexpr (Format::kTwoScales) {
    tile_load<6>(k.g, 64);
    tile_load<7>(k.g + 4, 64);
    tile_dpbssd_zeroed<c, 4, 6>();
    tile_dpbssd_zeroed<c + 1, 5, 7>();
  } else {
    tile_load<6>(k.g, 64);
    tile_dpbssd_zeroed<c, 4, 6>();
    if constexpr (G == 2) tile_dpbssd_zeroed<c + 1, 5, 6>();
  }
}

// The run's panels times token groups [g0, g0 + G), every block.
// Software-pipelined: unit u + 1's products are issued before unit
// u's sums are stored, and those are read back one unit later, after unit
// u - 1's float steps, so nothing waits for a tile store to land. Two sets
// of C tiles, for even and odd units: storing and reading back a block's
// tiles at once measured slower. The tile unit and the float steps still
// barely overlap.
template <class Format, int G>
void int8_groups(const PanelArgs& a, int64_t g0) {
  constexpr int kN = kUnitSums<Format, G>;
  const int64_t nb = a.cols / kQBlock, np = a.n_panels, units = nb * np;
  auto block = [&](int64_t p, int64_t b) -> const Block& {
    return reinterpret_cast<const Block*>(a.panel + p * a.panel_stride)[b];
  };
  const Q8Act* x[G];
  for (int g = 0; g < G; ++g) x[g] = act_row(a, (g0 + g) * kActGroup).x;
  __m512 acc[kInt8MaxPanels][G][kActGroup];
  for (int64_t p = 0; p < np; ++p)
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < kActGroup; ++t) acc[p][g][t] = _mm512_setzero_ps();
  alignas(64) int32_t c[2][kN][16][16];  // by unit parity

  // Unit (b, p): block b of panel p, in order b-major; its sums go to
  // tile set and buffer c[u & 1] for the unit's index u.
  struct Unit {
    int64_t b = 0, p = 0;
  };
  auto next = [np](Unit u) { return ++u.p == np ? Unit{u.b + 1, 0} : u; };
  // The VNNI kernels' float steps (accumulate_tokens) on the same sums.
  auto float_steps = [&](Unit u, int parity) {
    const int32_t(&cu)[kN][16][16] = c[parity];
    const Block& k = block(u.p, u.b);
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < kActGroup; ++t) {
        const Q8Act& xt = x[g][u.b * kActGroup + t];
        if constexpr (Format::kTwoScales)
          avx512::add_scaled_halves(_mm512_load_si512(cu[0][t]), _mm512_load_si512(cu[1][t]), k, xt, acc[u.p][g][t]);
        else
          avx512::add_scaled<Format>(_mm512_load_si512(cu[g][t]), k, xt, acc[u.p][g][t]);
      }
  };
  auto issue = [&]<int S>(Unit u) {
    if (u.p == 0) load_activations<Format, G>(x, u.b);
    unit_sums<Format, G, S>(block(u.p, u.b));
  };
  // Unit i's sums are in tile set S: issue i + 1's, store i's, and take
  // i - 1's float steps.
  Unit prev, cur;
  auto step = [&]<int S>(int64_t i) {
    const Unit following = next(cur);
    if (i + 1 < units) issue.template operator()<1 - S>(following);
    tile_store<2 * S>(c[S][0], 64);
    if constexpr (kN == 2) tile_store<2 * S + 1>(c[S][1], 64);
    if (i > 0) float_steps(prev, 1 - S);
    prev = cur;
    cur = following;
  };
  issue.template operator()<0>(cur);
  for (int64_t i = 0; i < units; i += 2) {
    step.template operator()<0>(i);
    if (i + 1 < units) step.template operator()<1>(i + 1);
  }
  float_steps(prev, (units - 1) & 1);
  for (int64_t p = 0; p < np; ++p)
    for (int g = 0; g < G; ++g)
      for (int t = 0; t < kActGroup; ++t)
        avx512::store(a, (g0 + g) * kActGroup + t, acc[p][g][t], p);
}

template <class Format>
void int8_format(const PanelArgs& a) {
  constexpr int kHalf = Format::kTwoScales ? 2 : 1;
  configure_tiles(kQBlock / kHalf, 8 / kHalf);
  const int64_t groups = a.n_tokens / kActGroup;
  for (int64_t g0 = 0; g0 < groups;) {
    if (!Format::kTwoScales && g0 + 1 < groups) {
      int8_groups<Format, 2>(a, g0);
      g0 += 2;
    } else {
      int8_groups<Format, 1>(a, g0);
      g0 += 1;
    }
  }
  // Back to the init state: a context switch then saves no tile data.
  _tile_release();
}

// ---- AMX-BF16 ----

// vcvtne2ps2bf16 rounds to nearest even.
__m512i to_bf16(__m512 lo, __m512 hi) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));  // lo's 16 values, then hi's
}

// w rounded to bf16 (nearest even), as floats: w minus it is exact in f32.
__m512 round_to_bf16(__m512 w) {
  const __m256i bits = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(w));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// B tile rows 2j and 2j + 1 (32 values each) from four vectors of 16 rows'
// values, w[i] holding column 4j + i: pairs of columns interleaved row by
// row (Bf16Panels).
void store_pairs(const __m512 (&w)[4], uint16_t* rows) {
  alignas(64) static constexpr auto kPairs = [] {
    std::array<uint16_t, 32> idx{};  // word 2r <- column a's row r, 2r + 1 <- column b's
    for (int i = 0; i < 32; ++i) idx[i] = static_cast<uint16_t>(i % 2 * 16 + i / 2);
    return idx;
  }();
  const __m512i pairs = _mm512_load_si512(kPairs.data());
  for (int h = 0; h < 2; ++h)
    _mm512_store_si512(rows + h * 32, _mm512_permutexvar_epi16(pairs, to_bf16(w[2 * h], w[2 * h + 1])));
}

// An f16 panel's block b (columns [32 b, 32 b + 32) of [cols][16] values)
// as two B tiles, each weight's bf16 rounding and the rest, which sum to
// it exactly (an f16 value has 11 significant bits).
void split_f16(const uint8_t* panel, int64_t cols, uint16_t* out) {
  for (int64_t b = 0; b < cols / kQBlock; ++b, out += 2 * kBf16TileValues)
    for (int j = 0; j < 8; ++j) {
      __m512 high[4], rest[4];
      for (int i = 0; i < 4; ++i) {
        const __m512 w = avx512::F16::load(panel, b * kQBlock + 4 * j + i);
        high[i] = round_to_bf16(w);
        rest[i] = _mm512_sub_ps(w, high[i]);
      }
      store_pairs(high, out + 2 * j * 32);
      store_pairs(rest, out + kBf16TileValues + 2 * j * 32);
    }
}

// A bf16 panel's block b as one B tile, the values as they are.
void bf16_tile(const uint8_t* panel, int64_t cols, uint16_t* out) {
  for (int64_t b = 0; b < cols / kQBlock; ++b, out += kBf16TileValues)
    for (int j = 0; j < 8; ++j) {
      __m512 w[4];
      for (int i = 0; i < 4; ++i) w[i] = avx512::BF16::load(panel, b * kQBlock + 4 * j + i);
      store_pairs(w, out + 2 * j * 32);
    }
}

// A C tile, stored to c, to y: the token group's valid tokens, the panel's
// valid rows.
void write_c(const Bf16Panels& a, const float (*c)[16], int64_t group, int64_t panel) {
  const int rows = panel + 1 == a.n_panels ? a.rows : kPanelRows;
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  for (int64_t m = 0, t = group * 16; m < 16 && t < a.n_tokens; ++m, ++t)
    _mm512_mask_storeu_ps(a.y + t * a.y_stride + panel * kPanelRows, mask, _mm512_load_ps(c[m]));
}

// Panels [p0, p0 + P) times token groups [g0, g0 + G), every column. Each
// block's activations come as high and low parts, its weights in W parts,
// and each C tile takes the products of high x high and of each low part
// with the other side's high part: three for f16 weights, two for bf16
// ones; the low x low term is below the f32 sum's own rounding. C tiles 0-3
// (2g + p), A tiles 4-5, B tiles 6-7.
template <int P, int G, int W>
void bf16_tile_block(const Bf16Panels& a, int64_t p0, int64_t g0) {
  constexpr int64_t kXBlock = 2 * kBf16TileValues, kWBlock = W * kBf16TileValues;  // a block's tiles
  const uint16_t* w0 = a.w + p0 * a.nb * kWBlock;
  const uint16_t* w1 = w0 + a.nb * kWBlock;
  const uint16_t* x0 = a.x + g0 * a.nb * kXBlock;
  const uint16_t* x1 = x0 + a.nb * kXBlock;
  _tile_zero(0);
  if constexpr (P == 2) _tile_zero(1);
  if constexpr (G == 2) _tile_zero(2);
  if constexpr (P == 2 && G == 2) _tile_zero(3);
  for (int64_t b = 0; b < a.nb; ++b)
    for (int xp = 0; xp < 2; ++xp) {
      const int64_t xo = b * kXBlock + xp * kBf16TileValues;
      _tile_loadd(4, x0 + xo, 64);
      if constexpr (G == 2) _tile_loadd(5, x1 + xo, 64);
      for (int wp = 0; wp < W && xp + wp < 2; ++wp) {
        const int64_t wo = b * kWBlock + wp * kBf16TileValues;
        _tile_loadd(6, w0 + wo, 64);
        _tile_dpbf16ps(0, 4, 6);
        if constexpr (G == 2) _tile_dpbf16ps(2, 5, 6);
        if constexpr (P == 2) {
          _tile_loadd(7, w1 + wo, 64);
          _tile_dpbf16ps(1, 4, 7);
          if constexpr (G == 2) _tile_dpbf16ps(3, 5, 7);
        }
      }
    }
  alignas(64) float c[16][16];
  _tile_stored(0, c, 64);
  write_c(a, c, g0, p0);
  if constexpr (P == 2) {
    _tile_stored(1, c, 64);
    write_c(a, c, g0, p0 + 1);
  }
  if constexpr (G == 2) {
    _tile_stored(2, c, 64);
    write_c(a, c, g0 + 1, p0);
  }
  if constexpr (P == 2 && G == 2) {
    _tile_stored(3, c, 64);
    write_c(a, c, g0 + 1, p0 + 1);
  }
}

template <int W>
void bf16_panels_parts(const Bf16Panels& a) {
  const int64_t groups = (a.n_tokens + 15) / 16;
  for (int64_t p0 = 0; p0 < a.n_panels; p0 += 2)
    for (int64_t g0 = 0; g0 < groups; g0 += 2) {
      const bool two_panels = p0 + 1 < a.n_panels, two_groups = g0 + 1 < groups;
      if (two_panels && two_groups) bf16_tile_block<2, 2, W>(a, p0, g0);
      else if (two_panels) bf16_tile_block<2, 1, W>(a, p0, g0);
      else if (two_groups) bf16_tile_block<1, 2, W>(a, p0, g0);
      else bf16_tile_block<1, 1, W>(a, p0, g0);
    }
}

}  // namespace

void unpack_int8(PanelFormat format, const uint8_t* panel, int64_t cols, uint8_t* out) {
  Block* blocks = reinterpret_cast<Block*>(out);
  switch (format) {
    case PanelFormat::q8_0: return unpack_format<avx512::Q8_0>(panel, cols, blocks);
    case PanelFormat::q4_0: return unpack_format<avx512::Q4_0>(panel, cols, blocks);
    case PanelFormat::q4_k: return unpack_format<avx512::Q4_K>(panel, cols, blocks);
    case PanelFormat::q6_k: return unpack_format<avx512::Q6_K>(panel, cols, blocks);
    default: break;  // not quantized: the int8 path never sees it
  }
}

void int8_panels(PanelFormat format, const PanelArgs& args) {
  switch (format) {
    case PanelFormat::q8_0: return int8_format<avx512::Q8_0>(args);
    case PanelFormat::q4_0: return int8_format<avx512::Q4_0>(args);
    case PanelFormat::q4_k: return int8_format<avx512::Q4_K>(args);
    case PanelFormat::q6_k: return int8_format<avx512::Q6_K>(args);
    default: break;
  }
}

void row_to_bf16(const float* x, int64_t cols, uint16_t* out) {
  for (int64_t b = 0; b < cols / kQBlock; ++b, x += kQBlock, out += 2 * kBf16TileValues) {
    const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
    const __m512 lo_high = round_to_bf16(lo), hi_high = round_to_bf16(hi);
    _mm512_store_si512(out, to_bf16(lo_high, hi_high));
    _mm512_store_si512(out + kBf16TileValues, to_bf16(_mm512_sub_ps(lo, lo_high), _mm512_sub_ps(hi, hi_high)));
  }
}

void split_bf16(PanelFormat format, const uint8_t* panel, int64_t cols, uint16_t* out) {
  if (format == PanelFormat::f16) split_f16(panel, cols, out);
  else bf16_tile(panel, cols, out);
}

void bf16_panels(const Bf16Panels& a) {
  configure_tiles(64, 16);
  if (a.w_parts == 2) bf16_panels_parts<2>(a);
  else bf16_panels_parts<1>(a);
  _tile_release();
}

}  // namespace llmserve::kernels::amx
