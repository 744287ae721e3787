#pragma once
// Server-side metrics and their Prometheus text exposition (format 0.0.4).
// Names follow vLLM's where the meaning is the same, prefixed "llmserve:".
// Observations may come from any thread.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace llmserve::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implied
  void observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

// How a request ended, as vLLM's finished_reason label says it.
enum class Outcome { Stop, Length, Abort, Error };
const char* outcome_label(Outcome o);

// What one model's requests observed (the API handler keeps one per model).
class ModelMetrics {
 public:
  ModelMetrics();

  Histogram time_to_first_token;    // seconds, per engine request
  Histogram inter_token_latency;    // seconds between consecutive tokens of one request
  Histogram e2e_request_latency;    // seconds
  Histogram request_queue_time;     // seconds, submit -> first scheduled
  Histogram prompt_tokens_per_request;
  Histogram generation_tokens_per_request;

  void count_outcome(Outcome o) { outcomes_[static_cast<size_t>(o)].fetch_add(1, std::memory_order_relaxed); }
  uint64_t outcomes(Outcome o) const { return outcomes_[static_cast<size_t>(o)].load(std::memory_order_relaxed); }

 private:
  std::array<std::atomic<uint64_t>, 4> outcomes_{};
};

// One model's series, labelled model_name="name".
struct ModelSeries {
  std::string name;
  engine::EngineMetrics engine;
  const ModelMetrics& requests;
  int in_flight = 0;  // engine requests the API handler admitted and are not finished
};

// The response cache's counters (server/cache_front.h).
struct CacheMetrics {
  CacheMetrics();
  std::atomic<uint64_t> exact_queries{0}, exact_hits{0}, semantic_queries{0}, semantic_hits{0};
  std::atomic<uint64_t> verify_rejections{0};  // semantic hits the answering model did not confirm
  Histogram lookup_seconds;                    // a request's lookups, embedding and verification included
};

struct CacheGauges {
  const CacheMetrics* metrics = nullptr;  // null: the cache is off and has no series
  size_t entries = 0;
  size_t bytes = 0;
};

// Gauges of the whole server that the API handler owns.
struct ApiGauges {
  int open_connections = 0;
  bool draining = false;
};

// The server-wide counters, and the exposition of every model's series
// next to them (server-wide series carry no model_name).
class ServerMetrics {
 public:
  void count_http_status(int status);
  void count_rejection(const std::string& reason);  // rate_limit, queue_full, timeout, ...
  void count_route(const std::string& model);       // the complexity router sent a request to this model

  std::string render(const std::vector<ModelSeries>& models, const ApiGauges& gauges, const CacheGauges& cache = {}) const;

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> http_status_;
  std::map<std::string, uint64_t> rejections_;
  std::map<std::string, uint64_t> routes_;
};

// Label values per the text format: backslash, quote and newline escaped.
std::string escape_label(const std::string& v);

}  // namespace llmserve::server
