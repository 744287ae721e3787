// Portable matmul kernels: the panel layouts decoded element by element.
// The baseline for CPUs without AVX2, and the readable statement of what
// the SIMD kernels compute (same activation rounding, same integer sums).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/panel.h"

namespace llmserve::kernels::scalar {

namespace {

constexpr int R = kPanelRows;

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float load_f16(const uint8_t* p) { return f16_to_f32(load_u16(p)); }

void quantize(const float* x, int64_t cols, Q8Act* out, int64_t out_stride) {
  for (int64_t b = 0; b < cols / kQBlock; ++b, x += kQBlock) {
    float amax = 0;
    for (int i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    Q8Act& a = out[b * out_stride];
    a.d = amax / 127.0f;
    int sum[2] = {0, 0};
    for (int i = 0; i < kQBlock; ++i) {
      const int q = static_cast<int>(std::nearbyint(x[i] * id));
      a.qs[i] = static_cast<int8_t>(q);
      sum[i / 16] += q;
    }
    a.dsum_lo = a.d * static_cast<float>(sum[0]);
    a.dsum_hi = a.d * static_cast<float>(sum[1]);
    a.dsum = a.d * static_cast<float>(sum[0] + sum[1]);
    a.neg128_sum = -128 * (sum[0] + sum[1]);
    a.neg8_sum = -8 * (sum[0] + sum[1]);
    a.neg32_sum_lo = -32 * sum[0];
    a.neg32_sum_hi = -32 * sum[1];
  }
}

// One 32-column block of a quantized panel: w[r][c] = s[c/16][r] * code[r][c] - m[c/16][r].
struct Block {
  uint8_t code[R][kQBlock];
  float s[2][R], m[2][R];
};

void get_codes8(const uint8_t* groups, int r, uint8_t* code) {
  for (int j = 0; j < 8; ++j) std::memcpy(code + 4 * j, groups + j * 64 + r * 4, 4);
}
void get_nibbles(const uint8_t* groups, int r, uint8_t* code) {
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 4; ++i) {
      const uint8_t byte = groups[j * 64 + r * 4 + i];
      code[4 * j + i] = byte & 15;
      code[16 + 4 * j + i] = byte >> 4;
    }
}
void set_scales(Block& k, int r, float s_lo, float s_hi, float m_lo, float m_hi) {
  k.s[0][r] = s_lo;
  k.s[1][r] = s_hi;
  k.m[0][r] = m_lo;
  k.m[1][r] = m_hi;
}

void decode_q8_0(const uint8_t* panel, int64_t b, Block& k) {
  for (int r = 0; r < R; ++r) {
    get_codes8(panel + kQ8_0Layout.codes(b), r, k.code[r]);
    const float d = load_f16(panel + kQ8_0Layout.meta(b) + r * 2);
    set_scales(k, r, d, d, 128 * d, 128 * d);
  }
}

void decode_q4_0(const uint8_t* panel, int64_t b, Block& k) {
  for (int r = 0; r < R; ++r) {
    get_nibbles(panel + kQ4_0Layout.codes(b), r, k.code[r]);
    const float d = load_f16(panel + kQ4_0Layout.meta(b) + r * 2);
    set_scales(k, r, d, d, 8 * d, 8 * d);
  }
}

void decode_q4_k(const uint8_t* panel, int64_t b, Block& k) {
  const int64_t c = b % 8;
  const uint8_t* meta = panel + kQ4_KLayout.meta(b);
  for (int r = 0; r < R; ++r) {
    get_nibbles(panel + kQ4_KLayout.codes(b), r, k.code[r]);
    const float sc = load_f16(meta + r * 2) * meta[kQ4_KSc + c * R + r];
    const float m = load_f16(meta + kQ4_KDmin + r * 2) * meta[kQ4_KM + c * R + r];
    set_scales(k, r, sc, sc, m, m);
  }
}

void decode_q6_k(const uint8_t* panel, int64_t b, Block& k) {
  const int64_t c = b % 8;
  const uint8_t* codes = panel + kQ6_KLayout.codes(b);
  const uint8_t* meta = panel + kQ6_KLayout.meta(b);
  const auto* sc = reinterpret_cast<const int8_t*>(meta + kQ6_KSc);
  for (int r = 0; r < R; ++r) {
    get_nibbles(codes, r, k.code[r]);
    for (int col = 0; col < kQBlock; ++col) {
      const int j = col / 4, i = col % 4;
      k.code[r][col] |= ((codes[256 + (j / 4) * 64 + r * 4 + i] >> (2 * (j % 4))) & 3) << 4;
    }
    const float d = load_f16(meta + r * 2);
    const float s_lo = d * sc[(2 * c) * R + r], s_hi = d * sc[(2 * c + 1) * R + r];
    set_scales(k, r, s_lo, s_hi, 32 * s_lo, 32 * s_hi);
  }
}

constexpr int kTokenBlock = 16;

// Token t's row results: what its sums start from (the earlier slices'
// sums, PanelArgs::resume, or 0), and where they go.
void start(const PanelArgs& a, int64_t t, float* v) {
  const float* y = a.y + t * a.y_stride;
  for (int r = 0; r < R; ++r) v[r] = a.resume && r < a.rows ? y[r] : 0.0f;
}
void store(const PanelArgs& a, int64_t t, const float* v) {
  float* y = a.y + t * a.y_stride;
  for (int r = 0; r < a.rows; ++r) y[r] = v[r];
}

template <void (*Decode)(const uint8_t*, int64_t, Block&)>
void panel_quant(const PanelArgs& a) {
  const int64_t nb = a.cols / kQBlock;
  Block k;
  static_assert(kTokenBlock == kActGroup, "a tile is one group of activations");
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTokenBlock) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokenBlock, a.n_tokens - t0));
    const ActRow acts = act_row(a, t0);
    float acc[kTokenBlock][R];
    for (int t = 0; t < nt; ++t) start(a, t0 + t, acc[t]);
    for (int64_t b = 0; b < nb; ++b) {
      Decode(a.panel, b, k);
      for (int t = 0; t < nt; ++t) {
        const Q8Act& x = acts.x[b * acts.block_stride + t];
        for (int r = 0; r < R; ++r) {
          int sum[2] = {0, 0};
          for (int c = 0; c < kQBlock; ++c) sum[c / 16] += k.code[r][c] * x.qs[c];
          acc[t][r] += x.d * (k.s[0][r] * static_cast<float>(sum[0]) + k.s[1][r] * static_cast<float>(sum[1])) -
                       (k.m[0][r] * x.dsum_lo + k.m[1][r] * x.dsum_hi);
        }
      }
    }
    for (int t = 0; t < nt; ++t) store(a, t0 + t, acc[t]);
  }
}

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
float load_bf16(const uint8_t* p) { return bf16_to_f32(load_u16(p)); }

