#pragma once
// Internal: the per-ISA row ops behind ops.h (instantiations of ops_impl.h),
// each ISA's part of its IsaKernels (isa_kernels.h).
#include <cstdint>

namespace llmserve::kernels {

struct OpsKernels {
  void (*rmsnorm)(const float* x, const float* weight, float eps, int64_t dim, float* y);
  float (*max_value)(const float* x, int64_t n);
  void (*softmax)(float* x, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  void (*add)(const float* a, const float* b, int64_t n, float* out);
  void (*to_f16)(const float* x, int64_t n, uint16_t* out);
  int32_t (*dot_i8)(const int8_t* a, const int8_t* b, int64_t n);
};

namespace scalar { extern const OpsKernels kOpsKernels; }
namespace avx2 {
extern const OpsKernels kOpsKernels;
int32_t dot_i8(const int8_t* a, const int8_t* b, int64_t n);  // AVX-512's table takes it too
}
namespace avx512 { extern const OpsKernels kOpsKernels; }

}  // namespace llmserve::kernels
