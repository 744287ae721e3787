// libFuzzer target for the GGUF reader: any input must parse or throw
// llmserve::Error; on success the first row of every tensor is decoded, which
// exercises the reader's bounds (the row must lie inside the input) and the
// block decoders on hostile bytes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "gguf/file.h"
#include "gguf/quant.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llmserve::gguf;
  try {
    const File f = File::parse("fuzz-input", data, size);
    std::vector<float> row;
    for (const auto& t : f.tensors()) {
      row.resize(t.cols());
      try {
        dequantize_row(t.type, t.data, row.data(), static_cast<int64_t>(row.size()));
      } catch (const llmserve::Error&) {
        // A type the reader knows but the dequantizer does not decode.
      }
    }
  } catch (const llmserve::Error&) {
    // Rejected cleanly: the expected outcome for most inputs.
  }
  return 0;
}
