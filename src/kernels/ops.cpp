// ops.h: dispatch to the active ISA's row ops, RoPE, and the references.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/ops_isa.h"

namespace llmserve::kernels {

const OpsKernels& ops_kernels(Isa isa) {
  switch (isa) {
    case Isa::avx512: return avx512::kOpsKernels;
    case Isa::avx2: return avx2::kOpsKernels;
    case Isa::scalar: break;
  }
  return scalar::kOpsKernels;
}

void rmsnorm(const float* x, const float* weight, float eps, int64_t dim, int64_t n_rows, float* y) {
  const auto f = ops_kernels(active_isa()).rmsnorm;
  for (int64_t r = 0; r < n_rows; ++r) f(x + r * dim, weight, eps, dim, y + r * dim);
}

void softmax(float* x, int64_t n) { ops_kernels(active_isa()).softmax(x, n); }

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  ops_kernels(active_isa()).silu_mul(gate, up, n, out);
}

void add(const float* a, const float* b, int64_t n, float* out) { ops_kernels(active_isa()).add(a, b, n, out); }

namespace {

void check_rope(const RopeParams& p) {
  if (p.n_rot <= 0 || p.n_rot % 2 != 0 || p.n_rot > p.head_dim)
    throw Error("rope: n_rot " + std::to_string(p.n_rot) + " must be even and in (0, head_dim " +
                std::to_string(p.head_dim) + "]");
}

// Rotates every head of one token by the pair angles whose cos / sin are given.
template <class T>
void rotate_token(float* x, int n_heads, const RopeParams& p, const T* cos, const T* sin) {
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * p.head_dim;
    for (int i = 0; i < half; ++i) {
      const int i0 = p.mode == RopeMode::normal ? 2 * i : i;
      const int i1 = p.mode == RopeMode::normal ? 2 * i + 1 : i + half;
      const T a = v[i0], b = v[i1];
      v[i0] = static_cast<float>(a * cos[i] - b * sin[i]);
      v[i1] = static_cast<float>(a * sin[i] + b * cos[i]);
    }
  }
}

}  // namespace

// The angles are computed in double (positions reach tens of thousands of
// radians) once per token and shared by all its heads.
void rope(float* x, int64_t n_tokens, int64_t token_stride, int n_heads, const int32_t* positions,
          const RopeParams& p) {
  check_rope(p);
  const int half = p.n_rot / 2;
  thread_local std::vector<double> freq;
  thread_local std::vector<float> cs;
  freq.resize(static_cast<size_t>(half));
  cs.resize(2 * static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) freq[i] = p.freq_scale * std::pow(static_cast<double>(p.theta_base), -2.0 * i / p.n_rot);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      const double angle = positions[t] * freq[i];
      cs[i] = static_cast<float>(std::cos(angle));
      cs[half + i] = static_cast<float>(std::sin(angle));
    }
    rotate_token(x + t * token_stride, n_heads, p, cs.data(), cs.data() + half);
  }
}

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

void rope(float* x, int64_t n_tokens, int64_t token_stride, int n_heads, const int32_t* positions,
          const RopeParams& p) {
  check_rope(p);
  const int half = p.n_rot / 2;
  std::vector<double> cs(2 * static_cast<size_t>(half));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(positions[t]) * p.freq_scale *
                           std::pow(static_cast<double>(p.theta_base), -2.0 * i / p.n_rot);
      cs[i] = std::cos(angle);
      cs[half + i] = std::sin(angle);
    }
    rotate_token(x + t * token_stride, n_heads, p, cs.data(), cs.data() + half);
  }
}

}  // namespace reference

}  // namespace llmserve::kernels
