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
// scores. One thread, a step per 8 blocks against one per block, 61
// alternations in one process (scripts/attention_ab.sh, AVX2), cache in
// L3 / from memory: Llama 2 7B's shape (32 heads of 128) at 2048 keys
// 1.51x / 1.40x as fast, stories110m's (12 of 64) at 900 keys 1.24x /
// 0.97-1.06x, with a Q8_0 cache 1.36x / 1.09x. 4 blocks: 1.33x / 1.39x and
// 1.30x / 1.00x; 16: 1.46x / 1.26x and 1.24x / 1.03x. stories110m Q8_0
// end to end at `-d 900` (scripts/ab_bench.py --field tg_tps, 2 x 6
// rounds): 0.93 and 1.00, level within the host's noise.
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
