// The hashed character n-gram embedder.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "gateway/ngram_embedder.h"
#include "reference_dot.h"

namespace {

using llmserve::gateway::test::dot;
using llmserve::gateway::NgramConfig;
using llmserve::gateway::NgramEmbedder;

double cosine(const NgramEmbedder& e, const std::string& a, const std::string& b) {
  const std::vector<float> va = e.embed(a), vb = e.embed(b);
  return dot(va.data(), vb.data(), va.size());
}

TEST(NgramEmbedder, NormalizesCaseAndPunctuation) {
  EXPECT_EQ(NgramEmbedder::normalize("Turn ON the  lights, please!"), " turn on the lights please ");
  EXPECT_EQ(NgramEmbedder::normalize("  "), " ");
  EXPECT_EQ(NgramEmbedder::normalize("Café 12"), " caf\xc3\xa9 12 ");  // UTF-8 bytes are kept
}

TEST(NgramEmbedder, VectorsHaveUnitLength) {
  const NgramEmbedder e;
  for (const char* text : {"a", "hi", "What is the capital of France?", "x y z"}) {
    const std::vector<float> v = e.embed(text);
    ASSERT_EQ(v.size(), 1024u);
    EXPECT_NEAR(dot(v.data(), v.data(), v.size()), 1.0, 1e-5) << text;
  }
}

TEST(NgramEmbedder, TextWithoutCharactersGivesZeros) {
  const std::vector<float> v = NgramEmbedder().embed("?!");
  EXPECT_EQ(dot(v.data(), v.data(), v.size()), 0.0f);
}

TEST(NgramEmbedder, SimilarTextsAreCloserThanUnrelatedOnes) {
  const NgramEmbedder e;
  EXPECT_NEAR(cosine(e, "What is the capital of France?", "what is the capital of france"), 1.0, 1e-5);
  const double near = cosine(e, "What is the capital of France?", "What's the capital city of France?");
  const double far = cosine(e, "What is the capital of France?", "Write a haiku about autumn leaves.");
  EXPECT_GT(near, 0.5);
  EXPECT_LT(far, 0.2);
}

TEST(NgramEmbedder, ConfigIsChecked) {
  EXPECT_EQ(NgramEmbedder({2, 3, 288}).embed("hello").size(), 288u);
  for (const NgramConfig bad : {NgramConfig{0, 3, 64}, NgramConfig{4, 3, 64}, NgramConfig{3, 17, 64}}) {
    try {
      NgramEmbedder e(bad);
      ADD_FAILURE() << bad.min_n << ".." << bad.max_n;
    } catch (const llmserve::Error& err) {
      EXPECT_NE(std::string(err.what()).find("n-gram sizes"), std::string::npos) << err.what();
    }
  }
  EXPECT_THROW(NgramEmbedder({3, 5, 0}), llmserve::Error);
}

}  // namespace
