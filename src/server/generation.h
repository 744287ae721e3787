#pragma once
// One admitted completion request: its n engine requests, their outputs
// turned into text (StreamDecoder, stop strings, logprobs), and the HTTP
// response, whole or streamed as SSE.
//
// Threads: the engine's callbacks only append to a per-request inbox and
// post a drain to the exchange's strand (never waiting on anything but a
// short mutex); everything else runs on that strand. A client that goes
// away, or the per-request timeout, cancels the engine requests.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "gateway/cached_answer.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_response.h"
#include "server/served_model.h"
#include "server/stop_strings.h"

namespace llmserve::server {

struct GenerationContext {
  engine::Engine& engine;
  ServedModel& model;      // the request's; its in_flight is decremented here
  ServerMetrics& metrics;  // HTTP statuses, rejections
};

struct GenerationPlan {
  GenerationRequest request;
  std::vector<int32_t> prompt;
  std::string prompt_text;  // chat: the rendered template
  std::vector<std::string> stop;  // the request's, plus the template's implicit ones
  int max_new_tokens = 0;
  ResponseMeta meta;
  std::string remote;
  std::string request_id;
  Headers headers;  // on the response, whichever it is (the API handler's choice: request id, CORS, ...)
  std::chrono::milliseconds timeout{0};  // 0: none; counted from `received`
  std::chrono::steady_clock::time_point received = std::chrono::steady_clock::now();
  // Set: receives the whole answer once every choice finished with stop or
  // length (server/cache_front.h stores it).
  std::function<void(gateway::CachedAnswer)> store;
};

// What is left of `timeout` counted from `received` (at least 0).
inline std::chrono::milliseconds time_left(std::chrono::milliseconds timeout, std::chrono::steady_clock::time_point received) {
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - received);
  return std::max(std::chrono::milliseconds(0), timeout - spent);
}

class Generation : public std::enable_shared_from_this<Generation> {
 public:
  Generation(GenerationContext ctx, GenerationPlan plan, std::shared_ptr<Exchange> exchange);
  ~Generation();
  // On the exchange's strand, once: submits the engine requests.
  void start();

 private:
  struct Choice;
  struct Inbox;

  void drain();
  void on_output(size_t index, const engine::RequestOutput& out);
  void take_tokens(Choice& c, const engine::RequestOutput& out);
  void release(Choice& c, std::string text, bool finished);
  void finish_choice(Choice& c, std::string reason);
  void send_progress();
  void complete();
  gateway::CachedAnswer answer() const;
  void fail(int status, const std::string& message, const char* code);
  void fail(const ApiError& e) { fail(e.status, e.what(), e.code.c_str()); }
  void abort(const char* why);
  Usage usage() const;
  void log_line(int status, std::string_view outcome) const;

  GenerationContext ctx_;
  GenerationPlan plan_;
  std::shared_ptr<Exchange> exchange_;
  std::shared_ptr<Inbox> inbox_;
  std::vector<std::unique_ptr<Choice>> choices_;
  std::chrono::steady_clock::time_point started_;
  double first_token_ms_ = -1;
  bool streaming_started_ = false;
  bool done_ = false;
};

}  // namespace llmserve::server
