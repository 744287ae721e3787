#pragma once
// Runs a Scheduler against the FakeModel the way the engine loop will, and
// checks every plan and the scheduler's invariants around each step.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "engine/scheduler.h"
#include "fake_model.h"

namespace llmserve::engine::testing {

// A plan outlives its sequences only as these copies.
struct StepRecord {
  struct Entry {
    SeqId id;
    int start;
    int num_tokens;
    bool needs_logits;
    int num_draft;
  };
  std::vector<Entry> entries;
  std::vector<BlockCopy> copies;
  std::vector<SeqId> preempted;
  int num_tokens = 0;
  bool empty() const { return entries.empty(); }
};

class Driver {
 public:
  explicit Driver(const SchedulerConfig& c, int vocab = 64)
      : config(c), scheduler(c), model(c.num_blocks, c.block_size, vocab) {}

  // schedule() alone; run_model() completes the step.
  StepRecord schedule() {
    const StepPlan& plan = scheduler.schedule();
    scheduler.check_invariants();
    StepRecord record{{}, plan.copies, plan.preempted, plan.num_tokens};
    std::set<SeqId> seen;
    int total = 0;
    for (const ScheduledSeq& e : plan.seqs) {
      const Sequence& s = *e.seq;
      EXPECT_TRUE(seen.insert(s.id()).second) << "sequence " << s.id() << " twice in one step";
      EXPECT_EQ(e.start, s.num_computed_tokens);
      EXPECT_GT(e.num_tokens, 0);
      EXPECT_LE(e.start + e.num_tokens, s.num_tokens());
      EXPECT_EQ(e.needs_logits, e.start + e.num_tokens == s.num_tokens() && !s.prefill_only);
      total += e.num_tokens;
      EXPECT_EQ(e.num_draft, e.needs_logits ? s.num_draft_tokens : 0);
      record.entries.push_back({s.id(), e.start, e.num_tokens, e.needs_logits, e.num_draft});
    }
    EXPECT_EQ(total, plan.num_tokens);
    EXPECT_LE(plan.num_tokens, config.max_batch_tokens);
    EXPECT_LE(static_cast<int>(plan.seqs.size()), config.max_seqs);
    plan_ = &plan;
    return record;
  }

  void run_model() {
    if (!plan_->empty()) scheduler.postprocess(model.run(*plan_));
    scheduler.check_invariants();
    collect();
  }

  StepRecord step() {
    StepRecord record = schedule();
    run_model();
    return record;
  }

  // Until nothing is left; returns the number of steps.
  int run(int max_steps = 100000) {
    int steps = 0;
    while (scheduler.has_work()) {
      EXPECT_LT(steps, max_steps) << "no progress";
      if (steps++ >= max_steps) break;
      // Empty only when the last work was cancelled: anything else is a deadlock.
      if (step().empty() && scheduler.has_work()) {
        ADD_FAILURE() << "work is left but nothing was scheduled";
        break;
      }
    }
    return steps;
  }

  void collect() {
    for (auto& s : scheduler.take_finished()) {
      const SeqId id = s->id();
      EXPECT_TRUE(finished.emplace(id, std::move(s)).second) << "sequence " << id << " finished twice";
    }
  }

  const Sequence& done(SeqId id) const {
    const auto it = finished.find(id);
    if (it == finished.end()) throw std::runtime_error("sequence " + std::to_string(id) + " has not finished");
    return *it->second;
  }

  // The tokens the fake model generates for `prompt` run alone.
  std::vector<int32_t> solo(std::vector<int32_t> tokens, int max_new, std::span<const int32_t> stop = {}) const {
    const size_t prompt = tokens.size();
    while (true) {
      const int32_t t = model.reference(tokens);
      tokens.push_back(t);
      const bool is_stop = std::ranges::find(config.eos_token_ids, t) != config.eos_token_ids.end() ||
                           std::ranges::find(stop, t) != stop.end();
      const int n = static_cast<int>(tokens.size());
      if (is_stop || n - static_cast<int>(prompt) == max_new || n == config.max_context) break;
    }
    return {tokens.begin() + static_cast<long>(prompt), tokens.end()};
  }

  std::vector<int32_t> generated(SeqId id) const {
    const auto g = done(id).generated();
    return {g.begin(), g.end()};
  }

  SchedulerConfig config;
  Scheduler scheduler;
  FakeModel model;
  std::map<SeqId, std::unique_ptr<Sequence>> finished;

 private:
  const StepPlan* plan_ = nullptr;
};

inline std::vector<int32_t> tokens(int32_t from, int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back((from + i) % 64);
  return v;
}

}  // namespace llmserve::engine::testing
