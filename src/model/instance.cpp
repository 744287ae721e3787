#include "model/instance.h"

#include <algorithm>

#include "core/error.h"

namespace llmserve::model {

namespace {

int pool_blocks(const InstanceConfig& c, const HParams& hp) {
  const int n = c.kv_blocks > 0 ? c.kv_blocks : KvCache::blocks_for_bytes(hp, c.kv_bytes, c.block_size, c.kv_type);
  if (n < 1)
    throw Error("the KV memory budget holds no block of " + std::to_string(c.block_size) + " tokens; one block needs " +
                std::to_string(KvCache::bytes_per_block(hp, c.block_size, c.kv_type)) + " bytes");
  return n;
}

}  // namespace

std::unique_ptr<LoadedModel> LoadedModel::load(const std::string& path, ThreadPool& pool, const InstanceConfig& config) {
  return std::unique_ptr<LoadedModel>(new LoadedModel(path, Model::load(path, &pool), pool, config));
}

LoadedModel::LoadedModel(std::string path, std::unique_ptr<Model> model, ThreadPool& pool, const InstanceConfig& c)
    : path_(std::move(path)),
      model_(std::move(model)),
      tokenizer_(tok::Tokenizer::from_gguf(model_->file())),
      kv_(model_->hparams(), pool_blocks(c, model_->hparams()), c.block_size, c.kv_type, &pool),
      runner_(*model_, kv_, pool, c.max_batch_tokens) {
  const HParams& hp = model_->hparams();
  info_.n_vocab = hp.n_vocab;
  info_.max_context = c.max_context > 0 ? std::min(c.max_context, hp.n_ctx_train) : hp.n_ctx_train;
  info_.kv_blocks = kv_.n_blocks();
  info_.block_size = kv_.block_size();
  info_.max_batch_tokens = c.max_batch_tokens;
  info_.end_of_generation = tokenizer_->end_of_generation_tokens();
  info_.generated_kv_matches_prompt = !runner_.has_prompt_path();
}

}  // namespace llmserve::model
