// The engine end to end on real, synthetic and fake models: batched greedy
// output equals each prompt run alone, also with prefix-cache hits (of
// generated blocks too), preemption, chunked prefill, n choices forked from
// one prompt and two models in one engine, neither starving the other; the
// next-token entropy and margin the router reads; no KV block leaks; bad
// requests fail alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/next_token_stats.h"
#include "model/runner.h"
#include "model/synthetic.h"
#include "engine_harness.h"
#include "fake_instance.h"
#include "test_models.h"

using namespace llmserve;
using engine::Engine;
using engine::EngineConfig;
using model::InstanceConfig;
using engine::FinishReason;
using engine::RequestOutput;
using engine::RequestParams;
using namespace llmserve::engine::testing;

namespace {

void expect_batched_equals_alone(const std::string& path, const InstanceConfig& config, int n_new) {
  Served s(path, config);
  const auto prompts = sixteen_prompts(s.tok());
  std::vector<RequestParams> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, n_new));
  const auto results = run_all(s.engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(results[i].tokens, alone(s.m(), s.tok(), prompts[i], n_new)) << "prompt " << i;
    EXPECT_NE(results[i].reason, FinishReason::Error) << results[i].error;
  }
  // Every block is back in the pool once all requests are done.
  const auto m = s.engine.metrics().scheduler;
  EXPECT_EQ(m.blocks_free, m.blocks_total);
  EXPECT_EQ(m.running, 0);
  EXPECT_EQ(m.waiting, 0);
}

// The settings the tests share; they vary only the KV pool size.
InstanceConfig test_config(int kv_blocks) {
  InstanceConfig c;
  c.kv_blocks = kv_blocks;
  return c;
}

}  // namespace

TEST(Engine, SixteenPromptsBatchedEqualAloneStories260K) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  expect_batched_equals_alone(path, test_config(512), 40);
}

// f16 weights: prompt tokens take the matmuls' prompt path where the CPU
// has one (AMX-BF16 tiles or int16 codes, kernels/matmul.h), generated
// ones the f32 path, batched or alone.
TEST(Engine, SixteenPromptsBatchedEqualAloneF16) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  expect_batched_equals_alone(path, test_config(512), 24);
}

TEST(Engine, SixteenPromptsBatchedEqualAloneSynthetic) {
  expect_batched_equals_alone(synthetic_tiny(), test_config(256), 24);
}

TEST(Engine, ChunkedPrefillAndPreemptionKeepOutputs) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  // 16 prompts of ~60 tokens cannot all hold KV in 12 blocks at once: preemption.
  InstanceConfig c = test_config(12);
  c.max_batch_tokens = 16;  // prompts are split into chunks; few sequences per step
  c.block_size = 8;
  Served s(path, c, {.max_seqs = 8});
  const auto prompts = sixteen_prompts(s.tok());
  std::vector<RequestParams> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, 48));
  const auto results = run_all(s.engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(results[i].tokens, alone(s.m(), s.tok(), prompts[i], 48)) << "prompt " << i;
  const auto m = s.engine.metrics().scheduler;
  EXPECT_GT(m.preemptions, 0u);
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}

TEST(Engine, PrefixCacheHitsKeepOutputs) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path, test_config(256));
  Engine& engine = s.engine;
  // A long shared opening, then different endings; run twice so the second round hits the cache.
  const auto shared = s.tok().encode(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day,", true);
  std::vector<RequestParams> requests;
  for (const char* end : {" she saw", " her mom", " a dog", " it rained"}) {
    auto p = shared;
    for (int32_t t : s.tok().encode(end, false)) p.push_back(t);
    requests.push_back(greedy(p, 20));
  }
  const auto first = run_all(engine, requests);
  const auto second = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto expect = alone(s.m(), s.tok(), requests[i].prompt, 20);
    EXPECT_EQ(first[i].tokens, expect);
    EXPECT_EQ(second[i].tokens, expect);
  }
  const auto m = engine.metrics().scheduler;
  EXPECT_GT(m.prefix_hit_tokens, 4u * 16u);
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}

TEST(Engine, OversizedPromptFailsAloneOthersFinish) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path, test_config(8));  // 8 blocks: 128 positions in the whole pool
  Engine& engine = s.engine;
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
  Served s(path, test_config(256));
  Engine& engine = s.engine;
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

