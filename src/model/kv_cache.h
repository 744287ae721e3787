#pragma once
// The KV pool: one reservation, made once, of n_blocks blocks of block_size
// token positions for every layer's K and V. Which block belongs to which
// sequence is the engine's business (engine/block_manager); this class only
// stores rows and copies blocks.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/types.h"
#include "kernels/attention.h"
#include "kernels/large_alloc.h"
#include "model/hparams.h"

namespace llmserve::model {

class KvCache {
 public:
  // type: F32, F16 or Q8_0 (Q8_0 needs kv_dim % 32 == 0). The pool reads
  // as zeros and takes memory only as its pages are first written, so a
  // large pool costs nothing until it is used. Throws Error.
  KvCache(const HParams& hp, int n_blocks, int block_size, gguf::TensorType type);

  static size_t bytes_per_block(const HParams& hp, int block_size, gguf::TensorType type);

  const kernels::KvLayout& layout() const { return layout_; }
  int n_blocks() const { return n_blocks_; }
  int block_size() const { return layout_.block_size; }
  size_t bytes() const { return bytes_; }

  const uint8_t* k(int layer) const { return base(layer, 0); }
  const uint8_t* v(int layer) const { return base(layer, 1); }

  // Stores row i of k_rows / v_rows ([n][kv_dim] f32) at slot slots[i]
  // (slot = physical block * block_size + offset in block).
  void store(int layer, const float* k_rows, const float* v_rows, const int32_t* slots, int n);

  // Copy-on-write support: block dst becomes a copy of block src in every layer.
  void copy_block(int src, int dst);

  // One block's K and V in every layer as bytes, layer by layer, K then V
  // (to move a sequence's KV to another pool of the same model and type).
  // Throws Error for a block outside the pool or a span not block_bytes() long.
  size_t block_bytes() const { return 2 * static_cast<size_t>(n_layer_) * plane_block_bytes(); }
  void export_block(int block, std::span<uint8_t> out) const;
  void import_block(int block, std::span<const uint8_t> in);

 private:
  size_t plane_block_bytes() const { return static_cast<size_t>(layout_.block_size) * layout_.row_bytes; }
  void check_block(int block, size_t bytes) const;
  uint8_t* base(int layer, int kv) const { return data_.get() + (static_cast<size_t>(layer) * 2 + kv) * plane_stride_; }

  kernels::KvLayout layout_;
  int n_layer_, n_blocks_;
  size_t plane_bytes_;   // one layer's K (or V): n_blocks * block_size * row_bytes
  size_t plane_stride_;  // plane_bytes_, rounded up to whole huge pages from one huge page on
  size_t bytes_;
  kernels::ZeroPages data_;
};

}  // namespace llmserve::model
