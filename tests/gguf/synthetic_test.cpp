// Synthetic models: the shapes, the written file (metadata, tensor list,
// bytes equal to quantize_row of the seeded rows), the built-in vocabulary
// and copying a real model's vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "core/error.h"
#include "gguf/file.h"
#include "gguf/quant.h"
#include "gguf/writer.h"
#include "model/synthetic.h"
#include "test_models.h"

namespace llmserve::model {
namespace {

namespace fs = std::filesystem;
using gguf::File;
using gguf::TensorType;

using llmserve::testing::TempFile;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint64_t n_params(const std::vector<SyntheticTensor>& tensors) {
  uint64_t n = 0;
  for (const auto& t : tensors) {
    uint64_t e = 1;
    for (uint64_t d : t.dims) e *= d;
    n += e;
  }
  return n;
}

TEST(SyntheticShapes, NamesAndLookup) {
  const std::vector<std::string_view> want = {"tiny", "stories110m", "tinyllama-1.1b", "smollm-135m"};
  EXPECT_EQ(shape_names(), want);
  for (auto name : want) {
    const auto s = find_shape(name);
    ASSERT_TRUE(s.has_value()) << name;
    EXPECT_EQ(s->name, name);
  }
  EXPECT_FALSE(find_shape("llama-70b").has_value());
  EXPECT_FALSE(find_shape("").has_value());
}

TEST(SyntheticShapes, Stories110M) {
  const Shape s = *find_shape("stories110m");
  EXPECT_EQ(s.dim, 768);
  EXPECT_EQ(s.n_layer, 12);
  EXPECT_EQ(s.n_head, 12);
  EXPECT_EQ(s.n_head_kv, 12);
  EXPECT_EQ(s.ffn_dim, 2048);
  EXPECT_EQ(s.n_vocab, 32000);
  EXPECT_EQ(s.head_dim(), 64);
  const auto t = synthetic_tensors(s, s.n_vocab, TensorType::Q8_0);
  EXPECT_EQ(t.size(), 12u * 9 + 3);
  // llama2.c's 110M counts the tied embedding once; we also write output.weight.
  EXPECT_EQ(n_params(t) - uint64_t{768} * 32000, 109'529'856u);
}

TEST(SyntheticShapes, TinyLlama) {
  const Shape s = *find_shape("tinyllama-1.1b");
  EXPECT_EQ(s.dim, 2048);
  EXPECT_EQ(s.n_layer, 22);
  EXPECT_EQ(s.n_head, 32);
  EXPECT_EQ(s.n_head_kv, 4);
  EXPECT_EQ(s.ffn_dim, 5632);
  EXPECT_EQ(s.n_vocab, 32000);
  EXPECT_EQ(s.n_ctx, 2048);
  EXPECT_EQ(s.rope_theta, 10000.0f);
  EXPECT_EQ(s.rms_eps, 1e-5f);
  EXPECT_EQ(s.kv_dim(), 256);
  // TinyLlama-1.1B's published parameter count.
  EXPECT_EQ(n_params(synthetic_tensors(s, s.n_vocab, TensorType::Q4_0)), 1'100'048'384u);
}

TEST(SyntheticShapes, EveryMatrixRowSplitsIntoQuantBlocks) {
  for (auto name : shape_names()) {
    const Shape s = *find_shape(name);
    EXPECT_EQ(s.dim % s.n_head, 0) << name;
    EXPECT_EQ(s.n_head % s.n_head_kv, 0) << name;
    for (const auto& t : synthetic_tensors(s, s.n_vocab, TensorType::Q4_0)) {
      if (t.dims.size() == 2) {
        EXPECT_EQ(t.dims[0] % gguf::QK4_0, 0u) << name << " " << t.name;
      }
    }
  }
}

TEST(SyntheticShapes, TensorNamesAndDims) {
  const Shape s = *find_shape("tiny");
  const auto t = synthetic_tensors(s, 512, TensorType::Q8_0);
  auto find = [&](const std::string& name) -> const SyntheticTensor& {
    for (const auto& x : t)
      if (x.name == name) return x;
    throw Error("no tensor " + name);
  };
  const uint64_t dim = s.dim, kv = s.kv_dim(), ffn = s.ffn_dim;
  EXPECT_EQ(find("token_embd.weight").dims, (std::vector<uint64_t>{dim, 512}));
  EXPECT_EQ(find("output.weight").dims, (std::vector<uint64_t>{dim, 512}));
  EXPECT_EQ(find("output_norm.weight").dims, (std::vector<uint64_t>{dim}));
  EXPECT_EQ(find("output_norm.weight").type, TensorType::F32);
  const std::string last = "blk." + std::to_string(s.n_layer - 1) + ".";
  EXPECT_EQ(find(last + "attn_norm.weight").dims, (std::vector<uint64_t>{dim}));
  EXPECT_EQ(find(last + "attn_q.weight").dims, (std::vector<uint64_t>{dim, dim}));
  EXPECT_EQ(find(last + "attn_k.weight").dims, (std::vector<uint64_t>{dim, kv}));
  EXPECT_EQ(find(last + "attn_v.weight").dims, (std::vector<uint64_t>{dim, kv}));
  EXPECT_EQ(find(last + "attn_output.weight").dims, (std::vector<uint64_t>{dim, dim}));
  EXPECT_EQ(find(last + "ffn_norm.weight").type, TensorType::F32);
  EXPECT_EQ(find(last + "ffn_gate.weight").dims, (std::vector<uint64_t>{dim, ffn}));
  EXPECT_EQ(find(last + "ffn_up.weight").dims, (std::vector<uint64_t>{dim, ffn}));
  EXPECT_EQ(find(last + "ffn_down.weight").dims, (std::vector<uint64_t>{ffn, dim}));
  EXPECT_EQ(find(last + "ffn_down.weight").type, TensorType::Q8_0);
  EXPECT_EQ(t.size(), static_cast<size_t>(s.n_layer) * 9 + 3);
}

TEST(SyntheticRows, DeterministicAndDistinct) {
  std::vector<float> a(1000), b(1000), c(1000), d(1000);
  synthetic_row(1, "x.weight", 5, a.data(), a.size());
  synthetic_row(1, "x.weight", 5, b.data(), b.size());
  synthetic_row(1, "x.weight", 6, c.data(), c.size());
  synthetic_row(2, "x.weight", 5, d.data(), d.size());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  std::vector<float> odd(7);
  synthetic_row(1, "x.weight", 5, odd.data(), odd.size());
  EXPECT_EQ(std::vector<float>(a.begin(), a.begin() + 7), odd);
}

TEST(SyntheticRows, NormalWithStddev0_02) {
  std::vector<float> x(1 << 20);
  for (int r = 0; r < 16; ++r) synthetic_row(3, "w", r, x.data() + r * (x.size() / 16), x.size() / 16);
  double sum = 0, sum_sq = 0, within_one_sigma = 0;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += double(v) * v;
    within_one_sigma += std::fabs(v) < 0.02f;
  }
  const double mean = sum / x.size(), sd = std::sqrt(sum_sq / x.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(sd, 0.02, 0.0005);
  EXPECT_NEAR(within_one_sigma / x.size(), 0.6827, 0.005);  // a normal, not just any spread
}

// A matrix type for every matrix, or (q4_k_m) the Q4_K_M mix.
struct MatrixTypes {
  TensorType type;
  bool q4_k_m;
};

class SyntheticModel : public ::testing::TestWithParam<MatrixTypes> {};

// A tiny model written in each type reads back with the shape's metadata,
// the planned tensors, norms of 1 and matrix bytes equal to quantize_row of
// the seeded rows.
TEST_P(SyntheticModel, TinyRoundTrips) {
  const TensorType type = GetParam().type;
  SyntheticSpec spec;
  spec.shape = *find_shape("tiny");
  spec.type = type;
  spec.q4_k_m = GetParam().q4_k_m;
  spec.seed = 1234;
  const TempFile file("synthetic-tiny.gguf", [&](const std::string& p) { write_synthetic_model(spec, p); });

  const File f = File::open(file.path());
  const Shape& s = spec.shape;
  EXPECT_EQ(f.get_string("general.architecture", ""), "llama");
  EXPECT_FALSE(f.get_string("general.name", "").empty());
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.get_int("llama.context_length", 0), s.n_ctx);
  EXPECT_EQ(f.get_int("llama.embedding_length", 0), s.dim);
  EXPECT_EQ(f.get_int("llama.block_count", 0), s.n_layer);
  EXPECT_EQ(f.get_int("llama.feed_forward_length", 0), s.ffn_dim);
  EXPECT_EQ(f.get_int("llama.attention.head_count", 0), s.n_head);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv", 0), s.n_head_kv);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count", 0), s.head_dim());
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon", 0)), s.rms_eps);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.rope.freq_base", 0)), s.rope_theta);
  const std::map<TensorType, int64_t> file_types = {
      {TensorType::F32, 0}, {TensorType::F16, 1}, {TensorType::Q4_0, 2}, {TensorType::Q8_0, 7},
      {TensorType::Q4_K, 14}, {TensorType::Q6_K, 18}};
  EXPECT_EQ(f.get_int("general.file_type", -1), spec.q4_k_m ? 15 : file_types.at(type));

  const auto plan = synthetic_tensors(s, s.n_vocab, type, spec.q4_k_m);
  ASSERT_EQ(f.tensors().size(), plan.size());
  std::vector<float> row;
  std::vector<uint8_t> want;
  for (size_t i = 0; i < plan.size(); ++i) {
    const gguf::TensorInfo& t = f.tensors()[i];
    ASSERT_EQ(t.name, plan[i].name);
    ASSERT_EQ(t.dims, plan[i].dims) << t.name;
    ASSERT_EQ(t.type, plan[i].type) << t.name;
    const size_t rb = gguf::row_bytes(t.type, t.cols());
    row.resize(t.cols());
    want.resize(rb);
    for (uint64_t r = 0; r < t.rows(); ++r) {
      if (t.dims.size() == 1) {
        std::fill(row.begin(), row.end(), 1.0f);
      } else {
        synthetic_row(spec.seed, t.name, r, row.data(), row.size());
      }
      gguf::quantize_row(t.type, row.data(), want.data(), static_cast<int64_t>(row.size()));
      ASSERT_EQ(std::memcmp(t.data + r * rb, want.data(), rb), 0) << t.name << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, SyntheticModel,
                         ::testing::Values(MatrixTypes{TensorType::F32, false}, MatrixTypes{TensorType::F16, false},
                                           MatrixTypes{TensorType::Q8_0, false}, MatrixTypes{TensorType::Q4_0, false},
                                           MatrixTypes{TensorType::Q4_K, false}, MatrixTypes{TensorType::Q6_K, false},
                                           MatrixTypes{TensorType::F32, true}),
                         [](const auto& info) {
                           return info.param.q4_k_m ? std::string("Q4_K_M")
                                                    : std::string(gguf::type_info(info.param.type)->name);
                         });

// Q4_K_M as llama.cpp lays it out: Q4_K, Q6_K for output.weight and for
// attn_v / ffn_down in the layers of more bits (of 22: 0-1, 19-21, and
// every third from 4).
TEST(SyntheticTensors, Q4KMGivesMoreBitsWhereLlamaCppDoes) {
  const Shape s = *find_shape("tinyllama-1.1b");
  std::map<std::string, TensorType> types;
  for (const auto& t : synthetic_tensors(s, s.n_vocab, TensorType::F32, true)) types[t.name] = t.type;
  EXPECT_EQ(types.at("token_embd.weight"), TensorType::Q4_K);
  EXPECT_EQ(types.at("output.weight"), TensorType::Q6_K);
  EXPECT_EQ(types.at("output_norm.weight"), TensorType::F32);
  const std::set<int> more = {0, 1, 4, 7, 10, 13, 16, 19, 20, 21};
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const TensorType wider = more.count(l) ? TensorType::Q6_K : TensorType::Q4_K;
    EXPECT_EQ(types.at(p + "attn_v.weight"), wider) << l;
    EXPECT_EQ(types.at(p + "ffn_down.weight"), wider) << l;
    for (const char* m : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
      EXPECT_EQ(types.at(p + m + ".weight"), TensorType::Q4_K) << p << m;
  }
}

TEST(SyntheticModelFile, SameSpecSameBytesOtherSeedOtherWeights) {
  SyntheticSpec spec;
  spec.shape = *find_shape("tiny");
  spec.type = TensorType::Q4_0;
  spec.seed = 7;
  const TempFile a("synthetic-a.gguf"), b("synthetic-b.gguf"), c("synthetic-c.gguf");
  write_synthetic_model(spec, a.path());
  write_synthetic_model(spec, b.path());
  spec.seed = 8;
  write_synthetic_model(spec, c.path());
  EXPECT_EQ(read_all(a.path()), read_all(b.path()));
  const File fa = File::open(a.path()), fc = File::open(c.path());
  const auto* ta = fa.find_tensor("blk.0.attn_q.weight");
  const auto* tc = fc.find_tensor("blk.0.attn_q.weight");
  ASSERT_TRUE(ta && tc);
  EXPECT_NE(std::memcmp(ta->data, tc->data, ta->n_bytes), 0);
}

// The built-in vocabulary padded to a 32000-token vocab (on a small custom
// shape so the test stays fast).
TEST(SyntheticVocab, BuiltInSentencePieceVocab) {
  SyntheticSpec spec;
  spec.shape = Shape{"vocab-test", 32, 1, 1, 1, 32, 32000, 64, 10000.0f, 1e-5f};
  spec.type = TensorType::Q8_0;
  const TempFile file("synthetic-vocab.gguf", [&](const std::string& p) { write_synthetic_model(spec, p); });
  const File f = File::open(file.path());
  EXPECT_EQ(f.get_string("tokenizer.ggml.model", ""), "llama");
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id", -1), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id", -1), 2);
  EXPECT_EQ(f.get_int("tokenizer.ggml.unknown_token_id", -1), 0);
  EXPECT_TRUE(f.require("tokenizer.ggml.add_bos_token").as_bool("add_bos"));
  EXPECT_EQ(f.get_int("llama.vocab_size", 0), 32000);

  const auto& tokens = f.require("tokenizer.ggml.tokens").as_array("tokens").items;
  const auto& scores = f.require("tokenizer.ggml.scores").as_array("scores").items;
  const auto& types = f.require("tokenizer.ggml.token_type").as_array("types").items;
  ASSERT_EQ(tokens.size(), 32000u);
  ASSERT_EQ(scores.size(), 32000u);
  ASSERT_EQ(types.size(), 32000u);
  auto text = [&](size_t i) { return tokens[i].as_string("token"); };
  auto type = [&](size_t i) { return types[i].as_int("type"); };
  EXPECT_EQ(text(0), "<unk>");
  EXPECT_EQ(type(0), 2);
  EXPECT_EQ(text(1), "<s>");
  EXPECT_EQ(type(1), 3);
  EXPECT_EQ(text(2), "</s>");
  EXPECT_EQ(type(2), 3);
  for (int b = 0; b < 256; ++b) {
    char want[8];
    std::snprintf(want, sizeof want, "<0x%02X>", b);
    EXPECT_EQ(text(3 + b), want);
    EXPECT_EQ(type(3 + b), 6);
  }
  std::set<std::string> unique;
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_TRUE(unique.insert(text(i)).second) << "duplicate " << text(i);
  for (size_t i = 259; i < tokens.size(); ++i) {
    EXPECT_EQ(type(i), 1) << i;
    if (i > 259) {
      EXPECT_LT(scores[i].as_float("score"), scores[i - 1].as_float("score")) << i;
    }
  }
  EXPECT_TRUE(unique.count("\xe2\x96\x81the"));
  EXPECT_TRUE(unique.count("\xe2\x96\x81th"));  // its prefix, so BPE merges can reach it
  EXPECT_EQ(f.find_tensor("token_embd.weight")->dims, (std::vector<uint64_t>{32, 32000}));
}

