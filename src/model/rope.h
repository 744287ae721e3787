#pragma once
// Rotary position embedding: the angle of every rotated pair at a position,
// with linear, YaRN and per-dimension (rope_freqs) frequency scaling.
#include <vector>

#include "model/hparams.h"

namespace llmserve::model {

class Rope {
 public:
  // freq_factors: optional per-pair divisors of the frequency (Llama 3.1's
  // rope_freqs tensor), rope_dim / 2 values; empty when absent.
  Rope(const HParams& hp, std::vector<float> freq_factors = {});

  // Rotates the first rope_dim dimensions of each of n_heads heads of x
  // (head-major, head_dim each) to position pos.
  void apply(float* x, int n_heads, int pos) const;

  // cos/sin of each pair at pos, scaled by the YaRN attention factor.
  void angles(int pos, float* cos_out, float* sin_out) const;

 private:
  RopeStyle style_;
  int head_dim_, rope_dim_;
  std::vector<float> inv_freq_;     // per pair: theta_i (scaling-adjusted base frequency)
  std::vector<float> interp_mix_;   // YaRN: weight of the interpolated frequency per pair
  float pos_scale_ = 1.0f;          // linear scaling divides the position
  float freq_scale_ = 1.0f;         // YaRN interpolation factor 1/scale
  float mscale_ = 1.0f;             // YaRN magnitude correction
};

}  // namespace llmserve::model
