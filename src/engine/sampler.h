#pragma once
// Turns logits into the next token. Order, as in vLLM: penalties, then
// temperature, then top-k, top-p and min-p filters, then a seeded draw.
// temperature <= 0 is greedy (argmax after penalties).
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace llmserve::engine {

struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;              // <= 0: no limit
  float top_p = 0.95f;         // 1: off
  float min_p = 0.05f;         // 0: off; keep p >= min_p * p_max
  float repetition_penalty = 1.0f;  // 1: off (divides positive logits of seen tokens)
  int repetition_window = 64;       // how many recent tokens count for it
  float presence_penalty = 0.0f;    // OpenAI: minus this once for any seen token
  float frequency_penalty = 0.0f;   // OpenAI: minus this per occurrence
  uint64_t seed = 0;
};

// Throws Error naming the parameter when one is out of range.
void validate(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `history`: tokens generated (and, for penalties, prompted) so far.
  // `logits` is modified (penalties, temperature).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  // The distribution sample() draws from, dense over the vocabulary and
  // summing to 1 (one-hot at the argmax when greedy). Speculative decoding
  // compares the target's and the draft's.
  void probabilities(std::span<float> logits, std::span<const int32_t> history, std::vector<float>& probs);
  // A token drawn from `weights` (>= 0, not all 0; need not sum to 1).
  int32_t draw(std::span<const float> weights);
  double uniform();  // [0, 1), identical on every platform for a seed
  bool greedy() const { return p_.temperature <= 0.0f; }

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history) const;
  // Leaves the tokens sampling may pick in candidates_, with unnormalized
  // weights; returns their sum.
  double filter(std::span<float> logits, std::span<const int32_t> history);

  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // reused across calls
};

int32_t argmax(std::span<const float> logits);

}  // namespace llmserve::engine
