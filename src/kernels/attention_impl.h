#pragma once
// The attention worker written once against a float-vector type VF (see
// simd_scalar.h) and instantiated per ISA; everything is a template on VF so
// instantiations compiled with different ISA flags never share a symbol.
//
// One work item = one KV head x a block of query tokens: the M = group x
// tokens query rows that read the same keys. Keys go by blocks of N (the
// vector width):
//   S[M][N]  = Q K_blk^T      K block converted to f32 rows and transposed
//                             by N x N register tiles, then one FMA per
//                             (row, dim) updates N scores;
//   online softmax per row    running max m and sum l; O rescaled when m grows;
//   O[M][hd] += P V_blk       V block converted once, 4-row register tiles.
// A lone query row (decode without GQA) over f32/f16 rows skips the
// conversions and the transpose: it dots and accumulates straight from the
// cache rows (lone_scores, lone_pv).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/attention_isa.h"

namespace llmserve::kernels::attention_impl {

template <class VF>
struct Layout {
  static constexpr int N = VF::N;
  static constexpr int kQkRows = 8;           // rows per QK^T register tile
  static constexpr int kPvRows = 4;           // rows per PV register tile
  static constexpr int kPvCols = N == 16 ? 4 : 2;  // vectors per PV tile row (fits the register file)
};

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

// The same for F32 and F16 rows.
template <class VF, class T>
inline void float_head(const uint8_t* row, int64_t first, int hd, float* dst, int64_t hdp) {
  const T* p = reinterpret_cast<const T*>(row) + first;
  for (int64_t d = 0; d < hdp; d += VF::N) load_head<VF>(p, d, hd).store(dst + d);
}

// Calls row_fn(j, row) for the cache rows at positions [pos, pos + n)
// (row: the start of the whole row; KV head `kv_head` sits at element
// kv_head * head_dim). The rows are found through the sequence's block
// table. Decode does little per row, so this walk does no division per row,
// and prefetches the head's rows one block ahead: they are short slices a
// whole row apart, a pattern the hardware prefetchers follow poorly.
template <class RowFn>
void for_each_row(const AttentionCall& c, const uint8_t* base, const AttentionSeq& seq, int64_t pos, int n,
                  int kv_head, RowFn row_fn) {
  const KvLayout& l = c.layout;
  const int hd = c.shape.head_dim;
  int64_t block = pos / l.block_size, slot = pos % l.block_size;
  // Where the head sits in a row, for the prefetches (a hint: proportional).
  const int64_t head_bytes = hd * static_cast<int64_t>(l.row_bytes) / l.kv_dim;
  const int64_t first_byte = int64_t{kv_head} * head_bytes;
  const int64_t n_blocks = (seq.pos0 + seq.n_q + l.block_size - 1) / l.block_size;
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = base + (seq.block_table[block] * l.block_size + slot) * static_cast<int64_t>(l.row_bytes);
    // The same slot and head one block later.
    if (block + 1 < n_blocks) {
      const uint8_t* ahead = base + (seq.block_table[block + 1] * l.block_size + slot) * static_cast<int64_t>(l.row_bytes);
      for (int64_t byte = 0; byte < head_bytes; byte += 64) __builtin_prefetch(ahead + first_byte + byte);
    }
    row_fn(j, row);
    if (++slot == l.block_size) {
      slot = 0;
      ++block;
    }
  }
}

// Loads KV head `kv_head` of the cache rows at positions [pos, pos + n) as
// floats into dst[j * hdp ..], zero-padded to hdp.
template <class VF>
void load_rows(const AttentionCall& c, const uint8_t* base, const AttentionSeq& seq, int64_t pos, int n, int kv_head,
               float* dst, int64_t hdp) {
  const int hd = c.shape.head_dim;
  const int64_t first = static_cast<int64_t>(kv_head) * hd;  // element index within a row
  switch (c.layout.type) {
    case gguf::TensorType::Q8_0:
      for_each_row(c, base, seq, pos, n, kv_head,
                   [&](int j, const uint8_t* row) { q8_0_head<VF>(row, first, hd, dst + j * hdp, hdp); });
      break;
    case gguf::TensorType::F32:
      for_each_row(c, base, seq, pos, n, kv_head,
                   [&](int j, const uint8_t* row) { float_head<VF, float>(row, first, hd, dst + j * hdp, hdp); });
      break;
    default:  // F16 (attention.cpp checks the type)
      for_each_row(c, base, seq, pos, n, kv_head,
                   [&](int j, const uint8_t* row) { float_head<VF, uint16_t>(row, first, hd, dst + j * hdp, hdp); });
  }
}

