// Attention worker for avx512: attention_impl.h instantiated with this ISA's vectors.
#include "kernels/attention_impl.h"
#include "kernels/simd_avx512.h"

namespace llmserve::kernels::avx512 {

const AttentionKernels kAttentionKernels = attention_impl::attention_table<VF>();

}  // namespace llmserve::kernels::avx512
