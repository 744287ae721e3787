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

// Scratch one work item needs: `rows` = query rows per KV head (group size
// x tokens), `lone_heads` = KV heads of an item of lone rows (one row per
// KV head, see AttentionJob::plan). With at least `lanes` rows, rows go by
// tiles of `lanes`, fewer one by one, lone rows head by head
// (attention_impl.h).
inline int64_t attention_scratch_floats(int64_t rows, int lone_heads, int head_dim, int lanes) {
  const int64_t hdp = (head_dim + lanes - 1) / lanes * lanes;
  // Per tile Q and O (transposed), max, sum, last key; a tile's probabilities.
  const int64_t tiles = (rows + lanes - 1) / lanes;
  const int64_t tiled = tiles * lanes * (2 * hdp + 3) + lanes * lanes;
  // Per row (padded to 8) Q, O, scores, max, sum.
  const int64_t narrow_rows = (std::min<int64_t>(rows, lanes) + 7) / 8 * 8;
  const int64_t narrow = narrow_rows * (2 * hdp + lanes + 2);
  // Then K block and its transpose, V block.
  const int64_t blocks = 3 * lanes * hdp;
  // Per head Q, O, max, sum; a head's scores, a Q8_0 block.
  const int64_t lone = lone_heads * (2 * hdp + 2) + lanes + lanes * hdp;
  return std::max(std::max(tiled, narrow) + blocks, lone);
}

}  // namespace llmserve::kernels
