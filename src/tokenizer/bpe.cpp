#include "tokenizer/bpe.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/byte_token.h"

namespace llmserve::tok {
namespace {

uint64_t pair_key(Token left, Token right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

constexpr Token kMissing = -1;  // a byte whose symbol is not in the vocabulary
constexpr Token kAbsorbed = -2;  // merged into its left neighbour

struct Symbol {
  Token id;
  int32_t prev, next;
  uint8_t byte;  // the first byte, for reporting a missing one
};

struct Candidate {
  int32_t rank;
  int32_t left, right;
  Token left_id, right_id;  // as queued: any change later means it is stale
  Token result;
};

struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

struct BpeTokenizer::Scratch {
  std::vector<Symbol> syms;
  std::vector<Candidate> heap;
  std::string mapped;
};

BpeTokenizer::BpeTokenizer(const Vocab& vocab)
    : Tokenizer(vocab), spec_(pretokenizer_spec(vocab.pre, vocab.source)), pre_(spec_, vocab.source) {
  for (size_t id = 0; id < texts_.size(); ++id) {
    if (types_[id] == TokenType::NORMAL) ids_.emplace(texts_[id], static_cast<Token>(id));
  }
  for (unsigned b = 0; b < 256; ++b) {
    const auto it = ids_.find(byte_level::symbol(static_cast<uint8_t>(b)));
    byte_ids_[b] = it == ids_.end() ? kMissing : it->second;
  }
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    const size_t space = m.find(' ');  // check_vocab guarantees one
    const std::string_view left(m.data(), space), right(m.data() + space + 1, m.size() - space - 1);
    const auto l = ids_.find(left), r = ids_.find(right);
    // A merge whose parts or result are not normal tokens can never produce
    // an id: skip it rather than fail on an otherwise usable vocabulary.
    const auto result = ids_.find(std::string(left) + std::string(right));
    if (l == ids_.end() || r == ids_.end() || result == ids_.end()) continue;
    merges_.emplace(pair_key(l->second, r->second), Merge{static_cast<int32_t>(rank), result->second});
  }
  build_pieces([](const std::string& text, TokenType t) {
    if (t == TokenType::USER_DEFINED) return text;  // converters store these as plain text
    if (t == TokenType::BYTE) {
      if (auto b = parse_byte_token(text)) return std::string(1, static_cast<char>(*b));
    }
    return byte_level::decode(text);
  });
}

void BpeTokenizer::encode_text(std::string_view text, bool /*segment_start*/, std::vector<Token>& out) const {
  Scratch scratch;
  for (std::string_view word : pre_.split(text)) encode_word(word, scratch, out);
}

void BpeTokenizer::encode_word(std::string_view word, Scratch& s, std::vector<Token>& out) const {
  if (spec_.ignore_merges) {
    s.mapped.clear();
    byte_level::encode(word, s.mapped);
    if (const auto it = ids_.find(s.mapped); it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }

  s.syms.clear();
  for (size_t i = 0; i < word.size(); ++i) {
    const auto b = static_cast<uint8_t>(word[i]);
    const auto idx = static_cast<int32_t>(i);
    s.syms.push_back({byte_ids_[b], idx - 1, idx + 1, b});
  }
  s.syms.back().next = -1;

  // A binary heap kept in the scratch buffer (std::priority_queue would not
  // hand its storage back for the next word).
  s.heap.clear();
  auto try_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = s.syms[left].next;
    if (right < 0) return;
    const Token l = s.syms[left].id, r = s.syms[right].id;
    if (l < 0 || r < 0) return;
    const auto it = merges_.find(pair_key(l, r));
    if (it == merges_.end()) return;
    s.heap.push_back({it->second.rank, left, right, l, r, it->second.result});
    std::push_heap(s.heap.begin(), s.heap.end(), LowerPriority{});
  };
  for (int32_t i = 0; i < static_cast<int32_t>(s.syms.size()); ++i) try_pair(i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), LowerPriority{});
    const Candidate c = s.heap.back();
    s.heap.pop_back();
    Symbol& l = s.syms[c.left];
    if (l.id != c.left_id || l.next != c.right || s.syms[c.right].id != c.right_id) continue;  // stale
    Symbol& r = s.syms[c.right];
    l.id = c.result;
    r.id = kAbsorbed;
    l.next = r.next;
    if (r.next >= 0) s.syms[r.next].prev = c.left;
    try_pair(l.prev);
    try_pair(c.left);
  }

  for (int32_t i = 0; i >= 0; i = s.syms[i].next) {
    const Symbol& sym = s.syms[i];
    if (sym.id >= 0) {
      out.push_back(sym.id);
    } else if (unk_ >= 0) {
      out.push_back(unk_);
    } else {
      throw Error(source_ + ": cannot encode byte 0x" + "0123456789ABCDEF"[sym.byte >> 4] +
                  "0123456789ABCDEF"[sym.byte & 15] + ": the vocabulary has no token for it");
    }
  }
}

}  // namespace llmserve::tok
