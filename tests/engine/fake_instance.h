#pragma once
// FakeModel behind the model::Instance interface, so the engine runs
// without a file: each position's state chains the previous position's
// state (read back through the block table) with its token, and the logits
// put 1 on the token the state picks, 0 elsewhere. A row's hidden state
// (Logits::SumHidden) is {1, its token}.
#include <span>
#include <vector>

#include "fake_model.h"
#include "model/instance.h"

namespace llmserve::engine::testing {

class FakeInstance final : public model::Instance {
 public:
  FakeInstance(int num_blocks, int block_size, int vocab, int max_context, int max_batch_tokens)
      : model_(num_blocks, block_size, vocab), kv_(static_cast<size_t>(num_blocks) * block_size) {
    info_.n_vocab = vocab;
    info_.n_embd = 2;
    info_.max_context = max_context;
    info_.kv_blocks = num_blocks;
    info_.block_size = block_size;
    info_.max_batch_tokens = max_batch_tokens;
    info_.end_of_generation = {0};
    info_.generated_kv_matches_prompt = true;
  }

  const model::InstanceInfo& info() const override { return info_; }

  std::span<float> forward(std::span<const model::SeqBatch> batch) override {
    logits_.clear();
    summed_.clear();
    const int bs = info_.block_size;
    auto slot = [&](const model::SeqBatch& s, int pos) -> uint64_t& {
      return kv_.at(static_cast<size_t>(s.block_table[static_cast<size_t>(pos / bs)]) * bs + pos % bs);
    };
    for (const model::SeqBatch& s : batch) {
      const int n = static_cast<int>(s.tokens.size());
      for (int i = 0; i < n; ++i) {
        const int pos = s.pos0 + i;
        slot(s, pos) = FakeModel::mix(pos == 0 ? FakeModel::kStart : slot(s, pos - 1), s.tokens[static_cast<size_t>(i)]);
        if (s.logits == model::Logits::SumHidden) {
          if (i == 0) summed_.insert(summed_.end(), {0.0f, 0.0f});
          summed_.end()[-2] += 1.0f;
          summed_.end()[-1] += static_cast<float>(s.tokens[static_cast<size_t>(i)]);
        } else if (s.logits == model::Logits::All || (s.logits == model::Logits::Last && i + 1 == n)) {
          logits_.resize(logits_.size() + static_cast<size_t>(info_.n_vocab), 0.0f);
          logits_[logits_.size() - static_cast<size_t>(info_.n_vocab) + model_.token_from(slot(s, pos))] = 1.0f;
        }
      }
    }
    return logits_;
  }

  std::span<const float> summed_hidden() const override { return summed_; }

  void copy_block(int src, int dst) override {
    const int bs = info_.block_size;
    std::copy_n(kv_.begin() + static_cast<long>(src) * bs, bs, kv_.begin() + static_cast<long>(dst) * bs);
  }

  const FakeModel& model() const { return model_; }

 private:
  model::InstanceInfo info_;
  FakeModel model_;
  std::vector<uint64_t> kv_;
  std::vector<float> logits_, summed_;
};

}  // namespace llmserve::engine::testing
