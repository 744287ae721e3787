#pragma once
// Internal: the per-ISA attention worker behind attention.h.
#include <algorithm>
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

// Query rows per KV head (group size x tokens) up to which an item takes
// the narrow or lone path (attention_impl.h, item()) instead of tiles:
// those may take several KV heads (AttentionJob::plan).
inline int narrow_rows_max(int lanes) { return lanes == 8 ? 8 : lanes - 1; }

// Scratch one work item needs: `rows` = query rows per KV head (group size
// x tokens), `heads` = KV heads per item (more than 1 only on the narrow
// and lone paths). With more than narrow_rows_max(lanes) rows, rows go by
// tiles of `lanes`; fewer one by one, a lone row per head
// (attention_impl.h).
inline int64_t attention_scratch_floats(int64_t rows, int heads, int head_dim, int lanes) {
  const int64_t hdp = (head_dim + lanes - 1) / lanes * lanes;
  // Per tile Q and O (transposed), max, sum, last key; a tile's probabilities.
  const int64_t tiles = (rows + lanes - 1) / lanes;
  const int64_t tiled = tiles * lanes * (2 * hdp + 3) + lanes * lanes;
  // Per head and row (padded to 8) Q, O, max, sum; a head's scores.
  const int64_t narrow_rows = (std::min<int64_t>(rows, lanes) + 7) / 8 * 8;
  const int64_t narrow = heads * narrow_rows * (2 * hdp + 2) + narrow_rows * lanes;
  // Then K block and its transpose, V block.
  return std::max(tiled, narrow) + 3 * lanes * hdp;
}

}  // namespace llmserve::kernels
