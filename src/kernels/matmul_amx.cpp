// AMX-BF16 tile kernel for prompt tokens (matmul.h, panel.h: Bf16Panels).
// Each tdpbf16ps multiplies 16 tokens x 32 columns of bf16 activations (an
// A tile) by 32 columns x 16 weight rows (a B tile) into 16 x 16 f32 sums
// (a C tile), the work of 128 vpdpbusd. With 8 tile registers the kernel
// holds 2 x 2 C tiles (two token groups by two panels) and loads one A or B
// tile per product (quantized weights; f16 and bf16 weights' tiles come in
// parts, see tile_block). The dequantized panels and the activations come
// from L2: the chunk dequantized them a moment before (matmul.cpp).
//
// Compiled with -mamx-tile -mamx-bf16 on top of the AVX-512 flags and run
// only where use_amx_bf16() (cpu.h) says the CPU and OS allow it.
#include "kernels/immintrin_quiet.h"

#include "kernels/panel.h"

namespace llmserve::kernels::amx {

namespace {

// Palette 1, every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure_tiles() {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
}

// A C tile, stored to c, to y: the token group's valid tokens, the panel's
// valid rows.
void write_c(const Bf16Panels& a, const float (*c)[16], int64_t group, int64_t panel) {
  const int rows = panel + 1 == a.n_panels ? a.rows : kPanelRows;
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  for (int64_t m = 0, t = group * 16; m < 16 && t < a.n_tokens; ++m, ++t)
    _mm512_mask_storeu_ps(a.y + t * a.y_stride + panel * kPanelRows, mask, _mm512_load_ps(c[m]));
}

// Panels [p0, p0 + P) times token groups [g0, g0 + G), every column. With
// two parts of a side (panel.h: bf16_parts; X activation parts, W weight
// parts) each block's tiles of that side come as high and low parts, and
// each C tile takes the products of high x high and of each low part with
// the other side's high part: three for f16 weights, two for bf16 ones;
// the low x low term is below the f32 sum's own rounding. Tile numbers are
// immediates, hence the template: C tiles 0-3 (2g + p), A tiles 4-5, B
// tiles 6-7.
template <int P, int G, int X, int W>
void tile_block(const Bf16Panels& a, int64_t p0, int64_t g0) {
  constexpr int64_t kXBlock = X * kBf16TileValues, kWBlock = W * kBf16TileValues;  // a block's tiles
  const uint16_t* w0 = a.w + p0 * a.nb * kWBlock;
  const uint16_t* w1 = w0 + a.nb * kWBlock;
  const uint16_t* x0 = a.x + g0 * a.nb * kXBlock;
  const uint16_t* x1 = x0 + a.nb * kXBlock;
  _tile_zero(0);
  if constexpr (P == 2) _tile_zero(1);
  if constexpr (G == 2) _tile_zero(2);
  if constexpr (P == 2 && G == 2) _tile_zero(3);
  for (int64_t b = 0; b < a.nb; ++b)
    for (int xp = 0; xp < X; ++xp) {
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

template <int X, int W>
void bf16_panels_parts(const Bf16Panels& a) {
  const int64_t groups = (a.n_tokens + 15) / 16;
  for (int64_t p0 = 0; p0 < a.n_panels; p0 += 2)
    for (int64_t g0 = 0; g0 < groups; g0 += 2) {
      const bool two_panels = p0 + 1 < a.n_panels, two_groups = g0 + 1 < groups;
      if (two_panels && two_groups) tile_block<2, 2, X, W>(a, p0, g0);
      else if (two_panels) tile_block<2, 1, X, W>(a, p0, g0);
      else if (two_groups) tile_block<1, 2, X, W>(a, p0, g0);
      else tile_block<1, 1, X, W>(a, p0, g0);
    }
}

}  // namespace

void bf16_panels(const Bf16Panels& a) {
  configure_tiles();
  if (a.parts == Bf16Parts{2, 2}) bf16_panels_parts<2, 2>(a);
  else if (a.parts == Bf16Parts{2, 1}) bf16_panels_parts<2, 1>(a);
  else bf16_panels_parts<1, 1>(a);
  // Back to the init state: a context switch then saves no tile data.
  _tile_release();
}

uint64_t peak_loop(int64_t iters) {
  configure_tiles();
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float c[16][16];
  _tile_stored(0, c, 64);
  _tile_release();
  return static_cast<uint64_t>(c[0][0]);
}

}  // namespace llmserve::kernels::amx
