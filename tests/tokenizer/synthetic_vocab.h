#pragma once
// Hand-built vocabularies for tests: the expected ids of every case can be
// derived on paper from the merges listed in the test itself.
#include <string>
#include <string_view>

#include "tokenizer/byte_level.h"
#include "tokenizer/vocab.h"

namespace llmserve::tok::testing {

// Raw text -> its byte-level (GPT-2) spelling, e.g. " w" -> "Ġw".
inline std::string bl(std::string_view raw) {
  std::string out;
  byte_level::encode(raw, out);
  return out;
}

// A byte-level BPE vocabulary: ids 0..255 are the byte symbols in byte order,
// then tokens in the order they are added.
class BpeVocabBuilder {
 public:
  explicit BpeVocabBuilder(std::string pre) {
    vocab.source = "synthetic-bpe";
    vocab.kind = ModelKind::BYTE_BPE;
    vocab.pre = std::move(pre);
    for (unsigned b = 0; b < 256; ++b) add(byte_level::symbol(static_cast<uint8_t>(b)));
  }

  // Adds a token (or returns the id it already has).
  Token add(const std::string& text, TokenType type = TokenType::NORMAL) {
    for (size_t i = 0; i < vocab.texts.size(); ++i) {
      if (vocab.texts[i] == text) return static_cast<Token>(i);
    }
    vocab.texts.push_back(text);
    vocab.types.push_back(type);
    return static_cast<Token>(vocab.texts.size() - 1);
  }

  // Appends the merge of two raw-text tokens (rank = merges so far) and returns the merged id.
  Token merge(std::string_view left, std::string_view right) {
    vocab.merges.push_back(bl(left) + " " + bl(right));
    return add(bl(left) + bl(right));
  }

  Token id(std::string_view raw) const {
    const std::string text = bl(raw);
    for (size_t i = 0; i < vocab.texts.size(); ++i) {
      if (vocab.texts[i] == text) return static_cast<Token>(i);
    }
    return -1;
  }

  Vocab vocab;
};

}  // namespace llmserve::tok::testing
