#pragma once
// Measuring an embedder for the semantic cache: labeled prompt pairs (one
// JSON object a line: {"kind": ..., "a": ..., "b": ...}) and, for each kind
// and each tau, how many pairs' cosine similarity reaches tau, which is when
// the cache would answer b with a's answer. Only paraphrases should.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/embedder.h"

namespace llmserve::gateway {

enum class PairKind { Paraphrase, Negation, NumberSwap, EntitySwap, Unrelated };
inline constexpr std::array kPairKinds = {PairKind::Paraphrase, PairKind::Negation, PairKind::NumberSwap,
                                          PairKind::EntitySwap, PairKind::Unrelated};
// "paraphrase", "negation", "number_swap", "entity_swap", "unrelated"
std::string_view kind_name(PairKind kind);

struct LabeledPair {
  PairKind kind = PairKind::Paraphrase;
  std::string a;
  std::string b;
};

// Throws Error naming the file, the line and what is wrong.
std::vector<LabeledPair> read_pairs(const std::string& path);

struct KindResult {
  PairKind kind = PairKind::Paraphrase;
  size_t pairs = 0;
  double mean_similarity = 0;
  double min_similarity = 0;
  double max_similarity = 0;
  std::vector<size_t> hits;  // per tau: pairs with similarity >= tau
};

// One KindResult per kind present in `pairs`, in kPairKinds' order.
std::vector<KindResult> evaluate(const Embedder& embedder, const std::vector<LabeledPair>& pairs,
                                 const std::vector<double>& taus);

}  // namespace llmserve::gateway
