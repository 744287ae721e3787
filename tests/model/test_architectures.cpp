// Architecture variants no shared test model covers: qwen2 (QKV bias, NeoX
// RoPE) built from a synthetic llama model, and RoPE scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "core/error.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "model/reference.h"
#include "model/rope.h"
#include "model/runner.h"
#include "model/synthetic.h"
#include "test_models.h"

using namespace llmserve;

void expect_fast_matches_reference(const model::Model& m, int n_prompt, int n_decode,
                                   int n_ctx = 256);  // test_fast_vs_reference.cpp

namespace {

using llmserve::testing::TempFile;

std::vector<uint8_t> random_f32_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  std::vector<uint8_t> bytes(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    std::memcpy(&bytes[i * 4], &v, 4);
  }
  return bytes;
}

// A synthetic llama model of `shape` with f32 matrices, at temp_path(name),
// removed with the TempFile: the base the tests below rewrite into the
// variant they need.
std::unique_ptr<TempFile> write_f32_model(const model::Shape& shape, const std::string& name) {
  model::SyntheticSpec spec;
  spec.shape = shape;
  spec.type = gguf::TensorType::F32;
  return std::make_unique<TempFile>(name, [&](const std::string& path) { model::write_synthetic_model(spec, path); });
}

// A qwen2 model: the synthetic llama weights with qwen2 keys, plus Q/K/V biases.
std::unique_ptr<TempFile> write_qwen2(bool with_biases) {
  const model::Shape shape = *model::find_shape("tiny");
  const auto llama = write_f32_model(shape, "llama.gguf");
  const gguf::File f = gguf::File::open(llama->path());
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) {
    if (k == "general.architecture") w.set(k, gguf::make_string("qwen2"));
    else if (k.starts_with("llama.")) w.set("qwen2." + k.substr(6), v);
    else w.set(k, v);
  }
  for (const auto& t : f.tensors()) w.add_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  const uint64_t q_dim = shape.dim, kv_dim = shape.kv_dim();
  for (int l = 0; with_biases && l < shape.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor(p + "attn_q.bias", {q_dim}, gguf::TensorType::F32, random_f32_bytes(q_dim, 10 + l));
    w.add_tensor(p + "attn_k.bias", {kv_dim}, gguf::TensorType::F32, random_f32_bytes(kv_dim, 20 + l));
    w.add_tensor(p + "attn_v.bias", {kv_dim}, gguf::TensorType::F32, random_f32_bytes(kv_dim, 30 + l));
  }
  return std::make_unique<TempFile>(with_biases ? "qwen2.gguf" : "qwen2-nobias.gguf",
                                    [&](const std::string& path) { w.write(path); });
}

}  // namespace

TEST(Qwen2, BiasesAndNeoxRopeFastMatchesReference) {
  const auto file = write_qwen2(true);
  const auto m = model::Model::load(file->path());
  EXPECT_TRUE(m->hparams().qkv_bias);
  EXPECT_EQ(m->hparams().rope_style, model::RopeStyle::NeoX);
  expect_fast_matches_reference(*m, 10, 5);
}

TEST(Qwen2, MissingBiasesAreListed) {
  const auto file = write_qwen2(false);
  try {
    model::Model::load(file->path());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor blk.0.attn_q.bias"), std::string::npos) << e.what();
  }
}

namespace {

model::HParams rope_hparams() {
  model::HParams hp;
  hp.head_dim = 16;
  hp.rope_dim = 16;
  hp.rope_theta = 10000.0f;
  hp.n_ctx_train = 4096;
  return hp;
}

}  // namespace

TEST(Rope, LinearScalingDividesThePosition) {
  model::HParams plain = rope_hparams(), scaled = rope_hparams();
  scaled.rope_scaling = model::RopeScaling::Linear;
  scaled.rope_scale = 4.0f;
  float c1[8], s1[8], c2[8], s2[8];
  model::Rope(plain).angles(10, c1, s1);
  model::Rope(scaled).angles(40, c2, s2);
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(c1[i], c2[i], 1e-5f);
    EXPECT_NEAR(s1[i], s2[i], 1e-5f);
  }
}

TEST(Rope, YarnKeepsFastPairsAndInterpolatesSlowOnes) {
  model::HParams plain = rope_hparams(), yarn = rope_hparams();
  yarn.rope_scaling = model::RopeScaling::Yarn;
  yarn.rope_scale = 4.0f;
  yarn.rope_orig_ctx = 1024;
  const float mscale = 1.0f + 0.1f * std::log(4.0f);
  float cp[8], sp[8], cy[8], sy[8], cl[8], sl[8];
  const int pos = 100;
  model::Rope(plain).angles(pos, cp, sp);
  model::Rope(yarn).angles(pos, cy, sy);
  model::Rope(plain).angles(pos / 4, cl, sl);  // pos / 4 is exact: 25
  // Pair 0 turns fastest: extrapolated (unchanged angle), scaled by mscale.
  EXPECT_NEAR(cy[0], cp[0] * mscale, 1e-4f);
  EXPECT_NEAR(sy[0], sp[0] * mscale, 1e-4f);
  // The slowest pair is fully interpolated: the angle of position / scale.
  EXPECT_NEAR(cy[7], cl[7] * mscale, 1e-4f);
  EXPECT_NEAR(sy[7], sl[7] * mscale, 1e-4f);
}

