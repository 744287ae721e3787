#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace llmserve::tok::byte_level {
namespace {

// Bytes that are printable (and not a space) in Latin-1 map to their own code
// point; the other 68 bytes map, in increasing byte order, to U+0100 onwards.
constexpr bool maps_to_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_text;
  std::array<int16_t, 256 + 68> to_byte{};  // indexed by code point; -1 = not a mapped character

  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      to_cp[b] = maps_to_itself(b) ? b : next++;
      utf8::append(to_text[b], to_cp[b]);
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& symbol(uint8_t byte) { return tables().to_text[byte]; }

void encode(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (char c : bytes) out += t.to_text[static_cast<uint8_t>(c)];
}

std::optional<uint8_t> byte_of(char32_t cp) {
  const Tables& t = tables();
  if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(t.to_byte[cp]);
}

std::string decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Sequence seq = utf8::scan(text, pos);
    std::optional<uint8_t> byte;
    if (seq.kind == utf8::Kind::VALID) byte = byte_of(utf8::decode(text, pos, seq.len));
    if (byte) {
      out += static_cast<char>(*byte);
    } else {
      out.append(text, pos, seq.len);
    }
    pos += seq.len;
  }
  return out;
}

}  // namespace llmserve::tok::byte_level
