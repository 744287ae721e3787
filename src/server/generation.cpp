#include "server/generation.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <random>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "server/api_error.h"
#include "server/sse.h"

namespace llmserve::server {

using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const char* finish_word(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::Stop: return "stop";
    case engine::FinishReason::Length: return "length";
    case engine::FinishReason::Error: return "error";
    default: return "abort";
  }
}

}  // namespace

struct Generation::Choice {
  Choice(size_t i, const tok::Tokenizer& tok, bool fresh_text, std::vector<std::string> stops)
      : index(i), decoder(tok, fresh_text), stops(std::move(stops)) {}

  struct PendingLogprob {
    LogprobEntry entry;
    size_t start, end;  // bytes of the choice's text this token produced
  };

  size_t index;
  uint64_t engine_id = 0;
  tok::StreamDecoder decoder;
  StopMatcher stops;
  size_t produced = 0;                 // text bytes decoded so far
  std::deque<PendingLogprob> pending;  // logprobs whose text is still held back
  std::string text;                    // released, not yet sent (streams) / all of it
  std::vector<LogprobEntry> logprobs;  // likewise
  int tokens = 0;
  std::vector<int32_t> ids;            // the generated tokens, end-of-generation excluded
  double logprob_sum = 0;              // of `ids`, when the engine gave logprobs
  std::string answer;                  // all the released text, when the plan stores the answer
  int cached_prompt_tokens = 0;
  bool finished = false;
  std::string finish_reason;
  std::string error;
  bool first_sent = false, finish_sent = false;
};

// Shared with the engine's callbacks; outlives the Generation if need be.
struct Generation::Inbox {
  Inbox(ModelMetrics& m, std::atomic<int>& f, size_t n) : metrics(m), in_flight(f), last_token(n), stopped_by_us(n) {}

  // Engine thread. Observes metrics, queues the output and wakes the strand.
  void push(size_t i, const engine::RequestOutput& out) {
    const auto now = Clock::now();
    if (!out.tokens.empty()) {
      if (last_token[i] != Clock::time_point{}) {
        const double gap = std::chrono::duration<double>(now - last_token[i]).count() / static_cast<double>(out.tokens.size());
        for (size_t k = 0; k < out.tokens.size(); ++k) metrics.inter_token_latency.observe(gap);
      }
      last_token[i] = now;
    }
    if (out.finished) record_finish(i, out);
    {
      std::lock_guard lock(mu);
      items.emplace_back(i, out);
      if (posted) return;
      posted = true;
    }
    if (auto ex = exchange.lock()) {
      ex->post([g = generation] {
        if (auto s = g.lock()) s->drain();
      });
    }
  }

  void record_finish(size_t i, const engine::RequestOutput& out) {
    const auto& t = out.timings;
    metrics.e2e_request_latency.observe(t.e2e_ms / 1e3);
    if (out.generated_tokens > 0) {
      metrics.time_to_first_token.observe(t.ttft_ms / 1e3);
      metrics.request_queue_time.observe(t.queue_ms / 1e3);
    }
    metrics.prompt_tokens_per_request.observe(out.prompt_tokens);
    metrics.generation_tokens_per_request.observe(out.generated_tokens);
    Outcome o = Outcome::Error;
    switch (out.finish_reason) {
      case engine::FinishReason::Stop: o = Outcome::Stop; break;
      case engine::FinishReason::Length: o = Outcome::Length; break;
      case engine::FinishReason::Cancelled: o = stopped_by_us[i] ? Outcome::Stop : Outcome::Abort; break;
      default: break;
    }
    metrics.count_outcome(o);
    in_flight.fetch_sub(1);
  }

  ModelMetrics& metrics;
  std::atomic<int>& in_flight;
  std::vector<Clock::time_point> last_token;        // engine thread only
  std::vector<std::atomic<bool>> stopped_by_us;     // cancelled after a stop string
  std::mutex mu;
  std::vector<std::pair<size_t, engine::RequestOutput>> items;
  bool posted = false;
  std::weak_ptr<Exchange> exchange;
  std::weak_ptr<Generation> generation;
};

