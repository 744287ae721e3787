#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "server/rate_limiter.h"
#include "temp_file.h"

namespace llmserve::server {
namespace {

using Clock = TokenBucket::Clock;

TEST(ConstantTimeEqual, ComparesContentAndLength) {
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(ApiKeys, BearerHeader) {
  ApiKeys keys({"k1", "k2"});
  EXPECT_FALSE(keys.open());
  const std::string good = "Bearer k2", lower = "bearer k1", wrong = "Bearer k3", basic = "Basic k1";
  EXPECT_EQ(keys.check(&good), "k2");
  EXPECT_EQ(keys.check(&lower), "k1");
  EXPECT_FALSE(keys.check(&wrong));
  EXPECT_FALSE(keys.check(&basic));
  EXPECT_FALSE(keys.check(nullptr));
  EXPECT_TRUE(ApiKeys().open());
}

TEST(ApiKeys, SharesAKeyWith) {
  const ApiKeys api({"k1", "k2"}), admin({"a1", "k2"}), other({"a2"});
  EXPECT_TRUE(admin.shares_a_key_with(api));
  EXPECT_FALSE(other.shares_a_key_with(api));
  EXPECT_FALSE(ApiKeys().shares_a_key_with(api));
}

TEST(ApiKeys, FromFileSkipsCommentsAndBlanks) {
  const llmserve::testing::TempFile file("keys.txt");
  const std::string& path = file.path();
  {
    std::ofstream f(path);
    f << "# keys\n\n  alpha  \r\nbeta\n";
  }
  const ApiKeys keys = ApiKeys::from_file(path);
  EXPECT_EQ(keys.size(), 2u);
  const std::string h = "Bearer alpha";
  EXPECT_TRUE(keys.check(&h));
  {
    std::ofstream f(path);
    f << "# nothing\n";
  }
  EXPECT_THROW(ApiKeys::from_file(path), Error);
  std::filesystem::remove(path);
  EXPECT_THROW(ApiKeys::from_file(path), Error);
}

TEST(TokenBucket, BurstThenRefillAtRate) {
  const auto t0 = Clock::time_point{} + std::chrono::hours(1);
  TokenBucket b(2.0, 3.0, t0);  // 2 per second, burst 3
  double retry = 0;
  EXPECT_TRUE(b.take(1, t0, retry));
  EXPECT_TRUE(b.take(1, t0, retry));
  EXPECT_TRUE(b.take(1, t0, retry));
  EXPECT_FALSE(b.take(1, t0, retry));
  EXPECT_DOUBLE_EQ(retry, 0.5);
  EXPECT_TRUE(b.take(1, t0 + std::chrono::milliseconds(500), retry));
  EXPECT_FALSE(b.take(1, t0 + std::chrono::milliseconds(500), retry));
  // A long pause refills only up to the burst.
  const auto later = t0 + std::chrono::seconds(100);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.take(1, later, retry));
  EXPECT_FALSE(b.take(1, later, retry));
}

TEST(RateLimiter, PerKeyBuckets) {
  RateLimiter off(0, 0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(off.admit("k").admitted);
  RateLimiter rl(1.0, 2.0);
  const auto t = Clock::now();
  EXPECT_TRUE(rl.admit("a", t).admitted);
  EXPECT_TRUE(rl.admit("a", t).admitted);
  const RateDecision refused = rl.admit("a", t);
  EXPECT_FALSE(refused.admitted);
  EXPECT_GT(refused.retry_after_s, 0.0);
  EXPECT_TRUE(rl.admit("b", t).admitted);  // another key has its own bucket
}

TEST(RateLimiter, ReportsLimitRemainingAndReset) {
  RateLimiter rl(2.0, 3.0);  // 2 per second, burst 3
  const auto t = Clock::time_point{} + std::chrono::hours(1);
  const RateDecision a = rl.admit("k", t);
  EXPECT_EQ(a.limit, 3);
  EXPECT_EQ(a.remaining, 2);
  EXPECT_DOUBLE_EQ(a.reset_s, 0.5);
  rl.admit("k", t);
  const RateDecision c = rl.admit("k", t);
  EXPECT_EQ(c.remaining, 0);
  EXPECT_DOUBLE_EQ(c.reset_s, 1.5);
  const RateDecision refused = rl.admit("k", t + std::chrono::milliseconds(250));
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.remaining, 0);
  EXPECT_DOUBLE_EQ(refused.retry_after_s, 0.25);
  EXPECT_DOUBLE_EQ(refused.reset_s, 1.25);
}

TEST(RateLimiter, DurationsAreWrittenAsOpenAIDoes) {
  EXPECT_EQ(duration_text(0), "0s");
  EXPECT_EQ(duration_text(0.02), "20ms");
  EXPECT_EQ(duration_text(1), "1s");
  EXPECT_EQ(duration_text(8.64), "8.64s");
  EXPECT_EQ(duration_text(360), "6m0s");
  EXPECT_EQ(duration_text(3725.5), "1h2m5.5s");
}

}  // namespace
}  // namespace llmserve::server
