#include "core/thread_pool.h"

#include <sched.h>

#include <chrono>
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

// How long an idle worker spins before sleeping. Long enough to bridge the
// gap between two ops of a decode step (and the sampler between two steps),
// short enough that an idle server does not burn a core.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(500);
// A waiter that spins this long gives its core away between checks: on a
// machine with more threads than cores, the thread it waits for may need it.
constexpr auto kSpinBeforeYield = std::chrono::microseconds(50);

// Spins until pred() holds: pause first, then yield.
template <class Pred>
void spin_until(Pred pred) {
  for (int i = 0; i < 64; ++i) {
    if (pred()) return;
    cpu_relax();
  }
  const auto start = std::chrono::steady_clock::now();
  bool yielding = false;
  for (int i = 0;; ++i) {
    if (pred()) return;
    if (yielding) {
      std::this_thread::yield();
    } else {
      cpu_relax();
      if ((i & 63) == 0) yielding = std::chrono::steady_clock::now() - start > kSpinBeforeYield;
    }
  }
}

}  // namespace

struct ThreadPool::Impl {
  int n_threads = 1;
  std::vector<std::thread> workers;

  // Each field that one side writes and the other polls has its own cache line.
  alignas(64) std::atomic<uint32_t> generation{0};  // bumped once per job
  alignas(64) std::atomic<int> finished{0};         // workers done with this job
  alignas(64) std::atomic<int> sleepers{0};         // workers blocked in wait()
  alignas(64) std::atomic<int> arrived{0};          // barrier
  alignas(64) std::atomic<uint32_t> barrier_phase{0};
  alignas(64) Thunk fn = nullptr;                   // published by `generation`
  void* ctx = nullptr;
  bool stop = false;

  // Returns the generation after `seen`: spins, then sleeps on the futex.
  uint32_t wait_for_job(uint32_t seen) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0;; ++i) {
      const uint32_t g = generation.load(std::memory_order_acquire);
      if (g != seen) return g;
      cpu_relax();
      if ((i & 255) == 255 && std::chrono::steady_clock::now() - start > kSpinBeforeSleep) break;
    }
    // Announce the sleep before the last check; run() bumps the generation
    // before reading `sleepers` (both seq_cst), so one of us sees the other.
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    uint32_t g;
    while ((g = generation.load(std::memory_order_seq_cst)) == seen) generation.wait(seen);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
    return g;
  }

  void worker(int index) {
    uint32_t seen = 0;
    for (;;) {
      seen = wait_for_job(seen);
      if (stop) return;
      fn(ctx, index, n_threads);
      finished.fetch_add(1, std::memory_order_release);
    }
  }

  void publish() {
    generation.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) > 0) generation.notify_all();
  }
};

ThreadPool::ThreadPool(int n_threads) : impl_(new Impl) {
  impl_->n_threads = n_threads < 1 ? 1 : n_threads;
  for (int i = 1; i < impl_->n_threads; ++i) impl_->workers.emplace_back([this, i] { impl_->worker(i); });
}

ThreadPool::~ThreadPool() {
  impl_->stop = true;
  impl_->publish();
  for (auto& t : impl_->workers) t.join();
  delete impl_;
}

int ThreadPool::size() const { return impl_->n_threads; }

void ThreadPool::run_erased(Thunk fn, void* ctx) {
  Impl& p = *impl_;
  if (p.n_threads == 1) {
    fn(ctx, 0, 1);
    return;
  }
  p.fn = fn;
  p.ctx = ctx;
  p.finished.store(0, std::memory_order_relaxed);
  p.publish();
  fn(ctx, 0, p.n_threads);
  spin_until([&] { return p.finished.load(std::memory_order_acquire) == p.n_threads - 1; });
}

void ThreadPool::barrier() {
  Impl& p = *impl_;
  if (p.n_threads == 1) return;
  // Every thread reads the phase before arriving, and the phase cannot move
  // until all have arrived, so nobody can miss the release.
  const uint32_t phase = p.barrier_phase.load(std::memory_order_acquire);
  if (p.arrived.fetch_add(1, std::memory_order_acq_rel) == p.n_threads - 1) {
    p.arrived.store(0, std::memory_order_relaxed);
    p.barrier_phase.fetch_add(1, std::memory_order_release);
    return;
  }
  spin_until([&] { return p.barrier_phase.load(std::memory_order_acquire) != phase; });
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
