#pragma once
// A persistent pool of worker threads for data-parallel ops. `run(fn)` calls
// fn(i, n) on every thread (the caller is thread 0) and returns when all have
// finished. Decode is a long chain of small ops (tens of microseconds each),
// so a fork/join must cost well under a microsecond: idle workers spin on a
// job counter for a while after each job before sleeping on a futex, and the
// join and barrier spin briefly before sleeping (see the .cpp). run_team()
// runs a whole chain of such ops, a forward pass, as one job.
//
// One caller at a time; run() is not reentrant (a job must not call run()),
// and a job must not throw.
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace llmserve {

class Team;

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const;

  // fn(int thread, int n_threads) runs once on each thread. Takes any
  // callable (lambda, std::function) without copying or allocating.
  template <class F>
  void run(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run_erased([](void* ctx, int i, int n) { (*static_cast<Fn*>(ctx))(i, n); },
               const_cast<void*>(static_cast<const void*>(&fn)), false);
  }

  // Called by every thread of the current run() job: returns once all have
  // arrived. Lets one job do phases (e.g. quantize inputs, then use them)
  // without a second fork/join.
  void barrier();

  // Calls fn(int64_t item) once for every item in [0, n_items). Threads
  // claim items through a shared counter, and a worker that has not joined
  // by the time the items are all claimed is not waited for: on cores shared
  // with other processes, a descheduled worker delays the call by at most
  // the item it holds, not by a scheduler time slice. Items may therefore
  // run on any subset of the threads (only the caller, at worst); fn must
  // not call barrier().
  template <class F>
  void parallel_for(int64_t n_items, F&& fn) {
    std::atomic<int64_t> next{0};
    auto job = [&](int, int) {
      for (int64_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) fn(i);
    };
    run_erased([](void* ctx, int i, int n) { (*static_cast<decltype(job)*>(ctx))(i, n); }, &job, true);
  }

  // The same, but thread i first claims the items of the i-th of n_threads
  // contiguous shares of [0, n_items), in order, and then helps with the
  // other shares. For memory-bound loops over adjacent data (decode's weight
  // panels): each thread streams one long run, which the hardware
  // prefetchers follow, and claims from a counter of its own instead of one
  // that every claim moves between the cores (stories110m decode: +14%
  // against parallel_for). Items of uneven cost, sorted longest first, want
  // parallel_for, whose one queue finishes them in that order.
  template <class F>
  void parallel_for_shares(int64_t n_items, F&& fn) {
    const int n = size();
    for (int i = 0; i < n; ++i) {
      const auto [begin, end] = split(n_items, i, n);
      shares_[i].next.store(begin, std::memory_order_relaxed);  // published by the job word
      shares_[i].end = end;
    }
    auto job = [&](int i, int) {
      for (int k = 0; k < n; ++k) {
        Share& s = shares_[(i + k) % n];
        for (int64_t item; (item = s.next.fetch_add(1, std::memory_order_relaxed)) < s.end;) fn(item);
      }
    };
    run_erased([](void* ctx, int i, int n) { (*static_cast<decltype(job)*>(ctx))(i, n); }, &job, true);
  }

  // Runs body(Team&) on every thread, all of them going through the same
  // steps (see Team): one fork/join for a whole forward pass instead of one
  // per op, and the ops between matmuls (norms, RoPE) spread over the
  // threads too. Against a fork/join per op, in `bench` runs alternated
  // with the old binary (tinyllama Q4_0 6 pairs, stories110m Q8_0 5,
  // tinyllama Q8_0 3): decode roofline_frac +1.7%, +2.2%, +1.4% (medians,
  // 13 of 14 pairs level or better), pp512 +4.2% and +2.5% (Q8_0
  // unsettled). As with parallel_for, a worker that joins late finds the
  // finished steps done and helps with the rest, and one that has not
  // joined when the last step is done is not waited for. `max_steps`
  // bounds the steps the body takes.
  template <class Body>
  void run_team(int max_steps, Body&& body);

  // Rows [begin, end) of `n` that thread `i` of `n_threads` owns.
  static std::pair<long, long> split(long n, int i, int n_threads) {
    return {n * i / n_threads, n * (i + 1) / n_threads};
  }

 private:
  using Thunk = void (*)(void* ctx, int thread, int n_threads);
  // optional: workers that arrive after the caller finished are skipped.
  void run_erased(Thunk fn, void* ctx, bool optional);

  friend class Team;
  void reset_steps(int max_steps);  // run_team(): fresh counters for its steps

  struct Impl;
  Impl* impl_;
  // parallel_for_shares(): thread i's share, on a cache line of its own.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Share[]> shares_;
  // run_team(): step s's claim counter of share i is step_claims_[s * size() + i].
  std::unique_ptr<Share[]> step_claims_;
  int step_capacity_ = 0;
};

