#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/error.h"
#include "driver.h"

namespace llmserve::engine {
namespace {

using testing::Driver;
using testing::StepRecord;
using testing::tokens;

SchedulerConfig config(int num_blocks, int block_size, int max_batch_tokens, int max_seqs = 8) {
  SchedulerConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.max_batch_tokens = max_batch_tokens;
  c.max_seqs = max_seqs;
  return c;
}

using Entry = StepRecord::Entry;
void expect_entry(const Entry& e, SeqId id, int start, int n, bool logits) {
  EXPECT_EQ(e.id, id);
  EXPECT_EQ(e.start, start);
  EXPECT_EQ(e.num_tokens, n);
  EXPECT_EQ(e.needs_logits, logits);
}

TEST(Scheduler, DecodesComeBeforePrefills) {
  Driver d(config(64, 4, 16));
  d.scheduler.add(Sequence(1, tokens(0, 4), 10));
  StepRecord s = d.step();
  ASSERT_EQ(s.entries.size(), 1u);
  expect_entry(s.entries[0], 1, 0, 4, true);

  d.scheduler.add(Sequence(2, tokens(10, 20), 4));
  s = d.step();
  ASSERT_EQ(s.entries.size(), 2u);
  expect_entry(s.entries[0], 1, 4, 1, true);
  expect_entry(s.entries[1], 2, 0, 15, false);  // the rest of the budget
  EXPECT_EQ(s.num_tokens, 16);

  s = d.step();
  ASSERT_EQ(s.entries.size(), 2u);
  expect_entry(s.entries[0], 1, 5, 1, true);
  expect_entry(s.entries[1], 2, 15, 5, true);
  d.run();
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 4), 10));
  EXPECT_EQ(d.generated(2), d.solo(tokens(10, 20), 4));
}

TEST(Scheduler, ChunkedPrefillSplitsALongPrompt) {
  Driver d(config(64, 4, 8));
  d.scheduler.add(Sequence(1, tokens(0, 20), 2));
  expect_entry(d.step().entries.at(0), 1, 0, 8, false);
  expect_entry(d.step().entries.at(0), 1, 8, 8, false);
  expect_entry(d.step().entries.at(0), 1, 16, 4, true);
  expect_entry(d.step().entries.at(0), 1, 20, 1, true);
  EXPECT_FALSE(d.scheduler.has_work());
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 20), 2));
  EXPECT_EQ(d.done(1).finish_reason, FinishReason::Length);
}

TEST(Scheduler, ChunkingOffRunsEachPromptInOneStep) {
  SchedulerConfig c = config(64, 4, 16);
  c.chunked_prefill = false;
  Driver d(c);
  d.scheduler.add(Sequence(1, tokens(0, 10), 3));
  d.scheduler.add(Sequence(2, tokens(20, 10), 3));
  StepRecord s = d.step();
  ASSERT_EQ(s.entries.size(), 1u);  // the second prompt does not fit the 6 tokens left
  expect_entry(s.entries[0], 1, 0, 10, true);
  s = d.step();
  ASSERT_EQ(s.entries.size(), 2u);
  expect_entry(s.entries[0], 1, 10, 1, true);
  expect_entry(s.entries[1], 2, 0, 10, true);
  d.run();
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 10), 3));
  EXPECT_EQ(d.generated(2), d.solo(tokens(20, 10), 3));
}

TEST(Scheduler, AdmitsFirstComeFirstServed) {
  Driver d(config(6, 4, 64));
  d.scheduler.add(Sequence(1, tokens(0, 12), 4));   // 3 blocks now, 4 at most
  d.scheduler.add(Sequence(2, tokens(20, 16), 4));  // 4 blocks: waits for the first
  d.scheduler.add(Sequence(3, tokens(40, 2), 2));   // would fit now, but must not overtake
  for (SeqId id : {1, 2, 3}) EXPECT_EQ(d.scheduler.find(id)->arrival, id - 1);
  std::vector<SeqId> order;
  while (d.scheduler.has_work())
    for (const Entry& e : d.step().entries)
      if (e.start == 0) order.push_back(e.id);
  EXPECT_EQ(order, (std::vector<SeqId>{1, 2, 3}));
  for (SeqId id : {1, 2, 3}) EXPECT_EQ(d.done(id).finish_reason, FinishReason::Length);
}

