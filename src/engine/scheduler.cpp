#include "engine/scheduler.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/error.h"

namespace llmserve::engine {

namespace {

bool contains(std::span<const int32_t> tokens, int32_t token) { return std::ranges::find(tokens, token) != tokens.end(); }

void broken(const std::string& what) { throw Error("scheduler invariant broken: " + what); }

SchedulerConfig validated(SchedulerConfig config) {
  validate(config);
  return config;
}

}  // namespace

void validate(const SchedulerConfig& c) {
  auto check = [](bool ok, const char* what) {
    if (!ok) throw Error(std::string("invalid scheduler setting: ") + what);
  };
  check(c.num_blocks > 0, "num_blocks must be > 0");
  check(c.block_size > 0, "block_size must be > 0");
  check(c.max_seqs > 0, "max_seqs must be > 0");
  // Every running sequence's decode token must fit one step.
  check(c.max_batch_tokens >= c.max_seqs, "max_batch_tokens must be >= max_seqs");
  check(c.max_context >= 0, "max_context must be >= 0");
}

Scheduler::Scheduler(SchedulerConfig config)
    : config_(validated(std::move(config))), blocks_(config_.num_blocks, config_.block_size) {}

int Scheduler::token_limit(const Sequence& seq) const {
  // 64-bit: max_new_tokens comes from a request and may be near INT_MAX.
  int64_t limit = std::numeric_limits<int>::max();
  if (seq.max_new_tokens() > 0)
    limit = std::min(limit, int64_t{seq.num_prompt_tokens()} + seq.max_new_tokens());
  if (config_.max_context > 0) limit = std::min(limit, int64_t{config_.max_context});
  return static_cast<int>(limit);
}

std::string Scheduler::admission_error(const Sequence& seq) const {
  const int prompt = seq.num_prompt_tokens();
  const int max_new = seq.max_new_tokens();
  const int context = config_.max_context;
  if (prompt == 0) return "the prompt is empty";
  if (seq.prefill_only) {
    if (context > 0 && prompt > context)
      return "the input has " + std::to_string(prompt) + " tokens, over the max context of " + std::to_string(context);
  } else {
    if (max_new < 0) return "max_new_tokens must be >= 0";
    if (max_new == 0 && context == 0) return "max_new_tokens is required (no max context is configured)";
    if (context > 0 && prompt >= context)
      return "the prompt has " + std::to_string(prompt) + " tokens, which leaves no room in the max context of " +
             std::to_string(context);
    if (context > 0 && max_new > context - prompt)
      return "the prompt (" + std::to_string(prompt) + " tokens) plus max_new_tokens (" + std::to_string(max_new) +
             ") exceeds the max context of " + std::to_string(context) + " tokens";
  }
  // The last token is sampled but never fed back, so it needs no KV; a
  // prefill-only sequence samples nothing and stores every token's.
  const int kv_tokens = seq.prefill_only ? prompt : token_limit(seq) - 1;
  if (blocks_.blocks_for(kv_tokens) > blocks_.num_blocks())
    return "it needs " + std::to_string(blocks_.blocks_for(kv_tokens)) + " KV cache blocks for " +
           std::to_string(kv_tokens) + " tokens, but the pool has only " + std::to_string(blocks_.num_blocks());
  // Without chunking, a prompt (or its recompute after preemption) runs in one step.
  if (!config_.chunked_prefill && kv_tokens > config_.max_batch_tokens)
    return "it may need " + std::to_string(kv_tokens) + " tokens in one step, over the step budget of " +
           std::to_string(config_.max_batch_tokens) + " (chunked prefill is off)";
  return {};
}

bool Scheduler::add(Sequence seq) {
  if (live_.contains(seq.id())) throw Error("sequence id " + std::to_string(seq.id()) + " is already in use");
  auto owned = std::make_unique<Sequence>(std::move(seq));
  owned->arrival = arrivals_++;
  if (std::string error = admission_error(*owned); !error.empty()) {
    owned->status = SequenceStatus::Finished;
    owned->finish_reason = FinishReason::Error;
    owned->error = "request " + std::to_string(owned->id()) + " rejected: " + error;
    finished_.push_back(std::move(owned));
    return false;
  }
  // A choice queued with its first token (Engine, n > 1) may already be done.
  if (owned->num_generated_tokens() > 0)
    if (const FinishReason reason = stop_reason(*owned); reason != FinishReason::None) {
      owned->status = SequenceStatus::Finished;
      owned->finish_reason = reason;
      finished_.push_back(std::move(owned));
      return true;
    }
  owned->status = SequenceStatus::Waiting;
  waiting_.push_back(owned.get());
  const SeqId id = owned->id();
  live_.emplace(id, std::move(owned));
  return true;
}

bool Scheduler::cancel(SeqId id) {
  const auto it = live_.find(id);
  if (it == live_.end() || it->second->cancel_requested) return false;
  it->second->cancel_requested = true;
  cancelled_.push_back(id);
  return true;
}

void Scheduler::fork(SeqId parent_id, SeqId child_id, int32_t last_token) {
  if (step_pending_) throw Error("fork() must come between postprocess() and the next schedule()");
  if (live_.contains(child_id)) throw Error("sequence id " + std::to_string(child_id) + " is already in use");
  Sequence& parent = live(parent_id);
  if (parent.status != SequenceStatus::Running || parent.cancel_requested)
    throw Error("cannot fork sequence " + std::to_string(parent_id) + ": it is not running");
  if (static_cast<int>(running_.size()) >= config_.max_seqs)
    throw Error("cannot fork sequence " + std::to_string(parent_id) + ": max_seqs (" +
                std::to_string(config_.max_seqs) + ") sequences are running");
  auto child = std::make_unique<Sequence>(parent.branch(child_id, last_token));
  child->arrival = arrivals_++;
  blocks_.fork(parent, *child);
  Sequence& c = *child;
  running_.push_back(&c);
  live_.emplace(child_id, std::move(child));
  if (const FinishReason reason = stop_reason(c); reason != FinishReason::None) finish(c, reason);
}

const StepPlan& Scheduler::schedule() {
  if (step_pending_) throw Error("schedule() called before postprocess() or fail_step() of the previous step");
  plan_.seqs.clear();
  plan_.copies.clear();
  plan_.preempted.clear();
  reap_cancelled();
  int budget = config_.max_batch_tokens;
  schedule_decodes(budget);
  schedule_prefills(budget);
  // After a preemption memory is short: let the running sequences drain first.
  if (plan_.preempted.empty()) admit(budget);
  plan_.num_tokens = config_.max_batch_tokens - budget;
  step_pending_ = !plan_.empty();
  if (step_pending_) {
    ++steps_;
    scheduled_tokens_ += static_cast<uint64_t>(plan_.num_tokens);
  }
  return plan_;
}

void Scheduler::reap_cancelled() {
  for (SeqId id : cancelled_) {
    const auto it = live_.find(id);
    if (it != live_.end() && it->second->cancel_requested) finish(*it->second, FinishReason::Cancelled);
  }
  cancelled_.clear();
}

namespace {
// Its next step computes one token (and its drafts) and samples after it.
bool decoding(const Sequence* s) { return s->num_uncomputed_tokens() == 1 + s->num_draft_tokens && !s->prefill_only; }
}  // namespace

void Scheduler::schedule_decodes(int& budget) {
  int decodes_left = static_cast<int>(std::ranges::count_if(running_, decoding));
  // Sequences only leave from the back (preemption), so indexes stay valid;
  // the budget cannot run out: running_.size() <= max_seqs <= max_batch_tokens,
  // and drafts only take what the step's other decodes leave.
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    if (!decoding(&seq)) continue;  // still prefilling: gets a chunk later
    --decodes_left;
    if (budget - 1 - seq.num_draft_tokens < decodes_left) drop_draft(seq);
    if (!make_room_for_decode(seq)) break;  // seq was the last one and is gone
    const int n = 1 + seq.num_draft_tokens;
    plan_.seqs.push_back({&seq, seq.num_computed_tokens, n, true, seq.num_draft_tokens});
    budget -= n;
  }
}

