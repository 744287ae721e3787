#pragma once
// The serving engine: drives one or more model instances (model/instance.h),
// each with its own scheduler over its own KV pool, from one loop thread.
// Any thread may submit() and cancel(); the loop runs one step at a time
// per model with work (schedule -> forward -> sample -> postprocess) and
// hands each request its new tokens through its callback.
//
// Callbacks run on the engine thread and must not block: push into a queue
// and return (server/ does exactly that). The engine never waits on a client.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/proposer.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/speculative.h"
#include "model/instance.h"

namespace llmserve::engine {

// Speculative decoding for one model: its proposer drafts up to max_k
// tokens per decode, verified in the next step.
struct SpecConfig {
  Proposer* proposer = nullptr;  // none: plain decoding; must outlive the engine
  int max_k = 4;
  // Choose each sequence's k per step (choose_draft_lengths) from its
  // acceptance and `cost`; off: always max_k.
  bool adaptive = true;
  StepCost cost;  // step time by rows; empty: measure_step_cost() at start
};

struct EngineConfig {
  int max_seqs = 64;  // sequences running at once, per model (--max-seqs)
  std::vector<SpecConfig> spec = {};  // by model index; missing or no proposer: off
};

// Times forward passes of 1 .. max_rows rows of one sequence after `depth`
// tokens of context (every width up to 9, then 17, 33, ...; best of
// `repeats`), in KV blocks no sequence holds yet: call it before the
// instance serves.
StepCost measure_step_cost(model::Instance& instance, int max_rows, int repeats = 3, int depth = 0);

struct RequestParams {
  int model = 0;                       // which of the engine's models
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_new_tokens = 256;            // 0: until EOS or the context ends
  std::vector<int32_t> stop_token_ids;  // besides the model's end-of-generation tokens
  int top_logprobs = -1;               // -1: no logprobs; 0..20: the sampled token's and this many best
  bool ignore_eos = false;             // benchmarks: generate max_new_tokens whatever the model says
  // Choices sampled from one prompt, computed once: choice i has id
  // submit() + i and seed sampling.seed + i, and shares the prompt's KV.
  int n = 1;
  bool speculative = true;  // false: no drafts for this request even when the model has a proposer
  // An embedding of the prompt instead of tokens: every prompt token is
  // computed (no prefix-cache reuse), nothing is sampled, its KV blocks are
  // freed at once, and the finished output carries the vector. n must be 1;
  // the sampling fields are ignored.
  bool embed = false;
  // A score of the prompt's tail instead of tokens (> 0): prefill only, as
  // embed, and the finished output carries the sum of log P(prompt[i] |
  // prompt[..i]) over i in [score_from, prompt size): how likely the model
  // finds a continuation after its context. 0 < score_from < prompt size; n = 1.
  int score_from = 0;
};

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct GeneratedToken {
  int32_t token;
  float logprob = 0.0f;                // when requested
  std::vector<TokenLogprob> top;       // when requested, best first
  float entropy = 0.0f;                // when requested: of the whole next-token distribution, nats
};

// Timings of one request, milliseconds.
struct RequestTimings {
  double queue_ms = 0;   // submit -> first scheduled
  double ttft_ms = 0;    // submit -> first token sampled
  double tpot_ms = 0;    // mean time per output token after the first
  double e2e_ms = 0;     // submit -> finished
};

struct RequestOutput {
  uint64_t id = 0;                     // the choice's
  int index = 0;                       // the choice, 0 .. n - 1
  std::vector<GeneratedToken> tokens;  // new this step (usually one)
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string error;                   // with FinishReason::Error
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0;        // prompt tokens found in the prefix cache
  int generated_tokens = 0;            // so far
  RequestTimings timings;              // complete when finished
  // An embed request's finished output (FinishReason::Stop): the mean of the
  // prompt's final hidden states (after the final norm), L2-normalized, [n_embd].
  std::vector<float> embedding;
  // A score request's finished output (FinishReason::Stop): the summed
  // log-probability of its scored tokens, and how many there were.
  double score_logprob = 0;
  int scored_tokens = 0;
};

using OutputCallback = std::function<void(const RequestOutput&)>;

// vLLM's spec_decode counters.
struct SpecMetrics {
  uint64_t drafts = 0;           // verify entries
  uint64_t draft_tokens = 0;     // tokens proposed and verified
  uint64_t accepted_tokens = 0;
  std::vector<uint64_t> accepted_per_pos;  // [i]: drafts whose i-th token was accepted
  double proposer_ms = 0;        // time spent proposing
};

struct EngineMetrics {
  SchedulerMetrics scheduler;
  SpecMetrics spec;
  uint64_t requests_submitted = 0;
  uint64_t prompt_tokens = 0;          // computed or cached, of admitted requests (once for n choices)
  uint64_t generated_tokens = 0;
  uint64_t steps = 0;
  double last_step_ms = 0;
};

class Engine {
 public:
  // The models must outlive the engine; the loop thread is their only user
  // from here on. Throws Error for a bad config or no model.
  explicit Engine(std::vector<model::Instance*> models, EngineConfig config = {});
  ~Engine();  // stops the loop; unfinished requests end Cancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Thread-safe. Returns the id of choice 0. The callback receives every
  // step's new tokens of every choice and, last for each, one output with
  // finished = true (also for a request rejected at admission, e.g. a prompt
  // beyond the context or the whole KV pool). Throws Error for bad params.
  uint64_t submit(RequestParams params, OutputCallback callback);
  // Thread-safe. The choice finishes Cancelled and its KV blocks are freed
  // within one step; cancelling choice 0 before its first token ends every
  // choice (they fork from its first logits). Unknown or finished ids are ignored.
  void cancel(uint64_t id);

