#pragma once
// The model runner: one forward pass over a ragged batch. Each sequence in
// the step contributes a run of tokens (a prefill chunk, or one decode
// token) at consecutive positions; all rows go through every weight matmul
// together, so each weight matrix is streamed once per step whatever the
// batch. Attention reads each sequence's KV through its block table. A
// pass is one pool job (ThreadPool::run_team), its ops the job's steps.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace llmserve {
class ThreadPool;
}

namespace llmserve::model {

enum class Logits { None, Last, All };

struct SeqBatch {
  std::span<const int32_t> tokens;       // run at positions pos0, pos0 + 1, ...
  int pos0 = 0;
  std::span<const int32_t> block_table;  // must cover positions 0 .. pos0 + tokens.size() - 1
  Logits logits = Logits::Last;
  // How many of `tokens`, from the front, are the request's prompt rather
  // than tokens it generated. Over f16 and bf16 weights prompt tokens may
  // take the matmuls' prompt path (AMX-BF16 tiles or int16 codes,
  // kernels/matmul.h: PromptPath), generated ones always the f32 path: the
  // path is a property of the token, so a sequence gives the same bits in
  // any batch and in any chunking of its prompt.
  // (Quantized weights give the same bits on every path.)
  int prompt_tokens = 0;
};

class ModelRunner {
 public:
  // max_tokens: most rows one step may carry (buffers are sized for it now,
  // so a step allocates nothing).
  ModelRunner(const Model& model, KvCache& kv, ThreadPool& pool, int max_tokens);

  // Returns the wanted logits, [rows][n_vocab], in batch order (All gives
  // every row of its sequence, Last only the last). Valid until the next
  // call; the caller may modify them (sampling). Throws Error for a batch
  // that breaks the limits above.
  std::span<float> forward(std::span<const SeqBatch> batch);

  int max_tokens() const { return max_tokens_; }
  const Model& model() const { return m_; }

 private:
  void check(std::span<const SeqBatch> batch) const;

  const Model& m_;
  KvCache& kv_;
  ThreadPool& pool_;
  int max_tokens_;
  // Per-row and scratch buffers, sized for max_tokens rows.
  std::vector<int32_t> tokens_, positions_, slots_, logit_rows_, seq_rows_;
  std::vector<kernels::AttentionSeq> attn_seqs_;
  std::vector<float> x_, xn_, q_, k_, v_, att_, gate_, up_, out_, logits_;
  // A step's plans, made before its threads start: the layers' matmuls
  // (all quantizing their input into acts_, one at a time) and attention.
  struct LayerJobs {
    kernels::MatmulJob qkv, o, gate_up, down;
  };
  std::vector<LayerJobs> jobs_;
  std::vector<kernels::Q8Act> acts_;
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  // The prompt rows' (MatmulJob's n_prompt); empty where no weight has a prompt path.
  std::vector<Line> prompt_acts_;
  kernels::AttentionJob attention_;
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
