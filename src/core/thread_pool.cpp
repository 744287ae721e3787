#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace llmserve {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long an idle worker spins before sleeping: long enough to bridge the
// gap between two ops of a decode step (and the sampler between two steps),
// short enough that an idle server does not burn a core.
constexpr auto kJobSpin = std::chrono::microseconds(500);
// Pause-spins before a waiter starts yielding: a few microseconds, the usual
// gap between two ops of a decode step.
constexpr int kPauseSpins = 2000;
// How long a thread waits for the others (join, barrier) before sleeping.
// Normal imbalance is a few microseconds. Much longer means the thread it
// waits for lost its core to another process; sleeping then idles this
// core, and the scheduler moves the late thread onto it.
constexpr auto kSyncSpin = std::chrono::microseconds(50);

// A 32-bit word that threads wait on: spin, then sleep on its futex. The
// waiter announces itself in `sleepers` before its last check and the
// notifier changes the word before reading `sleepers` (all seq_cst), so a
// wakeup is never lost and a notify without sleepers costs no syscall.
struct WaitWord {
  alignas(64) std::atomic<uint32_t> word{0};
  alignas(64) std::atomic<int> sleepers{0};

  // Returns once pred(word) holds (and the value it held): pause-spins for
  // a few microseconds, then spins with sched_yield (which hands the core to
  // any other runnable thread: with more threads than cores, a spinning
  // waiter would otherwise hold the core the awaited thread needs) until
  // `spin` has passed, then sleeps.
  template <class Pred>
  uint32_t wait(std::chrono::microseconds spin, Pred pred) {
    uint32_t v = word.load(std::memory_order_acquire);
    for (int i = 0; i < kPauseSpins; ++i, v = word.load(std::memory_order_acquire)) {
      if (pred(v)) return v;
      cpu_relax();
    }
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0;; ++i, v = word.load(std::memory_order_acquire)) {
      if (pred(v)) return v;
      std::this_thread::yield();
      if ((i & 15) == 15 && std::chrono::steady_clock::now() - start > spin) break;
    }
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    while (!pred(v = word.load(std::memory_order_seq_cst))) word.wait(v, std::memory_order_seq_cst);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return v;
  }

  void add(uint32_t n) {
    word.fetch_add(n, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) word.notify_all();
  }
};

}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;

  // The job word: a job counter times 2, plus 1 for an optional job. One
  // word, so a worker never pairs one job's number with another's kind.
  WaitWord job;
  WaitWord finished;  // run(): workers done with the current job
  WaitWord active;    // parallel_for(): workers inside the current job
  WaitWord phase;     // bumped when all threads reach a barrier
  std::unique_ptr<WaitWord[]> step_done;  // run_team(): items of step s done
  alignas(64) std::atomic<uint32_t> closed{0};  // the optional job word whose items are all claimed
  alignas(64) std::atomic<int> arrived{0};
  alignas(64) Thunk fn = nullptr;  // published by `job`
  void* ctx = nullptr;
  bool stop = false;

  void worker(int index) {
    uint32_t seen = 0;
    for (;;) {
      seen = job.wait(kJobSpin, [&](uint32_t j) { return j != seen; });
      if (stop) return;
      if ((seen & 1) == 0) {
        fn(ctx, index, n_threads);
        finished.add(1);
        continue;
      }
      // Optional job: join only while it is current and open. Entering
      // before checking (all seq_cst) pairs with the caller closing before
      // reading `active`: either it waits for us, or we see the job closed
      // or already replaced by a later one.
      active.word.fetch_add(1, std::memory_order_seq_cst);
      if (job.word.load(std::memory_order_seq_cst) == seen && closed.load(std::memory_order_seq_cst) != seen)
        fn(ctx, index, n_threads);
      active.add(static_cast<uint32_t>(-1));
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  impl_->n_threads = n_threads < 1 ? 1 : n_threads;
  shares_.reset(new Share[impl_->n_threads]);
  for (int i = 1; i < impl_->n_threads; ++i) impl_->workers.emplace_back([this, i] { impl_->worker(i); });
}

ThreadPool::~ThreadPool() {
  impl_->stop = true;
  impl_->job.add(2);
  for (auto& t : impl_->workers) t.join();
  delete impl_;
}

int ThreadPool::size() const { return impl_->n_threads; }

void ThreadPool::run_erased(Thunk fn, void* ctx, bool optional) {
  Impl& p = *impl_;
  if (p.n_threads == 1) {
    fn(ctx, 0, 1);
    return;
  }
  p.fn = fn;
  p.ctx = ctx;
  if (!optional) {
    p.finished.word.store(0, std::memory_order_relaxed);  // no worker touches it until the next line
    p.job.add(2 - (p.job.word.load(std::memory_order_relaxed) & 1));  // next even word
    fn(ctx, 0, p.n_threads);
    const auto all = static_cast<uint32_t>(p.n_threads - 1);
    p.finished.wait(kSyncSpin, [&](uint32_t f) { return f == all; });
    return;
  }
  p.job.add(1 + (p.job.word.load(std::memory_order_relaxed) & 1));  // next odd word
  const uint32_t word = p.job.word.load(std::memory_order_relaxed);
  fn(ctx, 0, p.n_threads);  // returns once every item is claimed
  p.closed.store(word, std::memory_order_seq_cst);
  p.active.wait(kSyncSpin, [](uint32_t a) { return a == 0; });
}

void ThreadPool::barrier() {
  Impl& p = *impl_;
  if (p.n_threads == 1) return;
  // Every thread reads the phase before arriving, and the phase cannot move
  // until all have arrived, so nobody can miss the release.
  const uint32_t phase = p.phase.word.load(std::memory_order_acquire);
  if (p.arrived.fetch_add(1, std::memory_order_acq_rel) == p.n_threads - 1) {
    p.arrived.store(0, std::memory_order_relaxed);
    p.phase.add(1);
    return;
  }
  p.phase.wait(kSyncSpin, [&](uint32_t v) { return v != phase; });
}

void ThreadPool::reset_steps(int max_steps) {
  const int n = impl_->n_threads;
  if (max_steps > step_capacity_) {
    step_claims_.reset(new Share[static_cast<size_t>(max_steps) * n]);
    impl_->step_done.reset(new WaitWord[max_steps]);
    step_capacity_ = max_steps;
  }
  for (int i = 0; i < max_steps * n; ++i) step_claims_[i].next.store(0, std::memory_order_relaxed);
  for (int s = 0; s < max_steps; ++s) impl_->step_done[s].word.store(0, std::memory_order_relaxed);
  // Published to the workers by the job word (seq_cst) in run_erased().
}

ThreadPool::Share* Team::begin_step(int64_t n) {
  if (counting()) {
    ++step_;
    return nullptr;
  }
  if (++step_ >= max_steps_) {
    std::fprintf(stderr, "llmserve: a run_team body took more than its %d steps\n", max_steps_);
    std::abort();
  }
  if (step_ > 0) {
    const auto need = static_cast<uint32_t>(step_items_);
    pool_.impl_->step_done[step_ - 1].wait(kSyncSpin, [&](uint32_t done) { return done >= need; });
  }
  step_items_ = n;
  return &pool_.step_claims_[static_cast<size_t>(step_) * size_];
}

std::pair<int64_t, int64_t> Team::claim_range(std::atomic<int64_t>& claims, int64_t begin, int64_t end, bool own,
                                              int64_t grain) {
  grain = std::max<int64_t>(grain, 1);
  int64_t word = claims.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t front = begin + (word >> 32), back = end - (word & 0xffffffff);
    if (front >= back) return {0, 0};
    // Up to the next multiple of grain (the owner, from the front) or back
    // to the one before (a helper, from the back), but at most half of what
    // is left, so that the last claims shrink to single items for the two
    // to share.
    const int64_t to_boundary = own ? grain - front % grain : back - (back - 1) / grain * grain;
    const int64_t n = std::min(to_boundary, std::max<int64_t>(1, (back - front) / 2));
    if (claims.compare_exchange_weak(word, word + (own ? n << 32 : n), std::memory_order_relaxed))
      return own ? std::pair{front, front + n} : std::pair{back - n, back};
  }
}

void Team::end_step(int64_t items_done) {
  if (items_done > 0) pool_.impl_->step_done[step_].add(static_cast<uint32_t>(items_done));
}

void Team::finish() {
  if (step_ < 0) return;
  const auto need = static_cast<uint32_t>(step_items_);
  pool_.impl_->step_done[step_].wait(kSyncSpin, [&](uint32_t done) { return done >= need; });
}

int default_thread_count() {
  // Count distinct physical cores among the CPUs this process may use: SMT
  // siblings share the execution units the kernels saturate.
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = -1, core = -1;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    if (core < 0) return CPU_COUNT(&set);  // no topology: count CPUs
    cores.insert({package, core});
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

}  // namespace llmserve
