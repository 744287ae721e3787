// Speculative decoding: the proposers, the exactness of verification
// (greedy token-identical, sampling identical in distribution, checked by a
// chi-square test that is shown to catch a wrong residual), the draft-length
// policy, and the engine end to end: outputs equal plain decoding in mixed
// batches with prefix hits, chunked prefill and preemption, no block leaks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "core/error.h"
#include "engine/draft_model_proposer.h"
#include "engine/ngram_proposer.h"
#include "model/synthetic.h"
#include "engine/speculative.h"
#include "engine_harness.h"
#include "fake_instance.h"
#include "test_models.h"

using namespace llmserve;
using namespace llmserve::engine;
using namespace llmserve::engine::testing;

namespace {

// Pearson's chi-square statistic of observed counts against expected
// probabilities, over the cells expected to hold at least 5.
double chi_square(const std::vector<double>& observed, const std::vector<double>& p, double n, int& dof) {
  double x2 = 0;
  dof = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * n;
    if (e < 5) continue;
    x2 += (observed[i] - e) * (observed[i] - e) / e;
    ++dof;
  }
  return x2;
}

// Upper 1e-4 tail of chi-square(dof), Wilson-Hilferty: a correct sampler
// fails one run in 10,000.
double chi_square_limit(int dof) {
  const double z = 3.719, k = dof;
  const double c = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * c * c * c;
}

std::vector<float> softmax(const std::vector<float>& logits) {
  const float m = *std::max_element(logits.begin(), logits.end());
  std::vector<float> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp(logits[i] - m);
  for (float& x : p) x = static_cast<float>(x / sum);
  return p;
}

SamplingParams pure_sampling(uint64_t seed) {
  SamplingParams s;
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.seed = seed;
  return s;
}

// The first token after a one-token draft, drawn `draws` times: it must be
// distributed as the target's p, whatever q drafted it.
using Verifier = EntryResult (*)(Sampler&, std::span<float>, size_t, const Draft&, std::vector<int32_t>&,
                                 std::vector<float>&);
double first_token_chi_square(Verifier verifier, bool deterministic_draft, int& dof) {
  const std::vector<float> target_logits{1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.0f, 0.7f, 1.5f};
  const std::vector<float> draft_logits{0.0f, 1.0f, 0.5f, 1.0f, -1.0f, 0.0f, 2.0f, 0.1f};
  const size_t vocab = target_logits.size();
  const std::vector<float> p = softmax(target_logits), q = softmax(draft_logits);
  Sampler target(pure_sampling(1)), drafter(pure_sampling(2));
  std::vector<double> counts(vocab, 0);
  std::vector<float> rows, scratch;
  std::vector<int32_t> history;
  const int draws = 100'000;
  for (int i = 0; i < draws; ++i) {
    Draft d;
    if (deterministic_draft) {
      d.tokens = {6};  // an n-gram's guess: q one-hot
    } else {
      d.tokens = {drafter.draw(q)};
      d.q = q;
    }
    rows = target_logits;
    rows.insert(rows.end(), target_logits.begin(), target_logits.end());
    history.clear();
    const EntryResult r = verifier(target, rows, vocab, d, history, scratch);
    ++counts[static_cast<size_t>(r.accepted_drafts > 0 ? d.tokens[0] : r.token)];
  }
  return chi_square(counts, std::vector<double>(p.begin(), p.end()), draws, dof);
}

// verify() with the residual taken as p itself: biased toward the draft.
EntryResult wrong_residual(Sampler& s, std::span<float> logits, size_t vocab, const Draft& d, std::vector<int32_t>& history,
                           std::vector<float>& p) {
  s.probabilities(logits.first(vocab), history, p);
  const int32_t x = d.tokens[0];
  const float qx = d.q.empty() ? 1.0f : d.q[static_cast<size_t>(x)];
  if (s.uniform() * qx < p[static_cast<size_t>(x)]) return {0, 1};
  return {s.draw(p), 0};
}

}  // namespace

