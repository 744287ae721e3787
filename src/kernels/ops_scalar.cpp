// Row ops for scalar: ops_impl.h instantiated with this ISA's vectors.
#include "kernels/ops_impl.h"
#include "kernels/simd_scalar.h"

namespace llmserve::kernels::scalar {

const OpsKernels kOpsKernels = ops_impl::ops_table<VF>();

}  // namespace llmserve::kernels::scalar
