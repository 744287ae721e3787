#pragma once
// Internal: per-ISA loops behind roofline.h. Each returns a value derived
// from all its work so the compiler cannot drop it.
#include <cstddef>
#include <cstdint>

#include "bench/roofline.h"
#include "kernels/cpu.h"

namespace llmserve::kernels {

// How far ahead of its loads the second read loop prefetches (into L2).
constexpr size_t kReadPrefetchBytes = 8192;

struct RooflineKernels {
  // A streaming read, p 64-byte aligned, bytes a multiple of 256: [0] plain
  // loads, [1] the same with software prefetch kReadPrefetchBytes ahead,
  // [2] and [3] (null where the ISA has none) a prefetching read that keeps
  // its sums in memory, and one in the order and with the loads of decode's
  // Q8_0 kernel. Which is fastest depends on the CPU (roofline.h).
  uint64_t (*read[kReadPasses])(const uint8_t* p, size_t bytes);
  uint64_t (*int8_loop)(int64_t iters);
  double int8_ops_per_iter;
  uint64_t (*f32_loop)(int64_t iters);
  double f32_ops_per_iter;
  uint64_t (*int16_loop)(int64_t iters);  // null where the ISA has no vpdpwssd
  double int16_ops_per_iter;
};

namespace scalar { extern const RooflineKernels kRooflineKernels; }
namespace avx2 { extern const RooflineKernels kRooflineKernels; }
namespace avx512 { extern const RooflineKernels kRooflineKernels; }

const RooflineKernels& roofline_kernels(Isa isa);

// AMX, where use_amx() (roofline_amx.cpp): `iters` x 4 tile products on
// tiles of zeros, tdpbf16ps and tdpbssd.
namespace amx {
uint64_t bf16_peak_loop(int64_t iters);
uint64_t int8_peak_loop(int64_t iters);
constexpr double kBf16PeakFlopsPerIter = 4.0 * 16 * 16 * 32 * 2;
constexpr double kInt8PeakOpsPerIter = 4.0 * 16 * 16 * 64 * 2;
}  // namespace amx

}  // namespace llmserve::kernels
