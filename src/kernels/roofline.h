#pragma once
// The machine's ceilings, measured the way the kernels use it, for the
// bench command's roofline fractions: decode is bounded by read bandwidth
// (weight bytes per token), prefill by the integer / float dot-product rate.
// Each uses all of the pool's threads and the active ISA (cpu.h), and
// reports the best of several runs.
#include <cstddef>

namespace llmserve {
class ThreadPool;
}

namespace llmserve::kernels {

// Streaming read of a `bytes` buffer (split across the threads, first
// touched by the thread that reads it), best of `reps` passes. GB/s (1e9).
double measure_read_bandwidth(ThreadPool& pool, size_t bytes, int reps);

// Register-only loops of the instructions the quantized kernels run
// (vpdpbusd; vpmaddubsw + vpmaddwd on AVX2), in 1e9 int8 ops/s (a
// multiply-add counts as 2 ops).
double measure_peak_int8_gops(ThreadPool& pool);

// Register-only FMA loops: 1e9 f32 ops/s (an FMA counts as 2).
double measure_peak_f32_gflops(ThreadPool& pool);

}  // namespace llmserve::kernels
