#pragma once
// How sure a model is of the token after a prompt: one engine request that
// computes the prompt (leaving its KV in the prefix cache) and samples one
// token with its logprobs. The complexity router reads it from the small model.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/engine.h"

namespace llmserve::engine {

struct NextTokenStats {
  double entropy = 0;  // of the whole next-token distribution, nats
  double margin = 0;   // logprob of the best token minus the second best's (0 with one token)
};

// Blocks until the request finishes; nullopt when the engine refuses or ends
// it (a prompt beyond the model's context or KV pool, shutdown).
std::optional<NextTokenStats> next_token_stats(Engine& engine, int model, std::vector<int32_t> prompt);

}  // namespace llmserve::engine
