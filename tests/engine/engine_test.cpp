// The engine end to end on real and synthetic models: batched greedy output
// equals each prompt run alone, also with prefix-cache hits, preemption and
// chunked prefill; no KV block leaks; bad requests fail alone.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "model/runner.h"
#include "model/synthetic.h"
#include "test_models.h"

using namespace llmserve;
using engine::Engine;
using engine::EngineConfig;
using engine::FinishReason;
using engine::RequestOutput;
using engine::RequestParams;

namespace {

struct Result {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::None;
  std::string error;
};

// Submits all requests at once and waits for all of them.
std::vector<Result> run_all(Engine& engine, const std::vector<RequestParams>& requests) {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, size_t> index;
  std::vector<Result> results(requests.size());
  size_t done = 0;
  {
    std::unique_lock lock(mu);  // callbacks wait until every id is known
    for (size_t i = 0; i < requests.size(); ++i) {
      const uint64_t id = engine.submit(requests[i], [&](const RequestOutput& out) {
        std::lock_guard l(mu);
        Result& r = results[index.at(out.id)];
        for (const auto& t : out.tokens) r.tokens.push_back(t.token);
        if (out.finished) {
          r.reason = out.finish_reason;
          r.error = out.error;
          ++done;
          cv.notify_all();
        }
      });
      index[id] = i;
    }
    cv.wait(lock, [&] { return done == requests.size(); });
  }
  return results;
}

RequestParams greedy(std::vector<int32_t> prompt, int n) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.sampling.temperature = 0.0f;
  p.max_new_tokens = n;
  return p;
}

// The same prompt through the single-sequence path, greedily, stopping where the engine would.
std::vector<int32_t> alone(const model::Model& m, const tok::Tokenizer& tok, const std::vector<int32_t>& prompt, int n) {
  ThreadPool pool(2);
  model::SequenceRunner runner(m, pool, static_cast<int>(prompt.size()) + n, gguf::TensorType::F16);
  std::vector<int32_t> out;
  auto logits = runner.eval(prompt);
  for (int i = 0; i < n; ++i) {
    const int32_t t = engine::argmax(logits);
    if (tok.is_end_of_generation(t)) break;
    out.push_back(t);
    if (i + 1 < n) logits = runner.decode(t);
  }
  return out;
}

std::vector<std::vector<int32_t>> sixteen_prompts(const tok::Tokenizer& tok) {
  const char* texts[] = {"Once upon a time", "Lily and Tom went to the zoo.", "The cat sat on the mat.",
                         "One day, a little boy", "The sun was shining", "Tim had a red ball",
                         "Sue liked to sing", "There was a big dog", "Mom said", "The bird flew",
                         "Once upon a time, there was a girl", "Ben and his dad", "It was a cold day",
                         "The little fish", "Anna found a box", "Once upon a time, in a small town"};
  std::vector<std::vector<int32_t>> prompts;
  for (const char* t : texts) prompts.push_back(tok.encode(t, true));
  return prompts;
}

void expect_batched_equals_alone(EngineConfig config, int n_new) {
  Engine engine(config);
  const auto prompts = sixteen_prompts(engine.tokenizer());
  std::vector<RequestParams> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, n_new));
  const auto results = run_all(engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(results[i].tokens, alone(engine.model(), engine.tokenizer(), prompts[i], n_new)) << "prompt " << i;
    EXPECT_NE(results[i].reason, FinishReason::Error) << results[i].error;
  }
  // Every block is back in the pool once all requests are done.
  const auto m = engine.metrics().scheduler;
  EXPECT_EQ(m.blocks_free, m.blocks_total);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.waiting, 0);
}

// The settings the tests share; they vary only the model and the KV pool size.
EngineConfig test_config(const std::string& model_path, int kv_blocks) {
  EngineConfig c;
  c.model_path = model_path;
  c.threads = 2;
  c.kv_blocks = kv_blocks;
  return c;
}