Generation::Generation(GenerationContext ctx, GenerationPlan plan, std::shared_ptr<Exchange> exchange)
    : ctx_(ctx), plan_(std::move(plan)), exchange_(std::move(exchange)) {
  const auto& tok = ctx_.model.tokenizer;
  for (int i = 0; i < plan_.request.n; ++i)
    choices_.push_back(std::make_unique<Choice>(static_cast<size_t>(i), tok, plan_.request.endpoint == Endpoint::Chat, plan_.stop));
}

Generation::~Generation() = default;

void Generation::start() {
  started_ = Clock::now();
  const size_t n = choices_.size();
  inbox_ = std::make_shared<Inbox>(ctx_.model.metrics, ctx_.model.in_flight, n);
  inbox_->exchange = exchange_;
  inbox_->generation = weak_from_this();
  exchange_->on_close([self = shared_from_this()] { self->abort("client disconnected"); });
  exchange_->on_server_stop([self = shared_from_this()] { self->fail(drain_timeout_error()); });
  if (done_) {  // gone already: nothing was submitted
    ctx_.model.in_flight.fetch_sub(static_cast<int>(n));
    return;
  }
  if (plan_.timeout.count() > 0)
    exchange_->after(time_left(plan_.timeout, plan_.received), [w = weak_from_this()] {  // the cache, the router took some
      if (auto s = w.lock()) {
        s->ctx_.metrics.count_rejection("timeout");
        s->fail(timeout_error(s->plan_.timeout));
      }
    });

  uint64_t seed = plan_.request.sampling.seed;
  if (!plan_.request.seed_given) seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  engine::RequestParams p;
  p.model = ctx_.model.index;
  p.prompt = plan_.prompt;
  p.sampling = plan_.request.sampling;
  p.sampling.seed = seed;  // choice i samples with seed + i
  p.max_new_tokens = plan_.max_new_tokens;
  // A stored answer keeps its tokens' mean log-probability (verified hits).
  p.top_logprobs = plan_.store ? std::max(plan_.request.top_logprobs, 0) : plan_.request.top_logprobs;
  p.speculative = plan_.request.speculative;
  p.n = static_cast<int>(n);  // the prompt is computed once for all choices
  try {
    const uint64_t id = ctx_.engine.submit(std::move(p), [inbox = inbox_](const engine::RequestOutput& o) {
      inbox->push(static_cast<size_t>(o.index), o);
    });
    for (size_t i = 0; i < n; ++i) choices_[i]->engine_id = id + i;
  } catch (const Error& e) {
    ctx_.model.in_flight.fetch_sub(static_cast<int>(n));  // never submitted
    fail(503, e.what(), "engine_unavailable");
  }
}

void Generation::drain() {
  std::vector<std::pair<size_t, engine::RequestOutput>> items;
  {
    std::lock_guard lock(inbox_->mu);
    items.swap(inbox_->items);
    inbox_->posted = false;
  }
  if (done_) return;
  for (const auto& [i, out] : items) on_output(i, out);
  bool all = true;
  for (const auto& c : choices_) all &= c->finished;
  if (all) complete();
  else if (plan_.request.stream) send_progress();
}

void Generation::on_output(size_t index, const engine::RequestOutput& out) {
  Choice& c = *choices_[index];
  if (c.finished) return;  // e.g. the tail of one cut short by a stop string
  if (!out.tokens.empty() && first_token_ms_ < 0) first_token_ms_ = ms_since(started_);
  c.cached_prompt_tokens = out.cached_prompt_tokens;
  take_tokens(c, out);
  if (c.finished || !out.finished) return;
  c.tokens = std::max(c.tokens, out.generated_tokens);  // the end-of-generation token counts too
  if (out.finish_reason == engine::FinishReason::Error) c.error = out.error.empty() ? "generation failed" : out.error;
  release(c, c.decoder.flush(), true);
  if (!c.finished) finish_choice(c, finish_word(out.finish_reason));
}

