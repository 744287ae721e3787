#pragma once
// Draft-model proposing: a smaller model with the target's vocabulary (or
// the target's own weights quantized further) decodes k tokens ahead,
// sampling each with the request's parameters, and hands over the
// distributions it drew from. Its KV lives in the draft instance's own pool:
// each sequence's blocks are kept between steps and its computed tokens are
// compared with the sequence's, so tokens the target rejected (or a
// preemption) are simply recomputed. A sequence that finds no free block
// gets no draft.
#include <unordered_map>

#include "engine/proposer.h"
#include "model/instance.h"

namespace llmserve::engine {

class DraftModelProposer final : public Proposer {
 public:
  explicit DraftModelProposer(model::Instance& draft);
  void propose(std::span<const DraftRequest> requests) override;
  void release(SeqId id) override;
  double catch_up_ms() const override { return catch_up_ms_; }
  int free_blocks() const { return static_cast<int>(free_.size()); }

 private:
  struct Kept {
    std::vector<int32_t> tokens;  // whose KV the draft pool holds, positions 0 ..
    std::vector<int32_t> blocks;
  };
  bool reserve(Kept& kept, int positions);
  void catch_up(std::span<Kept* const> seqs, std::span<const DraftRequest* const> requests);
  void draft_one(int pass, std::span<const size_t> seqs);

  model::Instance& draft_;
  std::unordered_map<SeqId, Kept> kept_;
  std::vector<int32_t> free_;
  // Per-call scratch.
  std::vector<Kept*> active_;
  std::vector<const DraftRequest*> active_requests_;
  std::vector<model::SeqBatch> batch_;
  std::vector<size_t> in_pass_;
  std::vector<int32_t> next_, history_;
  std::vector<float> q_;
  double catch_up_ms_ = 0;
};

// Throws Error naming both files unless the two models' tokenizers have the
// same tokens: a draft must speak the target's vocabulary.
void check_same_vocabulary(const model::LoadedModel& target, const model::LoadedModel& draft);

}  // namespace llmserve::engine
