// llmserve bench --spec: speculative decoding against plain decoding, in
// one run and interleaved (plain, fixed k, adaptive k, repeated), on a
// workload whose answer repeats its prompt: the model's own greedy story,
// then its opening again, so that continuing it retells the story.
//
// Besides the speedups it prints what predicts them: the acceptance, and
// the verify-cost curve (a step of k + 1 rows over a step of 1 row). The
// cost model's prediction for the fixed-k runs is
//   plain step x (steps without a draft + verify steps x cost(k + 1) / cost(1)) + proposer time
// for the tokens they produced; the measured speedup should come close.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "cli/bench.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/speculation.h"

namespace llmserve::cli {

namespace {

struct Run {
  double decode_tps = 0;   // tokens after the first, per second of decoding
  int generated = 0;
  engine::EngineMetrics before, after;
};

Run run_one(engine::Engine& eng, const std::vector<int32_t>& prompt, int gen_len, bool speculative) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string error;
  engine::RequestOutput last;
  Run r;
  r.before = eng.metrics();
  engine::RequestParams p;
  p.prompt = prompt;
  p.sampling.temperature = 0.0f;
  p.max_new_tokens = gen_len;
  p.ignore_eos = true;
  p.speculative = speculative;
  eng.submit(std::move(p), [&](const engine::RequestOutput& out) {
    if (!out.finished) return;
    std::lock_guard lock(mu);
    if (out.finish_reason == engine::FinishReason::Error) error = out.error;
    last = out;
    done = true;
    cv.notify_all();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!error.empty()) throw Error("benchmark request failed: " + error);
  r.after = eng.metrics();
  r.generated = last.generated_tokens;
  r.decode_tps = last.timings.tpot_ms > 0 ? 1000.0 / last.timings.tpot_ms : 0;
  return r;
}

// The model's greedy story of `story_len` tokens, then its first tokens
// again: the prompt whose continuation retells the story.
std::vector<int32_t> retelling_prompt(engine::Engine& eng, const tok::Tokenizer& tok, int story_len) {
  std::vector<int32_t> start = tok.encode("Once upon a time", tok.add_bos_by_default());
  std::vector<int32_t> story;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  engine::RequestParams p;
  p.prompt = start;
  p.sampling.temperature = 0.0f;
  p.max_new_tokens = story_len;
  p.ignore_eos = true;
  p.speculative = false;
  eng.submit(std::move(p), [&](const engine::RequestOutput& out) {
    std::lock_guard lock(mu);
    for (const auto& t : out.tokens) story.push_back(t.token);
    if (out.finished) done = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  std::vector<int32_t> prompt = start;
  prompt.insert(prompt.end(), story.begin(), story.end());
  for (int32_t t : tok.encode("\n\n", false)) prompt.push_back(t);
  prompt.insert(prompt.end(), start.begin(), start.end());
  return prompt;
}

}  // namespace

void run_spec_bench(const BenchOptions& o, const engine::SpeculationOptions& spec_options) {
  engine::validate(spec_options);
  if (spec_options.method == "off") throw Error("bench --spec needs a proposer: ngram, draft or self");
  if (o.depth != 0 || !o.batches.empty()) throw Error("bench --spec takes neither -d nor --batch");
  const int story_len = o.prompt_tokens, gen_len = o.gen_tokens;
  if (story_len < 8 || gen_len < 8) throw Error("bench --spec needs -p and -n of at least 8");

  const int threads = o.threads > 0 ? o.threads : default_thread_count();
  ThreadPool pool(threads);
  model::InstanceConfig config;
  const auto kv_type = gguf::type_info_by_name(o.kv_type);
  if (!kv_type) throw Error("unknown --kv-type '" + o.kv_type + "'");
  config.kv_type = kv_type->type;
  config.max_seqs = 1;
  const auto model = model::LoadedModel::load(resolve_model(o.model), pool, config);
  if (2 * story_len + gen_len + 16 > model->info().max_context)
    throw Error("-p and -n do not fit the model's context of " + std::to_string(model->info().max_context));
  model::InstanceConfig draft_config = config;
  draft_config.requantize.reset();
  engine::Speculation spec(spec_options, *model, pool, draft_config);

  const int max_k = spec_options.k;
  // At the workload's context: attention grows with it, and a verify
  // step's rows each attend over all of it.
  const engine::StepCost cost =
      engine::measure_step_cost(*model, std::max(9, max_k + 1), o.reps, 2 * story_len + gen_len / 2);
  auto engine_with = [&](bool adaptive) {
    engine::SpecConfig sc = spec.config();
    sc.adaptive = adaptive;
    sc.cost = cost;
    return std::make_unique<engine::Engine>(std::vector<model::Instance*>{model.get()},
                                            engine::EngineConfig{.max_seqs = 1, .spec = {sc}});
  };
  std::vector<int32_t> prompt;
  {
    auto eng = engine_with(false);
    prompt = retelling_prompt(*eng, model->tokenizer(), story_len);
  }

  // Interleaved: plain, fixed k, adaptive k; each a fresh engine over the
  // same model (the draft's proposer state carries over harmlessly).
  std::vector<double> plain_tps, fixed_tps, adaptive_tps, predicted;
  uint64_t drafts = 0, draft_tokens = 0, accepted = 0;  // of the fixed-k runs
  uint64_t adaptive_drafts = 0, adaptive_draft_tokens = 0;
  for (int r = 0; r < o.reps; ++r) {
    {
      auto eng = engine_with(false);
      plain_tps.push_back(run_one(*eng, prompt, gen_len, false).decode_tps);
    }
    {
      auto eng = engine_with(false);
      const Run run = run_one(*eng, prompt, gen_len, true);
      fixed_tps.push_back(run.decode_tps);
      const engine::SpecMetrics& a = run.after.spec;
      const engine::SpecMetrics& b = run.before.spec;
      const double d = static_cast<double>(a.drafts - b.drafts), dt = static_cast<double>(a.draft_tokens - b.draft_tokens);
      drafts += a.drafts - b.drafts;
      draft_tokens += a.draft_tokens - b.draft_tokens;
      accepted += a.accepted_tokens - b.accepted_tokens;
      // The cost model: decode steps (the first token comes from the prefill) at the plain step time.
      const double plain_step = 1000.0 / plain_tps.back();
      const int chunk = model->info().max_batch_tokens;
      const double prefill_steps = static_cast<double>((prompt.size() + chunk - 1) / chunk);
      const double steps = static_cast<double>(run.after.steps - run.before.steps) - prefill_steps;
      const double k_mean = d > 0 ? dt / d : 0;
      const double verify_ratio = d > 0 ? cost.ms(static_cast<int>(k_mean + 1.5)) / cost.ms(1) : 1;
      const double time = plain_step * ((steps - d) + d * verify_ratio) + (a.proposer_ms - b.proposer_ms);
      predicted.push_back((run.generated - 1) * plain_step / time);
    }
    {
      auto eng = engine_with(true);
      const Run run = run_one(*eng, prompt, gen_len, true);
      adaptive_tps.push_back(run.decode_tps);
      adaptive_drafts += run.after.spec.drafts - run.before.spec.drafts;
      adaptive_draft_tokens += run.after.spec.draft_tokens - run.before.spec.draft_tokens;
    }
  }
  const double plain = median(plain_tps), fixed = median(fixed_tps), adaptive = median(adaptive_tps);
  const double acceptance = draft_tokens ? static_cast<double>(accepted) / draft_tokens : 0;
  const double mean_len = drafts ? 1.0 + static_cast<double>(accepted) / drafts : 1.0;
  const double pred = median(predicted);

  std::vector<double> curve;
  for (int k = 1; k <= 8; ++k) curve.push_back(cost.ms(k + 1) / cost.ms(1));
  if (o.json) {
    std::string c;
    for (double x : curve) {
      char num[32];
      std::snprintf(num, sizeof num, "%s%.3f", c.empty() ? "" : ",", x);
      c += num;
    }
    std::printf("{\"spec\":\"%s\",\"k\":%d,\"prompt_tokens\":%zu,\"gen_tokens\":%d,\"acceptance_rate\":%.4f,"
                "\"mean_acceptance_length\":%.3f,\"verify_cost\":[%s],\"plain_tps\":%.2f,\"fixed_k_tps\":%.2f,"
                "\"adaptive_tps\":%.2f,\"predicted_speedup\":%.3f,\"measured_speedup\":%.3f,"
                "\"adaptive_speedup\":%.3f,\"threads\":%d,\"reps\":%d}\n",
                spec_options.method.c_str(), max_k, prompt.size(), gen_len, acceptance, mean_len, c.c_str(), plain,
                fixed, adaptive, pred, fixed / plain, adaptive / plain, threads, o.reps);
    return;
  }
  std::printf("speculative decoding: --spec %s, k %d, greedy, %zu-token retelling prompt, %d tokens, %d threads, "
              "%d interleaved reps (medians)\n",
              spec_options.method.c_str(), max_k, prompt.size(), gen_len, threads, o.reps);
  std::printf("  verify cost, step of k+1 rows / step of 1 row:");
  for (size_t k = 0; k < curve.size(); ++k) std::printf(" k=%zu %.2f", k + 1, curve[k]);
  std::printf("\n  fixed k: acceptance %.1f%% of %llu draft tokens, mean acceptance length %.2f tokens per verify\n",
              100 * acceptance, static_cast<unsigned long long>(draft_tokens), mean_len);
  std::printf("  decode tokens/s: plain %.2f | fixed k=%d %.2f (%.2fx; cost model predicts %.2fx) | adaptive %.2f (%.2fx)\n",
              plain, max_k, fixed, fixed / plain, pred, adaptive, adaptive / plain);
  std::printf("  adaptive k: %.2f draft tokens per generated token (%llu verifies of %.2f tokens)\n",
              static_cast<double>(adaptive_draft_tokens) / (static_cast<double>(o.reps) * gen_len),
              static_cast<unsigned long long>(adaptive_drafts),
              adaptive_drafts ? static_cast<double>(adaptive_draft_tokens) / adaptive_drafts : 0.0);
}

}  // namespace llmserve::cli
