#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include "core/error.h"

namespace llmserve::engine {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// log sum exp of the logits (log P(t) = logits[t] - log_z) and the entropy
// of their softmax (log Z - E[logit]), in one pass.
struct Partition {
  float log_z;
  float entropy;
};
Partition partition(std::span<const float> logits) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0, weighted = 0.0;
  for (float l : logits) {
    const double e = std::exp(static_cast<double>(l - max_logit));
    sum += e;
    weighted += e * static_cast<double>(l - max_logit);
  }
  return {max_logit + static_cast<float>(std::log(sum)), static_cast<float>(std::max(0.0, std::log(sum) - weighted / sum))};
}

// log-softmax of the raw logits: the sampled token's logprob, the best `top`
// and the entropy.
void fill_logprobs(std::span<const float> logits, int32_t token, int top, GeneratedToken& out) {
  const auto [log_z, entropy] = partition(logits);
  out.logprob = logits[token] - log_z;
  out.entropy = entropy;
  if (top <= 0) return;
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const size_t k = std::min<size_t>(static_cast<size_t>(top), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(k), ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < k; ++i) out.top.push_back({ids[i], logits[ids[i]] - log_z});
}

// v / |v| (the mean's direction is the sum's); zeros stay zeros.
std::vector<float> normalized(const std::vector<double>& v) {
  double norm = 0.0;
  for (double x : v) norm += x * x;
  norm = std::sqrt(norm);
  std::vector<float> out(v.size(), 0.0f);
  if (norm > 0)
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i] / norm);
  return out;
}

}  // namespace

StepCost measure_step_cost(model::Instance& instance, int max_rows, int repeats, int depth) {
  const model::InstanceInfo& info = instance.info();
  const int room = std::min(info.max_context, info.kv_blocks * info.block_size);
  depth = std::clamp(depth, 0, room - 1);
  max_rows = std::clamp(max_rows, 1, std::min(info.max_batch_tokens, room - depth));
  const std::vector<int32_t> tokens(static_cast<size_t>(std::max(max_rows, info.max_batch_tokens)), info.n_vocab > 1 ? 1 : 0);
  std::vector<int32_t> blocks(static_cast<size_t>((depth + max_rows + info.block_size - 1) / info.block_size));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  for (int done = 0; done < depth;) {  // the context, as a prompt
    const int n = std::min(depth - done, info.max_batch_tokens);
    const model::SeqBatch b{std::span(tokens).first(static_cast<size_t>(n)), done, blocks, model::Logits::None, n};
    instance.forward(std::span(&b, 1));
    done += n;
  }
  std::vector<std::pair<int, double>> points;
  for (int rows = 1;; rows = std::min(max_rows, rows < 9 ? rows + 1 : 2 * rows - 1)) {
    double best = INFINITY;
    for (int i = 0; i < std::max(1, repeats); ++i) {
      const model::SeqBatch b{std::span(tokens).first(static_cast<size_t>(rows)), depth, blocks, model::Logits::Last, 0};
      const auto t0 = Clock::now();
      instance.forward(std::span(&b, 1));
      best = std::min(best, ms_between(t0, Clock::now()));
    }
    points.emplace_back(rows, best);
    if (rows == max_rows) break;
  }
  return StepCost(std::move(points));
}

struct Engine::ModelSlot {
  ModelSlot(model::Instance& m, const EngineConfig& c, SpecConfig sc)
      : instance(m),
        info(m.info()),
        scheduler(SchedulerConfig{.num_blocks = info.kv_blocks,
                                  .block_size = info.block_size,
                                  .max_batch_tokens = info.max_batch_tokens,
                                  .max_seqs = c.max_seqs,
                                  .max_context = info.max_context,
                                  .chunked_prefill = true,
                                  .cache_generated_blocks = info.generated_kv_matches_prompt,
                                  .eos_token_ids = info.end_of_generation}) {
    metrics.scheduler = scheduler.metrics();  // the pool's size shows before the first step
    if (sc.proposer && (sc.max_k < 1 || sc.max_k > 16)) throw Error("speculative decoding: k must be in 1..16");
    if (sc.proposer && sc.adaptive && sc.cost.points().empty())
      sc.cost = measure_step_cost(m, std::min(info.max_batch_tokens, (sc.max_k + 1) * 4));
    spec = std::move(sc);
    spec_metrics.accepted_per_pos.assign(static_cast<size_t>(spec.max_k), 0);
    metrics.spec = spec_metrics;
  }
  model::Instance& instance;
  const model::InstanceInfo& info;
  Scheduler scheduler;
  SpecConfig spec;
  SpecMetrics spec_metrics;
  double draft_ms_per_k = 0;  // the proposer's time per drafted position, running mean
  EngineMetrics metrics;  // guarded by mu_; the loop publishes after each step
};

