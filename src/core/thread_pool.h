#pragma once
// A persistent pool of worker threads for data-parallel ops. `run(fn)` calls
// fn(i, n) on every thread (the caller is thread 0) and returns when all have
// finished. Decode is a long chain of small ops (tens of microseconds each),
// so a fork/join must cost well under a microsecond: idle workers spin on a
// job counter for a while after each job before sleeping on a futex, and the
// join and barrier spin briefly before sleeping (see the .cpp).
//
// One caller at a time; run() is not reentrant (a job must not call run()),
// and a job must not throw.
#include <atomic>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace llmserve {

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

  // Rows [begin, end) of `n` that thread `i` of `n_threads` owns.
  static std::pair<long, long> split(long n, int i, int n_threads) {
    return {n * i / n_threads, n * (i + 1) / n_threads};
  }

 private:
  using Thunk = void (*)(void* ctx, int thread, int n_threads);
  // optional: workers that arrive after the caller finished are skipped.
  void run_erased(Thunk fn, void* ctx, bool optional);

  struct Impl;
  Impl* impl_;
  // parallel_for_shares(): thread i's share, on a cache line of its own.
  struct alignas(64) Share {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Share[]> shares_;
};

int default_thread_count();  // physical cores this process may run on

}  // namespace llmserve
