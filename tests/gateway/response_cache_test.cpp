// The response cache: exact and semantic hits, TTL, the memory bound,
// namespaces, validation, concurrent use. Time is a manual clock.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "gateway/response_cache.h"

namespace {

using namespace llmserve::gateway;
using std::chrono::milliseconds;

const milliseconds kHour = std::chrono::hours(1);

struct ManualClock {
  TimePoint now{};
  CacheConfig config(size_t max_bytes = size_t{1} << 20) {
    CacheConfig c;
    c.max_bytes = max_bytes;
    c.clock = [this] { return now; };
    return c;
  }
};

// Strings are assigned as std::string(...): GCC 12 at -O3 gives a false
// -Wrestrict warning on assigning some literals to these members.
CacheKey key(std::vector<int32_t> prompt = {1, 2, 3}) {
  CacheKey k;
  k.tenant = std::string("tenant-a");
  k.model = std::string("m");
  k.endpoint = std::string("chat");
  k.prompt_tokens = std::move(prompt);
  k.max_tokens = 32;
  k.temperature = 0;
  return k;
}

CachedAnswer answer(const std::string& text) {
  CachedAnswer a;
  a.choices.push_back({text, {7, 8}, "stop", ""});
  a.prompt_tokens = 3;
  a.completion_tokens = 2;
  return a;
}

std::string text_of(const CacheLookup& r) { return r.hit ? r.hit->answer->choices.at(0).text : "(miss)"; }

// A unit vector at `degrees` from {1, 0} in the plane: cos to it = cos(degrees).
std::vector<float> at_angle(double degrees) {
  const double r = degrees * std::numbers::pi / 180;
  return {static_cast<float>(std::cos(r)), static_cast<float>(std::sin(r))};
}

TEST(ResponseCache, ExactHitsOnlyForTheIdenticalRequest) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  ASSERT_TRUE(cache.insert(key(), {}, answer("hello"), kHour));
  const CacheLookup same = cache.lookup(key());
  ASSERT_TRUE(same.hit);
  EXPECT_EQ(same.hit->layer, CacheLayer::Exact);
  EXPECT_EQ(text_of(same), "hello");

  CacheKey other_n = key(), other_temp = key(), other_model = key(), other_tenant = key(), other_prompt = key();
  other_n.n = 2;
  other_temp.temperature = 0.5f;
  other_model.model = std::string("m2");
  other_tenant.tenant = std::string("tenant-b");
  other_prompt.prompt_tokens.push_back(4);
  for (const CacheKey& k : {other_n, other_temp, other_model, other_tenant, other_prompt})
    EXPECT_FALSE(cache.lookup(k).hit);

  const CacheStats s = cache.stats();
  EXPECT_EQ(s.exact_queries, 6u);
  EXPECT_EQ(s.exact_hits, 1u);
  EXPECT_EQ(s.semantic_queries, 0u);  // no tau for the model: no semantic layer
  EXPECT_EQ(s.entries, 1u);
}

TEST(ResponseCache, SemanticHitWhenTheCosineReachesTau) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  cache.set_semantic_tau("m", 0.9);
  ASSERT_TRUE(cache.insert(key({1}), at_angle(0), answer("a"), kHour));
  ASSERT_TRUE(cache.insert(key({2}), at_angle(90), answer("b"), kHour));

  const CacheLookup near_a = cache.lookup(key({3}), at_angle(20));  // cos 0.94
  ASSERT_TRUE(near_a.hit);
  EXPECT_EQ(near_a.hit->layer, CacheLayer::Semantic);
  EXPECT_EQ(text_of(near_a), "a");
  EXPECT_NEAR(near_a.hit->similarity, std::cos(20 * std::numbers::pi / 180), 0.01);  // int8 codes' cosine
  EXPECT_EQ(text_of(cache.lookup(key({3}), at_angle(80))), "b");  // the nearest of the two
  EXPECT_FALSE(cache.lookup(key({3}), at_angle(45)).hit);         // cos 0.71 to both

  const CacheStats s = cache.stats();
  EXPECT_EQ(s.semantic_queries, 3u);
  EXPECT_EQ(s.semantic_hits, 2u);
}

TEST(ResponseCache, TauDecidesTheHit) {
  for (const double tau : {0.0, 0.5, 0.9, 0.99, 1.0}) {
    ManualClock clock;
    ResponseCache cache(clock.config());
    cache.set_semantic_tau("m", tau);
    ASSERT_TRUE(cache.insert(key({1}), at_angle(0), answer("a"), kHour));
    EXPECT_EQ(cache.lookup(key({2}), at_angle(30)).hit.has_value(), std::cos(30 * std::numbers::pi / 180) >= tau) << tau;
    EXPECT_TRUE(cache.lookup(key({2}), at_angle(0)).hit) << tau;  // the same embedding
  }
}