struct Engine::Live {
  Live(OutputCallback cb, const RequestParams& p, int index, uint64_t leader, Clock::time_point submitted)
      : callback(std::move(cb)), sampler(with_seed(p.sampling, p.sampling.seed + static_cast<uint64_t>(index))),
        model(p.model), index(index), leader(leader), top_logprobs(p.top_logprobs),
        draft_sampler(with_seed(p.sampling, ~(p.sampling.seed + static_cast<uint64_t>(index)))),
        prompt_tokens(static_cast<int>(p.prompt.size())), stop_ids(p.stop_token_ids), ignore_eos(p.ignore_eos),
        speculative(p.speculative), embed(p.embed), score_from(p.score_from), submitted(submitted) {}

  static SamplingParams with_seed(SamplingParams s, uint64_t seed) {
    s.seed = seed;
    return s;
  }
  // Tokens that end the request and are not part of its text.
  bool is_stop(int32_t t, std::span<const int32_t> end_of_generation) const {
    return (!ignore_eos && std::ranges::find(end_of_generation, t) != end_of_generation.end()) ||
           std::ranges::find(stop_ids, t) != stop_ids.end();
  }

  OutputCallback callback;  // shared by a request's choices
  Sampler sampler;
  int model;
  int index;                // the choice
  uint64_t leader;          // choice 0's id
  std::vector<uint64_t> unforked;  // choice 0: the other choices, until its first token
  std::optional<Sequence> unforked_seq;  // choice > 0 until then: its sequence, should it not fork
  int top_logprobs;
  Sampler draft_sampler;  // a model proposer's draws, with the request's parameters
  Draft draft;            // the guesses its next decode verifies
  Acceptance acceptance;
  int steps_without_draft = 0;
  int probe_interval = kFirstProbe;  // steps without a draft before one is tried anyway
  bool probing = false;              // the pending draft is such a try
  static constexpr int kFirstProbe = 32, kLastProbe = 1024;
  int prompt_tokens;
  std::vector<int32_t> stop_ids;
  bool ignore_eos;
  bool speculative;
  bool embed;
  std::vector<double> hidden_sum;  // embed: the prompt's final hidden states summed over the chunks so far
  int score_from;                  // > 0: a score request
  // A score request's chunk needs every row's logits once it reaches the
  // token before the first scored one; before that, none.
  bool scores(const ScheduledSeq& s) const { return score_from > 0 && s.start + s.num_tokens >= score_from; }
  double score_logprob = 0;        // its scored tokens' log-probabilities summed over the chunks so far
  int scored_tokens = 0;
  int cached_prompt_tokens = 0;
  int generated = 0;
  Clock::time_point submitted, scheduled, first_token, last_token;
  bool was_scheduled = false;
};

