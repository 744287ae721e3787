#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"

namespace llmserve::engine {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int pool_blocks(const EngineConfig& c, const model::HParams& hp) {
  const int n = c.kv_blocks > 0 ? c.kv_blocks : model::KvCache::blocks_for_bytes(hp, c.kv_bytes, c.block_size, c.kv_type);
  if (n < 1)
    throw Error("the KV memory budget holds no block of " + std::to_string(c.block_size) +
                " tokens; one block needs " +
                std::to_string(model::KvCache::bytes_per_block(hp, c.block_size, c.kv_type)) + " bytes");
  return n;
}

// log-softmax of the raw logits: the sampled token's logprob and the best `top`.
void fill_logprobs(std::span<const float> logits, int32_t token, int top, GeneratedToken& out) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max_logit));
  const float log_z = max_logit + static_cast<float>(std::log(sum));
  out.logprob = logits[token] - log_z;
  if (top <= 0) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const size_t k = std::min<size_t>(static_cast<size_t>(top), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(k), ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < k; ++i) out.top.push_back({ids[i], logits[ids[i]] - log_z});
}

}  // namespace

struct Engine::Live {
  Live(OutputCallback cb, const RequestParams& p)
      : callback(std::move(cb)), sampler(p.sampling), top_logprobs(p.top_logprobs),
        prompt_tokens(static_cast<int>(p.prompt.size())), stop_ids(p.stop_token_ids), ignore_eos(p.ignore_eos),
        submitted(Clock::now()) {}

  // Tokens that end the request and are not part of its text.
  bool is_stop(int32_t t, const tok::Tokenizer& tok) const {
    return (!ignore_eos && tok.is_end_of_generation(t)) || std::find(stop_ids.begin(), stop_ids.end(), t) != stop_ids.end();
  }

  OutputCallback callback;
  Sampler sampler;
  int top_logprobs;
  int prompt_tokens;
  std::vector<int32_t> stop_ids;
  bool ignore_eos;
  int cached_prompt_tokens = 0;
  int generated = 0;
  Clock::time_point submitted, scheduled, first_token, last_token;
  bool was_scheduled = false;
};

