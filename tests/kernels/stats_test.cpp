// median(): the middle value, the mean of the middle two for an even count,
// whatever the input order; 0 for no values.
#include "core/stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace llmserve {
namespace {

TEST(Median, OddCountIsTheMiddleValue) {
  EXPECT_EQ(median({3.0}), 3.0);
  EXPECT_EQ(median({5.0, 1.0, 4.0}), 4.0);
  EXPECT_EQ(median({9.0, -2.0, 7.0, 7.0, 0.5}), 7.0);
}

TEST(Median, EvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_EQ(median({2.0, 1.0}), 1.5);
  EXPECT_EQ(median({10.0, 1.0, 4.0, 2.0}), 3.0);
  EXPECT_EQ(median({6.0, 6.0, 1.0, 8.0, 6.0, 0.0}), 6.0);
}

TEST(Median, NoValuesIsZero) { EXPECT_EQ(median({}), 0.0); }

}  // namespace
}  // namespace llmserve