Engine::Engine(std::vector<model::Instance*> models, EngineConfig config) : config_(config) {
  if (models.empty()) throw Error("the engine needs at least one model");
  for (size_t i = 0; i < models.size(); ++i)
    models_.push_back(std::make_unique<ModelSlot>(*models[i], config_, i < config_.spec.size() ? config_.spec[i] : SpecConfig{}));
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
  if (params.model < 0 || params.model >= num_models())
    throw Error("model " + std::to_string(params.model) + " is not one of the engine's " +
                std::to_string(num_models()));
  if (params.top_logprobs > 20) throw Error("top_logprobs must be at most 20");
  if (params.max_new_tokens < 0) throw Error("max_new_tokens must be >= 0");
  if (params.n < 1) throw Error("n must be >= 1");
  if (params.embed && params.n != 1) throw Error("an embedding request has one choice (n = 1)");
  if (params.score_from != 0) {
    if (params.embed || params.n != 1) throw Error("a score request is neither an embedding nor has more than one choice");
    if (params.score_from < 0 || params.score_from >= static_cast<int>(params.prompt.size()))
      throw Error("score_from must be within the prompt (0 < score_from < " + std::to_string(params.prompt.size()) +
                  "), not " + std::to_string(params.score_from));
  }
  const auto now = Clock::now();
  std::lock_guard lock(mu_);
  if (stopping_) throw Error("the engine is shutting down");
  const uint64_t id = next_id_;
  next_id_ += static_cast<uint64_t>(params.n);
  std::vector<std::unique_ptr<Live>> lives;
  for (int i = 0; i < params.n; ++i) {
    lives.push_back(std::make_unique<Live>(callback, params, i, id, now));
    if (i == 0) continue;
    const uint64_t child = id + static_cast<uint64_t>(i);
    lives[0]->unforked.push_back(child);
    lives.back()->unforked_seq.emplace(child, params.prompt, params.max_new_tokens, params.stop_token_ids);
    lives.back()->unforked_seq->ignore_eos = params.ignore_eos;
  }
  Sequence seq(id, std::move(params.prompt), params.max_new_tokens, std::move(params.stop_token_ids));
  seq.ignore_eos = params.ignore_eos;
  seq.prefill_only = params.embed || params.score_from > 0;
  incoming_.push_back({params.model, std::move(seq), std::move(lives)});
  ++models_[static_cast<size_t>(params.model)]->metrics.requests_submitted;
  wake_.notify_one();
  return id;
}

void Engine::cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  cancels_.push_back(id);
  wake_.notify_one();
}

EngineMetrics Engine::metrics(int model) const {
  std::lock_guard lock(mu_);
  return models_.at(static_cast<size_t>(model))->metrics;
}

const model::InstanceInfo& Engine::info(int model) const { return models_.at(static_cast<size_t>(model))->info; }

void Engine::loop() {
  for (;;) {
    take_inbox();
    bool stop;
    {
      std::lock_guard lock(mu_);
      stop = stopping_;
    }
    if (stop) {
      for (const auto& [id, live] : live_) models_[static_cast<size_t>(live->model)]->scheduler.cancel(id);
      for (auto& slot : models_) {
        slot->scheduler.schedule();  // reaps the cancelled; nothing is left to plan
        deliver_finished(*slot);
      }
      return;
    }
    for (auto& slot : models_)
      if (slot->scheduler.has_work()) step(*slot);
  }
}

// Moves new requests and cancellations into the schedulers; sleeps while
// there is nothing to do.
void Engine::take_inbox() {
  std::vector<Submission> incoming;
  std::vector<uint64_t> cancels;
  {
    std::unique_lock lock(mu_);
    wake_.wait(lock, [&] {
      return stopping_ || !incoming_.empty() || !cancels_.empty() ||
             std::ranges::any_of(models_, [](const auto& m) { return m->scheduler.has_work(); });
    });
    incoming.swap(incoming_);
    cancels.swap(cancels_);
  }
  for (Submission& s : incoming) {
    for (auto& live : s.lives) {
      const uint64_t id = live->leader + static_cast<uint64_t>(live->index);
      live_.emplace(id, std::move(live));
    }
    // A request that can never fit comes back through take_finished().
    models_[static_cast<size_t>(s.model)]->scheduler.add(std::move(s.seq));
  }
  for (uint64_t id : cancels) {
    const auto it = live_.find(id);
    if (it == live_.end()) continue;
    Live& live = *it->second;
    const auto leader = live_.find(live.leader);
    if (live.index > 0 && leader != live_.end() && std::erase(leader->second->unforked, id) > 0) {
      deliver(id, FinishReason::Cancelled, {});  // not forked yet: no sequence to cancel
      continue;
    }
    models_[static_cast<size_t>(live.model)]->scheduler.cancel(id);
  }
  for (auto& slot : models_) deliver_finished(*slot);
}

