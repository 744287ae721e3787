#pragma once
// One admitted /v1/embeddings request: an engine request per input (prefill
// only, engine::RequestParams::embed), all submitted at once so the engine
// batches them with whatever else it runs, and one JSON response when the
// last vector arrives. The engine's callbacks only post to the exchange's
// strand; a client that goes away, or the timeout, cancels what is left.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_embedding.h"
#include "server/served_model.h"

namespace llmserve::server {

struct EmbeddingContext {
  engine::Engine& engine;
  ServedModel& model;  // its in_flight counts engine requests not yet finished; decremented here
  ServerMetrics& metrics;
};

struct EmbeddingPlan {
  std::vector<std::vector<int32_t>> inputs;  // tokenized and checked
  EmbeddingEncoding encoding = EmbeddingEncoding::Float;
  std::string model;  // the response's
  std::string remote;
  std::string request_id;
  Headers headers;  // on the response, whichever it is
  std::chrono::milliseconds timeout{0};  // 0: none
};

// The request's inputs as token lists: text tokenized as a completion prompt
// is (with BOS when the model adds one by default), token ids as they are.
// Throws ApiError(400) for a token id outside the vocabulary or an input of
// more than max_tokens tokens, naming the input.
std::vector<std::vector<int32_t>> tokenize_inputs(const EmbeddingRequest& r, const tok::Tokenizer& tok, int max_tokens);

class Embedding : public std::enable_shared_from_this<Embedding> {
 public:
  Embedding(EmbeddingContext ctx, EmbeddingPlan plan, std::shared_ptr<Exchange> exchange);
  // On the exchange's strand, once: submits the engine requests.
  void start();

 private:
  void take(size_t index, const engine::RequestOutput& out);
  void fail(int status, const std::string& message, const char* code);
  void fail(const ApiError& e) { fail(e.status, e.what(), e.code.c_str()); }
  void cancel_unfinished();
  void log_line(int status, std::string_view outcome) const;

  EmbeddingContext ctx_;
  EmbeddingPlan plan_;
  std::shared_ptr<Exchange> exchange_;
  std::vector<uint64_t> ids_;  // the engine's, by input
  std::vector<std::vector<float>> vectors_;
  size_t finished_ = 0;
  int prompt_tokens_ = 0;
  std::chrono::steady_clock::time_point started_;
  bool done_ = false;
};

}  // namespace llmserve::server
