// isa_kernels.h: each ISA's table, made of the families' per-ISA parts.
#include "kernels/isa_kernels.h"

#include "kernels/attention_isa.h"
#include "kernels/ops_isa.h"
#include "kernels/panel.h"

namespace llmserve::kernels {

namespace scalar {
constexpr IsaKernels kIsaKernels{&kMatmulKernels, &kOpsKernels, &kAttentionKernels};
}
namespace avx2 {
constexpr IsaKernels kIsaKernels{&kMatmulKernels, &kOpsKernels, &kAttentionKernels};
}
namespace avx512 {
constexpr IsaKernels kIsaKernels{&kMatmulKernels, &kOpsKernels, &kAttentionKernels};
}

const IsaKernels& isa_kernels(Isa isa) {
  switch (isa) {  // every level has a table (-Wswitch)
    case Isa::scalar: return scalar::kIsaKernels;
    case Isa::avx2: return avx2::kIsaKernels;
    case Isa::avx512: return avx512::kIsaKernels;
  }
  return scalar::kIsaKernels;
}

}  // namespace llmserve::kernels
