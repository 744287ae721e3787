// llmserve bench --embed: embedding throughput set against prefill
// throughput, through the same engine over the same model. Each round runs
// kRequests inputs of -p random tokens twice: as completions of one token
// (the prompt's prefill, then one sampled token) and as embeddings (the same
// prefill, pooled), alternating A B A B so slow phases of a shared host
// spread over both; tokens/s per round, medians.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>

#include "cli/bench.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "engine/engine.h"

namespace llmserve::cli {

namespace {

constexpr int kRequests = 16;

// Submits one request per prompt at once; returns the prompt tokens per second until the last finished.
double run_round(engine::Engine& eng, const std::vector<std::vector<int32_t>>& prompts, bool embed) {
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::string error;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& prompt : prompts) {
    engine::RequestParams p;
    p.prompt = prompt;
    p.embed = embed;
    p.sampling.temperature = 0.0f;
    p.max_new_tokens = 1;
    eng.submit(std::move(p), [&](const engine::RequestOutput& out) {
      if (!out.finished) return;
      std::lock_guard lock(mu);
      if (out.finish_reason == engine::FinishReason::Error) error = out.error;
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done == prompts.size(); });
  if (!error.empty()) throw Error("benchmark request failed: " + error);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(prompts.size() * prompts[0].size()) / seconds;
}

}  // namespace

void run_embed_bench(const BenchOptions& o) {
  if (o.prompt_tokens < 1 || o.reps < 1) throw Error("-p and --reps must be >= 1");
  if (o.depth != 0) throw Error("-d applies to the single-sequence bench, not to --embed");
  if (!o.batches.empty()) throw Error("--embed and --batch are separate benches: give one");
  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  ThreadPool pool(threads);
  model::InstanceConfig config;  // the server's step size (--max-batch-tokens)
  const auto kv_type = gguf::type_info_by_name(o.kv_type);
  if (!kv_type) throw Error("unknown --kv-type '" + o.kv_type + "'");
  config.kv_type = kv_type->type;
  config.kv_blocks = kRequests * ((o.prompt_tokens + config.block_size) / config.block_size) + 1;
  const auto model = model::LoadedModel::load(resolve_model(o.model), pool, config);
  if (o.prompt_tokens >= model->info().max_context)
    throw Error("-p " + std::to_string(o.prompt_tokens) + " leaves no room in the model's context of " +
                std::to_string(model->info().max_context));
  engine::Engine eng({model.get()}, {.max_seqs = kRequests});

  // Fresh random prompts every round: no prefix-cache hits for the completions.
  std::mt19937 rng(7);
  auto prompts = [&] {
    std::vector<std::vector<int32_t>> out(kRequests);
    for (auto& p : out)
      for (int i = 0; i < o.prompt_tokens; ++i) p.push_back(static_cast<int32_t>(rng() % model->info().n_vocab));
    return out;
  };
  std::vector<double> prefill, embed;
  if (!o.json) std::printf("%-4s %16s %16s\n", "rep", "prefill tok/s", "embed tok/s");
  for (int r = 0; r < o.reps; ++r) {
    prefill.push_back(run_round(eng, prompts(), false));
    embed.push_back(run_round(eng, prompts(), true));
    if (!o.json) std::printf("%-4d %16.1f %16.1f\n", r, prefill.back(), embed.back());
  }
  const double p = median(prefill), e = median(embed);
  if (o.json) {
    std::printf("{\"model\":\"%s\",\"threads\":%d,\"requests\":%d,\"tokens_per_request\":%d,\"reps\":%d,"
                "\"prefill_tps\":%.2f,\"embed_tps\":%.2f,\"embed_vs_prefill\":%.4f}\n",
                model->path().c_str(), threads, kRequests, o.prompt_tokens, o.reps, p, e, e / p);
    return;
  }
  std::printf("\nmodel %s, %d threads, %d inputs of %d tokens per round, median of %d\n", model->path().c_str(), threads,
              kRequests, o.prompt_tokens, o.reps);
  std::printf("  prefill   %10.1f tokens/s (min %.1f)\n", p, *std::min_element(prefill.begin(), prefill.end()));
  std::printf("  embedding %10.1f tokens/s (min %.1f) = %.3f of prefill\n", e, *std::min_element(embed.begin(), embed.end()),
              e / p);
}

}  // namespace llmserve::cli
