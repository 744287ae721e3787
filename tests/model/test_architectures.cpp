// Architecture variants no shared test model covers: qwen2 (QKV bias, NeoX
// RoPE) built from a synthetic llama model, and RoPE scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/writer.h"
#include "model/model.h"
#include "model/reference.h"
#include "model/rope.h"
#include "model/runner.h"
#include "model/synthetic.h"

using namespace llmserve;

void expect_fast_matches_reference(const model::Model& m, int n_prompt, int n_decode);  // test_fast_vs_reference.cpp

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("llmserve-arch-test-" + std::to_string(getpid()) + "-" + name))
      .string();
}

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

// A qwen2 model: the synthetic llama weights with qwen2 keys, plus Q/K/V biases.
std::string write_qwen2(bool with_biases) {
  model::SyntheticSpec spec;
  spec.shape = *model::find_shape("tiny");
  spec.type = gguf::TensorType::F32;
  const std::string llama = temp_path("llama.gguf");
  model::write_synthetic_model(spec, llama);
  const gguf::File f = gguf::File::open(llama);
  gguf::Writer w;
  for (const auto& [k, v] : f.metadata()) {
    if (k == "general.architecture") w.set(k, gguf::make_string("qwen2"));
    else if (k.starts_with("llama.")) w.set("qwen2." + k.substr(6), v);
    else w.set(k, v);
  }
  for (const auto& t : f.tensors()) w.add_tensor(t.name, t.dims, t.type, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  const uint64_t q_dim = spec.shape.dim, kv_dim = spec.shape.kv_dim();
  for (int l = 0; with_biases && l < spec.shape.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.add_tensor(p + "attn_q.bias", {q_dim}, gguf::TensorType::F32, random_f32_bytes(q_dim, 10 + l));
    w.add_tensor(p + "attn_k.bias", {kv_dim}, gguf::TensorType::F32, random_f32_bytes(kv_dim, 20 + l));
    w.add_tensor(p + "attn_v.bias", {kv_dim}, gguf::TensorType::F32, random_f32_bytes(kv_dim, 30 + l));
  }
  const std::string out = temp_path(with_biases ? "qwen2.gguf" : "qwen2-nobias.gguf");
  w.write(out);
  std::filesystem::remove(llama);
  return out;
}

}  // namespace

TEST(Qwen2, BiasesAndNeoxRopeFastMatchesReference) {
  const std::string path = write_qwen2(true);
  const auto m = model::Model::load(path);
  EXPECT_TRUE(m->hparams().qkv_bias);
  EXPECT_EQ(m->hparams().rope_style, model::RopeStyle::NeoX);
  expect_fast_matches_reference(*m, 10, 5);
  std::filesystem::remove(path);
}

TEST(Qwen2, MissingBiasesAreListed) {
  const std::string path = write_qwen2(false);
  try {
    model::Model::load(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor blk.0.attn_q.bias"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
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
