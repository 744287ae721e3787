#pragma once
// Accounting for the paged KV cache: which fixed-size blocks each sequence
// holds, reference counts for sharing, and automatic prefix caching. The KV
// memory lives elsewhere, indexed by block id.
//
// Prefix caching: a block whose KV is complete (full) is registered under a
// hash of its tokens chained with its parent block's hash, so the key stands
// for the whole prefix. A hit must also match the stored tokens and the exact
// parent block (same id, not reused since), so a hash collision can cost a
// miss but never a wrong KV. Freed blocks keep their content and stay
// findable until allocation reuses them: blocks nobody can find first, then
// the least recently freed.
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sequence.h"

namespace llmserve::engine {

using BlockHasher = uint64_t (*)(uint64_t parent_hash, std::span<const int32_t> tokens);
uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens);

// The caller copies block src's KV memory to block dst before the step runs.
struct BlockCopy {
  int src;
  int dst;
  bool operator==(const BlockCopy&) const = default;
};

class BlockManager {
 public:
  // hasher: tests pass a deliberately weak one to exercise the collision guard.
  BlockManager(int num_blocks, int block_size, BlockHasher hasher = hash_block);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_free_blocks() const { return num_free_; }
  int num_used_blocks() const { return num_blocks() - num_free_; }
  int ref_count(int block) const { return blocks_.at(static_cast<size_t>(block)).ref_count; }
  int blocks_for(int num_tokens) const { return num_tokens / block_size_ + (num_tokens % block_size_ != 0); }
  uint64_t prefix_queried_tokens() const { return queried_tokens_; }
  uint64_t prefix_hit_tokens() const { return hit_tokens_; }

  // Admission: blocks for all of seq's tokens, reusing the longest cached
  // prefix of full blocks (none for a prefill-only one). At most num_tokens - 1
  // tokens come from the cache, so the last one is computed and yields
  // logits. Sets num_cached_tokens.
  int cached_prefix_tokens(const Sequence& seq) const;  // what allocate() would reuse
  bool can_allocate(const Sequence& seq) const;
  void allocate(Sequence& seq);

  // Before a decode step: room for the KV of seq's uncomputed tokens (its
  // last sampled token and any draft tokens). When the first of those slots
  // is in a block shared with another sequence, seq gets a private copy.
  bool can_append(const Sequence& seq) const;
  std::optional<BlockCopy> append_slot(Sequence& seq);

  // After a step: makes seq's newly full blocks among its first num_tokens
  // tokens findable. The caller decides which tokens' KV a later prompt
  // would compute with the same bits (engine/scheduler.h).
  void register_full_blocks(const Sequence& seq, int num_tokens);

  // Keeps the blocks of seq's first num_tokens positions and releases the
  // rest. A kept partial block this sequence alone holds is taken out of
  // the prefix cache, since its tail will be written again; a shared one is
  // copied on the next append_slot().
  void truncate(Sequence& seq, int num_tokens);

  // child (holding no blocks) shares all of parent's blocks.
  void fork(const Sequence& parent, Sequence& child);

  // Releases seq's blocks, last first, so its prefix stays cached longest.
  void free(Sequence& seq);

  // Throws Error naming the first broken internal invariant (free list vs
  // reference counts, hash index vs blocks). For tests.
  void check_consistency() const;

 private:
  struct Room {
    int fresh;  // blocks to add at the end of the table
    bool copy;  // the first slot's block is shared: copy it first
  };
  Room room_needed(const Sequence& seq) const;

  struct Block {
    int ref_count = 0;
    bool hashed = false;  // full and computed: hash, parent and tokens are valid
    uint64_t hash = 0;
    int parent = -1;  // the block before it in the sequence that filled it
    uint32_t parent_generation = 0;
    uint32_t generation = 0;  // bumped whenever the block is reused for new content
    int prev = -1, next = -1;  // free list links, while ref_count == 0
  };

  static std::span<const int32_t> reusable(const Sequence& seq);  // the tokens the cache may supply
  template <class OnHit>
  int match_prefix(std::span<const int32_t> tokens, OnHit&& on_hit) const;
  std::span<const int32_t> tokens_of(int block) const;
  bool findable(int block) const;
  int take_fresh();
  void forget(int block);
  void acquire(int block);
  void release(int block);
  void unlink(int block);
  void push_front(int block);
  void push_back(int block);

  int block_size_;
  BlockHasher hasher_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;  // [block][block_size], valid while hashed
  std::unordered_map<uint64_t, int> cached_;  // hash -> the latest block registered under it
  int head_ = -1, tail_ = -1;  // free list: head is reused first
  int num_free_ = 0;
  uint64_t queried_tokens_ = 0, hit_tokens_ = 0;
};

}  // namespace llmserve::engine
