// ThreadPool: every thread runs each job exactly once, jobs see each
// other's writes in order, barriers separate phases, sleeping workers wake
// up, and a team job's steps run every item once, in step order.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace llmserve {
namespace {

TEST(ThreadPool, RunsEveryThreadOncePerJob) {
  for (int n : {1, 2, 3, 5}) {  // 5: more threads than this machine's cores
    ThreadPool pool(n);
    ASSERT_EQ(pool.size(), n);
    std::vector<int> hits(n, 0);
    for (int job = 0; job < 1000; ++job)
      pool.run([&](int i, int total) {
        ASSERT_EQ(total, n);
        ++hits[i];  // each index is written by one thread only
      });
    for (int h : hits) EXPECT_EQ(h, 1000);
  }
}

TEST(ThreadPool, JoinPublishesWrites) {
  ThreadPool pool(3);
  std::vector<long> data(3000);
  for (int round = 1; round <= 200; ++round) {
    pool.run([&](int i, int n) {
      const auto [b, e] = ThreadPool::split(static_cast<long>(data.size()), i, n);
      for (long j = b; j < e; ++j) data[j] += round;
    });
    long sum = 0;
    for (long v : data) sum += v;
    ASSERT_EQ(sum, static_cast<long>(data.size()) * round * (round + 1) / 2);
  }
}

TEST(ThreadPool, BarrierSeparatesPhases) {
  ThreadPool pool(4);
  std::vector<int> a(4), b(4);
  for (int round = 0; round < 300; ++round) {
    pool.run([&](int i, int n) {
      a[i] = round + i;
      pool.barrier();
      int s = 0;  // every thread reads what all the others wrote before the barrier
      for (int j = 0; j < n; ++j) s += a[j];
      b[i] = s;
      pool.barrier();
    });
    for (int v : b) ASSERT_EQ(v, 4 * round + 6);
  }
}

TEST(ThreadPool, WakesSleepingWorkers) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  for (int k = 0; k < 3; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // longer than the spin: workers sleep
    pool.run([&](int, int) { count.fetch_add(1); });
  }
  EXPECT_EQ(count.load(), 6);
}

TEST(ThreadPool, ParallelForRunsEveryItemOnce) {
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    for (int64_t items : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(items));
      pool.parallel_for(items, [&](int64_t i) { hits[i].fetch_add(1); });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      pool.parallel_for_shares(items, [&](int64_t i) { hits[i].fetch_add(1); });
      for (auto& h : hits) ASSERT_EQ(h.load(), 2);
    }
  }
}

// Each thread starts on its own contiguous share: once all three threads
// are in (each one's first item waits for the others, so none can claim the
// whole job alone), their first items are the three shares' starts, the
// caller's being item 0.
TEST(ThreadPool, ParallelForSharesStartsEachThreadOnItsShare) {
  ThreadPool pool(3);
  std::atomic<int> started{0};
  std::mutex mu;
  std::map<std::thread::id, std::vector<int64_t>> items_of;
  pool.parallel_for_shares(30, [&](int64_t i) {
    bool first;
    {
      std::lock_guard lock(mu);
      auto& mine = items_of[std::this_thread::get_id()];
      first = mine.empty();
      mine.push_back(i);
    }
    if (first) {
      started.fetch_add(1);
      while (started.load() < 3) std::this_thread::yield();
    }
  });
  ASSERT_EQ(items_of.size(), 3u);
  std::set<int64_t> firsts;
  for (const auto& [id, items] : items_of) firsts.insert(items.front());
  EXPECT_EQ(firsts, (std::set<int64_t>{0, 10, 20}));
  EXPECT_EQ(items_of[std::this_thread::get_id()].front(), 0);
}

