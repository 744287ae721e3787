// Replays every input the fuzzer ever flagged (tests/data/gguf/regressions):
// each must parse, or be rejected with llmserve::Error, and each tensor of a
// parsed file must dequantize its first row or reject its type cleanly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/error.h"
#include "gguf/file.h"
#include "gguf/quant.h"

namespace llmserve::gguf {
namespace {

namespace fs = std::filesystem;

TEST(FuzzRegressions, EveryFileParsesOrIsRejected) {
  const fs::path dir = LLMSERVE_GGUF_REGRESSIONS_DIR;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int replayed = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string name = entry.path().filename().string();
    try {
      const File f = File::parse(name, bytes.data(), bytes.size());
      for (const auto& t : f.tensors()) {
        std::vector<float> row(t.cols());
        try {
          dequantize_row(t.type, t.data, row.data(), static_cast<int64_t>(row.size()));
        } catch (const Error&) {
          // A type the reader accepts but the dequantizer does not support.
        }
      }
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
    ++replayed;
  }
  RecordProperty("replayed", replayed);
}

}  // namespace
}  // namespace llmserve::gguf
