#pragma once
// Internal: the per-ISA attention worker behind attention.h, each ISA's
// part of its IsaKernels (isa_kernels.h).
#include <algorithm>
#include <cstdint>

#include "kernels/attention.h"

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

// Query rows per KV head (group size x tokens) up to which an item takes
// the narrow or lone path (attention_impl.h, item()) instead of tiles:
// those may take several KV heads (AttentionJob::plan).
inline int narrow_rows_max(int lanes) { return lanes == 8 ? 8 : lanes - 1; }

// Key blocks (of `lanes` keys) per softmax step of lone_item
// (attention_impl.h). A step per block was a chain of a horizontal max, an
// exp and a sum for every head and 8 keys, each waiting on the block's
// scores; 8 blocks measured best of 4, 8 and 16.
constexpr int kLoneChunk = 8;

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
  // Per head Q, O, max, sum and a chunk's scores.
  const int64_t lone = heads * (2 * hdp + 2 + kLoneChunk * lanes);
  // Then a K block and a V block.
  return std::max({tiled, narrow, lone}) + 2 * lanes * hdp;
}

}  // namespace llmserve::kernels
