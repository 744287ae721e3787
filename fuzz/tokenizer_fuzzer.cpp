// libFuzzer target for the tokenizers: for any input text, each tokenizer
// kind (SentencePiece with byte fallback, byte-level BPE under each
// pre-tokenizer family) must give ids inside the vocabulary, decode back to
// exactly the input, stream only valid UTF-8, and survive parse_special.
// The first input byte picks the tokenizer; the rest is the text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

using namespace llmserve::tok;

void add(Vocab& v, std::string text, TokenType type) {
  v.texts.push_back(std::move(text));
  v.types.push_back(type);
}

std::unique_ptr<Tokenizer> make_spm() {
  Vocab v;
  v.source = "fuzz-spm";
  add(v, "<unk>", TokenType::UNKNOWN);
  add(v, "<s>", TokenType::CONTROL);
  add(v, "</s>", TokenType::CONTROL);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(v, name, TokenType::BYTE);
  }
  for (const char* p : {"\xE2\x96\x81", "\xE2\x96\x81t", "he", "\xE2\x96\x81the", "\xE2\x96\x81\xE2\x96\x81", "a",
                        "t", "h", "e", "\xC3\xA9"}) {
    add(v, p, TokenType::NORMAL);
  }
  for (size_t i = 0; i < v.texts.size(); ++i) v.scores.push_back(-static_cast<float>(i % 7));
  v.unk = 0, v.bos = 1, v.eos = 2;
  v.add_bos = v.add_space_prefix = true;
  return Tokenizer::from_vocab(v);
}

std::unique_ptr<Tokenizer> make_bpe(const char* pre) {
  Vocab v;
  v.source = "fuzz-bpe";
  v.kind = ModelKind::BYTE_BPE;
  v.pre = pre;
  for (int b = 0; b < 256; ++b) add(v, byte_level::symbol(static_cast<uint8_t>(b)), TokenType::NORMAL);
  auto merge = [&](const std::string& l, const std::string& r) {
    v.merges.push_back(l + " " + r);
    add(v, l + r, TokenType::NORMAL);
  };
  merge("Ġ", "t");
  merge("h", "e");
  merge("Ġt", "he");
  merge("1", "2");
  merge("12", "3");
  merge("Ã", "©");
  merge("Ġ", "Ġ");
  add(v, "<|eot_id|>", TokenType::CONTROL);
  add(v, "<tool>", TokenType::USER_DEFINED);
  return Tokenizer::from_vocab(v);
}

bool valid_utf8(const std::string& s) {
  for (size_t pos = 0; pos < s.size();) {
    const utf8::Sequence seq = utf8::scan(s, pos);
    if (seq.kind != utf8::Kind::VALID) return false;
    pos += seq.len;
  }
  return true;
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<Tokenizer>> tokenizers = [] {
    std::vector<std::unique_ptr<Tokenizer>> t;
    t.push_back(make_spm());
    for (const char* pre : {"gpt2", "llama-bpe", "qwen2", "smollm"}) t.push_back(make_bpe(pre));
    return t;
  }();
  if (size == 0) return 0;
  const Tokenizer& tok = *tokenizers[data[0] % tokenizers.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);

  const std::vector<Token> ids = tok.encode(text, true);
  for (Token id : ids) check(id >= 0 && id < tok.n_vocab());
  check(tok.decode(ids) == text);

  StreamDecoder stream(tok);
  for (Token id : ids) check(valid_utf8(stream.push(id)));
  check(valid_utf8(stream.flush()));

  for (Token id : tok.encode(text, false, true)) check(id >= 0 && id < tok.n_vocab());
  return 0;
}
