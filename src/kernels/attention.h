#pragma once
// Exact causal attention over a paged KV cache (PagedAttention layout), for
// prefill chunks (many queries) and decode (one query) alike. A contiguous
// per-sequence cache is the special case of one block of n_ctx rows.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/types.h"

namespace llmserve::kernels {

struct AttentionShape {
  int n_head = 0;     // query heads
  int n_head_kv = 0;  // KV heads; n_head / n_head_kv query heads share one (GQA)
  int head_dim = 0;
};

// One layer's K (or V) storage: blocks of `block_size` token rows; a row is
// kv_dim = n_head_kv * head_dim values of `type` (F32, F16 or Q8_0; Q8_0
// needs kv_dim % 32 == 0 and its 32-blocks may span heads). Block b starts
// at base + b * block_size * row_bytes.
struct KvLayout {
  gguf::TensorType type = gguf::TensorType::F16;
  int block_size = 16;
  int kv_dim = 0;
  size_t row_bytes = 0;  // gguf::row_bytes(type, kv_dim)
};

// One sequence's queries within a batch.
struct AttentionSeq {
  const float* q = nullptr;  // [n_q][n_head * head_dim]
  float* out = nullptr;      // [n_q][n_head * head_dim]
  int n_q = 0;
  int pos0 = 0;              // query i is at position pos0 + i and sees KV positions 0 .. pos0 + i
  const int32_t* block_table = nullptr;  // logical block -> physical block; covers pos0 + n_q positions
};

// Tiled over KV blocks with an online softmax (FlashAttention-style: no
// score matrix beyond one tile), GQA-aware, scale 1/sqrt(head_dim).
void attention(const AttentionShape& shape, const KvLayout& layout, const uint8_t* k, const uint8_t* v,
               const AttentionSeq* seqs, int n_seqs, ThreadPool& pool);

struct AttentionKernels;  // attention_isa.h

// One work item: query rows [t0, t1) of `seq`, for the query heads that
// share KV heads [kv_head, kv_head + n_heads), over the keys at positions
// [k0, k1) of those the rows see (k1 < 0: up to the last row's position).
// An item with `partial` is one part of a decode token's keys
// (AttentionJob splits them): it leaves each row's running max, sum and
// unnormalized output there ([rows][2 + head_dim]) for AttentionJob to
// merge.
struct AttentionItem {
  const AttentionSeq* seq;
  int kv_head;
  int t0, t1;
  int k0 = 0, k1 = -1;
  float* partial = nullptr;
  int n_heads = 1;
};
// The end of the keys an item covers.
inline int64_t keys_end(const AttentionItem& it) { return it.k1 >= 0 ? it.k1 : int64_t{it.seq->pos0} + it.t1; }
// The query heads of an item's KV heads: its query rows per token.
inline int item_heads(const AttentionShape& s, const AttentionItem& it) { return s.n_head / s.n_head_kv * it.n_heads; }
// Where an item's query row i starts in seq.q and seq.out: row i is query
// head kv_head * group + i % heads of token t0 + i / heads (heads =
// item_heads()).
inline int64_t query_offset(const AttentionShape& s, const AttentionItem& it, int64_t i) {
  const int group = s.n_head / s.n_head_kv, heads = item_heads(s, it);
  return (it.t0 + i / heads) * int64_t{s.n_head} * s.head_dim + (int64_t{it.kv_head} * group + i % heads) * s.head_dim;
}

// An attention call taken apart, for callers that run it on threads of
// their own (see MatmulJob): the batch's work items, longest first, each of
// which may run on any thread, then the merges of split items, which may
// too. One plan serves every layer of a step.
//
// When a batch has too few items to keep `n_threads` threads busy (one
// sequence and few KV heads), each decode token's items are split over
// their keys, as flash-decoding does on GPUs.
class AttentionJob {
 public:
  // Throws Error as attention() does (k and v come with each item). Reuses
  // the storage of the previous plan.
  void plan(const AttentionShape& shape, const KvLayout& layout, const AttentionSeq* seqs, int n_seqs,
            int n_threads);
  int64_t items() const { return static_cast<int64_t>(items_.size()); }
  // k, v: one layer's cache (non-null).
  void run_item(int64_t i, const uint8_t* k, const uint8_t* v) const;
  // Once every item has run: merge i writes one split item's output.
  int64_t merges() const { return static_cast<int64_t>(merges_.size()); }
  void run_merge(int64_t i) const;

 private:
  void split_decode_items(int n_threads, int lanes);

  struct Merge {
    AttentionItem item;  // the whole item
    const float* parts;  // its parts' partials, one after another
    int n_parts;
  };
  const AttentionKernels* kernels_ = nullptr;  // the active ISA's, chosen by plan()
  AttentionShape shape_;
  KvLayout layout_;
  int64_t scratch_floats_ = 0;
  std::vector<AttentionItem> items_;
  std::vector<Merge> merges_;
  std::vector<float> partials_;
};

// The oracle: every KV row decoded with the reference dequantizers, a full
// score vector per query, two-pass softmax, double accumulation.
void attention_reference(const AttentionShape& shape, const KvLayout& layout, const uint8_t* k, const uint8_t* v,
                         const AttentionSeq* seqs, int n_seqs);

}  // namespace llmserve::kernels
