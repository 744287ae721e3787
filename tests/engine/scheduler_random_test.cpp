// Property test: random arrivals, prompt lengths with shared prefixes,
// cancels, forks, draft tokens (right, wrong or partly right) and rollbacks
// over tiny pools and budgets. Whatever preemption,
// chunking and prefix hits happen, every generated token must equal what the
// model produces for that sequence alone, every request must end for a
// valid reason, and no block may leak.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "driver.h"

namespace llmserve::engine {
namespace {

using testing::Driver;
using testing::StepRecord;

constexpr int kVocab = 32;

class Workload {
 public:
  explicit Workload(uint32_t seed) : rng_(seed) {}

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  SchedulerConfig config() {
    SchedulerConfig c;
    c.block_size = std::vector<int>{1, 2, 4, 8}[static_cast<size_t>(uniform(0, 3))];
    // From a pool smaller than the longest requests (rejected) to a roomy one.
    c.num_blocks = std::max(2, uniform(8, 120) / c.block_size);
    c.max_seqs = uniform(1, 6);
    c.max_batch_tokens = uniform(c.max_seqs, 48);
    c.chunked_prefill = uniform(0, 3) != 0;
    c.max_context = uniform(0, 1) ? uniform(16, 64) : 0;
    c.cache_generated_blocks = uniform(0, 1);
    if (uniform(0, 1)) c.eos_token_ids = {0};
    return c;
  }

  std::vector<int32_t> tokens(int n) {
    std::vector<int32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(uniform(0, kVocab - 1));
    return v;
  }

  // Prompts often share a prefix, so prefix caching and preemption meet.
  std::vector<int32_t> prompt() {
    while (prefixes_.size() < 3) prefixes_.push_back(tokens(30));
    std::vector<int32_t> p = prefixes_[static_cast<size_t>(uniform(0, 2))];
    p.resize(static_cast<size_t>(uniform(0, 30)));
    for (int32_t t : tokens(uniform(p.empty() ? 1 : 0, 10))) p.push_back(t);
    return p;
  }

 private:
  std::mt19937 rng_;
  std::vector<std::vector<int32_t>> prefixes_;
};

// What the scheduler must reject: the request can never run, even alone.
bool never_fits(const SchedulerConfig& c, int prompt, int max_new) {
  if (max_new == 0 && c.max_context == 0) return true;
  if (c.max_context > 0 && (prompt >= c.max_context || (max_new > 0 && prompt + max_new > c.max_context))) return true;
  int limit = max_new > 0 ? prompt + max_new : c.max_context;
  if (c.max_context > 0) limit = std::min(limit, c.max_context);
  const int kv_tokens = limit - 1;
  if ((kv_tokens + c.block_size - 1) / c.block_size > c.num_blocks) return true;
  return !c.chunked_prefill && kv_tokens > c.max_batch_tokens;
}

struct Expectation {
  int max_new;
  std::vector<int32_t> stop;
  std::set<size_t> injected;  // positions set by fork(), not by the model
  bool rejected = false;
  bool cancelled = false;
};

void check_sequence(const Driver& d, const Sequence& s, const Expectation& e) {
  SCOPED_TRACE("sequence " + std::to_string(s.id()));
  if (e.rejected) {
    EXPECT_EQ(s.finish_reason, FinishReason::Error);
    return;
  }
  const auto all = s.all_tokens();
  for (size_t j = static_cast<size_t>(s.num_prompt_tokens()); j < all.size(); ++j) {
    if (!e.injected.contains(j)) {
      EXPECT_EQ(all[j], d.model.reference(all.first(j))) << "token " << j;
    }
  }
  auto stops = [&](int32_t t) {
    return std::ranges::find(d.config.eos_token_ids, t) != d.config.eos_token_ids.end() ||
           std::ranges::find(e.stop, t) != e.stop.end();
  };
  const auto gen = s.generated();
  for (size_t j = 0; j + 1 < gen.size(); ++j) EXPECT_FALSE(stops(gen[j])) << "ran past a stop token";
  int limit = e.max_new > 0 ? s.num_prompt_tokens() + e.max_new : d.config.max_context;
  if (d.config.max_context > 0) limit = std::min(limit, d.config.max_context);
  EXPECT_LE(s.num_tokens(), limit);
  switch (s.finish_reason) {
    case FinishReason::Stop: EXPECT_TRUE(stops(gen.back())); break;
    case FinishReason::Length: EXPECT_EQ(s.num_tokens(), limit); break;
    case FinishReason::Cancelled: EXPECT_TRUE(e.cancelled); break;
    default: ADD_FAILURE() << "finished as " << to_string(s.finish_reason) << ": " << s.error;
  }
}

// What the workloads exercised, so the test knows it covered them.
struct Coverage {
  int draft_entries = 0, truncations = 0;
};

void run_workload(uint32_t seed, Coverage& coverage) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  Workload w(seed);
  const SchedulerConfig config = w.config();
  Driver d(config, kVocab);
  std::map<SeqId, Expectation> expected;
  SeqId next_id = 1;
  int to_add = w.uniform(5, 30);
  auto random_id = [&] { return static_cast<SeqId>(w.uniform(1, static_cast<int>(next_id))); };

