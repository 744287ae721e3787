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

// Streaming reads of a `bytes` buffer by all of the pool's threads, in
// chunks handed out as decode hands out weight panels: each thread starts on
// its own contiguous share and helps with the others' when done, so a thread
// slowed by another tenant does not leave the rest of the buffer unread
// while the clock runs (a fixed split read up to 4x lower on this host).
// Kept for repeated measurements: allocating and touching 1 GiB costs far
// more than reading it, and a buffer that lives as long as the run is what
// the weights are.
class ReadProbe {
 public:
  ReadProbe(ThreadPool& pool, size_t bytes);
  ~ReadProbe();
  ReadProbe(const ReadProbe&) = delete;
  ReadProbe& operator=(const ReadProbe&) = delete;
  // Best of `reps` passes, GB/s (1e9 bytes).
  double gbs(int reps = 1);

 private:
  static constexpr size_t kChunkBytes = size_t{1} << 20;
  // fn(chunk, bytes) -> uint64_t on every chunk, all threads.
  template <class F>
  void for_each_chunk(F fn);

  ThreadPool& pool_;
  size_t bytes_;  // a multiple of 256 (the read loops' step)
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
