#pragma once
// The response cache in front of the engines (gateway/response_cache.h):
// which completions may be answered from it, the lookups, verified semantic
// hits, the replay of a hit and the storing of a fresh answer.
//
// A request is cached only when the cache is on, the request is
// deterministic (temperature 0 or a seed), asks for no logprobs and did not
// opt out ("cache": false, or `Cache-Control: no-store`). Its key is the
// canonical request after templating (gateway/cache_key.h; a routed
// request's holds its own prompt or messages instead), per API key.
// On a miss of the exact layer, the semantic layer (when on) looks for the
// nearest prompt embedding (the n-gram embedder's, or a served model's
// through an engine embedding request); a semantic hit is verified before it
// is served: the answering model scores the cached answer after the new
// prompt (an engine score request), and the hit stands only if that mean
// log-probability is at least the one it had after its own prompt minus the
// margin. Engine calls answer on the engine thread; their results are posted
// to the exchange's strand, where everything else runs.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gateway/ngram_embedder.h"
#include "gateway/response_cache.h"
#include "server/generation.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/served_model.h"

namespace llmserve::server {

enum class CacheMode { Off, Exact, Semantic };

struct CacheSettings {
  CacheMode mode = CacheMode::Off;
  std::chrono::milliseconds ttl{600'000};  // > 0
  size_t max_bytes = size_t{256} << 20;
  double tau = 0.9;                    // the semantic threshold of models not in `taus`, in [0, 1]
  std::map<std::string, double> taus;  // by served model name
  std::string embedder = "ngram";      // "ngram" or a served model's name
  bool verify = true;
  double verify_margin = 0.5;  // nats, >= 0
  std::function<gateway::TimePoint()> clock;  // tests inject one; empty: steady_clock
};

class CacheFront {
 public:
  // Throws Error for settings that cannot work (a tau outside [0, 1], a TTL
  // or memory of 0, an embedder or tau for a model that is not served).
  // `router_name` (when routing is on) gets a namespace of its own, with the
  // default tau.
  CacheFront(engine::Engine& engine, const std::vector<std::unique_ptr<ServedModel>>& models, CacheSettings settings,
             ServerMetrics& metrics, const std::string& router_name);

  bool enabled() const { return settings_.mode != CacheMode::Off; }

  // On the exchange's strand, for a validated, admitted completion whose
  // queue slots (plan.request.n) are reserved: replays a hit (releasing the
  // slots) or calls `generate` with the plan, set up to store its answer,
  // and the exchange (on its strand, maybe later).
  using Generate = std::function<void(GenerationPlan, std::shared_ptr<Exchange>)>;
  void answer(ServedModel& model, const std::string& tenant, const HttpRequest& req, GenerationPlan plan,
              std::shared_ptr<Exchange> ex, Generate generate);
  // The same for a request named for the router (`scope`), before it is
  // routed: cached in that namespace, keyed by the request's own prompt or
  // messages (the small model's rendering is what the semantic layer
  // embeds; plan.max_new_tokens is the request's max_tokens). A hit is
  // replayed as the model that wrote it, which verifies a semantic hit
  // (unless verification is off); a miss calls `route`. It holds no queue
  // slots of its own.
  void answer_routed(const std::string& scope, ServedModel& small, const std::string& tenant, const HttpRequest& req,
                     GenerationPlan plan, std::shared_ptr<Exchange> ex, Generate route);

  size_t clear();  // returns the entries dropped
  CacheMetrics& metrics() { return cache_metrics_; }
  CacheGauges gauges() const;

 private:
  struct Pending;
  void lookup(std::shared_ptr<Pending> p, const std::string& tenant, const HttpRequest& req);
  void lookup_semantic(std::shared_ptr<Pending> p, std::vector<float> embedding);
  void verify(std::shared_ptr<Pending> p, gateway::CacheHit hit);
  void serve_hit(Pending& p, const gateway::CacheHit& hit);
  size_t prompt_tokens(const Pending& p, const gateway::CacheHit& hit) const;
  void miss(Pending& p);
  void embed_with_model(std::shared_ptr<Pending> p);

  engine::Engine& engine_;
  const std::vector<std::unique_ptr<ServedModel>>& models_;
  CacheSettings settings_;
  ServerMetrics& metrics_;
  CacheMetrics cache_metrics_;
  gateway::ResponseCache cache_;
  std::optional<gateway::NgramEmbedder> ngram_;
  ServedModel* embedder_model_ = nullptr;  // --cache-embedder MODEL
};

}  // namespace llmserve::server