Engine::Engine(EngineConfig config)
    : config_(std::move(config)),
      pool_(config_.threads > 0 ? config_.threads : default_thread_count()),
      model_(model::Model::load(config_.model_path, &pool_)),
      tokenizer_(tok::Tokenizer::from_gguf(model_->file())),
      max_context_(config_.max_context > 0 ? std::min(config_.max_context, model_->hparams().n_ctx_train)
                                           : model_->hparams().n_ctx_train),
      kv_(model_->hparams(), pool_blocks(config_, model_->hparams()), config_.block_size, config_.kv_type, &pool_),
      runner_(*model_, kv_, pool_, config_.max_batch_tokens),
      scheduler_(SchedulerConfig{kv_.n_blocks(), config_.block_size, config_.max_batch_tokens, config_.max_seqs,
                                 max_context_, true, tokenizer_->end_of_generation_tokens()}) {
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t Engine::submit(RequestParams params, OutputCallback callback) {
  validate(params.sampling);
  if (params.top_logprobs > 20) throw Error("top_logprobs must be at most 20");
  if (params.max_new_tokens < 0) throw Error("max_new_tokens must be >= 0");
  auto live = std::make_unique<Live>(std::move(callback), params);
  std::lock_guard lock(mu_);
  if (stopping_) throw Error("the engine is shutting down");
  const uint64_t id = next_id_++;
  Sequence seq(id, std::move(params.prompt), params.max_new_tokens, std::move(params.stop_token_ids));
  seq.ignore_eos = params.ignore_eos;
  incoming_.emplace_back(std::move(seq), std::move(live));
  ++metrics_.requests_submitted;
  wake_.notify_one();
  return id;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  cancels_.push_back(id);
  wake_.notify_one();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lock(mu_);
  return metrics_;
}

void Engine::loop() {
  for (;;) {
    take_inbox();
    bool stop;
    {
      std::lock_guard lock(mu_);
      stop = stopping_;
    }
    if (stop) {
      for (const auto& [id, live] : live_) scheduler_.cancel(id);
      scheduler_.schedule();  // reaps the cancelled; nothing is left to plan
      deliver_finished();
      return;
    }
    step();
  }
}

// Moves new requests and cancellations into the scheduler; sleeps while
// there is nothing to do.
void Engine::take_inbox() {
  std::vector<std::pair<Sequence, std::unique_ptr<Live>>> incoming;
  std::vector<uint64_t> cancels;
  {
    std::unique_lock lock(mu_);
    wake_.wait(lock, [&] { return stopping_ || !incoming_.empty() || !cancels_.empty() || scheduler_.has_work(); });
    incoming.swap(incoming_);
    cancels.swap(cancels_);
  }
  for (auto& [seq, live] : incoming) {
    const uint64_t id = seq.id();
    live_.emplace(id, std::move(live));
    scheduler_.add(std::move(seq));  // a request that can never fit comes back through take_finished()
  }
  for (uint64_t id : cancels) scheduler_.cancel(id);
  deliver_finished();
}

void Engine::step() {
  const auto t0 = Clock::now();
  const StepPlan& plan = scheduler_.schedule();
  if (plan.empty()) {
    deliver_finished();
    return;
  }
  for (const BlockCopy& c : plan.copies) kv_.copy_block(c.src, c.dst);

  std::vector<model::SeqBatch>& batch = batch_;
  batch.clear();
  for (const ScheduledSeq& s : plan.seqs) {
    // Prompt tokens are those below the prompt's length, also when a
    // preempted sequence recomputes its generated ones (model::SeqBatch).
    const int prompt_tokens = std::clamp(s.seq->num_prompt_tokens() - s.start, 0, s.num_tokens);
    batch.push_back({s.seq->all_tokens().subspan(s.start, s.num_tokens), s.start, s.seq->block_table,
                     s.needs_logits ? model::Logits::Last : model::Logits::None, prompt_tokens});
    Live& live = *live_.at(s.seq->id());
    if (!live.was_scheduled) {
      live.was_scheduled = true;
      live.scheduled = t0;
      live.cached_prompt_tokens = s.seq->num_cached_tokens;
    }
  }

  std::span<float> logits;
  try {
    logits = runner_.forward(batch);
  } catch (const std::exception& e) {  // e.g. bad_alloc too: fail this step's requests, keep serving
    scheduler_.fail_step(e.what());
    deliver_finished();
    return;
  }

  // Sample one token per sequence that wanted logits, in plan order.
  const size_t vocab = static_cast<size_t>(model_->hparams().n_vocab);
  std::vector<int32_t>& sampled = sampled_;
  std::vector<std::pair<uint64_t, GeneratedToken>>& outputs = outputs_;
  std::vector<float>& raw = raw_logits_;
  sampled.clear();
  outputs.clear();
  size_t row = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.needs_logits) continue;
    Live& live = *live_.at(s.seq->id());
    std::span<float> l = logits.subspan(row++ * vocab, vocab);
    if (live.top_logprobs >= 0) raw.assign(l.begin(), l.end());  // the sampler modifies l
    GeneratedToken g{live.sampler.sample(l, s.seq->generated()), 0.0f, {}};
    if (live.top_logprobs >= 0) fill_logprobs(raw, g.token, live.top_logprobs, g);
    sampled.push_back(g.token);
    outputs.emplace_back(s.seq->id(), std::move(g));
  }
  scheduler_.postprocess(sampled);

  const auto now = Clock::now();
  uint64_t new_tokens = 0;
  for (auto& [id, g] : outputs) {
    Live& live = *live_.at(id);
    if (live.generated++ == 0) live.first_token = now;
    live.last_token = now;
    ++new_tokens;
    if (live.is_stop(g.token, *tokenizer_)) continue;
    RequestOutput out;
    out.id = id;
    out.tokens.push_back(std::move(g));
    out.prompt_tokens = live.prompt_tokens;
    out.cached_prompt_tokens = live.cached_prompt_tokens;
    out.generated_tokens = live.generated;
    live.callback(out);
  }
  deliver_finished();

  std::lock_guard lock(mu_);
  metrics_.scheduler = scheduler_.metrics();
  metrics_.generated_tokens += new_tokens;
  metrics_.steps += 1;
  metrics_.last_step_ms = ms_between(t0, Clock::now());
}

void Engine::deliver_finished() {
  const auto now = Clock::now();
  auto finished = scheduler_.take_finished();
  // Publish first: whoever sees a request finish also sees its blocks freed.
  {
    std::lock_guard lock(mu_);
    metrics_.scheduler = scheduler_.metrics();
    for (const auto& seq : finished)
      if (const auto it = live_.find(seq->id()); it != live_.end() && it->second->was_scheduled)
        metrics_.prompt_tokens += static_cast<uint64_t>(it->second->prompt_tokens);
  }
  for (const auto& seq : finished) {
    const auto it = live_.find(seq->id());
    if (it == live_.end()) continue;
    Live& live = *it->second;
    RequestOutput out;
    out.id = seq->id();
    out.finished = true;
    out.finish_reason = seq->finish_reason;
    out.error = seq->error;
    out.prompt_tokens = live.prompt_tokens;
    out.cached_prompt_tokens = live.cached_prompt_tokens;
    out.generated_tokens = live.generated;
    RequestTimings& t = out.timings;
    t.e2e_ms = ms_between(live.submitted, now);
    if (live.was_scheduled) t.queue_ms = ms_between(live.submitted, live.scheduled);
    if (live.generated > 0) t.ttft_ms = ms_between(live.submitted, live.first_token);
    if (live.generated > 1) t.tpot_ms = ms_between(live.first_token, live.last_token) / (live.generated - 1);
    live.callback(out);
    live_.erase(it);
  }
}

}  // namespace llmserve::engine
