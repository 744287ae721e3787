#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"

namespace llmserve::engine {
namespace {

std::vector<int32_t> iota(int32_t from, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Sequence make(SeqId id, std::vector<int32_t> tokens) { return Sequence(id, std::move(tokens), 8); }

// As if a forward pass had filled the KV of every token; registers the
// prompt's blocks, or with `generated` every full block.
void compute_all(BlockManager& bm, Sequence& s, bool generated = false) {
  s.num_computed_tokens = s.num_tokens();
  bm.register_full_blocks(s, generated ? s.num_tokens() : s.num_prompt_tokens());
}

void expect_all_free(const BlockManager& bm) {
  bm.check_consistency();
  EXPECT_EQ(bm.num_free_blocks(), bm.num_blocks());
  for (int b = 0; b < bm.num_blocks(); ++b) EXPECT_EQ(bm.ref_count(b), 0) << "block " << b;
}

TEST(BlockManager, AllocatesEnoughBlocksForEveryToken) {
  BlockManager bm(8, 4);
  Sequence s = make(1, iota(0, 9));
  ASSERT_TRUE(bm.can_allocate(s));
  bm.allocate(s);
  ASSERT_EQ(s.block_table.size(), 3u);
  EXPECT_EQ(s.num_cached_tokens, 0);
  for (int b : s.block_table) EXPECT_EQ(bm.ref_count(b), 1);
  EXPECT_EQ(bm.num_used_blocks(), 3);
  EXPECT_EQ(bm.num_free_blocks(), 5);
  bm.check_consistency();
  bm.free(s);
  EXPECT_TRUE(s.block_table.empty());
  expect_all_free(bm);
}

TEST(BlockManager, RejectsAnEmptyPool) {
  EXPECT_THROW(BlockManager(0, 16), Error);
  EXPECT_THROW(BlockManager(4, 0), Error);
}

TEST(BlockManager, SharesFullPrefixBlocksAndCountsReferences) {
  BlockManager bm(16, 4);
  Sequence a = make(1, iota(0, 10));
  bm.allocate(a);
  compute_all(bm, a);
  Sequence b = make(2, concat(iota(0, 8), {100, 101, 102}));
  EXPECT_EQ(bm.cached_prefix_tokens(b), 8);
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 8);
  ASSERT_EQ(b.block_table.size(), 3u);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  EXPECT_NE(b.block_table[2], a.block_table[2]);
  EXPECT_EQ(bm.ref_count(a.block_table[0]), 2);
  EXPECT_EQ(bm.ref_count(a.block_table[2]), 1);
  EXPECT_EQ(bm.num_used_blocks(), 4);
  EXPECT_EQ(bm.prefix_queried_tokens(), 21u);
  EXPECT_EQ(bm.prefix_hit_tokens(), 8u);
  bm.free(a);
  EXPECT_EQ(bm.ref_count(b.block_table[0]), 1);
  bm.check_consistency();
  bm.free(b);
  expect_all_free(bm);
}

TEST(BlockManager, NeverSharesPartialBlocks) {
  BlockManager bm(16, 4);
  Sequence a = make(1, iota(0, 6));
  bm.allocate(a);
  compute_all(bm, a);
  Sequence b = make(2, iota(0, 7));  // same 6 tokens, then one more
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 4);
  EXPECT_NE(b.block_table[1], a.block_table[1]);
  bm.free(a);
  bm.free(b);
  expect_all_free(bm);
}

TEST(BlockManager, LeavesTheLastTokenToCompute) {
  BlockManager bm(16, 4);
  Sequence a = make(1, iota(0, 8));
  bm.allocate(a);
  compute_all(bm, a);
  // Fully cached, but its last token must still run to produce logits.
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 8))), 4);
  EXPECT_EQ(bm.cached_prefix_tokens(make(3, iota(0, 9))), 8);
  bm.free(a);
  expect_all_free(bm);
}

