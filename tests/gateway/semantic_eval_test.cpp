// The labeled prompt pairs in tests/data/gateway and the evaluation over
// them (the numbers themselves: `llmserve cache-eval`).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "core/error.h"
#include "gateway/ngram_embedder.h"
#include "gateway/semantic_eval.h"
#include "temp_file.h"

namespace {

using namespace llmserve::gateway;
using llmserve::testing::TempFile;

TEST(SemanticPairs, TheDataSetCoversEveryKind) {
  const std::vector<LabeledPair> pairs = read_pairs(LLMSERVE_SEMANTIC_PAIRS);
  EXPECT_GE(pairs.size(), 150u);
  std::map<PairKind, int> per_kind;
  std::set<std::pair<std::string, std::string>> seen;
  for (const LabeledPair& p : pairs) {
    ++per_kind[p.kind];
    EXPECT_NE(p.a, p.b);
    EXPECT_TRUE(seen.insert({p.a, p.b}).second) << "duplicate: " << p.a << " | " << p.b;
  }
  for (const PairKind k : kPairKinds) EXPECT_GE(per_kind[k], 25) << kind_name(k);
}

TEST(SemanticPairs, EvaluateCountsHitsPerKindAndTau) {
  const std::vector<LabeledPair> pairs = {{PairKind::Paraphrase, "turn on the lights", "Turn on the lights!"},
                                          {PairKind::Paraphrase, "hello there", "write a poem"},
                                          {PairKind::Unrelated, "what is 2 plus 2", "book a flight to Rome"}};
  const std::vector<KindResult> r = evaluate(NgramEmbedder(), pairs, {0.0, 0.5, 0.999});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].kind, PairKind::Paraphrase);
  EXPECT_EQ(r[0].pairs, 2u);
  EXPECT_NEAR(r[0].max_similarity, 1.0, 1e-5);
  EXPECT_EQ(r[0].hits[2], 1u);  // only the identical pair at tau 0.999
  EXPECT_LE(r[0].min_similarity, r[0].mean_similarity);
  EXPECT_EQ(r[1].kind, PairKind::Unrelated);
  EXPECT_EQ(r[1].hits[2], 0u);
}

TEST(SemanticPairs, ParaphrasesScoreAboveUnrelatedPairsOnAverage) {
  const std::vector<KindResult> r = evaluate(NgramEmbedder(), read_pairs(LLMSERVE_SEMANTIC_PAIRS), {});
  double paraphrase = 0, unrelated = 0;
  for (const KindResult& k : r) {
    if (k.kind == PairKind::Paraphrase) paraphrase = k.mean_similarity;
    if (k.kind == PairKind::Unrelated) unrelated = k.mean_similarity;
  }
  EXPECT_GT(paraphrase, unrelated + 0.2);
}

TEST(SemanticPairs, BadLinesAreNamedWithTheirLineNumber) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"kind\":\"paraphrase\",\"a\":\"x\",\"b\":\"y\"}\nnot json\n", ":2: not a JSON object"},
      {"{\"kind\":\"synonym\",\"a\":\"x\",\"b\":\"y\"}\n", ":1: unknown kind 'synonym'"},
      {"{\"kind\":\"negation\",\"a\":\"x\"}\n", ":1: \"b\" must be a non-empty string"},
      {"{\"a\":\"x\",\"b\":\"y\"}\n", ":1: \"kind\" must be a string"},
      {"\n\n", ": no pairs"},
  };
  for (const auto& [text, message] : cases) {
    const TempFile file("pairs.jsonl", [&](const std::string& p) { std::ofstream(p) << text; });
    try {
      read_pairs(file.path());
      ADD_FAILURE() << "no error for: " << text;
    } catch (const llmserve::Error& e) {
      EXPECT_NE(std::string(e.what()).find(file.path() + message), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_pairs("/nonexistent/pairs.jsonl"), llmserve::Error);
}

}  // namespace
