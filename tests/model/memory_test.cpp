// A served model's memory: the KV pool takes memory as it is used, not
// when it is made, its default size follows the model, and the file's pages
// do not stay resident beside the repacked weights.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/instance.h"
#include "model/kv_cache.h"
#include "model/synthetic.h"
#include "test_models.h"

using namespace llmserve;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

constexpr size_t kMiB = size_t{1} << 20;

// VmRSS from /proc/self/status, bytes; 0 when unknown.
size_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    size_t kib = 0;
    if (key == "VmRSS:" && in >> kib) return kib * 1024;
    std::getline(in, key);
  }
  return 0;
}

// Rss of the mappings of `path` in /proc/self/smaps, bytes.
size_t mapped_resident_bytes(const std::string& path) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool in_file = false;
  size_t total = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') != std::string::npos)
      in_file = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    else if (in_file && line.rfind("Rss:", 0) == 0)
      total += std::stoul(line.substr(4)) * 1024;
  }
  return total;
}

// Bytes of [begin, end) the OS holds in memory (mincore), in whole pages.
size_t resident_in(const uint8_t* begin, const uint8_t* end) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(begin) / page * page;
  const size_t pages = (reinterpret_cast<uintptr_t>(end) - first + page - 1) / page;
  std::vector<unsigned char> in_core(pages);
  if (mincore(reinterpret_cast<void*>(first), pages * page, in_core.data()) != 0) return SIZE_MAX;
  return static_cast<size_t>(std::count_if(in_core.begin(), in_core.end(), [](unsigned char c) { return c & 1; })) * page;
}

model::HParams tiny_hparams() {
  model::HParams hp;
  hp.n_layer = 4;
  hp.n_head = 8;
  hp.n_head_kv = 4;
  hp.head_dim = 32;
  return hp;
}

std::string tiny_model() {
  static const llmserve::testing::TempFile file("kv-pool-tiny.gguf", [](const std::string& p) {
    model::SyntheticSpec spec;
    spec.shape = *model::find_shape("tiny");
    spec.type = gguf::TensorType::F32;
    model::write_synthetic_model(spec, p);
  });
  return file.path();
}

}  // namespace

TEST(KvPool, AGigabytePoolCommitsMemoryOnlyAsBlocksAreWritten) {
  if (kAsan) GTEST_SKIP() << "RSS under AddressSanitizer includes its shadow memory";
  if (resident_bytes() == 0) GTEST_SKIP() << "no VmRSS in /proc/self/status";
  const model::HParams hp = tiny_hparams();
  const int blocks = static_cast<int>((size_t{1} << 30) / model::KvCache::bytes_per_block(hp, 16, gguf::TensorType::F16));
  const size_t before = resident_bytes();
  model::KvCache kv(hp, blocks, 16, gguf::TensorType::F16);
  ASSERT_EQ(kv.bytes(), size_t{1} << 30);
  EXPECT_LT(resident_bytes(), before + 64 * kMiB);

  // Writing the first block of every layer commits a few pages, not the pool.
  const std::vector<float> row(static_cast<size_t>(hp.kv_dim()), 1.0f);
  const int32_t slot = 0;
  for (int l = 0; l < hp.n_layer; ++l) kv.store(l, row.data(), row.data(), &slot, 1);
  EXPECT_LT(resident_bytes(), before + 64 * kMiB);
}

// Planes of 1.95 huge pages: unaligned, plane 1's first 24 blocks would end
// at a huge-page boundary and its first 100 take two.
TEST(KvPool, TheFirstBlocksInUseCommitOneHugePagePerPlane) {
  const model::HParams hp = tiny_hparams();
  model::KvCache kv(hp, 1000, 16, gguf::TensorType::F16);
  const uint8_t* begin = kv.k(0);
  const uint8_t* end = kv.v(hp.n_layer - 1) + kv.bytes() / (2 * hp.n_layer);
  ASSERT_EQ(resident_in(begin, end), 0u);
  const std::vector<float> row(static_cast<size_t>(hp.kv_dim()), 1.0f);
  for (int32_t slot = 0; slot < 100 * 16; ++slot)
    for (int l = 0; l < hp.n_layer; ++l) kv.store(l, row.data(), row.data(), &slot, 1);
  const size_t planes = 2 * static_cast<size_t>(hp.n_layer);
  EXPECT_LE(resident_in(begin, end), planes * kernels::kHugePageBytes);
}

TEST(KvPool, AnUnwrittenBlockReadsAsZeros) {
  const model::HParams hp = tiny_hparams();
  model::KvCache kv(hp, 4096, 16, gguf::TensorType::F16);
  const size_t last_row = (4096 * 16 - 1) * kv.layout().row_bytes;
  for (size_t i = 0; i < kv.layout().row_bytes; ++i) {
    ASSERT_EQ(kv.k(hp.n_layer - 1)[last_row + i], 0);
    ASSERT_EQ(kv.v(hp.n_layer - 1)[last_row + i], 0);
  }
}

TEST(KvPool, ALoadedModelsDefaultPoolHoldsItsContextForEachSequence) {
  ThreadPool pool(1);
  model::InstanceConfig config;  // no --kv-mem, no --kv-blocks
  config.max_seqs = 4;
  const auto m = model::LoadedModel::load(tiny_model(), pool, config);
  // "tiny": context 1024, 4 layers of 4 KV heads of 32 at f16: 2048 bytes a token.
  EXPECT_EQ(m->kv_pool().bytes_per_token, 2048u);
  EXPECT_EQ(m->info().kv_blocks, 4 * 1024 / 16);
  EXPECT_EQ(m->kv().bytes(), 4 * 1024 * size_t{2048});
  EXPECT_EQ(m->kv_pool().reason, "context 1024 × 4 seqs");
}

TEST(KvPool, ALoadedModelKeepsAnExplicitBudget) {
  ThreadPool pool(1);
  model::InstanceConfig config;
  config.kv_bytes = 3 * kMiB;
  const auto m = model::LoadedModel::load(tiny_model(), pool, config);
  EXPECT_EQ(m->info().kv_blocks, 96);
  EXPECT_EQ(m->kv_pool().reason, "--kv-mem");
}

TEST(LoadedModelMemory, TheFilesTensorPagesDoNotStayResident) {
  if (!std::filesystem::exists("/proc/self/smaps")) GTEST_SKIP() << "no /proc/self/smaps";
  ThreadPool pool(1);
  const auto m = model::LoadedModel::load(tiny_model(), pool, {});
  const size_t file_bytes = std::filesystem::file_size(tiny_model());
  // The metadata (the tokenizer's vocabulary) may stay; the tensors, copied out at load, not.
  EXPECT_LT(mapped_resident_bytes(std::filesystem::canonical(tiny_model()).string()), file_bytes / 10);
}