namespace {

// All choices of one request with n > 1, in choice order.
std::vector<Result> run_choices(Engine& engine, const RequestParams& request) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Result> results(static_cast<size_t>(request.n));
  int done = 0;
  uint64_t first = 0;
  {
    std::unique_lock lock(mu);
    first = engine.submit(request, [&](const RequestOutput& out) {
      std::lock_guard l(mu);
      EXPECT_EQ(out.id, first + static_cast<uint64_t>(out.index));
      if (results.at(static_cast<size_t>(out.index)).take(out)) {
        ++done;
        cv.notify_all();
      }
    });
    cv.wait(lock, [&] { return done == request.n; });
  }
  return results;
}

}  // namespace

// No file: the engine over a fake instance, with prompts that share
// prefixes, chunked prefill and a pool small enough to preempt.
TEST(Engine, FakeModelRequestsEqualTheirSoloRuns) {
  engine::testing::FakeInstance fake(/*num_blocks=*/24, /*block_size=*/4, /*vocab=*/64, /*max_context=*/96,
                                     /*max_batch_tokens=*/16);
  Engine engine({&fake}, {.max_seqs = 6});
  std::vector<RequestParams> requests;
  for (int i = 0; i < 24; ++i) {
    std::vector<int32_t> prompt;
    for (int t = 0; t < 10 + i % 7; ++t) prompt.push_back(1 + (i % 3 == 0 ? t : (t * 7 + i) % 63));
    requests.push_back(greedy(prompt, 12));
  }
  const auto results = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t> history = requests[i].prompt, expect;
    for (int k = 0; k < 12; ++k) {
      const int32_t t = fake.model().reference(history);
      if (t == 0) break;  // the fake's end of generation
      expect.push_back(t);
      history.push_back(t);
    }
    EXPECT_EQ(results[i].tokens, expect) << "request " << i;
  }
  const auto m = engine.metrics().scheduler;
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}

// Two models, one thread pool, one engine: requests for either, submitted
// together, give what each model gives alone.
TEST(Engine, TwoModelsShareOneEngine) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(f16, "TinyStories-656K.f16.gguf");
  ThreadPool pool(2);
  const auto a = model::LoadedModel::load(small, pool, test_config(256));
  const auto b = model::LoadedModel::load(f16, pool, test_config(256));
  Engine engine({a.get(), b.get()});
  EXPECT_EQ(engine.num_models(), 2);
  std::vector<RequestParams> requests;
  const auto prompts_a = sixteen_prompts(a->tokenizer()), prompts_b = sixteen_prompts(b->tokenizer());
  for (size_t i = 0; i < 8; ++i) {
    requests.push_back(greedy(prompts_a[i], 16));
    requests.push_back(greedy(prompts_b[i], 16));
    requests.back().model = 1;
  }
  const auto results = run_all(engine, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const model::LoadedModel& m = requests[i].model == 0 ? *a : *b;
    EXPECT_EQ(results[i].tokens, alone(m.model(), m.tokenizer(), requests[i].prompt, 16)) << "request " << i;
  }
  for (int m = 0; m < 2; ++m) {
    const auto metrics = engine.metrics(m);
    EXPECT_EQ(metrics.requests_submitted, 8u);
    EXPECT_EQ(metrics.scheduler.blocks_free, metrics.scheduler.blocks_total);
  }
  RequestParams bad = greedy(prompts_a[0], 4);
  bad.model = 2;
  EXPECT_THROW(engine.submit(bad, [](const RequestOutput&) {}), Error);
}

