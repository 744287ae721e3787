#include "engine/block_manager.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/error.h"

namespace llmserve::engine {

namespace {

// Primes from xxHash64, whose per-lane round and final avalanche this follows.
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kRootHash = 0x27D4EB2F165667C5ULL;  // the "parent" of a sequence's first block

void fail(const std::string& what) { throw Error("block manager: " + what); }

}  // namespace

uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens) {
  uint64_t h = parent_hash + kPrime3 * tokens.size();
  for (int32_t t : tokens) {
    h ^= std::rotl(static_cast<uint64_t>(static_cast<uint32_t>(t)) * kPrime2, 31) * kPrime1;
    h = std::rotl(h, 27) * kPrime1 + kPrime4;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

BlockManager::BlockManager(int num_blocks, int block_size, BlockHasher hasher)
    : block_size_(block_size), hasher_(hasher) {
  if (num_blocks <= 0 || block_size <= 0)
    fail("needs at least one block of at least one token (got " + std::to_string(num_blocks) + " blocks of " +
         std::to_string(block_size) + ")");
  blocks_.resize(static_cast<size_t>(num_blocks));
  tokens_.resize(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size));
  for (int b = 0; b < num_blocks; ++b) push_back(b);
}

std::span<const int32_t> BlockManager::tokens_of(int block) const {
  return std::span(tokens_).subspan(static_cast<size_t>(block) * static_cast<size_t>(block_size_),
                                    static_cast<size_t>(block_size_));
}

// Calls on_hit(block) for each block of the longest reusable prefix, in order.
template <class OnHit>
int BlockManager::match_prefix(std::span<const int32_t> tokens, OnHit&& on_hit) const {
  const size_t bs = static_cast<size_t>(block_size_);
  const size_t max_blocks = tokens.empty() ? 0 : (tokens.size() - 1) / bs;
  uint64_t hash = kRootHash;
  int parent = -1;
  size_t n = 0;
  for (; n < max_blocks; ++n) {
    const auto block_tokens = tokens.subspan(n * bs, bs);
    hash = hasher_(hash, block_tokens);
    const auto it = cached_.find(hash);
    if (it == cached_.end()) break;
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    const bool same_parent =
        b.parent == parent && (parent < 0 || b.parent_generation == blocks_[static_cast<size_t>(parent)].generation);
    if (!same_parent || !std::ranges::equal(block_tokens, tokens_of(it->second))) break;
    on_hit(it->second);
    parent = it->second;
  }
  return static_cast<int>(n);
}

// A prefill-only sequence computes every token: the cache has nothing for it.
std::span<const int32_t> BlockManager::reusable(const Sequence& seq) {
  return seq.prefill_only ? std::span<const int32_t>() : seq.all_tokens();
}

int BlockManager::cached_prefix_tokens(const Sequence& seq) const {
  return match_prefix(reusable(seq), [](int) {}) * block_size_;
}

bool BlockManager::can_allocate(const Sequence& seq) const {
  // Hits on blocks other sequences hold cost nothing; hits on free blocks
  // leave the free list just like fresh blocks do.
  int shared = 0;
  match_prefix(reusable(seq), [&](int b) { shared += blocks_[static_cast<size_t>(b)].ref_count > 0; });
  return blocks_for(seq.num_tokens()) - shared <= num_free_;
}

void BlockManager::allocate(Sequence& seq) {
  if (!seq.block_table.empty()) fail("sequence " + std::to_string(seq.id()) + " already holds blocks");
  if (!can_allocate(seq)) fail("not enough free blocks for sequence " + std::to_string(seq.id()));
  const int hits = match_prefix(reusable(seq), [&](int b) {
    acquire(b);
    seq.block_table.push_back(b);
  });
  while (static_cast<int>(seq.block_table.size()) < blocks_for(seq.num_tokens())) seq.block_table.push_back(take_fresh());
  seq.num_cached_tokens = hits * block_size_;
  queried_tokens_ += reusable(seq).size();
  hit_tokens_ += static_cast<uint64_t>(seq.num_cached_tokens);
}

// Blocks seq still needs for its uncomputed tokens, and whether the first of
// them lands in a block it shares (a fork's partial block).
BlockManager::Room BlockManager::room_needed(const Sequence& seq) const {
  const auto& table = seq.block_table;
  const int first = seq.num_computed_tokens;
  const size_t block = static_cast<size_t>(first / block_size_);
  const bool shared = first % block_size_ != 0 && block < table.size() &&
                      blocks_[static_cast<size_t>(table[block])].ref_count > 1;
  return {std::max(0, blocks_for(seq.num_tokens()) - static_cast<int>(table.size())), shared};
}

bool BlockManager::can_append(const Sequence& seq) const {
  const Room r = room_needed(seq);
  return r.fresh + r.copy <= num_free_;
}

std::optional<BlockCopy> BlockManager::append_slot(Sequence& seq) {
  if (!can_append(seq)) fail("no free block for sequence " + std::to_string(seq.id()) + "'s next tokens");
  const Room r = room_needed(seq);
  std::optional<BlockCopy> copy;
  if (r.copy) {
    // Shared and about to be written: the slot is in a partial block (a full
    // one is never written again), which only fork() shares.
    int& block = seq.block_table[static_cast<size_t>(seq.num_computed_tokens / block_size_)];
    copy = BlockCopy{block, take_fresh()};
    --blocks_[static_cast<size_t>(block)].ref_count;
    block = copy->dst;
  }
  for (int i = 0; i < r.fresh; ++i) seq.block_table.push_back(take_fresh());
  return copy;
}

void BlockManager::register_full_blocks(const Sequence& seq, int num_tokens) {
  const auto& table = seq.block_table;
  const size_t full = static_cast<size_t>(std::min(seq.num_computed_tokens, num_tokens) / block_size_);
  if (full > table.size()) fail("sequence " + std::to_string(seq.id()) + " computed more tokens than its blocks hold");
  // Registered blocks form a prefix of the table: step back to its end.
  size_t i = full;
  while (i > 0 && !blocks_[static_cast<size_t>(table[i - 1])].hashed) --i;
  for (; i < full; ++i) {
    const int id = table[i];
    const int parent = i > 0 ? table[i - 1] : -1;
    const Block* p = parent >= 0 ? &blocks_[static_cast<size_t>(parent)] : nullptr;
    const auto tokens = seq.all_tokens().subspan(i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    Block& b = blocks_[static_cast<size_t>(id)];
    b.hash = hasher_(p ? p->hash : kRootHash, tokens);
    b.parent = parent;
    b.parent_generation = p ? p->generation : 0;
    b.hashed = true;
    std::ranges::copy(tokens, tokens_.begin() + static_cast<long>(id) * block_size_);
    // The newest registration wins: its parent chain is the one in the index now.
    cached_[b.hash] = id;
  }
}

void BlockManager::truncate(Sequence& seq, int num_tokens) {
  auto& table = seq.block_table;
  const size_t keep = static_cast<size_t>(blocks_for(std::max(0, num_tokens)));
  while (table.size() > keep) {
    release(table.back());
    table.pop_back();
  }
  if (num_tokens % block_size_ == 0 || table.empty()) return;
  const int last = table.back();
  const Block& b = blocks_[static_cast<size_t>(last)];
  if (b.ref_count == 1 && b.hashed) forget(last);
}

void BlockManager::fork(const Sequence& parent, Sequence& child) {
  if (!child.block_table.empty()) fail("fork target " + std::to_string(child.id()) + " already holds blocks");
  child.block_table = parent.block_table;
  for (int b : child.block_table) acquire(b);
}

void BlockManager::free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release(*it);
  seq.block_table.clear();
}

bool BlockManager::findable(int block) const {
  const Block& b = blocks_[static_cast<size_t>(block)];
  if (!b.hashed) return false;
  const auto it = cached_.find(b.hash);
  return it != cached_.end() && it->second == block;
}

int BlockManager::take_fresh() {
  const int id = head_;
  if (id < 0) fail("out of blocks");
  unlink(id);
  forget(id);
  blocks_[static_cast<size_t>(id)].ref_count = 1;
  return id;
}

// The block's content is about to change: out of the prefix cache, and
// blocks registered after it no longer chain to it.
void BlockManager::forget(int block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  if (findable(block)) cached_.erase(b.hash);
  b.hashed = false;
  ++b.generation;
}

void BlockManager::acquire(int block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.ref_count++ == 0) unlink(block);
}

