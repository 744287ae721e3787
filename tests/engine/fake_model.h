#pragma once
// A stand-in model that runs a StepPlan against a simulated paged KV cache
// and reads it back through the block tables, as attention does. The value
// cached at position p depends on every token at positions <= p and the next
// token on the last value, so a wrong block table, a missed copy-on-write or
// a bad prefix hit changes the output; reference() is the same function run
// without any cache: "this sequence alone".
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/scheduler.h"

namespace llmserve::engine::testing {

class FakeModel {
 public:
  FakeModel(int num_blocks, int block_size, int vocab)
      : block_size_(block_size), vocab_(vocab), kv_(static_cast<size_t>(num_blocks) * block_size, kPoison) {}

  static uint64_t mix(uint64_t prev, int32_t token) {
    uint64_t x = prev ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) + 0x9E3779B97F4A7C15ULL);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }
  int32_t token_from(uint64_t state) const { return static_cast<int32_t>(state % static_cast<uint64_t>(vocab_)); }

  // The next token after `tokens`, computed without a cache.
  int32_t reference(std::span<const int32_t> tokens) const {
    uint64_t state = kStart;
    for (int32_t t : tokens) state = mix(state, t);
    return token_from(state);
  }

  // One result per entry with needs_logits, in plan order: a draft is
  // verified greedily, as the engine will (the longest prefix of drafts the
  // model agrees with, then the model's own next token).
  std::vector<EntryResult> run(const StepPlan& plan) {
    for (const BlockCopy& c : plan.copies)
      for (int i = 0; i < block_size_; ++i) slot(c.dst, i) = slot(c.src, i);
    std::vector<EntryResult> results;
    for (const ScheduledSeq& e : plan.seqs) {
      const Sequence& s = *e.seq;
      for (int p = e.start; p < e.start + e.num_tokens; ++p) {
        const uint64_t prev = p == 0 ? kStart : at(s, p - 1);
        at(s, p) = mix(prev, s.all_tokens()[static_cast<size_t>(p)]);
      }
      if (!e.needs_logits) continue;
      const int first = e.start + e.num_tokens - 1 - e.num_draft;  // the row before the first draft
      int accepted = 0;
      while (accepted < e.num_draft &&
             token_from(at(s, first + accepted)) == s.all_tokens()[static_cast<size_t>(first + accepted + 1)])
        ++accepted;
      results.push_back({token_from(at(s, first + accepted)), accepted});
    }
    return results;
  }

  static constexpr uint64_t kStart = 0x243F6A8885A308D3ULL;

 private:
  static constexpr uint64_t kPoison = 0xDEADBEEFDEADBEEFULL;

  uint64_t& slot(int block, int offset) { return kv_.at(static_cast<size_t>(block) * block_size_ + offset); }
  uint64_t& at(const Sequence& s, int pos) {
    return slot(s.block_table.at(static_cast<size_t>(pos / block_size_)), pos % block_size_);
  }

  int block_size_;
  int vocab_;
  std::vector<uint64_t> kv_;
};

}  // namespace llmserve::engine::testing
