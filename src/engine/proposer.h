#pragma once
// Speculative decoding's proposers: something cheaper than the target model
// guesses a sequence's next tokens, and the target verifies them all in one
// step (engine/speculative.h). A proposer is driven by the engine loop only.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/sequence.h"

namespace llmserve::engine {

// A proposer's guesses for one sequence, and the distributions it drew them
// from: q holds tokens.size() rows of n_vocab probabilities, or is empty for
// a deterministic proposer (q is one-hot at its token).
struct Draft {
  std::vector<int32_t> tokens;
  std::vector<float> q;
};

struct DraftRequest {
  SeqId id;
  std::span<const int32_t> tokens;  // the sequence so far: prompt, then generated
  int num_prompt = 0;
  int k = 0;                        // guess at most this many
  Sampler* sampler = nullptr;       // the request's sampling parameters, its own seed: a model proposer draws with it
  Draft* out = nullptr;             // cleared, then filled with 0..k guesses
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual void propose(std::span<const DraftRequest> requests) = 0;
  // The sequence finished: forget whatever was kept for it.
  virtual void release(SeqId) {}
  // Of the last propose(), the milliseconds spent catching up on tokens the
  // proposer had not seen (a draft model's prefill), not drafting.
  virtual double catch_up_ms() const { return 0; }
};

}  // namespace llmserve::engine
