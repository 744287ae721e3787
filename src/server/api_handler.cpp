#include "server/api_handler.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <optional>
#include <random>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "server/api_error.h"
#include "server/embedding.h"
#include "server/generation.h"
#include "server/openai_response.h"

namespace llmserve::server {

namespace {

std::string client_address(const std::string& remote) {
  const size_t colon = remote.rfind(':');
  return colon == std::string::npos ? remote : remote.substr(0, colon);
}

// X-Request-Id values taken as they are: 1 to 128 visible ASCII characters.
bool usable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

// A path segment with its %XX escapes decoded; nullopt when one is malformed.
std::optional<std::string> percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    unsigned byte = 0;
    const char* digits = s.data() + i + 1;
    if (s.size() - i < 3 || !std::isxdigit(static_cast<unsigned char>(digits[0])) ||
        std::from_chars(digits, digits + 2, byte, 16).ptr != digits + 2)
      return std::nullopt;
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

// Client-supplied text in a log line stays on that line.
std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return out;
}

// What a request's later answers need of it: all but the body.
HttpRequest without_body(const HttpRequest& req) { return {req.method, req.target, req.headers, {}, req.remote}; }

ApiError with_retry(ApiError e, int seconds) {
  e.retry_after_s = seconds;
  return e;
}

// `prompt` as the plan's: tokens, rendered text and stop strings.
void take_prompt(GenerationPlan& plan, TemplatedPrompt prompt) {
  plan.prompt = std::move(prompt.tokens);
  plan.prompt_text = std::move(prompt.text);
  plan.stop = std::move(prompt.stop);
}

ApiError shutting_down() { return with_retry(ApiError(503, "the server is shutting down", "service_unavailable_error"), 5); }

// 401 for a request without the key it needs (`what`: "API key", ...) or with a wrong one.
ApiError unauthorized(const std::string* authorization, const std::string& what) {
  return ApiError(401, authorization ? "incorrect " + what + " provided" : "missing " + what + ": send 'Authorization: Bearer KEY'",
                  "invalid_request_error", {}, "invalid_api_key");
}

}  // namespace

ApiHandler::ApiHandler(engine::Engine& engine, const std::vector<NamedModel>& models, ApiConfig config)
    : engine_(engine),
      config_(std::move(config)),
      limiter_(config_.rate_limit, config_.rate_burst > 0 ? config_.rate_burst : std::max(1.0, config_.rate_limit)),
      cors_(config_.allowed_origins),
      next_id_(std::random_device{}()),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  for (const NamedModel& m : models)
    models_.push_back(std::make_unique<ServedModel>(m.name, static_cast<int>(models_.size()), *m.model));
  if (config_.router.enabled()) router_ = std::make_unique<ModelRouter>(config_.router, engine_, models_);
  cache_ = std::make_unique<CacheFront>(engine_, models_, config_.cache, metrics_,
                                        config_.router.enabled() ? config_.router.name : std::string());
}

int ApiHandler::in_flight() const {
  int n = 0;
  for (const auto& m : models_) n += m->in_flight.load();
  return n;
}

HttpResponse ApiHandler::error_page(int status, const std::string& message) {
  metrics_.count_http_status(status);
  spdlog::info("HTTP layer: status={} {}", status, message);
  const char* code = status == 413 ? "request_too_large" : status == 503 ? "server_busy" : nullptr;
  return {status, "application/json", error_body(ApiError(status, message, error_type_for(status), {}, code ? code : "")), {}};
}

std::string ApiHandler::new_id(const char* prefix) {
  char id[48];
  std::snprintf(id, sizeof id, "%s%016llx", prefix, static_cast<unsigned long long>(next_id_.fetch_add(1) * 0x9E3779B97F4A7C15ull));
  return id;
}

ResponseMeta ApiHandler::response_meta(Endpoint endpoint, std::string model) {
  return {endpoint, new_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-"), static_cast<int64_t>(std::time(nullptr)),
          std::move(model)};
}

std::string ApiHandler::request_id(const HttpRequest& req) {
  const std::string* given = req.header("x-request-id");
  return given && usable_request_id(*given) ? *given : new_id("req_");
}

