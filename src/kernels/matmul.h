#pragma once
// y = W x for a weight matrix in any supported GGUF type.
//
// Fast path: call prepare() once per weight matrix at load time. It repacks
// the rows into 16-row panels (see panel.h) that the kernels stream with no
// shuffling, and points `Matrix::packed` at the copy. matmul() also accepts
// an unprepared Matrix and packs each panel on the fly, which is correct but
// costs several times more CPU per weight byte (fine for tests and one-off
// calls, too slow for decode).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <utility>

#include "gguf/types.h"

namespace llmserve {
class Team;
class ThreadPool;
}

namespace llmserve::kernels {

struct MatmulKernels;  // panel.h

// Row-major weights as stored in GGUF: `rows` rows of `cols` elements each,
// every row `row_bytes` bytes (GGUF dims are {cols, rows}).
struct Matrix {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  // Set by prepare(): the same weights in panel layout, which matmul reads
  // instead of `data`. Must describe exactly these rows.
  const uint8_t* packed = nullptr;
};

// Owner of a prepared matrix's panels (64-byte aligned). Move-only.
class PackedWeights {
 public:
  PackedWeights() = default;
  explicit PackedWeights(size_t bytes);
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

// Load-time repack: sets w.packed and returns the storage it points into,
// which the caller keeps alive as long as w (or a copy of it) is used. The
// file's bytes are only read. Costs RAM equal to the weights' size (Q4_K
// 2.8% more, Q6_K 1%); the mapped file pages may then be dropped. For types
// without a panel kernel (Q4_1, Q5_0, Q5_1, Q5_K) it returns empty storage
// and leaves w.packed null: matmul dequantizes those on the fly.
// `pool` (optional) packs in parallel. Throws Error for an unsupported type
// or a shape that does not fit the type's block size.
PackedWeights prepare(Matrix& w, ThreadPool* pool = nullptr);

// The same for many matrices, in one allocation and in the given order:
// a model's weights in the order decode reads them, huge-page backed as a
// whole, where matrices under 2 MiB alone would sit in 4 KiB pages. Each
// matrix's panels start 64-byte aligned.
PackedWeights prepare_all(std::span<Matrix* const> ws, ThreadPool* pool = nullptr);

// y[t * rows + r] = sum_c W[r][c] * x[t * cols + c]  for t in [0, n_tokens).
// Quantized weights: x is rounded per 32 columns to int8 (Q8_0-like) and
// dotted in integers, as ggml does. The error is then at most
// sum_c |w_c| * (max |x| of c's 32-block) / 254, typically well under 1% of
// sum_c |w_c x_c|. Float weights: f32 arithmetic. The pool's threads share
// the rows in chunks of 16-row panels. x and y must not overlap. Throws
// Error for an unsupported type. The first n_prompt tokens may take the
// prompt path (see PromptPath below).
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, int64_t n_prompt = 0);

// Several matrices applied to the same input, e.g. the Q, K and V (or FFN
// gate and up) projections: x is quantized once, and one fork/join covers
// all of them, their panels shared among the threads. Every matrix must have
// the same number of columns; types may differ.
//   matmul({{&wq, q}, {&wk, k}, {&wv, v}}, x, n_tokens, pool);
struct MatmulTarget {
  const Matrix* w;
  float* y;  // as for matmul(): y[t * w->rows + r]
};
void matmul(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool,
            int64_t n_prompt = 0);
inline void matmul(std::initializer_list<MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool,
                   int64_t n_prompt = 0) {
  matmul(std::span<const MatmulTarget>(targets.begin(), targets.size()), x, n_tokens, pool, n_prompt);
}

// An activation block: 32 values x ~= d * qs, plus the sums the kernels need
// to undo the weights' code offsets (dsum = d * sum(qs); lo/hi: first/second
// 16 values; neg128_sum = -128 * sum(qs) and neg8_sum = -8 * sum(qs), the
// integer offsets of codes stored as code + 128 (Q8_0) and code + 8 (Q4_0),
// and neg32_sum_lo/hi = -32 * the halves' sums, Q6_K's (code + 32 per
// 16-value sub-block), which kernels can fold into their integer dot
// products).
// One cache line each, aligned: at malloc's alignment every block's loads
// touched two lines.
constexpr int kQBlock = 32;  // columns per activation block / code block
struct alignas(64) Q8Act {
  float d, dsum, dsum_lo, dsum_hi;
  int32_t neg128_sum, neg8_sum, neg32_sum_lo, neg32_sum_hi;
  int8_t qs[kQBlock];
};
static_assert(sizeof(Q8Act) == 64);

// Where a matmul's quantized activations sit: its n tokens in groups of
// kActGroup, block-major within a group, so token t's block b is
//   acts[act_index(t, b, n, nb)] = acts[(t / 16) 16 nb + b w + t % 16]
// with w the width of t's group (16, or what is left for the last one)
// and nb the blocks per token. A tile of a group's tokens then reads each
// block's activations as one run (1 KiB for 16 tokens), at addresses one
// pointer and constant offsets reach. Token after token, 4 KiB apart for
// 2048 columns, a 16-token tile's lines of one block all fell into one L1
// set of 12 ways, and its 16 pointers did not fit the registers. With
// fewer than 16 tokens (decode: one) there is one group, and a token's
// blocks are w apart.
constexpr int64_t kActGroup = 16;
inline int64_t act_group_width(int64_t t, int64_t n) {
  return std::min(kActGroup, n - t / kActGroup * kActGroup);
}
inline int64_t act_index(int64_t t, int64_t b, int64_t n, int64_t nb) {
  return t / kActGroup * kActGroup * nb + b * act_group_width(t, n) + t % kActGroup;
}

// On CPUs with AMX (cpu.h: use_amx()), quantized weights' matmuls of 64
// tokens or more (prefill, large batches) send every whole group of
// kActGroup tokens through AMX-INT8 tiles, which make the integer sums the
// VNNI kernels make, and then take their float steps: the same bits, so
// nothing else changes. f16 and bf16 weights have a prompt path (below).

// f16 and bf16 weights' prompt path: the first n_prompt tokens of a job
// (MatmulJob) may take one of their own, which trades the f32 path's bits
// for up to twice its arithmetic rate. A token's result still depends only
// on the token and on which path it took, never on the others in its
// batch; callers keep that path a property of the token (the model
// runner: prompt tokens on the prompt path, generated tokens on f32), so
// batched and alone give the same bits.
// The AMX-BF16 path's activations: 16 tokens x 32 values per tile, token
// t's block b at bf16_act_index(t, b, nb) (uint16_t values), its low part
// kBf16TileValues after; buffers hold whole groups.
constexpr int64_t kBf16TileValues = 16 * kQBlock;
inline int64_t bf16_act_index(int64_t t, int64_t b, int64_t nb) {
  return (t / 16 * nb + b) * 2 * kBf16TileValues + t % 16 * kQBlock;
}
enum class PromptPath {
  none,      // the other tokens' path (f32 FMAs for float weights)
  // AMX-BF16 tiles, where use_amx(): activations in two bf16 parts (high
  // and low), f16 weights in two parts too (panel.h: amx::bf16_weight_parts),
  // about 16 bits kept, the f32 path's accuracy.
  amx_bf16,
  // vpdpwssd, where the avx512 level is active and AMX is not used: weights
  // and activations as 13-bit codes per 32-column block (panel.h: namespace
  // int16), about 4e-6 of sum |w x| where rounding the activations to f16,
  // as llama.cpp does, gives 7e-6.
  int16,
};
// The path prompt tokens over weights of `type` take on this CPU now
// (none for f32 and quantized weights).
PromptPath prompt_path(gguf::TensorType type);
// Bytes a prompt path's activations take for n_tokens rows of cols values
// (either path's layout fits).
inline size_t prompt_acts_bytes(int64_t n_tokens, int64_t cols) {
  return static_cast<size_t>((n_tokens + 15) / 16 * 16 * cols * 2) * 2;
}

// A matmul call taken apart, for callers that run it on threads of their
// own (a ThreadPool::run_team step): the same work, validation and results
// as matmul(), which is this run on the pool. First prepare_row(t) for every
// token, then run_chunk(c) for every chunk (or run() as a team step); each
// may run on any thread.
class MatmulJob {
 public:
  static constexpr int kMaxTargets = 8;
  // Blocks of `acts` the job needs (0 when no weight is quantized).
  static int64_t acts_blocks(std::span<const MatmulTarget> targets, int64_t n_tokens);

