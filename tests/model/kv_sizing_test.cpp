// The default KV pool follows the model, the context and the sequence
// count, within a share of the memory available; --kv-mem / --kv-blocks win.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "model/kv_sizing.h"

using namespace llmserve;
using model::KvPoolRequest;
using model::size_kv_pool;

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kPlenty = size_t{64} << 30;

// 4 layers of 4 KV heads of 32: 2 × 4 × 128 f16 values = 2048 bytes a token, 32 KiB a block.
model::HParams small_model() {
  model::HParams hp;
  hp.n_layer = 4;
  hp.n_head = 8;
  hp.n_head_kv = 4;
  hp.head_dim = 32;
  hp.n_ctx_train = 1024;
  return hp;
}

KvPoolRequest request(int context, int seqs) { return KvPoolRequest{.max_context = context, .max_seqs = seqs}; }

}  // namespace

TEST(KvSizing, SmallModelGetsAPoolForItsContextAndSequences) {
  const auto s = size_kv_pool(small_model(), request(1024, 4), kPlenty);
  EXPECT_EQ(s.bytes_per_token, 2048u);
  EXPECT_EQ(s.blocks, 4 * 1024 / 16);
  EXPECT_EQ(s.tokens(), 4 * 1024);
  EXPECT_EQ(s.bytes, 8 * kMiB);
  EXPECT_EQ(s.reason, "context 1024 × 4 seqs");
}

TEST(KvSizing, APartialBlockOfContextCountsAsAWholeOne) {
  EXPECT_EQ(size_kv_pool(small_model(), request(1000, 2), kPlenty).blocks, 2 * 63);
}

TEST(KvSizing, BytesPerTokenFollowTheKvType) {
  auto r = request(1024, 1);
  r.kv_type = gguf::TensorType::Q8_0;  // 128 values: 4 blocks of 34 bytes
  EXPECT_EQ(size_kv_pool(small_model(), r, kPlenty).bytes_per_token, 2u * 4 * 136);
  r.kv_type = gguf::TensorType::F32;
  EXPECT_EQ(size_kv_pool(small_model(), r, kPlenty).bytes_per_token, 2u * 4 * 512);
}

TEST(KvSizing, TheCapIsAShareOfAvailableMemory) {
  // 8 MiB wanted; half of 10 MiB holds 160 blocks of 32 KiB.
  const auto s = size_kv_pool(small_model(), request(1024, 4), 10 * kMiB);
  EXPECT_EQ(s.blocks, 160);
  EXPECT_NE(s.reason.find("capped at 50% of available memory"), std::string::npos) << s.reason;
}

TEST(KvSizing, OneFullContextSequenceEvenBeyondTheCap) {
  // One sequence is 2 MiB: more than half of 3 MiB, less than all of it.
  const auto s = size_kv_pool(small_model(), request(1024, 4), 3 * kMiB);
  EXPECT_EQ(s.blocks, 64);
  EXPECT_NE(s.reason.find("one sequence of context 1024"), std::string::npos) << s.reason;
}

TEST(KvSizing, NoRoomForOneSequenceIsAClearError) {
  try {
    size_kv_pool(small_model(), request(1024, 4), kMiB);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("needs 2.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("--ctx"), std::string::npos) << m;
  }
}

TEST(KvSizing, OverridesWinOverTheModelAndTheCap) {
  auto r = request(1024, 4);
  r.kv_bytes = 64 * kMiB;  // beyond the cap: the user's choice
  auto s = size_kv_pool(small_model(), r, 10 * kMiB);
  EXPECT_EQ(s.blocks, 2048);
  EXPECT_EQ(s.reason, "--kv-mem");
  r.kv_blocks = 7;  // beats --kv-mem
  s = size_kv_pool(small_model(), r, 10 * kMiB);
  EXPECT_EQ(s.blocks, 7);
  EXPECT_EQ(s.bytes, 7 * 32 * size_t{1024});
  EXPECT_EQ(s.reason, "--kv-blocks");
}

TEST(KvSizing, AKvMemBudgetBelowOneBlockIsAnError) {
  auto r = request(1024, 1);
  r.kv_bytes = 1000;
  EXPECT_THROW(size_kv_pool(small_model(), r, kPlenty), Error);
}

TEST(KvSizing, DescribeGivesEveryFigure) {
  const auto s = size_kv_pool(small_model(), request(1024, 4), kPlenty);
  EXPECT_EQ(model::describe(s), "f16, 2048 bytes/token, 256 blocks × 16 = 4096 tokens, 8.0 MiB (context 1024 × 4 seqs)");
}

TEST(KvSizing, AvailableMemoryIsReadFromTheSystem) {
  if (!std::filesystem::exists("/proc/meminfo")) GTEST_SKIP() << "no /proc/meminfo";
  const size_t available = model::available_memory_bytes();
  EXPECT_GT(available, 0u);
  EXPECT_LT(available, size_t{1} << 50);
}
