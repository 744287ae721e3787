// Embeddings through the engine: the mean of the prompt's final hidden
// states, L2-normalized, as the scalar oracle computes it; the same vector
// alone, batched with completions, in chunks and after a preemption; every
// token computed (no prefix reuse) and no KV block kept.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "engine_harness.h"
#include "fake_instance.h"
#include "kernels/matmul.h"
#include "model/reference.h"
#include "test_models.h"

using namespace llmserve;
using namespace llmserve::engine;
using namespace llmserve::engine::testing;

namespace {

RequestParams embedding(std::vector<int32_t> prompt) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.embed = true;
  return p;
}

std::vector<float> normalized(const std::vector<double>& v) {
  double norm = 0;
  for (double x : v) norm += x * x;
  std::vector<float> out;
  for (double x : v) out.push_back(static_cast<float>(x / std::sqrt(norm)));
  return out;
}

// The oracle's final hidden states, one token at a time, pooled the same way.
std::vector<float> reference_embedding(const model::Model& m, const std::vector<int32_t>& tokens) {
  model::ReferenceModel ref(m);
  std::vector<double> sum(static_cast<size_t>(m.hparams().dim), 0.0);
  for (int32_t t : tokens) {
    ref.step(t);
    for (size_t d = 0; d < sum.size(); ++d) sum[d] += ref.hidden()[d];
  }
  return normalized(sum);
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float diff = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  return diff;
}

std::vector<float> embed_alone(Engine& engine, const std::vector<int32_t>& prompt) {
  const Result r = run_all(engine, {embedding(prompt)}).at(0);
  EXPECT_EQ(r.reason, FinishReason::Stop) << r.error;
  EXPECT_TRUE(r.tokens.empty());
  return r.embedding;
}

void expect_all_blocks_free(const Engine& engine) {
  const SchedulerMetrics m = engine.metrics().scheduler;
  EXPECT_EQ(m.blocks_free, m.blocks_total);
  EXPECT_EQ(m.running + m.waiting, 0);
}

model::InstanceConfig blocks(int kv_blocks) {
  model::InstanceConfig c;
  c.kv_blocks = kv_blocks;
  return c;
}

// The int8 activations of quantized weights (and f16's int16 prompt path)
// against the oracle's f32 arithmetic, on a unit vector.
float tolerance_for(gguf::TensorType t) {
  using T = gguf::TensorType;
  if (kernels::prompt_path(t) == kernels::PromptPath::int16) return 2e-3f;
  return (t == T::F32 || t == T::F16 || t == T::BF16) ? 1e-4f : 1e-2f;
}

class RealModel : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModel, EmbeddingMatchesTheReference) {
  REQUIRE_MODEL(path, GetParam());
  model::InstanceConfig c = blocks(64);
  c.kv_type = gguf::TensorType::F32;  // as the oracle's: only the kernels differ
  Served s(path, c);
  const float tol = tolerance_for(s.m().weights().layers[0].wq.type);
  const auto prompts = sixteen_prompts(s.tok());
  for (size_t i = 0; i < 4; ++i) {
    const std::vector<float> got = embed_alone(s.engine, prompts[i]);
    ASSERT_EQ(static_cast<int>(got.size()), s.engine.info().n_embd);
    double norm = 0;
    for (float x : got) norm += double(x) * x;
    EXPECT_NEAR(norm, 1.0, 1e-5);
    EXPECT_LE(max_abs_diff(got, reference_embedding(s.m(), prompts[i])), tol) << "prompt " << i;
  }
  expect_all_blocks_free(s.engine);
}

INSTANTIATE_TEST_SUITE_P(Models, RealModel, ::testing::Values("stories260K.gguf", "TinyStories-656K.f16.gguf"));

// Embeddings and completions in one engine's steps: each embedding is the
// vector it is alone, each completion the text it is alone.
TEST(Embedding, BatchedWithCompletionsGivesTheSameVectors) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path, blocks(512));
  const auto prompts = sixteen_prompts(s.tok());
  std::vector<RequestParams> requests;
  std::vector<std::vector<float>> alone_vectors;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (i % 2 == 0) {
      alone_vectors.push_back(embed_alone(s.engine, prompts[i]));
      requests.push_back(embedding(prompts[i]));
    } else {
      requests.push_back(greedy(prompts[i], 16));
    }
  }
  const auto results = run_all(s.engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_NE(results[i].reason, FinishReason::Error) << results[i].error;
    if (i % 2 == 0)
      EXPECT_LE(max_abs_diff(results[i].embedding, alone_vectors[i / 2]), 1e-6f) << "prompt " << i;
    else
      EXPECT_EQ(results[i].tokens, alone(s.m(), s.tok(), prompts[i], 16)) << "prompt " << i;
  }
  expect_all_blocks_free(s.engine);
}

