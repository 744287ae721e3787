// Byte-level BPE on hand-built vocabularies: merge order, pre-tokenizer
// families, ignore_merges, special tokens and lossless round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "synthetic_vocab.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::tok {
namespace {

using namespace std::string_literals;
using testing::bl;
using testing::BpeVocabBuilder;

std::vector<Token> bytes_of(const BpeVocabBuilder& b, std::string_view raw) {
  std::vector<Token> ids;
  for (char c : raw) ids.push_back(b.id(std::string(1, c)));
  return ids;
}

TEST(BpeTest, MergesByRankNotByPosition) {
  BpeVocabBuilder b("gpt2");
  const Token bc = b.merge("b", "c");  // rank 0 wins over the leftmost pair
  b.merge("a", "b");
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_EQ(tok->encode("abc", false), (std::vector<Token>{b.id("a"), bc}));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  BpeVocabBuilder b("gpt2");
  const Token aa = b.merge("a", "a");
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_EQ(tok->encode("aaa", false), (std::vector<Token>{aa, b.id("a")}));
  EXPECT_EQ(tok->encode("aaaa", false), (std::vector<Token>{aa, aa}));
}

TEST(BpeTest, MergesChainWithinAWordButNeverAcrossWords) {
  BpeVocabBuilder b("gpt2");
  b.merge("h", "e");
  b.merge("l", "l");
  b.merge("he", "ll");
  const Token hello = b.merge("hell", "o");
  b.merge(" ", "w");
  b.merge("o", "r");
  b.merge(" w", "or");
  b.merge(" wor", "l");
  const Token world = b.merge(" worl", "d");
  b.merge("o", " ");  // would span "hello world" if words did not bound merges
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_EQ(tok->encode("hello world", false), (std::vector<Token>{hello, world}));
  EXPECT_EQ(tok->decode(tok->encode("hello world", false)), "hello world");
}

TEST(BpeTest, UnmergeableTextFallsBackToByteSymbols) {
  BpeVocabBuilder b("gpt2");
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_EQ(tok->encode("é", false), bytes_of(b, "\xC3\xA9"));
  EXPECT_EQ(tok->piece(b.id(" ")), " ");
  EXPECT_EQ(b.vocab.texts[static_cast<size_t>(b.id(" "))], "Ġ");
  EXPECT_EQ(b.vocab.texts[static_cast<size_t>(b.id("\n"))], "Ċ");
}

TEST(BpeTest, Llama3GroupsDigitsByThreeButGpt2DoesNot) {
  // "3 4" has the best rank: inside one GPT-2 word it merges first; the
  // Llama 3 pre-tokenizer puts 3 and 4 into different words ("123", "4").
  auto build = [](const std::string& pre) {
    BpeVocabBuilder b(pre);
    b.merge("3", "4");
    b.merge("1", "2");
    b.merge("12", "3");
    return b;
  };
  const BpeVocabBuilder gpt2 = build("gpt2"), llama3 = build("llama-bpe");
  EXPECT_EQ(Tokenizer::from_vocab(gpt2.vocab)->encode("1234", false),
            (std::vector<Token>{gpt2.id("12"), gpt2.id("34")}));
  EXPECT_EQ(Tokenizer::from_vocab(llama3.vocab)->encode("1234", false),
            (std::vector<Token>{llama3.id("123"), llama3.id("4")}));
  EXPECT_EQ(Tokenizer::from_vocab(llama3.vocab)->encode("1231234", false),
            (std::vector<Token>{llama3.id("123"), llama3.id("123"), llama3.id("4")}));
}

TEST(BpeTest, Qwen2AndSmolLmSplitEveryDigit) {
  for (const std::string pre : {"qwen2", "smollm"}) {
    BpeVocabBuilder b(pre);
    b.merge("1", "2");
    auto tok = Tokenizer::from_vocab(b.vocab);
    EXPECT_EQ(tok->encode("12", false), bytes_of(b, "12")) << pre;
  }
}

TEST(BpeTest, Llama3ContractionsAreCaseInsensitive) {
  BpeVocabBuilder b("llama-bpe");
  const Token s_upper = b.merge("'", "S");
  const Token it = b.merge("I", "T");
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_EQ(tok->encode("IT'S", false), (std::vector<Token>{it, s_upper}));
  // GPT-2's contractions are lower case only: "'" and "S" are separate words.
  BpeVocabBuilder g("gpt2");
  g.merge("'", "S");
  const Token it2 = g.merge("I", "T");
  EXPECT_EQ(Tokenizer::from_vocab(g.vocab)->encode("IT'S", false),
            (std::vector<Token>{it2, g.id("'"), g.id("S")}));
}

TEST(BpeTest, Llama3IgnoreMergesTakesWholeWordTokens) {
  // "hello" is in the vocabulary but no merge leads to it.
  for (const std::string pre : {"llama-bpe", "gpt2"}) {
    BpeVocabBuilder b(pre);
    const Token hello = b.add(bl("hello"));
    auto tok = Tokenizer::from_vocab(b.vocab);
    const std::vector<Token> want = pre == "llama-bpe" ? std::vector<Token>{hello} : bytes_of(b, "hello");
    EXPECT_EQ(tok->encode("hello", false), want) << pre;
  }
}

TEST(BpeTest, UnknownPreTokenizerFallsBackToGpt2) {
  BpeVocabBuilder b("no-such-pre");
  b.merge("1", "2");
  b.merge("12", "3");
  b.merge("123", "4");
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_EQ(tok->encode("1234", false), (std::vector<Token>{b.id("1234")}));
}

TEST(BpeTest, SpecialTokensNeedParseSpecial) {
  BpeVocabBuilder b("llama-bpe");
  const Token begin = b.add("<|begin_of_text|>", TokenType::CONTROL);
  const Token eot = b.add("<|eot_id|>", TokenType::CONTROL);
  b.vocab.bos = begin;
  b.vocab.add_bos = true;
  const Token hi = b.merge("h", "i");
  auto tok = Tokenizer::from_vocab(b.vocab);

  EXPECT_EQ(tok->encode("hi<|eot_id|>", true, true), (std::vector<Token>{begin, hi, eot}));
  const std::vector<Token> raw = tok->encode("hi<|eot_id|>", false, false);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), eot), 0);
  EXPECT_EQ(tok->decode(raw), "hi<|eot_id|>");
  EXPECT_EQ(tok->piece(eot), "");
  EXPECT_EQ(tok->piece(eot, true), "<|eot_id|>");
  EXPECT_EQ(tok->decode(tok->encode("hi<|eot_id|>", true, true)), "hi");
}

