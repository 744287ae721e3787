#include "model/model.h"

namespace llmserve::model {

std::unique_ptr<Model> Model::load(const std::string& path, ThreadPool* pool, std::optional<gguf::TensorType> requantize) {
  gguf::File file = gguf::File::open(path);
  HParams hp = read_hparams(file);
  Weights weights = load_weights(file, hp, pool, requantize);
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(hp), std::move(weights)));
}

// The weights point into the mapping, which moving the File does not relocate.
Model::Model(gguf::File file, HParams hp, Weights weights)
    : file_(std::move(file)), hp_(std::move(hp)), weights_(std::move(weights)), rope_(hp_, weights_.rope_freqs) {}

}  // namespace llmserve::model
