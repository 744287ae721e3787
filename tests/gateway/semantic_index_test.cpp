// The semantic layer's flat index: the int8 similarity against the exact
// cosine, nearest match, expiry, removal.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "gateway/ngram_embedder.h"
#include "gateway/semantic_eval.h"
#include "gateway/semantic_index.h"
#include "reference_dot.h"

namespace {

using llmserve::gateway::test::dot;
using llmserve::gateway::LabeledPair;
using llmserve::gateway::NgramEmbedder;
using llmserve::gateway::read_pairs;
using llmserve::gateway::SemanticIndex;
using llmserve::gateway::TimePoint;
using Vectors = std::vector<std::vector<float>>;

const TimePoint kNow{};
const TimePoint kLater = kNow + std::chrono::hours(1);

// How far the quantized similarity may be from the exact cosine, and the
// lead over the runner-up beyond which the exact nearest must be found.
constexpr float kTolerance = 0.01f;
constexpr float kClearLead = 0.02f;

float cosine(const std::vector<float>& a, const std::vector<float>& b) {
  return dot(a.data(), b.data(), a.size()) /
         std::sqrt(dot(a.data(), a.data(), a.size()) * dot(b.data(), b.data(), b.size()));
}

SemanticIndex index_of(const Vectors& rows) {
  SemanticIndex index(rows.at(0).size());
  for (size_t i = 0; i < rows.size(); ++i) index.add(rows[i], i, kLater);
  return index;
}

// The index's similarity of a and b: the match of a one-row index at tau -1.
float indexed_similarity(const std::vector<float>& a, const std::vector<float>& b) {
  return index_of({a}).nearest(b, -1, kNow).match.value().similarity;
}

std::vector<float> random_unit(std::mt19937& rng, size_t dims) {
  std::normal_distribution<float> g;
  std::vector<float> v(dims);
  for (float& x : v) x = g(rng);
  const float norm = std::sqrt(dot(v.data(), v.data(), dims));
  for (float& x : v) x /= norm;
  return v;
}

// a * (1 - t) + b * t.
std::vector<float> mix(const std::vector<float>& a, const std::vector<float>& b, float t) {
  std::vector<float> v(a.size());
  for (size_t i = 0; i < a.size(); ++i) v[i] = a[i] * (1 - t) + b[i] * t;
  return v;
}

// Checks each query's nearest row in `rows` (ids: their indexes) against the
// exact cosines: its similarity within kTolerance of its row's cosine, and
// the row the exact nearest whenever that leads the runner-up by more than
// kClearLead. Returns how many queries had such a lead.
int expect_like_the_exact_scan(const Vectors& rows, const Vectors& queries) {
  const SemanticIndex index = index_of(rows);
  int clear = 0;
  for (size_t q = 0; q < queries.size(); ++q) {
    std::vector<float> exact(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) exact[r] = cosine(rows[r], queries[q]);
    size_t best = 0;
    float runner_up = -2;
    for (size_t r = 1; r < rows.size(); ++r) {
      if (exact[r] > exact[best]) {
        runner_up = exact[best];
        best = r;
      } else {
        runner_up = std::max(runner_up, exact[r]);
      }
    }
    const auto match = index.nearest(queries[q], -1, kNow).match;
    if (!match) {
      ADD_FAILURE() << "no match for query " << q;
      continue;
    }
    EXPECT_NEAR(match->similarity, exact[match->id], kTolerance) << "query " << q;
    if (exact[best] - runner_up > kClearLead) {
      ++clear;
      EXPECT_EQ(match->id, best) << "query " << q << ": exact " << exact[best] << " against " << runner_up;
    }
  }
  return clear;
}

// The n-gram embeddings (the default 1024 dims) of the labeled pairs' prompts.
void embed_pairs(Vectors& a, Vectors& b) {
  const NgramEmbedder embedder;
  for (const LabeledPair& p : read_pairs(LLMSERVE_SEMANTIC_PAIRS)) {
    a.push_back(embedder.embed(p.a));
    b.push_back(embedder.embed(p.b));
  }
}

TEST(SemanticIndex, SimilarityIsTheCosineWithinATolerance) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> t(0, 1);
  for (const size_t dims : {2, 17, 288, 1024, 4096}) {
    for (int i = 0; i < 50; ++i) {
      const std::vector<float> a = random_unit(rng, dims), b = mix(a, random_unit(rng, dims), t(rng));
      EXPECT_NEAR(indexed_similarity(a, b), cosine(a, b), kTolerance) << dims;
    }
  }
  Vectors a, b;
  embed_pairs(a, b);
  for (size_t i = 0; i < a.size(); ++i)
    for (const std::vector<float>& other : {b[i], b[(i + 1) % b.size()]})  // its pair's prompt and another
      EXPECT_NEAR(indexed_similarity(a[i], other), cosine(a[i], other), kTolerance) << i;
}

