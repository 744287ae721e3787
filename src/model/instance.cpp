#include "model/instance.h"

#include <algorithm>

namespace llmserve::model {

namespace {

int context_of(const InstanceConfig& c, const HParams& hp) {
  return c.max_context > 0 ? std::min(c.max_context, hp.n_ctx_train) : hp.n_ctx_train;
}

// Read once the weights are loaded, so the memory they took is not counted as available.
KvPoolSize pool_size(const InstanceConfig& c, const HParams& hp) {
  const KvPoolRequest request{.max_context = context_of(c, hp),
                              .max_seqs = c.max_seqs,
                              .block_size = c.block_size,
                              .kv_type = c.kv_type,
                              .kv_bytes = c.kv_bytes,
                              .kv_blocks = c.kv_blocks};
  return size_kv_pool(hp, request, available_memory_bytes() / static_cast<size_t>(std::max(c.kv_share, 1)));
}

}  // namespace

std::unique_ptr<LoadedModel> LoadedModel::load(const std::string& path, ThreadPool& pool, const InstanceConfig& config) {
  return std::unique_ptr<LoadedModel>(new LoadedModel(path, Model::load(path, &pool, config.requantize), pool, config));
}

LoadedModel::LoadedModel(std::string path, std::unique_ptr<Model> model, ThreadPool& pool, const InstanceConfig& c)
    : path_(std::move(path)),
      model_(std::move(model)),
      tokenizer_(tok::Tokenizer::from_gguf(model_->file())),
      kv_pool_(pool_size(c, model_->hparams())),
      kv_(model_->hparams(), kv_pool_.blocks, c.block_size, c.kv_type),
      runner_(*model_, kv_, pool, c.max_batch_tokens) {
  const HParams& hp = model_->hparams();
  info_.n_vocab = hp.n_vocab;
  info_.n_embd = hp.dim;
  info_.max_context = context_of(c, hp);
  info_.kv_blocks = kv_.n_blocks();
  info_.block_size = kv_.block_size();
  info_.max_batch_tokens = c.max_batch_tokens;
  info_.end_of_generation = tokenizer_->end_of_generation_tokens();
  info_.generated_kv_matches_prompt = !runner_.has_prompt_path();
  // The weights were copied out of the file at load: its pages need not stay resident.
  model_->file().release_tensor_pages();
}

}  // namespace llmserve::model
