#include "server/cache_front.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "server/cache_replay.h"

namespace llmserve::server {

namespace {

using Clock = std::chrono::steady_clock;

// `Cache-Control: no-store` among the header's comma-separated directives.
bool no_store(const HttpRequest& req) {
  const std::string* control = req.header("cache-control");
  if (!control) return false;
  std::string lower;
  for (const char c : *control) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (size_t start = 0; start <= lower.size();) {
    size_t end = lower.find(',', start);
    if (end == std::string::npos) end = lower.size();
    const size_t first = lower.find_first_not_of(" \t", start);
    const size_t last = lower.find_last_not_of(" \t", end == 0 ? 0 : end - 1);
    if (first < end && last != std::string::npos && lower.compare(first, last + 1 - first, "no-store") == 0) return true;
    start = end + 1;
  }
  return false;
}

gateway::CacheKey key_of(const std::string& tenant, const std::string& scope, const GenerationPlan& plan) {
  const GenerationRequest& r = plan.request;
  const engine::SamplingParams& s = r.sampling;
  gateway::CacheKey k;
  k.tenant = tenant;
  k.model = scope;
  k.endpoint = r.endpoint == Endpoint::Chat ? "chat" : "completions";
  k.prompt_tokens = plan.prompt;
  k.max_tokens = plan.max_new_tokens;
  k.temperature = s.temperature;
  k.top_k = s.top_k;
  k.top_p = s.top_p;
  k.min_p = s.min_p;
  k.repetition_penalty = s.repetition_penalty;
  k.repetition_window = s.repetition_window;
  k.presence_penalty = s.presence_penalty;
  k.frequency_penalty = s.frequency_penalty;
  if (r.seed_given) k.seed = s.seed;
  k.n = r.n;
  k.top_logprobs = r.top_logprobs;
  k.speculative = r.speculative;
  k.stop = plan.stop;
  return k;
}

// The text the semantic layer embeds: the prompt as the model reads it.
std::string prompt_text(const ServedModel& model, const GenerationPlan& plan) {
  if (plan.request.endpoint == Endpoint::Chat) return plan.prompt_text;
  return plan.request.prompt_is_tokens ? model.tokenizer.decode(plan.prompt) : plan.request.prompt_text;
}

const char* layer_name(gateway::CacheLayer layer) { return layer == gateway::CacheLayer::Exact ? "exact" : "semantic"; }

}  // namespace

struct CacheFront::Pending {
  ServedModel& model;  // the model it goes to; routed: the small model, whose tokens key it
  std::string scope;   // the namespace: the model's name, or the router's
  GenerationPlan plan;
  std::weak_ptr<Exchange> ex;  // the HTTP layer holds it while the request is open
  Generate generate;
  gateway::CacheKey key;
  std::vector<float> embedding;
  size_t scored_prompt_tokens = 0;  // a verified semantic hit's: the prompt as the answer's model reads it
  Clock::time_point started = Clock::now();

  bool slots_held = true;