void ApiHandler::send(Call& call, HttpResponse r, std::string_view reason) {
  metrics_.count_http_status(r.status);
  const HttpRequest& req = call.req;
  const bool quiet = req.path() == "/health" || req.path() == "/metrics";
  if (quiet) spdlog::debug("{} {} {} status={} request_id={}", req.remote, req.method, req.target, r.status, call.id);
  else if (reason.empty())
    spdlog::info("{} {} {} status={} bytes={} request_id={}", req.remote, req.method, req.target, r.status, r.body.size(), call.id);
  else
    spdlog::info("{} {} {} status={} bytes={} request_id={} ({})", req.remote, req.method, req.target, r.status, r.body.size(),
                 call.id, one_line(reason));
  r.headers.insert(r.headers.end(), call.headers.begin(), call.headers.end());
  call.ex->respond(std::move(r));
}

void ApiHandler::handle(HttpRequest req, std::shared_ptr<Exchange> ex) {
  Call call{req, std::move(ex), request_id(req), cors_.response_headers(req), Clock::now()};
  call.headers.emplace_back("x-request-id", call.id);
  answering_errors(call, [&] {
    if (cors_.enabled() && CorsPolicy::is_preflight(req)) return preflight(call);
    route(call);
  });
}

void ApiHandler::answering_errors(Call& call, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    send_error(call, e);
  } catch (const std::exception& e) {
    send(call, {500, "application/json", error_body(ApiError(500, e.what(), "server_error")), {}}, e.what());
  }
}

void ApiHandler::send_error(Call& call, const ApiError& e) {
  HttpResponse r{e.status, "application/json", error_body(e), {}};
  if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  if (!e.allow.empty()) r.headers.emplace_back("Allow", e.allow);
  send(call, std::move(r), e.what());
}

// A browser asks whether a page of another origin may send its request:
// no API key is needed to ask.
void ApiHandler::preflight(Call& call) {
  if (!cors_.allowed_origin(call.req))
    throw ApiError(403, "origin '" + *call.req.header("origin") + "' is not allowed (see --allowed-origins)",
                   "invalid_request_error", {}, "origin_not_allowed");
  send(call, {204, "", "", cors_.preflight_headers(call.req)});
}

void ApiHandler::route(Call& call) {
  const HttpRequest& req = call.req;
  const std::string_view path = req.path();
  auto only = [&](const char* method) {
    const bool get = std::string_view(method) == "GET";
    if (req.method == method || (get && req.method == "HEAD")) return;  // HEAD: GET without the body
    ApiError e(405, "method " + req.method + " is not allowed on " + std::string(path) + "; use " + method);
    e.allow = get ? "GET, HEAD" : method;
    throw e;
  };
  if (path == "/health") {
    only("GET");
    if (draining_) return send(call, {503, "application/json", R"({"status":"draining"})", {{"Retry-After", "5"}}});
    return send(call, {200, "application/json", R"({"status":"ok"})", {}});
  }
  if (path == "/metrics") {
    only("GET");
    std::string client;
    if (config_.metrics_auth) authorize(req, client);
    return send(call, {200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(), {}});
  }
  if (path == "/v1/models") {
    only("GET");
    std::string client;
    authorize(req, client);
    Json list = Json::array();
    for (const auto& m : models_) list.push_back(model_object(*m));
    return send(call, {200, "application/json", dump(model_list(std::move(list))), {}});
  }
  if (path.starts_with("/v1/models/")) {
    only("GET");
    std::string client;
    authorize(req, client);
    return send(call, {200, "application/json", dump(model(path.substr(std::string_view("/v1/models/").size()))), {}});
  }
  if (path == "/tokenize" || path == "/detokenize") {
    only("POST");
    std::string client;
    authorize(req, client);
    const Json body = parse_json_body(req.body, config_.limits.max_json_depth);
    return send(call, {200, "application/json", dump(path == "/tokenize" ? tokenize(body) : detokenize(body)), {}});
  }
  if (path == "/v1/cache") {
    only("DELETE");
    return clear_cache(call);
  }
  if (path == "/v1/embeddings") {
    only("POST");
    return embed(call);
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    only("POST");
    return generate(path == "/v1/completions" ? Endpoint::Completions : Endpoint::Chat, call);
  }
  throw ApiError(404, "unknown request URL: " + req.method + " " + std::string(path), "invalid_request_error", {}, "unknown_url");
}

std::string ApiHandler::served_names() const {
  std::string names;
  for (const auto& m : models_) names += (names.empty() ? "'" : ", '") + m->name + "'";
  return names;
}

ServedModel& ApiHandler::named_model(const std::string& name) const {
  if (ServedModel* m = find_model(models_, name)) return *m;
  throw ApiError(404, "The model '" + name + "' does not exist; this server serves " + served_names(), "invalid_request_error",
                 "model", "model_not_found");
}