TEST(Scheduler, PreemptsTheNewestSequenceAndRecomputesIt) {
  Driver d(config(4, 4, 64));  // 16 token slots; each sequence needs up to 12
  d.scheduler.add(Sequence(1, tokens(0, 5), 8));
  d.scheduler.add(Sequence(2, tokens(30, 5), 8));
  bool preempted = false;
  while (d.scheduler.has_work()) {
    const StepRecord s = d.step();
    if (!s.preempted.empty()) {
      EXPECT_EQ(s.preempted, std::vector<SeqId>{2});
      preempted = true;
    }
  }
  EXPECT_TRUE(preempted);
  EXPECT_GE(d.scheduler.metrics().preemptions, 1u);
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 5), 8));
  EXPECT_EQ(d.generated(2), d.solo(tokens(30, 5), 8));
  EXPECT_EQ(d.done(2).finish_reason, FinishReason::Length);
}

TEST(Scheduler, RejectsARequestThatCanNeverFitAndKeepsServingOthers) {
  Driver d(config(4, 4, 64));
  ASSERT_TRUE(d.scheduler.add(Sequence(1, tokens(0, 5), 4)));
  d.step();
  EXPECT_FALSE(d.scheduler.add(Sequence(2, tokens(10, 30), 4)));
  d.collect();
  EXPECT_EQ(d.done(2).finish_reason, FinishReason::Error);
  EXPECT_NE(d.done(2).error.find("the pool has only 4"), std::string::npos) << d.done(2).error;
  // 13 + 4 tokens need KV for 16: the whole pool, so it waits instead.
  EXPECT_TRUE(d.scheduler.add(Sequence(3, tokens(20, 13), 4)));
  d.run();
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 5), 4));
  EXPECT_EQ(d.generated(3), d.solo(tokens(20, 13), 4));
}

TEST(Scheduler, RejectsRequestsThatBreakTheLimits) {
  SchedulerConfig c = config(64, 4, 8);
  c.max_context = 16;
  c.chunked_prefill = false;
  Scheduler s(c);
  auto rejected = [&](Sequence seq) {
    EXPECT_FALSE(s.add(std::move(seq)));
    auto done = s.take_finished();
    EXPECT_EQ(done.size(), 1u);
    EXPECT_EQ(done.at(0)->finish_reason, FinishReason::Error);
    return done.at(0)->error;
  };
  EXPECT_NE(rejected(Sequence(1, {}, 4)).find("empty"), std::string::npos);
  EXPECT_NE(rejected(Sequence(2, tokens(0, 10), 10)).find("max context of 16"), std::string::npos);
  EXPECT_NE(rejected(Sequence(3, tokens(0, 16), 0)).find("no room"), std::string::npos);
  EXPECT_NE(rejected(Sequence(4, tokens(0, 3), -1)).find("max_new_tokens"), std::string::npos);
  EXPECT_NE(rejected(Sequence(5, tokens(0, 6), 4)).find("step budget of 8"), std::string::npos);
  EXPECT_TRUE(s.add(Sequence(6, tokens(0, 5), 4)));
  EXPECT_EQ(s.metrics().waiting, 1);

  EXPECT_NE(rejected(Sequence(7, tokens(0, 5), std::numeric_limits<int>::max())).find("max context"), std::string::npos);

  Scheduler unbounded(config(64, 4, 8));
  EXPECT_FALSE(unbounded.add(Sequence(8, tokens(0, 5), 0)));
  EXPECT_NE(unbounded.take_finished().at(0)->error.find("max_new_tokens is required"), std::string::npos);
  EXPECT_FALSE(unbounded.add(Sequence(9, tokens(0, 5), std::numeric_limits<int>::max())));
  EXPECT_NE(unbounded.take_finished().at(0)->error.find("the pool has only 64"), std::string::npos);
}

TEST(Scheduler, ARequestThatFitsAloneWaitsForRoom) {
  Driver d(config(4, 4, 64));
  EXPECT_TRUE(d.scheduler.add(Sequence(1, tokens(0, 9), 4)));
  EXPECT_TRUE(d.scheduler.add(Sequence(2, tokens(20, 9), 4)));
  const StepRecord first = d.step();
  ASSERT_EQ(first.entries.size(), 1u);
  EXPECT_EQ(d.scheduler.metrics().waiting, 1);
  d.run();
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 9), 4));
  EXPECT_EQ(d.generated(2), d.solo(tokens(20, 9), 4));
}

