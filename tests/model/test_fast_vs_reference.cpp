// The fast forward pass (batched prefill, then decode) against the scalar
// oracle, logits at every position. Tolerance: max |fast - ref| relative to
// the largest |ref| logit: 1e-4 for float weights (only summation order
// differs, or the AMX-BF16 prompt path's bf16 parts), 3e-2 for quantized
// weights, where the fast path also quantizes activations to int8 per
// 32-block. That rounding is its only difference from the oracle (the
// weights' codes are used exactly: kernels/matmul_test.cpp): a step of
// amax/127, rms error amax/(127 sqrt(12)), about 0.5% of the rms of a block
// of 32 Gaussian-like values (amax ~2.2 rms), per matmul. Over the tiny
// models' layers it comes to 1-2% of the largest logit for every quantized
// type alike (Q8_0 1.3%, Q4_0 1.4%, Q4_K 1.4%, Q6_K 1.6%, Q4_K_M 1.4% from
// gen-model; random Q6_K blocks, test_architectures.cpp, 1.4-2.0%, the same
// weights as Q8_0 1.3-2.0%), so 3e-2 leaves 1.5x. f16 and bf16 weights where prompt tokens take the int16 path
// (kernels/matmul.h: PromptPath), weights and activations in 13-bit codes
// per 32-block: 2e-3, for the tokens after the prompt too, which attend to
// its keys and values (0.2-0.5e-3 at prompt positions and up to 0.2e-3
// after them, measured on the models here).
#include <gtest/gtest.h>

#include <cmath>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/runner.h"
#include "model/reference.h"
#include "model/synthetic.h"
#include "test_models.h"

using namespace llmserve;

namespace {

float tolerance_for(gguf::TensorType t) {
  using T = gguf::TensorType;
  if (kernels::prompt_path(t) == kernels::PromptPath::int16) return 2e-3f;
  return (t == T::F32 || t == T::F16 || t == T::BF16) ? 1e-4f : 3e-2f;
}

// Relative max difference between one row of fast logits and the oracle's.
float relative_error(std::span<const float> fast, const std::vector<float>& ref) {
  float diff = 0.0f, scale = 1e-6f;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(fast[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return diff / scale;
}

}  // namespace

void expect_fast_matches_reference(const model::Model& m, int n_prompt, int n_decode, int n_ctx = 256) {
  const size_t vocab = static_cast<size_t>(m.hparams().n_vocab);
  std::vector<int32_t> tokens;
  for (int i = 0; i < n_prompt + n_decode; ++i) tokens.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  const float tol = tolerance_for(m.weights().layers[0].wq.type);

  ThreadPool pool(2);
  // f32 KV so only the kernels differ; max_tokens 7: the prompt crosses chunk boundaries.
  model::SequenceRunner fast(m, pool, n_ctx, gguf::TensorType::F32, /*max_tokens=*/7);
  model::ReferenceModel ref(m);
  const auto prompt = fast.eval({tokens.data(), static_cast<size_t>(n_prompt)}, model::Logits::All);
  const std::vector<float> prompt_logits(prompt.begin(), prompt.end());
  for (int i = 0; i < n_prompt; ++i) {
    const auto expect = ref.step(tokens[i]);
    EXPECT_LE(relative_error({&prompt_logits[i * vocab], vocab}, expect), tol) << "prompt position " << i;
  }
  for (int i = n_prompt; i < n_prompt + n_decode; ++i) {
    const auto got = fast.decode(tokens[i]);
    EXPECT_LE(relative_error(got, ref.step(tokens[i])), tol) << "decode position " << i;
  }
}

class RealModel : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModel, FastMatchesReference) {
  REQUIRE_MODEL(path, GetParam());
  const auto m = model::Model::load(path);
  expect_fast_matches_reference(*m, 20, 8);
}

INSTANTIATE_TEST_SUITE_P(SharedModels, RealModel,
                         ::testing::Values("stories260K.gguf", "TinyStories-656K.f16.gguf",
                                           "tinystories-656k-q8_0.gguf", "llama-2-tiny-random.gguf"));

// Synthetic tiny models in every type gen-model writes.
class SyntheticModel : public ::testing::TestWithParam<gguf::TensorType> {};

TEST_P(SyntheticModel, FastMatchesReference) {
  model::SyntheticSpec spec;
  spec.shape = *model::find_shape("tiny");
  spec.type = GetParam();
  spec.seed = 3;
  const llmserve::testing::TempFile file("synthetic-" + std::string(gguf::type_info(spec.type)->name) + ".gguf",
                                        [&](const std::string& path) { model::write_synthetic_model(spec, path); });
  const auto m = model::Model::load(file.path());
  expect_fast_matches_reference(*m, 12, 6);
}

INSTANTIATE_TEST_SUITE_P(Types, SyntheticModel,
                         ::testing::Values(gguf::TensorType::F32, gguf::TensorType::F16, gguf::TensorType::BF16,
                                           gguf::TensorType::Q8_0, gguf::TensorType::Q4_0, gguf::TensorType::Q4_K,
                                           gguf::TensorType::Q6_K),
                         [](const auto& info) { return std::string(gguf::type_info(info.param)->name); });

// llama.cpp's Q4_K_M mix (Q4_K, Q6_K for output.weight, attn_v and ffn_down
// in some layers): a benchmark target's types together in one model.
TEST(SyntheticModelQ4_K_M, FastMatchesReference) {
  model::SyntheticSpec spec;
  spec.shape = *model::find_shape("tiny");
  spec.q4_k_m = true;
  spec.seed = 3;
  const llmserve::testing::TempFile file("synthetic-q4_k_m.gguf",
                                        [&](const std::string& path) { model::write_synthetic_model(spec, path); });
  const auto m = model::Model::load(file.path());
  EXPECT_EQ(m->weights().output.type, gguf::TensorType::Q6_K);
  expect_fast_matches_reference(*m, 12, 6);
}

// Decode past 512 tokens of context: on 2 threads the tiny shape's 4 KV heads
// are too few attention items, so each is split in 2 over its keys and the
// parts merged (kernels::AttentionJob), a step of its own in the runner.
TEST(SyntheticModelLongContext, SplitDecodeAttentionMatchesReference) {
  model::SyntheticSpec spec;
  spec.shape = *model::find_shape("tiny");
  spec.type = gguf::TensorType::F32;
  spec.seed = 4;
  const llmserve::testing::TempFile file("synthetic-long.gguf",
                                        [&](const std::string& path) { model::write_synthetic_model(spec, path); });
  const auto m = model::Model::load(file.path());
  expect_fast_matches_reference(*m, 516, 4, 1024);
}