ServedModel& ApiHandler::model_for(const std::string& requested) const {
  if (models_.size() == 1) return *models_[0];
  if (requested.empty())
    throw ApiError(400, "'model' is required: this server serves " + served_names(), "invalid_request_error", "model");
  return named_model(requested);
}

Json ApiHandler::model(std::string_view encoded_id) const {
  const auto id = percent_decoded(encoded_id);
  if (!id) throw ApiError(400, "malformed %-escape in the model id", "invalid_request_error", "model");
  return model_object(named_model(*id));
}

Json ApiHandler::model_object(const ServedModel& m) const {
  return server::model_object(m.name, created_, engine_.info(m.index).max_context);
}

Json ApiHandler::tokenize(const Json& body) const {
  const TokenizeRequest r = parse_tokenize_request(body, config_.limits);
  const ServedModel& m = model_for(requested_model(body));
  const tok::Tokenizer& tok = m.tokenizer;
  const std::vector<int32_t> ids = r.messages.is_null() ? tok.encode(r.text, r.add_special && tok.add_bos_by_default(), false)
                                                        : render_chat(m, r.messages, r.add_generation_prompt).encode(tok);
  std::vector<std::string> pieces;
  if (r.with_pieces)
    for (int32_t id : ids) pieces.push_back(tok.piece(id, true));
  return tokenize_response(ids, r.with_pieces ? &pieces : nullptr, engine_.info(m.index).max_context);
}

Json ApiHandler::detokenize(const Json& body) const {
  const tok::Tokenizer& tok = model_for(requested_model(body)).tokenizer;
  return detokenize_response(tok.decode(parse_detokenize_request(body, config_.limits, tok.n_vocab())));
}

void ApiHandler::authorize(const HttpRequest& req, std::string& client) const {
  if (config_.keys.open()) {
    client = client_address(req.remote);
    return;
  }
  const std::string* auth = req.header("authorization");
  auto key = config_.keys.check(auth);
  if (!key) throw unauthorized(auth, "API key");
  client = std::move(*key);
}

std::string ApiHandler::admit_client(Call& call) {
  if (draining_) throw shutting_down();
  std::string client;
  authorize(call.req, client);
  const RateDecision rate = limiter_.admit(client);
  if (limiter_.enabled()) {
    call.headers.emplace_back("x-ratelimit-limit-requests", std::to_string(rate.limit));
    call.headers.emplace_back("x-ratelimit-remaining-requests", std::to_string(rate.remaining));
    call.headers.emplace_back("x-ratelimit-reset-requests", duration_text(rate.reset_s));
  }
  if (!rate.admitted) {
    metrics_.count_rejection("rate_limit");
    throw with_retry(ApiError(429, "rate limit reached for this API key; retry later", "rate_limit_error", {}, "rate_limit_exceeded"),
                     std::max(1, static_cast<int>(std::ceil(rate.retry_after_s))));
  }
  return config_.keys.open() ? std::string() : client;
}

// Clearing drops every tenant's answers: it takes an admin key, and an API
// key gets 403. A server with neither kind of key lets anyone clear (local use).
void ApiHandler::authorize_admin(const HttpRequest& req) const {
  if (config_.admin_keys.open() && config_.keys.open()) return;
  const std::string* auth = req.header("authorization");
  if (config_.admin_keys.check(auth)) return;
  if (!config_.keys.check(auth)) throw unauthorized(auth, config_.admin_keys.open() ? "API key" : "admin key");
  throw ApiError(403,
                 config_.admin_keys.open()
                     ? "clearing the response cache needs an admin key, and this server has none (serve --admin-key)"
                     : "clearing the response cache needs an admin key (serve --admin-key), not an API key",
                 "permission_error", {}, "insufficient_permissions");
}

void ApiHandler::clear_cache(Call& call) {
  authorize_admin(call.req);
  if (!cache_->enabled())
    throw ApiError(400, "the response cache is off (see serve --cache)", "invalid_request_error", {}, "cache_off");
  const size_t dropped = cache_->clear();
  send(call, {200, "application/json", dump(Json{{"object", "cache.cleared"}, {"entries", dropped}}), {}});
}

void ApiHandler::reserve_queue(ServedModel& model, int requests) {
  // The model's bounded queue: running slots plus --max-queue waiting requests.
  const int capacity = engine_.config().max_seqs + config_.max_queue;
  if (model.in_flight.fetch_add(requests) + requests > capacity) {
    model.in_flight.fetch_sub(requests);
    metrics_.count_rejection("queue_full");
    throw with_retry(ApiError(429, "the server is at capacity (queue full); retry later", "rate_limit_error", {}, "queue_full"), 1);
  }
}