// s[r] = q . K_r for R rows at once: R independent FMA chains and
// reductions in flight instead of one row's whole latency at a time.
template <class VF, int R, class T>
void dot_rows(const T* const* rows, const float* q, int hd, float* s) {
  VF acc[R];
  for (int r = 0; r < R; ++r) acc[r] = VF::zero();
  for (int d = 0; d < hd; d += VF::N) {
    const VF qd = VF::load(q + d);
    for (int r = 0; r < R; ++r) acc[r] = fma(qd, load_head<VF>(rows[r], d, hd), acc[r]);
  }
  for (int r = 0; r < R; ++r) s[r] = acc[r].reduce_add();
}

// Pointers to KV head `kv_head` of n <= VF::N rows (one key block).
template <class VF, class T>
void head_rows(const AttentionCall& c, const uint8_t* base, const AttentionSeq& seq, int64_t pos, int n, int kv_head,
               const T** rows) {
  const int64_t first = static_cast<int64_t>(kv_head) * c.shape.head_dim;
  for_each_row(c, base, seq, pos, n, kv_head,
               [&](int j, const uint8_t* row) { rows[j] = reinterpret_cast<const T*>(row) + first; });
}

// A lone query row (decode without GQA) reads each key and value once, so
// with float rows it dots and accumulates straight from the cache instead
// of converting a block into f32 rows and transposing it:
//   s[j] = q . K_j for the block's keys;  o += p_j V_j.
template <class VF, class T>
void lone_scores(const AttentionCall& c, const AttentionSeq& seq, int64_t pos, int n, int kv_head, const float* q,
                 float* s) {
  const T* rows[VF::N];
  head_rows<VF>(c, c.k, seq, pos, n, kv_head, rows);
  constexpr int kRows = 4;
  int j = 0;
  for (; j + kRows <= n; j += kRows) dot_rows<VF, kRows>(rows + j, q, c.shape.head_dim, s + j);
  for (; j < n; ++j) dot_rows<VF, 1>(rows + j, q, c.shape.head_dim, s + j);
}

// o[d, d + V N) += sum_j p[j] V_j[d, ..), accumulated in registers across
// the rows: a store and reload of o per row would chain every row's FMAs
// through memory (store forwarding), the bottleneck of decode attention.
template <class VF, int V, class T>
void pv_columns(const T* const* rows, int n, const float* p, int64_t d, int hd, float* o) {
  VF acc[V];
  for (int u = 0; u < V; ++u) acc[u] = VF::load(o + d + u * VF::N);
  for (int j = 0; j < n; ++j) {
    const VF pj = VF::set1(p[j]);
    for (int u = 0; u < V; ++u) acc[u] = fma(pj, load_head<VF>(rows[j], d + u * VF::N, hd), acc[u]);
  }
  for (int u = 0; u < V; ++u) acc[u].store(o + d + u * VF::N);
}

// n <= VF::N rows (one key block).
template <class VF, class T>
void lone_pv(const AttentionCall& c, const AttentionSeq& seq, int64_t pos, int n, int kv_head, const float* p,
             float* o) {
  const int hd = c.shape.head_dim;
  const T* rows[VF::N];
  head_rows<VF>(c, c.v, seq, pos, n, kv_head, rows);
  constexpr int kVectors = 4;  // 64 columns on AVX-512: a common head_dim in one pass
  int64_t d = 0;
  for (; d + kVectors * VF::N <= hd; d += kVectors * VF::N) pv_columns<VF, kVectors>(rows, n, p, d, hd, o);
  for (; d < hd; d += VF::N) pv_columns<VF, 1>(rows, n, p, d, hd, o);
}