void Generation::take_tokens(Choice& c, const engine::RequestOutput& out) {
  const auto& tok = ctx_.model.tokenizer;
  const bool want_logprobs = plan_.request.top_logprobs >= 0;
  for (const auto& g : out.tokens) {
    ++c.tokens;
    c.ids.push_back(g.token);
    c.logprob_sum += g.logprob;
    std::string piece = c.decoder.push(g.token);
    const size_t start = c.produced;
    c.produced += piece.size();
    if (want_logprobs) {
      LogprobEntry e{tok.piece(g.token), g.logprob, {}, start};
      for (const auto& t : g.top) e.top.emplace_back(tok.piece(t.token), t.logprob);
      c.pending.push_back({std::move(e), start, c.produced});
    }
    release(c, std::move(piece), false);
    if (c.finished) return;
  }
}

// Passes new text through the stop strings; the logprobs of tokens whose
// text is released go with it.
void Generation::release(Choice& c, std::string text, bool final) {
  std::string out = c.stops.push(text);
  if (final) out += c.stops.flush();
  c.text += out;
  if (plan_.store) c.answer += out;
  const size_t limit = c.stops.emitted();
  const bool stopped = c.stops.stopped();
  while (!c.pending.empty()) {
    const auto& p = c.pending.front();
    if (stopped ? p.start >= limit : p.end > limit) break;
    c.logprobs.push_back(std::move(c.pending.front().entry));
    c.pending.pop_front();
  }
  if (stopped) {
    c.pending.clear();
    if (!c.finished) {
      inbox_->stopped_by_us[c.index] = true;
      ctx_.engine.cancel(c.engine_id);  // its blocks are freed within a step
      finish_choice(c, "stop");
    }
  }
}

void Generation::finish_choice(Choice& c, std::string reason) {
  c.finished = true;
  c.finish_reason = std::move(reason);
}

void Generation::send_progress() {
  const Endpoint ep = plan_.request.endpoint;
  const bool want_logprobs = plan_.request.top_logprobs >= 0;
  for (const auto& cp : choices_) {
    Choice& c = *cp;
    const bool has_news = !c.text.empty() || !c.logprobs.empty() || (ep == Endpoint::Chat && !c.first_sent);
    if (!has_news && !(c.finished && !c.finish_sent)) continue;
    if (!streaming_started_) {
      exchange_->begin_stream(200, "text/event-stream", plan_.headers);
      streaming_started_ = true;
    }
    if (has_news) {
      ChoicePiece p{static_cast<int>(c.index), std::move(c.text), want_logprobs, std::move(c.logprobs), {}, !c.first_sent};
      c.text.clear();
      c.logprobs.clear();
      c.first_sent = true;
      exchange_->write(sse_event(dump(stream_chunk(plan_.meta, p, plan_.request.include_usage))));
    }
    if (c.finished && !c.finish_sent) {
      ChoicePiece p{static_cast<int>(c.index), {}, want_logprobs, {}, c.finish_reason, false};
      c.finish_sent = true;
      exchange_->write(sse_event(dump(stream_chunk(plan_.meta, p, plan_.request.include_usage))));
    }
  }
}

Usage Generation::usage() const {
  Usage u;
  u.prompt_tokens = static_cast<int>(plan_.prompt.size());
  for (const auto& c : choices_) {
    u.completion_tokens += c->tokens;
    u.cached_tokens = std::max(u.cached_tokens, c->cached_prompt_tokens);
  }
  return u;
}

