// ops.h: dispatch to the active ISA's row ops, and the references.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/isa_kernels.h"
#include "kernels/ops_isa.h"

namespace llmserve::kernels {

namespace {

const OpsKernels& ops() { return *active_kernels().ops; }

}  // namespace

void rmsnorm(const float* x, const float* weight, float eps, int64_t dim, int64_t n_rows, float* y) {
  const auto f = ops().rmsnorm;
  for (int64_t r = 0; r < n_rows; ++r) f(x + r * dim, weight, eps, dim, y + r * dim);
}

int64_t argmax(const float* x, int64_t n) {
  // The first block with the largest maximum, then the first position in it
  // that holds the maximum: one pass over x, a vector at a time, and a short
  // scan (a scan of all of x for the maximum cost as much as the max itself).
  constexpr int64_t kBlock = 256;
  const auto max_value = ops().max_value;
  int64_t best_block = 0;
  float best = max_value(x, std::min(n, kBlock));
  for (int64_t b = kBlock; b < n; b += kBlock) {
    const float m = max_value(x + b, std::min(n - b, kBlock));
    if (m > best) best = m, best_block = b;
  }
  const float* block_end = x + std::min(n, best_block + kBlock);
  const float* first = std::find(x + best_block, block_end, best);
  return first != block_end ? first - x : best_block;  // not found: a NaN maximum
}

void softmax(float* x, int64_t n) { ops().softmax(x, n); }

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  ops().silu_mul(gate, up, n, out);
}

void add(const float* a, const float* b, int64_t n, float* out) { ops().add(a, b, n, out); }

void to_f16(const float* x, int64_t n, uint16_t* out) { ops().to_f16(x, n, out); }

int32_t dot_i8(const int8_t* a, const int8_t* b, int64_t n) { return ops().dot_i8(a, b, n); }

namespace reference {

void rmsnorm(const float* x, const float* weight, float eps, int64_t dim, int64_t n_rows, float* y) {
  for (int64_t r = 0; r < n_rows; ++r, x += dim, y += dim) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * x[i];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) y[i] = static_cast<float>(x[i] * scale * weight[i]);
  }
}

void softmax(float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::exp(x[i] - mx) / sum);
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace reference

}  // namespace llmserve::kernels