TEST(BlockManager, FindsOnlyBlocksWhoseKvIsComputed) {
  BlockManager bm(16, 4);
  Sequence a = make(1, iota(0, 9));
  bm.allocate(a);
  a.num_computed_tokens = 3;
  bm.register_full_blocks(a, a.num_tokens());
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 9))), 0);
  a.num_computed_tokens = 8;  // e.g. a later prefill chunk
  bm.register_full_blocks(a, a.num_tokens());
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 9))), 8);
  bm.free(a);
  expect_all_free(bm);
}

// Where a generated token's KV may differ from a prompt's (f16 weights'
// prompt path), the caller registers only the prompt's blocks.
TEST(BlockManager, RegistersOnlyTheTokensItIsGiven) {
  BlockManager bm(16, 4);
  Sequence a = make(1, iota(0, 3));
  bm.allocate(a);
  compute_all(bm, a);
  a.append(3);  // sampled; its KV is computed in the next step
  ASSERT_TRUE(bm.can_append(a));
  EXPECT_EQ(bm.append_slot(a), std::nullopt);
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 5))), 0);
  compute_all(bm, a);
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 5))), 0);
  Sequence b = make(3, iota(0, 5));  // the same 4 tokens as a prompt
  bm.allocate(b);
  compute_all(bm, b);
  EXPECT_EQ(bm.cached_prefix_tokens(make(4, iota(0, 5))), 4);
  bm.free(b);
  a.append(4);
  ASSERT_TRUE(bm.can_append(a));
  EXPECT_EQ(bm.append_slot(a), std::nullopt);
  EXPECT_EQ(a.block_table.size(), 2u);  // the 5th token starts a new block
  bm.free(a);
  expect_all_free(bm);
}

TEST(BlockManager, RegistersGeneratedBlocksWhenAsked) {
  BlockManager bm(16, 4);
  Sequence a = make(1, iota(0, 3));
  bm.allocate(a);
  compute_all(bm, a, true);
  a.append(3);
  ASSERT_TRUE(bm.can_append(a));
  EXPECT_EQ(bm.append_slot(a), std::nullopt);
  compute_all(bm, a, true);
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 5))), 4);
  bm.free(a);
  expect_all_free(bm);
}

// Rolling back releases whole blocks past the kept positions and takes a
// kept partial block out of the prefix cache, since its tail is rewritten.
TEST(BlockManager, TruncateReleasesBlocksAndForgetsARewrittenBlock) {
  BlockManager bm(16, 4);
  Sequence a = make(1, iota(0, 10));
  bm.allocate(a);
  compute_all(bm, a, true);
  ASSERT_EQ(a.block_table.size(), 3u);
  const int second = a.block_table[1];
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 9))), 8);
  bm.truncate(a, 6);
  a.num_computed_tokens = 6;
  EXPECT_EQ(a.block_table.size(), 2u);
  EXPECT_EQ(bm.num_used_blocks(), 2);
  EXPECT_EQ(bm.cached_prefix_tokens(make(2, iota(0, 9))), 4);  // block 1 is partial again
  a.truncate(0);  // no generated tokens: nothing to drop
  Sequence b = make(3, iota(0, 9));  // shares block 0 only
  bm.allocate(b);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_NE(b.block_table[1], second);
  bm.free(b);
  bm.truncate(a, 0);
  EXPECT_TRUE(a.block_table.empty());
  expect_all_free(bm);
}

TEST(BlockManager, TruncatingIntoASharedBlockCopiesItOnTheNextWrite) {
  BlockManager bm(16, 4);
  Sequence p = make(1, iota(0, 8));
  bm.allocate(p);
  compute_all(bm, p, true);
  p.append(8);
  Sequence c = p.branch(2, 80);
  bm.fork(p, c);
  // c rolls back to 6 positions: block 1 (positions 4..7) is p's too.
  bm.truncate(c, 6);
  c.num_computed_tokens = 6;
  const int shared = p.block_table[1];
  EXPECT_EQ(c.block_table[1], shared);
  const auto copy = bm.append_slot(c);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src, shared);
  EXPECT_NE(c.block_table[1], shared);
  EXPECT_EQ(bm.cached_prefix_tokens(make(3, iota(0, 9))), 8);  // p's blocks are untouched
  bm.free(c);
  bm.free(p);
  expect_all_free(bm);
}