bool Scheduler::make_room_for_decode(Sequence& seq) {
  if (seq.num_draft_tokens > 0 && !blocks_.can_append(seq)) drop_draft(seq);  // drafts never preempt anyone
  while (!blocks_.can_append(seq)) {
    // Admission guarantees a sequence fits the pool alone, so this means a
    // broken invariant; fail that sequence rather than loop forever.
    if (running_.size() == 1) {
      finish(seq, FinishReason::Error, "the KV cache pool has no block left for this sequence's next token");
      return false;
    }
    const bool self = running_.back() == &seq;
    preempt_last();
    if (self) return false;
  }
  if (const auto copy = blocks_.append_slot(seq)) plan_.copies.push_back(*copy);
  return true;
}

void Scheduler::drop_draft(Sequence& seq) {
  seq.truncate(seq.num_draft_tokens);
  seq.num_draft_tokens = 0;
}

void Scheduler::schedule_prefills(int& budget) {
  for (Sequence* seq : running_) {
    if (budget == 0) return;
    if (!decoding(seq)) schedule_chunk(*seq, budget);
  }
}

void Scheduler::admit(int& budget) {
  while (budget > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < config_.max_seqs) {
    Sequence& seq = *waiting_.front();
    // Strictly first come, first served: nobody overtakes a head that must wait.
    if (!blocks_.can_allocate(seq)) return;
    if (!config_.chunked_prefill && seq.num_tokens() - blocks_.cached_prefix_tokens(seq) > budget) return;
    waiting_.pop_front();
    blocks_.allocate(seq);
    seq.num_computed_tokens = seq.num_cached_tokens;
    seq.status = SequenceStatus::Running;
    running_.push_back(&seq);
    schedule_chunk(seq, budget);
  }
}