TEST(Scheduler, CancelFinishesAndFreesAtTheNextStep) {
  Driver d(config(16, 4, 64));
  d.scheduler.add(Sequence(1, tokens(0, 10), 20));
  d.scheduler.add(Sequence(2, tokens(20, 10), 20));
  d.step();
  d.step();
  EXPECT_TRUE(d.scheduler.cancel(1));
  EXPECT_FALSE(d.scheduler.cancel(1));
  EXPECT_FALSE(d.scheduler.cancel(99));
  const StepRecord s = d.step();
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].id, 2u);
  EXPECT_EQ(d.done(1).finish_reason, FinishReason::Cancelled);
  EXPECT_EQ(d.scheduler.metrics().blocks_used, 3);  // 2's 12 tokens

  // Cancelled while its step runs: the sampled token is dropped.
  d.schedule();
  const int before = d.scheduler.find(2)->num_tokens();
  EXPECT_TRUE(d.scheduler.cancel(2));
  d.run_model();
  EXPECT_EQ(d.scheduler.find(2)->num_tokens(), before);
  EXPECT_TRUE(d.step().empty());
  EXPECT_EQ(d.done(2).finish_reason, FinishReason::Cancelled);

  // Waiting: never scheduled.
  d.scheduler.add(Sequence(3, tokens(0, 4), 4));
  EXPECT_TRUE(d.scheduler.cancel(3));
  EXPECT_TRUE(d.step().empty());
  EXPECT_EQ(d.done(3).finish_reason, FinishReason::Cancelled);
  EXPECT_TRUE(d.done(3).generated().empty());
  EXPECT_FALSE(d.scheduler.has_work());
  EXPECT_EQ(d.scheduler.metrics().blocks_used, 0);
}

// The third token the model generates after `prompt`.
int32_t third_token(const Driver& d, std::vector<int32_t> prompt) {
  for (int i = 0; i < 2; ++i) prompt.push_back(d.model.reference(prompt));
  return d.model.reference(prompt);
}

TEST(Scheduler, StopsOnEosAndStopTokens) {
  Driver plain(config(64, 4, 64));
  const int32_t stop = third_token(plain, tokens(0, 5));

  SchedulerConfig c = config(64, 4, 64);
  c.eos_token_ids = {stop};
  Driver eos(c);
  eos.scheduler.add(Sequence(1, tokens(0, 5), 10));
  eos.run();
  EXPECT_EQ(eos.done(1).finish_reason, FinishReason::Stop);
  EXPECT_EQ(eos.done(1).generated().back(), stop);
  EXPECT_EQ(eos.generated(1), eos.solo(tokens(0, 5), 10));

  plain.scheduler.add(Sequence(2, tokens(0, 5), 10, {stop}));
  plain.run();
  EXPECT_EQ(plain.done(2).finish_reason, FinishReason::Stop);
  const std::vector<int32_t> stops{stop};
  EXPECT_EQ(plain.generated(2), plain.solo(tokens(0, 5), 10, stops));
}

TEST(Scheduler, StopsAtMaxNewTokensOrTheMaxContext) {
  SchedulerConfig c = config(64, 4, 64);
  c.max_context = 12;
  Driver d(c);
  d.scheduler.add(Sequence(1, tokens(0, 5), 3));
  d.scheduler.add(Sequence(2, tokens(10, 5), 0));  // as many as the context allows
  d.run();
  EXPECT_EQ(d.generated(1).size(), 3u);
  EXPECT_EQ(d.generated(2).size(), 7u);
  EXPECT_EQ(d.generated(2), d.solo(tokens(10, 5), 0));
  for (SeqId id : {1, 2}) EXPECT_EQ(d.done(id).finish_reason, FinishReason::Length);
}

TEST(Scheduler, ReusesCachedPrefixes) {
  Driver d(config(64, 4, 64));
  d.scheduler.add(Sequence(1, tokens(0, 20), 3));
  d.run();
  std::vector<int32_t> longer = tokens(0, 20);
  for (int32_t t : tokens(40, 3)) longer.push_back(t);
  d.scheduler.add(Sequence(2, longer, 3));
  expect_entry(d.step().entries.at(0), 2, 20, 3, true);
  d.scheduler.add(Sequence(3, tokens(0, 20), 3));  // all cached but the last block
  expect_entry(d.step().entries.at(1), 3, 16, 4, true);
  d.run();
  EXPECT_EQ(d.scheduler.metrics().prefix_hit_tokens, 36u);
  EXPECT_EQ(d.generated(2), d.solo(longer, 3));
  EXPECT_EQ(d.generated(3), d.generated(1));
}

Sequence prefill_only(SeqId id, std::vector<int32_t> prompt) {
  Sequence s(id, std::move(prompt), 0);
  s.prefill_only = true;
  return s;
}

