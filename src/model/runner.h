#pragma once
// The model runner: one forward pass over a ragged batch. Each sequence in
// the step contributes a run of tokens (a prefill chunk, one decode token,
// or a token and its drafts) at consecutive positions. Batch planning
// (model/batch_plan.h) turns the batch into rows; the layer graph
// (model/llama_graph.h) computes them.
#include <cstdint>
#include <span>
#include <vector>

#include "model/batch_plan.h"
#include "model/kv_cache.h"
#include "model/llama_graph.h"
#include "model/model.h"

namespace llmserve {
class ThreadPool;
}

namespace llmserve::model {

class ModelRunner {
 public:
  // max_tokens: most rows one step may carry.
  ModelRunner(const Model& model, KvCache& kv, ThreadPool& pool, int max_tokens);

  // Returns the wanted logits, [rows][n_vocab], in batch order (All gives
  // every row of its sequence, Last only the last); hidden() then holds the
  // same rows' final hidden states, [rows][dim]. Valid until the next call;
  // the caller may modify the logits (sampling). Throws Error for a batch
  // that breaks the limits of BatchPlan::build.
  std::span<float> forward(std::span<const SeqBatch> batch);
  std::span<const float> hidden() const { return graph_.hidden(); }
  // Per Logits::SumHidden sequence, in batch order: the sum of its rows'
  // final hidden states, [seqs][dim]. Valid until the next call.
  std::span<const float> summed_hidden() const { return graph_.summed(); }

  int max_tokens() const { return max_tokens_; }
  const Model& model() const { return m_; }
  bool has_prompt_path() const { return graph_.has_prompt_path(); }

 private:
  const Model& m_;
  const KvCache& kv_;
  int max_tokens_;
  BatchPlan plan_;
  LlamaGraph graph_;
};

// One sequence with a KV cache of its own, for `generate` and tests: the
// prompt is run in chunks of the runner's max_tokens, then one token a step.
class SequenceRunner {
 public:
  SequenceRunner(const Model& model, ThreadPool& pool, int n_ctx, gguf::TensorType kv_type = gguf::TensorType::F16,
                 int max_tokens = 256);

  // Runs prompt tokens at positions position() ..; returns the last token's
  // logits (or, with Logits::All, every token's).
  std::span<float> eval(std::span<const int32_t> tokens, Logits logits = Logits::Last);
  // Runs one generated token (SeqBatch::prompt_tokens); returns its logits.
  std::span<float> decode(int32_t token);
  int position() const { return pos_; }
  int n_ctx() const { return n_ctx_; }
  void reset() { pos_ = 0; }

 private:
  void check_room(int n) const;  // throws Error when n more positions do not fit the context

  int n_ctx_;
  KvCache kv_;
  ModelRunner runner_;
  std::vector<int32_t> block_table_;
  std::vector<float> all_logits_;
  int pos_ = 0;
};

}  // namespace llmserve::model
