#pragma once
// POST /v1/embeddings in OpenAI's shape: parsing and validating the body
// (ApiError(400) naming the field), and the response.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace llmserve::server {

enum class EmbeddingEncoding { Float, Base64 };

// One input: text to tokenize, or token ids as they are.
struct EmbeddingInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct EmbeddingRequest {
  std::string model;  // as sent; may be empty
  // "input": a string, strings, token ids, or lists of token ids; none empty.
  std::vector<EmbeddingInput> inputs;
  EmbeddingEncoding encoding = EmbeddingEncoding::Float;
  int dimensions = 0;  // 0: not given
};

EmbeddingRequest parse_embedding_request(const Json& body, const RequestLimits& limits);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
// "model", "usage": {"prompt_tokens", "total_tokens"}}.
Json embedding_response(const std::vector<std::vector<float>>& vectors, EmbeddingEncoding encoding,
                        const std::string& model, int prompt_tokens);

// The vector's little-endian float32 bytes in base64, as OpenAI's "base64" encoding.
std::string base64_floats(std::span<const float> v);

}  // namespace llmserve::server