// One model flooded with long requests does not hold back another: the
// engine steps each model with work in turn, so a short request to the
// second model finishes while the first has run about as many steps.
TEST(Engine, AFloodedModelDoesNotStarveAnother) {
  struct Progress {
    std::mutex mu;
    std::condition_variable cv;
    int flood_tokens = 0, flood_finished = 0;
    bool other_submitted = false, other_finished = false;
    int other_tokens = 0, flood_tokens_before = 0, flood_tokens_then = 0, flood_finished_then = 0;
  } progress;
  engine::testing::FakeInstance flooded(256, 4, 64, 96, 16), other(64, 4, 64, 96, 16);
  const int max_seqs = 4, flood = 32, flood_len = 80;
  Engine engine({&flooded, &other}, {.max_seqs = max_seqs});
  RequestParams o = greedy({9, 8, 7, 6, 5, 4, 3, 2}, 16);
  o.ignore_eos = true;
  o.model = 1;
  auto on_other = [&](const RequestOutput& out) {
    std::lock_guard lock(progress.mu);
    progress.other_tokens += static_cast<int>(out.tokens.size());
    if (!out.finished) return;
    progress.other_finished = true;
    progress.flood_tokens_then = progress.flood_tokens;
    progress.flood_finished_then = progress.flood_finished;
    progress.cv.notify_all();
  };
  // The other model's request is submitted from the flood's first tokens'
  // callback (on the engine thread), so the count starts without a race.
  for (int i = 0; i < flood; ++i) {
    RequestParams p = greedy({1, 2, 3, 4, 5, 6, 7, static_cast<int32_t>(8 + i)}, flood_len);
    p.ignore_eos = true;
    engine.submit(p, [&](const RequestOutput& out) {
      std::lock_guard lock(progress.mu);
      progress.flood_tokens += static_cast<int>(out.tokens.size());
      progress.flood_finished += out.finished;
      if (progress.flood_tokens > 0 && !progress.other_submitted) {
        progress.other_submitted = true;
        progress.flood_tokens_before = progress.flood_tokens;
        engine.submit(o, on_other);
      }
    });
  }
  std::unique_lock lock(progress.mu);
  progress.cv.wait(lock, [&] { return progress.other_finished; });
  EXPECT_EQ(progress.other_tokens, 16);
  // One flood step per step of the other model, plus the step under way
  // when it was submitted and the one before its request was taken in.
  const int other_steps = static_cast<int>(engine.metrics(1).steps);
  EXPECT_LE(other_steps, 16);
  EXPECT_LE(progress.flood_tokens_then - progress.flood_tokens_before, max_seqs * (other_steps + 2));
  EXPECT_EQ(progress.flood_finished_then, 0);  // the flood needs flood / max_seqs * flood_len steps
}

// Quantized weights give a generated token's KV the bits a prompt would:
// the next turn, which repeats this one's prompt and answer, finds all of
// their full blocks in the prefix cache and still answers as alone.
TEST(Engine, NextTurnFindsThePreviousAnswerInThePrefixCache) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  Served s(path, test_config(256));
  ASSERT_TRUE(s.engine.info().generated_kv_matches_prompt);
  const auto turn1 = s.tok().encode("Once upon a time, there was a little girl named Lily.", true);
  const int n1 = 48;
  RequestParams first = greedy(turn1, n1);
  first.ignore_eos = true;
  const auto answer = run_all(s.engine, {first})[0].tokens;
  ASSERT_EQ(static_cast<int>(answer.size()), n1);
  const uint64_t hits_before = s.engine.metrics().scheduler.prefix_hit_tokens;

  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), answer.begin(), answer.end());
  for (int32_t t : s.tok().encode(" Then she went home.", false)) turn2.push_back(t);
  const auto second = run_all(s.engine, {greedy(turn2, 16)})[0].tokens;
  EXPECT_EQ(second, alone(s.m(), s.tok(), turn2, 16));
  // Computed KV of turn 1: its prompt and all but the last answer token.
  const int block = s.engine.info().block_size;
  const uint64_t full_blocks = static_cast<uint64_t>((turn1.size() + answer.size() - 1) / block);
  EXPECT_GE(s.engine.metrics().scheduler.prefix_hit_tokens - hits_before, full_blocks * block);
  EXPECT_GT(full_blocks * block, turn1.size());  // more than the prompt's blocks alone
}

// f16 weights may give prompt tokens other bits (their prompt path): only
// prompt blocks are offered.
TEST(Engine, F16OffersOnlyPromptBlocks) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  Served s(path, test_config(256));
  if (s.engine.info().generated_kv_matches_prompt) GTEST_SKIP() << "no prompt path on this CPU";
  const auto turn1 = s.tok().encode("Once upon a time, there was a little girl named Lily.", true);
  RequestParams first = greedy(turn1, 48);
  first.ignore_eos = true;
  const auto answer = run_all(s.engine, {first})[0].tokens;
  const uint64_t hits_before = s.engine.metrics().scheduler.prefix_hit_tokens;
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), answer.begin(), answer.end());
  const auto second = run_all(s.engine, {greedy(turn2, 8)})[0].tokens;
  EXPECT_EQ(second, alone(s.m(), s.tok(), turn2, 8));
  const int block = s.engine.info().block_size;
  EXPECT_EQ(s.engine.metrics().scheduler.prefix_hit_tokens - hits_before, turn1.size() / block * block);
}

