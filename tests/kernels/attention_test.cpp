// Paged causal attention on every ISA path against attention_reference
// (full score vector, two-pass softmax, double). Tolerance: |out - ref| <=
// 2e-5 (1 + |ref|): f32 accumulation and the polynomial exp, values ~N(0, 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/quant.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"

namespace llmserve::kernels {
namespace {

using gguf::TensorType;
using llmserve::testing::IsaGuard;

struct Case {
  int n_head, n_head_kv, head_dim, block_size;
};

// A shared paged cache holding several sequences, each with its own shuffled
// block table, and queries for each.
struct Fixture {
  AttentionShape shape;
  KvLayout layout;
  std::vector<uint8_t> k, v;
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<float>> q, out, ref;
  std::vector<AttentionSeq> seqs;

  Fixture(const Case& c, TensorType type, const std::vector<std::pair<int, int>>& pos0_nq, std::mt19937& rng)
      : shape{c.n_head, c.n_head_kv, c.head_dim} {
    const int kv_dim = c.n_head_kv * c.head_dim;
    layout = {type, c.block_size, kv_dim, gguf::row_bytes(type, kv_dim)};
    int total_blocks = 0;
    for (auto [pos0, nq] : pos0_nq) total_blocks += (pos0 + nq + c.block_size - 1) / c.block_size;
    std::vector<int32_t> physical(total_blocks);
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), rng);
    const size_t bytes = static_cast<size_t>(total_blocks) * c.block_size * layout.row_bytes;
    k.resize(bytes);
    v.resize(bytes);
    for (auto* cache : {&k, &v})
      for (int64_t r = 0; r < int64_t{total_blocks} * c.block_size; ++r) {
        const auto row = llmserve::testing::random_floats(rng, kv_dim);
        gguf::quantize_row(type, row.data(), cache->data() + r * layout.row_bytes, kv_dim);
      }
    int next = 0;
    for (auto [pos0, nq] : pos0_nq) {
      const int n_blocks = (pos0 + nq + c.block_size - 1) / c.block_size;
      tables.emplace_back(physical.begin() + next, physical.begin() + next + n_blocks);
      next += n_blocks;
      const size_t n = static_cast<size_t>(nq) * c.n_head * c.head_dim;
      q.push_back(llmserve::testing::random_floats(rng, n, 2.0f));
      out.emplace_back(n, NAN);
      ref.emplace_back(n);
    }
    for (size_t i = 0; i < pos0_nq.size(); ++i)
      seqs.push_back({q[i].data(), out[i].data(), pos0_nq[i].second, pos0_nq[i].first, tables[i].data()});
  }

  // attention() on `pool` into out, attention_reference() into ref, compared.
  void expect_matches_reference(ThreadPool& pool) {
    const int n = static_cast<int>(seqs.size());
    attention(shape, layout, k.data(), v.data(), seqs.data(), n, pool);
    for (int s = 0; s < n; ++s) seqs[s].out = ref[s].data();
    attention_reference(shape, layout, k.data(), v.data(), seqs.data(), n);
    for (int s = 0; s < n; ++s)
      for (size_t i = 0; i < out[s].size(); ++i)
        ASSERT_LE(std::fabs(out[s][i] - ref[s][i]), 2e-5 * (1 + std::fabs(ref[s][i])))
            << "sequence " << s << " element " << i << ": " << out[s][i] << " vs " << ref[s][i];
  }
};

class AttentionTest : public ::testing::TestWithParam<std::tuple<TensorType, Isa>> {};

TEST_P(AttentionTest, MatchesReference) {
  const auto [type, isa] = GetParam();
  IsaGuard guard(isa);
  ThreadPool pool(3);
  std::mt19937 rng(11);
  // (pos0, n_q) per sequence: prefill, decode, a prefill chunk after cached
  // context, and one query row per KV block boundary case.
  const std::vector<std::pair<int, int>> batch = {{0, 37}, {50, 1}, {20, 9}, {15, 1}, {0, 1}, {0, 100}};
  // head_dim 20: whole vectors on no ISA (the conversions' tails).
  for (const Case& c : {Case{8, 4, 8, 16}, Case{8, 8, 32, 5}, Case{32, 4, 64, 16}, Case{6, 2, 48, 32},
                        Case{2, 1, 96, 7}, Case{4, 4, 40, 16}, Case{24, 8, 20, 16}}) {
    SCOPED_TRACE("heads " + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " head_dim " +
                 std::to_string(c.head_dim));
    Fixture f(c, type, batch, rng);
    ASSERT_NO_FATAL_FAILURE(f.expect_matches_reference(pool));
  }
}

