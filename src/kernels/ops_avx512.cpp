// Row ops for avx512: ops_impl.h instantiated with this ISA's vectors.
#include "kernels/ops_impl.h"
#include "kernels/simd_avx512.h"

namespace llmserve::kernels::avx512 {

const OpsKernels kOpsKernels = ops_impl::ops_table<VF>(avx2::dot_i8);  // AVX-512 has no byte sign instruction

}  // namespace llmserve::kernels::avx512
