// Roofline loops for AMX: register-only tile products on tiles of zeros.
// Compiled with the AMX flags on top of the AVX-512 ones and run only where
// use_amx() (cpu.h) says the CPU and OS allow it.
#include "bench/roofline_isa.h"
#include "kernels/immintrin_quiet.h"

namespace llmserve::kernels::amx {

namespace {

// Palette 1: tiles 0-7 of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// `iters` x 4 products of the given instruction: C tiles 0-3, A tiles 4-5,
// B tiles 6-7.
template <class Product>
uint64_t peak_loop(int64_t iters, Product product) {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.rows[i] = 16;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_zero(6);
  _tile_zero(7);
  for (int64_t i = 0; i < iters; ++i) product();
  alignas(64) uint32_t c[16][16];
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0][0];
}

}  // namespace

uint64_t bf16_peak_loop(int64_t iters) {
  return peak_loop(iters, [] {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  });
}

uint64_t int8_peak_loop(int64_t iters) {
  return peak_loop(iters, [] {
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  });
}

}  // namespace llmserve::kernels::amx