// An input over several steps (chunks of 16 tokens) sums its chunks.
TEST(Embedding, ChunkedPrefillGivesTheSameVector) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  model::InstanceConfig chunked = blocks(64);
  chunked.max_batch_tokens = 16;
  Served whole(path, blocks(64)), parts(path, chunked, {.max_seqs = 16});
  std::vector<int32_t> prompt;
  for (const auto& p : sixteen_prompts(whole.tok())) prompt.insert(prompt.end(), p.begin(), p.end());
  prompt.resize(100);
  EXPECT_LE(max_abs_diff(embed_alone(parts.engine, prompt), embed_alone(whole.engine, prompt)), 1e-5f);
  EXPECT_EQ(parts.engine.metrics().scheduler.steps, 7u);  // 100 tokens in chunks of 16
  expect_all_blocks_free(parts.engine);
}

// The prefix cache holds the prompt (a completion computed it), yet the
// embedding computes every token; it leaves its blocks out of the cache, so
// the completion's prefix stays findable.
TEST(Embedding, ComputesEveryTokenAndLeavesTheCacheAlone) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path, blocks(64));
  std::vector<int32_t> prompt;
  for (const auto& p : sixteen_prompts(s.tok())) prompt.insert(prompt.end(), p.begin(), p.end());
  prompt.resize(48);
  run_all(s.engine, {greedy(prompt, 4)});
  const uint64_t hits = s.engine.metrics().scheduler.prefix_hit_tokens;
  const uint64_t scheduled = s.engine.metrics().scheduler.scheduled_tokens;
  embed_alone(s.engine, prompt);
  EXPECT_EQ(s.engine.metrics().scheduler.prefix_hit_tokens, hits);
  EXPECT_EQ(s.engine.metrics().scheduler.scheduled_tokens, scheduled + prompt.size());
  expect_all_blocks_free(s.engine);
  run_all(s.engine, {greedy(prompt, 4)});
  EXPECT_EQ(s.engine.metrics().scheduler.prefix_hit_tokens, hits + 32);  // the full blocks but the last
}

// No file: a prompt may fill the whole context (nothing is generated after
// it), not more; an embedding has one choice.
TEST(Embedding, AnInputMayFillTheContextButNotExceedIt) {
  model::InstanceConfig c = blocks(64);
  c.max_context = 40;
  Served s(synthetic_tiny(), c);
  std::vector<int32_t> prompt(40, 5);
  EXPECT_EQ(embed_alone(s.engine, prompt).size(), static_cast<size_t>(s.engine.info().n_embd));
  prompt.push_back(5);
  const Result over = run_all(s.engine, {embedding(prompt)}).at(0);
  EXPECT_EQ(over.reason, FinishReason::Error);
  EXPECT_NE(over.error.find("over the max context of 40"), std::string::npos) << over.error;
  EXPECT_TRUE(over.embedding.empty());
  RequestParams two = embedding({1, 2});
  two.n = 2;
  EXPECT_THROW(s.engine.submit(two, [](const RequestOutput&) {}), Error);
  expect_all_blocks_free(s.engine);
}

// The fake's hidden state of a row is {1, its token}: an embedding is
// normalized({tokens, their sum}). Long completions in a small pool preempt
// the newest sequences, embeddings among them, which start again from zero.
TEST(Embedding, PreemptedEmbeddingsStartAfresh) {
  FakeInstance fake(/*num_blocks=*/20, /*block_size=*/4, /*vocab=*/64, /*max_context=*/96, /*max_batch_tokens=*/8);
  Engine engine({&fake}, {.max_seqs = 6});
  std::vector<RequestParams> requests;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 9 + i % 5; ++t) prompt.push_back(1 + (t * 7 + i) % 63);
    if (i % 3 == 2) {
      requests.push_back(embedding(prompt));
    } else {
      requests.push_back(greedy(prompt, 20));
      requests.back().ignore_eos = true;
    }
  }
  const auto results = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!requests[i].embed) continue;
    double sum = 0;
    for (int32_t t : requests[i].prompt) sum += t;
    const auto expect = normalized({static_cast<double>(requests[i].prompt.size()), sum});
    EXPECT_LE(max_abs_diff(results[i].embedding, expect), 1e-6f) << "request " << i;
  }
  EXPECT_GT(engine.metrics().scheduler.preemptions, 0u);
  expect_all_blocks_free(engine);
}

}  // namespace
