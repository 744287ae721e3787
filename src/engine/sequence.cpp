#include "engine/sequence.h"

#include "core/error.h"

namespace llmserve::engine {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::None: return "none";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "unknown";
}

Sequence::Sequence(SeqId id, std::vector<int32_t> prompt, int max_new_tokens, std::vector<int32_t> stop_token_ids)
    : id_(id),
      tokens_(std::move(prompt)),
      num_prompt_(tokens_.size()),
      max_new_tokens_(max_new_tokens),
      stop_token_ids_(std::move(stop_token_ids)) {}

void Sequence::truncate(int n) {
  if (n < 0 || n > num_generated_tokens())
    throw Error("sequence " + std::to_string(id_) + " cannot drop " + std::to_string(n) + " of its " +
                std::to_string(num_generated_tokens()) + " generated tokens");
  tokens_.resize(tokens_.size() - static_cast<size_t>(n));
}

Sequence Sequence::branch(SeqId child_id, int32_t last_token) const {
  if (num_generated_tokens() == 0 || num_uncomputed_tokens() != 1)
    throw Error("sequence " + std::to_string(id_) + " can only branch right after sampling a token");
  Sequence child(child_id, {}, max_new_tokens_, stop_token_ids_);
  child.tokens_ = tokens_;
  child.ignore_eos = ignore_eos;
  child.tokens_.back() = last_token;
  child.num_prompt_ = num_prompt_;
  child.status = status;
  child.num_computed_tokens = num_computed_tokens;
  child.num_cached_tokens = num_cached_tokens;
  return child;
}

}  // namespace llmserve::engine
