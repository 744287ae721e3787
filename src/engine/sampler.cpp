#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "kernels/ops.h"

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
  return static_cast<int32_t>(kernels::argmax(logits.data(), static_cast<int64_t>(logits.size())));
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
  if (greedy()) {
    filter(logits, history);
    return argmax(logits);
  }
  double r = uniform() * filter(logits, history);
  for (const auto& c : candidates_) {
    r -= c.first;
    if (r < 0.0) return c.second;
  }
  return candidates_.back().second;
}

void Sampler::probabilities(std::span<float> logits, std::span<const int32_t> history, std::vector<float>& probs) {
  probs.assign(logits.size(), 0.0f);
  if (greedy()) {
    filter(logits, history);
    probs[static_cast<size_t>(argmax(logits))] = 1.0f;
    return;
  }
  const double kept = filter(logits, history);
  for (const auto& c : candidates_) probs[static_cast<size_t>(c.second)] = static_cast<float>(c.first / kept);
}

int32_t Sampler::draw(std::span<const float> weights) {
  double total = 0.0;
  for (float w : weights) total += w;
  double r = uniform() * total;
  int32_t last = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0f) continue;
    last = static_cast<int32_t>(i);
    r -= weights[i];
    if (r < 0.0) return last;
  }
  return last;
}

double Sampler::filter(std::span<float> logits, std::span<const int32_t> history) {
  for (int32_t t : history)
    if (t < 0 || static_cast<size_t>(t) >= logits.size()) throw Error("history token out of vocabulary range");
  apply_penalties(logits, history);
  if (greedy()) return 0.0;
  // Softmax at temperature. Only top-p needs the candidates in order of
  // probability, and only as far as its mass reaches: sorting a whole
  // vocabulary (32k-150k entries) for every token took milliseconds per
  // sequence per step, which a batch of sequences multiplies.
  const auto better = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) candidates_.emplace_back(logits[i] / p_.temperature, static_cast<int32_t>(i));
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < candidates_.size()) {
    std::nth_element(candidates_.begin(), candidates_.begin() + (p_.top_k - 1), candidates_.end(), better);
    candidates_.resize(static_cast<size_t>(p_.top_k));
  }
  float max_logit = -INFINITY;
  for (const auto& c : candidates_) max_logit = std::max(max_logit, c.first);
  double total = 0.0;
  for (auto& c : candidates_) total += c.first = std::exp(c.first - max_logit);

  // min-p: relative to the best (whose weight is exp(0) = 1).
  if (p_.min_p > 0.0f) {
    const float min_weight = p_.min_p;
    std::erase_if(candidates_, [&](const auto& c) { return c.first < min_weight; });
  }
  // top-p: the smallest most-probable prefix whose mass reaches top_p, sorted
  // in growing steps until it does.
  if (p_.top_p < 1.0f) {
    const auto first = candidates_.begin();
    for (size_t sorted = std::min<size_t>(64, candidates_.size());; sorted = std::min(4 * sorted, candidates_.size())) {
      std::partial_sort(first, first + static_cast<long>(sorted), candidates_.end(), better);
      double mass = 0.0;
      size_t keep = 0;
      while (keep < sorted && (keep == 0 || mass < p_.top_p * total)) mass += candidates_[keep++].first;
      if (mass >= p_.top_p * total || sorted == candidates_.size()) {
        candidates_.resize(keep);
        break;
      }
    }
  }
  double kept = 0.0;
  for (const auto& c : candidates_) kept += c.first;
  return kept;
}

}  // namespace llmserve::engine
