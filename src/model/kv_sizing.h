#pragma once
// How big the KV pool is. By default it holds what the engine can use at
// once, every running sequence at full context (max_context × max_seqs
// tokens), capped at kKvMemoryPercent of the memory available once the
// weights are loaded, and never less than one full-context sequence. An
// explicit budget (--kv-mem) or block count (--kv-blocks) overrides it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/types.h"
#include "model/hparams.h"

namespace llmserve::model {

inline constexpr int kKvMemoryPercent = 50;

struct KvPoolRequest {
  int max_context = 0;  // tokens per sequence
  int max_seqs = 1;     // sequences running at once
  int block_size = 16;
  gguf::TensorType kv_type = gguf::TensorType::F16;
  size_t kv_bytes = 0;  // explicit budget (--kv-mem); 0: sized from the model
  int kv_blocks = 0;    // exact block count (--kv-blocks); overrides kv_bytes
};

struct KvPoolSize {
  gguf::TensorType kv_type = gguf::TensorType::F16;
  int blocks = 0;
  int block_size = 0;
  size_t bytes_per_token = 0;  // every layer's K and V at the KV type
  size_t bytes = 0;            // blocks × block_size × bytes_per_token
  std::string reason;          // why this size, for the start-up line

  int64_t tokens() const { return int64_t{blocks} * block_size; }
};

// available_bytes: memory the pool may come out of (available_memory_bytes()
// after the weights are loaded). Throws Error when no block fits the budget,
// or when one full-context sequence needs more than available_bytes.
KvPoolSize size_kv_pool(const HParams& hp, const KvPoolRequest& request, size_t available_bytes);

// MemAvailable from /proc/meminfo, lowered to the cgroup's memory.max less
// its memory.current where that is smaller; SIZE_MAX where neither is known.
size_t available_memory_bytes();

// "f16, 22528 bytes/token, 8192 blocks × 16 = 131072 tokens, 2816.0 MiB (context 2048 × 64 seqs)"
std::string describe(const KvPoolSize& size);

}  // namespace llmserve::model