TEST(ResponseCache, OnlyTheEmbeddingsDirectionCounts) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  cache.set_semantic_tau("m", 0.99);
  ASSERT_TRUE(cache.insert(key({1}), std::vector<float>{3, 4}, answer("a"), kHour));
  const CacheLookup r = cache.lookup(key({2}), std::vector<float>{0.3f, 0.4f});
  ASSERT_TRUE(r.hit);
  EXPECT_NEAR(r.hit->similarity, 1.0f, 1e-6);
  EXPECT_FALSE(cache.lookup(key({2}), std::vector<float>{0, 0}).hit);  // nothing to compare
}

TEST(ResponseCache, SemanticNamespacesAreIsolated) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  cache.set_semantic_tau("m", 0.5);
  cache.set_semantic_tau("m2", 0.5);
  ASSERT_TRUE(cache.insert(key({1}), at_angle(0), answer("a"), kHour));
  CacheKey tenant = key({2}), model = key({2}), sampling = key({2}), n = key({2});
  tenant.tenant = std::string("tenant-b");
  model.model = std::string("m2");
  sampling.max_tokens = 64;
  n.n = 3;
  for (const CacheKey& k : {tenant, model, sampling, n}) EXPECT_FALSE(cache.lookup(k, at_angle(0)).hit);
  EXPECT_FALSE(cache.lookup(key({2}), std::vector<float>{1, 0, 0}).hit);  // another embedder's length
  EXPECT_TRUE(cache.lookup(key({2}), at_angle(0)).hit);
}

TEST(ResponseCache, EntriesExpireAfterTheirTtl) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  cache.set_semantic_tau("m", 0.9);
  ASSERT_TRUE(cache.insert(key({1}), at_angle(0), answer("a"), milliseconds(1000)));
  clock.now += milliseconds(999);
  EXPECT_TRUE(cache.lookup(key({1})).hit);
  EXPECT_TRUE(cache.lookup(key({2}), at_angle(0)).hit);
  clock.now += milliseconds(1);
  EXPECT_FALSE(cache.lookup(key({2}), at_angle(0)).hit);
  EXPECT_EQ(cache.stats().entries, 0u);  // the semantic scan met it and removed it
  EXPECT_FALSE(cache.lookup(key({1}), at_angle(0)).hit);
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.expirations, 1u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.bytes, 0u);
  ASSERT_TRUE(cache.insert(key({1}), at_angle(0), answer("b"), milliseconds(1000)));  // and can be stored again
  EXPECT_EQ(text_of(cache.lookup(key({1}))), "b");
}

TEST(ResponseCache, TheSameKeyReplacesItsEntry) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  ASSERT_TRUE(cache.insert(key(), {}, answer("first"), kHour));
  const size_t bytes = cache.stats().bytes;
  ASSERT_TRUE(cache.insert(key(), {}, answer("other"), kHour));
  EXPECT_EQ(text_of(cache.lookup(key())), "other");
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, bytes);
}

TEST(ResponseCache, BytesStayWithinTheBoundUnderChurn) {
  const size_t max_bytes = 64 << 10;
  ManualClock clock;
  ResponseCache cache(clock.config(max_bytes));
  cache.set_semantic_tau("m", 0.95);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> text_len(0, 3000);
  std::normal_distribution<float> g;
  for (int i = 0; i < 3000; ++i) {
    std::vector<float> e(64);
    for (float& x : e) x = g(rng);
    ASSERT_TRUE(cache.insert(key({i}), e, answer(std::string(text_len(rng), 'x')), kHour));
    ASSERT_LE(cache.stats().bytes, max_bytes) << i;
  }
  const CacheStats s = cache.stats();
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.insertions, 3000u);
  EXPECT_EQ(s.entries + s.evictions, 3000u);
  EXPECT_TRUE(cache.lookup(key({2999})).hit);
  EXPECT_FALSE(cache.lookup(key({0})).hit);
}

