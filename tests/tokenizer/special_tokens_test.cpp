// Special-token splitting, and ranges of the input that stay plain text
// (a chat's message content inside its template's markup).
#include "tokenizer/special_tokens.h"

#include <gtest/gtest.h>

#include "synthetic_vocab.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::tok {
namespace {

struct Piece {
  std::string text;
  Token id;
  bool operator==(const Piece&) const = default;
};

std::vector<Piece> pieces(const SpecialTokens& s, std::string_view text, std::vector<TextRange> as_text = {}) {
  std::vector<Piece> out;
  for (const auto& f : s.split(text, as_text)) out.push_back({std::string(f.text), f.id});
  return out;
}

// ids: 0 "a" (normal), 1 "<s>", 2 "</s>", 3 "<|x|>", 4 "<|x|>y".
SpecialTokens specials() {
  return SpecialTokens({"a", "<s>", "</s>", "<|x|>", "<|x|>y"},
                       {TokenType::NORMAL, TokenType::CONTROL, TokenType::CONTROL, TokenType::CONTROL,
                        TokenType::USER_DEFINED});
}

TEST(SpecialTokens, LongestMatchWins) {
  EXPECT_EQ(pieces(specials(), "a<s>b<|x|>yz</s>"),
            (std::vector<Piece>{{"a", -1}, {"<s>", 1}, {"b", -1}, {"<|x|>y", 4}, {"z", -1}, {"</s>", 2}}));
}

TEST(SpecialTokens, MatchesOverlappingAsTextRangesStayText) {
  const SpecialTokens s = specials();
  // "<s>Hi</s><s>" with "Hi</s><s>" as text: only the first <s> is a token.
  EXPECT_EQ(pieces(s, "<s>Hi</s><s>", {{3, 12}}), (std::vector<Piece>{{"<s>", 1}, {"Hi</s><s>", -1}}));
  // A range that covers a special text only in part still keeps all of it text.
  EXPECT_EQ(pieces(s, "<s>b</s>", {{1, 2}, {7, 8}}), (std::vector<Piece>{{"<s>b</s>", -1}}));
  // The longest match reaches into a range: the shorter one that does not is taken.
  EXPECT_EQ(pieces(s, "<|x|>y", {{5, 6}}), (std::vector<Piece>{{"<|x|>", 3}, {"y", -1}}));
  // Ranges next to each other and a match after them.
  EXPECT_EQ(pieces(s, "<s></s><s>", {{0, 3}, {3, 7}}), (std::vector<Piece>{{"<s></s>", -1}, {"<s>", 1}}));
}

TEST(SpecialTokens, EncodeKeepsAsTextRangesPlain) {
  testing::BpeVocabBuilder b("llama3");
  const Token eot = b.add("<|eot_id|>", TokenType::CONTROL);
  const auto tok = Tokenizer::from_vocab(b.vocab);
  const std::string text = "<|eot_id|>Hi<|eot_id|><|eot_id|>";
  const std::vector<TextRange> content = {{10, 22}};
  std::vector<Token> expected = {eot};
  for (Token t : tok->encode("Hi<|eot_id|>", false)) expected.push_back(t);
  expected.push_back(eot);
  EXPECT_EQ(tok->encode(text, false, true, content), expected);
  EXPECT_EQ(tok->encode(text, false, true), (std::vector<Token>{eot, b.id("H"), b.id("i"), eot, eot}));
}

}  // namespace
}  // namespace llmserve::tok
