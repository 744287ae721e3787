#pragma once
// Finds the text of special tokens (control, user-defined, unknown) in input
// that is parsed with parse_special, so that e.g. "<|im_start|>" becomes one
// token instead of being spelled out.
#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace llmserve::tok {

// Bytes [begin, end) of an input.
struct TextRange {
  size_t begin, end;
};

class SpecialTokens {
 public:
  struct Fragment {
    std::string_view text;  // the input bytes this fragment covers
    Token id;               // the special token, or -1 for plain text
  };

  SpecialTokens() = default;
  SpecialTokens(const std::vector<std::string>& texts, const std::vector<TokenType>& types);

  // Splits `text` into plain-text fragments and special tokens. At each
  // position the longest special text that matches wins; plain-text
  // fragments are never empty. A match that overlaps a range of `as_text`
  // (sorted, disjoint) is not taken: those bytes stay plain text.
  std::vector<Fragment> split(std::string_view text, std::span<const TextRange> as_text = {}) const;

 private:
  struct Candidate {
    std::string text;
    Token id;
  };
  // Candidates by first byte, longest first, so the first hit is the longest.
  std::array<std::vector<Candidate>, 256> by_first_byte_;
};

}  // namespace llmserve::tok
