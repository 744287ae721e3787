#pragma once
// How sure a model is of the token after a prompt: one engine request that
// computes the prompt (leaving its KV in the prefix cache) and samples one
// token with its logprobs. The complexity router reads it from the small model.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/engine.h"

namespace llmserve::engine {

struct NextTokenStats {
  double entropy = 0;  // of the whole next-token distribution, nats
  double margin = 0;   // logprob of the best token minus the second best's (0 with one token)
};

using NextTokenStatsCallback = std::function<void(std::optional<NextTokenStats>)>;

// Submits the request; `done` runs once, on the engine thread (it must not
// block), with nullopt when the engine refuses or ends it (a prompt beyond
// the model's context or KV pool, shutdown). Throws Error as submit() does.
void request_next_token_stats(Engine& engine, int model, std::vector<int32_t> prompt, NextTokenStatsCallback done);

// The same, waiting for the answer.
std::optional<NextTokenStats> next_token_stats(Engine& engine, int model, std::vector<int32_t> prompt);

}  // namespace llmserve::engine
