#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace llmserve::server {

namespace {

// Bucket bounds: vLLM's, extended downwards because a small model on a CPU
// produces tokens in well under 10 ms.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                         0.3,   0.4,    0.5,   0.75,   1.0,  2.5,   5.0,  7.5,   10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBuckets = {0.01, 0.05, 0.1,  0.3,  0.5,  0.8,  1.0,   1.5,   2.0,   2.5,   5.0, 10.0,
                                             15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kCacheLookupBuckets = {0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002,
                                                 0.005,   0.01,    0.025,  0.05,    0.1,    0.25,  1.0};
const std::vector<double> kTokenBuckets = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Writer {
 public:
  void family(const std::string& name, const char* type, const char* help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  // `labels`: `a="x",b="y"`, or empty for none.
  void sample(const std::string& name, const std::string& labels, double v) {
    out_ += name + (labels.empty() ? "" : "{" + labels + "}") + " " + num(v) + "\n";
  }
  void histogram(const std::string& name, const std::string& labels, const Histogram& h) {
    const std::string sep = labels.empty() ? "" : labels + ",";
    const auto s = h.snapshot();
    for (size_t i = 0; i < s.bounds.size(); ++i)
      sample(name + "_bucket", sep + "le=\"" + num(s.bounds[i]) + "\"", static_cast<double>(s.cumulative[i]));
    sample(name + "_bucket", sep + "le=\"+Inf\"", static_cast<double>(s.count));
    sample(name + "_sum", labels, s.sum);
    sample(name + "_count", labels, static_cast<double>(s.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string model_label(const ModelSeries& m) { return "model_name=\"" + escape_label(m.name) + "\""; }

}  // namespace

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s{bounds_, {}, sum_, count_};
  uint64_t acc = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(acc += c);
  return s;
}

const char* outcome_label(Outcome o) {
  switch (o) {
    case Outcome::Stop: return "stop";
    case Outcome::Length: return "length";
    case Outcome::Abort: return "abort";
    case Outcome::Error: return "error";
  }
  return "error";
}

ModelMetrics::ModelMetrics()
    : time_to_first_token(kTtftBuckets),
      inter_token_latency(kItlBuckets),
      e2e_request_latency(kLatencyBuckets),
      request_queue_time(kLatencyBuckets),
      prompt_tokens_per_request(kTokenBuckets),
      generation_tokens_per_request(kTokenBuckets) {}

CacheMetrics::CacheMetrics() : lookup_seconds(kCacheLookupBuckets) {}

void ServerMetrics::count_http_status(int status) {
  std::lock_guard lock(mu_);
  ++http_status_[status];
}

void ServerMetrics::count_rejection(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rejections_[reason];
}

void ServerMetrics::count_route(const std::string& model) {
  std::lock_guard lock(mu_);
  ++routes_[model];
}

std::string ServerMetrics::render(const std::vector<ModelSeries>& models, const ApiGauges& g, const CacheGauges& cache) const {
  Writer w;
  // A family with one sample per model.
  auto per_model = [&](const std::string& name, const char* type, const char* help, auto value) {
    w.family(name, type, help);
    for (const ModelSeries& m : models) w.sample(name, model_label(m), static_cast<double>(value(m)));
  };
  auto per_model_histogram = [&](const std::string& name, const char* help, Histogram ModelMetrics::*h) {
    w.family(name, "histogram", help);
    for (const ModelSeries& m : models) w.histogram(name, model_label(m), m.requests.*h);
  };
  using M = const ModelSeries&;
  per_model("llmserve:num_requests_running", "gauge", "Number of requests holding KV blocks (running).",
            [](M m) { return m.engine.scheduler.running; });
  per_model("llmserve:num_requests_waiting", "gauge", "Number of requests waiting in the engine's queue.",
            [](M m) { return m.engine.scheduler.waiting; });
  per_model("llmserve:num_requests_in_flight", "gauge", "Engine requests admitted by the API handler and not finished.",
            [](M m) { return m.in_flight; });
  per_model("llmserve:kv_cache_usage_perc", "gauge", "KV-cache usage: fraction of blocks in use (1 = full).", [](M m) {
    const auto& s = m.engine.scheduler;
    return s.blocks_total > 0 ? static_cast<double>(s.blocks_used) / s.blocks_total : 0.0;
  });
  per_model("llmserve:kv_cache_blocks_used", "gauge", "KV-cache blocks referenced by live sequences.",
            [](M m) { return m.engine.scheduler.blocks_used; });
  per_model("llmserve:kv_cache_blocks_free", "gauge", "KV-cache blocks free (cached prefixes included).",
            [](M m) { return m.engine.scheduler.blocks_free; });
  per_model("llmserve:kv_cache_blocks_total", "gauge", "KV-cache blocks in the pool.",
            [](M m) { return m.engine.scheduler.blocks_total; });
  per_model("llmserve:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
            [](M m) { return m.engine.scheduler.prefix_queried_tokens; });
  per_model("llmserve:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.",
            [](M m) { return m.engine.scheduler.prefix_hit_tokens; });
  per_model("llmserve:num_preemptions_total", "counter", "Sequences preempted for lack of KV blocks.",
            [](M m) { return m.engine.scheduler.preemptions; });
  per_model("llmserve:prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
            [](M m) { return m.engine.prompt_tokens; });
  per_model("llmserve:generation_tokens_total", "counter", "Generated tokens.", [](M m) { return m.engine.generated_tokens; });
  per_model("llmserve:engine_steps_total", "counter", "Engine steps run.", [](M m) { return m.engine.steps; });
  // Speculative decoding (vLLM's spec_decode names); 0 with --spec off.
  per_model("llmserve:spec_decode_num_drafts_total", "counter", "Decode entries that verified draft tokens.",
            [](M m) { return m.engine.spec.drafts; });
  per_model("llmserve:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed and verified.",
            [](M m) { return m.engine.spec.draft_tokens; });
  per_model("llmserve:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.",
            [](M m) { return m.engine.spec.accepted_tokens; });
  w.family("llmserve:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Drafts whose token at this position (0 = first) was accepted.");
  for (const ModelSeries& m : models)
    for (size_t i = 0; i < m.engine.spec.accepted_per_pos.size(); ++i)
      w.sample("llmserve:spec_decode_num_accepted_tokens_per_pos_total", model_label(m) + ",position=\"" + std::to_string(i) + "\"",
               static_cast<double>(m.engine.spec.accepted_per_pos[i]));

  w.family("llmserve:request_success_total", "counter", "Finished requests by finish reason.");
  for (const ModelSeries& m : models)
    for (Outcome o : {Outcome::Stop, Outcome::Length, Outcome::Abort, Outcome::Error})
      w.sample("llmserve:request_success_total", model_label(m) + ",finished_reason=\"" + outcome_label(o) + "\"",
               static_cast<double>(m.requests.outcomes(o)));

  per_model_histogram("llmserve:time_to_first_token_seconds", "Time to first token in seconds.", &ModelMetrics::time_to_first_token);
  per_model_histogram("llmserve:inter_token_latency_seconds", "Inter-token latency in seconds.", &ModelMetrics::inter_token_latency);
  // vLLM's older name for the same histogram, kept for one release.
  per_model_histogram("llmserve:time_per_output_token_seconds",
                      "Deprecated: llmserve:inter_token_latency_seconds under its old name.", &ModelMetrics::inter_token_latency);
  per_model_histogram("llmserve:e2e_request_latency_seconds", "End-to-end request latency in seconds.",
                      &ModelMetrics::e2e_request_latency);
  per_model_histogram("llmserve:request_queue_time_seconds", "Time requests spent waiting before first scheduled, in seconds.",
                      &ModelMetrics::request_queue_time);
  per_model_histogram("llmserve:request_prompt_tokens", "Prompt tokens per request.", &ModelMetrics::prompt_tokens_per_request);
  per_model_histogram("llmserve:request_generation_tokens", "Generated tokens per request.",
                      &ModelMetrics::generation_tokens_per_request);

  w.family("llmserve:http_open_connections", "gauge", "Open HTTP connections.");
  w.sample("llmserve:http_open_connections", "", g.open_connections);
  w.family("llmserve:server_draining", "gauge", "1 while the server finishes in-flight requests before exiting.");
  w.sample("llmserve:server_draining", "", g.draining ? 1 : 0);
  if (const CacheMetrics* c = cache.metrics) {
    w.family("llmserve:cache_queries_total", "counter", "Response cache lookups by layer.");
    w.sample("llmserve:cache_queries_total", "layer=\"exact\"", static_cast<double>(c->exact_queries.load()));
    w.sample("llmserve:cache_queries_total", "layer=\"semantic\"", static_cast<double>(c->semantic_queries.load()));
    w.family("llmserve:cache_hits_total", "counter", "Requests answered from the response cache, by layer.");
    w.sample("llmserve:cache_hits_total", "layer=\"exact\"", static_cast<double>(c->exact_hits.load()));
    w.sample("llmserve:cache_hits_total", "layer=\"semantic\"", static_cast<double>(c->semantic_hits.load()));
    w.family("llmserve:cache_verify_rejections_total", "counter",
             "Semantic hits not served: the answering model scored the cached answer too low for the new prompt.");
    w.sample("llmserve:cache_verify_rejections_total", "", static_cast<double>(c->verify_rejections.load()));
    w.family("llmserve:cache_lookup_seconds", "histogram",
             "Time from a cacheable request to its cache decision (embedding and verification included), seconds.");
    w.histogram("llmserve:cache_lookup_seconds", "", c->lookup_seconds);
    w.family("llmserve:cache_entries", "gauge", "Answers in the response cache.");
    w.sample("llmserve:cache_entries", "", static_cast<double>(cache.entries));
    w.family("llmserve:cache_bytes", "gauge", "Bytes the response cache holds (its memory bound counts these).");
    w.sample("llmserve:cache_bytes", "", static_cast<double>(cache.bytes));
  }
  {
    std::lock_guard lock(mu_);
    w.family("llmserve:http_responses_total", "counter", "HTTP responses by status code.");
    for (const auto& [status, n] : http_status_)
      w.sample("llmserve:http_responses_total", "status=\"" + std::to_string(status) + "\"", static_cast<double>(n));
    w.family("llmserve:request_rejected_total", "counter", "Requests refused by the API handler, by reason.");
    for (const auto& [reason, n] : rejections_)
      w.sample("llmserve:request_rejected_total", "reason=\"" + escape_label(reason) + "\"", static_cast<double>(n));
    w.family("llmserve:router_decisions_total", "counter", "Requests the complexity router sent to each model.");
    for (const auto& [model, n] : routes_)
      w.sample("llmserve:router_decisions_total", "model_name=\"" + escape_label(model) + "\"", static_cast<double>(n));
  }
  return w.take();
}

}  // namespace llmserve::server
