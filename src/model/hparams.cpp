#include "model/hparams.h"

#include <algorithm>

#include "core/error.h"
#include "gguf/file.h"

namespace llmserve::model {

namespace {

// Metadata keys are "<arch>.<name>"; this reads them with range checks.
class ArchKeys {
 public:
  ArchKeys(const gguf::File& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  std::string key(const std::string& name) const { return arch_ + "." + name; }

  int required_int(const std::string& name, int lo, int hi) const {
    const std::string k = key(name);
    f_.require(k);
    return checked(k, f_.get_int(k, 0), lo, hi);
  }
  int optional_int(const std::string& name, int fallback, int lo, int hi) const {
    const std::string k = key(name);
    return checked(k, f_.get_int(k, fallback), lo, hi);
  }
  float optional_float(const std::string& name, float fallback) const {
    return static_cast<float>(f_.get_float(key(name), fallback));
  }

 private:
  int checked(const std::string& k, int64_t v, int lo, int hi) const {
    if (v < lo || v > hi)
      throw Error(f_.path() + ": metadata " + k + " = " + std::to_string(v) + " is out of range [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int>(v);
  }
  const gguf::File& f_;
  std::string arch_;
};

}  // namespace

HParams read_hparams(const gguf::File& f) {
  HParams hp;
  hp.arch = f.require("general.architecture").as_string("general.architecture");
  if (hp.arch != "llama" && hp.arch != "qwen2")
    throw Error(f.path() + ": unsupported architecture '" + hp.arch + "' (supported: llama, qwen2)");
  const ArchKeys k(f, hp.arch);
  constexpr int kBig = 1 << 24;
  hp.dim = k.required_int("embedding_length", 1, 1 << 16);
  hp.n_layer = k.required_int("block_count", 1, 1024);
  hp.n_head = k.required_int("attention.head_count", 1, 1024);
  hp.n_head_kv = k.optional_int("attention.head_count_kv", hp.n_head, 1, hp.n_head);
  hp.ffn_dim = k.required_int("feed_forward_length", 1, 1 << 18);
  hp.n_ctx_train = k.optional_int("context_length", 2048, 1, kBig);
  hp.head_dim = k.optional_int("attention.key_length", hp.dim / hp.n_head, 1, 4096);
  if (k.optional_int("attention.value_length", hp.head_dim, 1, 4096) != hp.head_dim)
    throw Error(f.path() + ": attention.value_length differs from key_length, which is not supported");
  if (hp.n_head % hp.n_head_kv != 0)
    throw Error(f.path() + ": head_count " + std::to_string(hp.n_head) + " is not a multiple of head_count_kv " +
                std::to_string(hp.n_head_kv));
  hp.rms_eps = k.optional_float("attention.layer_norm_rms_epsilon", 1e-5f);
  if (!(hp.rms_eps > 0.0f && hp.rms_eps < 1.0f))
    throw Error(f.path() + ": " + k.key("attention.layer_norm_rms_epsilon") + " must be in (0, 1)");

  // The vocabulary size comes from the key when present, else from the tokenizer.
  if (const gguf::Value* v = f.find(k.key("vocab_size")))
    hp.n_vocab = static_cast<int>(v->as_uint(k.key("vocab_size")));
  else if (const gguf::TensorInfo* e = f.find_tensor("token_embd.weight"); e && e->dims.size() == 2)
    hp.n_vocab = static_cast<int>(std::min<uint64_t>(e->dims[1], kBig));
  if (hp.n_vocab < 1 || hp.n_vocab > kBig)
    throw Error(f.path() + ": cannot determine the vocabulary size (no " + k.key("vocab_size") +
                " and no token_embd.weight)");

  hp.qkv_bias = hp.arch == "qwen2";
  hp.rope_style = hp.arch == "qwen2" ? RopeStyle::NeoX : RopeStyle::Normal;
  hp.rope_dim = k.optional_int("rope.dimension_count", hp.head_dim, 2, hp.head_dim);
  if (hp.rope_dim % 2 != 0) throw Error(f.path() + ": rope.dimension_count must be even");
  hp.rope_theta = k.optional_float("rope.freq_base", 10000.0f);
  if (!(hp.rope_theta > 1.0f)) throw Error(f.path() + ": rope.freq_base must be > 1");

  // Scaling: "rope.scaling.type" + "rope.scaling.factor", or the older "rope.scale_linear".
  const std::string type = f.get_string(k.key("rope.scaling.type"), "");
  const float factor = k.optional_float("rope.scaling.factor", k.optional_float("rope.scale_linear", 1.0f));
  if (type == "linear" || (type.empty() && factor != 1.0f)) {
    hp.rope_scaling = RopeScaling::Linear;
  } else if (type == "yarn") {
    hp.rope_scaling = RopeScaling::Yarn;
    hp.rope_orig_ctx = k.optional_int("rope.scaling.original_context_length", hp.n_ctx_train, 1, kBig);
    hp.yarn_beta_fast = k.optional_float("rope.scaling.yarn_beta_fast", 32.0f);
    hp.yarn_beta_slow = k.optional_float("rope.scaling.yarn_beta_slow", 1.0f);
  } else if (!type.empty() && type != "none") {
    throw Error(f.path() + ": unsupported " + k.key("rope.scaling.type") + " '" + type + "'");
  }
  if (hp.rope_scaling != RopeScaling::None) {
    if (!(factor >= 1.0f)) throw Error(f.path() + ": rope scaling factor must be >= 1");
    hp.rope_scale = factor;
  }
  return hp;
}

}  // namespace llmserve::model