void expect_copied_vocab(const std::string& source, size_t n_vocab) {
  SyntheticSpec spec;
  spec.shape = *find_shape("tiny");
  spec.type = TensorType::Q8_0;
  spec.vocab_from = source;
  const TempFile file("synthetic-copied.gguf", [&](const std::string& p) { write_synthetic_model(spec, p); });
  const File src = File::open(source);
  const File f = File::open(file.path());
  size_t copied = 0;
  for (const auto& [key, value] : src.metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    const gguf::Value* got = f.find(key);
    ASSERT_NE(got, nullptr) << key;
    EXPECT_EQ(got->type, value.type) << key;
    ++copied;
  }
  EXPECT_GT(copied, 3u);
  const auto& want_tokens = src.require("tokenizer.ggml.tokens").as_array("t").items;
  const auto& got_tokens = f.require("tokenizer.ggml.tokens").as_array("t").items;
  ASSERT_EQ(got_tokens.size(), n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) ASSERT_EQ(got_tokens[i].as_string("t"), want_tokens[i].as_string("t")) << i;
  EXPECT_EQ(f.get_int("llama.vocab_size", 0), static_cast<int64_t>(n_vocab));
  EXPECT_EQ(f.find_tensor("token_embd.weight")->dims, (std::vector<uint64_t>{256, n_vocab}));
  EXPECT_EQ(f.find_tensor("output.weight")->dims, (std::vector<uint64_t>{256, n_vocab}));
}

