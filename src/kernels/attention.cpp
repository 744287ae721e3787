// attention.h: argument checks, work items (sequence x KV head x block of
// query rows) handed out longest first, and the reference.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/quant.h"
#include "kernels/attention_isa.h"
#include "kernels/isa_kernels.h"

namespace llmserve::kernels {

namespace {

void check(const AttentionShape& s, const KvLayout& l, const AttentionSeq* seqs, int n_seqs) {
  if (s.n_head <= 0 || s.n_head_kv <= 0 || s.head_dim <= 0 || s.n_head % s.n_head_kv != 0)
    throw Error("attention: invalid shape (n_head " + std::to_string(s.n_head) + ", n_head_kv " +
                std::to_string(s.n_head_kv) + ", head_dim " + std::to_string(s.head_dim) + ")");
  const bool type_ok = l.type == gguf::TensorType::F32 || l.type == gguf::TensorType::F16 ||
                       (l.type == gguf::TensorType::Q8_0 && l.kv_dim % 32 == 0);
  if (!type_ok) throw Error("attention: KV cache type must be f32, f16 or q8_0 (with kv_dim % 32 == 0)");
  if (l.kv_dim != s.n_head_kv * s.head_dim || l.block_size <= 0 || l.row_bytes != gguf::row_bytes(l.type, l.kv_dim))
    throw Error("attention: KV layout (kv_dim " + std::to_string(l.kv_dim) + ", block_size " +
                std::to_string(l.block_size) + ", row_bytes " + std::to_string(l.row_bytes) +
                ") does not match the shape");
  if (n_seqs < 0 || (n_seqs > 0 && !seqs)) throw Error("attention: no sequences");
  for (int i = 0; i < n_seqs; ++i) {
    const AttentionSeq& q = seqs[i];
    if (q.n_q < 0 || q.pos0 < 0) throw Error("attention: sequence " + std::to_string(i) + " has a negative size");
    if (q.n_q > 0 && (!q.q || !q.out || !q.block_table))
      throw Error("attention: sequence " + std::to_string(i) + " has a null buffer");
  }
}

void check_cache(const uint8_t* k, const uint8_t* v, const AttentionSeq* seqs, int n_seqs) {
  for (int i = 0; i < n_seqs; ++i)
    if (seqs[i].n_q > 0 && (!k || !v)) throw Error("attention: sequence " + std::to_string(i) + " has a null buffer");
}

struct alignas(64) CacheLine {
  float f[16];
};

}  // namespace

void AttentionJob::plan(const AttentionShape& shape, const KvLayout& layout, const AttentionSeq* seqs, int n_seqs,
                        int n_threads) {
  check(shape, layout, seqs, n_seqs);
  shape_ = shape;
  layout_ = layout;
  const int group = shape.n_head / shape.n_head_kv;
  // About 128 query rows per item: enough reuse of each converted key and
  // value block, and enough items to balance the threads in prefill.
  const int tokens_per_item = group >= 128 ? 1 : 128 / group;
  kernels_ = active_kernels().attention;
  const int lanes = kernels_->lanes;
  items_.clear();
  int item_heads = 1;
  for (int s = 0; s < n_seqs; ++s) {
    // A decode token whose query heads per KV head take the narrow or lone
    // path: one item takes all the KV heads, block by block (narrow_item,
    // lone_item), so each block's rows are read from memory together,
    // where an item per head read a 128-256 byte slice of every row of
    // the cache and came back for the next slice only with the next head.
    // Items are then split over their keys or their KV heads for the
    // threads (split_decode_items).
    if (seqs[s].n_q == 1 && group <= narrow_rows_max(lanes)) {
      items_.push_back({.seq = &seqs[s], .kv_head = 0, .t0 = 0, .t1 = 1, .n_heads = shape.n_head_kv});
      item_heads = shape.n_head_kv;
      continue;
    }
    for (int t0 = 0; t0 < seqs[s].n_q; t0 += tokens_per_item)
      for (int h = 0; h < shape.n_head_kv; ++h)
        items_.push_back({&seqs[s], h, t0, std::min(seqs[s].n_q, t0 + tokens_per_item)});
  }
  split_decode_items(n_threads, lanes);
  // Longest first (cost ~ rows x keys), so the last items to finish are short.
  auto cost = [](const AttentionItem& it) { return int64_t{it.t1 - it.t0} * it.n_heads * (keys_end(it) - it.k0); };
  std::stable_sort(items_.begin(), items_.end(), [&](const auto& a, const auto& b) { return cost(a) > cost(b); });
  scratch_floats_ = attention_scratch_floats(int64_t{group} * tokens_per_item, item_heads, shape.head_dim, lanes);
}

void AttentionJob::split_decode_items(int n_threads, int lanes) {
  // A decode token's keys are split into parts of about kPartKeys keys x
  // KV heads, a count that depends on its keys alone, never on the batch or
  // the threads: the token's output has the same bits in any step
  // (speculative decoding checks drafts against plain decoding's argmax).
  // Parts that size keep what each costs beyond its keys (its queries in,
  // its partial out, the merge) small. With fewer items than threads, items
  // are split over their KV heads too, which leaves the arithmetic as it
  // is: otherwise a lone decode token with few keys is one item, and the
  // other threads wait it out.
  constexpr int64_t kPartKeys = 1024;  // keys x KV heads per part
  merges_.clear();
  const int64_t n_items = static_cast<int64_t>(items_.size());
  auto parts_of = [&](const AttentionItem& it) {
    if (it.t1 - it.t0 != 1) return int64_t{1};
    const int64_t part_keys = std::max<int64_t>(lanes, kPartKeys / it.n_heads);
    return std::max<int64_t>(1, keys_end(it) / part_keys);
  };
  auto head_parts_of = [&](const AttentionItem& it) {
    if (it.t1 - it.t0 != 1 || n_items >= n_threads) return 1;
    return std::min(it.n_heads, static_cast<int>((n_threads + n_items - 1) / n_items));
  };
  // A part's partial: [rows][2 + head_dim] for its one token's rows.
  auto part_floats = [&](const AttentionItem& it) { return int64_t{item_heads(shape_, it)} * (2 + shape_.head_dim); };
  int64_t n_floats = 0;
  bool splits = false;
  for (const AttentionItem& it : items_) {
    const int64_t p = parts_of(it);
    if (p > 1) n_floats += p * part_floats(it);
    splits |= p > 1 || head_parts_of(it) > 1;
  }
  if (!splits) return;  // the items stay as they are, without a copy per step
  partials_.resize(static_cast<size_t>(n_floats));
  std::vector<AttentionItem> items;
  float* next = partials_.data();
  for (const AttentionItem& it : items_) {
    const int64_t parts = parts_of(it);
    if (parts == 1) {
      const int head_parts = head_parts_of(it);
      for (int p = 0; p < head_parts; ++p) {
        AttentionItem part = it;
        part.kv_head = it.kv_head + it.n_heads * p / head_parts;
        part.n_heads = it.kv_head + it.n_heads * (p + 1) / head_parts - part.kv_head;
        items.push_back(part);
      }
      continue;
    }
    merges_.push_back({it, next, static_cast<int>(parts)});
    const int64_t keys = keys_end(it);
    for (int64_t p = 0; p < parts; ++p) {
      AttentionItem part = it;
      // On whole key blocks of the kernels' width.
      part.k0 = static_cast<int>(keys * p / parts / lanes * lanes);
      part.k1 = p + 1 == parts ? static_cast<int>(keys) : static_cast<int>(keys * (p + 1) / parts / lanes * lanes);
      part.partial = next;
      next += part_floats(it);
      items.push_back(part);
    }
  }
  items_.swap(items);
}

void AttentionJob::run_merge(int64_t i) const {
  const Merge& m = merges_[i];
  const int rows = item_heads(shape_, m.item), hd = shape_.head_dim;
  const int64_t row_floats = 2 + hd, part_floats = rows * row_floats;
  for (int r = 0; r < rows; ++r) {
    float* out = m.item.seq->out + query_offset(shape_, m.item, r);
    const float* row = m.parts + r * row_floats;  // part p's: row + p * part_floats
    float mx = -INFINITY;
    for (int p = 0; p < m.n_parts; ++p) mx = std::max(mx, row[p * part_floats]);
    float l = 0;
    for (int d = 0; d < hd; ++d) out[d] = 0;
    for (int p = 0; p < m.n_parts; ++p) {
      const float* part = row + p * part_floats;
      const float w = std::exp(part[0] - mx);
      l += w * part[1];
      for (int d = 0; d < hd; ++d) out[d] += w * part[2 + d];
    }
    for (int d = 0; d < hd; ++d) out[d] /= l;
  }
}

void AttentionJob::run_item(int64_t i, const uint8_t* k, const uint8_t* v) const {
  thread_local std::vector<CacheLine> scratch;
  if (scratch.size() * 16 < static_cast<size_t>(scratch_floats_)) scratch.resize((scratch_floats_ + 15) / 16);
  kernels_->item({shape_, layout_, k, v}, items_[i], scratch.data()->f);
}

void attention(const AttentionShape& shape, const KvLayout& layout, const uint8_t* k, const uint8_t* v,
               const AttentionSeq* seqs, int n_seqs, ThreadPool& pool) {
  thread_local AttentionJob job;  // the caller's: workers use it through the reference
  AttentionJob& j = job;
  j.plan(shape, layout, seqs, n_seqs, pool.size());
  check_cache(k, v, seqs, n_seqs);
  pool.parallel_for(j.items(), [&](int64_t i) { j.run_item(i, k, v); });
  pool.parallel_for(j.merges(), [&](int64_t i) { j.run_merge(i); });
}

void attention_reference(const AttentionShape& shape, const KvLayout& layout, const uint8_t* k, const uint8_t* v,
                         const AttentionSeq* seqs, int n_seqs) {
  check(shape, layout, seqs, n_seqs);
  check_cache(k, v, seqs, n_seqs);
  const int group = shape.n_head / shape.n_head_kv, hd = shape.head_dim;
  const int64_t q_stride = int64_t{shape.n_head} * hd;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<float> krow(layout.kv_dim), vrow(layout.kv_dim);
  std::vector<double> scores, acc(hd);
  for (int s = 0; s < n_seqs; ++s) {
    const AttentionSeq& seq = seqs[s];
    auto row = [&](const uint8_t* base, int64_t pos, float* dst) {
      const int64_t block = seq.block_table[pos / layout.block_size];
      const uint8_t* src = base + (block * layout.block_size + pos % layout.block_size) * layout.row_bytes;
      gguf::dequantize_row(layout.type, src, dst, layout.kv_dim);
    };
    for (int t = 0; t < seq.n_q; ++t) {
      const int64_t n_keys = int64_t{seq.pos0} + t + 1;
      for (int h = 0; h < shape.n_head; ++h) {
        const float* q = seq.q + t * q_stride + int64_t{h} * hd;
        const int64_t off = int64_t{h / group} * hd;
        scores.assign(n_keys, 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j < n_keys; ++j) {
          row(k, j, krow.data());
          double dot = 0;
          for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * krow[off + d];
          scores[j] = dot * scale;
          mx = std::max(mx, scores[j]);
        }
        double sum = 0;
        for (auto& sc : scores) sum += (sc = std::exp(sc - mx));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < n_keys; ++j) {
          row(v, j, vrow.data());
          for (int d = 0; d < hd; ++d) acc[d] += scores[j] * vrow[off + d];
        }
        float* out = seq.out + t * q_stride + int64_t{h} * hd;
        for (int d = 0; d < hd; ++d) out[d] = static_cast<float>(acc[d] / sum);
      }
    }
  }
}

}  // namespace llmserve::kernels
