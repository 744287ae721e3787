// Attention worker for avx2: attention_impl.h instantiated with this ISA's vectors.
#include "kernels/attention_impl.h"
#include "kernels/simd_avx2.h"

namespace llmserve::kernels::avx2 {

const AttentionKernels kAttentionKernels = attention_impl::attention_table<VF>();

}  // namespace llmserve::kernels::avx2
