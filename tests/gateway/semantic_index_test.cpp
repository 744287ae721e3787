// The semantic layer's flat index: dot products, nearest match, removal.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gateway/semantic_index.h"

namespace {

using llmserve::gateway::dot;
using llmserve::gateway::SemanticIndex;
using llmserve::gateway::TimePoint;

const TimePoint kNow{};
const TimePoint kLater = kNow + std::chrono::hours(1);

TEST(SemanticIndex, DotMatchesTheNaiveSumForEveryLength) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (size_t n = 0; n < 40; ++n) {
    std::vector<float> a(n), b(n);
    double expected = 0;
    for (size_t i = 0; i < n; ++i) {
      a[i] = u(rng);
      b[i] = u(rng);
      expected += double{a[i]} * b[i];
    }
    EXPECT_NEAR(dot(a.data(), b.data(), n), expected, 1e-5) << n;
  }
}

TEST(SemanticIndex, NearestIsTheMostSimilarAboveTau) {
  SemanticIndex index(2);
  index.add(std::vector<float>{1, 0}, 10, kLater);
  index.add(std::vector<float>{0.6f, 0.8f}, 11, kLater);
  index.add(std::vector<float>{0, 1}, 12, kLater);
  const auto m = index.nearest(std::vector<float>{0.8f, 0.6f}, 0.5f, kNow);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 11u);  // 0.96, against 0.8 and 0.6
  EXPECT_NEAR(m->similarity, 0.96f, 1e-6);
  EXPECT_FALSE(index.nearest(std::vector<float>{0.8f, 0.6f}, 0.97f, kNow));
}

TEST(SemanticIndex, ExpiredRowsNeverMatch) {
  SemanticIndex index(2);
  index.add(std::vector<float>{1, 0}, 1, kNow);  // expires now
  index.add(std::vector<float>{0.6f, 0.8f}, 2, kLater);
  const auto m = index.nearest(std::vector<float>{1, 0}, 0.5f, kNow);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->id, 2u);
}

TEST(SemanticIndex, RemovingARowMovesTheLastIntoItsPlace) {
  SemanticIndex index(2);
  index.add(std::vector<float>{1, 0}, 1, kLater);
  index.add(std::vector<float>{0, 1}, 2, kLater);
  index.add(std::vector<float>{-1, 0}, 3, kLater);
  EXPECT_EQ(index.remove(0), std::optional<uint64_t>(3));
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.nearest(std::vector<float>{-1, 0}, 0.9f, kNow)->id, 3u);
  EXPECT_FALSE(index.nearest(std::vector<float>{1, 0}, 0.9f, kNow));
  EXPECT_EQ(index.remove(1), std::nullopt);  // the last row: nothing moves
  EXPECT_FALSE(index.nearest(std::vector<float>{0, 1}, 0.9f, kNow));
  EXPECT_EQ(index.nearest(std::vector<float>{-1, 0}, 0.9f, kNow)->id, 3u);
}

}  // namespace