void ApiHandler::generate(Endpoint endpoint, Call& call) {
  const std::string tenant = admit_client(call);
  GenerationPlan plan;
  plan.request = parse_generation_request(endpoint, parse_json_body(call.req.body, config_.limits.max_json_depth), config_.limits);
  if (!router_ || !router_->routes(plan.request.model)) {
    ServedModel& model = model_for(plan.request.model);
    bound_wait(call);
    return generate_with(model, std::move(plan), tenant, call, true);
  }
  generate_routed(std::move(plan), tenant, call);
}

// What a routed request keeps of its call until the model is chosen, and
// its slot of the small model's queue (released at the choice, or when the
// request ends any other way).
struct ApiHandler::Routed {
  Routed(const Call& call, std::string tenant, std::atomic<int>* slot)
      : req(without_body(call.req)), ex(call.ex), id(call.id), tenant(std::move(tenant)), received(call.received), slot(slot) {}
  Routed(const Routed&) = delete;  // the slot is given back once
  Routed& operator=(const Routed&) = delete;
  ~Routed() { release(); }
  void release() {
    if (slot) slot->fetch_sub(1);
    slot = nullptr;
  }

  HttpRequest req;  // without the body
  std::weak_ptr<Exchange> ex;
  std::string id, tenant;
  Clock::time_point received;
  std::atomic<int>* slot;
};

// A request for the router's name is looked up in the cache under that name
// (keyed by its own prompt or messages) and, on a miss, routed.
void ApiHandler::generate_routed(GenerationPlan plan, const std::string& tenant, Call& call) {
  const GenerationRequest& r = plan.request;
  if (r.prompt_is_tokens)
    throw ApiError(400, "model '" + r.model + "' routes text prompts only: token ids belong to one model's vocabulary",
                   "invalid_request_error", "prompt");
  ServedModel& small = router_->small();
  take_prompt(plan, template_prompt(small, r));
  plan.max_new_tokens = r.max_tokens;
  plan.meta = response_meta(r.endpoint, r.model);
  plan.remote = call.req.remote;
  plan.request_id = call.id;
  plan.headers = call.headers;
  reserve_queue(small, 1);
  auto routed = std::make_shared<Routed>(call, tenant, &small.in_flight);
  bound_wait(call);
  const std::string scope = r.model;
  cache_->answer_routed(scope, small, tenant, call.req, std::move(plan), call.ex,
                        [this, routed](GenerationPlan p, std::shared_ptr<Exchange> ex) { choose_model(routed, std::move(p), ex); });
}

// On a cache miss (maybe later, on the strand): the small model reads the
// prompt, then the chosen model generates, its answer stored under the
// router's key.
void ApiHandler::choose_model(std::shared_ptr<Routed> routed, GenerationPlan p, const std::shared_ptr<Exchange>& ex) {
  auto plan = std::make_shared<GenerationPlan>(std::move(p));
  Call call{routed->req, ex, routed->id, plan->headers, routed->received};
  answering_errors(call, [&] {
    router_->choose(plan->request, std::move(plan->prompt), metrics_, ex, [this, routed, plan](ServedModel& model) {
      routed->release();
      const auto ex = routed->ex.lock();
      if (!ex || ex->answered()) return;  // nobody to answer, or answered already (timeout, drain)
      Call c{routed->req, ex, routed->id, std::move(plan->headers), routed->received};
      c.headers.emplace_back("x-llmserve-route", model.name);
      answering_errors(c, [&] {
        if (draining_) throw shutting_down();
        generate_with(model, std::move(*plan), routed->tenant, c, false);
      });
    });
  });
}

// Until a Generation or a cache hit answers, a request may wait on engine
// calls (the router's prefill, the cache's embedding or verification): the
// request's timeout and the server's stop end that wait.
void ApiHandler::bound_wait(Call& call) {
  auto answer = [this, weak = std::weak_ptr<Exchange>(call.ex), id = call.id, headers = call.headers,
                 req = without_body(call.req)](ApiError e) {
    const auto ex = weak.lock();
    if (!ex || ex->answered()) return;
    if (e.status == 504) metrics_.count_rejection("timeout");
    Call c{req, ex, id, headers, Clock::now()};
    send_error(c, e);
  };
  if (config_.request_timeout.count() > 0)
    call.ex->after(time_left(config_.request_timeout, call.received),
                   [answer, timeout = config_.request_timeout] { answer(timeout_error(timeout)); });
  call.ex->on_server_stop([answer] { answer(drain_timeout_error()); });
}

