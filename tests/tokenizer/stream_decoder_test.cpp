// Streaming detokenization: characters split across byte tokens are held
// back until complete, output is always valid UTF-8, flush() repairs the tail.
#include <gtest/gtest.h>

#include "synthetic_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace llmserve::tok {
namespace {

bool valid_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const utf8::Sequence seq = utf8::scan(s, pos);
    if (seq.kind != utf8::Kind::VALID) return false;
    pos += seq.len;
  }
  return true;
}

// A SentencePiece vocabulary with all 256 byte tokens (ids 3 + byte) and a few pieces.
std::unique_ptr<Tokenizer> spm_with_bytes() {
  Vocab v;
  v.source = "synthetic-spm";
  v.kind = ModelKind::SPM;
  v.texts = {"<unk>", "<s>", "</s>"};
  v.types = {TokenType::UNKNOWN, TokenType::CONTROL, TokenType::CONTROL};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    v.texts.emplace_back(name);
    v.types.push_back(TokenType::BYTE);
  }
  for (const char* piece : {"\xE2\x96\x81", "\xE2\x96\x81Hi", "a"}) {
    v.texts.emplace_back(piece);
    v.types.push_back(TokenType::NORMAL);
  }
  v.scores.assign(v.texts.size(), 0.0f);
  v.unk = 0, v.bos = 1, v.eos = 2;
  v.add_bos = v.add_space_prefix = true;
  return Tokenizer::from_vocab(v);
}

constexpr Token kSpace = 259, kHi = 260;
Token byte(uint8_t b) { return 3 + b; }

TEST(StreamDecoderTest, HoldsACharacterSplitOverByteTokens) {
  auto tok = spm_with_bytes();
  StreamDecoder s(*tok);
  EXPECT_EQ(s.push(tok->bos()), "");
  EXPECT_EQ(s.push(kHi), "Hi");  // prefix space of the first piece dropped
  EXPECT_EQ(s.push(kSpace), " ");
  EXPECT_EQ(s.push(byte(0xF0)), "");
  EXPECT_EQ(s.push(byte(0x9F)), "");
  EXPECT_EQ(s.push(byte(0x98)), "");
  EXPECT_EQ(s.push(byte(0x80)), "😀");
  EXPECT_EQ(s.push(byte(0xC3)), "");
  EXPECT_EQ(s.push(byte(0xA9)), "é");
  EXPECT_EQ(s.flush(), "");
}

TEST(StreamDecoderTest, MatchesWholeDecodeAndStaysValid) {
  auto tok = spm_with_bytes();
  const std::string text = "Hi 😀 Ünïcode 日本 ✅ a";
  const std::vector<Token> ids = tok->encode(text, true);
  StreamDecoder s(*tok);
  std::string streamed;
  for (Token id : ids) {
    const std::string out = s.push(id);
    EXPECT_TRUE(valid_utf8(out));
    streamed += out;
  }
  streamed += s.flush();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(tok->decode(ids), text);
}

TEST(StreamDecoderTest, InvalidBytesBecomeReplacementCharacters) {
  auto tok = spm_with_bytes();
  StreamDecoder s(*tok, false);
  EXPECT_EQ(s.push(byte(0xFF)), "\xEF\xBF\xBD");  // can never start a character: out at once
  EXPECT_EQ(s.push(byte(0xE2)), "");
  EXPECT_EQ(s.push(byte('a')), "\xEF\xBF\xBD" "a");  // the held prefix is broken by 'a'
  EXPECT_EQ(s.push(byte(0xE2)), "");
  EXPECT_EQ(s.push(byte(0x82)), "");
  EXPECT_EQ(s.flush(), "\xEF\xBF\xBD");  // an unfinished character at the end
  EXPECT_EQ(s.flush(), "");
}

TEST(StreamDecoderTest, PrefixSpaceOnlyAtStartAndAfterBos) {
  auto tok = spm_with_bytes();
  StreamDecoder fresh(*tok, true);
  EXPECT_EQ(fresh.push(kHi), "Hi");
  EXPECT_EQ(fresh.push(kHi), " Hi");
  EXPECT_EQ(fresh.push(tok->bos()), "");
  EXPECT_EQ(fresh.push(kHi), "Hi");

  StreamDecoder continuing(*tok, false);
  EXPECT_EQ(continuing.push(kHi), " Hi");

  // A byte token for ' ' is real text, never the dummy prefix.
  StreamDecoder bytes(*tok, true);
  EXPECT_EQ(bytes.push(byte(' ')), " ");
}

TEST(StreamDecoderTest, ByteLevelBpeSplitsCharactersToo) {
  testing::BpeVocabBuilder b("gpt2");
  auto tok = Tokenizer::from_vocab(b.vocab);
  StreamDecoder s(*tok);
  std::string out;
  for (Token id : tok->encode("€!", false)) {  // E2 82 AC 21, one byte token each
    const std::string part = s.push(id);
    EXPECT_TRUE(valid_utf8(part));
    out += part;
  }
  EXPECT_EQ(out + s.flush(), "€!");
  // No prefix-space stripping for byte-level BPE.
  StreamDecoder t(*tok);
  EXPECT_EQ(t.push(b.id(" ")), " ");
}

}  // namespace
}  // namespace llmserve::tok
