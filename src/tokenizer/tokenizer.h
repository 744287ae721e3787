#pragma once
// Tokenizers built from GGUF metadata (tokenizer.ggml.*):
//   model "llama": SentencePiece-style BPE over scores, with byte fallback;
//   model "gpt2":  byte-level BPE over merges, pre-tokenizer from tokenizer.ggml.pre.
// A Tokenizer is immutable after construction; encode/decode/piece may be
// called from several threads at once.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/special_tokens.h"
#include "tokenizer/vocab.h"

namespace llmserve::gguf {
class File;
}

namespace llmserve::tok {

class Tokenizer {
 public:
  // Throws Error naming the file and the missing / malformed key.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  // Same checks and errors as from_gguf, for a vocabulary built in memory.
  static std::unique_ptr<Tokenizer> from_vocab(Vocab vocab);
  virtual ~Tokenizer() = default;

  // add_bos: prepend BOS when the model has one (callers pass
  // add_bos_by_default() unless told otherwise).
  // parse_special: text of control / user-defined tokens such as
  // "<|im_start|>" becomes that token, longest match first (true for chat
  // templates; false for raw user text, which is then tokenized as plain text
  // so that decode(encode(s)) == s for any bytes s). With parse_special,
  // special text overlapping a range of `as_text` (sorted, disjoint) stays
  // text: a chat's message content inside its template's markup.
  std::vector<Token> encode(std::string_view text, bool add_bos, bool parse_special = false,
                            std::span<const TextRange> as_text = {}) const;

  // Where `text` spells special tokens (what encode's parse_special finds).
  const SpecialTokens& special_tokens() const { return specials_; }

  // The bytes a token stands for in output text (byte tokens -> one raw byte,
  // "▁" -> ' ', byte-level BPE symbols -> bytes). Control tokens -> "" and
  // unknown tokens -> U+FFFD, unless `render_special` asks for their text.
  // Not always valid UTF-8 on its own: see StreamDecoder. Throws Error for an
  // id outside the vocabulary.
  std::string piece(Token id, bool render_special = false) const;

  // Whole-sequence decode. BOS produces nothing, and SentencePiece's prefix
  // space is removed from the first piece and from the piece after each BOS,
  // so decode(encode(s)) == s. Returns raw bytes (no UTF-8 repair).
  std::string decode(const std::vector<Token>& ids) const;

  int n_vocab() const { return static_cast<int>(texts_.size()); }
  // Both throw Error for an id outside the vocabulary.
  const std::string& text(Token id) const;  // vocab string as stored
  TokenType type(Token id) const;
  Token bos() const { return bos_; }  // -1 when the model has none
  Token eos() const { return eos_; }
  bool add_bos_by_default() const { return add_bos_; }
  bool is_end_of_generation(Token id) const;  // eos, eot, eom, <|im_end|>, ...
  const std::vector<Token>& end_of_generation_tokens() const { return end_of_generation_; }
  bool adds_space_prefix() const { return add_space_prefix_; }

 protected:
  explicit Tokenizer(const Vocab& vocab);

  // Appends the tokens of text that holds no special tokens. `segment_start`
  // is true at the start of the input and right after a special token.
  virtual void encode_text(std::string_view text, bool segment_start, std::vector<Token>& out) const = 0;

  // Fills pieces_: called by each derived constructor with its text -> bytes rule.
  template <class ToBytes>
  void build_pieces(ToBytes&& to_bytes);

  std::string source_;  // file name for error messages
  std::vector<std::string> texts_;
  std::vector<TokenType> types_;
  Token bos_ = -1, eos_ = -1, unk_ = -1;

 private:
  friend class StreamDecoder;
  // The piece as it appears in output; `first` strips SentencePiece's prefix space.
  std::string_view output_piece(Token id, bool first) const;
  bool is_unknown(Token id) const { return id == unk_ || types_[static_cast<size_t>(id)] == TokenType::UNKNOWN; }
  void check_id(Token id) const;

  std::vector<std::string> pieces_;
  std::vector<Token> end_of_generation_;
  SpecialTokens specials_;
  bool add_bos_ = false;
  bool add_space_prefix_ = false;
};

template <class ToBytes>
void Tokenizer::build_pieces(ToBytes&& to_bytes) {
  pieces_.resize(texts_.size());
  for (size_t id = 0; id < texts_.size(); ++id) {
    const TokenType t = types_[id];
    if (t == TokenType::CONTROL || is_unknown(static_cast<Token>(id))) continue;  // rendered on demand
    pieces_[id] = to_bytes(texts_[id], t);
  }
}

// Incremental detokenizer for streaming: push() returns the text that is now
// complete. Bytes of a UTF-8 character split across tokens are held back
// until the character completes, so output is always valid UTF-8; bytes that
// can never complete a character come out as U+FFFD. flush() returns what
// remains, with an unfinished character replaced by U+FFFD.
class StreamDecoder {
 public:
  // first_after_bos: the first pushed token starts the text (its SentencePiece
  // prefix space is dropped); false when continuing after a prompt.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool first_after_bos = true)
      : tok_(tokenizer), at_start_(first_after_bos) {}
  std::string push(Token id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
  bool at_start_;
};

}  // namespace llmserve::tok
