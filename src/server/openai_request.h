#pragma once
// Parsing and validation of OpenAI /v1/completions and /v1/chat/completions
// request bodies. Everything from the client is checked here, before any
// work: a problem throws ApiError(400) naming the field. Unknown fields are
// ignored, as OpenAI-compatible servers do; fields whose meaning we cannot
// honour (echo, suffix, logit_bias, best_of > n) are refused, not ignored.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"

namespace llmserve::server {

// Insertion-ordered, so messages reach the chat template as the client sent them.
using Json = nlohmann::ordered_json;

struct RequestLimits {
  int max_json_depth = 32;
  int max_tokens = 4096;        // per choice
  int max_n = 8;
  int max_stop = 4;             // stop strings, as OpenAI
  size_t max_stop_bytes = 256;  // per stop string
  size_t max_messages = 1024;
  size_t max_prompt_items = 1 << 16;  // token ids in a pre-tokenized prompt
  size_t max_embedding_inputs = 2048;  // as OpenAI
};

enum class Endpoint { Completions, Chat };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                // as sent; may be empty
  // Completions: the prompt, as text or as token ids.
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool prompt_is_tokens = false;
  // Chat: [{role, content: string, ...}] with content parts joined into one string.
  Json messages;
  int max_tokens = -1;              // -1: not given
  engine::SamplingParams sampling;  // OpenAI defaults: temperature 1, no top-k / top-p / min-p
  bool seed_given = false;
  std::vector<std::string> stop;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  bool speculative = true;  // "speculative": false opts out of the server's --spec
  bool cache = true;        // "cache": false opts out of the server's response cache
  int top_logprobs = -1;            // -1: no logprobs; else the sampled token's and this many best
};

// POST /tokenize, in llama-server's shape ({"content": text, "add_special",
// "with_pieces"}) or vLLM's ({"prompt": text, "add_special_tokens"}, or the
// chat form {"messages", "add_generation_prompt"}).
struct TokenizeRequest {
  std::string text;
  Json messages;                      // the chat form, checked as for chat completions; null otherwise
  bool add_special = false;           // text: BOS; by default as the server the field comes from does
  bool add_generation_prompt = true;  // chat form
  bool with_pieces = false;           // [{"id", "piece"}] instead of ids
};

// Parses a body, refusing nesting deeper than max_depth before the parser
// sees it (so a hostile body cannot exhaust the stack). Throws ApiError(400).
Json parse_json_body(std::string_view body, int max_depth);

// The body's "model" ("" when absent), for every endpoint that takes one.
// Throws ApiError(400) when the body is no object or the field no string.
std::string requested_model(const Json& body);

// Validates a parsed body. Throws ApiError(400) with param set.
GenerationRequest parse_generation_request(Endpoint endpoint, const Json& body, const RequestLimits& limits);
TokenizeRequest parse_tokenize_request(const Json& body, const RequestLimits& limits);
// POST /detokenize: {"tokens": [ids]}, each below n_vocab.
std::vector<int32_t> parse_detokenize_request(const Json& body, const RequestLimits& limits, int n_vocab);

}  // namespace llmserve::server
