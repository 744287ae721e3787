// Replays the server fuzzer's seeds (tests/data/server/seeds) and every
// input it ever flagged (tests/data/server/regressions) through the fuzz
// target itself, which aborts on a broken invariant and lets only the
// expected errors escape.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

int replay(const fs::path& dir) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    SCOPED_TRACE(entry.path().string());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    ++n;
  }
  return n;
}

TEST(ServerFuzzRegressions, CorpusAndRegressionsReplayCleanly) {
  EXPECT_GT(replay(LLMSERVE_SERVER_FUZZ_SEEDS), 0);
  replay(LLMSERVE_SERVER_REGRESSIONS_DIR);
}

}  // namespace
