#pragma once
// Internal: per-ISA loops behind roofline.h. Each returns a value derived
// from all its work so the compiler cannot drop it.
#include <cstddef>
#include <cstdint>

#include "kernels/cpu.h"

namespace llmserve::kernels {

struct RooflineKernels {
  uint64_t (*read)(const uint8_t* p, size_t bytes);  // p 64-byte aligned, bytes a multiple of 256
  uint64_t (*int8_loop)(int64_t iters);
  double int8_ops_per_iter;
  uint64_t (*f32_loop)(int64_t iters);
  double f32_ops_per_iter;
};

namespace scalar { extern const RooflineKernels kRooflineKernels; }
namespace avx2 { extern const RooflineKernels kRooflineKernels; }
namespace avx512 { extern const RooflineKernels kRooflineKernels; }

const RooflineKernels& roofline_kernels(Isa isa);

}  // namespace llmserve::kernels
