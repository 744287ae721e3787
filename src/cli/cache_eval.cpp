// llmserve cache-eval: how well an embedder separates prompts the semantic
// cache may answer alike (paraphrases) from ones it must not (negations,
// number and entity swaps, unrelated prompts), as hit rates over a tau sweep.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/cache_eval_verified.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "gateway/ngram_embedder.h"
#include "gateway/semantic_eval.h"
#include "gateway/semantic_index.h"

namespace llmserve::cli {

namespace {

struct CacheEvalOptions {
  std::string data;
  std::vector<double> taus = {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95};
  gateway::NgramConfig ngram;
  VerifiedEvalOptions verified;  // with --model
};

double percent(size_t part, size_t whole) { return whole ? 100.0 * part / whole : 0; }

void run_cache_eval(const CacheEvalOptions& o) {
  const std::vector<gateway::LabeledPair> pairs = gateway::read_pairs(o.data);
  if (!o.verified.model.empty()) return run_verified_eval(o.verified, pairs, o.taus);
  const gateway::NgramEmbedder embedder(o.ngram);
  const std::vector<gateway::KindResult> results = gateway::evaluate(embedder, pairs, o.taus);
  std::printf("n-gram embedder (%d-%d grams, %d dims), %zu pairs from %s\n", o.ngram.min_n, o.ngram.max_n,
              o.ngram.dims, pairs.size(), o.data.c_str());
  std::printf("%-12s %5s  %-20s  hit rate (%%) at tau\n", "", "", "cosine");
  std::printf("%-12s %5s  %6s %6s %6s ", "kind", "pairs", "mean", "min", "max");
  for (const double tau : o.taus) std::printf(" %5.2f", tau);
  std::printf("\n");
  std::vector<size_t> false_hits(o.taus.size(), 0);
  size_t negatives = 0;
  for (const gateway::KindResult& r : results) {
    std::printf("%-12s %5zu  %6.3f %6.3f %6.3f ", std::string(gateway::kind_name(r.kind)).c_str(), r.pairs,
                r.mean_similarity, r.min_similarity, r.max_similarity);
    for (const size_t hits : r.hits) std::printf(" %5.1f", percent(hits, r.pairs));
    std::printf("\n");
    if (r.kind == gateway::PairKind::Paraphrase) continue;
    negatives += r.pairs;
    for (size_t t = 0; t < o.taus.size(); ++t) false_hits[t] += r.hits[t];
  }
  std::printf("%-12s %5zu  %20s ", "false hits", negatives, "(all but paraphrase)");
  for (const size_t hits : false_hits) std::printf(" %5.1f", percent(hits, negatives));
  std::printf("\n");
}

}  // namespace

void add_cache_eval(CLI::App& app) {
  auto o = std::make_shared<CacheEvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "cache-eval", "Hit rates of the semantic cache's n-gram embedder on labeled prompt pairs, over a tau sweep");
  cmd->add_option("--data", o->data, "JSONL file of {\"kind\", \"a\", \"b\"} pairs (tests/data/gateway/semantic_pairs.jsonl)")
      ->required();
  cmd->add_option("--tau", o->taus, "Comma-separated thresholds")->delimiter(',')->check(in_range(0, 1))->capture_default_str();
  cmd->add_option("--ngram-min", o->ngram.min_n, "Shortest n-gram")->check(in_range(1, 16))->capture_default_str();
  cmd->add_option("--ngram-max", o->ngram.max_n, "Longest n-gram")->check(in_range(1, 16))->capture_default_str();
  cmd->add_option("--dims", o->ngram.dims, "Hashed dimensions")
      ->check(in_range(1, static_cast<int>(gateway::SemanticIndex::kMaxDims)))
      ->capture_default_str();
  cmd->add_option("--model", o->verified.model,
                  "GGUF model: cache its greedy answer to each pair's first prompt and report hits with and without "
                  "verification by the model (see serve --cache-verify)");
  cmd->add_option("--embedder", o->verified.embedder, "With --model: ngram, or model (the model's own embeddings)")
      ->capture_default_str();
  cmd->add_option("--answer-tokens", o->verified.answer_tokens, "With --model: tokens of each cached answer")
      ->capture_default_str()
      ->check(in_range(1, 1024));
  cmd->add_option("--margin", o->verified.margin, "With --model: nats of mean log-probability a verified hit may lose")
      ->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("-t,--threads", o->verified.threads, "With --model: compute threads (0: default)")->check(at_least(0));
  cmd->callback([o] { run_cache_eval(*o); });
}

}  // namespace llmserve::cli
