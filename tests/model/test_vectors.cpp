// Both forward paths against float64 test vectors computed outside this
// project (see ../shared/models/README.md): token ids must match exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <span>

#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "kernels/cpu.h"
#include "kernels/kernel_test_util.h"
#include "model/reference.h"
#include "model/runner.h"
#include "vectors.h"

using llmserve::ThreadPool;
using llmserve::engine::argmax;
using llmserve::model::SequenceRunner;
using llmserve::model::Logits;
using llmserve::gguf::TensorType;
using llmserve::model::Model;
using llmserve::model::ReferenceModel;

namespace {

float max_abs_diff(std::span<const float> a, const nlohmann::json& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0.0f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(a[i] - b[i].get<float>()));
  return d;
}

// Greedy decoding from BOS, llama2.c style: stop when BOS (or `stop`) is produced.
template <typename StepFn>
std::vector<int> greedy_from_bos(StepFn step, int bos, int steps, int stop) {
  std::vector<int> out;
  int token = bos;
  for (int i = 0; i < steps; ++i) {
    const auto logits = step(token);
    token = argmax(logits);
    out.push_back(token);
    if (token == bos || token == stop) break;
  }
  return out;
}

// One step of the fast path, in the shape greedy_from_bos wants.
auto fast_step(SequenceRunner& fwd) {
  return [&fwd](int t) {
    const int32_t tok = t;
    const auto l = fwd.decode(tok);
    return std::vector<float>(l.begin(), l.end());
  };
}

// Greedy decoding after a prompt: the argmax of the prompt's last logits,
// then of each decode step's, until `n` ids.
std::vector<int> greedy_continuation(SequenceRunner& fwd, std::span<const float> prompt_logits, size_t n) {
  std::vector<int> out;
  for (std::span<const float> logits = prompt_logits; out.size() < n; logits = fwd.decode(out.back()))
    out.push_back(argmax(logits));
  return out;
}

}  // namespace

TEST(Stories260K, ReferenceMatchesVectors) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("stories260K.testvectors.json"));
  const auto model = Model::load(path);
  ReferenceModel ref(*model);
  const std::vector<float> logits0 = ref.step(1);
  EXPECT_LT(max_abs_diff(logits0, vec["logits_after_bos_pos0"]), 1e-4f);

  ReferenceModel fresh(*model);
  const auto ids = greedy_from_bos([&](int t) { return fresh.step(t); }, 1, 256, -1);
  EXPECT_EQ(ids, vec["greedy_ids"].get<std::vector<int>>());
}

TEST(Stories260K, FastPathMatchesVectors) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("stories260K.testvectors.json"));
  const auto model = Model::load(path);
  ThreadPool pool(2);
  SequenceRunner fwd(*model, pool, 512, TensorType::F32);  // f32 KV: the vectors are exact
  const int32_t bos = 1;
  EXPECT_LT(max_abs_diff(fwd.eval({&bos, 1}), vec["logits_after_bos_pos0"]), 1e-4f);

  fwd.reset();
  const auto ids = greedy_from_bos(fast_step(fwd), 1, 256, -1);
  EXPECT_EQ(ids, vec["greedy_ids"].get<std::vector<int>>());
}

TEST(Stories260K, PromptThenGreedyContinuation) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("stories260K.testvectors.json"));
  const auto& pt = vec["prompt_test"];
  const auto model = Model::load(path);
  ThreadPool pool(2);
  SequenceRunner fwd(*model, pool, 512, TensorType::F32);  // f32 KV: the vectors are exact
  std::vector<int32_t> prompt{1};
  for (int id : pt["prompt_ids"]) prompt.push_back(id);
  auto logits = fwd.eval(prompt);  // the whole prompt in one batched pass
  EXPECT_LT(max_abs_diff(logits, pt["logits_after_last_prompt_token"]), 1e-4f);
  std::vector<int> cont;
  for (size_t i = 0; i < pt["greedy_continuation_ids_64"].size(); ++i) {
    const int32_t t = argmax(logits);
    cont.push_back(t);
    logits = fwd.decode(t);
  }
  EXPECT_EQ(cont, pt["greedy_continuation_ids_64"].get<std::vector<int>>());
}

TEST(TinyStories656K, F16MatchesF32Vectors) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("TinyStories-656K.testvectors.json"));
  const auto model = Model::load(path);
  ThreadPool pool(2);
  SequenceRunner fwd(*model, pool, 512, TensorType::F32);  // f32 KV: the vectors are exact
  // As a generated token, on the f32 path on every CPU (a prompt token's
  // path depends on the CPU: test_fast_vs_reference.cpp).
  EXPECT_LT(max_abs_diff(fwd.decode(1), vec["logits_after_bos_pos0_f32"]), 1e-4f);
  fwd.reset();
  const auto ids = greedy_from_bos(fast_step(fwd), 1, 128, 2);
  EXPECT_EQ(ids, vec["greedy_ids_f32_and_f16"].get<std::vector<int>>());
}

