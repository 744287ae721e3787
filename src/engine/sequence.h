#pragma once
// One request's tokens and its scheduling state. The scheduler and the block
// manager own the state below; everyone else only reads it.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace llmserve::engine {

using SeqId = uint64_t;

enum class SequenceStatus : uint8_t { Waiting, Running, Finished };

// The words are OpenAI's finish_reason where one exists.
enum class FinishReason : uint8_t { None, Stop, Length, Cancelled, Error };
const char* to_string(FinishReason reason);

class Sequence {
 public:
  // max_new_tokens == 0: no limit of its own, it runs until a stop token or
  // the scheduler's max context. stop_token_ids are per request; the model's
  // EOS tokens come from the scheduler's config.
  Sequence(SeqId id, std::vector<int32_t> prompt, int max_new_tokens, std::vector<int32_t> stop_token_ids = {});

  // A sequence with the same history whose last token, sampled but not yet
  // computed, is `last_token`: the branch of n > 1 sampling.
  Sequence branch(SeqId child_id, int32_t last_token) const;

  SeqId id() const { return id_; }
  int max_new_tokens() const { return max_new_tokens_; }
  std::span<const int32_t> stop_token_ids() const { return stop_token_ids_; }

  std::span<const int32_t> all_tokens() const { return tokens_; }  // prompt + generated
  std::span<const int32_t> prompt() const { return all_tokens().first(num_prompt_); }
  std::span<const int32_t> generated() const { return all_tokens().subspan(num_prompt_); }
  int num_tokens() const { return static_cast<int>(tokens_.size()); }
  int num_prompt_tokens() const { return static_cast<int>(num_prompt_); }
  int num_generated_tokens() const { return num_tokens() - num_prompt_tokens(); }
  void append(int32_t token) { tokens_.push_back(token); }
  // Drops the last n tokens; the prompt stays. Throws Error past it.
  void truncate(int n);

  // Tokens to run through the model before the next one can be sampled:
  // 1 for a decode step, more while the prompt (or a recompute) is pending.
  int num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }

  SequenceStatus status = SequenceStatus::Waiting;
  FinishReason finish_reason = FinishReason::None;
  std::string error;               // set with FinishReason::Error
  int num_computed_tokens = 0;     // tokens whose KV is in the cache
  int num_cached_tokens = 0;       // of those, found in the prefix cache at the latest admission
  int num_draft_tokens = 0;        // the last tokens are a proposer's guesses, to verify in the next step
  std::vector<int> block_table;    // block i holds the KV of positions [i * block_size, (i + 1) * block_size)
  uint64_t arrival = 0;            // order of Scheduler::add calls
  bool cancel_requested = false;
  bool ignore_eos = false;         // benchmarks: the model's EOS tokens do not end it
  // An embedding: every prompt token is computed (no prefix-cache reuse, and
  // its blocks are not offered to others), then it finishes (Stop), sampling nothing.
  bool prefill_only = false;

 private:
  SeqId id_;
  std::vector<int32_t> tokens_;
  size_t num_prompt_;
  int max_new_tokens_;
  std::vector<int32_t> stop_token_ids_;
};

}  // namespace llmserve::engine
