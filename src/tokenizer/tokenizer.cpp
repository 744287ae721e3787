#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "gguf/file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"

namespace llmserve::tok {
namespace {

// Turn-end markers of common chat formats. Models list only one of them as
// eos, yet emit the others at the end of a reply.
constexpr std::array<std::string_view, 7> kEndOfTurnTexts = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "<|end_of_text|>", "<end_of_turn>",
};

std::vector<TokenType> types_or_normal(const Vocab& v) {
  return v.types.empty() ? std::vector<TokenType>(v.texts.size(), TokenType::NORMAL) : v.types;
}

Token first_unknown(const std::vector<TokenType>& types) {
  const auto it = std::find(types.begin(), types.end(), TokenType::UNKNOWN);
  return it == types.end() ? -1 : static_cast<Token>(it - types.begin());
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) { return from_vocab(read_vocab(file)); }

std::unique_ptr<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  check_vocab(vocab);
  if (vocab.kind == ModelKind::SPM) return std::make_unique<SpmTokenizer>(vocab);
  return std::make_unique<BpeTokenizer>(vocab);
}

Tokenizer::Tokenizer(const Vocab& vocab)
    : source_(vocab.source),
      texts_(vocab.texts),
      types_(types_or_normal(vocab)),
      bos_(vocab.bos),
      eos_(vocab.eos),
      unk_(vocab.unk >= 0 ? vocab.unk : first_unknown(types_)),
      specials_(texts_, types_),
      add_bos_(vocab.add_bos),
      add_space_prefix_(vocab.add_space_prefix) {
  for (Token id : {vocab.eos, vocab.eot, vocab.eom}) {
    if (id >= 0) end_of_generation_.push_back(id);
  }
  for (size_t id = 0; id < texts_.size(); ++id) {
    const bool special = types_[id] == TokenType::CONTROL || types_[id] == TokenType::USER_DEFINED;
    if (special && std::find(kEndOfTurnTexts.begin(), kEndOfTurnTexts.end(), texts_[id]) != kEndOfTurnTexts.end()) {
      end_of_generation_.push_back(static_cast<Token>(id));
    }
  }
}

std::vector<Token> Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                                     std::span<const TextRange> as_text) const {
  // Symbol offsets are 32-bit and SentencePiece triples each space; nothing
  // near this size is a sensible prompt.
  constexpr size_t kMaxText = size_t{512} << 20;
  if (text.size() > kMaxText) {
    throw Error(source_ + ": cannot tokenize " + std::to_string(text.size()) + " bytes at once (limit 512 MiB)");
  }
  std::vector<Token> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  if (!parse_special) {
    if (!text.empty()) encode_text(text, true, out);
    return out;
  }
  // SentencePiece models saw each run of text between special tokens as its
  // own input, so each run gets the prefix space (llama.cpp does the same).
  bool segment_start = true;
  for (const SpecialTokens::Fragment& f : specials_.split(text, as_text)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      segment_start = true;
    } else {
      encode_text(f.text, segment_start, out);
      segment_start = false;
    }
  }
  return out;
}

void Tokenizer::check_id(Token id) const {
  if (id < 0 || static_cast<size_t>(id) >= texts_.size()) {
    throw Error(source_ + ": token id " + std::to_string(id) + " is out of range (the vocabulary has " +
                std::to_string(texts_.size()) + " tokens)");
  }
}

const std::string& Tokenizer::text(Token id) const {
  check_id(id);
  return texts_[static_cast<size_t>(id)];
}

TokenType Tokenizer::type(Token id) const {
  check_id(id);
  return types_[static_cast<size_t>(id)];
}

std::string Tokenizer::piece(Token id, bool render_special) const {
  check_id(id);
  const auto i = static_cast<size_t>(id);
  if (render_special && (types_[i] == TokenType::CONTROL || is_unknown(id))) return texts_[i];
  return std::string(output_piece(id, false));
}

std::string_view Tokenizer::output_piece(Token id, bool first) const {
  check_id(id);
  if (is_unknown(id)) return utf8::kReplacement;
  const auto i = static_cast<size_t>(id);
  std::string_view p = pieces_[i];  // empty for control tokens
  // The prefix space was added by encode (SentencePiece's dummy prefix); a
  // byte token for ' ' is real text and stays.
  if (first && add_space_prefix_ && types_[i] != TokenType::BYTE && p.starts_with(' ')) p.remove_prefix(1);
  return p;
}

std::string Tokenizer::decode(const std::vector<Token>& ids) const {
  std::string out;
  bool first = true;
  for (Token id : ids) {
    const std::string_view p = output_piece(id, first);
    if (id == bos_) {
      first = true;
      continue;
    }
    out += p;
    first = false;
  }
  return out;
}

bool Tokenizer::is_end_of_generation(Token id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
}

}  // namespace llmserve::tok
