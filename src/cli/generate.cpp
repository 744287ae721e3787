// llmserve generate: one prompt through the engine (with speculative
// decoding when --spec asks), streamed to stdout, timings on stderr.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/flag_checks.h"
#include "cli/spec_flags.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/speculation.h"
#include "gguf/file.h"
#include "model/hparams.h"
#include "model/instance.h"
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
  engine::SpeculationOptions spec;
};

using Clock = std::chrono::steady_clock;

// The engine's outputs, handed from its thread to the one that prints.
struct Outputs {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<engine::RequestOutput> queue;
};

void run_generate(GenerateOptions o) {
  engine::validate(o.spec);
  if (!o.seed_given) o.sampling.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  ThreadPool pool(o.threads);
  model::InstanceConfig config;
  config.max_seqs = 1;
  const std::string path = resolve_model(o.model);
  {
    // The context this run needs: the prompt and the tokens to generate.
    const gguf::File file = gguf::File::open(path);
    const int n_ctx = model::read_hparams(file).n_ctx_train;
    const auto tok = tok::Tokenizer::from_gguf(file);
    const size_t n = tok->encode(o.prompt, tok->add_bos_by_default()).size();
    if (static_cast<int>(n) >= n_ctx)
      throw Error("the prompt has " + std::to_string(n) + " tokens; the model's context is " + std::to_string(n_ctx));
    config.max_context = std::min(n_ctx, static_cast<int>(n) + std::max(o.n_predict, 1) + 1);
  }
  const auto model = model::LoadedModel::load(path, pool, config);
  const tok::Tokenizer& tokenizer = model->tokenizer();
  std::vector<int32_t> prompt = tokenizer.encode(o.prompt, tokenizer.add_bos_by_default());
  if (prompt.empty()) throw Error("the prompt is empty and the model adds no BOS token");
  engine::Speculation spec(o.spec, *model, pool, config);
  engine::EngineConfig engine_config{.max_seqs = 1, .spec = {}};
  if (spec.enabled()) engine_config.spec.push_back(spec.config());
  engine::Engine engine({model.get()}, engine_config);

  tok::StreamDecoder decoder(tokenizer, prompt.front() == tokenizer.bos() && prompt.size() == 1);
  std::fputs(o.prompt.c_str(), stdout);
  std::fflush(stdout);
  Outputs outputs;
  engine::RequestParams params;
  params.prompt = prompt;
  params.sampling = o.sampling;
  params.max_new_tokens = o.n_predict;
  if (o.n_predict > 0) {
    engine.submit(std::move(params), [&outputs](const engine::RequestOutput& out) {
      std::lock_guard lock(outputs.mu);
      outputs.queue.push_back(out);
      outputs.cv.notify_one();
    });
  }
  engine::RequestOutput last;
  for (bool done = o.n_predict == 0; !done;) {
    std::unique_lock lock(outputs.mu);
    outputs.cv.wait(lock, [&] { return !outputs.queue.empty(); });
    engine::RequestOutput out = std::move(outputs.queue.front());
    outputs.queue.pop_front();
    lock.unlock();
    for (const auto& t : out.tokens) std::fputs(decoder.push(t.token).c_str(), stdout);
    std::fflush(stdout);
    if (out.finished) {
      if (out.finish_reason == engine::FinishReason::Error) throw Error(out.error);
      last = std::move(out);
      done = true;
    }
  }
  std::fputs(decoder.flush().c_str(), stdout);
  std::fputs("\n", stdout);
  std::fflush(stdout);  // the text ends before the timings line on stderr

  const engine::RequestTimings& t = last.timings;
  std::fprintf(stderr,
               "timings: prompt %zu tokens %.1f tokens/s | generated %d tokens %.1f tokens/s | "
               "TTFT %.1f ms | TPOT %.2f ms | threads %d",
               prompt.size(), t.ttft_ms > 0 ? prompt.size() / (t.ttft_ms / 1e3) : 0.0, last.generated_tokens,
               t.tpot_ms > 0 ? 1e3 / t.tpot_ms : 0.0, t.ttft_ms, t.tpot_ms, o.threads);
  const engine::SpecMetrics m = engine.metrics().spec;
  if (spec.enabled())
    std::fprintf(stderr, " | draft acceptance %.1f%% (%llu of %llu), %.2f tokens per verify",
                 m.draft_tokens ? 100.0 * static_cast<double>(m.accepted_tokens) / static_cast<double>(m.draft_tokens) : 0.0,
                 static_cast<unsigned long long>(m.accepted_tokens), static_cast<unsigned long long>(m.draft_tokens),
                 m.drafts ? 1.0 + static_cast<double>(m.accepted_tokens) / static_cast<double>(m.drafts) : 0.0);
  std::fputs("\n", stderr);
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
  add_spec_flags(cmd, o->spec);
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace llmserve::cli
