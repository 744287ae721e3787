#pragma once
// Serialization of OpenAI responses: whole completions, stream chunks, the
// usage chunk, errors and the model list.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "server/openai_request.h"

namespace llmserve::server {

struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;      // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct LogprobEntry {
  std::string token;  // the token's bytes (not always valid UTF-8 alone)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;  // best first
  size_t text_offset = 0;  // in the choice's text (completions)
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

// A whole choice, or the part of one a stream chunk carries.
struct ChoicePiece {
  int index = 0;
  std::string text;
  bool logprobs_requested = false;
  std::vector<LogprobEntry> logprobs;
  std::string finish_reason;  // empty: not finished (null)
  bool first = false;         // chat streams: the first chunk carries the role
};

Json usage_json(const Usage& u);
Json stream_chunk(const ResponseMeta& meta, const ChoicePiece& piece, bool include_usage);
Json usage_chunk(const ResponseMeta& meta, const Usage& u);
Json full_response(const ResponseMeta& meta, const std::vector<ChoicePiece>& choices, const Usage& u);
Json model_object(const std::string& model, int64_t created, int max_model_len);
Json model_list(Json model_objects);  // {"object": "list", "data": model_objects}
// /tokenize: {"tokens": ids, or [{"id", "piece"}] when pieces are given, "count", "max_model_len"}.
Json tokenize_response(const std::vector<int32_t>& ids, const std::vector<std::string>* pieces, int max_model_len);
// /detokenize: the text under llama-server's key and vLLM's.
Json detokenize_response(const std::string& text);

// Compact JSON; bytes that are not UTF-8 become U+FFFD instead of throwing.
std::string dump(const Json& j);

}  // namespace llmserve::server
