#pragma once
// GPT-2's reversible byte <-> character mapping used by byte-level BPE
// vocabularies: every byte is shown as a printable code point so that merges
// and vocab entries are plain text (e.g. ' ' is stored as "Ġ", '\n' as "Ċ").
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace llmserve::tok::byte_level {

// The UTF-8 text of the character that stands for `byte`.
const std::string& symbol(uint8_t byte);

// Appends the byte-level form of raw bytes.
void encode(std::string_view bytes, std::string& out);

// The byte a character stands for, or nullopt for a character outside the map.
std::optional<uint8_t> byte_of(char32_t cp);

// Vocab text back to raw bytes; characters outside the map are kept as they are.
std::string decode(std::string_view text);

}  // namespace llmserve::tok::byte_level
