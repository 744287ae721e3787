#pragma once
// The tensors of a llama-family model, located in the mapped GGUF file and
// checked against the hyperparameters. The layer and output matrices are
// repacked for the kernels (kernels::prepare; types without a panel format
// of their own are read from the mapping as they are used), the token
// embedding copied in its file format (load_weights says why), and small
// vectors (norms, biases) decoded to f32 once.
#include <array>
#include <optional>
#include <vector>

#include "kernels/matmul.h"
#include "model/hparams.h"

namespace llmserve {
class ThreadPool;
}
namespace llmserve::gguf {
class File;
}

namespace llmserve::model {

struct LayerWeights {
  std::vector<float> attn_norm;
  kernels::Matrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;  // qwen2 only; empty otherwise
  std::vector<float> ffn_norm;
  kernels::Matrix w_gate, w_up, w_down;

  // The layer's weight matrices, in the order decode reads them.
  std::array<kernels::Matrix*, 7> matrices() { return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down}; }
  std::array<const kernels::Matrix*, 7> matrices() const { return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down}; }
};

struct Weights {
  kernels::Matrix token_embd;  // [n_vocab rows][dim], its data in embd_rows
  std::vector<float> output_norm;
  kernels::Matrix output;      // [n_vocab rows][dim]; token_embd when tied
  std::vector<float> rope_freqs;  // optional per-pair frequency divisors
  std::vector<LayerWeights> layers;
  // The kernels' load-time repacked copies of the matrices above, in one
  // allocation (each Matrix::packed points into it).
  kernels::PackedWeights packed;
  kernels::PackedWeights embd_rows;  // token_embd's rows, as the file has them
  kernels::PackedWeights requantized;  // the matrices' data after load_weights' requantize
};

// Throws Error naming the file and listing every missing or mis-shaped tensor.
// Matrices are repacked for the kernels (kernels::prepare) on `pool`, after
// conversion to `requantize` (Q8_0 or Q4_0) when given: a matrix whose row
// length is not a multiple of 32 keeps its type.
Weights load_weights(const gguf::File& file, const HParams& hp, ThreadPool* pool = nullptr,
                     std::optional<gguf::TensorType> requantize = std::nullopt);

// What one decoded token streams through the matmuls: the bytes of every
// layer matrix and the output projection (the embedding contributes one row),
// and their parameter count (a token costs 2 FLOPs per parameter).
struct MatmulFootprint {
  uint64_t bytes = 0;
  uint64_t params = 0;
};
MatmulFootprint matmul_footprint(const Weights& w);

// Row `row` of a matrix in any type, decoded to f32 (embedding lookup).
void read_row(const kernels::Matrix& m, int64_t row, float* out);

}  // namespace llmserve::model
