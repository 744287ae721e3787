#pragma once
// A stored answer: what the server needs to replay a finished generation as
// one JSON response or as SSE chunks. The cache does not look inside it.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmserve::gateway {

struct CachedChoice {
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;  // "stop", "length"
  std::string logprobs_json;  // the choice's logprobs as the server wrote them; empty without
};

struct CachedAnswer {
  std::string model;  // the served model that wrote it
  std::vector<CachedChoice> choices;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  // The mean log-probability of choice 0's tokens given the prompt that
  // produced them: what a verified semantic hit is compared against.
  std::optional<double> mean_logprob;

  // The heap and object bytes it holds, for the cache's memory bound.
  size_t bytes() const {
    size_t b = sizeof(*this) + model.size();
    for (const CachedChoice& c : choices)
      b += sizeof(c) + c.text.size() + c.token_ids.size() * sizeof(int32_t) + c.finish_reason.size() +
           c.logprobs_json.size();
    return b;
  }
};

}  // namespace llmserve::gateway
