// ThreadPool: every thread runs each job exactly once, jobs see each
// other's writes in order, barriers separate phases, and sleeping workers
// wake up.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace llmserve {
namespace {

TEST(ThreadPool, RunsEveryThreadOncePerJob) {
  for (int n : {1, 2, 3, 5}) {
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