TEST(Rope, NormalAndNeoxRotateDifferentPairs) {
  model::HParams hp = rope_hparams();
  hp.head_dim = hp.rope_dim = 4;
  std::vector<float> a{1, 0, 0, 0}, b{1, 0, 0, 0};
  model::Rope(hp).apply(a.data(), 1, 1);  // normal: pair (0, 1)
  hp.rope_style = model::RopeStyle::NeoX;
  model::Rope(hp).apply(b.data(), 1, 1);  // neox: pair (0, 2)
  EXPECT_NEAR(a[0], std::cos(1.0f), 1e-6f);
  EXPECT_NEAR(a[1], std::sin(1.0f), 1e-6f);
  EXPECT_NEAR(b[0], std::cos(1.0f), 1e-6f);
  EXPECT_NEAR(b[2], std::sin(1.0f), 1e-6f);
  EXPECT_EQ(b[1], 0.0f);
}

namespace {

// Bytes of random blocks of `type` whose f16 scale fields hold small values,
// so every type can be checked at the model level without a quantizer.
// Offsets and sizes of the scale fields follow the block layouts in quant.h.
// Q6_K's step is d times an int8 sub-block scale (1..16 here), so its d is
// 16 times smaller: its steps stay in the range of the other types' d, and
// its weights (rms 0.015) about as large as a quantizer makes them for this
// shape (gen-model's Q6_K: rms 0.020).
std::vector<uint8_t> random_blocks(gguf::TensorType type, size_t n_blocks, uint32_t seed) {
  const auto info = *gguf::type_info(type);
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n_blocks * info.block_bytes);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  using T = gguf::TensorType;
  std::vector<size_t> scale_offsets;  // f16 fields within a block
  switch (type) {
    case T::Q4_1: case T::Q5_1: case T::Q4_K: case T::Q5_K: scale_offsets = {0, 2}; break;
    case T::Q5_0: scale_offsets = {0}; break;
    case T::Q6_K: scale_offsets = {208}; break;
    default: throw Error("random_blocks: no layout for this type");
  }
  // Scales ~ 2e-3 keep activations finite through the layers.
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = &bytes[b * info.block_bytes];
    for (size_t off : scale_offsets) {
      const float d = 0.5e-3f + 1.5e-3f * (rng() % 1000) / 1000.0f;
      const uint16_t h = f32_to_f16(type == T::Q6_K ? d / 16 : d);
      std::memcpy(block + off, &h, 2);
    }
    // Q6_K's 16 int8 sub-block scales (bytes 192..207): small, as a quantizer makes them.
    if (type == T::Q6_K)
      for (int i = 0; i < 16; ++i) block[192 + i] = static_cast<uint8_t>(1 + rng() % 16);
  }
  return bytes;
}

}  // namespace

// The weight types gen-model cannot write, and Q6_K on bits no quantizer
// chose: a tiny model whose matrices are random valid blocks of that type,
// fast path against the oracle (tolerance: test_fast_vs_reference.cpp).
// Q6_K was once left out, 3-15% off: its steps were 8.5 times the other
// types', and a random network with weights that large amplifies the int8
// rounding of activations that every quantized type has. The same weights
// as Q8_0 were as far off, as F32 not at all: nothing in Q6_K's decoding.
class BlockTypeModel : public ::testing::TestWithParam<gguf::TensorType> {};

TEST_P(BlockTypeModel, FastMatchesReference) {
  auto base = write_f32_model(*model::find_shape("tiny"), "base.gguf");
  const gguf::File f = gguf::File::open(base->path());
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) w.set(k, v);
  uint32_t seed = 1;
  for (const auto& t : f.tensors()) {
    const bool matrix = t.dims.size() == 2 && t.name != "token_embd.weight";
    if (!matrix) {
      w.add_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
      continue;
    }
    const auto info = *gguf::type_info(GetParam());
    w.add_tensor(t.name, t.dims, GetParam(), random_blocks(GetParam(), t.n_elems / info.block_elems, seed++));
  }
  const TempFile file(std::string(gguf::type_info(GetParam())->name) + ".gguf",
                      [&](const std::string& path) { w.write(path); });
  base.reset();
  const auto m = model::Model::load(file.path());
  EXPECT_EQ(m->weights().layers[0].wq.type, GetParam());
  expect_fast_matches_reference(*m, 10, 5);
}

INSTANTIATE_TEST_SUITE_P(Types, BlockTypeModel,
                         ::testing::Values(gguf::TensorType::Q4_1, gguf::TensorType::Q5_0, gguf::TensorType::Q5_1,
                                           gguf::TensorType::Q4_K, gguf::TensorType::Q5_K, gguf::TensorType::Q6_K),
                         [](const auto& info) { return std::string(gguf::type_info(info.param)->name); });
