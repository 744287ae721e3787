#include "model/kv_sizing.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "model/kv_cache.h"

namespace llmserve::model {

namespace {

constexpr uint64_t kMaxBlocks = uint64_t{1} << 30;

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// The number after `key` in a file of "key value" lines; 0 when absent.
uint64_t read_field(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  uint64_t v = 0;
  while (in >> k) {
    if (k == key && in >> v) return v;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// A cgroup v2 file holding one number, or "max"; `otherwise` when absent or "max".
size_t read_cgroup_bytes(const char* path, size_t otherwise) {
  std::ifstream in(path);
  uint64_t v = 0;
  return in >> v ? static_cast<size_t>(v) : otherwise;
}

}  // namespace

KvPoolSize size_kv_pool(const HParams& hp, const KvPoolRequest& r, size_t available_bytes) {
  if (r.block_size < 1) throw Error("the KV block size must be at least one token");
  KvPoolSize s;
  s.kv_type = r.kv_type;
  s.block_size = r.block_size;
  s.bytes_per_token = KvCache::bytes_per_block(hp, 1, r.kv_type);
  const size_t block_bytes = s.bytes_per_token * static_cast<size_t>(r.block_size);
  const auto blocks_in = [&](size_t bytes) { return std::min<uint64_t>(bytes / block_bytes, kMaxBlocks); };

  uint64_t blocks = 0;
  if (r.kv_blocks > 0) {
    blocks = static_cast<uint64_t>(r.kv_blocks);
    s.reason = "--kv-blocks";
  } else if (r.kv_bytes > 0) {
    blocks = blocks_in(r.kv_bytes);
    if (blocks == 0)
      throw Error("the KV memory budget (--kv-mem " + mib(r.kv_bytes) + ") holds no block of " +
                  std::to_string(r.block_size) + " tokens; one block needs " + std::to_string(block_bytes) + " bytes");
    s.reason = "--kv-mem";
  } else {
    if (r.max_context < 1 || r.max_seqs < 1) throw Error("sizing the KV pool needs a context and a sequence count of at least 1");
    const uint64_t per_seq = (static_cast<uint64_t>(r.max_context) + r.block_size - 1) / r.block_size;
    const uint64_t wanted = std::min(per_seq * static_cast<uint64_t>(r.max_seqs), kMaxBlocks);
    const uint64_t cap = blocks_in(available_bytes / 100 * kKvMemoryPercent + available_bytes % 100 * kKvMemoryPercent / 100);
    const std::string context = "context " + std::to_string(r.max_context);
    if (wanted <= cap) {
      blocks = wanted;
      s.reason = context + " × " + std::to_string(r.max_seqs) + " seqs";
    } else if (per_seq <= cap) {
      blocks = cap;
      s.reason = "capped at " + std::to_string(kKvMemoryPercent) + "% of available memory (" + mib(available_bytes) + ")";
    } else if (per_seq * block_bytes <= available_bytes) {
      blocks = per_seq;
      s.reason = "one sequence of " + context + ", over " + std::to_string(kKvMemoryPercent) + "% of available memory";
    } else {
      throw Error("the KV cache for one sequence of " + context + " needs " + mib(per_seq * block_bytes) + "; " +
                  mib(available_bytes) + " of memory is available: lower --ctx, use --kv-type q8_0, or set --kv-mem");
    }
  }
  s.blocks = static_cast<int>(blocks);
  s.bytes = static_cast<size_t>(blocks) * block_bytes;
  return s;
}

size_t available_memory_bytes() {
  const uint64_t mem_kib = read_field("/proc/meminfo", "MemAvailable:");
  size_t available = mem_kib > 0 ? static_cast<size_t>(mem_kib) * 1024 : std::numeric_limits<size_t>::max();
  const size_t limit = read_cgroup_bytes("/sys/fs/cgroup/memory.max", std::numeric_limits<size_t>::max());
  const size_t used = read_cgroup_bytes("/sys/fs/cgroup/memory.current", 0);
  return std::min(available, used < limit ? limit - used : 0);
}

std::string describe(const KvPoolSize& s) {
  return std::string(gguf::type_info(s.kv_type)->name) + ", " + std::to_string(s.bytes_per_token) + " bytes/token, " +
         std::to_string(s.blocks) + " blocks × " + std::to_string(s.block_size) + " = " + std::to_string(s.tokens()) +
         " tokens, " + mib(s.bytes) + " (" + s.reason + ")";
}

}  // namespace llmserve::model
