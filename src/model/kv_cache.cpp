#include "model/kv_cache.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "gguf/quant.h"
#include "kernels/ops.h"

namespace llmserve::model {

namespace {

void check_type(const HParams& hp, gguf::TensorType type) {
  using T = gguf::TensorType;
  if (type != T::F32 && type != T::F16 && type != T::Q8_0)
    throw Error("KV cache type must be f32, f16 or q8_0");
  if (type == T::Q8_0 && hp.kv_dim() % gguf::QK8_0 != 0)
    throw Error("KV cache type q8_0 needs n_head_kv * head_dim divisible by 32; this model has " +
                std::to_string(hp.kv_dim()));
}

}  // namespace

size_t KvCache::bytes_per_block(const HParams& hp, int block_size, gguf::TensorType type) {
  check_type(hp, type);
  return 2 * static_cast<size_t>(hp.n_layer) * block_size * gguf::row_bytes(type, hp.kv_dim());
}

KvCache::KvCache(const HParams& hp, int n_blocks, int block_size, gguf::TensorType type)
    : n_layer_(hp.n_layer), n_blocks_(n_blocks) {
  check_type(hp, type);
  if (n_blocks < 1 || block_size < 1) throw Error("the KV cache needs at least one block of at least one token");
  layout_ = kernels::KvLayout{type, block_size, hp.kv_dim(), gguf::row_bytes(type, hp.kv_dim())};
  plane_bytes_ = static_cast<size_t>(n_blocks) * block_size * layout_.row_bytes;
  bytes_ = plane_bytes_ * 2 * n_layer_;
  // Huge pages where the OS gives them: attention reads a head's rows
  // scattered over every layer's plane, and with 4 KiB pages nearly every
  // row was a TLB miss. Each large plane starts on a huge page, so the
  // first blocks in use commit one huge page per plane, whatever the pool's
  // size (the padding is never written, so it costs address space only).
  // Fresh pages read as zeros: a block read before it is written holds
  // finite values.
  constexpr size_t huge = kernels::kHugePageBytes;
  plane_stride_ = plane_bytes_ >= huge ? (plane_bytes_ + huge - 1) / huge * huge : plane_bytes_;
  data_ = kernels::map_zero_pages(plane_stride_ * 2 * n_layer_);
  if (!data_) throw Error("cannot reserve the KV cache: " + std::to_string(plane_stride_ * 2 * n_layer_) + " bytes");
}

void KvCache::store(int layer, const float* k_rows, const float* v_rows, const int32_t* slots, int n) {
  // f16 (the default) through the vector conversion: gguf's scalar one was
  // about 1.4% of a small model's decode step (perf samples).
  auto put = [&](const float* src, uint8_t* dst) {
    if (layout_.type == gguf::TensorType::F16) kernels::to_f16(src, layout_.kv_dim, reinterpret_cast<uint16_t*>(dst));
    else gguf::quantize_row(layout_.type, src, dst, layout_.kv_dim);
  };
  uint8_t* k = base(layer, 0);
  uint8_t* v = base(layer, 1);
  for (int i = 0; i < n; ++i) {
    const size_t at = static_cast<size_t>(slots[i]) * layout_.row_bytes;
    put(k_rows + static_cast<size_t>(i) * layout_.kv_dim, k + at);
    put(v_rows + static_cast<size_t>(i) * layout_.kv_dim, v + at);
  }
}

void KvCache::copy_block(int src, int dst) {
  const size_t n = plane_block_bytes();
  for (int l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      uint8_t* plane = base(l, kv);
      std::memcpy(plane + dst * n, plane + src * n, n);
    }
}

void KvCache::check_block(int block, size_t bytes) const {
  if (block < 0 || block >= n_blocks_)
    throw Error("KV block " + std::to_string(block) + " is outside the pool of " + std::to_string(n_blocks_));
  if (bytes != block_bytes())
    throw Error("a KV block of this pool is " + std::to_string(block_bytes()) + " bytes, not " + std::to_string(bytes));
}

void KvCache::export_block(int block, std::span<uint8_t> out) const {
  check_block(block, out.size());
  const size_t n = plane_block_bytes();
  uint8_t* to = out.data();
  for (int l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv, to += n) std::memcpy(to, base(l, kv) + static_cast<size_t>(block) * n, n);
}

void KvCache::import_block(int block, std::span<const uint8_t> in) {
  check_block(block, in.size());
  const size_t n = plane_block_bytes();
  const uint8_t* from = in.data();
  for (int l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv, from += n) std::memcpy(base(l, kv) + static_cast<size_t>(block) * n, from, n);
}

}  // namespace llmserve::model
