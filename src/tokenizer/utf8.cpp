#include "tokenizer/utf8.h"

#include <cstdint>

namespace llmserve::tok::utf8 {

Sequence scan(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {Kind::VALID, 1};
  size_t trail = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    trail = 1;
  } else if (b0 == 0xE0) {
    trail = 2, lo = 0xA0;  // excludes overlong 3-byte forms
  } else if (b0 == 0xED) {
    trail = 2, hi = 0x9F;  // excludes surrogates
  } else if (b0 >= 0xE1 && b0 <= 0xEF) {
    trail = 2;
  } else if (b0 == 0xF0) {
    trail = 3, lo = 0x90;  // excludes overlong 4-byte forms
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    trail = 3;
  } else if (b0 == 0xF4) {
    trail = 3, hi = 0x8F;  // excludes code points above U+10FFFF
  } else {
    return {Kind::INVALID, 1};
  }
  for (size_t k = 1; k <= trail; ++k) {
    if (pos + k >= s.size()) return {Kind::INCOMPLETE, k};
    const auto b = static_cast<uint8_t>(s[pos + k]);
    if (b < lo || b > hi) return {Kind::INVALID, k};
    lo = 0x80, hi = 0xBF;
  }
  return {Kind::VALID, trail + 1};
}

char32_t decode(std::string_view s, size_t pos, size_t len) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (len == 1) return b0;
  char32_t cp = b0 & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + k]) & 0x3F);
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace llmserve::tok::utf8
