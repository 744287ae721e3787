// The pre-tokenizer families split text the way their tokenizer.json
// patterns do; the expectations follow from reading each pattern.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/pretokenizer.h"

namespace llmserve::tok {
namespace {

using Words = std::vector<std::string>;

Words split(const std::string& pre, std::string_view text) {
  Pretokenizer p(pretokenizer_spec(pre, "test"), "test");
  Words out;
  for (std::string_view w : p.split(text)) out.emplace_back(w);
  return out;
}

TEST(PretokenizerTest, Gpt2) {
  EXPECT_EQ(split("gpt2", "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split("gpt2", "it's IT'S"), (Words{"it", "'s", " IT", "'", "S"}));
  EXPECT_EQ(split("gpt2", "a   b"), (Words{"a", "  ", " b"}));  // \s+(?!\S) leaves one space to the word
  EXPECT_EQ(split("gpt2", "x 12345 y"), (Words{"x", " 12345", " y"}));
  EXPECT_EQ(split("gpt2", " this is 🦙.cpp"), (Words{" this", " is", " 🦙.", "cpp"}));
  EXPECT_EQ(split("gpt2", "$hello\n\n"), (Words{"$", "hello", "\n\n"}));
  EXPECT_EQ(split("gpt2", "trailing  "), (Words{"trailing", "  "}));
  EXPECT_TRUE(split("gpt2", "").empty());
}

TEST(PretokenizerTest, Llama3) {
  EXPECT_EQ(split("llama-bpe", "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split("llama-bpe", "IT'S it'll"), (Words{"IT", "'S", " it", "'ll"}));
  EXPECT_EQ(split("llama-bpe", "1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(split("llama-bpe", "x 12345"), (Words{"x", " ", "123", "45"}));
  EXPECT_EQ(split("llama-bpe", "$hello"), (Words{"$hello"}));  // one non-letter may lead a word
  EXPECT_EQ(split("llama-bpe", "a\n\nb"), (Words{"a", "\n\n", "b"}));
  EXPECT_EQ(split("llama-bpe", "a  \n b"), (Words{"a", "  \n", " b"}));
  EXPECT_EQ(split("llama-bpe", "我想在apple工作1314151天～"),
            (Words{"我想在apple工作", "131", "415", "1", "天", "～"}));
  EXPECT_EQ(split("llama-bpe", "héllo wörld"), (Words{"héllo", " wörld"}));
  EXPECT_EQ(split("llama-bpe", "x!!!\n\ny"), (Words{"x", "!!!\n\n", "y"}));
}

TEST(PretokenizerTest, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "ab 123"), (Words{"ab", " ", "1", "2", "3"}));
  EXPECT_EQ(split("qwen2", "IT'S"), (Words{"IT", "'S"}));
}

TEST(PretokenizerTest, SmolLmSplitsDigitsThenGpt2) {
  EXPECT_EQ(split("smollm", "abc123 x"), (Words{"abc", "1", "2", "3", " x"}));
  EXPECT_EQ(split("smollm", "it's"), (Words{"it", "'s"}));
}

TEST(PretokenizerTest, UnknownAndAbsentNamesUseGpt2) {
  EXPECT_EQ(pretokenizer_spec("", "t").name, "gpt2");
  EXPECT_EQ(pretokenizer_spec("default", "t").name, "gpt2");
  EXPECT_EQ(pretokenizer_spec("martian", "t").name, "gpt2");
  EXPECT_EQ(pretokenizer_spec("llama3", "t").name, "llama-bpe");
  EXPECT_TRUE(pretokenizer_spec("llama-bpe", "t").ignore_merges);
  EXPECT_FALSE(pretokenizer_spec("qwen2", "t").ignore_merges);
}

TEST(PretokenizerTest, InvalidUtf8LandsBetweenWords) {
  EXPECT_EQ(split("gpt2", "a\xff" "b"), (Words{"a", "\xff", "b"}));
  EXPECT_EQ(split("llama-bpe", "ab\xc3"), (Words{"ab", "\xc3"}));
}

TEST(PretokenizerTest, WordsCoverEveryByteInOrder) {
  std::mt19937 rng(11);
  for (const std::string pre : {"gpt2", "llama-bpe", "qwen2", "smollm"}) {
    Pretokenizer p(pretokenizer_spec(pre, "test"), "test");
    for (int i = 0; i < 300; ++i) {
      std::string s(rng() % 40, '\0');
      for (char& c : s) c = "ab1 \n'\xc3\xa9\xff!"[rng() % 11];
      std::string joined;
      for (std::string_view w : p.split(s)) {
        ASSERT_FALSE(w.empty());
        joined += w;
      }
      ASSERT_EQ(joined, s) << pre;
    }
  }
}

}  // namespace
}  // namespace llmserve::tok