void Engine::step(ModelSlot& slot) {
  Scheduler& scheduler = slot.scheduler;
  const auto t0 = Clock::now();
  const StepPlan& plan = scheduler.schedule();
  if (plan.empty()) {
    deliver_finished(slot);
    return;
  }
  for (const BlockCopy& c : plan.copies) slot.instance.copy_block(c.src, c.dst);

  std::vector<model::SeqBatch>& batch = batch_;
  batch.clear();
  for (const ScheduledSeq& s : plan.seqs) {
    // Prompt tokens are those below the prompt's length, also when a
    // preempted sequence recomputes its generated ones (model::SeqBatch).
    const int prompt_tokens = std::clamp(s.seq->num_prompt_tokens() - s.start, 0, s.num_tokens);
    Live& live = *live_.at(s.seq->id());
    const auto logits = live.embed                        ? model::Logits::SumHidden
                        : live.scores(s) || s.num_draft > 0 ? model::Logits::All
                        : s.needs_logits                      ? model::Logits::Last
                                                              : model::Logits::None;
    batch.push_back({s.seq->all_tokens().subspan(s.start, s.num_tokens), s.start, s.seq->block_table, logits, prompt_tokens});
    if (!live.was_scheduled) {
      live.was_scheduled = true;
      live.scheduled = t0;
      live.cached_prompt_tokens = s.seq->num_cached_tokens;
    }
  }

  std::span<float> logits;
  try {
    logits = slot.instance.forward(batch);
  } catch (const std::exception& e) {  // e.g. bad_alloc too: fail this step's requests, keep serving
    scheduler.fail_step(e.what());
    deliver_finished(slot);
    return;
  }

  add_hidden_sums(slot, plan);

  // Sample one token per sequence that wanted logits, in plan order (after
  // verifying its draft, if it has one); the first logits of a request with
  // n > 1 choices also give the others' first tokens.
  const size_t vocab = static_cast<size_t>(slot.info.n_vocab);
  std::vector<EntryResult>& sampled = sampled_;
  std::vector<std::pair<uint64_t, GeneratedToken>>& outputs = outputs_;
  std::vector<float>& raw = raw_logits_;
  sampled.clear();
  outputs.clear();
  branches_.clear();
  size_t row = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    Live& live = *live_.at(s.seq->id());
    if (live.scores(s)) {
      const size_t rows = static_cast<size_t>(s.num_tokens);
      add_scores(live, s, logits.subspan(row * vocab, rows * vocab), vocab);
      row += rows;
      continue;
    }
    if (!s.needs_logits) continue;
    if (s.num_draft > 0) {
      const size_t rows = 1 + static_cast<size_t>(s.num_draft);
      sampled.push_back(verify_draft(slot, live, *s.seq, s.num_draft, logits.subspan(row * vocab, rows * vocab)));
      row += rows;
      continue;
    }
    std::span<float> l = logits.subspan(row++ * vocab, vocab);
    const bool branches = !live.unforked.empty();
    if (live.top_logprobs >= 0 || branches) raw.assign(l.begin(), l.end());  // the sampler modifies l
    GeneratedToken g{live.sampler.sample(l, s.seq->generated()), 0.0f, {}};
    if (live.top_logprobs >= 0) fill_logprobs(raw, g.token, live.top_logprobs, g);
    sampled.push_back({g.token});
    outputs.emplace_back(s.seq->id(), std::move(g));
    for (uint64_t child : live.unforked) {
      Live& c = *live_.at(child);
      branch_logits_.assign(raw.begin(), raw.end());
      GeneratedToken b{c.sampler.sample(branch_logits_, {}), 0.0f, {}};
      if (c.top_logprobs >= 0) fill_logprobs(raw, b.token, c.top_logprobs, b);
      branches_.push_back({s.seq->id(), child, b.token});
      outputs.emplace_back(child, std::move(b));
    }
    live.unforked.clear();
  }
  scheduler.postprocess(sampled);
  for (const Branch& b : branches_) branch(slot, b);
  // Decode-only steps teach the draft policy what wide steps cost now.
  if (slot.spec.proposer && std::ranges::all_of(plan.seqs, [](const ScheduledSeq& s) { return s.num_tokens == 1 + s.num_draft; }))
    slot.spec.cost.observe(plan.num_tokens, ms_between(t0, Clock::now()));
  propose(slot);

  const auto now = Clock::now();
  {  // Publish first: whoever sees a token also sees it (and its draft) counted.
    std::lock_guard lock(mu_);
    EngineMetrics& m = slot.metrics;
    m.scheduler = scheduler.metrics();
    m.generated_tokens += outputs.size();
    m.spec = slot.spec_metrics;
    m.steps += 1;
    m.last_step_ms = ms_between(t0, now);
  }
  for (auto& [id, g] : outputs) {
    Live& live = *live_.at(id);
    if (live.generated++ == 0) live.first_token = now;
    live.last_token = now;
    if (live.is_stop(g.token, slot.info.end_of_generation)) continue;  // verify_draft emits nothing after one
    RequestOutput out;
    out.id = id;
    out.index = live.index;
    out.tokens.push_back(std::move(g));
    out.prompt_tokens = live.prompt_tokens;
    out.cached_prompt_tokens = live.cached_prompt_tokens;
    out.generated_tokens = live.generated;
    live.callback(out);
  }
  deliver_finished(slot);
}