  MatmulJob() = default;
  // Throws Error for unsupported types, mismatched shapes, more than
  // kMaxTargets targets, or a bad LLMSERVE_ISA / LLMSERVE_PREFETCH(_NTA) (the
  // job picks its kernels here, so no worker thread meets that first). x and
  // acts (acts_blocks() blocks) stay the caller's; nothing is copied or
  // allocated.
  // Tokens [0, n_prompt) take the prompt path (PromptPath) where there is
  // one and the targets are all f16 or all bf16 (of a multiple of 32
  // columns); prompt_acts then holds prompt_acts_bytes(n_prompt, cols)
  // bytes, 64-byte aligned. Elsewhere they take the path the other tokens
  // take.
  MatmulJob(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, Q8Act* acts,
            int64_t n_prompt = 0, uint8_t* prompt_acts = nullptr);
  MatmulJob(std::initializer_list<MatmulTarget> targets, const float* x, int64_t n_tokens, Q8Act* acts,
            int64_t n_prompt = 0, uint8_t* prompt_acts = nullptr)
      : MatmulJob(std::span<const MatmulTarget>(targets.begin(), targets.size()), x, n_tokens, acts, n_prompt,
                  prompt_acts) {}

  // Quantizes token t's row of x (to int8, or for the prompt path to its
  // parts or codes); nothing for float weights on the f32 path.
  void prepare_row(int64_t t) const;
  int64_t chunks() const { return n_runs_ * (prompt_blocks_ + token_blocks_); }
  void run_chunk(int64_t c) const;
  // Chunks [c0, c1): the same as run_chunk() on each, but one stream where
  // they read adjacent panels. Decode's chunks are single panels, so that
  // threads can share a matmul's last panels evenly; claimed in aligned
  // groups of tile_chunks() they read whole tiles of the packed weights
  // as one stream (Team::share_ranges).
  void run_chunks(int64_t c0, int64_t c1) const;
  int64_t tile_chunks() const;
  // Every chunk as one step of a ThreadPool::run_team job: the threads
  // claim them in tile_chunks() groups with Team::share_ranges.
  void run(Team& team) const;
  PromptPath prompt_path() const { return prompt_path_; }

