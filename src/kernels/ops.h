#pragma once
// Elementwise and row ops of the transformer blocks. Each works on
// contiguous f32 rows on the calling thread; to use a pool, give each thread
// a range of rows (ThreadPool::split). Outputs may alias inputs.
// reference:: holds the plain versions (double accumulation, libm exp) the
// tests hold the fast ones to.
#include <cstdint>

namespace llmserve::kernels {

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for n_rows rows of dim.
void rmsnorm(const float* x, const float* weight, float eps, int64_t dim, int64_t n_rows, float* y);

// x = softmax(x) over n values, in place. Stable for any finite input;
// -inf entries get probability 0 (at least one entry must be finite).
void softmax(float* x, int64_t n);

// out = silu(gate) * up = gate / (1 + e^-gate) * up   (SwiGLU).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// out = a + b.
void add(const float* a, const float* b, int64_t n, float* out);

// Rotary position embedding. The first n_rot dims of each head are rotated
// in pairs by angle pos * freq_scale * theta_base^(-2i / n_rot) for pair i;
// the rest are left alone.
//   normal: pair i is (2i, 2i + 1)         (llama.cpp's LLAMA rope type)
//   neox:   pair i is (i, i + n_rot / 2)   (GPT-NeoX, Qwen, Phi, ...)
enum class RopeMode { normal, neox };
struct RopeParams {
  int head_dim = 0;
  int n_rot = 0;  // even, <= head_dim
  float theta_base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling: 1 / scale factor
  RopeMode mode = RopeMode::normal;
};
// x: n_tokens rows, token_stride floats apart, each n_heads heads of
// head_dim; token t is at position positions[t]. In place.
void rope(float* x, int64_t n_tokens, int64_t token_stride, int n_heads, const int32_t* positions,
          const RopeParams& p);

namespace reference {
void rmsnorm(const float* x, const float* weight, float eps, int64_t dim, int64_t n_rows, float* y);
void softmax(float* x, int64_t n);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void add(const float* a, const float* b, int64_t n, float* out);
void rope(float* x, int64_t n_tokens, int64_t token_stride, int n_heads, const int32_t* positions,
          const RopeParams& p);
}  // namespace reference

}  // namespace llmserve::kernels
