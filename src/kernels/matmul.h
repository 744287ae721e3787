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
#include <memory>

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
// file's bytes are only read. Costs RAM equal to the weights' size (about
// 3% more for Q4_K); the mapped file pages may then be dropped. For types
// without a panel kernel (Q4_1, Q5_0, Q5_1, Q5_K) it returns empty storage
// and leaves w.packed null: matmul dequantizes those on the fly.
// `pool` (optional) packs in parallel. Throws Error for an unsupported type
// or a shape that does not fit the type's block size.
PackedWeights prepare(Matrix& w, ThreadPool* pool = nullptr);

// y[t * rows + r] = sum_c W[r][c] * x[t * cols + c]  for t in [0, n_tokens).
// Quantized weights: x is quantized per 32 columns to int8 (Q8_0-like) and
// dotted in integers, as ggml does; relative error vs the exact product is
// about 1e-2 of the row's |w|.|x| scale. Float weights: f32 arithmetic.
// Work is split by rows across `pool`. Throws Error for an unsupported type.
void matmul(const Matrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// The oracle: dequantize each row of `data` to f32, accumulate in double.
// Ignores `packed`. Slow.
void matmul_reference(const Matrix& w, const float* x, int64_t n_tokens, float* y);

}  // namespace llmserve::kernels
