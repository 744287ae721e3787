#pragma once
// The machine's ceilings, measured the way the kernels use it, for the
// bench command's roofline fractions: decode is bounded by read bandwidth
// (weight bytes per token), prefill by the integer / float dot-product rate.
// Each uses all of the pool's threads and the active ISA (cpu.h), and
// reports the best of several runs.
#include <array>
#include <cstddef>
#include <cstdint>

namespace llmserve {
class ThreadPool;
}

namespace llmserve::kernels {

// Seconds a streaming read of [p, p + bytes) takes on all of the pool's
// threads (p 64-byte aligned, bytes a multiple of 256): the fastest of up
// to kReadPasses (4) passes, one of plain loads, one that also prefetches
// in software and (AVX-512) one that prefetches and keeps its sums in
// memory and one that reads as decode reads a Q8_0 panel
// (roofline_avx512.cpp). Which reads fastest is the CPU's doing, and each
// pass is the fastest on some CPU; a yardstick the kernels beat is no
// ceiling, so the fastest pass counts. The bytes go in 1 MiB chunks handed
// out as decode hands out weight panels: each thread starts on its own
// contiguous share and helps with the others' when done, so a thread
// slowed by another tenant does not leave the rest unread while the clock
// runs.
double read_seconds(ThreadPool& pool, const uint8_t* p, size_t bytes);
// The same with each pass over a buffer of its own (all `bytes` long): a
// buffer that fits in the last-level cache is
// still there for a second pass over it, which then reads from the cache.
constexpr int kReadPasses = 4;
double read_seconds(ThreadPool& pool, std::array<const uint8_t*, kReadPasses> passes, size_t bytes);

// read_seconds() of a `bytes` buffer of its own. Kept for repeated
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

// Register-only vpdpwssd loops, f16 and bf16 prompt tokens' int16 path
// (matmul.h: PromptPath): 1e9 int16 ops/s; 0 below the avx512 level.
double measure_peak_int16_gops(ThreadPool& pool);

// Register-only tdpbf16ps loops, f16 and bf16 prompt tokens' AMX-BF16 path
// (cpu.h):
// 1e9 ops/s (a multiply-add counts as 2); 0 where use_amx() is false.
double measure_peak_bf16_gflops(ThreadPool& pool);

// Register-only tdpbssd loops, the AMX-INT8 tiles that quantized weights'
// whole token groups take (cpu.h): 1e9 int8 ops/s; 0 where use_amx() is
// false.
double measure_peak_amx_int8_gops(ThreadPool& pool);

}  // namespace llmserve::kernels
