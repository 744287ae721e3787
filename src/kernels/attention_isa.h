#pragma once
// Internal: the per-ISA attention worker behind attention.h.
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/cpu.h"

namespace llmserve::kernels {

struct AttentionCall {
  AttentionShape shape;
  KvLayout layout;
  const uint8_t* k;
  const uint8_t* v;
};

// `scratch`: attention_scratch_floats() floats, 64-byte aligned.
using AttentionItemFn = void (*)(const AttentionCall& call, const AttentionItem& item, float* scratch);

struct AttentionKernels {
  int lanes;  // keys per block = the ISA's float vector width
  AttentionItemFn item;
};

namespace scalar { extern const AttentionKernels kAttentionKernels; }
namespace avx2 { extern const AttentionKernels kAttentionKernels; }
namespace avx512 { extern const AttentionKernels kAttentionKernels; }

const AttentionKernels& attention_kernels(Isa isa);

// Scratch one work item needs: `rows` = query rows (group size x tokens).
inline int64_t attention_scratch_floats(int64_t rows, int head_dim, int lanes) {
  const int64_t padded_rows = (rows + 7) / 8 * 8;
  const int64_t hdp = (head_dim + lanes - 1) / lanes * lanes;
  // Q, O, scores, max, sum; K block, K transposed, V block.
  return padded_rows * (2 * hdp + lanes + 2) + 3 * lanes * hdp;
}

}  // namespace llmserve::kernels