template <float (*Load)(const uint8_t*), int kBytes>
void panel_float(const PanelArgs& a) {
  const auto* x = static_cast<const float*>(a.x);
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += kTokenBlock) {
    const int nt = static_cast<int>(std::min<int64_t>(kTokenBlock, a.n_tokens - t0));
    float acc[kTokenBlock][R];
    for (int t = 0; t < nt; ++t) start(a, t0 + t, acc[t]);
    for (int64_t c = 0; c < a.cols; ++c) {
      float w[R];
      for (int r = 0; r < R; ++r) w[r] = Load(a.panel + (c * R + r) * kBytes);
      for (int t = 0; t < nt; ++t) {
        const float xv = x[(t0 + t) * a.x_stride + c];
        for (int r = 0; r < R; ++r) acc[t][r] += w[r] * xv;
      }
    }
    for (int t = 0; t < nt; ++t) store(a, t0 + t, acc[t]);
  }
}

}  // namespace

// The portable path leaves prefetching to the hardware in both settings.
constexpr PanelKernels kPanels = {
    each_panel<panel_quant<decode_q8_0>>,    each_panel<panel_quant<decode_q4_0>>, each_panel<panel_quant<decode_q4_k>>,
    each_panel<panel_quant<decode_q6_k>>,    each_panel<panel_float<load_f32, 4>>, each_panel<panel_float<load_f16, 2>>,
    each_panel<panel_float<load_bf16, 2>>};
const MatmulKernels kMatmulKernels = {quantize, nullptr, {{kPanels, kPanels}, {kPanels, kPanels}}};

}  // namespace llmserve::kernels::scalar
