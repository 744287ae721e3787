#pragma once
// The OpenAI-compatible API in front of the engine: routes, API keys,
// per-key rate limits, validation, the bounded queue, draining, /metrics.
// It answers what it can at once (errors, /v1/models, /health, /metrics)
// and hands admitted completions to a Generation, for the model the
// request names (with one model: whatever it names) or, for the router's
// name, the model the complexity router picks (model_router.h).
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/cache_front.h"
#include "server/cors.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/model_router.h"
#include "server/openai_request.h"
#include "server/rate_limiter.h"
#include "server/served_model.h"

namespace llmserve::server {

// A model of the engine (at the same index) and its id in the API.
struct NamedModel {
  std::string name;
  const model::LoadedModel* model;
};

// Every limit applies to each model alike; the rate limit is per key
// across models.
struct ApiConfig {
  RequestLimits limits;
  int max_prompt_tokens = 0;  // 0: the model's context
  int max_queue = 256;        // engine requests that may wait beyond a model's running ones, per model
  std::chrono::milliseconds request_timeout{600'000};  // 0: none
  double rate_limit = 0;      // requests per second per key (per client address when open); 0: off
  double rate_burst = 0;      // bucket size; 0: max(1, rate)
  ApiKeys keys;               // needed by /v1/*; /health stays open
  ApiKeys admin_keys;         // DELETE /v1/cache only, which API keys may not call (see authorize_admin)
  bool metrics_auth = false;  // /metrics needs a key too
  std::vector<std::string> allowed_origins;  // CORS: origins or "*"; empty: no CORS headers
  gateway::RouterConfig router;              // a "model" name routed to the small or the large model; off by default
  CacheSettings cache;                       // the response cache; off by default
};

class ApiHandler {
 public:
  // `models`: the engine's, in its order. Reads each chat template from its
  // model file (throws jinja::TemplateError when one does not parse).
  // Throws Error for a router config that does not fit the models.
  ApiHandler(engine::Engine& engine, const std::vector<NamedModel>& models, ApiConfig config);

  // The HTTP handler.
  void handle(HttpRequest req, std::shared_ptr<Exchange> ex);
  // Bodies for errors the HTTP layer answers itself.
  HttpResponse error_page(int status, const std::string& message);

  // New requests get 503 from now on; in-flight ones go on.
  void start_draining() { draining_ = true; }
  bool draining() const { return draining_; }
  int in_flight() const;  // all models'
  void set_connection_count(std::function<int()> fn) { connection_count_ = std::move(fn); }
  const ServedModel& served_model(int index) const { return *models_[static_cast<size_t>(index)]; }
  const ServerMetrics& metrics() const { return metrics_; }

 private:
  // One request being answered: whatever the answer, it carries `headers`.
  using Clock = std::chrono::steady_clock;
  struct Call {
    const HttpRequest& req;
    std::shared_ptr<Exchange> ex;
    std::string id;   // the client's X-Request-Id, or one made here
    Headers headers;  // x-request-id, ...
    Clock::time_point received;
  };

  void preflight(Call& call);
  void route(Call& call);
  void generate(Endpoint endpoint, Call& call);
  struct Routed;
  void generate_routed(GenerationPlan plan, const std::string& tenant, Call& call);  // "model": the router's name
  void choose_model(std::shared_ptr<Routed> routed, GenerationPlan plan, const std::shared_ptr<Exchange>& ex);
  // The rest of generate() once the request's model is known; `cached`:
  // through the response cache (a routed request went through it already).
  void generate_with(ServedModel& model, GenerationPlan plan, const std::string& tenant, Call& call, bool cached);
  void bound_wait(Call& call);
  // Runs `fn`; an exception becomes the call's error answer (ApiError's
  // status, 500 otherwise).
  void answering_errors(Call& call, const std::function<void()>& fn);
  void embed(Call& call);
  // Draining, API key, rate limit: throws ApiError. Returns the tenant the
  // request's cached answers belong to: its API key ("" on an open server).
  std::string admit_client(Call& call);
  void clear_cache(Call& call);  // DELETE /v1/cache
  void authorize_admin(const HttpRequest& req) const;  // throws ApiError (401, 403)
  void reserve_queue(ServedModel& model, int requests);  // its bounded queue: throws ApiError(429) when full
  void authorize(const HttpRequest& req, std::string& client) const;
  ServedModel& named_model(const std::string& name) const;  // 404 when none is
  // The model a request's "model" names; with one model, any name or none.
  ServedModel& model_for(const std::string& requested) const;
  Json model(std::string_view encoded_id) const;  // GET /v1/models/{id}
  Json model_object(const ServedModel& m) const;
  std::string served_names() const;  // for error messages
  Json tokenize(const Json& body) const;
  Json detokenize(const Json& body) const;
  // `reason` (an error's message) goes into the log line.
  void send(Call& call, HttpResponse r, std::string_view reason = {});
  void send_error(Call& call, const ApiError& e);
  std::string new_id(const char* prefix);
  ResponseMeta response_meta(Endpoint endpoint, std::string model);  // a new id, created now
  std::string request_id(const HttpRequest& req);
  std::string metrics_text() const;

  engine::Engine& engine_;
  std::vector<std::unique_ptr<ServedModel>> models_;
  ApiConfig config_;
  std::unique_ptr<ModelRouter> router_;  // with config_.router enabled
  RateLimiter limiter_;
  CorsPolicy cors_;
  ServerMetrics metrics_;
  std::unique_ptr<CacheFront> cache_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_;
  std::function<int()> connection_count_;
  int64_t created_;
};

}  // namespace llmserve::server