void Generation::complete() {
  for (const auto& c : choices_) {
    if (!c->error.empty() && !streaming_started_) {
      // Refused at admission (no token came): the request asked for something
      // the engine cannot hold, e.g. more KV than the pool has.
      return fail(c->tokens == 0 ? 400 : 500, c->error, c->tokens == 0 ? "request_not_admitted" : "generation_failed");
    }
  }
  done_ = true;
  if (plan_.request.endpoint == Endpoint::Chat)
    for (const auto& c : choices_)
      if (c->error.empty() && !c->stops.stopped()) ctx_.model.turns.remember(plan_.prompt_text, plan_.prompt, c->ids);
  const Usage u = usage();
  const auto whole = [](const auto& c) { return c->finish_reason == "stop" || c->finish_reason == "length"; };
  if (plan_.store && std::ranges::all_of(choices_, whole)) plan_.store(answer());
  if (plan_.request.stream) {
    send_progress();
    if (plan_.request.include_usage) exchange_->write(sse_event(dump(usage_chunk(plan_.meta, u))));
    exchange_->write(kSseDone);
    exchange_->end_stream();
  } else {
    std::vector<ChoicePiece> pieces;
    for (const auto& c : choices_)
      pieces.push_back({static_cast<int>(c->index), std::move(c->text), plan_.request.top_logprobs >= 0,
                        std::move(c->logprobs), c->finish_reason, false});
    exchange_->respond({200, "application/json", dump(full_response(plan_.meta, pieces, u)), plan_.headers});
  }
  ctx_.metrics.count_http_status(200);
  log_line(200, "ok");
}

gateway::CachedAnswer Generation::answer() const {
  gateway::CachedAnswer a;
  a.model = ctx_.model.name;
  for (const auto& c : choices_) a.choices.push_back({c->answer, c->ids, c->finish_reason, {}});
  a.prompt_tokens = static_cast<int>(plan_.prompt.size());
  a.completion_tokens = usage().completion_tokens;
  const Choice& first = *choices_.front();
  if (!first.ids.empty()) a.mean_logprob = first.logprob_sum / static_cast<double>(first.ids.size());
  return a;
}

void Generation::fail(int status, const std::string& message, const char* code) {
  if (done_) return;
  done_ = true;
  for (const auto& c : choices_)
    if (!c->finished) ctx_.engine.cancel(c->engine_id);
  const ApiError err(status, message, error_type_for(status), {}, code);
  if (streaming_started_) {
    // Headers are gone already: the error travels as an event, as OpenAI's do.
    exchange_->write(sse_event(error_body(err)));
    exchange_->write(kSseDone);
    exchange_->end_stream();
  } else {
    exchange_->respond({status, "application/json", error_body(err), plan_.headers});
  }
  ctx_.metrics.count_http_status(status);
  log_line(status, std::string(code) + ": " + message);
}

void Generation::abort(const char* why) {
  if (done_) return;
  done_ = true;
  for (const auto& c : choices_)
    if (!c->finished) ctx_.engine.cancel(c->engine_id);
  ctx_.metrics.count_http_status(499);
  log_line(499, why);
}

void Generation::log_line(int status, std::string_view outcome) const {
  const Usage u = usage();
  std::string reasons;
  for (const auto& c : choices_) {
    if (!reasons.empty()) reasons += ',';
    reasons += c->finish_reason.empty() ? std::string("-") : c->finish_reason;
  }
  spdlog::info("{} {} {} model={} status={} n={} prompt_tokens={} completion_tokens={} ttft_ms={:.1f} e2e_ms={:.1f} finish={} "
               "request_id={} ({})",
               plan_.meta.id, plan_.remote, plan_.request.endpoint == Endpoint::Chat ? "chat" : "completions",
               ctx_.model.name, status, choices_.size(), u.prompt_tokens, u.completion_tokens, std::max(0.0, first_token_ms_), ms_since(started_),
               reasons, plan_.request_id, outcome);
}

}  // namespace llmserve::server