  bool routed() const { return scope != model.name; }
  // The request's queue slots go back unless a Generation took them (a
  // routed request's are the router's to release), however the lookup ends.
  void release_slots() {
    if (slots_held && !routed()) model.in_flight.fetch_sub(plan.request.n);
    slots_held = false;
  }
  ~Pending() { release_slots(); }
  // The plan, with the slots, goes to `generate`.
  void hand_off(std::shared_ptr<Exchange> exchange) {
    slots_held = false;
    generate(std::move(plan), std::move(exchange));
  }
};

CacheFront::CacheFront(engine::Engine& engine, const std::vector<std::unique_ptr<ServedModel>>& models, CacheSettings settings,
                       ServerMetrics& metrics, const std::string& router_name)
    : engine_(engine),
      models_(models),
      settings_(std::move(settings)),
      metrics_(metrics),
      cache_({settings_.max_bytes, settings_.clock ? settings_.clock : std::function<gateway::TimePoint()>(Clock::now)}) {
  if (settings_.ttl.count() <= 0) throw Error("cache TTL must be greater than 0 seconds");
  if (!(settings_.verify_margin >= 0))
    throw Error("cache verification margin must be at least 0 nats, not " + std::to_string(settings_.verify_margin));
  for (const auto& [name, tau] : settings_.taus)
    if (!find_model(models_, name)) throw Error("cache threshold (tau) for model '" + name + "': no such model is served");
  if (settings_.mode != CacheMode::Semantic) return;
  for (const auto& m : models) {
    const auto it = settings_.taus.find(m->name);
    cache_.set_semantic_tau(m->name, it != settings_.taus.end() ? it->second : settings_.tau);
  }
  if (!router_name.empty()) cache_.set_semantic_tau(router_name, settings_.tau);
  if (settings_.embedder == "ngram") ngram_.emplace();
  else if (!(embedder_model_ = find_model(models_, settings_.embedder)))
    throw Error("cache embedder '" + settings_.embedder + "' is neither 'ngram' nor a served model");
}

void CacheFront::answer(ServedModel& model, const std::string& tenant, const HttpRequest& req, GenerationPlan plan,
                        std::shared_ptr<Exchange> ex, Generate generate) {
  lookup(std::make_shared<Pending>(model, model.name, std::move(plan), std::move(ex), std::move(generate)), tenant, req);
}

void CacheFront::answer_routed(const std::string& scope, ServedModel& small, const std::string& tenant, const HttpRequest& req,
                               GenerationPlan plan, std::shared_ptr<Exchange> ex, Generate route) {
  lookup(std::make_shared<Pending>(small, scope, std::move(plan), std::move(ex), std::move(route)), tenant, req);
}

void CacheFront::lookup(std::shared_ptr<Pending> p, const std::string& tenant, const HttpRequest& req) {
  GenerationPlan& plan = p->plan;
  const GenerationRequest& r = plan.request;
  if (!enabled()) return p->hand_off(p->ex.lock());
  const bool deterministic = r.sampling.temperature == 0 || r.seed_given;
  if (!r.cache || no_store(req) || !deterministic || r.top_logprobs >= 0) {
    plan.headers.emplace_back("x-llmserve-cache", "bypass");
    return p->hand_off(p->ex.lock());
  }
  p->key = key_of(tenant, p->scope, plan);
  if (p->routed()) {  // another model may answer: the key is the request's own input, not one model's reading of it
    p->key.prompt_tokens.clear();
    p->key.input = r.endpoint == Endpoint::Chat ? nlohmann::json::parse(r.messages.dump()).dump() : r.prompt_text;  // keys sorted
  }
  ++cache_metrics_.exact_queries;
  if (const gateway::CacheLookup exact = cache_.lookup(p->key); exact.hit) return serve_hit(*p, *exact.hit);
  if (settings_.mode != CacheMode::Semantic) return miss(*p);
  ++cache_metrics_.semantic_queries;
  if (embedder_model_) return embed_with_model(std::move(p));
  std::vector<float> embedding = ngram_->embed(prompt_text(p->model, p->plan));
  lookup_semantic(std::move(p), std::move(embedding));
}

// One engine embedding request of the prompt's text (as much as the
// embedder's context holds); its result continues on the strand. A failed
// embedding leaves the semantic layer out.
void CacheFront::embed_with_model(std::shared_ptr<Pending> p) {
  const ServedModel& e = *embedder_model_;
  const model::InstanceInfo& info = engine_.info(e.index);
  engine::RequestParams params;
  params.model = e.index;
  params.embed = true;
  params.prompt = e.tokenizer.encode(prompt_text(p->model, p->plan), e.tokenizer.add_bos_by_default(), false);
  params.prompt.resize(std::min(params.prompt.size(), static_cast<size_t>(std::min(info.max_context, info.kv_blocks * info.block_size))));
  try {
    engine_.submit(std::move(params), [this, p](const engine::RequestOutput& out) {
      if (!out.finished) return;
      const auto ex = p->ex.lock();
      if (!ex) return;  // p's slots go back with it
      ex->post([this, p, embedding = out.embedding]() mutable { lookup_semantic(std::move(p), std::move(embedding)); });
    });
  } catch (const Error& e) {
    spdlog::warn("cache: the prompt embedding failed ({}); semantic layer skipped", e.what());
    lookup_semantic(std::move(p), {});
  }
}

void CacheFront::lookup_semantic(std::shared_ptr<Pending> p, std::vector<float> embedding) {
  if (const auto ex = p->ex.lock(); !ex || ex->answered()) return;  // answered meanwhile (timeout, drain): no verification
  p->embedding = std::move(embedding);
  gateway::CacheLookup found;
  try {
    found = cache_.lookup(p->key, p->embedding);
  } catch (const Error& e) {  // an embedding the index cannot take (a model's, not finite)
    spdlog::warn("{}; semantic layer skipped", e.what());
    p->embedding.clear();
    return miss(*p);
  }
  if (!found.hit) return miss(*p);
  if (found.hit->layer == gateway::CacheLayer::Exact || !settings_.verify) return serve_hit(*p, *found.hit);
  verify(std::move(p), *found.hit);
}

// The answering model scores the cached answer (choice 0's tokens) after the
// new prompt; the hit stands when the mean log-probability is at least its
// original one less the margin. An answer that cannot be scored is refused.
void CacheFront::verify(std::shared_ptr<Pending> p, gateway::CacheHit hit) {
  const std::vector<int32_t>& answer = hit.answer->choices.front().token_ids;
  auto reject = [this](Pending& pending) {
    ++cache_metrics_.verify_rejections;
    miss(pending);
  };
  // The model that wrote the answer scores it, after the prompt as it reads it.
  ServedModel* scorer = find_model(models_, hit.answer->model);
  std::vector<int32_t> prompt;
  if (scorer == &p->model) {
    prompt = p->plan.prompt;
  } else if (scorer) {
    try {
      prompt = template_prompt(*scorer, p->plan.request).tokens;
    } catch (const std::exception& e) {
      spdlog::debug("cache: the hit's model cannot read this prompt ({})", e.what());
    }
  }
  if (!scorer || prompt.empty() || !hit.answer->mean_logprob || answer.empty() ||
      prompt.size() + answer.size() > static_cast<size_t>(engine_.info(scorer->index).max_context))
    return reject(*p);
  engine::RequestParams params;
  params.model = scorer->index;
  params.score_from = static_cast<int>(prompt.size());
  p->scored_prompt_tokens = prompt.size();
  params.prompt = std::move(prompt);
  params.prompt.insert(params.prompt.end(), answer.begin(), answer.end());
  try {
    engine_.submit(std::move(params), [this, p, hit, reject](const engine::RequestOutput& out) {
      if (!out.finished) return;
      const auto ex = p->ex.lock();
      if (!ex) return;  // p's slots go back with it
      const bool scored = out.finish_reason == engine::FinishReason::Stop && out.scored_tokens > 0;
      const double mean = scored ? out.score_logprob / out.scored_tokens : 0;
      ex->post([this, p, hit, reject, scored, mean] {
        const double floor = *hit.answer->mean_logprob - settings_.verify_margin;
        spdlog::debug("cache: verified semantic hit: mean log-probability {:.3f} (original {:.3f}, floor {:.3f})", mean,
                      *hit.answer->mean_logprob, floor);
        if (scored && mean >= floor) serve_hit(*p, hit);
        else reject(*p);
      });
    });
  } catch (const Error& e) {
    spdlog::warn("cache: the verification request failed ({})", e.what());
    reject(*p);
  }
}

// The new prompt's length as the model that wrote the answer reads it (usage).
size_t CacheFront::prompt_tokens(const Pending& p, const gateway::CacheHit& hit) const {
  if (hit.layer == gateway::CacheLayer::Exact) return static_cast<size_t>(hit.answer->prompt_tokens);  // the same prompt
  if (p.scored_prompt_tokens > 0) return p.scored_prompt_tokens;
  const ServedModel* m = find_model(models_, hit.answer->model);
  if (!m || m == &p.model) return p.plan.prompt.size();
  try {
    return template_prompt(*m, p.plan.request).tokens.size();
  } catch (const std::exception&) {
    return p.plan.prompt.size();
  }
}

void CacheFront::serve_hit(Pending& p, const gateway::CacheHit& hit) {
  p.release_slots();  // now, before the client sees the answer
  const auto ex = p.ex.lock();
  if (!ex || ex->answered()) return;
  cache_metrics_.lookup_seconds.observe(std::chrono::duration<double>(Clock::now() - p.started).count());
  ++(hit.layer == gateway::CacheLayer::Exact ? cache_metrics_.exact_hits : cache_metrics_.semantic_hits);
  GenerationPlan& plan = p.plan;
  plan.headers.emplace_back("x-llmserve-cache", layer_name(hit.layer));
  if (hit.layer == gateway::CacheLayer::Semantic)
    plan.headers.emplace_back("x-llmserve-cache-similarity", fmt::format("{:.4f}", hit.similarity));
  if (p.routed()) plan.headers.emplace_back("x-llmserve-route", hit.answer->model);
  plan.meta.model = hit.answer->model;
  const size_t prompt = prompt_tokens(p, hit);
  replay(*hit.answer, plan, prompt, *ex);
  metrics_.count_http_status(200);
  spdlog::info("{} {} {} model={} status=200 n={} prompt_tokens={} completion_tokens={} request_id={} (cache hit: {})",
               plan.meta.id, plan.remote, plan.request.endpoint == Endpoint::Chat ? "chat" : "completions", plan.meta.model,
               plan.request.n, prompt, hit.answer->completion_tokens, plan.request_id, layer_name(hit.layer));
}

void CacheFront::miss(Pending& p) {
  const auto ex = p.ex.lock();
  if (!ex || ex->answered()) return;  // the slots go back with p
  cache_metrics_.lookup_seconds.observe(std::chrono::duration<double>(Clock::now() - p.started).count());
  p.plan.headers.emplace_back("x-llmserve-cache", "miss");
  p.plan.store = [this, key = p.key, embedding = p.embedding](gateway::CachedAnswer a) {
    cache_.insert(key, embedding, std::move(a), settings_.ttl);
  };
  p.hand_off(ex);
}

size_t CacheFront::clear() {
  const size_t entries = cache_.stats().entries;
  cache_.clear();
  return entries;
}

CacheGauges CacheFront::gauges() const {
  if (!enabled()) return {};
  const gateway::CacheStats s = cache_.stats();
  return {&cache_metrics_, s.entries, s.bytes};
}

}  // namespace llmserve::server