TEST(Speculative, NgramLookupFindsTheLatestLongestMatch) {
  std::vector<int32_t> out;
  // "1 2 3" (longest) occurs once before; the later "2 3" loses to it.
  ngram_lookup(std::vector<int32_t>{1, 2, 3, 4, 9, 2, 3, 5, 6, 1, 2, 3}, 1, 4, 3, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 9, 2}));
  // "1 2" occurs twice before: the latest one's continuation.
  ngram_lookup(std::vector<int32_t>{1, 2, 5, 1, 2, 6, 1, 2}, 1, 2, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{6, 1}));
  ngram_lookup(std::vector<int32_t>{1, 2, 3}, 1, 4, 4, out);
  EXPECT_TRUE(out.empty());
  ngram_lookup(std::vector<int32_t>{5, 6, 5}, 1, 4, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{6, 5}));  // capped by what follows
  EXPECT_THROW(NgramProposer(0, 2), Error);
  EXPECT_THROW(NgramProposer(3, 2), Error);
}

TEST(Speculative, GreedyVerifyAcceptsTheArgmaxPrefix) {
  SamplingParams g;
  g.temperature = 0.0f;
  Sampler s(g);
  // Three rows over a vocabulary of 4: argmaxes 2, 1, 3.
  std::vector<float> rows{0, 0, 5, 0, 0, 5, 0, 0, 0, 0, 0, 5};
  std::vector<int32_t> history;
  std::vector<float> scratch;
  auto run = [&](std::vector<int32_t> tokens) {
    std::vector<float> l = rows;
    history.clear();
    return verify(s, l, 4, Draft{std::move(tokens), {}}, history, scratch);
  };
  EntryResult r = run({2, 1});
  EXPECT_EQ(r.accepted_drafts, 2);
  EXPECT_EQ(r.token, 3);
  r = run({2, 0});
  EXPECT_EQ(r.accepted_drafts, 1);
  EXPECT_EQ(r.token, 1);
  r = run({3, 1});
  EXPECT_EQ(r.accepted_drafts, 0);
  EXPECT_EQ(r.token, 2);
}

TEST(Speculative, SampledVerifyKeepsTheTargetDistribution) {
  for (const bool deterministic : {true, false}) {
    int dof = 0;
    const double x2 = first_token_chi_square(verify, deterministic, dof);
    EXPECT_LT(x2, chi_square_limit(dof)) << (deterministic ? "n-gram draft" : "model draft");
  }
}

// The test above can fail: a verifier that resamples from p after a
// rejection (instead of from max(0, p - q)) over-produces drafted tokens.
TEST(Speculative, ChiSquareCatchesAWrongResidual) {
  for (const bool deterministic : {true, false}) {
    int dof = 0;
    const double x2 = first_token_chi_square(wrong_residual, deterministic, dof);
    EXPECT_GT(x2, chi_square_limit(dof)) << (deterministic ? "n-gram draft" : "model draft");
  }
}

