#include "gateway/semantic_eval.h"

#include <algorithm>

#include "core/error.h"
#include "gateway/json_lines.h"
#include "gateway/semantic_index.h"

namespace llmserve::gateway {

std::string_view kind_name(PairKind kind) {
  switch (kind) {
    case PairKind::Paraphrase: return "paraphrase";
    case PairKind::Negation: return "negation";
    case PairKind::NumberSwap: return "number_swap";
    case PairKind::EntitySwap: return "entity_swap";
    case PairKind::Unrelated: return "unrelated";
  }
  return "?";
}

namespace {

PairKind parse_kind(const std::string& name, const std::string& where) {
  for (const PairKind k : kPairKinds)
    if (kind_name(k) == name) return k;
  throw Error(where + "unknown kind '" + name +
              "' (paraphrase, negation, number_swap, entity_swap or unrelated)");
}

std::string text_field(const nlohmann::json& line, const char* name, const std::string& where) {
  const auto it = line.find(name);
  if (it == line.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    throw Error(where + "\"" + name + "\" must be a non-empty string");
  return it->get<std::string>();
}

}  // namespace

std::vector<LabeledPair> read_pairs(const std::string& path) {
  std::vector<LabeledPair> pairs;
  for_each_json_line(path, [&](const nlohmann::json& line, const std::string& where) {
    const auto kind = line.find("kind");
    if (kind == line.end() || !kind->is_string()) throw Error(where + "\"kind\" must be a string");
    pairs.push_back({parse_kind(kind->get<std::string>(), where), text_field(line, "a", where),
                     text_field(line, "b", where)});
  });
  if (pairs.empty()) throw Error(path + ": no pairs");
  return pairs;
}

std::vector<KindResult> evaluate(const Embedder& embedder, const std::vector<LabeledPair>& pairs,
                                 const std::vector<double>& taus) {
  std::vector<KindResult> results;
  for (const PairKind kind : kPairKinds) {
    KindResult r;
    r.kind = kind;
    r.hits.assign(taus.size(), 0);
    double sum = 0;
    for (const LabeledPair& p : pairs) {
      if (p.kind != kind) continue;
      const double sim = similarity(embedder.embed(p.a), embedder.embed(p.b));  // what the cache compares with tau
      r.min_similarity = r.pairs ? std::min(r.min_similarity, sim) : sim;
      r.max_similarity = r.pairs ? std::max(r.max_similarity, sim) : sim;
      sum += sim;
      ++r.pairs;
      for (size_t t = 0; t < taus.size(); ++t) r.hits[t] += sim >= taus[t];
    }
    if (!r.pairs) continue;
    r.mean_similarity = sum / r.pairs;
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace llmserve::gateway
