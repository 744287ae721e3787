#pragma once
// The attention worker written once against a float-vector type VF (see
// simd_scalar.h) and instantiated per ISA; everything is a template on VF so
// instantiations compiled with different ISA flags never share a symbol.
//
// One work item = one KV head x a block of query tokens: the M = group x
// tokens query rows that read the same keys (on the narrow and lone paths
// below, a decode token's rows of several KV heads, AttentionItem::n_heads,
// taken head by head within each key block: see AttentionJob::plan). Keys
// go by blocks of N (the vector width), converted once per block to f32
// rows that all the item's rows read, with an online softmax (running max
// m and sum l per row).
// Three shapes:
// - M > N (prefill; M >= N on AVX-512), tile_item: rows by tiles of N, a
//   tile's rows in the lanes of a vector. S_j = Q_tile . k_j (one FMA per
//   dim, k_j[d] broadcast from the block's rows); the softmax lane by lane
//   over the block's keys; O_tile += P V_blk with O transposed ([dim][row])
//   and v_j[d] broadcast. Rows in lanes, not keys: with keys in lanes the
//   softmax's horizontal reductions and per-row branches outweighed QK^T.
// - 1 < M <= N (GQA decode; M < N on AVX-512, see item()), narrow_item:
//   keys in lanes and the rows in registers, each row's softmax step on its
//   own (row_softmax_step). f32 and f16 key rows go from the cache straight
//   into QK (qk_dots), value rows straight into P V (pv_rows): only Q8_0
//   rows are converted first.
// - M = 1 (decode without GQA), lone_item: the same per row, dotting and
//   accumulating straight from f32 and f16 cache rows (Q8_0 rows converted;
//   QK by qk_dots), one softmax step per chunk of key blocks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/attention_isa.h"