TEST(Speculative, DraftLengthsFollowTheCostOfWideSteps) {
  std::vector<int> k;
  const std::vector<double> sure(1, 0.9), hopeless(1, 0.02);
  // Memory-bound: 9 rows cost what 1 does; drafting pays up to the cap.
  const StepCost flat({{1, 10.0}, {9, 10.5}});
  choose_draft_lengths(sure, 8, flat, 0.0, k);
  EXPECT_EQ(k, std::vector<int>{8});
  choose_draft_lengths(hopeless, 8, flat, 0.0, k);
  EXPECT_LE(k[0], 1);
  // Compute-bound: every row costs as much as the first; nothing pays.
  const StepCost linear({{1, 10.0}, {9, 90.0}});
  choose_draft_lengths(sure, 8, linear, 0.0, k);
  EXPECT_EQ(k, std::vector<int>{0});
  // A batch of 16 past the crossover: wide steps grow linearly.
  const std::vector<double> batch(16, 0.7);
  const StepCost crossover({{1, 10.0}, {16, 12.0}, {64, 48.0}});
  choose_draft_lengths(batch, 4, crossover, 0.0, k);
  EXPECT_EQ(std::accumulate(k.begin(), k.end(), 0), 0);
  // A draft model's passes cost time of their own.
  choose_draft_lengths(sure, 8, flat, 100.0, k);
  EXPECT_EQ(k, std::vector<int>{0});
  EXPECT_DOUBLE_EQ(expected_tokens(0.5, 2), 1.75);
  EXPECT_DOUBLE_EQ(flat.ms(5), 10.25);
  EXPECT_DOUBLE_EQ(linear.ms(17), 170.0);
  StepCost observed({{1, 10.0}, {5, 12.0}});
  observed.observe(5, 2.0);  // noise: a wide step faster than a narrow one
  EXPECT_LE(observed.ms(1), observed.ms(5));
  observed.observe(3, 50.0);
  EXPECT_GE(observed.ms(5), 50.0);
}

TEST(Speculative, AcceptanceFollowsRecentVerifies) {
  Acceptance a;
  EXPECT_DOUBLE_EQ(a.rate(), 0.5);
  for (int i = 0; i < 30; ++i) a.record(4, 4);
  EXPECT_GT(a.rate(), 0.9);
  for (int i = 0; i < 100; ++i) a.record(4, 0);
  EXPECT_LT(a.rate(), 0.1);
}

namespace {

// Stories that retell themselves: their continuations repeat spans of the
// prompt, so n-gram drafts are often right (and sometimes wrong).
std::vector<std::vector<int32_t>> retold_prompts(const tok::Tokenizer& tok) {
  const char* texts[] = {
      "Once upon a time, there was a little girl named Lily. She liked to play. Once upon a time, there was",
      "Tom had a red ball. He liked his red ball. One day, Tom had a",
      "The cat sat on the mat. The dog sat on the mat. The bird sat on the",
      "Sue liked to sing. Sue liked to dance. Sue liked to",
      "Once upon a time, there was a big dog. The big dog was happy. The big",
      "Ben and his dad went to the park. Ben and his dad",
      "Lily saw a bird. The bird was blue. Lily saw a",
      "Once upon a time"};
  std::vector<std::vector<int32_t>> prompts;
  for (const char* t : texts) prompts.push_back(tok.encode(t, true));
  return prompts;
}

EngineConfig with_proposer(Proposer& p, int max_k, int max_seqs = 64) {
  EngineConfig e;
  e.max_seqs = max_seqs;
  e.spec.push_back({.proposer = &p, .max_k = max_k, .adaptive = false, .cost = {}});
  return e;
}

// Greedy, batched, drafting every step: each output equals the prompt
// decoded alone without drafts, and every block returns to the pool.
void expect_speculative_equals_alone(const std::string& path, model::InstanceConfig config, int n_new, int max_seqs = 64) {
  NgramProposer ngram;
  Served s(path, config, with_proposer(ngram, 4, max_seqs));
  auto prompts = retold_prompts(s.tok());
  const auto more = retold_prompts(s.tok());
  prompts.insert(prompts.end(), more.begin(), more.end());  // the second half hits the prefix cache
  std::vector<RequestParams> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, n_new));
  const auto results = run_all(s.engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(results[i].tokens, alone(s.m(), s.tok(), prompts[i], n_new)) << "prompt " << i;
    EXPECT_NE(results[i].reason, FinishReason::Error) << results[i].error;
  }
  const auto m = s.engine.metrics();
  EXPECT_EQ(m.scheduler.blocks_free, m.scheduler.blocks_total);
  EXPECT_GT(m.spec.drafts, 20u);
  EXPECT_GT(m.spec.accepted_tokens, 0u);
  EXPECT_LT(m.spec.accepted_tokens, m.spec.draft_tokens);  // some drafts were rolled back
  EXPECT_GE(m.spec.accepted_per_pos[0], m.spec.accepted_per_pos[1]);
}

