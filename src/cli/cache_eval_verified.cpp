#include "cli/cache_eval_verified.h"

#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "cli/default_model.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "gateway/ngram_embedder.h"
#include "gateway/semantic_index.h"
#include "model/instance.h"

namespace llmserve::cli {

namespace {

// One engine request, waited for: its tokens' logprobs and its finished output.
struct Done {
  std::vector<engine::GeneratedToken> tokens;
  engine::RequestOutput last;
};

Done run_one(engine::Engine& eng, engine::RequestParams p) {
  Done d;
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  eng.submit(std::move(p), [&](const engine::RequestOutput& out) {
    std::lock_guard lock(mu);
    d.tokens.insert(d.tokens.end(), out.tokens.begin(), out.tokens.end());
    if (!out.finished) return;
    d.last = out;
    finished = true;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return finished; });
  if (d.last.finish_reason == engine::FinishReason::Error) throw Error("engine: " + d.last.error);
  return d;
}

struct PairResult {
  float similarity = 0;
  bool verified = false;
  double original = 0, offered = 0;  // mean log-probabilities of a's answer after a and after b
};

}  // namespace

void run_verified_eval(const VerifiedEvalOptions& o, const std::vector<gateway::LabeledPair>& pairs,
                       const std::vector<double>& taus) {
  if (o.embedder != "ngram" && o.embedder != "model") throw Error("--embedder must be ngram or model, not '" + o.embedder + "'");
  ThreadPool pool(o.threads > 0 ? o.threads : default_thread_count());
  model::InstanceConfig config;
  config.kv_blocks = 64;
  const auto model = model::LoadedModel::load(resolve_model(o.model), pool, config);
  engine::Engine eng({model.get()}, {.max_seqs = 4});
  const tok::Tokenizer& tok = model->tokenizer();
  const gateway::NgramEmbedder ngram;
  auto embed = [&](const std::string& text, const std::vector<int32_t>& tokens) {
    if (o.embedder == "ngram") return ngram.embed(text);
    engine::RequestParams p;
    p.prompt = tokens;
    p.embed = true;
    return run_one(eng, std::move(p)).last.embedding;
  };

  std::vector<PairResult> results;
  for (const gateway::LabeledPair& pair : pairs) {
    const std::vector<int32_t> a = tok.encode(pair.a, tok.add_bos_by_default(), false);
    const std::vector<int32_t> b = tok.encode(pair.b, tok.add_bos_by_default(), false);
    engine::RequestParams gen;
    gen.prompt = a;
    gen.sampling.temperature = 0;
    gen.max_new_tokens = o.answer_tokens;
    gen.top_logprobs = 0;
    const Done answer = run_one(eng, std::move(gen));
    PairResult r;
    r.similarity = gateway::similarity(embed(pair.a, a), embed(pair.b, b));  // what the cache compares with tau
    if (!answer.tokens.empty()) {
      std::vector<int32_t> scored = b;
      for (const auto& t : answer.tokens) {
        r.original += t.logprob;
        scored.push_back(t.token);
      }
      r.original /= static_cast<double>(answer.tokens.size());
      engine::RequestParams score;
      score.prompt = std::move(scored);
      score.score_from = static_cast<int>(b.size());
      const Done s = run_one(eng, std::move(score));
      r.offered = s.last.score_logprob / s.last.scored_tokens;
      r.verified = r.offered >= r.original - o.margin;
    }
    results.push_back(r);
  }

  std::printf("verified hits: %s, embedder %s, answers of %d greedy tokens, margin %.2f nats\n", o.model.c_str(),
              o.embedder.c_str(), o.answer_tokens, o.margin);
  std::printf("%-12s %5s %9s %7s  found / kept after verification, at tau\n", "kind", "pairs", "verified", "mean d");
  std::printf("%-12s %5s %9s %7s ", "", "", "(any tau)", "(nats)");
  for (const double tau : taus) std::printf("  %9.2f", tau);
  std::printf("\n");
  for (const gateway::PairKind kind : gateway::kPairKinds) {
    size_t n = 0, verified = 0;
    double drop = 0;  // the answer's mean log-probability after b less after a, summed
    for (size_t i = 0; i < pairs.size(); ++i)
      if (pairs[i].kind == kind) {
        ++n;
        verified += results[i].verified;
        drop += results[i].offered - results[i].original;
      }
    if (n == 0) continue;
    std::printf("%-12s %5zu %9zu %7.3f ", std::string(gateway::kind_name(kind)).c_str(), n, verified, drop / n);
    for (const double tau : taus) {
      size_t found = 0, kept = 0;
      for (size_t i = 0; i < pairs.size(); ++i) {
        const bool hit = pairs[i].kind == kind && results[i].similarity >= tau;
        found += hit;
        kept += hit && results[i].verified;
      }
      std::printf("  %4zu/%4zu", found, kept);
    }
    std::printf("\n");
  }
}

}  // namespace llmserve::cli