uint64_t constant_hash(uint64_t, std::span<const int32_t>) { return 42; }

TEST(BlockManager, HashCollisionsAreCaughtByComparingTokens) {
  BlockManager bm(16, 4, constant_hash);
  Sequence a = make(1, iota(0, 5));
  bm.allocate(a);
  compute_all(bm, a);
  Sequence other = make(2, iota(50, 5));  // same hash, other tokens
  EXPECT_EQ(bm.cached_prefix_tokens(other), 0);
  bm.allocate(other);
  EXPECT_EQ(other.num_cached_tokens, 0);
  EXPECT_NE(other.block_table[0], a.block_table[0]);
  EXPECT_EQ(bm.cached_prefix_tokens(make(3, iota(0, 5))), 4);
  bm.free(a);
  bm.free(other);
  expect_all_free(bm);
}

// Ignores the parent, so equal blocks after different prefixes collide.
uint64_t tokens_only_hash(uint64_t, std::span<const int32_t> tokens) { return hash_block(0, tokens); }

std::vector<int32_t> block_of(int32_t t) { return {t, t, t, t}; }

TEST(BlockManager, AHitNeedsTheSameParentBlock) {
  BlockManager bm(16, 4, tokens_only_hash);
  Sequence d = make(1, concat(concat(block_of(1), block_of(2)), {9}));  // [w][y]
  Sequence a = make(2, concat(concat(block_of(3), block_of(4)), {9}));  // [x][z]
  for (Sequence* s : {&d, &a}) {
    bm.allocate(*s);
    compute_all(bm, *s);
  }
  // [x][y]: [x] hits a's block; [y] hashes like d's second block but follows [w].
  EXPECT_EQ(bm.cached_prefix_tokens(make(3, concat(concat(block_of(3), block_of(2)), {9}))), 4);
  EXPECT_EQ(bm.cached_prefix_tokens(make(4, concat(concat(block_of(1), block_of(2)), {9}))), 8);
  bm.free(d);
  bm.free(a);
  expect_all_free(bm);
}

TEST(BlockManager, AHitNeedsAParentNotReusedSince) {
  BlockManager bm(8, 4, tokens_only_hash);
  // a = [w][y] fills blocks 0, 1, 2; s = [w] duplicates a's first block and,
  // registered last, takes over the index, so a's block 0 is freed as unfindable.
  Sequence a = make(1, concat(concat(block_of(1), block_of(2)), {9}));
  Sequence s = make(2, concat(block_of(1), {8}));
  bm.allocate(a);
  bm.allocate(s);
  compute_all(bm, a);
  compute_all(bm, s);
  const int a0 = a.block_table[0];
  bm.free(s);
  bm.free(a);
  // x = [x] is handed a's old block 0 first.
  Sequence x = make(3, concat(block_of(3), {7}));
  bm.allocate(x);
  ASSERT_EQ(x.block_table[0], a0);
  compute_all(bm, x);
  // [x][y]: [y] is a's block 1 whose parent id is block 0, but block 0 held [w] then.
  EXPECT_EQ(bm.cached_prefix_tokens(make(4, concat(concat(block_of(3), block_of(2)), {9}))), 4);
  bm.free(x);
  expect_all_free(bm);
}

TEST(BlockManager, EvictsTheLeastRecentlyFreedBlockFirst) {
  BlockManager bm(6, 4);
  Sequence a = make(1, iota(0, 5));
  Sequence b = make(2, iota(100, 5));
  for (Sequence* s : {&a, &b}) {
    bm.allocate(*s);
    compute_all(bm, *s);
  }
  bm.free(a);
  bm.free(b);
  EXPECT_EQ(bm.cached_prefix_tokens(a), 4);
  EXPECT_EQ(bm.cached_prefix_tokens(b), 4);
  // Five fresh blocks: the two never used, both partial ones, then a's full one.
  Sequence c = make(3, iota(200, 17));
  bm.allocate(c);
  EXPECT_EQ(bm.cached_prefix_tokens(a), 0);
  EXPECT_EQ(bm.cached_prefix_tokens(b), 4);
  bm.free(c);
  expect_all_free(bm);
}

