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
  // that every claim moves between the cores. Items of uneven cost, sorted
  // longest first, want parallel_for, whose one queue finishes them in that
  // order.
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
  // threads too. As with parallel_for, a worker that joins late finds the
  // finished steps done and helps with the rest, and one that has not
  // joined when the last step is done is not waited for. The body runs once
  // first on a counting Team, which runs no item, to size the steps' counters.
  template <class Body>
  void run_team(Body&& body);

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
// run_team() walks the body once more to count its steps, so that code must
// have no side effects and must take the same steps whatever the items do.
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
  // where claims of whole tiles left one waiting for up to a tile. Helpers
  // take ranges, not single items: a stolen single panel is a short stream
  // of its own, several times slower per panel than the owner's.
  template <class F>
  void share_ranges(int64_t n, int64_t grain, F&& fn) {
    ThreadPool::Share* claims = begin_step(n);
    if (!claims) return;
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
  // A counting team: steps are counted, no item runs.
  explicit Team(ThreadPool& pool) : pool_(pool), thread_(0), size_(pool.size()), max_steps_(-1) {}
  bool counting() const { return max_steps_ < 0; }
  int steps() const { return step_ + 1; }

  template <class F>
  void run_step(int64_t n, F& fn, bool shares) {
    ThreadPool::Share* claims = begin_step(n);
    if (!claims) return;
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
  // Waits until the previous step is done; returns this step's claim
  // counters (nullptr on a counting team).
  ThreadPool::Share* begin_step(int64_t n);
  void end_step(int64_t items_done);
  void finish();  // the caller, after the body: waits until the last step is done

  ThreadPool& pool_;
  int thread_, size_, max_steps_;
  int step_ = -1;          // the step this thread is in
  int64_t step_items_ = 0;  // its item count
};

template <class Body>
void ThreadPool::run_team(Body&& body) {
  Team counter(*this);
  body(counter);
  const int max_steps = counter.steps();
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