void Scheduler::schedule_chunk(Sequence& seq, int& budget) {
  const int n = std::min(seq.num_uncomputed_tokens(), budget);
  const int start = seq.num_computed_tokens;
  plan_.seqs.push_back({&seq, start, n, start + n == seq.num_tokens() && !seq.prefill_only});
  budget -= n;
}

void Scheduler::preempt_last() {
  // Recompute rather than swap: the prompt and the tokens so far are
  // recomputed on readmission, mostly from the prefix cache.
  Sequence& seq = *running_.back();
  running_.pop_back();
  drop_draft(seq);
  blocks_.free(seq);
  seq.num_computed_tokens = 0;
  seq.status = SequenceStatus::Waiting;
  waiting_.push_front(&seq);
  plan_.preempted.push_back(seq.id());
  ++preemptions_;
}

void Scheduler::postprocess(std::span<const EntryResult> results) {
  if (!step_pending_) throw Error("postprocess() called without a scheduled step");
  const auto wanted = std::ranges::count_if(plan_.seqs, &ScheduledSeq::needs_logits);
  if (static_cast<long>(results.size()) != wanted)
    throw Error("postprocess() got " + std::to_string(results.size()) + " results for " + std::to_string(wanted) +
                " sequences that need one");
  size_t next = 0;
  for (const ScheduledSeq& entry : plan_.seqs) {
    if (!entry.needs_logits) continue;
    const int accepted = results[next++].accepted_drafts;
    if (accepted < 0 || accepted > entry.num_draft)
      throw Error("postprocess(): " + std::to_string(accepted) + " accepted drafts for an entry with " +
                  std::to_string(entry.num_draft));
  }
  next = 0;
  for (const ScheduledSeq& entry : plan_.seqs) {
    Sequence& seq = live(entry.seq->id());
    const EntryResult* result = entry.needs_logits ? &results[next++] : nullptr;
    if (seq.cancel_requested) continue;  // the next schedule() reaps it
    seq.num_computed_tokens += entry.num_tokens;
    if (seq.prefill_only) {
      if (seq.num_computed_tokens == seq.num_tokens()) finish(seq, FinishReason::Stop);
      continue;
    }
    if (!result) {
      blocks_.register_full_blocks(seq, cacheable_tokens(seq));
      continue;
    }
    // Every draft's KV was computed; the accepted ones' stays. The new
    // tokens go in one at a time, as plain decoding would append them.
    const auto drafts = seq.all_tokens().last(static_cast<size_t>(entry.num_draft));
    accepted_.assign(drafts.begin(), drafts.begin() + result->accepted_drafts);
    accepted_.push_back(result->token);
    drop_draft(seq);
    seq.num_computed_tokens = seq.num_tokens();
    FinishReason reason = FinishReason::None;
    for (size_t i = 0; i < accepted_.size() && reason == FinishReason::None; ++i) {
      seq.append(accepted_[i]);
      if (i + 1 < accepted_.size()) ++seq.num_computed_tokens;
      reason = stop_reason(seq);
    }
    blocks_.register_full_blocks(seq, cacheable_tokens(seq));
    if (reason != FinishReason::None)
      finish(seq, reason);
    else if (result->accepted_drafts < entry.num_draft)
      blocks_.truncate(seq, seq.num_computed_tokens);
  }
  step_pending_ = false;
}