model::InstanceConfig blocks(int n, int block_size = 16, int max_batch_tokens = 128) {
  model::InstanceConfig c;
  c.kv_blocks = n;
  c.block_size = block_size;
  c.max_batch_tokens = max_batch_tokens;
  return c;
}

}  // namespace

TEST(Speculative, NgramGreedyEqualsPlainDecodingStories260K) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  expect_speculative_equals_alone(path, blocks(512), 48);
}

TEST(Speculative, NgramGreedyEqualsPlainDecodingF16) {
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  expect_speculative_equals_alone(path, blocks(512), 32);
}

// A proposer that throws (say, its model's forward pass fails) costs the
// drafts only: the requests decode as they would without it.
TEST(Speculative, AFailingProposerLeavesPlainDecoding) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  struct Failing final : Proposer {
    void propose(std::span<const DraftRequest> requests) override {
      for (const DraftRequest& r : requests) r.out->tokens.assign(static_cast<size_t>(r.k), 1);  // half-written
      throw Error("the draft model failed");
    }
  } failing;
  Served s(path, blocks(512), {.max_seqs = 16, .spec = {{.proposer = &failing, .max_k = 4, .adaptive = false, .cost = {}}}});
  const auto prompts = sixteen_prompts(s.tok());
  std::vector<RequestParams> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, 24));
  const auto results = run_all(s.engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(results[i].tokens, alone(s.m(), s.tok(), prompts[i], 24)) << "prompt " << i;
    EXPECT_NE(results[i].reason, FinishReason::Error) << results[i].error;
  }
  EXPECT_EQ(s.engine.metrics().spec.drafts, 0u);
}

// Blocks of 4 tokens: drafts cross block boundaries and are rolled back
// across them; 14 blocks for 16 prompts: preemption; 16-token steps:
// chunked prefill beside verify entries.
TEST(Speculative, NgramGreedyWithPreemptionChunkingAndSmallBlocks) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  expect_speculative_equals_alone(path, blocks(56, 4, 16), 40, 6);
}