// The similarity an evaluation reports is the one the index compares.
TEST(SemanticIndex, SimilarityIsTheIndexsAndRefusesWhatTheIndexCannotTake) {
  std::mt19937 rng(4);
  const std::vector<float> a = random_unit(rng, 64), b = mix(a, random_unit(rng, 64), 0.5f);
  EXPECT_EQ(llmserve::gateway::similarity(a, b), indexed_similarity(a, b));
  std::vector<float> nan = b;
  nan[3] = NAN;
  EXPECT_THROW(llmserve::gateway::similarity(a, nan), llmserve::Error);
  EXPECT_THROW(llmserve::gateway::similarity(a, random_unit(rng, 65)), llmserve::Error);
}

TEST(SemanticIndex, IdenticalDirectionsAreExactlySimilar) {
  std::mt19937 rng(3);
  for (const size_t dims : {3, 1024}) {
    const std::vector<float> a = random_unit(rng, dims);
    std::vector<float> twice = a;
    for (float& x : twice) x *= 2;
    EXPECT_EQ(indexed_similarity(a, a), 1.0f);
    EXPECT_EQ(indexed_similarity(a, twice), 1.0f);
  }
}

TEST(SemanticIndex, NearestIsTheExactNearestWhenItLeadsClearly) {
  // Random rows; queries between two rows, so leads range from ties upward.
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> t(0.35f, 0.65f);
  for (const size_t dims : {288, 1024}) {
    Vectors rows, queries;
    for (int i = 0; i < 300; ++i) rows.push_back(random_unit(rng, dims));
    for (int i = 0; i < 200; ++i) queries.push_back(mix(rows[rng() % rows.size()], rows[rng() % rows.size()], t(rng)));
    EXPECT_GT(expect_like_the_exact_scan(rows, queries), 100) << dims;
  }
  // Real prompts: each b against all the a's.
  Vectors a, b;
  embed_pairs(a, b);
  EXPECT_GT(expect_like_the_exact_scan(a, b), 100);
}

TEST(SemanticIndex, NearestIsTheMostSimilarAboveTau) {
  SemanticIndex index(2);
  index.add(std::vector<float>{1, 0}, 10, kLater);
  index.add(std::vector<float>{0.6f, 0.8f}, 11, kLater);
  index.add(std::vector<float>{0, 1}, 12, kLater);
  const auto m = index.nearest(std::vector<float>{0.8f, 0.6f}, 0.5f, kNow).match;
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 11u);  // 0.96, against 0.8 and 0.6
  EXPECT_NEAR(m->similarity, 0.96f, kTolerance);
  EXPECT_FALSE(index.nearest(std::vector<float>{0.8f, 0.6f}, 0.97f, kNow).match);
}

TEST(SemanticIndex, ExpiredRowsNeverMatchAndAreReported) {
  SemanticIndex index(2);
  index.add(std::vector<float>{1, 0}, 1, kNow);  // expires now
  index.add(std::vector<float>{0.6f, 0.8f}, 2, kLater);
  index.add(std::vector<float>{0, 1}, 3, kNow - std::chrono::seconds(1));
  const auto n = index.nearest(std::vector<float>{1, 0}, 0.5f, kNow);
  ASSERT_TRUE(n.match);
  EXPECT_EQ(n.match->id, 2u);
  EXPECT_EQ(n.expired, (std::vector<uint64_t>{1, 3}));
}

TEST(SemanticIndex, RemovingARowMovesTheLastIntoItsPlace) {
  SemanticIndex index(2);
  index.add(std::vector<float>{1, 0}, 1, kLater);
  index.add(std::vector<float>{0, 1}, 2, kLater);
  index.add(std::vector<float>{-1, 0}, 3, kLater);
  EXPECT_EQ(index.remove(0), std::optional<uint64_t>(3));
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.nearest(std::vector<float>{-1, 0}, 0.9f, kNow).match->id, 3u);
  EXPECT_FALSE(index.nearest(std::vector<float>{1, 0}, 0.9f, kNow).match);
  EXPECT_EQ(index.remove(1), std::nullopt);  // the last row: nothing moves
  EXPECT_FALSE(index.nearest(std::vector<float>{0, 1}, 0.9f, kNow).match);
  EXPECT_EQ(index.nearest(std::vector<float>{-1, 0}, 0.9f, kNow).match->id, 3u);
}

}  // namespace
