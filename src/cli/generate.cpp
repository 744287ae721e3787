// llmserve generate: one prompt, streamed to stdout, timings on stderr.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/flag_checks.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"
#include "model/runner.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::cli {

namespace {

struct GenerateOptions {
  std::string model;
  std::string prompt;
  int n_predict = 128;
  int threads = default_thread_count();
  engine::SamplingParams sampling;
  bool seed_given = false;
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

void run_generate(GenerateOptions o) {
  if (!o.seed_given) o.sampling.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  ThreadPool pool(o.threads);
  const auto model = model::Model::load(resolve_model(o.model), &pool);
  const auto tokenizer = tok::Tokenizer::from_gguf(model->file());
  std::vector<int32_t> prompt = tokenizer->encode(o.prompt, tokenizer->add_bos_by_default());
  if (prompt.empty()) throw Error("the prompt is empty and the model adds no BOS token");

  const int n_ctx = std::min<int>(model->hparams().n_ctx_train, static_cast<int>(prompt.size()) + o.n_predict);
  if (static_cast<int>(prompt.size()) >= model->hparams().n_ctx_train)
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens; the model's context is " +
                std::to_string(model->hparams().n_ctx_train));
  model::SequenceRunner forward(*model, pool, n_ctx);
  engine::Sampler sampler(o.sampling);
  tok::StreamDecoder decoder(*tokenizer, prompt.front() == tokenizer->bos() && prompt.size() == 1);

  std::fputs(o.prompt.c_str(), stdout);
  std::fflush(stdout);
  std::vector<int32_t> history = prompt;
  const auto t_start = Clock::now();
  auto logits = forward.eval(prompt);
  Clock::time_point t_prefill = Clock::now(), t_first = t_prefill;
  int generated = 0;
  while (generated < o.n_predict) {
    const int32_t next = sampler.sample(logits, history);
    if (generated == 0) t_first = Clock::now();
    if (tokenizer->is_end_of_generation(next)) break;
    ++generated;
    history.push_back(next);
    std::fputs(decoder.push(next).c_str(), stdout);
    std::fflush(stdout);
    if (generated == o.n_predict || forward.position() >= n_ctx) break;
    logits = forward.decode(next);
  }
  std::fputs(decoder.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);  // the text ends before the timings line on stderr
  const auto t_end = Clock::now();

  const double prefill_ms = ms_since(t_start, t_prefill);
  const double ttft_ms = ms_since(t_start, t_first);
  const double decode_ms = ms_since(t_first, t_end);
  const double tpot_ms = generated > 1 ? decode_ms / (generated - 1) : 0.0;
  std::fprintf(stderr,
               "timings: prompt %zu tokens %.1f tokens/s | generated %d tokens %.1f tokens/s | "
               "TTFT %.1f ms | TPOT %.2f ms | threads %d\n",
               prompt.size(), prompt.size() / (prefill_ms / 1e3), generated,
               tpot_ms > 0 ? 1e3 / tpot_ms : 0.0, ttft_ms, tpot_ms, o.threads);
}

}  // namespace

void add_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt, streaming it to stdout");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the built-in random-weight model)");
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->capture_default_str()->check(at_least(0));
  cmd->add_option("-t,--threads", o->threads, "Threads")->capture_default_str()->check(thread_count(1));
  cmd->add_option("--temp", o->sampling.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", o->sampling.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p, "Top-p (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p, "Min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", o->sampling.repetition_penalty, "Repetition penalty (1 = off)")->capture_default_str();
  cmd->add_option("--presence-penalty", o->sampling.presence_penalty, "Presence penalty")->capture_default_str();
  cmd->add_option("--frequency-penalty", o->sampling.frequency_penalty, "Frequency penalty")->capture_default_str();
  cmd->add_option_function<int64_t>(
      "--seed",
      [o](int64_t s) {
        o->sampling.seed = static_cast<uint64_t>(s);
        o->seed_given = s >= 0;
      },
      "Random seed (default, or negative: from the clock)");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace llmserve::cli
