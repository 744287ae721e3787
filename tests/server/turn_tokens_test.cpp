// TurnTokens: a remembered answer's tokens replace their re-encoding only
// where the new prompt repeats that prompt and answer at token boundaries.
#include "server/turn_tokens.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "gguf/file.h"
#include "test_models.h"

namespace llmserve::server {
namespace {

// The answer spelled in byte tokens: the same text, surely not how the
// tokenizer would encode it.
std::vector<int32_t> as_bytes(const tok::Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> out;
  for (unsigned char c : text) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", c);
    for (int32_t id = 0; id < tok.n_vocab(); ++id)
      if (tok.text(id) == name) out.push_back(id);
  }
  return out;
}

TEST(TurnTokens, SplicesARememberedAnswerAtTokenBoundaries) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tok::Tokenizer::from_gguf(file);
  const std::string prompt_text = "User: Tell me a story.\nAssistant:";
  const std::string answer = " The cat sat.";
  const std::string rest = "\nUser: And then?\nAssistant:";
  const auto prompt = tok->encode(prompt_text, true);
  const auto generated = as_bytes(*tok, answer);
  ASSERT_EQ(generated.size(), answer.size());

  TurnTokens turns(*tok);
  const std::string text = prompt_text + answer + rest;
  const auto canonical = tok->encode(text, true);
  EXPECT_EQ(turns.splice(text, answer, canonical), canonical);  // nothing remembered yet
  turns.remember(prompt_text, prompt, generated);

  const auto spliced = turns.splice(text, answer, canonical);
  ASSERT_NE(spliced, canonical);
  std::vector<int32_t> head = prompt;
  head.insert(head.end(), generated.begin(), generated.end());
  ASSERT_GE(spliced.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), spliced.begin()));
  EXPECT_EQ(tok->decode(spliced), tok->decode(canonical));  // the same text

  // Another answer, another prompt before it, or text that does not go on
  // from the answer at a token boundary: unchanged.
  EXPECT_EQ(turns.splice(text, " The dog sat.", canonical), canonical);
  const std::string other = "User: Hi.\nAssistant:" + answer + rest;
  EXPECT_EQ(turns.splice(other, answer, tok->encode(other, true)), tok->encode(other, true));
  const std::string glued = prompt_text + answer + "s" + rest;  // "sat.s": the answer ends mid-token
  const auto glued_tokens = tok->encode(glued, true);
  const auto glued_spliced = turns.splice(glued, answer, glued_tokens);
  EXPECT_EQ(tok->decode(glued_spliced), tok->decode(glued_tokens));
}

TEST(TurnTokens, ForgetsTheOldestBeyondItsCapacity) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tok::Tokenizer::from_gguf(file);
  TurnTokens turns(*tok, 2);
  const std::string p = "Q:";
  const auto prompt = tok->encode(p, true);
  for (const char* a : {" one", " two", " three"}) turns.remember(p, prompt, as_bytes(*tok, a));
  for (const char* a : {" one", " two", " three"}) {
    const std::string text = p + a + "\nQ:";
    const auto canonical = tok->encode(text, true);
    EXPECT_EQ(turns.splice(text, a, canonical) != canonical, std::string(a) != " one") << a;
  }
}

}  // namespace
}  // namespace llmserve::server
