#pragma once
// Hyperparameters of a llama-family model, read from GGUF metadata.
#include <string>

namespace llmserve::gguf {
class File;
}

namespace llmserve::model {

enum class RopeStyle {
  Normal,  // rotate adjacent pairs (x[2i], x[2i+1]): llama.cpp's llama arch
  NeoX,    // rotate halves (x[i], x[i + d/2]): qwen2 and HF-ordered weights
};

enum class RopeScaling { None, Linear, Yarn };

struct HParams {
  std::string arch;  // "llama" or "qwen2"
  int n_vocab = 0;
  int dim = 0;        // embedding length
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;  // grouped-query attention: n_head / n_head_kv queries share a KV head
  int head_dim = 0;
  int ffn_dim = 0;
  int n_ctx_train = 0;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;  // qwen2

  // RoPE
  RopeStyle rope_style = RopeStyle::Normal;
  int rope_dim = 0;  // leading dimensions of each head that rotate
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling = RopeScaling::None;
  float rope_scale = 1.0f;          // context extension factor (linear and YaRN)
  int rope_orig_ctx = 0;            // YaRN: training context before extension
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Throws Error naming the file and the missing or invalid key.
HParams read_hparams(const gguf::File& file);

}  // namespace llmserve::model
