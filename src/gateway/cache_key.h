#pragma once
// What identifies a cached answer. The server fills a CacheKey from a
// validated request; encode() turns it into two canonical byte strings:
// `exact` (every field) and `semantic_namespace` (every field but the
// prompt). Each field is tagged and length-prefixed, so two keys that differ
// in any field never encode alike.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmserve::gateway {

struct CacheKey {
  std::string tenant;    // the API key or tenant the answer belongs to
  std::string model;     // the served model's name
  std::string endpoint;  // "completions" or "chat": the shapes differ
  std::vector<int32_t> prompt_tokens;  // the rendered, tokenized prompt
  // The request's own prompt or messages, where the tokens are one model's
  // reading and another model may answer (the router's namespace).
  std::string input{};
  int max_tokens = 0;
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  int repetition_window = 0;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;  // none: the request asked for a random seed
  int n = 1;
  int top_logprobs = -1;  // -1: no logprobs
  bool speculative = true;  // a seeded sample with drafts is another sample than without
  std::vector<std::string> stop;
};

struct EncodedKey {
  std::string exact;
  std::string semantic_namespace;
};

EncodedKey encode(const CacheKey& key);

}  // namespace llmserve::gateway