// The tokens whose KV a later prompt holding them would compute with the
// same bits: all of them, or only the prompt's (config.cache_generated_blocks).
int Scheduler::cacheable_tokens(const Sequence& seq) const {
  return config_.cache_generated_blocks ? seq.num_tokens() : seq.num_prompt_tokens();
}

namespace {
bool may_draft(const Sequence& seq) {
  return seq.status == SequenceStatus::Running && !seq.cancel_requested && seq.num_draft_tokens == 0 &&
         seq.num_uncomputed_tokens() == 1 && seq.num_generated_tokens() > 0;
}
}  // namespace

void Scheduler::draftable(std::vector<const Sequence*>& out) const {
  out.clear();
  for (const Sequence* seq : running_)
    if (may_draft(*seq)) out.push_back(seq);
}

int Scheduler::set_draft(SeqId id, std::span<const int32_t> draft) {
  if (step_pending_) throw Error("set_draft() must come between postprocess() and the next schedule()");
  Sequence& seq = live(id);
  if (!may_draft(seq))
    throw Error("sequence " + std::to_string(id) + " is not about to decode: it cannot take a draft");
  // The token sampled after the drafts must fit the limit too.
  const int room = token_limit(seq) - seq.num_tokens() - 1;
  const int n = std::clamp(static_cast<int>(draft.size()), 0, std::max(room, 0));
  for (int32_t t : draft.first(static_cast<size_t>(n))) seq.append(t);
  seq.num_draft_tokens = n;
  return n;
}

void Scheduler::truncate(SeqId id, int n) {
  if (step_pending_) throw Error("truncate() must come between postprocess() and the next schedule()");
  Sequence& seq = live(id);
  if (seq.status == SequenceStatus::Running && seq.num_uncomputed_tokens() != 1 + seq.num_draft_tokens)
    throw Error("sequence " + std::to_string(id) + " is still computing its prompt: it cannot be truncated");
  if (n < 0 || n > seq.num_generated_tokens() - seq.num_draft_tokens)
    throw Error("sequence " + std::to_string(id) + " cannot drop " + std::to_string(n) + " of its " +
                std::to_string(seq.num_generated_tokens() - seq.num_draft_tokens) + " generated tokens");
  drop_draft(seq);
  seq.truncate(n);
  if (seq.status != SequenceStatus::Running) return;
  seq.num_computed_tokens = seq.num_tokens() - 1;
  blocks_.truncate(seq, seq.num_computed_tokens);
}