// One thread's part in a ThreadPool::run_team() job. The body is the same
// sequence of steps on every thread; a step is a set of items the threads
// share out, and a thread starts a step once every item of the previous step
// is done, whichever thread did it. So a step sees everything earlier steps
// wrote, but the body's own code between steps may run before the previous
// step has finished: it must not read what steps write (do that in an item).
class Team {
 public:
  int thread() const { return thread_; }
  int size() const { return size_; }

  // Items [0, n): fn(item) once each, thread i first taking the items of its
  // own contiguous share in order, as ThreadPool::parallel_for_shares does.
  template <class F>
  void share(int64_t n, F&& fn) {
    run_step(n, fn, true);
  }
  // Items [0, n) in contiguous ranges, fn(begin, end), for streams that
  // pay for every break (decode's matmuls: an item is a few panels of
  // weights). Thread i streams its own share front to back in ranges that
  // end where multiples of `grain` items do (a tile of packed weights), and
  // shorter ones as the share runs out; a thread done with its own share
  // takes ranges from the back of another's, leaving the owner's stream
  // unbroken: each back to the multiple of `grain` before it, at most half
  // of what is left, so the owner's and the helper's last claims are
  // single items, and threads finish within about an item of each other,
  // where claims of whole tiles left one waiting for up to a tile.
  // Helpers took single items once, and a stolen decode panel took three
  // times the owner's time per panel (tinyllama Q8_0 on the Zen 5 host,
  // items timed in `bench`: gate/up 3.3 us against 1.0-1.3, down 11 us
  // against 3.5; a burst of prefetches for the panel before running it did
  // not help). Stolen in ranges, 1.2-1.3x (gate/up) and 1.7-2.1x (down).
  // Tokens alternated in one `bench` process between the two (windows of
  // 64 tokens, 16 a run, medians): tinyllama Q8_0 1.022x and 1.026x (14
  // and 15 windows of 16 faster; the switch against itself 0.999x),
  // Q4_0 1.034x, Q4_K_M 1.030x, stories110m Q8_0 1.029x.
  template <class F>
  void share_ranges(int64_t n, int64_t grain, F&& fn) {
    ThreadPool::Share* claims = begin_step(n);
    int64_t done = 0;
    for (int k = 0; k < size_; ++k) {
      const int j = (thread_ + k) % size_;
      const auto [begin, end] = ThreadPool::split(n, j, size_);
      for (std::pair<int64_t, int64_t> r; (r = claim_range(claims[j].next, begin, end, k == 0, grain)).first < r.second;
           done += r.second - r.first)
        fn(r.first, r.second);
    }
    end_step(done);
  }
  // Items [0, n) from one queue in order, as ThreadPool::parallel_for does:
  // for items of uneven cost sorted longest first.
  template <class F>
  void queue(int64_t n, F&& fn) {
    run_step(n, fn, false);
  }

 private:
  friend class ThreadPool;
  Team(ThreadPool& pool, int thread, int size, int max_steps)
      : pool_(pool), thread_(thread), size_(size), max_steps_(max_steps) {}

  template <class F>
  void run_step(int64_t n, F& fn, bool shares) {
    ThreadPool::Share* claims = begin_step(n);
    int64_t done = 0;
    for (int k = 0; k < (shares ? size_ : 1); ++k) {
      const int j = shares ? (thread_ + k) % size_ : 0;  // a queue is share 0, the whole range
      const auto [begin, end] = shares ? ThreadPool::split(n, j, size_) : std::pair<long, long>{0, n};
      for (int64_t i; (i = begin + claims[j].next.fetch_add(1, std::memory_order_relaxed)) < end; ++done) fn(i);
    }
    end_step(done);
  }
  // share_ranges(): the next range of share [begin, end) whose claims word
  // holds the items taken from its front (high half) and from its back
  // (low half); empty once the share is all taken.
  static std::pair<int64_t, int64_t> claim_range(std::atomic<int64_t>& claims, int64_t begin, int64_t end, bool own,
                                                 int64_t grain);
  // Waits until the previous step is done; returns this step's claim counters.
  ThreadPool::Share* begin_step(int64_t n);
  void end_step(int64_t items_done);
  void finish();  // the caller, after the body: waits until the last step is done

  ThreadPool& pool_;
  int thread_, size_, max_steps_;
  int step_ = -1;          // the step this thread is in
  int64_t step_items_ = 0;  // its item count
};

template <class Body>
void ThreadPool::run_team(int max_steps, Body&& body) {
  reset_steps(max_steps);
  auto job = [&](int i, int n) {
    Team team(*this, i, n, max_steps);
    body(team);
    if (i == 0) team.finish();
  };
  run_erased([](void* ctx, int i, int n) { (*static_cast<decltype(job)*>(ctx))(i, n); }, &job, true);
}

int default_thread_count();  // physical cores this process may run on

}  // namespace llmserve
