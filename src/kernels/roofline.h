#pragma once
// The machine's ceilings, measured the way the kernels use it, for the
// bench command's roofline fractions: decode is bounded by read bandwidth
// (weight bytes per token), prefill by the integer / float dot-product rate.
// Each uses all of the pool's threads and the active ISA (cpu.h), and
// reports the best of several runs.
#include <cstddef>
#include <cstdint>

namespace llmserve {
class ThreadPool;
}

namespace llmserve::kernels {

// Streaming reads of a `bytes` buffer, split across the pool's threads
// (each part first touched by the thread that reads it). Kept for repeated
// measurements: allocating and touching 1 GiB costs far more than reading
// it, and a buffer that lives as long as the run is what the weights are.
class ReadProbe {
 public:
  ReadProbe(ThreadPool& pool, size_t bytes);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  // Best of `reps` passes, GB/s (1e9 bytes).
  double gbs(int reps = 1);

 private:
  ThreadPool& pool_;
  size_t slice_;  // bytes per thread
  uint8_t* buf_;
};

// A fresh ReadProbe's best of `reps` passes.
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// Register-only loops of the instructions the quantized kernels run
// (vpdpbusd; vpmaddubsw + vpmaddwd on AVX2), in 1e9 int8 ops/s (a
// multiply-add counts as 2 ops).
double measure_peak_int8_gops(ThreadPool& pool);

// Register-only FMA loops: 1e9 f32 ops/s (an FMA counts as 2).
double measure_peak_f32_gflops(ThreadPool& pool);

}  // namespace llmserve::kernels