  for (int step = 0; to_add > 0 || d.scheduler.has_work(); ++step) {
    ASSERT_LT(step, 20000) << "no progress";
    while (to_add > 0 && (w.uniform(0, 2) == 0 || !d.scheduler.has_work())) {
      const SeqId id = next_id++;
      --to_add;
      Expectation e{w.uniform(0, 12), w.uniform(0, 3) == 0 ? w.tokens(1) : std::vector<int32_t>{}, {}};
      Sequence seq(id, w.prompt(), e.max_new, e.stop);
      e.rejected = never_fits(config, seq.num_prompt_tokens(), e.max_new);
      EXPECT_EQ(d.scheduler.add(std::move(seq)), !e.rejected);
      expected.emplace(id, std::move(e));
    }
    if (w.uniform(0, 15) == 0) {
      const SeqId id = random_id();
      if (d.scheduler.cancel(id)) expected.at(id).cancelled = true;
    }
    if (w.uniform(0, 7) == 0) {
      const SeqId parent = random_id();
      const Sequence* p = d.scheduler.find(parent);
      if (p && p->status == SequenceStatus::Running && p->num_generated_tokens() > 0 &&
          p->num_uncomputed_tokens() == 1 && d.scheduler.metrics().running < config.max_seqs && !p->cancel_requested) {
        Expectation e = expected.at(parent);
        e.injected.insert(static_cast<size_t>(p->num_tokens() - 1));
        e.cancelled = false;
        const SeqId child = next_id++;
        d.scheduler.fork(parent, child, w.uniform(0, kVocab - 1));
        expected.emplace(child, std::move(e));
      }
    }
    if (w.uniform(0, 2) == 0) {
      // A draft for a sequence about to decode: the model's own next tokens
      // for a while, then guesses.
      const Sequence* s = d.scheduler.find(random_id());
      if (s && s->status == SequenceStatus::Running && s->num_uncomputed_tokens() == 1 &&
          s->num_generated_tokens() > 0 && !s->cancel_requested) {
        std::vector<int32_t> history(s->all_tokens().begin(), s->all_tokens().end());
        std::vector<int32_t> draft;
        const int right = w.uniform(0, 4);
        for (int i = 0, k = w.uniform(1, 5); i < k; ++i) {
          const int32_t t = i < right ? d.model.reference(history) : w.uniform(0, kVocab - 1);
          draft.push_back(t);
          history.push_back(t);
        }
        const int kept = d.scheduler.set_draft(s->id(), draft);
        EXPECT_LE(kept, static_cast<int>(draft.size()));
        EXPECT_EQ(s->num_draft_tokens, kept);
      }
    }
    if (w.uniform(0, 9) == 0) {
      const Sequence* s = d.scheduler.find(random_id());
      if (s && s->num_generated_tokens() > 0 &&
          (s->status == SequenceStatus::Waiting || s->num_uncomputed_tokens() == 1 + s->num_draft_tokens)) {
        const int n = w.uniform(0, s->num_generated_tokens() - s->num_draft_tokens);
        d.scheduler.truncate(s->id(), n);
        ++coverage.truncations;
        d.scheduler.check_invariants();
      }
    }
    d.collect();
    if (!d.scheduler.has_work()) continue;
    const StepRecord record = d.step();
    for (const auto& e : record.entries) coverage.draft_entries += e.num_draft > 0;
    if (record.empty()) {
      ASSERT_FALSE(d.scheduler.has_work()) << "work is left but nothing was scheduled";
    }
  }
  d.collect();

  ASSERT_EQ(d.finished.size(), expected.size());
  for (const auto& [id, e] : expected) check_sequence(d, d.done(id), e);
  const BlockManager& bm = d.scheduler.block_manager();
  bm.check_consistency();
  EXPECT_EQ(bm.num_free_blocks(), bm.num_blocks());
  for (int b = 0; b < bm.num_blocks(); ++b) EXPECT_EQ(bm.ref_count(b), 0);
  const SchedulerMetrics m = d.scheduler.metrics();
  EXPECT_EQ(m.running + m.waiting + m.blocks_used, 0);
  EXPECT_LE(m.prefix_hit_tokens, m.prefix_queried_tokens);
}

TEST(SchedulerProperty, RandomWorkloadsMatchSoloRunsAndLeakNothing) {
  Coverage coverage;
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    run_workload(seed, coverage);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(coverage.draft_entries, 200);
  EXPECT_GT(coverage.truncations, 100);
}

}  // namespace
}  // namespace llmserve::engine
