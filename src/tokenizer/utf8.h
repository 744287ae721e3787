#pragma once
// UTF-8 classification shared by the SentencePiece splitter and the stream
// decoder. Both must treat invalid input byte by byte without ever losing a
// byte, so the rules here follow the Unicode standard's well-formed table
// (no overlongs, no surrogates, nothing above U+10FFFF).
#include <cstddef>
#include <string>
#include <string_view>

namespace llmserve::tok::utf8 {

enum class Kind {
  VALID,       // a complete, well-formed character
  INVALID,     // bytes that can never start a well-formed character here
  INCOMPLETE,  // a well-formed prefix cut off by the end of the input
};

struct Sequence {
  Kind kind;
  size_t len;  // bytes covered: the character, the maximal invalid subpart, or the prefix
};

// Classifies the bytes starting at s[pos] (pos < s.size()).
Sequence scan(std::string_view s, size_t pos);

// The code point of a VALID sequence.
char32_t decode(std::string_view s, size_t pos, size_t len);

void append(std::string& out, char32_t cp);

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace llmserve::tok::utf8
