#pragma once
// The oracle forward pass: one token at a time, plain scalar loops, weights
// decoded row by row with the reference dequantizers, f32 accumulation,
// naive softmax attention over an f32 KV history. Slow and obviously
// correct; every fast path is tested against it.
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace llmserve::model {

class ReferenceModel {
 public:
  explicit ReferenceModel(const Model& model);

  // Runs `token` at the next position (0, 1, 2, ...) and returns its logits.
  std::vector<float> step(int32_t token);
  // The last step's final hidden state (after the final norm), [dim].
  const std::vector<float>& hidden() const { return hidden_; }
  int position() const { return pos_; }

 private:
  const Model& m_;
  int pos_ = 0;
  std::vector<std::vector<float>> k_, v_;  // per layer: [pos][kv_dim]
  std::vector<float> hidden_;
};

}  // namespace llmserve::model
