// Score requests: the summed log-probability of a prompt's tail given what
// comes before it, as a plain log-softmax over one sequence's logits gives
// it; the same in chunks and batched with completions; bad requests refused.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "engine_harness.h"
#include "test_models.h"

using namespace llmserve;
using namespace llmserve::engine;
using namespace llmserve::engine::testing;

namespace {

RequestParams score(std::vector<int32_t> tokens, int from) {
  RequestParams p;
  p.prompt = std::move(tokens);
  p.score_from = from;
  return p;
}

struct Scored {
  double logprob = 0;
  int tokens = 0;
};

Scored score_in(Engine& engine, const RequestParams& p) {
  Scored s;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  engine.submit(p, [&](const RequestOutput& out) {
    if (!out.finished) return;
    std::lock_guard lock(mu);
    EXPECT_EQ(out.finish_reason, FinishReason::Stop) << out.error;
    EXPECT_TRUE(out.tokens.empty());
    s = {out.score_logprob, out.scored_tokens};
    done = true;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  return s;
}

// Every position's logits from one sequence's pass, log-softmaxed by hand.
double plain_score(const model::Model& m, const std::vector<int32_t>& tokens, int from) {
  ThreadPool pool(2);
  model::SequenceRunner runner(m, pool, static_cast<int>(tokens.size()), gguf::TensorType::F16);
  const std::span<float> logits = runner.eval(tokens, model::Logits::All);
  const size_t vocab = logits.size() / tokens.size();
  double sum = 0;
  for (size_t i = static_cast<size_t>(from); i < tokens.size(); ++i) {
    const auto row = logits.subspan((i - 1) * vocab, vocab);
    double z = 0;
    for (float l : row) z += std::exp(double{l});
    sum += row[static_cast<size_t>(tokens[i])] - std::log(z);
  }
  return sum;
}

std::vector<int32_t> prompt_and_answer(const tok::Tokenizer& tok, size_t length) {
  std::vector<int32_t> tokens;
  for (const auto& p : sixteen_prompts(tok)) tokens.insert(tokens.end(), p.begin(), p.end());
  tokens.resize(length);
  return tokens;
}

model::InstanceConfig blocks(int kv_blocks, int max_batch_tokens = 128) {
  model::InstanceConfig c;
  c.kv_blocks = kv_blocks;
  c.max_batch_tokens = max_batch_tokens;
  return c;
}

TEST(Score, MatchesALogSoftmaxOverThePlainPass) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path, blocks(64));
  const auto tokens = prompt_and_answer(s.tok(), 40);
  for (const int from : {1, 17, 39}) {
    const Scored got = score_in(s.engine, score(tokens, from));
    EXPECT_EQ(got.tokens, 40 - from);
    EXPECT_NEAR(got.logprob, plain_score(s.m(), tokens, from), 1e-3 * got.tokens) << "from " << from;
  }
}

// Chunks of 16 rows: the first scored token's logits may sit in an earlier
// chunk than the token; the sums agree with one pass's.
TEST(Score, ChunkedPrefillGivesTheSameScore) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served whole(path, blocks(64)), parts(path, blocks(64, 16), {.max_seqs = 16});
  const auto tokens = prompt_and_answer(whole.tok(), 70);
  for (const int from : {16, 17, 33, 60}) {
    const Scored a = score_in(whole.engine, score(tokens, from)), b = score_in(parts.engine, score(tokens, from));
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_NEAR(a.logprob, b.logprob, 1e-4 * a.tokens) << "from " << from;
  }
}

// Among completions in the same steps: the same score, the same completions.
TEST(Score, BatchedWithCompletionsGivesTheSameScore) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  Served s(path, blocks(512));
  const auto prompts = sixteen_prompts(s.tok());
  const auto tokens = prompt_and_answer(s.tok(), 50);
  const Scored alone_score = score_in(s.engine, score(tokens, 20));
  std::vector<RequestParams> requests;
  for (size_t i = 0; i < 6; ++i) requests.push_back(greedy(prompts[i], 8));
  std::vector<Result> results;
  std::thread completions([&] { results = run_all(s.engine, requests); });
  const Scored batched = score_in(s.engine, score(tokens, 20));
  completions.join();
  EXPECT_NEAR(batched.logprob, alone_score.logprob, 1e-4 * alone_score.tokens);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(results[i].tokens, alone(s.m(), s.tok(), prompts[i], 8)) << i;
  const SchedulerMetrics m = s.engine.metrics().scheduler;
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}

TEST(Score, RefusesAScoreOutsideThePromptOrWithChoices) {
  Served s(synthetic_tiny(), blocks(64));
  auto refused = [&](RequestParams p) { EXPECT_THROW(s.engine.submit(p, [](const RequestOutput&) {}), Error); };
  refused(score({1, 2, 3}, 3));
  refused(score({1, 2, 3}, -1));
  RequestParams two = score({1, 2, 3}, 1);
  two.n = 2;
  refused(two);
  RequestParams both = score({1, 2, 3}, 1);
  both.embed = true;
  refused(both);
  EXPECT_EQ(score_in(s.engine, score({1, 2, 3}, 2)).tokens, 1);
}

}  // namespace
