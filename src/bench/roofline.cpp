// roofline.h: runs the active ISA's loops on every thread and times them.
#include "bench/roofline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "bench/roofline_isa.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/large_alloc.h"
#include "kernels/cpu.h"

namespace llmserve::kernels {

const RooflineKernels& roofline_kernels(Isa isa) {
  switch (isa) {
    case Isa::avx512: return avx512::kRooflineKernels;
    case Isa::avx2: return avx2::kRooflineKernels;
    case Isa::scalar: break;
  }
  return scalar::kRooflineKernels;
}

namespace {

// Seconds of the fastest of `reps` runs of fn on all threads.
template <class F>
double best_seconds(ThreadPool& pool, int reps, F fn) {
  double best = 1e30;
  std::atomic<uint64_t> sink{0};
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.run([&](int i, int n) { sink.fetch_xor(fn(i, n), std::memory_order_relaxed); });
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Loop iterations per run: tens of milliseconds at this machine's rates.
constexpr int64_t kComputeIters = 20'000'000;

// 1e9 ops/s of a register-only loop of `iters` iterations on every thread
// (the fastest of 3 runs).
double peak_rate(ThreadPool& pool, uint64_t (*loop)(int64_t), int64_t iters, double ops_per_iter) {
  const double s = best_seconds(pool, 3, [&](int, int) { return loop(iters); });
  return static_cast<double>(iters) * ops_per_iter * pool.size() / s / 1e9;
}

// Iterations of the per-ISA loops: the scalar ones do less per iteration.
int64_t isa_loop_iters() { return active_isa() == Isa::scalar ? kComputeIters * 4 : kComputeIters / 8; }

constexpr size_t kChunkBytes = size_t{1} << 20;

// fn(chunk, chunk_bytes) -> uint64_t on every chunk of [p, p + bytes), on
// all threads, handed out with parallel_for_shares.
template <class T, class F>
void for_each_chunk(ThreadPool& pool, T* p, size_t bytes, F fn) {
  const auto n_chunks = static_cast<int64_t>((bytes + kChunkBytes - 1) / kChunkBytes);
  std::atomic<uint64_t> sink{0};
  pool.parallel_for_shares(n_chunks, [&](int64_t c) {
    const size_t offset = static_cast<size_t>(c) * kChunkBytes;
    sink.fetch_xor(fn(p + offset, std::min(kChunkBytes, bytes - offset)), std::memory_order_relaxed);
  });
}

}  // namespace

double read_seconds(ThreadPool& pool, const uint8_t* p, size_t bytes) { return read_seconds(pool, {p, p, p, p}, bytes); }

double read_seconds(ThreadPool& pool, std::array<const uint8_t*, kReadPasses> passes, size_t bytes) {
  const RooflineKernels& k = roofline_kernels(active_isa());
  double best = 1e30;
  for (int pass = 0; pass < kReadPasses; ++pass) {
    if (k.read[pass] == nullptr) continue;
    const auto start = std::chrono::steady_clock::now();
    for_each_chunk(pool, passes[pass], bytes, [&](const uint8_t* chunk, size_t n) { return k.read[pass](chunk, n); });
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

ReadProbe::ReadProbe(ThreadPool& pool, size_t bytes) : pool_(pool), bytes_(std::max<size_t>((bytes + 255) / 256 * 256, 256)) {
  buf_ = static_cast<uint8_t*>(allocate_large(bytes_));
  if (!buf_) throw Error("read bandwidth probe: cannot allocate " + std::to_string(bytes_) + " bytes");
  // First touch in the order the reads will go, so a page sits near the
  // thread that mostly reads it (NUMA).
  for_each_chunk(pool, buf_, bytes_, [](uint8_t* chunk, size_t n) {
    std::memset(chunk, 1, n);
    return uint64_t{0};
  });
}

ReadProbe::~ReadProbe() { std::free(buf_); }

double ReadProbe::gbs(int reps) {
  double best = 1e30;
  for (int r = 0; r < std::max(reps, 1); ++r) best = std::min(best, read_seconds(pool_, buf_, bytes_));
  return static_cast<double>(bytes_) / best / 1e9;
}

double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps) { return ReadProbe(pool, bytes).gbs(reps); }

double measure_peak_int8_gops(ThreadPool& pool) {
  const RooflineKernels& k = roofline_kernels(active_isa());
  return peak_rate(pool, k.int8_loop, isa_loop_iters(), k.int8_ops_per_iter);
}

double measure_peak_f32_gflops(ThreadPool& pool) {
  const RooflineKernels& k = roofline_kernels(active_isa());
  return peak_rate(pool, k.f32_loop, isa_loop_iters(), k.f32_ops_per_iter);
}

double measure_peak_int16_gops(ThreadPool& pool) {
  const RooflineKernels& k = roofline_kernels(active_isa());
  return k.int16_loop ? peak_rate(pool, k.int16_loop, isa_loop_iters(), k.int16_ops_per_iter) : 0;
}

double measure_peak_bf16_gflops(ThreadPool& pool) {
  return use_amx() ? peak_rate(pool, amx::bf16_peak_loop, kComputeIters / 64, amx::kBf16PeakFlopsPerIter) : 0;
}

double measure_peak_amx_int8_gops(ThreadPool& pool) {
  return use_amx() ? peak_rate(pool, amx::int8_peak_loop, kComputeIters / 128, amx::kInt8PeakOpsPerIter) : 0;
}

}  // namespace llmserve::kernels