TEST(SyntheticVocab, CopiedFromStories260K) {
  REQUIRE_MODEL(source, "stories260K.gguf");
  expect_copied_vocab(source, 512);
}

TEST(SyntheticVocab, CopiedFromLlama2) {
  REQUIRE_MODEL(source, "llama-2-tiny-random.gguf");
  expect_copied_vocab(source, 32000);
}

TEST(SyntheticErrors, UnsupportedTypeOrVocabSourceWritesNothing) {
  SyntheticSpec spec;
  spec.shape = *find_shape("tiny");
  const TempFile never("synthetic-never.gguf");  // removed even if a write wrongly succeeds
  const std::string& path = never.path();
  spec.type = TensorType::Q5_K;
  EXPECT_THROW(write_synthetic_model(spec, path), Error);

  spec.type = TensorType::Q8_0;
  spec.vocab_from = llmserve::testing::temp_path("synthetic-missing.gguf");
  try {
    write_synthetic_model(spec, path);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(spec.vocab_from), std::string::npos) << e.what();
  }

  // A GGUF without a vocabulary.
  gguf::Writer w;
  w.set("general.architecture", gguf::make_string("llama"));
  const TempFile no_vocab("synthetic-no-vocab.gguf", [&](const std::string& p) { w.write(p); });
  spec.vocab_from = no_vocab.path();
  try {
    write_synthetic_model(spec, path);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.tokens"), std::string::npos) << e.what();
  }

  spec.vocab_from.clear();
  spec.shape.n_head = 7;  // 256 does not split into 7 heads
  EXPECT_THROW(write_synthetic_model(spec, path), Error);
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace llmserve::model
