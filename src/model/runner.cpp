#include "model/runner.h"

#include <algorithm>

#include "core/error.h"

namespace llmserve::model {

ModelRunner::ModelRunner(const Model& model, KvCache& kv, ThreadPool& pool, int max_tokens)
    : m_(model), kv_(kv), max_tokens_(max_tokens), graph_(model, kv, pool, std::max(max_tokens, 1)) {
  if (max_tokens < 1) throw Error("the runner needs room for at least one token per step");
}

std::span<float> ModelRunner::forward(std::span<const SeqBatch> batch) {
  plan_.build(batch, max_tokens_, kv_.block_size(), kv_.n_blocks(), m_.hparams().n_vocab);
  return graph_.run(plan_);
}

SequenceRunner::SequenceRunner(const Model& model, ThreadPool& pool, int n_ctx, gguf::TensorType kv_type, int max_tokens)
    : n_ctx_(n_ctx),
      kv_(model.hparams(), (n_ctx + 15) / 16, 16, kv_type),
      runner_(model, kv_, pool, max_tokens) {
  block_table_.resize(kv_.n_blocks());
  for (int i = 0; i < kv_.n_blocks(); ++i) block_table_[i] = i;
}

void SequenceRunner::check_room(int n) const {
  if (pos_ + n > n_ctx_)
    throw Error("context full: " + std::to_string(pos_ + n) + " positions needed, the context holds " +
                std::to_string(n_ctx_));
}

std::span<float> SequenceRunner::eval(std::span<const int32_t> tokens, Logits logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) throw Error("eval needs at least one token");
  check_room(n);
  if (logits == Logits::All) all_logits_.clear();
  std::span<float> out;
  for (int done = 0; done < n;) {
    const int chunk = std::min(runner_.max_tokens(), n - done);
    const bool last = done + chunk == n;
    const SeqBatch s{tokens.subspan(done, chunk), pos_, block_table_,
                     logits == Logits::All ? Logits::All : (last ? logits : Logits::None), chunk};
    out = runner_.forward({&s, 1});
    if (logits == Logits::All) all_logits_.insert(all_logits_.end(), out.begin(), out.end());
    pos_ += chunk;
    done += chunk;
  }
  return logits == Logits::All ? std::span<float>(all_logits_) : out;
}

std::span<float> SequenceRunner::decode(int32_t token) {
  check_room(1);
  const SeqBatch s{{&token, 1}, pos_, block_table_, Logits::Last, 0};
  const auto out = runner_.forward({&s, 1});
  ++pos_;
  return out;
}

}  // namespace llmserve::model
