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
const std::vector<double> kTokenBuckets = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Writer {
 public:
  explicit Writer(const std::string& model) : labels_("model_name=\"" + escape_label(model) + "\"") {}

  void family(const std::string& name, const char* type, const char* help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, double v, const std::string& extra = {}) {
    out_ += name + "{" + labels_ + (extra.empty() ? "" : "," + extra) + "} " + num(v) + "\n";
  }
  void gauge(const std::string& name, const char* help, double v) {
    family(name, "gauge", help);
    sample(name, v);
  }
  void counter(const std::string& name, const char* help, double v) {
    family(name, "counter", help);
    sample(name, v);
  }
  void histogram(const std::string& name, const char* help, const Histogram& h) {
    family(name, "histogram", help);
    const auto s = h.snapshot();
    for (size_t i = 0; i < s.bounds.size(); ++i) sample(name + "_bucket", static_cast<double>(s.cumulative[i]), "le=\"" + num(s.bounds[i]) + "\"");
    sample(name + "_bucket", static_cast<double>(s.count), "le=\"+Inf\"");
    sample(name + "_sum", s.sum);
    sample(name + "_count", static_cast<double>(s.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string labels_;
  std::string out_;
};

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

ServerMetrics::ServerMetrics()
    : time_to_first_token(kTtftBuckets),
      inter_token_latency(kItlBuckets),
      e2e_request_latency(kLatencyBuckets),
      request_queue_time(kLatencyBuckets),
      prompt_tokens_per_request(kTokenBuckets),
      generation_tokens_per_request(kTokenBuckets) {}

void ServerMetrics::count_http_status(int status) {
  std::lock_guard lock(mu_);
  ++http_status_[status];
}

void ServerMetrics::count_rejection(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rejections_[reason];
}

std::string ServerMetrics::render(const engine::EngineMetrics& e, const ApiGauges& g, const std::string& model) const {
  const auto& s = e.scheduler;
  Writer w(model);
  w.gauge("llmserve:num_requests_running", "Number of requests holding KV blocks (running).", s.running);
  w.gauge("llmserve:num_requests_waiting", "Number of requests waiting in the engine's queue.", s.waiting);
  w.gauge("llmserve:num_requests_in_flight", "Engine requests admitted by the API handler and not finished.", g.in_flight);
  w.gauge("llmserve:kv_cache_usage_perc", "KV-cache usage: fraction of blocks in use (1 = full).",
          s.blocks_total > 0 ? static_cast<double>(s.blocks_used) / s.blocks_total : 0.0);
  w.gauge("llmserve:kv_cache_blocks_used", "KV-cache blocks referenced by live sequences.", s.blocks_used);
  w.gauge("llmserve:kv_cache_blocks_free", "KV-cache blocks free (cached prefixes included).", s.blocks_free);
  w.gauge("llmserve:kv_cache_blocks_total", "KV-cache blocks in the pool.", s.blocks_total);
  w.counter("llmserve:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.",
            static_cast<double>(s.prefix_queried_tokens));
  w.counter("llmserve:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
            static_cast<double>(s.prefix_hit_tokens));
  w.counter("llmserve:num_preemptions_total", "Sequences preempted for lack of KV blocks.", static_cast<double>(s.preemptions));
  w.counter("llmserve:prompt_tokens_total", "Prompt tokens of admitted requests.", static_cast<double>(e.prompt_tokens));
  w.counter("llmserve:generation_tokens_total", "Generated tokens.", static_cast<double>(e.generated_tokens));
  w.counter("llmserve:engine_steps_total", "Engine steps run.", static_cast<double>(e.steps));
  // Speculative decoding (vLLM's spec_decode names); 0 with --spec off.
  w.counter("llmserve:spec_decode_num_drafts_total", "Decode entries that verified draft tokens.",
            static_cast<double>(e.spec.drafts));
  w.counter("llmserve:spec_decode_num_draft_tokens_total", "Draft tokens proposed and verified.",
            static_cast<double>(e.spec.draft_tokens));
  w.counter("llmserve:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.",
            static_cast<double>(e.spec.accepted_tokens));
  w.family("llmserve:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Drafts whose token at this position (0 = first) was accepted.");
  for (size_t i = 0; i < e.spec.accepted_per_pos.size(); ++i)
    w.sample("llmserve:spec_decode_num_accepted_tokens_per_pos_total", static_cast<double>(e.spec.accepted_per_pos[i]),
             "position=\"" + std::to_string(i) + "\"");

  w.family("llmserve:request_success_total", "counter", "Finished requests by finish reason.");
  for (Outcome o : {Outcome::Stop, Outcome::Length, Outcome::Abort, Outcome::Error})
    w.sample("llmserve:request_success_total",
             static_cast<double>(outcomes_[static_cast<size_t>(o)].load(std::memory_order_relaxed)),
             std::string("finished_reason=\"") + outcome_label(o) + "\"");

  w.histogram("llmserve:time_to_first_token_seconds", "Time to first token in seconds.", time_to_first_token);
  w.histogram("llmserve:inter_token_latency_seconds", "Inter-token latency in seconds.", inter_token_latency);
  // vLLM's older name for the same histogram, kept for one release.
  w.histogram("llmserve:time_per_output_token_seconds",
              "Deprecated: llmserve:inter_token_latency_seconds under its old name.", inter_token_latency);
  w.histogram("llmserve:e2e_request_latency_seconds", "End-to-end request latency in seconds.", e2e_request_latency);
  w.histogram("llmserve:request_queue_time_seconds", "Time requests spent waiting before first scheduled, in seconds.",
              request_queue_time);
  w.histogram("llmserve:request_prompt_tokens", "Prompt tokens per request.", prompt_tokens_per_request);
  w.histogram("llmserve:request_generation_tokens", "Generated tokens per request.", generation_tokens_per_request);

  w.gauge("llmserve:http_open_connections", "Open HTTP connections.", g.open_connections);
  w.gauge("llmserve:server_draining", "1 while the server finishes in-flight requests before exiting.", g.draining ? 1 : 0);
  {
    std::lock_guard lock(mu_);
    w.family("llmserve:http_responses_total", "counter", "HTTP responses by status code.");
    for (const auto& [status, n] : http_status_)
      w.sample("llmserve:http_responses_total", static_cast<double>(n), "status=\"" + std::to_string(status) + "\"");
    w.family("llmserve:request_rejected_total", "counter", "Requests refused by the API handler, by reason.");
    for (const auto& [reason, n] : rejections_)
      w.sample("llmserve:request_rejected_total", static_cast<double>(n), "reason=\"" + escape_label(reason) + "\"");
  }
  return w.take();
}

}  // namespace llmserve::server