// Embeddings: each chunk's sum of final hidden states joins its request's;
// a chunk from position 0 starts it afresh (a preempted sequence is recomputed).
void Engine::add_hidden_sums(ModelSlot& slot, const StepPlan& plan) {
  const std::span<const float> sums = slot.instance.summed_hidden();
  const size_t dim = static_cast<size_t>(slot.info.n_embd);
  size_t k = 0;
  for (const ScheduledSeq& s : plan.seqs) {
    if (!live_.at(s.seq->id())->embed) continue;
    std::vector<double>& sum = live_.at(s.seq->id())->hidden_sum;
    if (s.start == 0) sum.assign(dim, 0.0);
    for (size_t d = 0; d < dim; ++d) sum[d] += sums[k * dim + d];
    ++k;
  }
}

// A score request's chunk: each row's logits give the next token's
// log-probability, counted from score_from on; a chunk from position 0 starts
// afresh (a preempted sequence is recomputed).
void Engine::add_scores(Live& live, const ScheduledSeq& s, std::span<const float> logits, size_t vocab) {
  if (s.start == 0) {
    live.score_logprob = 0;
    live.scored_tokens = 0;
  }
  const auto tokens = s.seq->all_tokens();
  for (int j = 0; j < s.num_tokens; ++j) {
    const int next = s.start + j + 1;
    if (next < live.score_from || next >= s.seq->num_tokens()) continue;
    const auto row = logits.subspan(static_cast<size_t>(j) * vocab, vocab);
    live.score_logprob += row[static_cast<size_t>(tokens[static_cast<size_t>(next)])] - partition(row).log_z;
    ++live.scored_tokens;
  }
}