TEST(ResponseCache, EvictionIsLeastRecentlyUsedFirst) {
  ManualClock clock;
  CacheConfig config = clock.config();
  {
    ResponseCache probe(clock.config());
    probe.insert(key({0}), {}, answer("x"), kHour);
    config.max_bytes = 3 * probe.stats().bytes;  // room for three such entries
  }
  ResponseCache cache(config);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.insert(key({i}), {}, answer("x"), kHour));
  ASSERT_TRUE(cache.lookup(key({0})).hit);  // 1 is now the least recently used
  ASSERT_TRUE(cache.insert(key({3}), {}, answer("x"), kHour));
  EXPECT_TRUE(cache.lookup(key({0})).hit);
  EXPECT_FALSE(cache.lookup(key({1})).hit);
  EXPECT_TRUE(cache.lookup(key({2})).hit);
  EXPECT_TRUE(cache.lookup(key({3})).hit);
}

TEST(ResponseCache, AnEntryBeyondTheBoundIsNotStored) {
  ManualClock clock;
  ResponseCache cache(clock.config(4096));
  ASSERT_TRUE(cache.insert(key({1}), {}, answer("small"), kHour));
  EXPECT_FALSE(cache.insert(key({2}), {}, answer(std::string(8192, 'x')), kHour));
  EXPECT_TRUE(cache.lookup(key({1})).hit);  // nothing was evicted for it
}

TEST(ResponseCache, ClearEmptiesBothLayers) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  cache.set_semantic_tau("m", 0.5);
  ASSERT_TRUE(cache.insert(key({1}), at_angle(0), answer("a"), kHour));
  cache.clear();
  EXPECT_FALSE(cache.lookup(key({1}), at_angle(0)).hit);
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
  ASSERT_TRUE(cache.insert(key({1}), at_angle(0), answer("a"), kHour));
  EXPECT_TRUE(cache.lookup(key({2}), at_angle(0)).hit);
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const llmserve::Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ResponseCache, BadSettingsAreRefusedByName) {
  ManualClock clock;
  ResponseCache cache(clock.config());
  for (const double tau : {-0.01, 1.01, std::numeric_limits<double>::quiet_NaN()})
    expect_error([&] { cache.set_semantic_tau("m", tau); }, "tau) for model 'm' must be between 0 and 1");
  for (const auto ttl : {milliseconds(0), milliseconds(-5)})
    expect_error([&] { cache.insert(key(), {}, answer("a"), ttl); }, "cache TTL must be greater than 0");
  expect_error([&] { ResponseCache(clock.config(0)); }, "max_bytes must be greater than 0");
  const std::vector<float> nan = {1, std::numeric_limits<float>::quiet_NaN()};
  expect_error([&] { cache.lookup(key(), nan); }, "not finite");
  const std::vector<float> too_long(SemanticIndex::kMaxDims + 1, 1.0f);
  expect_error([&] { cache.insert(key(), too_long, answer("a"), kHour); }, "values; at most 131072 are supported");
  EXPECT_EQ(cache.stats().entries, 0u);
}

// Threads look up and insert the same few keys (semantic too) and clear now
// and then; each key's answer names the key, and its embedding is
// orthogonal to the others', so any hit must carry that key's answer.
TEST(ResponseCache, ConcurrentLookupsAndInsertsOfTheSameKeys) {
  constexpr int kKeys = 8, kThreads = 8, kRounds = 3000;
  ManualClock clock;
  const size_t max_bytes = 4 << 10;  // small enough to evict all the time
  ResponseCache cache(clock.config(max_bytes));
  cache.set_semantic_tau("m", 0.9);
  auto embedding = [](int k) {
    std::vector<float> e(kKeys, 0.0f);
    e[k] = 1;
    return e;
  };
  std::atomic<int> wrong{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kRounds; ++i) {
        const int k = static_cast<int>(rng() % kKeys);
        // Half the lookups use another prompt: only the semantic layer can answer them.
        const CacheLookup r = cache.lookup(key({k, static_cast<int>(rng() % 2)}), embedding(k));
        if (r.hit) {
          ++hits;
          if (r.hit->answer->choices.at(0).text != std::to_string(k)) ++wrong;
        } else {
          cache.insert(key({k, 0}), embedding(k), answer(std::to_string(k)), kHour);
        }
        if (i % 1000 == 999 && t == 0) cache.clear();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  const CacheStats s = cache.stats();
  EXPECT_EQ(s.exact_queries, uint64_t{kThreads} * kRounds);
  EXPECT_EQ(s.exact_hits + s.semantic_hits, static_cast<uint64_t>(hits));
  EXPECT_GT(s.semantic_hits, 0u);
  EXPECT_LE(s.bytes, max_bytes);
}

}  // namespace
