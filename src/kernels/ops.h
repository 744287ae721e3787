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

// Index of the largest of x[0..n) (the first, if several are equal), n >= 1:
// greedy decoding's choice, as std::max_element gives it but a vector at a
// time, since it runs over the whole vocabulary every decode step. With
// NaNs in x the result is some index in [0, n).
int64_t argmax(const float* x, int64_t n);

// out = silu(gate) * up = gate / (1 + e^-gate) * up   (SwiGLU).
void silu_mul(const float* gate, const float* up, int64_t n, float* out);

// out = a + b.
void add(const float* a, const float* b, int64_t n, float* out);

// out = x as IEEE half bits, rounded to nearest even (overflow to infinity),
// bit for bit what gguf's F16 quantize_row gives for every non-NaN value.
void to_f16(const float* x, int64_t n, uint16_t* out);

// sum a[i] * b[i] over n int8 pairs, each value in [-127, 127] and n at most
// 2^17 (the sum then fits an int32): the response cache's similarity scan.
int32_t dot_i8(const int8_t* a, const int8_t* b, int64_t n);

namespace reference {
void rmsnorm(const float* x, const float* weight, float eps, int64_t dim, int64_t n_rows, float* y);
void softmax(float* x, int64_t n);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void add(const float* a, const float* b, int64_t n, float* out);
}  // namespace reference

}  // namespace llmserve::kernels
