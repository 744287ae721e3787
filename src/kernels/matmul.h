#pragma once
// y = W x for a weight matrix in any supported GGUF type.
//
// Fast path: call prepare() once per weight matrix at load time. It repacks
// the rows into 16-row panels (see panel.h) that the kernels stream with no
// shuffling, and points `Matrix::packed` at the copy. matmul() also accepts
// an unprepared Matrix and packs each panel on the fly, which is correct but
// costs several times more CPU per weight byte (fine for tests and one-off
// calls, too slow for decode).
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>

#include "gguf/types.h"

namespace llmserve {
class ThreadPool;
}

namespace llmserve::kernels {

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
// Error for an unsupported type.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// Several matrices applied to the same input, e.g. the Q, K and V (or FFN
// gate and up) projections: x is quantized once, and one fork/join covers
// all of them, their panels shared among the threads. Every matrix must have
// the same number of columns; types may differ.
//   matmul({{&wq, q}, {&wk, k}, {&wv, v}}, x, n_tokens, pool);
struct MatmulTarget {
  const Matrix* w;
  float* y;  // as for matmul(): y[t * w->rows + r]
};
void matmul(std::span<const MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool);
inline void matmul(std::initializer_list<MatmulTarget> targets, const float* x, int64_t n_tokens, ThreadPool& pool) {
  matmul(std::span<const MatmulTarget>(targets.begin(), targets.size()), x, n_tokens, pool);
}

// The oracle: dequantize each row of `data` to f32, accumulate in double.
// Ignores `packed`. Slow.
void matmul_reference(const Matrix& w, const float* x, int64_t n_tokens, float* y);

}  // namespace llmserve::kernels
