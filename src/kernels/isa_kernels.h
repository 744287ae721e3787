#pragma once
// Internal: the kernels of one instruction set, as one table per ISA. Each
// family's per-ISA file fills in its part (matmul_<isa>.cpp: MatmulKernels,
// ops_<isa>.cpp: OpsKernels, attention_<isa>.cpp: AttentionKernels), and
// isa_kernels.cpp gathers them into that ISA's IsaKernels. The drivers
// (matmul.cpp, ops.cpp, attention.cpp) look the active table up once per
// call or job and call through it, so adding an ISA means filling in one
// more table.
#include "kernels/cpu.h"

namespace llmserve::kernels {

struct MatmulKernels;     // panel.h
struct OpsKernels;        // ops_isa.h
struct AttentionKernels;  // attention_isa.h

struct IsaKernels {
  const MatmulKernels* matmul;
  const OpsKernels* ops;
  const AttentionKernels* attention;
};

// The table of `isa`, for tests and benchmarks that run a given level.
const IsaKernels& isa_kernels(Isa isa);

// The table of active_isa(), the level kernels run at now.
inline const IsaKernels& active_kernels() { return isa_kernels(active_isa()); }

}  // namespace llmserve::kernels
