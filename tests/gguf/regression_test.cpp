// Replays the GGUF fuzzer's seeds and findings (tests/data/gguf/regressions,
// see its README.md) the way gguf_fuzzer runs an input: each file must parse
// or be rejected with an llmserve::Error that names it, without allocating far
// more than its size, and each tensor of a parsed file must dequantize its
// first row or reject its type cleanly. Where a file's name says what it
// should do, it must: "valid-*" parses, "rejected-*" is rejected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "alloc_guard.h"
#include "core/error.h"
#include "gguf/file.h"
#include "gguf/quant.h"

namespace llmserve::gguf {
namespace {

namespace fs = std::filesystem;

// As hostile_test.cpp: the reader's bookkeeping is a small multiple of its input.
constexpr size_t kMaxAllocationPerInputByte = 16;
constexpr size_t kAllocationAllowance = size_t{1} << 20;

enum class Outcome { parsed, rejected };

Outcome replay(const std::string& name, const std::vector<uint8_t>& bytes) {
  testing::reset_largest_allocation();
  try {
    const File f = File::parse(name, bytes.data(), bytes.size());
    EXPECT_LE(testing::largest_allocation(), kAllocationAllowance + kMaxAllocationPerInputByte * bytes.size());
    for (const auto& t : f.tensors()) {
      std::vector<float> row(t.cols());
      try {
        dequantize_row(t.type, t.data, row.data(), static_cast<int64_t>(row.size()));
      } catch (const Error&) {
        // A type the reader accepts but the dequantizer does not support.
      }
    }
    return Outcome::parsed;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << "message does not name the file: " << e.what();
    EXPECT_LE(testing::largest_allocation(), kAllocationAllowance + kMaxAllocationPerInputByte * bytes.size());
    return Outcome::rejected;
  }
}

TEST(FuzzRegressions, EveryFileParsesOrIsRejected) {
  const fs::path dir = LLMSERVE_GGUF_REGRESSIONS_DIR;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int replayed = 0, parsed = 0, rejected = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    const Outcome got = replay(name, bytes);
    if (name.starts_with("valid-")) {
      EXPECT_EQ(got, Outcome::parsed) << name << " is a valid file";
    }
    if (name.starts_with("rejected-")) {
      EXPECT_EQ(got, Outcome::rejected) << name << " was accepted";
    }
    ++replayed;
    ++(got == Outcome::parsed ? parsed : rejected);
  }
  // An empty folder would pass vacuously: the corpus holds both kinds.
  EXPECT_GT(replayed, 0);
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
  RecordProperty("replayed", replayed);
}

}  // namespace
}  // namespace llmserve::gguf
