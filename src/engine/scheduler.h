#pragma once
// Iteration-level scheduling (Orca, Sarathi-Serve): every step, each running
// sequence's decode token first, then prefill chunks first-come first-served
// under a per-step token budget. Blocks run out -> the most recently admitted
// sequence is preempted and later recomputed (its cached prefix blocks make
// that cheap). Single-threaded: the engine loop owns it.
//
// Per step: schedule() -> copy plan.copies in KV memory -> forward the plan's
// positions -> sample one token per entry that needs logits (verifying its
// draft tokens, if any) -> postprocess(). add(), cancel() and
// take_finished() may be called between any two calls; fork(), set_draft()
// and truncate() after postprocess() and before the next schedule().
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace llmserve::engine {

struct SchedulerConfig {
  int num_blocks = 1024;        // KV pool
  int block_size = 16;          // tokens per block
  int max_batch_tokens = 2048;  // tokens computed per step, all sequences together (>= max_seqs)
  int max_seqs = 64;            // sequences holding KV blocks at once
  int max_context = 0;          // tokens per sequence, prompt + generated; 0: only the pool limits it
  bool chunked_prefill = true;  // off: a prompt is computed in one step, so it must fit the budget
  // The model computes a generated token's KV as a prompt holding that
  // token would (model::InstanceInfo::generated_kv_matches_prompt): then the
  // prefix cache offers generated blocks too, e.g. a chat's previous answer.
  bool cache_generated_blocks = false;
  std::vector<int32_t> eos_token_ids;
};

// Throws Error naming the field that is out of range.
void validate(const SchedulerConfig& config);

struct ScheduledSeq {
  const Sequence* seq;  // valid until the next schedule() or take_finished()
  int start;            // compute positions [start, start + num_tokens) of seq->all_tokens()
  int num_tokens;
  bool needs_logits;    // decode, or the last chunk of a prefill: sample a token (never for a prefill-only sequence)
  int num_draft = 0;    // a decode with draft tokens: the logits of all num_draft + 1 rows
};

// What an entry with logits produced: how many of its draft tokens were
// accepted, in order, and the token sampled after them.
struct EntryResult {
  int32_t token;
  int accepted_drafts = 0;
};

struct StepPlan {
  std::vector<ScheduledSeq> seqs;   // decodes first, then prefill chunks
  std::vector<BlockCopy> copies;    // copy-on-write: apply before the forward pass
  std::vector<SeqId> preempted;     // freed this step; they wait to be recomputed
  int num_tokens = 0;               // sum of num_tokens, <= max_batch_tokens
  bool empty() const { return seqs.empty(); }
};

struct SchedulerMetrics {
  int running = 0;
  int waiting = 0;
  uint64_t preemptions = 0;
  int blocks_total = 0;
  int blocks_used = 0;
  int blocks_free = 0;
  uint64_t prefix_queried_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
  int last_step_tokens = 0;
  uint64_t steps = 0;
  uint64_t scheduled_tokens = 0;  // over all steps
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config);

  // Queues seq. A request that can never run (empty prompt, beyond the max
  // context or the whole pool, ...) finishes at once with FinishReason::Error
  // and a message, and false is returned; take_finished() hands it back.
  // One that would fit alone waits for room. Throws Error on a duplicate id.
  bool add(Sequence seq);

  // Finishes a waiting or running sequence with FinishReason::Cancelled; its
  // blocks are freed at the next schedule(). False if it is not live.
  bool cancel(SeqId id);

  // n > 1 sampling: child_id continues parent's history with its own last
  // token (sampled from the same logits), sharing parent's KV blocks.
  void fork(SeqId parent, SeqId child_id, int32_t last_token);

  // Plans the next step; an empty plan means there is nothing to run now.
  // A non-empty plan must be followed by postprocess() or fail_step().
  const StepPlan& schedule();

  // results: one per plan entry with needs_logits, in plan order. Drops
  // rejected draft tokens and their KV, appends the new tokens, advances
  // computed tokens, finishes sequences on EOS, stop tokens, max_new_tokens
  // or the max context (a prefill-only one once its prompt is computed),
  // and frees their blocks.
  void postprocess(std::span<const EntryResult> results);

  // Speculative decoding: appends a proposer's guesses to a running
  // sequence about to decode (past its prompt); its next decode verifies
  // them all in one entry. Drafts beyond the sequence's token limit are dropped, and so are
  // all of them if the step has no room; returns how many were kept.
  int set_draft(SeqId id, std::span<const int32_t> draft);

  // The running sequences set_draft() may extend now.
  void draftable(std::vector<const Sequence*>& out) const;

  // Rolls back a sequence's last n generated tokens and the KV behind them,
  // freeing blocks it no longer needs; its new last token is computed next.
  void truncate(SeqId id, int n);

  // The step could not run: its sequences finish with FinishReason::Error.
  void fail_step(const std::string& message);

  std::vector<std::unique_ptr<Sequence>> take_finished();
  const Sequence* find(SeqId id) const;  // a waiting or running sequence, or nullptr
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  SchedulerMetrics metrics() const;
  const BlockManager& block_manager() const { return blocks_; }

  // Throws Error naming the first broken invariant: block reference counts
  // equal the block tables' references, queues agree with statuses. For tests.
  void check_invariants() const;

 private:
  std::string admission_error(const Sequence& seq) const;
  int token_limit(const Sequence& seq) const;
  FinishReason stop_reason(const Sequence& seq) const;
  void reap_cancelled();
  void schedule_decodes(int& budget);
  void drop_draft(Sequence& seq);
  int cacheable_tokens(const Sequence& seq) const;
  bool make_room_for_decode(Sequence& seq);
  void schedule_prefills(int& budget);
  void admit(int& budget);
  void schedule_chunk(Sequence& seq, int& budget);
  void preempt_last();
  void finish(Sequence& seq, FinishReason reason, std::string error = {});
  Sequence& live(SeqId id);

  SchedulerConfig config_;
  BlockManager blocks_;
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> live_;  // waiting and running
  std::deque<Sequence*> waiting_;                             // FCFS; preempted go first
  std::vector<Sequence*> running_;                             // hold blocks; in admission order
  std::vector<SeqId> cancelled_;
  std::vector<std::unique_ptr<Sequence>> finished_;
  StepPlan plan_;
  bool step_pending_ = false;
  std::vector<int32_t> accepted_;  // postprocess() scratch
  uint64_t arrivals_ = 0, preemptions_ = 0, steps_ = 0, scheduled_tokens_ = 0;
};

}  // namespace llmserve::engine