void BlockManager::release(int block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.ref_count <= 0) fail("block " + std::to_string(block) + " released more often than acquired");
  if (--b.ref_count > 0) return;
  // Blocks nobody can find again are reused before any cached one.
  if (findable(block))
    push_back(block);
  else
    push_front(block);
}

void BlockManager::unlink(int block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  (b.prev >= 0 ? blocks_[static_cast<size_t>(b.prev)].next : head_) = b.next;
  (b.next >= 0 ? blocks_[static_cast<size_t>(b.next)].prev : tail_) = b.prev;
  b.prev = b.next = -1;
  --num_free_;
}

void BlockManager::push_front(int block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  b.prev = -1;
  b.next = head_;
  (head_ >= 0 ? blocks_[static_cast<size_t>(head_)].prev : tail_) = block;
  head_ = block;
  ++num_free_;
}

void BlockManager::push_back(int block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  b.next = -1;
  b.prev = tail_;
  (tail_ >= 0 ? blocks_[static_cast<size_t>(tail_)].next : head_) = block;
  tail_ = block;
  ++num_free_;
}

void BlockManager::check_consistency() const {
  int listed = 0;
  for (int b = head_, prev = -1; b >= 0; prev = b, b = blocks_[static_cast<size_t>(b)].next) {
    if (++listed > num_blocks()) fail("free list has a cycle");
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (blk.prev != prev) fail("free list link of block " + std::to_string(b) + " is broken");
    if (blk.ref_count != 0) fail("block " + std::to_string(b) + " is on the free list with references");
  }
  if (listed != num_free_) fail("free list holds " + std::to_string(listed) + " blocks, counted " + std::to_string(num_free_));
  const auto unreferenced = std::ranges::count_if(blocks_, [](const Block& b) { return b.ref_count == 0; });
  if (unreferenced != num_free_) fail("blocks without references are missing from the free list");
  for (const auto& [hash, b] : cached_) {
    const Block& blk = blocks_[static_cast<size_t>(b)];
    if (!blk.hashed || blk.hash != hash) fail("hash index points to block " + std::to_string(b) + " with other content");
  }
}

}  // namespace llmserve::engine
