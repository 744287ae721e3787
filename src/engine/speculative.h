#pragma once
// Speculative decoding's two decisions: whether a proposer's guesses stand
// (verify: exact, so output is what plain decoding gives, token for token
// when greedy and in distribution when sampling), and how many to ask for
// (DraftPolicy: the k that maximizes expected tokens per millisecond, from
// each sequence's acceptance and the measured cost of wider steps).
#include <cstdint>
#include <span>
#include <vector>

#include "engine/proposer.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace llmserve::engine {

// `logits`: draft.tokens.size() + 1 rows of `vocab` target logits, row i
// predicting the token after history + draft[0, i) (rows are modified).
// Rejection sampling (Leviathan et al. 2023; Chen et al. 2023): draft token
// x is accepted with probability min(1, p(x) / q(x)); the first rejected one
// is replaced by a draw from normalize(max(0, p - q)); when all are accepted
// the last row gives one more token. p and q are the sampler's filtered
// distributions (greedy: one-hot at the argmax). `history` gets the
// accepted drafts appended; `p` is scratch.
EntryResult verify(Sampler& sampler, std::span<float> logits, size_t vocab, const Draft& draft,
                   std::vector<int32_t>& history, std::vector<float>& p);

// Step time as a function of its rows, from measured points: linear
// between them, extrapolated from the last two beyond. No points: every
// width costs the same. The engine starts from a measurement and then
// follows the decode steps it runs (observe), whose attention grows with
// the context.
class StepCost {
 public:
  StepCost() = default;
  explicit StepCost(std::vector<std::pair<int, double>> rows_ms);  // sorted by rows, rows >= 1
  double ms(int rows) const;
  // A step of `rows` rows took `ms`: that width's point moves toward it.
  void observe(int rows, double ms);
  const std::vector<std::pair<int, double>>& points() const { return points_; }

 private:
  std::vector<std::pair<int, double>> points_;
};

// A sequence's running acceptance rate of draft tokens, decaying so it
// follows the text; starts at a neutral prior.
class Acceptance {
 public:
  void record(int drafted, int accepted);
  double rate() const { return (accepted_ + 1.0) / (evaluated_ + 2.0); }

 private:
  double evaluated_ = 0, accepted_ = 0;
};

// Expected tokens a verify step yields with k drafts, each accepted with
// probability `alpha` independently: 1 + alpha + ... + alpha^k.
double expected_tokens(double alpha, int k);

// k per sequence for one step, maximizing expected tokens per ms of the step,
// sum E(alpha_s, k_s) / (cost(sum (k_s + 1)) + draft_ms_per_k * max k_s).
// Wide steps cost more, so above the batch where decode turns
// compute-bound every k comes out 0.
void choose_draft_lengths(std::span<const double> alpha, int max_k, const StepCost& cost, double draft_ms_per_k,
                          std::vector<int>& k);

}  // namespace llmserve::engine
