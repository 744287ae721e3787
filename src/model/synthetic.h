#pragma once
// Random-weight llama models with the shapes of real ones (gen-model, the
// built-in default model, benchmarks): real tensor names, shapes, metadata
// and a valid tokenizer, with weights ~ N(0, 0.02) from a seed.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/types.h"

namespace llmserve::model {

// Hyperparameters of one architecture shape.
struct Shape {
  std::string_view name;
  int dim = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int ffn_dim = 0;
  int n_vocab = 0;  // of the built-in vocabulary; vocab_from overrides it
  int n_ctx = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;

  int head_dim() const { return dim / n_head; }
  int kv_dim() const { return n_head_kv * head_dim(); }
};

struct SyntheticSpec {
  Shape shape;
  gguf::TensorType type = gguf::TensorType::Q8_0;  // of the matrices; norms are always F32
  bool q4_k_m = false;  // llama.cpp's Q4_K_M mix instead (synthetic_tensors); `type` is then ignored
  uint64_t seed = 0;
  std::string vocab_from;  // a GGUF whose tokenizer.* keys to copy; empty: built-in vocabulary
};

std::optional<Shape> find_shape(std::string_view name);
std::vector<std::string_view> shape_names();

// One tensor of a synthetic model: llama.cpp name, dims in GGUF order (ne0
// first), type.
struct SyntheticTensor {
  std::string name;
  std::vector<uint64_t> dims;
  gguf::TensorType type;
};
// With q4_k_m the matrices are llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for
// output.weight and for attn_v and ffn_down in the first and last eighth of
// the layers and every third one between (its use_more_bits rule), and
// matrix_type is ignored.
std::vector<SyntheticTensor> synthetic_tensors(const Shape& shape, int n_vocab, gguf::TensorType matrix_type,
                                               bool q4_k_m = false);

// Row `row` of matrix `tensor_name` before quantization: n values ~ N(0, 0.02),
// determined by (seed, tensor_name, row) alone, so rows can be generated in
// parallel and checked independently.
void synthetic_row(uint64_t seed, std::string_view tensor_name, uint64_t row, float* out, size_t n);

// Writes the model described by `spec` to `out_path` (atomically), streaming
// the tensors so memory stays small whatever the shape. Throws Error.
void write_synthetic_model(const SyntheticSpec& spec, const std::string& out_path);

}  // namespace llmserve::model
