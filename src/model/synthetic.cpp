#include "model/synthetic.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <unordered_set>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/file.h"
#include "gguf/quant.h"
#include "gguf/writer.h"

namespace llmserve::model {

namespace {

using gguf::TensorType;
using gguf::Value;
using gguf::ValueType;

// Real models' shapes. "tiny" is ours: small enough to generate instantly and
// fit in a test, with grouped-query attention like the larger shapes.
constexpr std::array kShapes = {
    Shape{"tiny", 256, 4, 8, 4, 768, 512, 1024, 10000.0f, 1e-5f},
    Shape{"stories110m", 768, 12, 12, 12, 2048, 32000, 1024, 10000.0f, 1e-5f},
    Shape{"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f},
    Shape{"smollm-135m", 576, 30, 9, 3, 1536, 49152, 2048, 10000.0f, 1e-5f},  // 3 query heads per KV head
};

constexpr float kWeightStddev = 0.02f;

// ---- weights ---------------------------------------------------------------

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// FNV-1a: unlike std::hash, the same on every platform, so a seed names the
// same model everywhere.
uint64_t hash_name(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// llama.cpp's general.file_type for a model whose matrices are spec.type,
// for every type quantize_row can produce, or the Q4_K_M mix.
uint32_t file_type(const SyntheticSpec& spec) {
  if (spec.q4_k_m) return 15;  // MOSTLY_Q4_K_M
  switch (spec.type) {
    case TensorType::F32: return 0;
    case TensorType::F16: return 1;
    case TensorType::Q4_0: return 2;
    case TensorType::Q8_0: return 7;
    case TensorType::Q4_K: return 14;  // MOSTLY_Q4_K_S: all of it Q4_K
    case TensorType::Q6_K: return 18;
    case TensorType::BF16: return 32;
    default: break;
  }
  const auto info = gguf::type_info(spec.type);
  throw Error("gen-model: cannot write matrices of type " + std::string(info ? info->name : "unknown") +
              " (use f32, f16, bf16, q8_0, q4_0, q4_k or q6_k)");
}

// ---- built-in vocabulary ---------------------------------------------------

// SentencePiece token types as llama.cpp stores them.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6;
constexpr uint32_t kUnkId = 0, kBosId = 1, kEosId = 2;

// Frequent words of simple English stories, most frequent first: the pieces a
// real SentencePiece vocabulary of this size would hold.
constexpr std::string_view kWords[] = {
    "the", "and", "a", "to", "was", "he", "she", "it", "of", "in", "they", "you", "her", "his", "with", "said",
    "on", "that", "day", "for", "had", "is", "big", "were", "so", "but", "play", "little", "saw", "time", "upon",
    "once", "there", "happy", "went", "friend", "mom", "very", "not", "all", "at", "be", "what", "wanted", "did",
    "girl", "boy", "named", "lily", "tom", "ben", "loved", "can", "one", "up", "them", "do", "we", "help", "are",
    "too", "like", "out", "see", "from", "him", "park", "ball", "tree", "dog", "cat", "bird", "sun", "fun", "toy",
    "red", "blue", "green", "home", "look", "found", "new", "good", "sad", "smiled", "felt", "thought", "asked",
    "told", "came", "made", "took", "get", "go", "have", "this", "then", "when", "would", "could", "about",
    "because", "together", "every", "after", "some", "their", "down", "into", "away", "again", "know", "how",
    "water", "car", "house", "run", "jump", "fly", "eat", "sleep", "nice", "kind", "best",
    "ing", "ed", "er", "ly", "es", "s", "y", "t", "d", "n", "re", "un", "ll", "ve",
};

struct VocabBuilder {
  std::vector<Value> tokens, scores, types;
  std::unordered_set<std::string> seen;

  void add(std::string text, float score, int32_t type) {
    if (!seen.insert(text).second) return;
    tokens.push_back(gguf::make_string(std::move(text)));
    scores.push_back(gguf::make_f32(score));
    types.push_back(gguf::make_i32(type));
  }
  // Normal pieces score lower the later they come, so BPE merges the common
  // (earlier) ones first.
  void add_normal(std::string text) {
    if (tokens.size() < static_cast<size_t>(limit)) add(std::move(text), -static_cast<float>(tokens.size()), kNormal);
  }
  // A word-start piece "▁word" and its prefixes, so BPE can reach it by merges.
  void add_with_prefixes(const std::string& piece, size_t first_char_bytes) {
    for (size_t n = first_char_bytes + 1; n <= piece.size(); ++n) add_normal(piece.substr(0, n));
  }
  int limit = 0;
};

// <unk>, <s>, </s>, the 256 byte-fallback tokens, then pieces of common words,
// padded with unique filler pieces to n_vocab entries.
void set_builtin_vocab(gguf::Writer& w, int n_vocab) {
  constexpr int kFixed = 3 + 256;
  if (n_vocab < kFixed) throw Error("gen-model: a vocabulary needs at least " + std::to_string(kFixed) + " tokens");
  VocabBuilder v;
  v.limit = n_vocab;
  v.add("<unk>", 0, kUnknown);
  v.add("<s>", 0, kControl);
  v.add("</s>", 0, kControl);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.add(name, 0, kByte);
  }
  const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
  v.add_normal(space);
  for (char c = 'a'; c <= 'z'; ++c) v.add_normal(std::string(1, c));
  for (char c : std::string_view("etaoinsrhldcumfpgwybvkxjqz")) v.add_normal(space + static_cast<char>(c));
  for (char c : std::string_view(".,!?'\"-:;()0123456789")) v.add_normal(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) v.add_normal(std::string(1, c));
  for (std::string_view word : kWords) {
    v.add_with_prefixes(space + std::string(word), space.size());
    v.add_with_prefixes(std::string(word), 0);
  }
  for (int i = 0; static_cast<int>(v.tokens.size()) < n_vocab; ++i) v.add_normal("<extra_" + std::to_string(i) + ">");

  w.set("tokenizer.ggml.model", gguf::make_string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::make_array(ValueType::STRING, std::move(v.tokens)));
  w.set("tokenizer.ggml.scores", gguf::make_array(ValueType::FLOAT32, std::move(v.scores)));
  w.set("tokenizer.ggml.token_type", gguf::make_array(ValueType::INT32, std::move(v.types)));
  w.set("tokenizer.ggml.bos_token_id", gguf::make_u32(kBosId));
  w.set("tokenizer.ggml.eos_token_id", gguf::make_u32(kEosId));
  w.set("tokenizer.ggml.unknown_token_id", gguf::make_u32(kUnkId));
  w.set("tokenizer.ggml.add_bos_token", gguf::make_bool(true));
  w.set("tokenizer.ggml.add_eos_token", gguf::make_bool(false));
}

// Copies every tokenizer.* key of `path`; returns its vocabulary size.
int copy_vocab(gguf::Writer& w, const std::string& path) {
  const gguf::File src = gguf::File::open(path);
  const Value* tokens = src.find("tokenizer.ggml.tokens");
  if (!tokens) throw Error(path + ": has no tokenizer.ggml.tokens, so there is no vocabulary to copy");
  for (const auto& [key, value] : src.metadata())
    if (key.starts_with("tokenizer.")) w.set(key, value);
  return static_cast<int>(tokens->as_array("tokenizer.ggml.tokens").items.size());
}

void set_hparams(gguf::Writer& w, const SyntheticSpec& spec, int n_vocab) {
  const Shape& s = spec.shape;
  w.set("general.architecture", gguf::make_string("llama"));
  w.set("general.name", gguf::make_string("llmserve synthetic " + std::string(s.name) + " (random weights, seed " +
                                          std::to_string(spec.seed) + ")"));
  w.set("general.alignment", gguf::make_u32(32));
  w.set("general.file_type", gguf::make_u32(file_type(spec)));
  w.set("llama.vocab_size", gguf::make_u32(n_vocab));
  w.set("llama.context_length", gguf::make_u32(s.n_ctx));
  w.set("llama.embedding_length", gguf::make_u32(s.dim));
  w.set("llama.block_count", gguf::make_u32(s.n_layer));
  w.set("llama.feed_forward_length", gguf::make_u32(s.ffn_dim));
  w.set("llama.attention.head_count", gguf::make_u32(s.n_head));
  w.set("llama.attention.head_count_kv", gguf::make_u32(s.n_head_kv));
  w.set("llama.attention.layer_norm_rms_epsilon", gguf::make_f32(s.rms_eps));
  w.set("llama.rope.freq_base", gguf::make_f32(s.rope_theta));
  w.set("llama.rope.dimension_count", gguf::make_u32(s.head_dim()));
}

void check_shape(const Shape& s) {
  if (s.dim <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.ffn_dim <= 0 || s.n_ctx <= 0 ||
      s.dim % s.n_head != 0 || s.n_head % s.n_head_kv != 0) {
    throw Error("gen-model: shape " + std::string(s.name) +
                " is inconsistent (dim must split into heads, heads into KV heads)");
  }
}

}  // namespace

std::optional<Shape> find_shape(std::string_view name) {
  for (const Shape& s : kShapes)
    if (s.name == name) return s;
  return std::nullopt;
}

std::vector<std::string_view> shape_names() {
  std::vector<std::string_view> names;
  for (const Shape& s : kShapes) names.push_back(s.name);
  return names;
}

std::vector<SyntheticTensor> synthetic_tensors(const Shape& s, int n_vocab, TensorType matrix_type, bool q4_k_m) {
  const uint64_t dim = s.dim, kv = s.kv_dim(), ffn = s.ffn_dim, vocab = n_vocab;
  const TensorType base = q4_k_m ? TensorType::Q4_K : matrix_type;
  const int n = s.n_layer;
  // Q4_K_M's layers of more bits (llama.cpp's use_more_bits).
  auto more_bits = [&](int l) { return q4_k_m && (l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2); };
  std::vector<SyntheticTensor> t;
  t.push_back({"token_embd.weight", {dim, vocab}, base});
  for (int l = 0; l < n; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const TensorType wider = more_bits(l) ? TensorType::Q6_K : base;
    t.push_back({p + "attn_norm.weight", {dim}, TensorType::F32});
    t.push_back({p + "attn_q.weight", {dim, dim}, base});
    t.push_back({p + "attn_k.weight", {dim, kv}, base});
    t.push_back({p + "attn_v.weight", {dim, kv}, wider});
    t.push_back({p + "attn_output.weight", {dim, dim}, base});
    t.push_back({p + "ffn_norm.weight", {dim}, TensorType::F32});
    t.push_back({p + "ffn_gate.weight", {dim, ffn}, base});
    t.push_back({p + "ffn_up.weight", {dim, ffn}, base});
    t.push_back({p + "ffn_down.weight", {ffn, dim}, wider});
  }
  t.push_back({"output_norm.weight", {dim}, TensorType::F32});
  t.push_back({"output.weight", {dim, vocab}, q4_k_m ? TensorType::Q6_K : base});
  return t;
}

// Box-Muller on a row-seeded mt19937_64: each 64-bit draw gives two 24-bit
// uniforms and so two normals.
void synthetic_row(uint64_t seed, std::string_view tensor_name, uint64_t row, float* out, size_t n) {
  std::mt19937_64 rng(splitmix64(splitmix64(seed ^ hash_name(tensor_name)) ^ row));
  constexpr float kUnit = 1.0f / (1u << 24);
  constexpr float kTwoPi = 6.28318530717958647692f;
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t bits = rng();
    const float u1 = static_cast<float>((bits >> 40) + 1) * kUnit;  // (0, 1]: log stays finite
    const float u2 = static_cast<float>((bits >> 16) & 0xffffff) * kUnit;
    const float r = kWeightStddev * std::sqrt(-2.0f * std::log(u1));
    out[i] = r * std::cos(kTwoPi * u2);
    if (i + 1 < n) out[i + 1] = r * std::sin(kTwoPi * u2);
  }
}

void write_synthetic_model(const SyntheticSpec& spec, const std::string& out_path) {
  check_shape(spec.shape);
  gguf::Writer w;
  set_hparams(w, spec, spec.shape.n_vocab);
  int n_vocab = spec.shape.n_vocab;
  if (spec.vocab_from.empty()) {
    set_builtin_vocab(w, n_vocab);
  } else {
    n_vocab = copy_vocab(w, spec.vocab_from);
    w.set("llama.vocab_size", gguf::make_u32(n_vocab));
  }

  ThreadPool pool(default_thread_count());
  for (SyntheticTensor& t : synthetic_tensors(spec.shape, n_vocab, spec.type, spec.q4_k_m)) {
    const uint64_t cols = t.dims[0];
    if (t.dims.size() == 1) {  // RMS norm weights start at 1
      std::vector<float> ones(cols, 1.0f);
      std::vector<uint8_t> bytes(cols * sizeof(float));
      std::memcpy(bytes.data(), ones.data(), bytes.size());
      w.add_tensor(std::move(t.name), std::move(t.dims), TensorType::F32, std::move(bytes));
      continue;
    }
    const size_t row_bytes = gguf::row_bytes(t.type, cols);
    auto fill = [&pool, seed = spec.seed, name = t.name, type = t.type, cols, row_bytes](
                    uint64_t first, uint64_t n_rows, uint8_t* dst) {
      pool.run([&](int thread, int n_threads) {
        const auto [begin, end] = ThreadPool::split(static_cast<long>(n_rows), thread, n_threads);
        std::vector<float> row(cols);
        for (long r = begin; r < end; ++r) {
          synthetic_row(seed, name, first + r, row.data(), cols);
          gguf::quantize_row(type, row.data(), dst + r * row_bytes, static_cast<int64_t>(cols));
        }
      });
    };
    w.add_tensor(std::move(t.name), std::move(t.dims), t.type, gguf::Writer::RowSource(fill));
  }
  w.write(out_path);
}

}  // namespace llmserve::model
