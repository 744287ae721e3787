#pragma once
// SentencePiece-style BPE (tokenizer.ggml.model = "llama"): spaces become
// U+2581, then adjacent pieces merge greedily, highest score first and
// leftmost on ties, starting from single UTF-8 characters. Characters with no
// piece fall back to <0xXX> byte tokens, or to <unk> without them.
#include <array>
#include <string_view>
#include <vector>

#include "tokenizer/token_map.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::tok {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(const Vocab& vocab);

 private:
  void encode_text(std::string_view text, bool segment_start, std::vector<Token>& out) const override;
  // Appends the token of one final symbol, or its byte fallback (always for a literal U+2581).
  void emit(std::string_view symbol, bool literal, std::vector<Token>& out) const;
  bool has_byte_tokens(std::string_view bytes) const;

  // Only normal and user-defined pieces take part in merges: input text that
  // spells "<s>" or "<0x41>" must stay text, or decoding would not return it.
  TokenMap ids_;
  std::vector<float> scores_;
  std::array<Token, 256> byte_ids_;  // -1 where the vocabulary has no <0xXX> token
  // U+2581 in the input is spelled with byte tokens, not merged: as a piece it
  // would decode to ' '. Needs the three byte tokens; without them it merges
  // like any character (SentencePiece's own behaviour).
  bool literal_marks_as_bytes_ = false;
};

}  // namespace llmserve::tok
