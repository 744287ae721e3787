#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <string>

#include "core/error.h"
#include "tokenizer/byte_token.h"
#include "tokenizer/utf8.h"

namespace llmserve::tok {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.substr(pos).starts_with(kSpaceMark)) {
      out += ' ';
      pos += kSpaceMark.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

// A run of the normalized text; merged symbols grow to the right and the
// absorbed one is left with len 0.
struct Symbol {
  uint32_t start, len;
  int32_t prev, next;
  bool literal;  // a U+2581 typed in the input: kept apart so it does not decode as ' '
};

struct Bigram {
  float score;
  int32_t left;
  uint32_t len;  // left.len + right.len when queued: a mismatch later means it is stale
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmTokenizer::SpmTokenizer(const Vocab& vocab) : Tokenizer(vocab) {
  byte_ids_.fill(-1);
  scores_ = vocab.scores.empty() ? std::vector<float>(texts_.size(), 0.0f) : vocab.scores;
  for (size_t id = 0; id < texts_.size(); ++id) {
    const TokenType t = types_[id];
    if (t == TokenType::NORMAL || t == TokenType::USER_DEFINED) {
      ids_.emplace(texts_[id], static_cast<Token>(id));  // the lowest id wins for a duplicate text
    } else if (t == TokenType::BYTE) {
      if (auto b = parse_byte_token(texts_[id]); b && byte_ids_[*b] < 0) byte_ids_[*b] = static_cast<Token>(id);
    }
  }
  literal_marks_as_bytes_ = has_byte_tokens(kSpaceMark);
  build_pieces([](const std::string& text, TokenType t) {
    if (t == TokenType::BYTE) {
      if (auto b = parse_byte_token(text)) return std::string(1, static_cast<char>(*b));
    }
    return unescape_spaces(text);
  });
}

void SpmTokenizer::encode_text(std::string_view text, bool segment_start, std::vector<Token>& out) const {
  // Normalize and split into characters in one pass. Invalid UTF-8 splits
  // into its maximal invalid parts: never a piece, so they reach byte
  // fallback and come back unchanged from decode.
  std::string norm;
  norm.reserve(text.size() + kSpaceMark.size());
  std::vector<Symbol> syms;
  syms.reserve(text.size() + 1);
  auto add = [&](std::string_view bytes, bool literal) {
    const auto i = static_cast<int32_t>(syms.size());
    syms.push_back({static_cast<uint32_t>(norm.size()), static_cast<uint32_t>(bytes.size()), i - 1, i + 1, literal});
    norm += bytes;
  };
  if (adds_space_prefix() && segment_start) add(kSpaceMark, false);
  for (size_t pos = 0; pos < text.size();) {
    if (text[pos] == ' ') {
      add(kSpaceMark, false);
      ++pos;
      continue;
    }
    const std::string_view ch = text.substr(pos, utf8::scan(text, pos).len);
    add(ch, literal_marks_as_bytes_ && ch == kSpaceMark);
    pos += ch.size();
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  const std::string_view view = norm;

  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
  auto try_pair = [&](int32_t left) {
    if (left < 0 || syms[left].next < 0) return;
    const Symbol& l = syms[left];
    const Symbol& r = syms[l.next];
    if (l.literal || r.literal) return;
    const uint32_t len = l.len + r.len;
    const auto it = ids_.find(view.substr(l.start, len));
    if (it != ids_.end()) queue.push({scores_[it->second], left, len});
  };
  for (int32_t i = 0; i < static_cast<int32_t>(syms.size()); ++i) try_pair(i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[b.left];
    if (l.len == 0 || l.next < 0 || l.len + syms[l.next].len != b.len) continue;  // stale
    Symbol& r = syms[l.next];
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_pair(l.prev);
    try_pair(b.left);
  }

  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const Symbol& sym = syms[i];
    emit(view.substr(sym.start, sym.len), sym.literal, out);
  }
}

bool SpmTokenizer::has_byte_tokens(std::string_view bytes) const {
  return std::all_of(bytes.begin(), bytes.end(), [&](char c) { return byte_ids_[static_cast<uint8_t>(c)] >= 0; });
}

void SpmTokenizer::emit(std::string_view symbol, bool literal, std::vector<Token>& out) const {
  if (const auto it = ids_.find(symbol); !literal && it != ids_.end()) {
    out.push_back(it->second);
    return;
  }
  if (has_byte_tokens(symbol)) {
    for (char c : symbol) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  } else if (unk_ >= 0) {
    out.push_back(unk_);
  } else {
    throw Error(source_ + ": cannot encode '" + std::string(symbol) +
                "': the vocabulary has no piece, byte token or unknown token for it");
  }
}

}  // namespace llmserve::tok