// Alternating kinds of job, some with items that take long enough for a
// late worker to find the job closed or replaced: every item still runs
// exactly once, and every run() job on every thread.
TEST(ThreadPool, ParallelForAndRunInterleave) {
  ThreadPool pool(3);
  std::atomic<int64_t> items{0}, runs{0};
  for (int round = 0; round < 2000; ++round) {
    if (round % 3 == 2) {
      pool.run([&](int, int) { runs.fetch_add(1); });
    } else {
      const int64_t n = round % 7;
      auto item = [&](int64_t) {
        if (round % 100 == 0 || round % 100 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
        items.fetch_add(1);
      };
      if (round % 2 == 0) pool.parallel_for(n, item);
      else pool.parallel_for_shares(n, item);
    }
  }
  int64_t want_items = 0;
  for (int round = 0; round < 2000; ++round)
    if (round % 3 != 2) want_items += round % 7;
  EXPECT_EQ(items.load(), want_items);
  EXPECT_EQ(runs.load(), 3 * (2000 / 3));
}

TEST(Team, RunsEveryItemOfEveryStepOnce) {
  for (int n : {1, 2, 3, 5}) {
    ThreadPool pool(n);
    const std::vector<int64_t> sizes = {0, 1, 2, 7, 1000, 3};
    std::vector<std::vector<std::atomic<int>>> hits;
    for (int64_t s : sizes) hits.emplace_back(static_cast<size_t>(s));
    for (int round = 1; round <= 20; ++round) {
      pool.run_team([&](Team& team) {
        ASSERT_EQ(team.size(), n);
        for (size_t s = 0; s < sizes.size(); ++s) {
          auto item = [&](int64_t i) { hits[s][i].fetch_add(1); };
          if (s % 2 == 0) team.share(sizes[s], item);
          else team.queue(sizes[s], item);
        }
      });
      for (auto& step : hits)
        for (auto& h : step) ASSERT_EQ(h.load(), round) << n << " threads";
    }
  }
}

// share_ranges: every item once, in ranges that never cross a multiple of
// the grain, a thread's own claims in order from the front of its share and
// a helper's from the back; with one item held up, the other threads finish
// the step's other ranges.
TEST(Team, ShareRangesCoverEveryItemOnceWithinGrains) {
  for (int n : {1, 2, 3}) {
    ThreadPool pool(n);
    const std::vector<std::pair<int64_t, int64_t>> steps = {{0, 8}, {1, 8}, {13, 8}, {128, 8}, {1000, 3}, {7, 1}};
    std::vector<std::vector<std::atomic<int>>> hits;
    for (const auto& s : steps) hits.emplace_back(static_cast<size_t>(s.first));
    std::atomic<int> bad_ranges{0};
    for (int round = 1; round <= 20; ++round) {
      pool.run_team([&](Team& team) {
        for (size_t s = 0; s < steps.size(); ++s) {
          const auto [items, grain] = steps[s];
          team.share_ranges(items, grain, [&](int64_t b, int64_t e) {
            if (b >= e || e > items || (e - 1) / grain != b / grain) bad_ranges.fetch_add(1);
            if (round % 5 == 0 && b == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
            for (int64_t i = b; i < e; ++i) hits[s][i].fetch_add(1);
          });
        }
      });
      for (auto& step : hits)
        for (auto& h : step) ASSERT_EQ(h.load(), round) << n << " threads";
    }
    EXPECT_EQ(bad_ranges.load(), 0) << n << " threads";
  }
}

// Each step reads everything the step before wrote, whichever threads wrote
// it, and items of uneven length (some long enough for a worker to fall a
// step or more behind) change nothing.
TEST(Team, StepsSeeThePreviousStepsWrites) {
  ThreadPool pool(3);
  constexpr int kSteps = 40, kItems = 64;
  std::vector<std::vector<uint64_t>> value(kSteps, std::vector<uint64_t>(kItems));  // sums wrap
  for (int round = 0; round < 50; ++round) {
    pool.run_team([&](Team& team) {
      for (int s = 0; s < kSteps; ++s) {
        auto item = [&, s](int64_t i) {
          if ((s * kItems + i + round) % 97 == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
          uint64_t prev = 0;  // step s-1's sum, written by any thread
          if (s > 0)
            for (uint64_t v : value[s - 1]) prev += v;
          value[s][i] = prev + i + round;
        };
        if (s % 2) team.queue(kItems, item);
        else team.share(kItems, item);
      }
    });
    uint64_t sum = 0;  // each step: kItems * (previous sum + round) + sum of i
    for (int s = 0; s < kSteps; ++s) sum = kItems * (sum + round) + kItems * (kItems - 1) / 2;
    uint64_t last = 0;
    for (uint64_t v : value[kSteps - 1]) last += v;
    ASSERT_EQ(last, sum) << "round " << round;
  }
}

// Team jobs between other kinds of job, on a pool whose workers have gone
// to sleep or are still finishing the previous job.
TEST(Team, InterleavesWithOtherJobs) {
  ThreadPool pool(2);
  std::atomic<int64_t> items{0};
  int64_t want = 0;
  for (int round = 0; round < 1000; ++round) {
    if (round % 100 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (round % 2) {
      pool.parallel_for_shares(5, [&](int64_t) { items.fetch_add(1); });
      want += 5;
    } else {
      pool.run_team([&](Team& team) {
        for (int s = 0; s < 3; ++s) team.share(s + round % 4, [&](int64_t) { items.fetch_add(1); });
      });
      want += 3 + 3 * (round % 4);
    }
  }
  EXPECT_EQ(items.load(), want);
}

TEST(ThreadPool, AcceptsStdFunctionAndSplitsEvenly) {
  ThreadPool pool(2);
  std::atomic<int> calls{0};
  const std::function<void(int, int)> fn = [&](int, int) { calls.fetch_add(1); };
  pool.run(fn);
  EXPECT_EQ(calls.load(), 2);
  long covered = 0;
  for (int i = 0; i < 3; ++i) {
    const auto [b, e] = ThreadPool::split(10, i, 3);
    EXPECT_EQ(b, covered);
    covered = e;
  }
  EXPECT_EQ(covered, 10);
}

}  // namespace
}  // namespace llmserve