TEST(BlockManager, EvictsASequencesTailBeforeItsPrefix) {
  BlockManager bm(5, 4);
  Sequence a = make(1, iota(0, 13));
  bm.allocate(a);
  compute_all(bm, a);
  bm.free(a);
  Sequence d = make(2, iota(100, 9));  // 3 blocks: two uncached, then a's third
  bm.allocate(d);
  EXPECT_EQ(bm.cached_prefix_tokens(a), 8);
  bm.free(d);
  // A hit on a free block takes it off the free list.
  bm.allocate(a);
  EXPECT_EQ(a.num_cached_tokens, 8);
  EXPECT_EQ(bm.num_free_blocks(), 1);
  bm.check_consistency();
  bm.free(a);
  expect_all_free(bm);
}

TEST(BlockManager, CanAllocateCountsHitsOnHeldBlocksAsFree) {
  BlockManager bm(4, 4);
  Sequence a = make(1, iota(0, 9));
  bm.allocate(a);
  compute_all(bm, a);
  ASSERT_EQ(bm.num_free_blocks(), 1);
  Sequence b = make(2, concat(iota(0, 8), {77}));
  EXPECT_TRUE(bm.can_allocate(b));
  EXPECT_FALSE(bm.can_allocate(make(3, iota(50, 9))));
  bm.allocate(b);
  EXPECT_EQ(bm.num_free_blocks(), 0);
  Sequence d = make(4, iota(50, 2));
  EXPECT_THROW(bm.allocate(d), Error);
  bm.free(a);
  bm.free(b);
  expect_all_free(bm);
}

TEST(BlockManager, ForkSharesEveryBlockAndCopiesOnWrite) {
  BlockManager bm(8, 4);
  Sequence p = make(1, iota(0, 6));
  bm.allocate(p);
  compute_all(bm, p);
  p.append(6);  // sampled from the prompt's logits
  Sequence c = p.branch(2, 60);
  bm.fork(p, c);
  EXPECT_EQ(c.block_table, p.block_table);
  for (int b : p.block_table) EXPECT_EQ(bm.ref_count(b), 2);
  // Both write position 6, in the shared partial block 1.
  const int shared = p.block_table[1];
  ASSERT_TRUE(bm.can_append(c));
  const auto copy = bm.append_slot(c);
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src, shared);
  EXPECT_EQ(copy->dst, c.block_table[1]);
  EXPECT_NE(c.block_table[1], shared);
  EXPECT_EQ(c.block_table[0], p.block_table[0]);
  EXPECT_EQ(bm.ref_count(shared), 1);
  EXPECT_EQ(bm.append_slot(p), std::nullopt);  // p is the only holder now
  EXPECT_EQ(bm.ref_count(p.block_table[0]), 2);
  bm.check_consistency();
  bm.free(p);
  bm.free(c);
  expect_all_free(bm);
}

TEST(BlockManager, ForkAtABlockBoundaryNeedsNoCopy) {
  BlockManager bm(8, 4);
  Sequence p = make(1, iota(0, 8));
  bm.allocate(p);
  compute_all(bm, p);
  p.append(8);
  Sequence c = p.branch(2, 80);
  bm.fork(p, c);
  EXPECT_EQ(bm.append_slot(c), std::nullopt);
  EXPECT_EQ(bm.append_slot(p), std::nullopt);
  EXPECT_NE(c.block_table[2], p.block_table[2]);
  bm.free(c);
  bm.free(p);
  expect_all_free(bm);
}

TEST(BlockManager, CannotAppendWhenThePoolIsFull) {
  BlockManager bm(2, 4);
  Sequence a = make(1, iota(0, 8));
  bm.allocate(a);
  compute_all(bm, a);
  a.append(8);
  EXPECT_FALSE(bm.can_append(a));
  EXPECT_THROW(bm.append_slot(a), Error);
  bm.free(a);
  expect_all_free(bm);
}

}  // namespace
}  // namespace llmserve::engine
