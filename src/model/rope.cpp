#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace llmserve::model {

namespace {

// YaRN: the dimension index whose wavelength spans `n_rot_periods` turns over
// the original context (from the YaRN paper's "NTK-by-parts" ramp).
float yarn_corr_dim(int rope_dim, int orig_ctx, float n_rot_periods, float base) {
  return rope_dim * std::log(orig_ctx / (n_rot_periods * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

}  // namespace

Rope::Rope(const HParams& hp, std::vector<float> freq_factors)
    : style_(hp.rope_style), head_dim_(hp.head_dim), rope_dim_(hp.rope_dim) {
  const int pairs = rope_dim_ / 2;
  if (!freq_factors.empty() && static_cast<int>(freq_factors.size()) != pairs)
    throw Error("rope_freqs has " + std::to_string(freq_factors.size()) + " values, expected " +
                std::to_string(pairs));
  inv_freq_.resize(pairs);
  interp_mix_.assign(pairs, 0.0f);
  for (int i = 0; i < pairs; ++i) {
    inv_freq_[i] = std::pow(hp.rope_theta, -2.0f * i / rope_dim_);
    if (!freq_factors.empty()) inv_freq_[i] /= freq_factors[i];
  }
  if (hp.rope_scaling == RopeScaling::Linear) pos_scale_ = 1.0f / hp.rope_scale;
  if (hp.rope_scaling == RopeScaling::Yarn) {
    // Pairs that turn many times over the original context keep their
    // frequency (extrapolate); slow ones are interpolated; a linear ramp between.
    freq_scale_ = 1.0f / hp.rope_scale;
    const float lo = std::max(0.0f, std::floor(yarn_corr_dim(rope_dim_, hp.rope_orig_ctx, hp.yarn_beta_fast, hp.rope_theta)));
    const float hi = std::min(rope_dim_ - 1.0f, std::ceil(yarn_corr_dim(rope_dim_, hp.rope_orig_ctx, hp.yarn_beta_slow, hp.rope_theta)));
    for (int i = 0; i < pairs; ++i) {
      const float y = (i - lo) / std::max(0.001f, hi - lo);
      const float extrapolate = 1.0f - std::clamp(y, 0.0f, 1.0f);
      interp_mix_[i] = 1.0f - extrapolate;
    }
    mscale_ = 1.0f + 0.1f * std::log(hp.rope_scale);
  }
}

void Rope::angles(int pos, float* cos_out, float* sin_out) const {
  const float p = static_cast<float>(pos) * pos_scale_;
  for (size_t i = 0; i < inv_freq_.size(); ++i) {
    const float extrap = p * inv_freq_[i];
    const float theta = extrap * (1.0f - interp_mix_[i]) + extrap * freq_scale_ * interp_mix_[i];
    cos_out[i] = std::cos(theta) * mscale_;
    sin_out[i] = std::sin(theta) * mscale_;
  }
}

void Rope::apply(float* x, int n_heads, int pos) const {
  const int pairs = rope_dim_ / 2;
  // head_dim <= 4096 is checked when reading hparams, so pairs <= 2048.
  float cs[2048], sn[2048];
  angles(pos, cs, sn);
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim_;
    for (int i = 0; i < pairs; ++i) {
      // Normal: (2i, 2i+1); NeoX: (i, i + rope_dim/2).
      const int a = style_ == RopeStyle::Normal ? 2 * i : i;
      const int b = style_ == RopeStyle::Normal ? 2 * i + 1 : i + pairs;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cs[i] - x1 * sn[i];
      v[b] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

}  // namespace llmserve::model
