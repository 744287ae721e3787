#pragma once
// A persistent pool of worker threads for data-parallel ops. `run(fn)` calls
// fn(i, n) on every thread (the caller is thread 0) and returns when all have
// finished. Decode is a long chain of small ops (tens of microseconds each),
// so a fork/join must cost well under a microsecond: workers spin on a
// generation counter for a while after each job and only then sleep on a
// futex, and the caller spins for the join.
//
// One caller at a time; run() is not reentrant (a job must not call run()),
// and a job must not throw.
#include <atomic>
#include <cstdint>
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
               const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Called by every thread of the current job: returns once all have
  // arrived. Lets one job do phases (e.g. quantize inputs, then use them)
  // without a second fork/join.
  void barrier();

  // Rows [begin, end) of `n` that thread `i` of `n_threads` owns.
  static std::pair<long, long> split(long n, int i, int n_threads) {
    return {n * i / n_threads, n * (i + 1) / n_threads};
  }

 private:
  using Thunk = void (*)(void* ctx, int thread, int n_threads);
  void run_erased(Thunk fn, void* ctx);

  struct Impl;
  Impl* impl_;
};

int default_thread_count();  // physical cores this process may run on

}  // namespace llmserve