void ApiHandler::generate_with(ServedModel& model, GenerationPlan plan, const std::string& tenant, Call& call, bool cached) {
  const HttpRequest& req = call.req;
  const Endpoint endpoint = plan.request.endpoint;
  GenerationRequest& r = plan.request;
  take_prompt(plan, template_prompt(model, r));
  if (plan.prompt.empty()) throw ApiError(400, "the prompt is empty", "invalid_request_error", "prompt");

  const int ctx = engine_.info(model.index).max_context;
  const int prompt_len = static_cast<int>(plan.prompt.size());
  const int prompt_limit = config_.max_prompt_tokens > 0 ? std::min(config_.max_prompt_tokens, ctx - 1) : ctx - 1;
  if (prompt_len > prompt_limit)
    throw ApiError(400, "the prompt has " + std::to_string(prompt_len) + " tokens; at most " + std::to_string(prompt_limit) +
                            " are allowed (context " + std::to_string(ctx) + ")",
                   "invalid_request_error", endpoint == Endpoint::Chat ? "messages" : "prompt", "context_length_exceeded");
  const int room = ctx - prompt_len;
  if (r.max_tokens > room)
    throw ApiError(400, "max_tokens " + std::to_string(r.max_tokens) + " plus the prompt's " + std::to_string(prompt_len) +
                            " tokens exceed the context of " + std::to_string(ctx),
                   "invalid_request_error", "max_tokens", "context_length_exceeded");
  // OpenAI's defaults: 16 tokens for completions, the rest of the context for chat.
  plan.max_new_tokens = r.max_tokens > 0 ? r.max_tokens
                                         : std::min(room, endpoint == Endpoint::Completions ? 16 : config_.limits.max_tokens);

  reserve_queue(model, r.n);

  if (plan.meta.id.empty()) plan.meta = response_meta(endpoint, model.name);  // a routed request has its own
  plan.meta.model = model.name;
  plan.remote = req.remote;
  plan.request_id = call.id;
  plan.headers = call.headers;
  plan.timeout = config_.request_timeout;
  plan.received = call.received;
  auto start = [this, &model](GenerationPlan p, std::shared_ptr<Exchange> ex) {
    std::make_shared<Generation>(GenerationContext{engine_, model, metrics_}, std::move(p), std::move(ex))->start();
  };
  if (!cached) return start(std::move(plan), call.ex);
  cache_->answer(model, tenant, req, std::move(plan), call.ex, start);
}

// One engine request per input, each computing the input's every token (as
// much room as the context and the KV pool give it).
void ApiHandler::embed(Call& call) {
  admit_client(call);
  const EmbeddingRequest r = parse_embedding_request(parse_json_body(call.req.body, config_.limits.max_json_depth), config_.limits);
  ServedModel& model = model_for(r.model);
  const model::InstanceInfo& info = engine_.info(model.index);
  if (r.dimensions != 0 && r.dimensions != info.n_embd)
    throw ApiError(400, "'dimensions' " + std::to_string(r.dimensions) + " is not supported: this model's embeddings have " +
                            std::to_string(info.n_embd),
                   "invalid_request_error", "dimensions");
  int max_tokens = std::min(info.max_context, info.kv_blocks * info.block_size);
  if (config_.max_prompt_tokens > 0) max_tokens = std::min(max_tokens, config_.max_prompt_tokens);
  EmbeddingPlan plan{tokenize_inputs(r, model.tokenizer, max_tokens), r.encoding, model.name, call.req.remote, call.id,
                     call.headers, config_.request_timeout};
  const int capacity = engine_.config().max_seqs + config_.max_queue;
  const int n = static_cast<int>(plan.inputs.size());
  if (n > capacity)
    throw ApiError(400, "'input' holds " + std::to_string(n) + " inputs; this server takes at most " + std::to_string(capacity) +
                            " per request (--max-seqs + --max-queue)",
                   "invalid_request_error", "input");
  reserve_queue(model, n);
  std::make_shared<Embedding>(EmbeddingContext{engine_, model, metrics_}, std::move(plan), call.ex)->start();
}

std::string ApiHandler::metrics_text() const {
  std::vector<ModelSeries> series;
  for (const auto& m : models_) series.push_back({m->name, engine_.metrics(m->index), m->metrics, m->in_flight.load()});
  return metrics_.render(series, {connection_count_ ? connection_count_() : 0, draining_.load()}, cache_->gauges());
}

}  // namespace llmserve::server