// The entry's tokens: the accepted drafts and the one after them, up to
// the first that stops the request (the scheduler drops the rest).
EntryResult Engine::verify_draft(ModelSlot& slot, Live& live, const Sequence& seq, int num_draft, std::span<float> logits) {
  const size_t vocab = static_cast<size_t>(slot.info.n_vocab);
  Draft& draft = live.draft;
  draft.tokens.resize(static_cast<size_t>(num_draft));  // the scheduler keeps all of a draft or none
  if (!draft.q.empty()) draft.q.resize(draft.tokens.size() * vocab);
  if (live.top_logprobs >= 0) raw_logits_.assign(logits.begin(), logits.end());
  const auto generated = seq.generated();
  history_.assign(generated.begin(), generated.end() - num_draft);
  const EntryResult r = verify(live.sampler, logits, vocab, draft, history_, probs_);

  SpecMetrics& m = slot.spec_metrics;
  ++m.drafts;
  m.draft_tokens += static_cast<uint64_t>(num_draft);
  m.accepted_tokens += static_cast<uint64_t>(r.accepted_drafts);
  for (int i = 0; i < r.accepted_drafts; ++i) ++m.accepted_per_pos[static_cast<size_t>(i)];
  live.acceptance.record(num_draft, r.accepted_drafts);
  // Tries that miss come ever more rarely: a draft that keeps missing costs almost nothing.
  if (r.accepted_drafts > 0) live.probe_interval = Live::kFirstProbe;
  else if (live.probing) live.probe_interval = std::min(2 * live.probe_interval, Live::kLastProbe);

  for (int i = 0; i <= r.accepted_drafts; ++i) {
    GeneratedToken g{i < r.accepted_drafts ? draft.tokens[static_cast<size_t>(i)] : r.token, 0.0f, {}};
    if (live.top_logprobs >= 0)
      fill_logprobs(std::span(raw_logits_).subspan(static_cast<size_t>(i) * vocab, vocab), g.token, live.top_logprobs, g);
    const bool stop = live.is_stop(g.token, slot.info.end_of_generation);
    outputs_.emplace_back(seq.id(), std::move(g));
    if (stop) break;
  }
  return r;
}

// Drafts for the next step's decodes, as many per sequence as pay for
// their rows (or max_k when not adaptive).
void Engine::propose(ModelSlot& slot) {
  const SpecConfig& spec = slot.spec;
  if (!spec.proposer) return;
  slot.scheduler.draftable(draftable_);
  std::erase_if(draftable_, [&](const Sequence* s) { return !live_.at(s->id())->speculative; });
  if (draftable_.empty()) return;
  alpha_.clear();
  for (const Sequence* s : draftable_) alpha_.push_back(live_.at(s->id())->acceptance.rate());
  bool drafts_can_pay = true;  // were every draft accepted
  if (spec.adaptive) {
    choose_draft_lengths(alpha_, spec.max_k, spec.cost, slot.draft_ms_per_k, draft_k_);
    if (std::ranges::find(draft_k_, 0) != draft_k_.end()) {
      alpha_.assign(draftable_.size(), 1.0);
      choose_draft_lengths(alpha_, spec.max_k, spec.cost, slot.draft_ms_per_k, best_case_k_);
      drafts_can_pay = std::ranges::any_of(best_case_k_, [](int k) { return k > 0; });
    }
  } else {
    draft_k_.assign(draftable_.size(), spec.max_k);
  }
  draft_requests_.clear();
  int passes = 0;
  for (size_t i = 0; i < draftable_.size(); ++i) {
    const Sequence& seq = *draftable_[i];
    Live& live = *live_.at(seq.id());
    // A sequence whose drafts stopped paying gets one now and then, so its
    // acceptance can recover; only every kLastProbe steps when drafts would
    // not pay even if all were accepted (a draft as slow as the model, a
    // step too wide), which also keeps the proposer's cost up to date.
    live.probing = draft_k_[i] == 0 && ++live.steps_without_draft >= (drafts_can_pay ? live.probe_interval : Live::kLastProbe);
    if (live.probing) draft_k_[i] = 1;
    if (draft_k_[i] == 0) continue;
    live.steps_without_draft = 0;
    passes = std::max(passes, draft_k_[i]);
    draft_requests_.push_back({seq.id(), seq.all_tokens(), seq.num_prompt_tokens(), draft_k_[i], &live.draft_sampler, &live.draft});
  }
  if (draft_requests_.empty()) return;
  const auto t0 = Clock::now();
  try {
    spec.proposer->propose(draft_requests_);
  } catch (const std::exception&) {  // a failing proposer costs this step's drafts, never its requests
    for (const DraftRequest& r : draft_requests_) r.out->tokens.clear();
    return;
  }
  const double total_ms = ms_between(t0, Clock::now());
  const double ms = std::max(0.0, total_ms - spec.proposer->catch_up_ms()) / passes;
  slot.spec_metrics.proposer_ms += total_ms;
  slot.draft_ms_per_k = slot.draft_ms_per_k == 0 ? ms : 0.9 * slot.draft_ms_per_k + 0.1 * ms;

  const size_t vocab = static_cast<size_t>(slot.info.n_vocab);
  for (const DraftRequest& r : draft_requests_) {
    Draft& d = *r.out;
    d.tokens.resize(static_cast<size_t>(slot.scheduler.set_draft(r.id, d.tokens)));
    if (!d.q.empty()) d.q.resize(d.tokens.size() * vocab);
  }
}

