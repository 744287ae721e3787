// Canonical cache keys: a change in any field changes the exact key; only
// the prompt leaves the semantic namespace as it is.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gateway/cache_key.h"

namespace {

using llmserve::gateway::CacheKey;
using llmserve::gateway::encode;

CacheKey base() {
  return CacheKey{.tenant = "key-1",
                  .model = "m",
                  .endpoint = "chat",
                  .prompt_tokens = {1, 2, 3},
                  .max_tokens = 16,
                  .temperature = 0.7f,
                  .seed = 42,
                  .stop = {"\n"}};
}

// Strings are assigned as std::string(...): GCC 12 at -O3 gives a false
// -Wrestrict warning on assigning some literals to these members.
// One change per field, every one of them away from base().
const std::vector<std::pair<std::string, std::function<void(CacheKey&)>>> kChanges = {
    {"tenant", [](CacheKey& k) { k.tenant = std::string("key-2"); }},
    {"model", [](CacheKey& k) { k.model = std::string("m2"); }},
    {"endpoint", [](CacheKey& k) { k.endpoint = std::string("completions"); }},
    {"max_tokens", [](CacheKey& k) { k.max_tokens = 17; }},
    {"temperature", [](CacheKey& k) { k.temperature = 0.70001f; }},
    {"top_k", [](CacheKey& k) { k.top_k = 40; }},
    {"top_p", [](CacheKey& k) { k.top_p = 0.9f; }},
    {"min_p", [](CacheKey& k) { k.min_p = 0.05f; }},
    {"repetition_penalty", [](CacheKey& k) { k.repetition_penalty = 1.1f; }},
    {"repetition_window", [](CacheKey& k) { k.repetition_window = 64; }},
    {"presence_penalty", [](CacheKey& k) { k.presence_penalty = 0.5f; }},
    {"frequency_penalty", [](CacheKey& k) { k.frequency_penalty = 0.5f; }},
    {"seed", [](CacheKey& k) { k.seed = 43; }},
    {"seed absent", [](CacheKey& k) { k.seed.reset(); }},
    {"n", [](CacheKey& k) { k.n = 2; }},
    {"logprobs", [](CacheKey& k) { k.top_logprobs = 0; }},
    {"speculative", [](CacheKey& k) { k.speculative = false; }},
    {"stop", [](CacheKey& k) { k.stop = {"\n\n"}; }},
    {"no stop", [](CacheKey& k) { k.stop.clear(); }},
};

TEST(CacheKey, IdenticalRequestsEncodeAlike) {
  EXPECT_EQ(encode(base()).exact, encode(base()).exact);
  EXPECT_EQ(encode(base()).semantic_namespace, encode(base()).semantic_namespace);
}

TEST(CacheKey, EveryFieldChangesBothKeys) {
  std::set<std::string> exact = {encode(base()).exact};
  std::set<std::string> namespaces = {encode(base()).semantic_namespace};
  for (const auto& [field, change] : kChanges) {
    CacheKey k = base();
    change(k);
    EXPECT_TRUE(exact.insert(encode(k).exact).second) << field;
    EXPECT_TRUE(namespaces.insert(encode(k).semantic_namespace).second) << field;
  }
}

TEST(CacheKey, ThePromptChangesOnlyTheExactKey) {
  CacheKey k = base();
  k.prompt_tokens = {1, 2, 4};
  EXPECT_NE(encode(k).exact, encode(base()).exact);
  EXPECT_EQ(encode(k).semantic_namespace, encode(base()).semantic_namespace);
  k = base();
  k.input = std::string("Hello");
  EXPECT_NE(encode(k).exact, encode(base()).exact);
  EXPECT_EQ(encode(k).semantic_namespace, encode(base()).semantic_namespace);
}

TEST(CacheKey, FieldBoundariesCannotBeShifted) {
  CacheKey a = base(), b = base();
  a.tenant = std::string("ab");
  a.model = std::string("c");
  b.tenant = std::string("a");
  b.model = std::string("bc");
  EXPECT_NE(encode(a).exact, encode(b).exact);
  a = b = base();
  a.stop = {"ab"};
  b.stop = {"a", "b"};
  EXPECT_NE(encode(a).exact, encode(b).exact);
  a = b = base();
  a.seed = 0;
  b.seed.reset();
  EXPECT_NE(encode(a).exact, encode(b).exact);
  a = b = base();
  a.prompt_tokens = {0x01020304};
  b.prompt_tokens = {0x01, 0x02};
  EXPECT_NE(encode(a).exact, encode(b).exact);
}

TEST(CacheKey, NegativeZeroIsZero) {
  CacheKey a = base(), b = base();
  a.temperature = 0.0f;
  b.temperature = -0.0f;
  EXPECT_EQ(encode(a).exact, encode(b).exact);
}

}  // namespace
