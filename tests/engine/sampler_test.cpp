// Sampling: greedy, temperature, filters and penalties, and reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "engine/sampler.h"

using namespace llmserve;
using engine::Sampler;
using engine::SamplingParams;

namespace {

SamplingParams plain(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

// Frequencies of each token over many draws from fresh logits.
std::map<int32_t, int> histogram(SamplingParams p, const std::vector<float>& logits, int draws) {
  Sampler s(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> l = logits;
    ++h[s.sample(l, {})];
  }
  return h;
}

}  // namespace

TEST(Sampler, TemperatureZeroIsArgmax) {
  Sampler s(plain(0.0f));
  std::vector<float> l{0.1f, 2.5f, -1.0f, 2.4f};
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  const std::vector<float> logits{1.0f, 1.1f, 0.9f, 1.05f, 0.5f};
  SamplingParams p = plain(1.0f);
  p.seed = 42;
  Sampler a(p), b(p);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> la = logits, lb = logits;
    EXPECT_EQ(a.sample(la, {}), b.sample(lb, {}));
  }
}

TEST(Sampler, DrawsFollowTheSoftmax) {
  // p = softmax(log(0.5), log(0.3), log(0.2)) = (0.5, 0.3, 0.2)
  const std::vector<float> logits{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const int n = 20000;
  const auto h = histogram(plain(1.0f), logits, n);
  EXPECT_NEAR(h.at(0) / double(n), 0.5, 0.02);
  EXPECT_NEAR(h.at(1) / double(n), 0.3, 0.02);
  EXPECT_NEAR(h.at(2) / double(n), 0.2, 0.02);
}

TEST(Sampler, TopKKeepsOnlyTheBest) {
  SamplingParams p = plain(1.0f);
  p.top_k = 2;
  const auto h = histogram(p, {3.0f, 0.0f, 2.9f, 2.8f}, 2000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_TRUE(h.count(0) && h.count(2));
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  SamplingParams p = plain(1.0f);
  p.top_p = 0.7f;  // 0.5 alone is short of 0.7; 0.5 + 0.3 reaches it
  const auto h = histogram(p, {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)}, 4000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_NEAR(h.at(0) / 4000.0, 0.5 / 0.8, 0.03);
}

// A flat distribution over a large vocabulary: the sorted prefix has to grow
// several times before it holds the top_p mass.
TEST(Sampler, TopPOverALargeFlatVocabulary) {
  SamplingParams p = plain(1.0f);
  p.top_p = 0.5f;
  std::vector<float> logits(2000, 0.0f);
  logits[1999] = 1e-3f;  // the best token sits last
  const auto h = histogram(p, logits, 20000);
  EXPECT_TRUE(h.count(1999));
  // The best token and 999 more hold half the mass; ties go to the lower ids.
  for (const auto& [token, n] : h) EXPECT_TRUE(token == 1999 || token < 999) << token;
  EXPECT_GT(h.size(), 900u);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  SamplingParams p = plain(1.0f);
  p.min_p = 0.5f;  // keep p >= 0.5 * 0.4
  const auto h = histogram(p, {std::log(0.4f), std::log(0.3f), std::log(0.19f), std::log(0.11f)}, 4000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_FALSE(h.count(2));
}

TEST(Sampler, RepetitionPenaltyOncePerDistinctToken) {
  SamplingParams p = plain(0.0f);
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  std::vector<float> l{4.0f, 3.0f, -1.0f};
  const std::vector<int32_t> history{0, 0, 0};
  EXPECT_EQ(s.sample(l, history), 1);
  EXPECT_FLOAT_EQ(l[0], 2.0f);  // divided once, not three times
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  SamplingParams p = plain(0.0f);
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);
  std::vector<float> l{2.0f, 1.0f, 0.0f};
  const std::vector<int32_t> history{0, 0, 1};
  s.sample(l, history);
  EXPECT_FLOAT_EQ(l[0], 2.0f - 0.5f - 2 * 0.25f);
  EXPECT_FLOAT_EQ(l[1], 1.0f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[2], 0.0f);
}

TEST(Sampler, InvalidParametersAreNamed) {
  SamplingParams p;
  p.top_p = 0.0f;
  try {
    Sampler s(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("top_p"), std::string::npos);
  }
  p = SamplingParams{};
  p.temperature = -1.0f;
  EXPECT_THROW(Sampler{p}, Error);
}
