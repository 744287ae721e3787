#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace llmserve::engine {

void validate(const SamplingParams& p) {
  auto check = [](bool ok, const char* what) {
    if (!ok) throw Error(std::string("invalid sampling parameter: ") + what);
  };
  check(std::isfinite(p.temperature) && p.temperature >= 0.0f, "temperature must be >= 0");
  check(p.top_p > 0.0f && p.top_p <= 1.0f, "top_p must be in (0, 1]");
  check(p.min_p >= 0.0f && p.min_p <= 1.0f, "min_p must be in [0, 1]");
  check(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f, "repetition_penalty must be > 0");
  check(p.repetition_window >= 0, "repetition window must be >= 0");
  check(std::isfinite(p.presence_penalty) && std::abs(p.presence_penalty) <= 2.0f, "presence_penalty must be in [-2, 2]");
  check(std::isfinite(p.frequency_penalty) && std::abs(p.frequency_penalty) <= 2.0f, "frequency_penalty must be in [-2, 2]");
}

Sampler::Sampler(const SamplingParams& params) : p_(params), rng_(params.seed) { validate(p_); }

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) const {
  if (p_.repetition_penalty != 1.0f) {
    // Once per distinct token in the recent window (as llama.cpp does).
    const size_t n = std::min<size_t>(history.size(), static_cast<size_t>(p_.repetition_window));
    const std::unordered_set<int32_t> recent(history.end() - static_cast<long>(n), history.end());
    for (int32_t t : recent) {
      float& l = logits[t];
      l = l > 0.0f ? l / p_.repetition_penalty : l * p_.repetition_penalty;
    }
  }
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : history) ++counts[t];
    for (const auto& [t, c] : counts) logits[t] -= p_.frequency_penalty * c + p_.presence_penalty;
  }
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  for (int32_t t : history)
    if (t < 0 || static_cast<size_t>(t) >= logits.size()) throw Error("history token out of vocabulary range");
  apply_penalties(logits, history);
  if (p_.temperature <= 0.0f) return argmax(logits);

  // Softmax at temperature, over candidates sorted by probability.
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) candidates_.emplace_back(logits[i] / p_.temperature, static_cast<int32_t>(i));
  size_t n = candidates_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) n = static_cast<size_t>(p_.top_k);
  std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(n), candidates_.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  candidates_.resize(n);
  const float max_logit = candidates_[0].first;
  double total = 0.0;
  for (auto& c : candidates_) total += c.first = std::exp(c.first - max_logit);

  // top-p: the smallest prefix whose mass reaches top_p; min-p: relative to the best.
  double kept_mass = 0.0;
  size_t keep = 0;
  const double min_prob = p_.min_p * candidates_[0].first / total;
  for (; keep < candidates_.size(); ++keep) {
    const double prob = candidates_[keep].first / total;
    if (keep > 0 && (kept_mass >= p_.top_p || prob < min_prob)) break;
    kept_mass += prob;
  }
  double r = uniform() * kept_mass * total;
  for (size_t i = 0; i < keep; ++i) {
    r -= candidates_[i].first;
    if (r < 0.0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace llmserve::engine
