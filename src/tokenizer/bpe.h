#pragma once
// Byte-level BPE (tokenizer.ggml.model = "gpt2"): the pre-tokenizer splits
// text into words, each word's bytes become GPT-2 byte symbols, and adjacent
// symbols merge by rank (lowest first, leftmost on ties) as listed in
// tokenizer.ggml.merges. Every byte has a symbol, so any input round-trips.
#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/token_map.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::tok {

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(const Vocab& vocab);

 private:
  struct Merge {
    int32_t rank;
    Token result;
  };
  // Per-call buffers reused across the words of one encode() call.
  struct Scratch;

  void encode_text(std::string_view text, bool segment_start, std::vector<Token>& out) const override;
  void encode_word(std::string_view word, Scratch& scratch, std::vector<Token>& out) const;

  PretokenizerSpec spec_;
  Pretokenizer pre_;
  TokenMap ids_;  // normal tokens by their byte-level text
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and merged id
  std::array<Token, 256> byte_ids_;             // -1 where the vocabulary lacks a byte's symbol
};

}  // namespace llmserve::tok
