#pragma once
// The serving engine: owns the model, the KV pool, the scheduler and the
// loop thread that drives them. Any thread may submit() and cancel(); the
// loop runs one step at a time (schedule -> forward -> sample ->
// postprocess) and hands each request its new tokens through its callback.
//
// Callbacks run on the engine thread and must not block: push into a queue
// and return (server/ does exactly that). The engine never waits on a client.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "gguf/types.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::engine {

struct EngineConfig {
  std::string model_path;
  int threads = 0;                     // 0: default_thread_count()
  size_t kv_bytes = size_t{2} << 30;   // KV pool budget (--kv-mem) when kv_blocks == 0
  int kv_blocks = 0;                   // exact pool size (--kv-blocks), overrides kv_bytes
  int block_size = 16;
  gguf::TensorType kv_type = gguf::TensorType::F16;
  // Per-step token budget (--max-batch-tokens). Prefill throughput on
  // tinyllama-1.1b Q8_0 (2 threads, `bench -p C -n 1`) is flat from 128
  // tokens per step up (128: 334, 256: 342, 512: 323 tokens/s; 64: 306),
  // while a step's length, which every running decode waits for, grows
  // with the budget: 128 is the smallest within 5% of the best.
  int max_batch_tokens = 128;
  int max_seqs = 64;                   // sequences running at once (--max-seqs)
  int max_context = 0;                 // 0: the model's training context
};

struct RequestParams {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_new_tokens = 256;            // 0: until EOS or the context ends
  std::vector<int32_t> stop_token_ids;  // besides the model's end-of-generation tokens
  int top_logprobs = -1;               // -1: no logprobs; 0..20: the sampled token's and this many best
  bool ignore_eos = false;             // benchmarks: generate max_new_tokens whatever the model says
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct GeneratedToken {
  int32_t token;
  float logprob = 0.0f;                // when requested
  std::vector<TokenLogprob> top;       // when requested, best first
};

// Timings of one request, milliseconds.
struct RequestTimings {
  double queue_ms = 0;   // submit -> first scheduled
  double ttft_ms = 0;    // submit -> first token sampled
  double tpot_ms = 0;    // mean time per output token after the first
  double e2e_ms = 0;     // submit -> finished
};

struct RequestOutput {
  uint64_t id = 0;
  std::vector<GeneratedToken> tokens;  // new this step (usually one)
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string error;                   // with FinishReason::Error
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0;        // prompt tokens found in the prefix cache
  int generated_tokens = 0;            // so far
  RequestTimings timings;              // complete when finished
};

using OutputCallback = std::function<void(const RequestOutput&)>;

struct EngineMetrics {
  SchedulerMetrics scheduler;
  uint64_t requests_submitted = 0;
  uint64_t prompt_tokens = 0;          // computed or cached, of admitted requests
  uint64_t generated_tokens = 0;
  uint64_t steps = 0;
  double last_step_ms = 0;
};

class Engine {
 public:
  // Loads the model and allocates the KV pool once. Throws Error.
  explicit Engine(EngineConfig config);
  ~Engine();  // stops the loop; unfinished requests end Cancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. The callback receives every step's new tokens and, last,
  // one output with finished = true (also for a request rejected at
  // admission, e.g. a prompt beyond the context or the whole KV pool).
  uint64_t submit(RequestParams params, OutputCallback callback);
  // Thread-safe. The request finishes Cancelled and its KV blocks are freed
  // within one step. Unknown or finished ids are ignored.
  void cancel(uint64_t id);

  EngineMetrics metrics() const;
  const model::Model& model() const { return *model_; }
  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }
  const EngineConfig& config() const { return config_; }
  int max_context() const { return max_context_; }

 private:
  struct Live;  // per-request state the loop keeps
  void loop();
  void step();
  void take_inbox();
  void deliver_finished();

  EngineConfig config_;
  ThreadPool pool_;  // before model_: loading repacks the weights on it
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  int max_context_ = 0;
  model::KvCache kv_;
  model::ModelRunner runner_;
  Scheduler scheduler_;

  // Inbox: filled by submit()/cancel() on any thread, drained by the loop.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<Sequence, std::unique_ptr<Live>>> incoming_;
  std::vector<uint64_t> cancels_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  EngineMetrics metrics_;  // guarded by mu_; the loop publishes after each step

  std::unordered_map<uint64_t, std::unique_ptr<Live>> live_;  // loop thread only
  // Per-step scratch of the loop, kept to avoid allocating every step.
  std::vector<model::SeqBatch> batch_;
  std::vector<int32_t> sampled_;
  std::vector<std::pair<uint64_t, GeneratedToken>> outputs_;
  std::vector<float> raw_logits_;
  std::thread thread_;
};

}  // namespace llmserve::engine
