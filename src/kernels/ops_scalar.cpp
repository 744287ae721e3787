// Row ops for scalar: ops_impl.h instantiated with this ISA's vectors.
#include "kernels/ops_impl.h"
#include "kernels/simd_scalar.h"

namespace llmserve::kernels::scalar {

namespace {

int32_t dot_i8(const int8_t* a, const int8_t* b, int64_t n) {
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += int32_t{a[i]} * b[i];
  return sum;
}

}  // namespace

const OpsKernels kOpsKernels = ops_impl::ops_table<VF>(dot_i8);

}  // namespace llmserve::kernels::scalar
