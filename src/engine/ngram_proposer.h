#pragma once
// Prompt lookup (n-gram) proposing: find the sequence's last n tokens
// earlier in its prompt or output, longest n first and the latest match
// first, and guess what followed them there. No model; deterministic.
#include "engine/proposer.h"

namespace llmserve::engine {

class NgramProposer final : public Proposer {
 public:
  // Throws Error unless 1 <= min_n <= max_n.
  NgramProposer(int min_n = 1, int max_n = 4);
  void propose(std::span<const DraftRequest> requests) override;

 private:
  int min_n_, max_n_;
};

// The guess for one sequence (exposed for tests).
void ngram_lookup(std::span<const int32_t> tokens, int min_n, int max_n, int k, std::vector<int32_t>& out);

}  // namespace llmserve::engine
