// llmserve router-eval: the complexity router on a labeled set of prompts:
// its decisions against the labels, the share and cost of large-model
// calls, and APGR (gateway/router_eval.h), at the threshold that sends a
// target share of the prompts to the large model.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/next_token_stats.h"
#include "gateway/router.h"
#include "gateway/router_eval.h"
#include "model/instance.h"

namespace llmserve::cli {

namespace {

// Tokens a prompt without max_tokens is taken to answer with, for its cost.
constexpr int kDefaultAnswerTokens = 128;

struct RouterEvalOptions {
  std::string data, small, large;
  double target_share = 0.3;
  std::string features_out;
  int threads = 0;
};

// A model's measured step times: its cost of a request is its prompt's
// prefill steps (in chunks of the engine's batch) plus a decode step per
// answer token.
struct ModelCost {
  explicit ModelCost(model::LoadedModel& m)
      : model(m), batch(m.info().max_batch_tokens), steps(engine::measure_step_cost(m, batch, 5)) {}
  int prompt_tokens(const std::string& text) const {
    const tok::Tokenizer& tok = model.tokenizer();
    return static_cast<int>(tok.encode(text, tok.add_bos_by_default(), false).size());
  }
  double prefill_ms(int tokens) const { return (tokens / batch) * steps.ms(batch) + (tokens % batch ? steps.ms(tokens % batch) : 0); }
  double request_ms(int tokens, int answer) const { return prefill_ms(tokens) + answer * steps.ms(1); }

  const model::LoadedModel& model;
  const int batch;
  const engine::StepCost steps;
};

void print_row(const char* name, const std::vector<gateway::ScoredPrompt>& prompts, double threshold) {
  const gateway::RouterEval e = gateway::evaluate_router(prompts, threshold);
  size_t hard = 0;
  for (const auto& p : prompts) hard += p.hard;
  std::printf("%-9s %7zu %5zu %9.3f %12.3f %16.4f %13.4f %13.4f %8.3f %9.3f %7.3f\n", name, prompts.size(), hard, e.accuracy,
              e.large_share, e.cost_ms, e.small_cost_ms, e.large_cost_ms, e.quality, e.random_quality, e.apgr);
}

void write_features(const std::string& path, const std::vector<gateway::LabeledPrompt>& prompts,
                    const std::vector<gateway::RouteFeatures>& features) {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot write");
  out << "hard,held_out";
  for (const std::string_view name : gateway::kRouteFeatureNames) out << ',' << name;
  out << '\n';
  for (size_t i = 0; i < prompts.size(); ++i) {
    out << prompts[i].hard << ',' << gateway::held_out(i);
    for (const double v : features[i]) out << ',' << v;
    out << '\n';
  }
}

void run_router_eval(const RouterEvalOptions& o) {
  const std::vector<gateway::LabeledPrompt> prompts = gateway::read_labeled_prompts(o.data);
  ThreadPool pool(o.threads > 0 ? o.threads : default_thread_count());
  const auto small = model::LoadedModel::load(o.small, pool, {});
  const auto large = model::LoadedModel::load(o.large, pool, {});
  const ModelCost small_cost(*small), large_cost(*large);
  engine::Engine engine({small.get()});

  std::vector<gateway::RouteFeatures> features;
  std::vector<gateway::ScoredPrompt> scored, held;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const gateway::LabeledPrompt& p = prompts[i];
    const tok::Tokenizer& tok = small->tokenizer();
    std::vector<int32_t> ids = tok.encode(p.text, tok.add_bos_by_default(), false);
    const int small_tokens = static_cast<int>(ids.size());
    const auto stats = engine::next_token_stats(engine, 0, std::move(ids));
    if (!stats) throw Error(o.data + ": prompt " + std::to_string(i + 1) + " does not fit the small model's context");
    features.push_back(gateway::route_features(
        {.text = p.text, .prompt_tokens = small_tokens, .turns = p.turns, .max_tokens = p.max_tokens,
         .entropy = stats->entropy, .margin = stats->margin}));
    const int answer = p.max_tokens > 0 ? p.max_tokens : kDefaultAnswerTokens;
    scored.push_back({gateway::route_score(features.back()), p.hard, small_cost.request_ms(small_tokens, answer),
                      large_cost.request_ms(large_cost.prompt_tokens(p.text), answer), small_cost.prefill_ms(small_tokens)});
    if (gateway::held_out(i)) held.push_back(scored.back());
  }
  if (!o.features_out.empty()) write_features(o.features_out, prompts, features);

  const double threshold = gateway::threshold_for_share(scored, o.target_share);
  std::printf("router-eval: %zu prompts from %s, %zu held out from the weights' fit\n", prompts.size(), o.data.c_str(),
              held.size());
  std::printf("measured steps: small (%s) decode %.4f ms, 64-token prefill %.4f ms; large (%s) decode %.4f ms, "
              "64-token prefill %.4f ms\n",
              o.small.c_str(), small_cost.steps.ms(1), small_cost.prefill_ms(64), o.large.c_str(), large_cost.steps.ms(1),
              large_cost.prefill_ms(64));
  std::printf("cost of a request: its prompt's prefill + answer tokens x decode step (answer: max_tokens, else %d); the "
              "router also pays the small model's prefill of what it sends large\n",
              kDefaultAnswerTokens);
  std::printf("threshold %.4f for a target large share of %.2f\n", threshold, o.target_share);
  std::printf("%-9s %7s %5s %9s %12s %16s %13s %13s %8s %9s %7s\n", "set", "prompts", "hard", "accuracy", "large_share",
              "cost_ms/request", "all_small_ms", "all_large_ms", "quality", "random_q", "apgr");
  print_row("all", scored, threshold);
  if (!held.empty()) print_row("held_out", held, threshold);
  std::printf("random_q: a random router's quality at the same cost per request; a random router's apgr is 0.5\n");
}

}  // namespace

void add_router_eval(CLI::App& app) {
  auto o = std::make_shared<RouterEvalOptions>();
  CLI::App* cmd = app.add_subcommand("router-eval", "The complexity router's decisions, cost and APGR on labeled prompts");
  cmd->add_option("--data", o->data, "JSONL of {\"label\": \"easy\"|\"hard\", \"prompt\" or \"messages\"} (tests/data/router/prompts.jsonl)")
      ->required();
  cmd->add_option("--small", o->small, "The small model's GGUF file")->required();
  cmd->add_option("--large", o->large, "The large model's GGUF file")->required();
  cmd->add_option("--target-share", o->target_share, "Share of prompts to send to the large model; picks the threshold")
      ->capture_default_str()->check(in_range(0, 1));
  cmd->add_option("--features-out", o->features_out, "Write each prompt's label and features as CSV (scripts/fit_router.py)");
  cmd->add_option("-t,--threads", o->threads, "Compute threads (0: default)")->capture_default_str()->check(thread_count(0));
  cmd->callback([o] { run_router_eval(*o); });
}

}  // namespace llmserve::cli
