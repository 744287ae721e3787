#pragma once
// cache-eval --model: the semantic layer with verified hits, offline. For
// each labeled pair, the model's greedy answer to prompt a is cached; b finds
// it when the embeddings' cosine reaches tau; verification keeps the hit when
// the model's mean log-probability of the answer after b is at least the one
// after a, less the margin (server/cache_front.h does the same per request).
#include <string>
#include <vector>

#include "gateway/semantic_eval.h"

namespace llmserve::cli {

struct VerifiedEvalOptions {
  std::string model;              // GGUF file
  std::string embedder = "ngram";  // ngram, or model (the model's own mean-pooled hidden state)
  int answer_tokens = 24;
  double margin = 0.5;
  int threads = 0;
};

// Prints, per kind and tau: pairs found without verification, and kept with it.
void run_verified_eval(const VerifiedEvalOptions& o, const std::vector<gateway::LabeledPair>& pairs,
                       const std::vector<double>& taus);

}  // namespace llmserve::cli
