#pragma once
// A model as the engine drives it: a forward pass over a ragged batch that
// reads and writes a paged KV pool, and the facts the scheduler needs.
// Instances are built outside the engine and handed to it; several can
// share one ThreadPool (one engine loop runs one step at a time). Tests
// drive the engine with a fake instance that needs no file.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/types.h"
#include "model/kv_cache.h"
#include "model/kv_sizing.h"
#include "model/model.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {
class ThreadPool;
}

namespace llmserve::model {

struct InstanceInfo {
  int n_vocab = 0;
  int n_embd = 0;             // the final hidden state's width: an embedding's
  int max_context = 0;        // tokens per sequence, prompt + generated
  int kv_blocks = 0;          // the KV pool
  int block_size = 16;        // tokens per block
  int max_batch_tokens = 0;   // most rows one forward pass takes
  std::vector<int32_t> end_of_generation;
  // A generated token's matmuls give the bits a prompt holding that token
  // would (every weight type but f16/bf16 with a prompt path), and its
  // attention agrees to its rounding: the prefix cache may then offer
  // generated blocks to later prompts (docs/architecture.md).
  bool generated_kv_matches_prompt = false;
};

class Instance {
 public:
  virtual ~Instance() = default;
  virtual const InstanceInfo& info() const = 0;  // fixed for the instance's lifetime
  // ModelRunner::forward's contract: the wanted rows' logits, valid until the next call.
  virtual std::span<float> forward(std::span<const SeqBatch> batch) = 0;
  // After forward(): ModelRunner::summed_hidden's, [Logits::SumHidden sequences][n_embd].
  virtual std::span<const float> summed_hidden() const = 0;
  virtual void copy_block(int src, int dst) = 0;  // copy-on-write
};

// The KV pool is sized by size_kv_pool (model/kv_sizing.h) from these.
struct InstanceConfig {
  size_t kv_bytes = 0;  // KV pool budget (--kv-mem); 0: sized from the model, the context and max_seqs
  int kv_blocks = 0;    // exact pool size (--kv-blocks), overrides kv_bytes
  // Sequences the sized pool holds at full context: the engine's --max-seqs
  // (the server passes it; 64 is engine::EngineConfig's default).
  int max_seqs = 64;
  // Default-sized pools that share the machine's memory (the server's
  // models and their drafts): each takes 1/kv_share of the default cap.
  int kv_share = 1;
  int block_size = 16;
  gguf::TensorType kv_type = gguf::TensorType::F16;
  // Rows per forward pass (--max-batch-tokens): prefill throughput is flat
  // from 128 up while every running decode waits for the whole step
  // (docs/performance.md).
  int max_batch_tokens = 128;
  int max_context = 0;                // 0: the model's training context
  // The matrices converted to this type at load (Model::load): a
  // self-draft for speculative decoding from the target's own file.
  std::optional<gguf::TensorType> requantize;
};

// A GGUF model with its tokenizer, KV pool and runner.
class LoadedModel final : public Instance {
 public:
  // Throws Error (a bad file, a pool too small for one block, ...).
  static std::unique_ptr<LoadedModel> load(const std::string& path, ThreadPool& pool, const InstanceConfig& config);

  const InstanceInfo& info() const override { return info_; }
  std::span<float> forward(std::span<const SeqBatch> batch) override { return runner_.forward(batch); }
  std::span<const float> summed_hidden() const override { return runner_.summed_hidden(); }
  void copy_block(int src, int dst) override { kv_.copy_block(src, dst); }

  const std::string& path() const { return path_; }
  const Model& model() const { return *model_; }
  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }
  KvCache& kv() { return kv_; }
  const KvPoolSize& kv_pool() const { return kv_pool_; }  // the pool's figures and why it has this size
  ModelRunner& runner() { return runner_; }

 private:
  LoadedModel(std::string path, std::unique_ptr<Model> model, ThreadPool& pool, const InstanceConfig& config);

  std::string path_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  KvPoolSize kv_pool_;
  KvCache kv_;
  ModelRunner runner_;
  InstanceInfo info_;
};

}  // namespace llmserve::model