// A decode token's keys split into parts and the parts merged
// (AttentionJob), on every kernel path. The parts depend on the token's keys
// alone (about 1024 keys x KV heads each), not on the batch or the threads.
// Up to 8 query heads per KV head (1, 4, 8: the lone and narrow paths on
// every ISA), a token is one item of all the KV heads; with 16 (tiles), an
// item per KV head. A token too short to split is split over its KV heads
// when there are fewer items than threads.
TEST_P(AttentionTest, SplitDecodeMatchesReference) {
  const auto [type, isa] = GetParam();
  IsaGuard guard(isa);
  ThreadPool pool(4);
  std::mt19937 rng(12);
  const std::vector<std::pair<int, int>> batch = {{3000, 1}, {700, 1}};
  for (const Case& c : {Case{8, 2, 64, 16}, Case{32, 4, 64, 16}, Case{4, 4, 40, 16}, Case{32, 2, 64, 16}}) {
    SCOPED_TRACE("heads " + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv));
    Fixture f(c, type, batch, rng);
    AttentionJob job;
    job.plan(f.shape, f.layout, f.seqs.data(), static_cast<int>(f.seqs.size()), pool.size());
    const bool tiles = c.n_head / c.n_head_kv >= 16;
    const int item_heads = tiles ? 1 : c.n_head_kv, n_items = tiles ? 2 * c.n_head_kv : 2;
    int items = 0, merges = 0;
    for (const int keys : {3001, 701}) {
      const int parts = std::max(1, keys / (1024 / item_heads));
      const int head_parts = n_items < pool.size() ? std::min(item_heads, (pool.size() + n_items - 1) / n_items) : 1;
      merges += (parts > 1) * (n_items / 2);
      items += (parts > 1 ? parts : head_parts) * (n_items / 2);
    }
    EXPECT_EQ(job.merges(), merges);
    EXPECT_EQ(job.items(), items);
    ASSERT_NO_FATAL_FAILURE(f.expect_matches_reference(pool));
  }
}

// Decode with too few keys to split over them (below 2 x 256 / n_head_kv
// per sequence) and fewer sequences than threads: each sequence's item is
// split over its KV heads, into ceil(threads / sequences) parts at most,
// without merges; two sequences on 2 threads stay an item each.
TEST_P(AttentionTest, HeadSplitDecodeMatchesReference) {
  const auto [type, isa] = GetParam();
  IsaGuard guard(isa);
  std::mt19937 rng(13);
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (const Case& c : {Case{32, 4, 64, 16}, Case{8, 2, 64, 16}, Case{6, 3, 32, 32}, Case{4, 1, 64, 16},
                          Case{4, 4, 32, 16}}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " heads " + std::to_string(c.n_head) + "/" +
                   std::to_string(c.n_head_kv));
      for (const auto& batch : {std::vector<std::pair<int, int>>{{40, 1}}, {{40, 1}, {20, 1}}}) {
        Fixture f(c, type, batch, rng);
        AttentionJob job;
        job.plan(f.shape, f.layout, f.seqs.data(), static_cast<int>(f.seqs.size()), pool.size());
        EXPECT_EQ(job.merges(), 0);
        const int n_seqs = static_cast<int>(batch.size());
        const int parts = n_seqs >= threads ? 1 : std::min(c.n_head_kv, (threads + n_seqs - 1) / n_seqs);
        EXPECT_EQ(job.items(), n_seqs * parts);
        ASSERT_NO_FATAL_FAILURE(f.expect_matches_reference(pool));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, AttentionTest,
                         ::testing::Combine(::testing::Values(TensorType::F32, TensorType::F16, TensorType::Q8_0),
                                            ::testing::ValuesIn(llmserve::testing::runnable_isas())),
                         [](const auto& info) {
                           return std::string(gguf::type_info(std::get<0>(info.param))->name) + "_" +
                                  std::string(isa_name(std::get<1>(info.param)));
                         });

TEST(AttentionErrors, RejectsInconsistentArguments) {
  ThreadPool pool(1);
  std::vector<float> q(64), out(64);
  std::vector<uint8_t> cache(4096);
  const int32_t table[] = {0};
  AttentionSeq seq{q.data(), out.data(), 1, 0, table};
  const KvLayout f16{TensorType::F16, 16, 32, 64};
  EXPECT_THROW(attention({3, 2, 16}, f16, cache.data(), cache.data(), &seq, 1, pool), Error);  // 3 % 2
  EXPECT_THROW(attention({4, 2, 8}, f16, cache.data(), cache.data(), &seq, 1, pool), Error);   // kv_dim 16 != 32
  const KvLayout q4{TensorType::Q4_0, 16, 32, 18};
  EXPECT_THROW(attention({4, 2, 16}, q4, cache.data(), cache.data(), &seq, 1, pool), Error);
  EXPECT_NO_THROW(attention({4, 2, 16}, f16, cache.data(), cache.data(), &seq, 1, pool));
}

}  // namespace
}  // namespace llmserve::kernels
