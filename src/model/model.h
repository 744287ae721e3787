#pragma once
// A loaded model: the mapped file, its hyperparameters and weights.
#include <memory>
#include <optional>
#include <string>

#include "gguf/file.h"
#include "model/hparams.h"
#include "model/rope.h"
#include "model/weights.h"

namespace llmserve::model {

class Model {
 public:
  // Maps the file and checks everything the forward pass needs, then
  // repacks the weights for the kernels (on `pool`'s threads if given).
  // Throws Error.
  // `requantize`: the layer and output matrices are converted to that type
  // (Q8_0 or Q4_0) at load, e.g. for a self-draft of speculative decoding.
  static std::unique_ptr<Model> load(const std::string& path, ThreadPool* pool = nullptr,
                                     std::optional<gguf::TensorType> requantize = std::nullopt);

  const gguf::File& file() const { return file_; }
  const HParams& hparams() const { return hp_; }
  const Weights& weights() const { return weights_; }
  const Rope& rope() const { return rope_; }

 private:
  Model(gguf::File file, HParams hp, Weights weights);
  gguf::File file_;
  HParams hp_;
  Weights weights_;
  Rope rope_;
};

}  // namespace llmserve::model