// An embedding: chunks without logits down to the last token, then it
// finishes, holding no block and sampling nothing.
TEST(Scheduler, PrefillOnlyComputesItsPromptThenFinishes) {
  Driver d(config(64, 4, 8));
  d.scheduler.add(prefill_only(1, tokens(0, 17)));
  expect_entry(d.step().entries.at(0), 1, 0, 8, false);
  expect_entry(d.step().entries.at(0), 1, 8, 8, false);
  expect_entry(d.step().entries.at(0), 1, 16, 1, false);  // one token left: still a chunk, not a decode
  EXPECT_FALSE(d.scheduler.has_work());
  EXPECT_EQ(d.done(1).finish_reason, FinishReason::Stop);
  EXPECT_EQ(d.done(1).num_generated_tokens(), 0);
  EXPECT_EQ(d.scheduler.metrics().blocks_free, 64);
}

// It computes every token although the cache holds its prefix, and leaves
// nothing in the cache for others.
TEST(Scheduler, PrefillOnlyNeitherReusesNorOffersCachedBlocks) {
  Driver d(config(64, 4, 64));
  d.scheduler.add(Sequence(1, tokens(0, 20), 3));
  d.run();
  d.scheduler.add(prefill_only(2, tokens(0, 20)));
  expect_entry(d.step().entries.at(0), 2, 0, 20, false);
  d.scheduler.add(prefill_only(3, tokens(100, 20)));
  d.run();
  d.scheduler.add(Sequence(4, tokens(100, 20), 3));
  expect_entry(d.step().entries.at(0), 4, 0, 20, true);
  d.run();
  const SchedulerMetrics m = d.scheduler.metrics();
  EXPECT_EQ(m.prefix_hit_tokens, 0u);
  EXPECT_EQ(m.prefix_queried_tokens, 40u);  // the two completions only
  EXPECT_EQ(m.blocks_free, m.blocks_total);
}

// A prompt that fills the whole context is fine: nothing is generated after it.
TEST(Scheduler, PrefillOnlyMayFillTheContext) {
  SchedulerConfig c = config(8, 4, 16);
  c.max_context = 32;
  Driver d(c);
  EXPECT_TRUE(d.scheduler.add(prefill_only(1, tokens(0, 32))));
  EXPECT_FALSE(d.scheduler.add(prefill_only(2, tokens(0, 33))));
  d.run();
  EXPECT_EQ(d.done(1).finish_reason, FinishReason::Stop);
  EXPECT_EQ(d.done(2).finish_reason, FinishReason::Error);
  EXPECT_NE(d.done(2).error.find("over the max context of 32"), std::string::npos) << d.done(2).error;
}

TEST(Scheduler, ForkSharesTheHistoryAndCopiesOnWrite) {
  Driver d(config(64, 4, 64));
  d.scheduler.add(Sequence(1, tokens(0, 6), 5));
  EXPECT_THROW(d.scheduler.fork(1, 2, 7), Error);  // still waiting
  d.step();
  const int32_t first = d.scheduler.find(1)->generated()[0];
  const int32_t other = (first + 1) % 64;
  d.scheduler.fork(1, 2, other);
  EXPECT_THROW(d.scheduler.fork(1, 2, other), Error);  // id in use
  const StepRecord s = d.step();
  EXPECT_EQ(s.copies.size(), 1u);  // position 6 is in the shared partial block
  EXPECT_EQ(s.entries.size(), 2u);
  d.schedule();
  EXPECT_THROW(d.scheduler.fork(1, 3, other), Error);  // mid-step
  d.run_model();
  d.run();
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 6), 5));
  std::vector<int32_t> branch = tokens(0, 6);
  branch.push_back(other);
  std::vector<int32_t> expected{other};
  for (int32_t t : d.solo(branch, 4)) expected.push_back(t);
  EXPECT_EQ(d.generated(2), expected);
}

TEST(Scheduler, FailStepFinishesItsSequencesWithTheError) {
  Driver d(config(64, 4, 8));
  d.scheduler.add(Sequence(1, tokens(0, 6), 4));
  d.scheduler.add(Sequence(2, tokens(10, 6), 4));  // gets 2 of the budget
  d.scheduler.add(Sequence(3, tokens(20, 6), 4));  // waits
  d.schedule();
  d.scheduler.fail_step("forward pass failed: out of memory");
  d.collect();
  for (SeqId id : {1, 2}) {
    EXPECT_EQ(d.done(id).finish_reason, FinishReason::Error);
    EXPECT_EQ(d.done(id).error, "forward pass failed: out of memory");
  }
  d.run();
  EXPECT_EQ(d.generated(3), d.solo(tokens(20, 6), 4));
  EXPECT_EQ(d.scheduler.metrics().blocks_used, 0);
}