// n choices share the prompt's KV: it is computed once, and choice i
// samples what a request with seed + i samples alone.
TEST(Engine, ChoicesForkFromOnePrompt) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path, test_config(256));
  const auto prompt = s.tok().encode("Once upon a time, there was a little girl named Lily. She", true);
  RequestParams p = greedy(prompt, 20);
  p.sampling.temperature = 0.9f;
  p.sampling.seed = 1234;
  p.ignore_eos = true;
  p.n = 4;
  const auto choices = run_choices(s.engine, p);
  const auto m = s.engine.metrics();
  EXPECT_EQ(m.prompt_tokens, prompt.size());
  EXPECT_EQ(m.scheduler.scheduled_tokens, prompt.size() + 4 * (20 - 1));  // the prompt once, then 19 decodes each
  EXPECT_EQ(m.scheduler.blocks_free, m.scheduler.blocks_total);
  for (int i = 0; i < 4; ++i) {
    RequestParams one = p;
    one.n = 1;
    one.sampling.seed = 1234 + static_cast<uint64_t>(i);
    EXPECT_EQ(choices[static_cast<size_t>(i)].tokens, run_all(s.engine, {one})[0].tokens) << "choice " << i;
    EXPECT_EQ(choices[static_cast<size_t>(i)].reason, FinishReason::Length);
  }
  EXPECT_NE(choices[0].tokens, choices[1].tokens);
}

// Choices that cannot all run at once (max_seqs 2) queue and still finish;
// cancelling one before it forks ends only that one.
TEST(Engine, ChoicesBeyondMaxSeqsQueueAndCancelAlone) {
  engine::testing::FakeInstance fake(32, 4, 64, 64, 16);
  Engine engine({&fake}, {.max_seqs = 2});
  RequestParams p = greedy({5, 6, 7, 8, 9, 10, 11}, 6);
  p.ignore_eos = true;
  p.n = 5;
  const auto choices = run_choices(engine, p);
  for (const Result& r : choices) {
    EXPECT_EQ(r.reason, FinishReason::Length);
    EXPECT_EQ(r.tokens, choices[0].tokens);  // greedy: every choice alike
  }
  EXPECT_EQ(engine.metrics().scheduler.blocks_free, engine.metrics().scheduler.blocks_total);

  // A prompt longer than the context: every choice fails with it.
  RequestParams bad = greedy(std::vector<int32_t>(80, 3), 4);
  bad.n = 3;
  for (const Result& r : run_choices(engine, bad)) EXPECT_EQ(r.reason, FinishReason::Error);
}

// A request's logprobs carry the entropy of the whole next-token
// distribution, and next_token_stats() reads it and the top-1 margin: both
// as the model's own logits for the prompt give them.
TEST(Engine, NextTokenStatsAreTheLogitsEntropyAndMargin) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path);
  const auto prompt = s.tok().encode("Once upon a time, there was a", true);
  ThreadPool pool(2);
  model::SequenceRunner runner(s.m(), pool, static_cast<int>(prompt.size()) + 1, gguf::TensorType::F16);
  const std::span<const float> logits = runner.eval(prompt);
  const float top = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (float l : logits) z += std::exp(double(l - top));
  double entropy = 0;
  for (float l : logits) {
    const double logp = double(l - top) - std::log(z);
    entropy -= std::exp(logp) * logp;
  }
  std::vector<float> sorted(logits.begin(), logits.end());
  std::sort(sorted.rbegin(), sorted.rend());

  const auto stats = engine::next_token_stats(s.engine, 0, prompt);
  ASSERT_TRUE(stats.has_value());
  EXPECT_GT(entropy, 0.1);
  EXPECT_NEAR(stats->entropy, entropy, 1e-3);
  EXPECT_NEAR(stats->margin, sorted[0] - sorted[1], 1e-3);
}

// A prompt the model cannot hold gives no stats (the engine refuses it).
TEST(Engine, NextTokenStatsOfAPromptBeyondTheContextAreNone) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path);
  const std::vector<int32_t> prompt(static_cast<size_t>(s.engine.info().max_context) + 1, 5);
  EXPECT_FALSE(engine::next_token_stats(s.engine, 0, prompt).has_value());
}
