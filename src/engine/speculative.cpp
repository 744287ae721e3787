#include "engine/speculative.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace llmserve::engine {

EntryResult verify(Sampler& sampler, std::span<float> logits, size_t vocab, const Draft& draft,
                   std::vector<int32_t>& history, std::vector<float>& p) {
  const size_t k = draft.tokens.size();
  if (logits.size() != (k + 1) * vocab) throw Error("verify(): logits rows do not match the draft");
  if (!draft.q.empty() && draft.q.size() != k * vocab) throw Error("verify(): draft distributions do not match its tokens");
  for (size_t i = 0; i < k; ++i) {
    const int32_t x = draft.tokens[i];
    sampler.probabilities(logits.subspan(i * vocab, vocab), history, p);
    const std::span<const float> q = draft.q.empty() ? std::span<const float>() : std::span(draft.q).subspan(i * vocab, vocab);
    const float qx = q.empty() ? 1.0f : q[static_cast<size_t>(x)];
    // u < p/q accepts with probability min(1, p/q); a token q never draws has qx = 0.
    if (qx > 0.0f && sampler.uniform() * qx < p[static_cast<size_t>(x)]) {
      history.push_back(x);
      continue;
    }
    if (q.empty()) {
      p[static_cast<size_t>(x)] = 0.0f;
    } else {
      for (size_t j = 0; j < vocab; ++j) p[j] = std::max(0.0f, p[j] - q[j]);
    }
    // p == q leaves nothing, but then x was accepted; rounding aside, fall back to p.
    if (std::ranges::all_of(p, [](float w) { return w <= 0.0f; }))
      sampler.probabilities(logits.subspan(i * vocab, vocab), history, p);
    return {sampler.draw(p), static_cast<int>(i)};
  }
  return {sampler.sample(logits.subspan(k * vocab, vocab), history), static_cast<int>(k)};
}

StepCost::StepCost(std::vector<std::pair<int, double>> rows_ms) : points_(std::move(rows_ms)) {
  for (size_t i = 0; i < points_.size(); ++i)
    if (points_[i].first < 1 || (i > 0 && points_[i].first <= points_[i - 1].first))
      throw Error("StepCost: rows must be >= 1 and increasing");
}

double StepCost::ms(int rows) const {
  if (points_.empty()) return 1.0;
  if (points_.size() == 1 || rows <= points_.front().first) return points_.front().second;
  size_t i = 1;
  while (i + 1 < points_.size() && points_[i].first < rows) ++i;
  const auto [r0, t0] = points_[i - 1];
  const auto [r1, t1] = points_[i];
  return std::max(0.0, t0 + (t1 - t0) * (rows - r0) / (r1 - r0));
}

void StepCost::observe(int rows, double ms) {
  const auto it = std::ranges::lower_bound(points_, rows, {}, &std::pair<int, double>::first);
  const auto i = static_cast<size_t>(it - points_.begin());
  if (it != points_.end() && it->first == rows)
    it->second = 0.9 * it->second + 0.1 * ms;
  else
    points_.insert(it, {rows, ms});
  // A wider step never costs less: noisy observations must not say so.
  for (size_t j = i + 1; j < points_.size(); ++j) points_[j].second = std::max(points_[j].second, points_[i].second);
  for (size_t j = i; j-- > 0;) points_[j].second = std::min(points_[j].second, points_[i].second);
}

void Acceptance::record(int drafted, int accepted) {
  // Positions evaluated: every accepted one, and the first rejected one.
  const double evaluated = accepted + (accepted < drafted ? 1 : 0);
  constexpr double keep = 0.9;  // a verify's weight fades over ~10 verifies
  evaluated_ = keep * evaluated_ + evaluated;
  accepted_ = keep * accepted_ + accepted;
}

double expected_tokens(double alpha, int k) {
  double sum = 0, term = 1;
  for (int i = 0; i <= k; ++i, term *= alpha) sum += term;
  return sum;
}

void choose_draft_lengths(std::span<const double> alpha, int max_k, const StepCost& cost, double draft_ms_per_k,
                          std::vector<int>& k) {
  const int n = static_cast<int>(alpha.size());
  k.assign(alpha.size(), 0);
  double best = n / cost.ms(n);
  std::vector<int> trial;
  // A proposer pass drafts one more token for every sequence at once, so
  // try each number of passes, and fill it greedily with the best gains.
  for (int passes = 1; passes <= max_k; ++passes) {
    trial.assign(alpha.size(), 0);
    double tokens = n;
    int rows = n;
    const double draft_ms = draft_ms_per_k * passes;
    double rate = tokens / (cost.ms(rows) + draft_ms);
    for (;;) {
      int pick = -1;
      double gain = 0;
      for (int s = 0; s < n; ++s)
        if (trial[s] < passes && std::pow(alpha[s], trial[s] + 1) > gain) pick = s, gain = std::pow(alpha[s], trial[s] + 1);
      if (pick < 0) break;
      const double r = (tokens + gain) / (cost.ms(rows + 1) + draft_ms);
      if (r <= rate) break;  // the best remaining gain does not pay for its row
      ++trial[pick];
      tokens += gain;
      ++rows;
      rate = r;
    }
    if (rate > best) best = rate, k = trial;
  }
}

}  // namespace llmserve::engine