// S[i..i+R) = Qs[i..i+R) . KT  (one vector of N scores per row).
template <class VF, int R>
void qk_tile(const float* qs, int64_t hdp, const float* kt, int head_dim, float* s) {
  constexpr int N = VF::N;
  VF acc[R];
  for (auto& v : acc) v = VF::zero();
  for (int d = 0; d < head_dim; ++d) {
    const VF k = VF::load(kt + d * N);
    for (int r = 0; r < R; ++r) acc[r] = fma(VF::set1(qs[r * hdp + d]), k, acc[r]);
  }
  for (int r = 0; r < R; ++r) acc[r].store(s + r * N);
}

// O[i..i+R)[c0 .. c0 + C N) += P[i..i+R)[0..nk) . Vb[0..nk)[same columns].
template <class VF, int R, int C>
void pv_tile(float* o, int64_t hdp, const float* p, const float* vb, int nk) {
  constexpr int N = VF::N;
  VF acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = VF::load(o + r * hdp + c * N);
  for (int j = 0; j < nk; ++j) {
    VF v[C];
    for (int c = 0; c < C; ++c) v[c] = VF::load(vb + j * hdp + c * N);
    for (int r = 0; r < R; ++r) {
      const VF pj = VF::set1(p[r * N + j]);
      for (int c = 0; c < C; ++c) acc[r][c] = fma(pj, v[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c].store(o + r * hdp + c * N);
}

// pv_tile over all hdp columns of R rows: wide tiles, then single vectors.
template <class VF, int R>
void pv_rows_tile(float* o, int64_t hdp, const float* p, const float* vb, int nk) {
  constexpr int N = VF::N, C = Layout<VF>::kPvCols;
  int64_t c0 = 0;
  for (; c0 + C * N <= hdp; c0 += C * N) pv_tile<VF, R, C>(o + c0, hdp, p, vb + c0, nk);
  for (; c0 < hdp; c0 += N) pv_tile<VF, R, 1>(o + c0, hdp, p, vb + c0, nk);
}

template <class VF>
void item(const AttentionCall& c, const AttentionItem& it, float* scratch) {
  constexpr int N = VF::N;
  using L = Layout<VF>;
  const AttentionSeq& seq = *it.seq;
  const int kv_head = it.kv_head;
  const int64_t t0 = it.t0, t1 = it.t1, pos0 = seq.pos0;
  const int head_dim = c.shape.head_dim;
  const int64_t q_stride = static_cast<int64_t>(c.shape.n_head) * head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int group = c.shape.n_head / c.shape.n_head_kv;
  const int64_t rows = group * (t1 - t0);
  // Rows go in tiles of 8 (QK^T) and 4 (PV); a lone row, decode without
  // GQA, gets tiles of one instead of computing 7 rows of padding.
  const bool lone = rows == 1;
  const int qk_rows = lone ? 1 : L::kQkRows, pv_rows = lone ? 1 : L::kPvRows;
  const int64_t padded = lone ? 1 : (rows + 7) / 8 * 8;
  const int64_t hdp = (head_dim + N - 1) / N * N;
  float* qs = scratch;             // [padded][hdp] queries, pre-scaled
  float* o = qs + padded * hdp;    // [padded][hdp] unnormalized output
  float* s = o + padded * hdp;     // [padded][N] scores, then probabilities
  float* m = s + padded * N;       // [padded] running max
  float* l = m + padded;           // [padded] running sum
  float* kb = l + padded;          // [N][hdp] key block as f32 rows
  float* kt = kb + N * hdp;        // [hdp][N] the same, transposed
  float* vb = kt + hdp * N;        // [N][hdp] value block as f32 rows

  std::memset(qs, 0, sizeof(float) * padded * hdp);
  std::memset(o, 0, sizeof(float) * padded * hdp);
  for (int64_t i = 0; i < padded; ++i) {
    m[i] = -INFINITY;
    l[i] = 0;
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = seq.q + (t0 + i / group) * q_stride + (static_cast<int64_t>(kv_head) * group + i % group) * head_dim;
    for (int d = 0; d < head_dim; ++d) qs[i * hdp + d] = src[d] * scale;
  }

  // A lone row over float rows reads the cache directly (lone_scores).
  const bool direct = lone && c.layout.type != gguf::TensorType::Q8_0;
  const bool f16 = c.layout.type == gguf::TensorType::F16;
  const int64_t kv_end = pos0 + t1;
  for (int64_t j0 = 0; j0 < kv_end; j0 += N) {
    const int nk = kv_end - j0 >= N ? N : static_cast<int>(kv_end - j0);
    // Rows before `first` (tokens earlier than j0) see no key of this block.
    const int64_t first_token = j0 - pos0 - t0;
    const int64_t first = first_token > 0 ? first_token * group : 0;
    const int64_t tile0 = first / qk_rows * qk_rows;
    if (direct) {
      if (f16) lone_scores<VF, uint16_t>(c, seq, j0, nk, kv_head, qs, s);
      else lone_scores<VF, float>(c, seq, j0, nk, kv_head, qs, s);
    } else {
      load_rows<VF>(c, c.k, seq, j0, nk, kv_head, kb, hdp);
      if (nk < N) std::memset(kb + nk * hdp, 0, sizeof(float) * (N - nk) * hdp);
      for (int64_t d = 0; d < hdp; d += N) VF::transpose(kb + d, hdp, kt + d * N, N);
      for (int64_t i = tile0; i < padded; i += qk_rows) {
        if (lone) qk_tile<VF, 1>(qs + i * hdp, hdp, kt, head_dim, s + i * N);
        else qk_tile<VF, L::kQkRows>(qs + i * hdp, hdp, kt, head_dim, s + i * N);
      }
    }
    for (int64_t i = tile0; i < padded; ++i) {
      float* si = s + i * N;
      if (i < first || i >= rows) {
        VF::zero().store(si);
        continue;
      }
      const int64_t last_key = pos0 + t0 + i / group;  // causal: keys <= this position
      const int visible = last_key - j0 + 1 >= nk ? nk : static_cast<int>(last_key - j0 + 1);
      const VF sc = keep_first(VF::load(si), visible, -INFINITY);
      const float block_max = sc.reduce_max();
      const float mx = block_max > m[i] ? block_max : m[i];
      const VF p = exp(sc - VF::set1(mx));
      p.store(si);
      if (mx > m[i]) {
        const float corr = std::exp(m[i] - mx);  // 0 while m is -inf; rare afterwards
        l[i] *= corr;
        const VF rescale = VF::set1(corr);
        for (int64_t d = 0; d < hdp; d += N) (VF::load(o + i * hdp + d) * rescale).store(o + i * hdp + d);
        m[i] = mx;
      }
      l[i] += p.reduce_add();
    }
    if (direct) {
      if (f16) lone_pv<VF, uint16_t>(c, seq, j0, nk, kv_head, s, o);
      else lone_pv<VF, float>(c, seq, j0, nk, kv_head, s, o);
      continue;
    }
    load_rows<VF>(c, c.v, seq, j0, nk, kv_head, vb, hdp);
    const int64_t pv0 = first / pv_rows * pv_rows;
    for (int64_t i = pv0; i < padded; i += pv_rows) {
      if (lone) pv_rows_tile<VF, 1>(o + i * hdp, hdp, s + i * N, vb, nk);
      else pv_rows_tile<VF, L::kPvRows>(o + i * hdp, hdp, s + i * N, vb, nk);
    }
  }

  for (int64_t i = 0; i < rows; ++i) {
    float* dst = seq.out + (t0 + i / group) * q_stride + (static_cast<int64_t>(kv_head) * group + i % group) * head_dim;
    const float inv = 1.0f / l[i];
    for (int d = 0; d < head_dim; ++d) dst[d] = o[i * hdp + d] * inv;
  }
}

template <class VF>
constexpr AttentionKernels attention_table() {
  return {VF::N, item<VF>};
}

}  // namespace llmserve::kernels::attention_impl