  EngineMetrics metrics(int model = 0) const;
  const model::InstanceInfo& info(int model = 0) const;
  int num_models() const { return static_cast<int>(models_.size()); }
  const EngineConfig& config() const { return config_; }

 private:
  struct Live;       // per-choice state the loop keeps
  struct ModelSlot;  // a model and its scheduler
  struct Submission {
    int model;
    Sequence seq;                              // choice 0
    std::vector<std::unique_ptr<Live>> lives;  // one per choice
  };
  struct Branch {  // n > 1: a choice forked from choice 0's first logits
    uint64_t parent, child;
    int32_t token;
  };
  void loop();
  void step(ModelSlot& slot);
  void propose(ModelSlot& slot);
  void add_hidden_sums(ModelSlot& slot, const StepPlan& plan);
  void add_scores(Live& live, const ScheduledSeq& s, std::span<const float> logits, size_t vocab);
  EntryResult verify_draft(ModelSlot& slot, Live& live, const Sequence& seq, int num_draft, std::span<float> logits);
  void take_inbox();
  void branch(ModelSlot& slot, const Branch& b);
  void deliver_finished(ModelSlot& slot);
  void deliver(uint64_t id, FinishReason reason, const std::string& error);  // a finished output; forgets id

  EngineConfig config_;
  std::vector<std::unique_ptr<ModelSlot>> models_;

  // Inbox: filled by submit()/cancel() on any thread, drained by the loop.
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Submission> incoming_;
  std::vector<uint64_t> cancels_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;

  std::unordered_map<uint64_t, std::unique_ptr<Live>> live_;  // loop thread only
  // Per-step scratch of the loop, kept to avoid allocating every step.
  std::vector<model::SeqBatch> batch_;
  std::vector<EntryResult> sampled_;
  std::vector<std::pair<uint64_t, GeneratedToken>> outputs_;
  std::vector<Branch> branches_;
  std::vector<float> raw_logits_, branch_logits_, probs_;
  std::vector<int32_t> history_;
  std::vector<const Sequence*> draftable_;
  std::vector<DraftRequest> draft_requests_;
  std::vector<double> alpha_;
  std::vector<int> draft_k_, best_case_k_;
  std::thread thread_;
};

}  // namespace llmserve::engine