TEST(TinyStories656K, Q8_0MatchesVectors) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("TinyStories-656K.testvectors.json"));
  const auto model = Model::load(path);
  // The oracle decodes Q8_0 weights exactly, as the float64 vectors did.
  ReferenceModel ref(*model);
  EXPECT_LT(max_abs_diff(ref.step(1), vec["logits_after_bos_pos0_q8_0"]), 1e-4f);
  ReferenceModel fresh(*model);
  const auto ids = greedy_from_bos([&](int t) { return fresh.step(t); }, 1, 128, 2);
  EXPECT_EQ(ids, vec["greedy_ids_q8_0"].get<std::vector<int>>());
}

TEST(TinyStories656K, Q8_0FastPathFollowsTheGreedyVectors) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("TinyStories-656K.testvectors.json"));
  const auto model = Model::load(path);
  ThreadPool pool(2);
  SequenceRunner fwd(*model, pool, 512, TensorType::F32);
  const auto ids = greedy_from_bos(fast_step(fwd), 1, 128, 2);
  const auto expect = vec["greedy_ids_q8_0"].get<std::vector<int>>();
  // The fast path also rounds activations to int8 per 32-block, yet it
  // follows the float64 greedy sequence of the dequantized weights to the end.
  EXPECT_EQ(ids, expect);
}

// The vectors' own greedy ids as a prompt: its tokens take the prompt path
// and the continuation the decode path, at prefix lengths from one token to
// most of the sequence. Where the CPU has AMX, a prompt's whole groups of
// 16 tokens go through AMX-INT8 tiles (kernels/matmul.h), which must give
// the VNNI kernels' logits bit for bit; either way the continuation must be
// the vectors' ids. (An AMX-BF16 prompt path, since replaced, rounded the
// activations to bf16: closer to the float64 oracle, yet it left the
// vectors at near-ties of the oracle, top-2 gaps 0.028 and 0.063, which the
// vectors' int8 rounding decides.)
TEST(TinyStories656K, Q8_0PromptOfTheVectorsContinuesThem) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("TinyStories-656K.testvectors.json"));
  const auto model = Model::load(path);
  ThreadPool pool(2);
  const auto expect = vec["greedy_ids_q8_0"].get<std::vector<int>>();
  ASSERT_GT(expect.size(), 96u) << "the vectors' greedy sequence is shorter than the longest prompt";
  for (size_t split : {1, 8, 15, 32, 96}) {
    std::vector<int32_t> prompt{1};
    prompt.insert(prompt.end(), expect.begin(), expect.begin() + split);
    std::vector<float> vnni_logits;
    for (bool amx : {false, true}) {
      if (amx && !llmserve::kernels::amx_detected()) continue;
      const llmserve::testing::AmxGuard guard(amx);
      SequenceRunner fwd(*model, pool, 512, TensorType::F32);
      const auto logits = fwd.eval(prompt);
      const std::vector<float> prompt_logits(logits.begin(), logits.end());
      if (amx) EXPECT_EQ(prompt_logits, vnni_logits) << "prompt of " << split << " ids: AMX-INT8 and VNNI differ";
      else vnni_logits = prompt_logits;
      EXPECT_EQ(greedy_continuation(fwd, prompt_logits, expect.size() - split),
                std::vector<int>(expect.begin() + split, expect.end()))
          << "prompt of " << split << " ids, amx " << amx;
    }
  }
}

// The f16 model's greedy ids as a prompt must continue with the vectors'
// ids exactly on every prompt path this CPU has (kernels/matmul.h:
// PromptPath): AMX-BF16 tiles (weights and activations in two bf16 parts
// each, about as accurate as f32) where AMX is on; with it off, or
// without AMX, int16 codes on AVX-512 (13 bits per 32-block), f32 below.
TEST(TinyStories656K, F16PromptOfTheVectorsContinuesThem) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  const auto vec = load_vectors(llmserve::testing::model_path("TinyStories-656K.testvectors.json"));
  const auto model = Model::load(path);
  ThreadPool pool(2);
  const auto expect = vec["greedy_ids_f32_and_f16"].get<std::vector<int>>();
  ASSERT_GT(expect.size(), 96u) << "the vectors' greedy sequence is shorter than the longest prompt";
  for (bool amx : {false, true}) {
    if (amx && !llmserve::kernels::amx_detected()) continue;
    const llmserve::testing::AmxGuard guard(amx);
    for (size_t split : {1, 8, 32, 96}) {
      SequenceRunner fwd(*model, pool, 512, TensorType::F32);
      std::vector<int32_t> prompt{1};
      prompt.insert(prompt.end(), expect.begin(), expect.begin() + split);
      EXPECT_EQ(greedy_continuation(fwd, fwd.eval(prompt), expect.size() - split),
                std::vector<int>(expect.begin() + split, expect.end()))
          << "prompt of " << split << " ids, amx " << amx;
    }
  }
}