TEST(BpeTest, LongestSpecialTokenWins) {
  BpeVocabBuilder b("gpt2");
  const Token shorter = b.add("<|x", TokenType::CONTROL);
  const Token longer = b.add("<|x|>", TokenType::CONTROL);
  const Token user = b.add("<tool>", TokenType::USER_DEFINED);
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_EQ(tok->encode("<|x|><|x", false, true), (std::vector<Token>{longer, shorter}));
  EXPECT_EQ(tok->encode("a<tool>", false, true), (std::vector<Token>{b.id("a"), user}));
  EXPECT_EQ(tok->piece(user), "<tool>");  // user-defined text is stored as plain text
}

TEST(BpeTest, EndOfGenerationSet) {
  BpeVocabBuilder b("llama-bpe");
  const Token eos = b.add("<|end_of_text|>", TokenType::CONTROL);
  const Token eot = b.add("<|eot_id|>", TokenType::CONTROL);
  const Token im_end = b.add("<|im_end|>", TokenType::CONTROL);
  const Token eom = b.add("<|python_tag|>", TokenType::CONTROL);
  const Token other = b.add("<|start_header_id|>", TokenType::CONTROL);
  const Token plain = b.add(bl("<|end|>"));  // a normal token spelling a marker is not one
  b.vocab.eos = eos;
  b.vocab.eom = eom;
  auto tok = Tokenizer::from_vocab(b.vocab);
  EXPECT_TRUE(tok->is_end_of_generation(eos));
  EXPECT_TRUE(tok->is_end_of_generation(eot));
  EXPECT_TRUE(tok->is_end_of_generation(im_end));
  EXPECT_TRUE(tok->is_end_of_generation(eom));
  EXPECT_FALSE(tok->is_end_of_generation(other));
  EXPECT_FALSE(tok->is_end_of_generation(plain));
  EXPECT_FALSE(tok->is_end_of_generation(b.id("a")));
  EXPECT_EQ(tok->eos(), eos);
  EXPECT_EQ(tok->bos(), -1);
  EXPECT_FALSE(tok->add_bos_by_default());
  EXPECT_FALSE(tok->adds_space_prefix());
}

class BpeRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(BpeRoundTrip, AnyBytesDecodeToThemselves) {
  BpeVocabBuilder b(GetParam());
  b.merge(" ", "t");
  b.merge(" t", "h");
  b.merge(" th", "e");
  b.merge("\xC3", "\xA9");
  b.merge("1", "2");
  auto tok = Tokenizer::from_vocab(b.vocab);
  const std::vector<std::string> texts = {
      "", " ", "   ", "\t\n\r\n", "Hello, World! It's the 1234567 test.", "café déjà vu",
      "日本語のテキスト", "emoji 🦙🚀 and ZWJ 😶\u200d🌫️", "ctrl \x01\x02\x7f end", "bad \xff\xfe utf8 \xc3",
      "\xed\xa0\x80 surrogate \xf4\x90\x80\x80 too big", "nul\0inside"s};
  for (const std::string& s : texts) {
    EXPECT_EQ(tok->decode(tok->encode(s, false)), s) << GetParam() << ": " << s;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    ASSERT_EQ(tok->decode(tok->encode(s, false)), s) << GetParam();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, BpeRoundTrip,
                         ::testing::Values("gpt2", "llama-bpe", "qwen2", "smollm", "default"));

TEST(BpeTest, LongInputsEncodeInLinearishTime) {
  BpeVocabBuilder b("llama-bpe");
  b.merge("a", "a");
  b.merge(" ", " ");
  auto tok = Tokenizer::from_vocab(b.vocab);
  for (const char c : {'a', ' ', '1', '\n'}) {
    const std::string s(1 << 18, c);  // one huge pre-tokenizer word
    EXPECT_EQ(tok->decode(tok->encode(s, false)), s);
  }
}

TEST(BpeTest, MissingByteSymbolUsesUnknownOrThrows) {
  Vocab v;
  v.source = "tiny";
  v.kind = ModelKind::BYTE_BPE;
  v.texts = {"a", "b"};
  auto tok = Tokenizer::from_vocab(v);
  EXPECT_EQ(tok->encode("ab", false), (std::vector<Token>{0, 1}));
  EXPECT_THROW(tok->encode("c", false), Error);
  v.texts.push_back("<unk>");
  v.types = {TokenType::NORMAL, TokenType::NORMAL, TokenType::UNKNOWN};
  tok = Tokenizer::from_vocab(v);
  EXPECT_EQ(tok->encode("ac", false), (std::vector<Token>{0, 2}));
  EXPECT_EQ(tok->decode({0, 2}), "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace llmserve::tok
