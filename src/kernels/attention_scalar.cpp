// Attention worker for scalar: attention_impl.h instantiated with this ISA's vectors.
#include "kernels/attention_impl.h"
#include "kernels/simd_scalar.h"

namespace llmserve::kernels::scalar {

const AttentionKernels kAttentionKernels = attention_impl::attention_table<VF>();

}  // namespace llmserve::kernels::scalar