// A draft verified in one entry: the accepted prefix stays, the rest and
// its KV are rolled back; bad calls are refused without changing anything.
TEST(Scheduler, DraftsAreVerifiedInOneEntryAndRolledBack) {
  Driver d(config(64, 4, 64));
  d.scheduler.add(Sequence(1, tokens(0, 6), 12));
  d.schedule();
  EXPECT_THROW(d.scheduler.set_draft(1, std::vector<int32_t>{1}), Error);  // mid-step
  d.run_model();
  std::vector<int32_t> history = tokens(0, 6);
  history.push_back(d.scheduler.find(1)->generated()[0]);
  std::vector<int32_t> draft;  // two right guesses, then a wrong one
  for (int i = 0; i < 2; ++i) {
    draft.push_back(d.model.reference(history));
    history.push_back(draft.back());
  }
  draft.push_back((d.model.reference(history) + 1) % 64);
  EXPECT_EQ(d.scheduler.set_draft(1, draft), 3);
  EXPECT_THROW(d.scheduler.set_draft(1, draft), Error);       // one draft at a time
  EXPECT_THROW(d.scheduler.truncate(1, 99), Error);           // more than it generated
  EXPECT_EQ(d.scheduler.find(1)->num_draft_tokens, 3);        // unchanged by the refusals
  const StepRecord s = d.step();
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].num_tokens, 4);
  EXPECT_EQ(s.entries[0].num_draft, 3);
  const Sequence& seq = *d.scheduler.find(1);
  EXPECT_EQ(seq.num_generated_tokens(), 1 + 2 + 1);  // the first token, two accepted, the model's own
  EXPECT_EQ(seq.num_computed_tokens, 6 + 3);
  EXPECT_EQ(seq.num_draft_tokens, 0);
  d.scheduler.truncate(1, 2);
  EXPECT_EQ(seq.num_generated_tokens(), 2);
  EXPECT_EQ(seq.num_computed_tokens, 7);
  d.run();
  EXPECT_EQ(d.generated(1), d.solo(tokens(0, 6), 12));
  EXPECT_EQ(d.scheduler.metrics().blocks_used, 0);
}

TEST(Scheduler, EnforcesTheStepProtocol) {
  Scheduler s(config(64, 4, 64));
  EXPECT_TRUE(s.schedule().empty());
  EXPECT_THROW(s.postprocess({}), Error);
  s.add(Sequence(1, tokens(0, 4), 4));
  EXPECT_THROW(s.add(Sequence(1, tokens(0, 4), 4)), Error);
  EXPECT_EQ(s.schedule().seqs.size(), 1u);
  EXPECT_THROW(s.schedule(), Error);
  const std::vector<EntryResult> two{{1}, {2}};
  EXPECT_THROW(s.postprocess(two), Error);
  s.postprocess(std::span(two).first(1));
  EXPECT_EQ(s.find(1)->generated().size(), 1u);
}

TEST(Scheduler, RejectsABadConfig) {
  EXPECT_THROW((Scheduler(config(0, 4, 64))), Error);
  EXPECT_THROW((Scheduler(config(64, 0, 64))), Error);
  EXPECT_THROW((Scheduler(config(64, 4, 4, 8))), Error);  // budget below max_seqs
  SchedulerConfig c = config(64, 4, 64);
  c.max_context = -1;
  EXPECT_THROW((Scheduler(c)), Error);
}

TEST(Scheduler, ReportsMetrics) {
  Driver d(config(64, 4, 8));
  d.scheduler.add(Sequence(1, tokens(0, 12), 3));
  d.scheduler.add(Sequence(2, tokens(0, 12), 3));
  d.step();
  SchedulerMetrics m = d.scheduler.metrics();
  EXPECT_EQ(m.running, 1);  // the first took the whole budget
  EXPECT_EQ(m.waiting, 1);
  EXPECT_EQ(m.last_step_tokens, 8);
  EXPECT_EQ(m.blocks_total, 64);
  EXPECT_EQ(m.blocks_used, 3);
  EXPECT_EQ(m.blocks_used + m.blocks_free, 64);
  const int steps = 1 + d.run();
  m = d.scheduler.metrics();
  EXPECT_EQ(m.steps, static_cast<uint64_t>(steps));
  EXPECT_EQ(m.scheduled_tokens, 12u + 4u + 2u * 2u);  // prompts (2's first 8 tokens cached), then decodes
  EXPECT_EQ(m.prefix_hit_tokens, 8u);
  EXPECT_EQ(m.prefix_queried_tokens, 24u);
  EXPECT_EQ(m.running + m.waiting + m.blocks_used, 0);
}

}  // namespace
}  // namespace llmserve::engine
