#pragma once
// The complexity router in the server: a completion whose "model" is the
// router's name ("auto") is scored from its text and the small model's
// next-token distribution after its prompt (one engine request that
// computes the prompt, whose KV the small model's generation then finds in
// the prefix cache), and goes to the small or the large served model.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gateway/router.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/served_model.h"

namespace llmserve::server {

class ModelRouter {
 public:
  // Throws Error for a config that does not fit the served models.
  ModelRouter(gateway::RouterConfig config, engine::Engine& engine, const std::vector<std::unique_ptr<ServedModel>>& models);

  bool routes(const std::string& requested) const { return router_.routes(requested); }
  ServedModel& small() const { return *small_; }
  // Chooses the model for `r` (a text prompt, which the small model reads as
  // `prompt`), counts it in `metrics` and calls `then` with it on the
  // exchange's strand, after the small model's prefill (never blocking the
  // caller's thread); nothing runs once the exchange is answered (timeout,
  // drain) or gone. A prompt the small model cannot hold goes to the large
  // one at once.
  void choose(const GenerationRequest& r, std::vector<int32_t> prompt, ServerMetrics& metrics,
              const std::shared_ptr<Exchange>& ex, std::function<void(ServedModel&)> then);

 private:
  gateway::Router router_;
  engine::Engine& engine_;
  ServedModel* small_ = nullptr;
  ServedModel* large_ = nullptr;
};

}  // namespace llmserve::server