namespace {

// The first `n` tokens of `draws` sampled requests for one prompt, seeds 0, 1, ...
std::vector<std::vector<int32_t>> sample_many(Engine& engine, const std::vector<int32_t>& prompt, int n, int draws) {
  std::vector<RequestParams> requests;
  std::vector<std::vector<int32_t>> out;
  const int wave = 256;  // requests in flight at once
  for (int first = 0; first < draws; first += wave) {
    requests.clear();
    for (int i = first; i < std::min(draws, first + wave); ++i) {
      RequestParams p;
      p.prompt = prompt;
      p.max_new_tokens = n;
      p.ignore_eos = true;
      p.sampling.temperature = 1.0f;
      p.sampling.top_k = 0;
      p.sampling.top_p = 0.9f;
      p.sampling.min_p = 0.0f;
      p.sampling.seed = static_cast<uint64_t>(i);
      requests.push_back(std::move(p));
    }
    for (auto& r : run_all(engine, requests)) out.push_back(std::move(r.tokens));
  }
  return out;
}

// Two-sample chi-square homogeneity statistic of position `pos` of a and b,
// pooling the tokens expected fewer than 5 times in either sample.
double homogeneity(const std::vector<std::vector<int32_t>>& a, const std::vector<std::vector<int32_t>>& b, size_t pos,
                   int& dof) {
  std::map<int32_t, std::pair<double, double>> counts;
  for (const auto& t : a) counts[t.at(pos)].first += 1;
  for (const auto& t : b) counts[t.at(pos)].second += 1;
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  std::vector<std::pair<double, double>> cells{{0, 0}};  // cells[0]: the pooled rare tokens
  for (const auto& [token, c] : counts) {
    const double total = c.first + c.second;
    if (total * std::min(na, nb) / (na + nb) < 5) {
      cells[0].first += c.first;
      cells[0].second += c.second;
    } else {
      cells.push_back(c);
    }
  }
  double x2 = 0;
  dof = -1;
  for (const auto& [ca, cb] : cells) {
    const double total = ca + cb;
    if (total == 0) continue;
    const double ea = total * na / (na + nb), eb = total * nb / (na + nb);
    x2 += (ca - ea) * (ca - ea) / ea + (cb - eb) * (cb - eb) / eb;
    ++dof;
  }
  return x2;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr int kDraws = 2'000;  // the sanitized build runs ~20x slower: a smoke test; the release build runs all
#else
constexpr int kDraws = 100'000;
#endif

}  // namespace

// Sampling with n-gram drafts gives each of the first tokens the
// distribution plain sampling gives it (top-p included): 1e5 requests each,
// drafts at the second and third tokens.
TEST(Speculative, NgramSamplingMatchesPlainSamplingInDistribution) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  NgramProposer ngram;
  Served spec(path, blocks(1024, 16, 512), with_proposer(ngram, 3, 256));
  Served plain(path, blocks(1024, 16, 512), {.max_seqs = 256, .spec = {}});
  // A prompt whose n-grams recur, so drafts are proposed at every position.
  const auto prompt = spec.tok().encode("Lily and Tom. Lily and Tom. Lily and Tom. Lily and", true);
  const int n = 3;
  const auto a = sample_many(spec.engine, prompt, n, kDraws);
  const auto b = sample_many(plain.engine, prompt, n, kDraws);
  EXPECT_GT(spec.engine.metrics().spec.draft_tokens, static_cast<uint64_t>(kDraws / 2));
  for (size_t pos = 0; pos < static_cast<size_t>(n); ++pos) {
    int dof = 0;
    const double x2 = homogeneity(a, b, pos, dof);
    ASSERT_GT(dof, 0);
    EXPECT_LT(x2, chi_square_limit(dof)) << "position " << pos << ", " << dof << " degrees of freedom";
  }
}

namespace {

// A target and a draft model on one thread pool, and an engine that
// speculates with the draft.
struct WithDraft {
  WithDraft(const std::string& target_path, const std::string& draft_path, model::InstanceConfig target_config,
            int max_k, bool adaptive = false, std::optional<gguf::TensorType> requantize = std::nullopt,
            int draft_rows = 128)
      : pool(2),
        target(model::LoadedModel::load(target_path, pool, target_config)),
        draft(model::LoadedModel::load(draft_path, pool, draft_config(requantize, draft_rows))),
        proposer(*draft),
        engine({target.get()}, config(max_k, adaptive, std::min(256, target_config.max_batch_tokens))) {}

  static model::InstanceConfig draft_config(std::optional<gguf::TensorType> requantize, int rows) {
    model::InstanceConfig c = blocks(256);
    c.requantize = requantize;
    c.max_batch_tokens = rows;
    return c;
  }
  EngineConfig config(int max_k, bool adaptive, int max_seqs) {
    EngineConfig e;
    e.max_seqs = max_seqs;
    e.spec.push_back({.proposer = &proposer, .max_k = max_k, .adaptive = adaptive, .cost = {}});
    return e;
  }
  const tok::Tokenizer& tok() const { return target->tokenizer(); }

  ThreadPool pool;
  std::unique_ptr<model::LoadedModel> target, draft;
  DraftModelProposer proposer;
  Engine engine;
};

void expect_draft_equals_alone(WithDraft& s, int n_new) {
  auto prompts = retold_prompts(s.tok());
  const auto more = sixteen_prompts(s.tok());
  prompts.insert(prompts.end(), more.begin(), more.end());
  std::vector<RequestParams> requests;
  for (const auto& p : prompts) requests.push_back(greedy(p, n_new));
  const auto results = run_all(s.engine, requests);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(results[i].tokens, alone(s.target->model(), s.tok(), prompts[i], n_new)) << "prompt " << i;
    EXPECT_NE(results[i].reason, FinishReason::Error) << results[i].error;
  }
  const auto m = s.engine.metrics();
  EXPECT_EQ(m.scheduler.blocks_free, m.scheduler.blocks_total);
  EXPECT_EQ(s.proposer.free_blocks(), s.draft->info().kv_blocks);  // released with their sequences
  EXPECT_GT(m.spec.drafts, 20u);
  EXPECT_GT(m.spec.accepted_tokens, 0u);
}

}  // namespace

