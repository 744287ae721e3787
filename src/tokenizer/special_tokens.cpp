#include "tokenizer/special_tokens.h"

#include <algorithm>
#include <cstdint>

namespace llmserve::tok {

SpecialTokens::SpecialTokens(const std::vector<std::string>& texts, const std::vector<TokenType>& types) {
  for (size_t id = 0; id < texts.size(); ++id) {
    const TokenType t = types[id];
    const bool special = t == TokenType::CONTROL || t == TokenType::USER_DEFINED || t == TokenType::UNKNOWN;
    if (!special || texts[id].empty()) continue;
    by_first_byte_[static_cast<uint8_t>(texts[id][0])].push_back({texts[id], static_cast<Token>(id)});
  }
  for (auto& bucket : by_first_byte_) {
    // Stable: of two tokens with the same text the lower id wins.
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });
  }
}

std::vector<SpecialTokens::Fragment> SpecialTokens::split(std::string_view text, std::span<const TextRange> as_text) const {
  std::vector<Fragment> out;
  size_t plain_start = 0;
  size_t range = 0;  // the first range of as_text that ends after pos
  for (size_t pos = 0; pos < text.size();) {
    while (range < as_text.size() && as_text[range].end <= pos) ++range;
    const auto overlaps_as_text = [&](size_t size) { return range < as_text.size() && as_text[range].begin < pos + size; };
    const Candidate* hit = nullptr;
    for (const Candidate& c : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      if (text.substr(pos).starts_with(c.text) && !overlaps_as_text(c.text.size())) {
        hit = &c;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > plain_start) out.push_back({text.substr(plain_start, pos - plain_start), -1});
    out.push_back({text.substr(pos, hit->text.size()), hit->id});
    pos += hit->text.size();
    plain_start = pos;
  }
  if (plain_start < text.size()) out.push_back({text.substr(plain_start), -1});
  return out;
}

}  // namespace llmserve::tok
