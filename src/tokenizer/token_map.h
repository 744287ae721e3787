#pragma once
// Vocab text -> id, looked up with string_views into the text being encoded
// (no temporary strings on the hot path).
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tokenizer/vocab.h"

namespace llmserve::tok {

struct TransparentHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

using TokenMap = std::unordered_map<std::string, Token, TransparentHash, std::equal_to<>>;

}  // namespace llmserve::tok