TEST(Speculative, DraftModelGreedyEqualsPlainDecodingF16) {
  REQUIRE_MODEL(target, "TinyStories-656K.f16.gguf");
  REQUIRE_MODEL(draft, "tinystories-656k-q8_0.gguf");
  WithDraft s(target, draft, blocks(512), 4);
  expect_draft_equals_alone(s, 32);
}

TEST(Speculative, SelfDraftGreedyEqualsPlainDecoding) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  WithDraft s(path, path, blocks(512), 3, false, gguf::TensorType::Q4_0);
  expect_draft_equals_alone(s, 40);
}

// More drafting sequences than the draft's forward pass takes rows: each
// draft pass (and each prompt's catch-up) is split at the draft's limit.
TEST(Speculative, DraftPassesSplitAtTheDraftsBatchLimit) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  WithDraft s(path, path, blocks(512), 3, false, gguf::TensorType::Q4_0, 5);
  expect_draft_equals_alone(s, 24);
}

// Prefill chunks stay whole here: on this model, prompt attention split at
// other chunk boundaries is not bit-identical (plain decoding differs too).
TEST(Speculative, SelfDraftOfASyntheticModelWithPreemption) {
  model::InstanceConfig c = blocks(24, 8, 128);  // 24 blocks of 8 tokens for 24 prompts: preemption
  const std::string path = synthetic_tiny();
  WithDraft s(path, path, c, 4, false, gguf::TensorType::Q4_0);
  expect_draft_equals_alone(s, 24);
  EXPECT_GT(s.engine.metrics().scheduler.preemptions, 0u);
}

TEST(Speculative, DraftModelSamplingMatchesPlainSamplingInDistribution) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  WithDraft s(path, path, blocks(1024, 16, 512), 2, false, gguf::TensorType::Q4_0);
  Served plain(path, blocks(1024, 16, 512), {.max_seqs = 256, .spec = {}});
  const auto prompt = s.tok().encode("Lily saw a", true);  // short: the draft computes every prompt
  const int n = 3;
  const auto a = sample_many(s.engine, prompt, n, kDraws);
  const auto b = sample_many(plain.engine, prompt, n, kDraws);
  const auto m = s.engine.metrics().spec;
  EXPECT_GE(m.draft_tokens, static_cast<uint64_t>(kDraws));  // one per request at least
  EXPECT_LT(m.accepted_tokens, m.draft_tokens);  // q differs from p: some drafts are rejected
  for (size_t pos = 0; pos < static_cast<size_t>(n); ++pos) {
    int dof = 0;
    const double x2 = homogeneity(a, b, pos, dof);
    ASSERT_GT(dof, 0);
    EXPECT_LT(x2, chi_square_limit(dof)) << "position " << pos << ", " << dof << " degrees of freedom";
  }
}

TEST(Speculative, DraftWithAnotherVocabularyIsRefused) {
  REQUIRE_MODEL(a, "stories260K.gguf");
  REQUIRE_MODEL(b, "TinyStories-656K.f16.gguf");
  ThreadPool pool(1);
  const auto target = model::LoadedModel::load(b, pool, blocks(16));
  const auto draft = model::LoadedModel::load(a, pool, blocks(16));
  try {
    check_same_vocabulary(*target, *draft);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stories260K.gguf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("TinyStories-656K.f16.gguf"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_same_vocabulary(*target, *target));
}
