// The reader against the real files in ../shared/models: the counts, types
// and shapes their README documents, and every row dequantizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "gguf/file.h"
#include "gguf/quant.h"
#include "test_models.h"

namespace llmserve::gguf {
namespace {

std::map<TensorType, int> count_types(const File& f) {
  std::map<TensorType, int> counts;
  for (const auto& t : f.tensors()) ++counts[t.type];
  return counts;
}

// Every row of every tensor decodes to finite values.
void expect_all_rows_finite(const File& f) {
  for (const auto& t : f.tensors()) {
    const size_t bytes_per_row = row_bytes(t.type, t.cols());
    std::vector<float> row(t.cols());
    for (uint64_t r = 0; r < t.rows(); ++r) {
      dequantize_row(t.type, t.data + r * bytes_per_row, row.data(), static_cast<int64_t>(row.size()));
      for (float x : row) ASSERT_TRUE(std::isfinite(x)) << t.name << " row " << r;
    }
  }
}

std::vector<float> dequantize_tensor(const TensorInfo& t) {
  std::vector<float> out(t.n_elems);
  const size_t bytes_per_row = row_bytes(t.type, t.cols());
  for (uint64_t r = 0; r < t.rows(); ++r)
    dequantize_row(t.type, t.data + r * bytes_per_row, out.data() + r * t.cols(), static_cast<int64_t>(t.cols()));
  return out;
}

TEST(Models, Stories260K) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const File f = File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset(), 14176u);
  EXPECT_EQ(count_types(f), (std::map<TensorType, int>{{TensorType::F32, 48}}));
  EXPECT_EQ(f.get_string("general.architecture", ""), "llama");
  EXPECT_EQ(f.get_int("llama.embedding_length", 0), 64);
  EXPECT_EQ(f.get_int("llama.block_count", 0), 5);
  EXPECT_EQ(f.get_int("llama.feed_forward_length", 0), 172);
  EXPECT_EQ(f.get_int("llama.attention.head_count", 0), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv", 0), 4);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon", 0)), 1e-5f);
  EXPECT_FALSE(f.has("llama.rope.freq_base"));
  EXPECT_EQ(f.require("tokenizer.ggml.tokens").as_array("tokens").items.size(), 512u);
  ASSERT_NE(f.find_tensor("token_embd.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->dims, (std::vector<uint64_t>{64, 512}));
  EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight")->dims, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(f.find_tensor("blk.4.ffn_down.weight")->dims, (std::vector<uint64_t>{172, 64}));
  EXPECT_EQ(f.find_tensor("output_norm.weight")->dims, (std::vector<uint64_t>{64}));
  // llama2.c ties the output to the embedding.
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  const TensorInfo* out = f.find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(out->n_bytes, embd->n_bytes);
  EXPECT_EQ(std::memcmp(out->data, embd->data, embd->n_bytes), 0);
  expect_all_rows_finite(f);
}

void expect_tinystories_layout(const File& f, TensorType matrix_type) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 20u);  // 2 blocks x 9 + token_embd + output_norm, no output.weight
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  for (const auto& t : f.tensors()) EXPECT_EQ(t.type, t.dims.size() == 1 ? TensorType::F32 : matrix_type) << t.name;
  EXPECT_EQ(count_types(f), (std::map<TensorType, int>{{TensorType::F32, 5}, {matrix_type, 15}}));
  EXPECT_EQ(f.get_int("llama.embedding_length", 0), 128);
  EXPECT_EQ(f.get_int("llama.block_count", 0), 2);
  EXPECT_EQ(f.get_int("llama.feed_forward_length", 0), 384);
  EXPECT_EQ(f.get_int("llama.attention.head_count", 0), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv", 0), 4);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->dims, (std::vector<uint64_t>{128, 2048}));
  EXPECT_EQ(f.find_tensor("blk.1.attn_v.weight")->dims, (std::vector<uint64_t>{128, 64}));
  EXPECT_EQ(f.require("tokenizer.ggml.tokens").as_array("tokens").items.size(), 2048u);
  expect_all_rows_finite(f);
}

TEST(Models, TinyStoriesF16) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  const File f = File::open(path);
  expect_tinystories_layout(f, TensorType::F16);
  EXPECT_DOUBLE_EQ(f.get_float("llama.rope.freq_base", 0), 10000.0);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon", 0)), 1e-6f);
}

TEST(Models, TinyStoriesQ8_0) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  expect_tinystories_layout(File::open(path), TensorType::Q8_0);
}

// The Q8_0 file holds the F16 file's weights quantized: each decoded value is
// within half a quantization step of the original, and quantizing the
// original with our quantize_row reproduces the file's blocks.
TEST(Models, TinyStoriesQ8_0MatchesF16) {
  REQUIRE_MODEL(f16_path, "TinyStories-656K.f16.gguf");
  REQUIRE_MODEL(q8_path, "tinystories-656k-q8_0.gguf");
  const File f16 = File::open(f16_path);
  const File q8 = File::open(q8_path);
  size_t blocks = 0, identical_blocks = 0;
  for (const auto& t : q8.tensors()) {
    if (t.type != TensorType::Q8_0) continue;
    const TensorInfo* ref = f16.find_tensor(t.name);
    ASSERT_NE(ref, nullptr) << t.name;
    ASSERT_EQ(ref->dims, t.dims);
    const auto original = dequantize_tensor(*ref);
    const auto decoded = dequantize_tensor(t);
    for (size_t b = 0; b < original.size() / QK8_0; ++b) {
      float amax = 0;
      for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(original[b * QK8_0 + j]));
      for (int j = 0; j < QK8_0; ++j) {
        const size_t i = b * QK8_0 + j;
        ASSERT_LE(std::fabs(original[i] - decoded[i]), amax / 127 * 0.6f + 1e-12f) << t.name << " element " << i;
      }
      BlockQ8_0 mine;
      quantize_row(TensorType::Q8_0, original.data() + b * QK8_0, &mine, QK8_0);
      identical_blocks += std::memcmp(&mine, t.data + b * sizeof(BlockQ8_0), sizeof mine) == 0;
      ++blocks;
    }
  }
  EXPECT_GT(blocks, 0u);
  EXPECT_EQ(identical_blocks, blocks);
}

TEST(Models, Llama2TinyRandom) {
  REQUIRE_MODEL(path, "llama-2-tiny-random.gguf");
  const File f = File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(f.tensors().size(), 12u);
  EXPECT_EQ(f.get_int("general.file_type", -1), 1);
  for (const auto& t : f.tensors()) EXPECT_EQ(t.type, t.dims.size() == 1 ? TensorType::F32 : TensorType::F16) << t.name;
  EXPECT_EQ(f.get_int("llama.embedding_length", 0), 8);
  EXPECT_EQ(f.get_int("llama.block_count", 0), 1);
  EXPECT_EQ(f.get_int("llama.context_length", 0), 4096);
  ASSERT_NE(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("output.weight")->dims, (std::vector<uint64_t>{8, 32000}));
  EXPECT_EQ(f.require("tokenizer.ggml.tokens").as_array("tokens").items.size(), 32000u);
  expect_all_rows_finite(f);
}

}  // namespace
}  // namespace llmserve::gguf