 private:
  struct Target {
    const Matrix* w;
    float* y;
    int64_t first_run;
  };
  // The target run r belongs to, and the run's first panel.
  std::pair<const Target*, int64_t> locate(int64_t r) const;
  // Panels [p0, p1) of one target (within a run, or runs of one tile when
  // a run has one block of tokens) times block `block` of the tokens: sets
  // up a Run and calls the path it takes, one function per path (Run,
  // matmul.cpp).
  void run_panels(const Target* t, int64_t p0, int64_t p1, int64_t block) const;
  struct Run;

  Target targets_[kMaxTargets] = {};
  const MatmulKernels* kernels_ = nullptr;
  bool prefetch_ = false, nta_ = false;  // which of kernels_->panel
  int n_targets_ = 0;
  // Chunk c is run c / (prompt_blocks_ + token_blocks_) of chunk_panels_
  // panels times one block of tokens: the prompt path's tokens [0,
  // n_prompt_) in blocks of prompt_block_, then the others in blocks of
  // token_block_.
  int64_t n_runs_ = 0, chunk_panels_ = 0, token_block_ = 0, token_blocks_ = 0, cols_ = 0, n_tokens_ = 0;
  PromptPath prompt_path_ = PromptPath::none;
  int64_t n_prompt_ = 0, prompt_block_ = 0, prompt_blocks_ = 0;
  bool int8_tiles_ = false;  // quantized targets' whole groups take the AMX-INT8 tiles
  const float* x_ = nullptr;
  Q8Act* acts_ = nullptr;  // null: no target is quantized. The int8 tokens', from token n_prompt_ on
  uint8_t* prompt_acts_ = nullptr;
  // Tells one job from another for the panels a thread packed or widened
  // for its last chunk (run_chunk).
  uint64_t serial_ = 0;
  static std::atomic<uint64_t> next_serial_;
};


// The oracle: dequantize each row of `data` to f32, accumulate in double.
// Ignores `packed`. Slow.
void matmul_reference(const Matrix& w, const float* x, int64_t n_tokens, float* y);

}  // namespace llmserve::kernels
