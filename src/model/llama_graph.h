#pragma once
// The Llama layer graph (Llama 2/3, Mistral, Qwen2's biases, ...): one
// forward pass over a planned batch as one pool job (ThreadPool::run_team),
// its ops the job's steps. All rows go through every weight matmul
// together, so each weight matrix is streamed once per pass whatever the
// batch; attention reads each run's KV through its block table.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "model/batch_plan.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace llmserve {
class ThreadPool;
}

namespace llmserve::model {

class LlamaGraph {
 public:
  // Buffers are sized for max_rows rows now, so a pass allocates nothing.
  LlamaGraph(const Model& model, KvCache& kv, ThreadPool& pool, int max_rows);

  // The logits of plan.output_rows, [rows][n_vocab]; hidden() then holds
  // their final (normed) hidden states, [rows][dim]. Valid until the next run.
  std::span<float> run(const BatchPlan& plan);
  std::span<const float> hidden() const { return hidden_; }
  // Per Logits::SumHidden sequence of the last run, in batch order, the sum
  // of its rows' final hidden states, [seqs][dim]. Valid until the next run.
  std::span<const float> summed() const { return summed_; }

  // Some weight matrix has a prompt path (f16/bf16, kernels/matmul.h), so a
  // prompt token's KV may differ in its last bits from a generated one's.
  bool has_prompt_path() const { return !prompt_acts_.empty(); }

 private:
  const Model& m_;
  KvCache& kv_;
  ThreadPool& pool_;
  std::vector<kernels::AttentionSeq> attn_seqs_;
  std::vector<float> x_, xn_, q_, k_, v_, att_, gate_, up_, out_, logits_, summed_;
  std::span<const float> hidden_;
  // A pass's plans, made before its threads start: the layers' matmuls (all
  // quantizing their input into acts_, one at a time) and attention.
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

}  // namespace llmserve::model