std::string synthetic_tiny() {
  static const llmserve::testing::TempFile file("engine-test.gguf", [](const std::string& p) {
    model::SyntheticSpec spec;
    spec.shape = *model::find_shape("tiny");
    spec.type = gguf::TensorType::Q8_0;
    spec.seed = 11;
    model::write_synthetic_model(spec, p);
  });
  return file.path();
}

}  // namespace

TEST(Engine, SixteenPromptsBatchedEqualAloneStories260K) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  expect_batched_equals_alone(test_config(path, 512), 40);
}

// f16 weights: prompt tokens take the matmuls' prompt path where the CPU
// has one (AMX-BF16 tiles or int16 codes, kernels/matmul.h), generated
// ones the f32 path, batched or alone.
TEST(Engine, SixteenPromptsBatchedEqualAloneF16) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  expect_batched_equals_alone(test_config(path, 512), 24);
}

TEST(Engine, SixteenPromptsBatchedEqualAloneSynthetic) {
  expect_batched_equals_alone(test_config(synthetic_tiny(), 256), 24);
}

TEST(Engine, ChunkedPrefillAndPreemptionKeepOutputs) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  // 16 prompts of ~60 tokens cannot all hold KV in 12 blocks at once: preemption.
  EngineConfig c = test_config(path, 12);
  c.max_batch_tokens = 16;  // prompts are split into chunks; few sequences per step
  c.max_seqs = 8;
  c.block_size = 8;
  Engine engine(c);
  const auto prompts = sixteen_prompts(engine.tokenizer());
  std::vector<RequestParams> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, 48));
  const auto results = run_all(engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(results[i].tokens, alone(engine.model(), engine.tokenizer(), prompts[i], 48)) << "prompt " << i;
  const auto m = engine.metrics().scheduler;
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}

TEST(Engine, PrefixCacheHitsKeepOutputs) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Engine engine(test_config(path, 256));
  // A long shared opening, then different endings; run twice so the second round hits the cache.
  const auto shared = engine.tokenizer().encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day,", true);
  std::vector<RequestParams> requests;
  for (const char* end : {" she saw", " her mom", " a dog", " it rained"}) {
    auto p = shared;
    for (int32_t t : engine.tokenizer().encode(end, false)) p.push_back(t);
    requests.push_back(greedy(p, 20));
  }
  const auto first = run_all(engine, requests);
  const auto second = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto expect = alone(engine.model(), engine.tokenizer(), requests[i].prompt, 20);
    EXPECT_EQ(first[i].tokens, expect);
    EXPECT_EQ(second[i].tokens, expect);
  }
  const auto m = engine.metrics().scheduler;
  EXPECT_GT(m.prefix_hit_tokens, 4u * 16u);
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}

TEST(Engine, OversizedPromptFailsAloneOthersFinish) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Engine engine(test_config(path, 8));  // 8 blocks: 128 positions in the whole pool
  std::vector<RequestParams> requests{greedy(std::vector<int32_t>(300, 1), 4), greedy({1, 403, 407}, 8)};
  const auto results = run_all(engine, requests);
  EXPECT_EQ(results[0].reason, FinishReason::Error);
  EXPECT_FALSE(results[0].error.empty());
  EXPECT_EQ(results[1].tokens.size(), 8u);
  EXPECT_EQ(results[1].reason, FinishReason::Length);
}

TEST(Engine, CancelFreesBlocks) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  // 256 blocks: room for the whole context, so a request without a token limit fits.
  Engine engine(test_config(path, 256));
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  int got = 0;
  FinishReason reason = FinishReason::None;
  uint64_t id = 0;
  id = engine.submit(greedy({1, 403}, 0), [&](const RequestOutput& out) {
    std::lock_guard l(mu);
    got += static_cast<int>(out.tokens.size());
    if (out.finished) {
      finished = true;
      reason = out.finish_reason;
    }
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return got >= 5 || finished; });
    ASSERT_FALSE(finished) << "the request ended before it could be cancelled";
  }
  engine.cancel(id);
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return finished; });
  EXPECT_EQ(reason, FinishReason::Cancelled);
  lock.unlock();
  const auto m = engine.metrics().scheduler;
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}