namespace llmserve::kernels::attention_impl {

// One cache row's slice [first, first + hd) as floats into dst[0..hdp),
// zero-padded. Q8_0 rows are 34-byte blocks of f16 scale + 32 int8; a head
// usually covers whole blocks (head_dim % 32 == 0), tiny models' heads may
// start mid-block.
template <class VF>
inline void q8_0_head(const uint8_t* row, int64_t first, int hd, float* dst, int64_t hdp) {
  for (int d = 0; d < hd;) {
    const int64_t e = first + d;
    const uint8_t* blk = row + e / 32 * 34;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    const float scale = VF::f16(h);
    const auto* qs = reinterpret_cast<const int8_t*>(blk + 2);
    if (e % 32 == 0 && hd - d >= 32) {
      for (int i = 0; i < 32; i += VF::N) (VF::load(qs + i) * VF::set1(scale)).store(dst + d + i);
      d += 32;
    } else {
      for (int64_t i = e % 32; i < 32 && d < hd; ++i, ++d) dst[d] = scale * static_cast<float>(qs[i]);
    }
  }
  for (int64_t d = hd; d < hdp; ++d) dst[d] = 0;
}

// Values [d, d + N) of a head of hd f32 (T = float) or f16 (T = uint16_t
// bits) values at p, as floats, zero past hd.
template <class VF, class T>
inline VF load_head(const T* p, int64_t d, int hd) {
  const int64_t lanes = hd - d;
  if (lanes >= VF::N) return VF::load(p + d);
  return lanes > 0 ? VF::load(p + d, static_cast<int>(lanes)) : VF::zero();
}

// A block of up to N cache rows (positions [pos, pos + n)): their byte
// offsets, the same in the K and the V cache, and those of the rows at the
// same slots one KV block later (-1 past the sequence's blocks), which
// load_rows and block_rows prefetch as they take a cache's rows: short
// slices a whole row apart, a pattern the hardware prefetchers follow
// poorly.
template <int N>
struct RowBlock {
  int64_t off[N], ahead[N];
  int n;
};

// The rows at [pos, pos + n), found through the sequence's block table.
// Decode does little per row, so the walk does no division or table lookup
// per row, and one walk serves both caches (a walk each was a large part
// of MHA decode attention's time). The next rows are prefetched as each is
// taken, not here: both caches' prefetches at once delay the key rows'
// loads behind the value rows'.
template <int N>
RowBlock<N> row_block(const AttentionCall& c, const AttentionSeq& seq, int64_t pos, int n) {
  const KvLayout& l = c.layout;
  const int64_t row_bytes = static_cast<int64_t>(l.row_bytes), block_bytes = l.block_size * row_bytes;
  const int64_t n_blocks = (seq.pos0 + seq.n_q + l.block_size - 1) / l.block_size;
  auto block_start = [&](int64_t b) { return b < n_blocks ? seq.block_table[b] * block_bytes : int64_t{-1}; };
  RowBlock<N> rb;
  rb.n = n;
  int64_t block = pos / l.block_size, slot = pos % l.block_size;
  int64_t here = block_start(block), next = block_start(block + 1);
  for (int j = 0; j < n; ++j) {
    rb.off[j] = here + slot * row_bytes;
    rb.ahead[j] = next < 0 ? -1 : next + slot * row_bytes;
    if (++slot == l.block_size) {
      slot = 0;
      here = next;
      next = block_start(++block + 1);
    }
  }
  return rb;
}

// Prefetches KV head `kv_head` of the rows one block after rb's in the
// cache at base.
template <int N>
void prefetch_ahead(const AttentionCall& c, const uint8_t* base, const RowBlock<N>& rb, int kv_head) {
  const int64_t row_bytes = static_cast<int64_t>(c.layout.row_bytes);
  // Where the head sits in a row (a hint: proportional).
  const int64_t head_bytes = c.shape.head_dim * row_bytes / c.layout.kv_dim, first = int64_t{kv_head} * head_bytes;
  for (int j = 0; j < rb.n; ++j)
    if (rb.ahead[j] >= 0)
      for (int64_t byte = 0; byte < head_bytes; byte += 64) __builtin_prefetch(base + rb.ahead[j] + first + byte);
}

// Pointers to KV head `kv_head` (elements from `first` on) of the n f32 (T =
// float) or f16 (T = uint16_t) rows at byte offsets off of a cache.
template <class T>
void head_pointers(const uint8_t* base, const int64_t* off, int n, int64_t first, const T** rows) {
  for (int j = 0; j < n; ++j) rows[j] = reinterpret_cast<const T*>(base + off[j]) + first;
}

// The n f32 or f16 rows at `rows` as floats into dst[j * hdp ..],
// zero-padded to hdp. Converted row by row inside the walk over the block
// table instead, GCC kept the walk's state on the stack around every row's
// loop, and decode attention spent about as long converting rows as
// computing (BM_AttentionDecodeF16).
template <class VF, class T>
void convert_rows(const T* const* rows, int n, int hd, float* dst, int64_t hdp) {
  if (hd % VF::N == 0) {
    for (int j = 0; j < n; ++j)
      for (int d = 0; d < hd; d += VF::N) VF::load(rows[j] + d).store(dst + j * hdp + d);
    return;
  }
  for (int j = 0; j < n; ++j)
    for (int64_t d = 0; d < hdp; d += VF::N) load_head<VF>(rows[j], d, hd).store(dst + j * hdp + d);
}

// Loads KV head `kv_head` of rb's rows of the cache at base as floats into
// dst[j * hdp ..], zero-padded to hdp (and prefetches the next block's).
template <class VF>
void load_rows(const AttentionCall& c, const uint8_t* base, const RowBlock<VF::N>& rb, int kv_head, float* dst,
               int64_t hdp) {
  prefetch_ahead(c, base, rb, kv_head);
  const int hd = c.shape.head_dim, n = rb.n;
  const int64_t* off = rb.off;
  const int64_t first = static_cast<int64_t>(kv_head) * hd;  // element index within a row
  switch (c.layout.type) {
    case gguf::TensorType::Q8_0:
      for (int j = 0; j < n; ++j) q8_0_head<VF>(base + off[j], first, hd, dst + j * hdp, hdp);
      break;
    case gguf::TensorType::F32: {
      const float* rows[VF::N];
      head_pointers(base, off, n, first, rows);
      convert_rows<VF>(rows, n, hd, dst, hdp);
      break;
    }
    default: {  // F16 (attention.cpp checks the type)
      const uint16_t* rows[VF::N];
      head_pointers(base, off, n, first, rows);
      convert_rows<VF>(rows, n, hd, dst, hdp);
    }
  }
}

// One step of qk_dots: the head's columns [d, d + N) (kWhole: all inside
// the head, else the tail, zero past it).
template <class VF, int R, class T, bool kWhole>
[[gnu::always_inline]] inline void qk_dot_step(const float* q, int64_t hdp, const T* const* keys, int64_t d, int hd,
                                               VF* acc) {
  constexpr int K = VF::N / R;
  VF qr[R];
  for (int r = 0; r < R; ++r) qr[r] = VF::load(q + r * hdp + d);
  for (int k = 0; k < K; ++k) {
    const VF kv = kWhole ? VF::load(keys[k] + d) : load_head<VF>(keys[k], d, hd);
    for (int r = 0; r < R; ++r) acc[r * K + k] = fma(qr[r], kv, acc[r * K + k]);
  }
}

// The scores of R query rows q, q + hdp, .. (s: [R][N]) against the N
// keys of a block (R divides N), as dot products along the head straight
// from the key rows (keys[j], f32 or f16), R rows x N/R keys at a time:
// each key vector is loaded (and converted from f16) once for all R rows,
// and VF::sum_each adds up the lanes of all N chains at once. Keys past
// the block's end must point at some row; their scores are masked later.
// Faster than a transposed key block with one broadcast query value per
// FMA, and (R = 1) than a reduction per key.
template <class VF, int R, class T>
void qk_dots(const float* q, int64_t hdp, const T* const* keys, int hd, float* s) {
  constexpr int N = VF::N, K = N / R;
  for (int k0 = 0; k0 < N; k0 += K) {
    VF acc[N];  // row r, key k0 + k at acc[r * K + k]
    for (VF& a : acc) a = VF::zero();
    int64_t d = 0;
    for (; d + N <= hd; d += N) qk_dot_step<VF, R, T, true>(q, hdp, keys + k0, d, hd, acc);
    if (d < hd) qk_dot_step<VF, R, T, false>(q, hdp, keys + k0, d, hd, acc);
    float sums[N];
    VF::sum_each(acc).store(sums);
    for (int r = 0; r < R; ++r) std::copy(sums + r * K, sums + (r + 1) * K, s + r * N + k0);
  }
}

// Query row i's result from its unnormalized output o ([hdp]), running max
// m and sum l: normalized into seq.out, or as they are into the item's
// partial, for AttentionJob::run_merge.
template <class VF>
void write_row(const AttentionCall& c, const AttentionItem& it, int64_t i, const float* o, float m, float l) {
  const int hd = c.shape.head_dim;
  if (it.partial) {
    float* p = it.partial + i * (2 + hd);
    p[0] = m;
    p[1] = l;
    std::copy(o, o + hd, p + 2);
    return;
  }
  const VF inv = VF::set1(1.0f / l);
  float* dst = it.seq->out + query_offset(c.shape, it, i);
  for (int64_t d = 0; d < hd; d += VF::N) {
    const VF x = VF::load(o + d) * inv;
    if (hd - d >= VF::N) x.store(dst + d);
    else x.store(dst + d, static_cast<int>(hd - d));
  }
}

// Pointers to KV head `kv_head` of rb's rows of the cache at base (and
// prefetches of the next block's): into the cache for f32 and f16 rows
// (T = float, uint16_t), into buf ([n][hdp], converted) for Q8_0 rows (T =
// float).
template <class VF, class T>
void block_rows(const AttentionCall& c, const uint8_t* base, const RowBlock<VF::N>& rb, int kv_head, float* buf,
                int64_t hdp, const T** rows) {
  if constexpr (std::is_same_v<T, float>) {
    if (c.layout.type == gguf::TensorType::Q8_0) {
      load_rows<VF>(c, base, rb, kv_head, buf, hdp);
      for (int j = 0; j < rb.n; ++j) rows[j] = buf + j * hdp;
      return;
    }
  }
  prefetch_ahead(c, base, rb, kv_head);
  head_pointers(base, rb.off, rb.n, static_cast<int64_t>(kv_head) * c.shape.head_dim, rows);
}

// dst[c * ds + r] = src[r * ss + c] for an N x N tile of floats.
template <class VF>
inline void transpose_tile(const float* src, int64_t ss, float* dst, int64_t ds) {
  VF rows[VF::N];
  for (int r = 0; r < VF::N; ++r) rows[r] = VF::load(src + r * ss);
  VF::transpose(rows, dst, ds);
}

// O[i..i+R)[c0 .. c0 + C N) += P[i..i+R)[0..nk) . V[0..nk)[same columns],
// value row j at rows[j] (block_rows: the cache row itself for f32 and f16,
// converted only for Q8_0), read once per key for all R rows, accumulated
// in registers across the keys: a store and reload of O per key would chain
// every key's FMAs through memory (store forwarding). kWhole: the columns
// are whole vectors of the head, loaded without load_head's branch (with
// it, GCC 12 kept the accumulators in memory: in lone_item, MHA decode
// spent a third of its time there).
template <class VF, int R, int C, bool kWhole, class T>
void pv_rows(float* o, int64_t hdp, const float* p, const T* const* rows, int64_t c0, int hd, int nk) {
  constexpr int N = VF::N;
  VF acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = VF::load(o + r * hdp + c * N);
  for (int j = 0; j < nk; ++j) {
    VF v[C];
    for (int c = 0; c < C; ++c)
      v[c] = kWhole ? VF::load(rows[j] + c0 + c * N) : load_head<VF>(rows[j], c0 + c * N, hd);
    for (int r = 0; r < R; ++r) {
      const VF pj = VF::set1(p[r * N + j]);
      for (int c = 0; c < C; ++c) acc[r][c] = fma(pj, v[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c].store(o + r * hdp + c * N);
}

// One row's online-softmax step over `width` scores s[0..width) (a multiple
// of N; keys in lanes): its first `visible` scores become probabilities
// (the rest 0), the running max m and sum l advance, and the row's output o
// ([hdp]) is rescaled when the max grew.
template <class VF>
void row_softmax_step(float* s, int visible, int width, float& m, float& l, float* o, int64_t hdp) {
  constexpr int N = VF::N;
  VF block_max = VF::set1(m);
  for (int j = 0; j < width; j += N) {
    const VF sc = keep_first(VF::load(s + j), visible - j, -INFINITY);
    sc.store(s + j);
    block_max = max(block_max, sc);
  }
  const float mx = block_max.reduce_max();
  VF sum = VF::zero();
  for (int j = 0; j < width; j += N) {
    const VF p = exp(VF::load(s + j) - VF::set1(mx));
    p.store(s + j);
    sum = sum + p;
  }
  if (mx > m) {
    const float corr = std::exp(m - mx);  // 0 while m is -inf; rare afterwards
    l *= corr;
    for (int64_t d = 0; d < hdp; d += VF::N) (VF::load(o + d) * VF::set1(corr)).store(o + d);
    m = mx;
  }
  l += sum.reduce_add();
}

// Lone query rows (decode without GQA: one per KV head), one for each of
// the item's n_heads KV heads, by chunks of kLoneChunk key blocks: each
// block's scores head by head (keys in lanes, s[j] = q . K_j), then each
// head's softmax step over the chunk, then o += p_j V_j block by block and
// head by head, the dot products and sums straight from the rows
// block_rows finds. So a block's rows are read (and the next block's
// prefetched) slice after slice along each row, where an item per head
// went down the whole cache once for each head (AttentionJob::plan). A
// softmax step per head and chunk, not per head and block: see
// kLoneChunk. One walk of the block table for both caches, qk_dots' one
// sum_each for a block's scores and P V's accumulators in registers
// (pv_rows) keep the work per key small.
template <class VF, class T>
void lone_item(const AttentionCall& c, const AttentionItem& it, float* scratch) {
  constexpr int N = VF::N, kChunk = kLoneChunk * N;
  const AttentionSeq& seq = *it.seq;
  const int hd = c.shape.head_dim, heads = it.n_heads;
  const int64_t hdp = (hd + N - 1) / N * N, width = heads * hdp;
  float* q = scratch;            // [heads][hdp] the queries, pre-scaled, zero-padded
  float* o = q + width;          // [heads][hdp] unnormalized outputs
  float* m = o + width;          // [heads] running max
  float* l = m + heads;          // [heads] running sum
  float* s = l + heads;          // [heads][kChunk] a chunk's scores, then probabilities
  float* buf = s + heads * kChunk;  // [N][hdp] Q8_0 rows as f32
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int h = 0; h < heads; ++h) {
    const float* src = seq.q + query_offset(c.shape, it, h);  // at position pos0 + t0
    for (int64_t d = 0; d < hdp; ++d) {
      q[h * hdp + d] = d < hd ? src[d] * scale : 0.0f;
      o[h * hdp + d] = 0;
    }
    m[h] = -INFINITY;
    l[h] = 0;
  }
  const int64_t kv_end = keys_end(it);
  for (int64_t c0 = it.k0; c0 < kv_end; c0 += kChunk) {
    const int keys = static_cast<int>(std::min<int64_t>(kChunk, kv_end - c0));
    const int blocks = (keys + N - 1) / N;
    RowBlock<N> rbs[kLoneChunk];
    for (int b = 0; b < blocks; ++b) {
      const int nk = std::min(N, keys - b * N);
      rbs[b] = row_block<N>(c, seq, c0 + b * N, nk);
      for (int h = 0; h < heads; ++h) {
        const float* qh = q + h * hdp;
        float* sb = s + h * kChunk + b * N;
        const T* rows[N];
        block_rows<VF>(c, c.k, rbs[b], it.kv_head + h, buf, hdp, rows);
        for (int j = nk; j < N; ++j) rows[j] = rows[0];
        qk_dots<VF, 1>(qh, hdp, rows, hd, sb);
      }
    }
    for (int h = 0; h < heads; ++h) row_softmax_step<VF>(s + h * kChunk, keys, blocks * N, m[h], l[h], o + h * hdp, hdp);
    for (int b = 0; b < blocks; ++b)
      for (int h = 0; h < heads; ++h) {
        float* oh = o + h * hdp;
        const float* p = s + h * kChunk + b * N;
        const int nk = rbs[b].n;
        const T* rows[N];
        block_rows<VF>(c, c.v, rbs[b], it.kv_head + h, buf, hdp, rows);
        constexpr int kVectors = 4;  // 64 columns on AVX-512: a common head_dim in one pass
        int64_t d = 0;
        for (; d + kVectors * N <= hd; d += kVectors * N) pv_rows<VF, 1, kVectors, true>(oh + d, hdp, p, rows, d, hd, nk);
        for (; d < hdp; d += N) pv_rows<VF, 1, 1, false>(oh + d, hdp, p, rows, d, hd, nk);
      }
  }
  for (int h = 0; h < heads; ++h) write_row<VF>(c, it, h, o + h * hdp, m[h], l[h]);
}

// s[j] = sum_d qt[d] k_j[d] for the N keys of a block (kb: [N][hdp], the
// key rows, each value broadcast), the lanes being a tile's rows (qt:
// [head_dim][N]). Keys past the block's end give garbage the causal mask
// replaces.
template <class VF>
[[gnu::always_inline]] inline void qk_lanes(const float* qt, const float* kb, int64_t hdp, int head_dim, VF* s) {
  constexpr int N = VF::N;
  for (int j = 0; j < N; ++j) s[j] = VF::zero();
  for (int d = 0; d < head_dim; ++d) {
    const VF q = VF::load(qt + d * N);
    for (int j = 0; j < N; ++j) s[j] = fma(q, VF::set1(kb[j * hdp + d]), s[j]);
  }
}

// A tile's transposed output (ot: [hdp][N]) scaled by corr when `rescale`,
// plus sum over the block's nk keys of p_j (pt: [N][N]) times v_j[d]
// (vb: [N][hdp]), N dims at a time in registers.
template <class VF>
void pv_lanes(float* ot, const float* pt, const float* vb, int64_t hdp, int nk, VF corr, bool rescale) {
  constexpr int N = VF::N;
  for (int64_t d0 = 0; d0 < hdp; d0 += N) {
    VF acc[N];
    for (int u = 0; u < N; ++u) acc[u] = VF::load(ot + (d0 + u) * N);
    if (rescale)
      for (int u = 0; u < N; ++u) acc[u] = acc[u] * corr;
    for (int j = 0; j < nk; ++j) {
      const VF p = VF::load(pt + j * N);
      for (int u = 0; u < N; ++u) acc[u] = fma(p, VF::set1(vb[j * hdp + d0 + u]), acc[u]);
    }
    for (int u = 0; u < N; ++u) acc[u].store(ot + (d0 + u) * N);
  }
}

// Tiles of N rows in lanes (prefill).
template <class VF>
void tile_item(const AttentionCall& c, const AttentionItem& it, float* scratch) {
  constexpr int N = VF::N;
  const AttentionSeq& seq = *it.seq;
  const int hd = c.shape.head_dim;
  const int group = c.shape.n_head / c.shape.n_head_kv;
  const int64_t hdp = (hd + N - 1) / N * N;
  const int64_t rows = int64_t{group} * (it.t1 - it.t0), tiles = (rows + N - 1) / N;
  const int64_t tile_floats = hdp * N;
  float* qt = scratch;                   // [tiles][hdp][N] queries, pre-scaled
  float* ot = qt + tiles * tile_floats;  // [tiles][hdp][N] unnormalized output
  float* m = ot + tiles * tile_floats;   // [tiles][N] running max
  float* l = m + tiles * N;              // [tiles][N] running sum
  float* last = l + tiles * N;           // [tiles][N] the last key position each row sees
  float* pt = last + tiles * N;          // [N][N] a tile's probabilities, key by key
  float* kb = pt + N * N;                // [N][hdp] key block as f32 rows
  float* vb = kb + N * hdp;              // [N][hdp] value block
  // Tokens ascend along a tile's lanes (query_offset). Padding lanes copy
  // the last row's position and see zero queries: finite, and never written
  // out. A tile's queries go through kb as rows, then transposed N x N at a
  // time.
  const VF scale = VF::set1(1.0f / std::sqrt(static_cast<float>(hd)));
  std::memset(ot, 0, sizeof(float) * tiles * tile_floats);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    for (int r = 0; r < N; ++r) {
      const int64_t i = tile * N + r;
      m[i] = -INFINITY;
      l[i] = 0;
      last[i] = static_cast<float>(seq.pos0 + it.t0 + std::min(i, rows - 1) / group);
      const float* q = i < rows ? seq.q + query_offset(c.shape, it, i) : nullptr;
      for (int64_t d = 0; d < hdp; d += N) (q ? load_head<VF>(q, d, hd) * scale : VF::zero()).store(kb + r * hdp + d);
    }
    for (int64_t d = 0; d < hdp; d += N) transpose_tile<VF>(kb + d, hdp, qt + tile * tile_floats + d * N, N);
  }

  const int64_t kv_end = keys_end(it);
  for (int64_t j0 = it.k0; j0 < kv_end; j0 += N) {
    const int nk = kv_end - j0 >= N ? N : static_cast<int>(kv_end - j0);
    const RowBlock<N> rb = row_block<N>(c, seq, j0, nk);
    load_rows<VF>(c, c.k, rb, it.kv_head, kb, hdp);
    load_rows<VF>(c, c.v, rb, it.kv_head, vb, hdp);
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const float* lt = last + tile * N;  // ascending
      if (lt[N - 1] < static_cast<float>(j0)) continue;  // no row of the tile sees this block
      VF s[N];
      qk_lanes<VF>(qt + tile * tile_floats, kb, hdp, hd, s);
      if (lt[0] < static_cast<float>(j0 + N - 1)) {  // causal: some row misses some key (or keys past nk)
        const VF seen = VF::load(lt);
        for (int j = 0; j < N; ++j)
          s[j] = select_ge(seen, VF::set1(static_cast<float>(j0 + j)), s[j], VF::set1(-INFINITY));
      }
      VF block_max = s[0];
      for (int j = 1; j < N; ++j) block_max = max(block_max, s[j]);
      const VF m_old = VF::load(m + tile * N), m_new = max(m_old, block_max);
      VF sum = VF::zero();
      for (int j = 0; j < N; ++j) {
        const VF p = exp(s[j] - m_new);  // 0 for masked keys
        p.store(pt + j * N);
        sum = sum + p;
      }
      const VF corr = exp(m_old - m_new);  // 0 while m_old is -inf
      fma(VF::load(l + tile * N), corr, sum).store(l + tile * N);
      m_new.store(m + tile * N);
      pv_lanes<VF>(ot + tile * tile_floats, pt, vb, hdp, nk, corr, (m_new - m_old).reduce_max() > 0);
    }
  }

  // Each tile's output back to rows (through kb).
  for (int64_t tile = 0; tile < tiles; ++tile) {
    for (int64_t d = 0; d < hdp; d += N) transpose_tile<VF>(ot + tile * tile_floats + d * N, N, kb + d, hdp);
    for (int r = 0; r < N && tile * N + r < rows; ++r)
      write_row<VF>(c, it, tile * N + r, kb + r * hdp, m[tile * N + r], l[tile * N + r]);
  }
}

// T: how block_rows hands out value rows (uint16_t for an f16 cache, float
// otherwise). The item's KV heads in turn within each key block, as
// lone_item takes them.
template <class VF, class T>
void narrow_item(const AttentionCall& c, const AttentionItem& it, float* scratch) {
  // P V by 8 rows x 2 vectors on AVX-512 (4 x 2 on AVX2): every row in one
  // pass over a value block, each value vector loaded, and converted from
  // f16, once. The former 4 rows x 4 vectors took two passes. Rows are
  // padded to a whole P V step; QK takes them kQkRows at a time up to the
  // last real row only (over a whole P V step of 8, 2-4 query heads per KV
  // head spent half or more of QK on padding rows).
  constexpr int N = VF::N, kQkRows = N == 16 ? 4 : 2, kPvRows = N == 16 ? 8 : 4, kPvCols = 2;
  const AttentionSeq& seq = *it.seq;
  const int hd = c.shape.head_dim, heads = it.n_heads;
  const int group = c.shape.n_head / c.shape.n_head_kv;
  const int64_t hdp = (hd + N - 1) / N * N;
  // Per KV head: `rows` query rows (token-major), padded.
  const int64_t rows = int64_t{group} * (it.t1 - it.t0), padded = (rows + kPvRows - 1) / kPvRows * kPvRows;
  const int64_t all = heads * padded;
  float* qs = scratch;        // [heads][padded][hdp] queries, pre-scaled
  float* o = qs + all * hdp;  // [heads][padded][hdp] unnormalized output
  float* m = o + all * hdp;   // [heads][padded] running max
  float* l = m + all;         // [heads][padded] running sum
  float* s = l + all;         // [padded][N] a head's scores, then probabilities
  float* kb = s + padded * N; // [N][hdp] a Q8_0 key block as f32 rows
  float* vb = kb + N * hdp;   // [N][hdp] a Q8_0 value block as f32 rows
  std::memset(qs, 0, sizeof(float) * 2 * all * hdp);
  std::fill(m, m + all, -INFINITY);
  std::fill(l, l + all, 0.0f);
  // The item's row index (query_offset, write_row) of head h's row i.
  auto item_row = [&](int h, int64_t i) { return i / group * group * heads + int64_t{h} * group + i % group; };
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int h = 0; h < heads; ++h)
    for (int64_t i = 0; i < rows; ++i) {
      const float* src = seq.q + query_offset(c.shape, it, item_row(h, i));
      for (int d = 0; d < hd; ++d) qs[(h * padded + i) * hdp + d] = src[d] * scale;
    }
  const int64_t kv_end = keys_end(it);
  for (int64_t j0 = it.k0; j0 < kv_end; j0 += N) {
    const int nk = kv_end - j0 >= N ? N : static_cast<int>(kv_end - j0);
    const RowBlock<N> rb = row_block<N>(c, seq, j0, nk);
    for (int h = 0; h < heads; ++h) {
      const int kv_head = it.kv_head + h;
      const float* qh = qs + h * padded * hdp;
      float* oh = o + h * padded * hdp;
      const T* keys[N];
      block_rows<VF>(c, c.k, rb, kv_head, kb, hdp, keys);
      for (int j = nk; j < N; ++j) keys[j] = keys[0];
      for (int64_t i = 0; i < rows; i += kQkRows) qk_dots<VF, kQkRows>(qh + i * hdp, hdp, keys, hd, s + i * N);
      for (int64_t i = 0; i < padded; ++i) {
        float* si = s + i * N;
        // Causal: keys up to the row's own position; padding rows see none.
        const int64_t visible = i < rows ? std::min<int64_t>(nk, seq.pos0 + it.t0 + i / group - j0 + 1) : 0;
        if (visible <= 0) {
          VF::zero().store(si);
          continue;
        }
        row_softmax_step<VF>(si, static_cast<int>(visible), N, m[h * padded + i], l[h * padded + i], oh + i * hdp, hdp);
      }
      const T* v_rows[N];
      block_rows<VF>(c, c.v, rb, kv_head, vb, hdp, v_rows);
      for (int64_t i = 0; i < padded; i += kPvRows) {
        int64_t c0 = 0;
        for (; c0 + kPvCols * N <= hd; c0 += kPvCols * N)
          pv_rows<VF, kPvRows, kPvCols, true>(oh + i * hdp + c0, hdp, s + i * N, v_rows, c0, hd, nk);
        for (; c0 < hdp; c0 += N) pv_rows<VF, kPvRows, 1, false>(oh + i * hdp + c0, hdp, s + i * N, v_rows, c0, hd, nk);
      }
    }
  }
  for (int h = 0; h < heads; ++h)
    for (int64_t i = 0; i < rows; ++i)
      write_row<VF>(c, it, item_row(h, i), o + (h * padded + i) * hdp, m[h * padded + i], l[h * padded + i]);
}

// Up to narrow_rows_max() rows per KV head take narrow_item (or
// lone_item), more tile_item. On AVX2 a full tile's worth (8 query heads
// per KV head) goes narrow too: its key and value rows straight from the
// cache beat converting them for the tile when the cache comes from
// memory. AVX-512, not measured, keeps full tiles on the tile path.
template <class VF>
void item(const AttentionCall& c, const AttentionItem& it, float* scratch) {
  const int64_t rows = int64_t{c.shape.n_head / c.shape.n_head_kv} * (it.t1 - it.t0);
  if (rows > narrow_rows_max(VF::N)) tile_item<VF>(c, it, scratch);
  else if (c.layout.type == gguf::TensorType::F16) {
    if (rows > 1) narrow_item<VF, uint16_t>(c, it, scratch);
    else lone_item<VF, uint16_t>(c, it, scratch);
  } else if (rows > 1) narrow_item<VF, float>(c, it, scratch);
  else lone_item<VF, float>(c, it, scratch);
}

template <class VF>
constexpr AttentionKernels attention_table() {
  return {VF::N, item<VF>};
}

}  // namespace llmserve::kernels::attention_impl