// Choice b.child continues choice 0's history with its own first token,
// sharing its KV blocks; when choice 0 has finished or the running set is
// full, it queues instead, and its admission finds the prompt's full blocks
// in the prefix cache.
void Engine::branch(ModelSlot& slot, const Branch& b) {
  Live& child = *live_.at(b.child);
  const Live& parent = *live_.at(b.parent);
  Scheduler& scheduler = slot.scheduler;
  const Sequence* p = scheduler.find(b.parent);
  if (p && p->status == SequenceStatus::Running && !p->cancel_requested &&
      scheduler.metrics().running < config_.max_seqs) {
    child.was_scheduled = true;  // with choice 0's prompt, cache hits and queue time
    child.scheduled = parent.scheduled;
    child.cached_prompt_tokens = parent.cached_prompt_tokens;
    scheduler.fork(b.parent, b.child, b.token);
  } else {
    Sequence seq = std::move(*child.unforked_seq);
    seq.append(b.token);
    scheduler.add(std::move(seq));
  }
  child.unforked_seq.reset();
}

void Engine::deliver(uint64_t id, FinishReason reason, const std::string& error) {
  const auto it = live_.find(id);
  if (it == live_.end()) return;
  Live& live = *it->second;
  const auto now = Clock::now();
  RequestOutput out;
  out.id = id;
  out.index = live.index;
  out.finished = true;
  out.finish_reason = reason;
  out.error = error;
  out.prompt_tokens = live.prompt_tokens;
  out.cached_prompt_tokens = live.cached_prompt_tokens;
  out.generated_tokens = live.generated;
  RequestTimings& t = out.timings;
  t.e2e_ms = ms_between(live.submitted, now);
  if (live.was_scheduled) t.queue_ms = ms_between(live.submitted, live.scheduled);
  if (live.generated > 0) t.ttft_ms = ms_between(live.submitted, live.first_token);
  if (live.generated > 1) t.tpot_ms = ms_between(live.first_token, live.last_token) / (live.generated - 1);
  if (live.embed && reason == FinishReason::Stop) out.embedding = normalized(live.hidden_sum);
  if (live.score_from > 0 && reason == FinishReason::Stop) {
    out.score_logprob = live.score_logprob;
    out.scored_tokens = live.scored_tokens;
  }
  live.callback(out);
  if (Proposer* p = models_[static_cast<size_t>(live.model)]->spec.proposer) p->release(id);
  live_.erase(it);
}

void Engine::deliver_finished(ModelSlot& slot) {
  auto finished = slot.scheduler.take_finished();
  // Publish first: whoever sees a request finish also sees its blocks freed.
  {
    std::lock_guard lock(mu_);
    slot.metrics.scheduler = slot.scheduler.metrics();
    for (const auto& seq : finished)
      if (const auto it = live_.find(seq->id()); it != live_.end() && it->second->was_scheduled && it->second->index == 0)
        slot.metrics.prompt_tokens += static_cast<uint64_t>(it->second->prompt_tokens);
  }
  for (const auto& seq : finished) {
    const auto it = live_.find(seq->id());
    if (it == live_.end()) continue;
    // Choice 0 ended before its first token (rejected, cancelled, failed):
    // the choices that would have forked from it end the same way.
    for (uint64_t child : std::exchange(it->second->unforked, {})) deliver(child, seq->finish_reason, seq->error);
    deliver(seq->id(), seq->finish_reason, seq->error);
  }
}

}  // namespace llmserve::engine