void Scheduler::fail_step(const std::string& message) {
  if (!step_pending_) throw Error("fail_step() called without a scheduled step");
  for (const ScheduledSeq& entry : plan_.seqs) finish(live(entry.seq->id()), FinishReason::Error, message);
  step_pending_ = false;
}

FinishReason Scheduler::stop_reason(const Sequence& seq) const {
  const int32_t last = seq.all_tokens().back();
  if ((!seq.ignore_eos && contains(config_.eos_token_ids, last)) || contains(seq.stop_token_ids(), last)) return FinishReason::Stop;
  if (seq.num_tokens() >= token_limit(seq)) return FinishReason::Length;
  return FinishReason::None;
}

void Scheduler::finish(Sequence& seq, FinishReason reason, std::string error) {
  drop_draft(seq);  // unverified guesses are not output
  if (seq.status == SequenceStatus::Running) {
    blocks_.free(seq);
    running_.erase(std::ranges::find(running_, &seq));
  } else {
    waiting_.erase(std::ranges::find(waiting_, &seq));
  }
  seq.status = SequenceStatus::Finished;
  seq.finish_reason = reason;
  seq.error = std::move(error);
  finished_.push_back(std::move(live_.extract(seq.id()).mapped()));
}

Sequence& Scheduler::live(SeqId id) {
  const auto it = live_.find(id);
  if (it == live_.end()) throw Error("no waiting or running sequence has id " + std::to_string(id));
  return *it->second;
}

const Sequence* Scheduler::find(SeqId id) const {
  const auto it = live_.find(id);
  return it == live_.end() ? nullptr : it->second.get();
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_finished() { return std::exchange(finished_, {}); }

SchedulerMetrics Scheduler::metrics() const {
  SchedulerMetrics m;
  m.running = static_cast<int>(running_.size());
  m.waiting = static_cast<int>(waiting_.size());
  m.preemptions = preemptions_;
  m.blocks_total = blocks_.num_blocks();
  m.blocks_used = blocks_.num_used_blocks();
  m.blocks_free = blocks_.num_free_blocks();
  m.prefix_queried_tokens = blocks_.prefix_queried_tokens();
  m.prefix_hit_tokens = blocks_.prefix_hit_tokens();
  m.last_step_tokens = plan_.num_tokens;
  m.steps = steps_;
  m.scheduled_tokens = scheduled_tokens_;
  return m;
}

void Scheduler::check_invariants() const {
  blocks_.check_consistency();
  std::vector<int> refs(static_cast<size_t>(blocks_.num_blocks()), 0);
  for (const Sequence* seq : running_) {
    const std::string name = "running sequence " + std::to_string(seq->id());
    if (seq->status != SequenceStatus::Running) broken(name + " is not marked running");
    if (seq->num_computed_tokens >= seq->num_tokens()) broken(name + " has nothing left to compute");
    if (static_cast<int>(seq->block_table.size()) < blocks_.blocks_for(seq->num_computed_tokens))
      broken(name + " computed more tokens than its blocks hold");
    for (int b : seq->block_table) ++refs[static_cast<size_t>(b)];
  }
  for (int b = 0; b < blocks_.num_blocks(); ++b)
    if (refs[static_cast<size_t>(b)] != blocks_.ref_count(b))
      broken("block " + std::to_string(b) + " has " + std::to_string(blocks_.ref_count(b)) + " references, but " +
             std::to_string(refs[static_cast<size_t>(b)]) + " block tables hold it");
  for (const Sequence* seq : waiting_)
    if (seq->status != SequenceStatus::Waiting || !seq->block_table.empty() || seq->num_computed_tokens != 0)
      broken("waiting sequence " + std::to_string(seq->id()) + " holds KV state");
  if (live_.size() != running_.size() + waiting_.size()) broken("a live sequence is in no queue");
  if (static_cast<int>(running_.size()) > config_.max_seqs) broken("more than max_seqs sequences are running");
}

}  // namespace llmserve::engine
