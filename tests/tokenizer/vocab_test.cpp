// Reading tokenizer.ggml.* from GGUF: vocab-only files work, and every
// missing or malformed key gives an Error naming the file and the key.
#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "gguf/file.h"
#include "gguf/writer.h"
#include "temp_file.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::tok {
namespace {

using gguf::ValueType;

gguf::Value strings(const std::vector<std::string>& items) {
  std::vector<gguf::Value> values;
  for (const std::string& s : items) values.push_back(gguf::make_string(s));
  return gguf::make_array(ValueType::STRING, std::move(values));
}

gguf::Value floats(const std::vector<float>& items) {
  std::vector<gguf::Value> values;
  for (float f : items) values.push_back(gguf::make_f32(f));
  return gguf::make_array(ValueType::FLOAT32, std::move(values));
}

gguf::Value ints(const std::vector<int32_t>& items) {
  std::vector<gguf::Value> values;
  for (int32_t i : items) values.push_back(gguf::make_i32(i));
  return gguf::make_array(ValueType::INT32, std::move(values));
}

// A small vocab-only SentencePiece file (no tensors): <unk> <s> </s> ▁ a b ▁a ab.
gguf::Writer spm_writer() {
  gguf::Writer w;
  w.set("general.architecture", gguf::make_string("llama"));
  w.set("tokenizer.ggml.model", gguf::make_string("llama"));
  w.set("tokenizer.ggml.tokens", strings({"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab"}));
  w.set("tokenizer.ggml.scores", floats({0, 0, 0, -1, -2, -3, -4, -5}));
  w.set("tokenizer.ggml.token_type", ints({2, 3, 3, 1, 1, 1, 1, 1}));
  w.set("tokenizer.ggml.bos_token_id", gguf::make_u32(1));
  w.set("tokenizer.ggml.eos_token_id", gguf::make_u32(2));
  w.set("tokenizer.ggml.unknown_token_id", gguf::make_u32(0));
  return w;
}

gguf::Writer bpe_writer() {
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::make_string("gpt2"));
  w.set("tokenizer.ggml.pre", gguf::make_string("llama-bpe"));
  w.set("tokenizer.ggml.tokens", strings({"a", "b", "ab", "<|eot_id|>"}));
  w.set("tokenizer.ggml.token_type", ints({1, 1, 1, 3}));
  w.set("tokenizer.ggml.merges", strings({"a b"}));
  return w;
}

class VocabFileTest : public ::testing::Test {
 protected:
  const llmserve::testing::TempFile file_{std::string("tok-vocab-") +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".gguf"};
  const std::string& path_ = file_.path();

  std::unique_ptr<Tokenizer> load(const gguf::Writer& w) {
    w.write(path_);
    const gguf::File file = gguf::File::open(path_);
    return Tokenizer::from_gguf(file);
  }

  // Loads and expects an Error that names the file and every fragment.
  void expect_error(const gguf::Writer& w, const std::vector<std::string>& fragments) {
    try {
      load(w);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path_), std::string::npos) << msg;
      for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
    }
  }
};

TEST_F(VocabFileTest, VocabOnlySpmFile) {
  auto tok = load(spm_writer());
  EXPECT_EQ(tok->n_vocab(), 8);
  EXPECT_TRUE(tok->add_bos_by_default());  // llama default
  EXPECT_TRUE(tok->adds_space_prefix());   // llama default
  // "▁ab": ▁a (-4) beats ab (-5).
  EXPECT_EQ(tok->encode("ab", true), (std::vector<Token>{1, 6, 5}));
  EXPECT_EQ(tok->decode({1, 6, 5}), "ab");
}

TEST_F(VocabFileTest, SpmFlagsFromKeys) {
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.add_bos_token", gguf::make_bool(false));
  w.set("tokenizer.ggml.add_space_prefix", gguf::make_bool(false));
  auto tok = load(w);
  EXPECT_FALSE(tok->add_bos_by_default());
  EXPECT_FALSE(tok->adds_space_prefix());
  EXPECT_EQ(tok->encode("ab", false), (std::vector<Token>{7}));
}

TEST_F(VocabFileTest, NoneIdsAreAbsent) {
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.bos_token_id", gguf::make_u32(0xFFFFFFFFu));  // converters' "no token"
  w.set("tokenizer.ggml.eot_token_id", gguf::make_i32(-1));
  auto tok = load(w);
  EXPECT_EQ(tok->bos(), -1);
  EXPECT_FALSE(tok->add_bos_by_default());
}

TEST_F(VocabFileTest, VocabOnlyBpeFile) {
  gguf::Writer w = bpe_writer();
  w.set("tokenizer.ggml.eot_token_id", gguf::make_u32(3));
  auto tok = load(w);
  EXPECT_FALSE(tok->add_bos_by_default());  // gpt2 default
  EXPECT_EQ(tok->encode("ab<|eot_id|>", false, true), (std::vector<Token>{2, 3}));
  EXPECT_TRUE(tok->is_end_of_generation(3));
}

TEST_F(VocabFileTest, MissingModelKey) {
  gguf::Writer w;
  w.set("tokenizer.ggml.tokens", strings({"a"}));
  expect_error(w, {"tokenizer.ggml.model"});
}

TEST_F(VocabFileTest, UnknownModel) {
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.model", gguf::make_string("bert"));
  expect_error(w, {"tokenizer.ggml.model", "bert"});
}

TEST_F(VocabFileTest, MissingTokens) {
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::make_string("llama"));
  expect_error(w, {"tokenizer.ggml.tokens"});
}

TEST_F(VocabFileTest, TokensOfTheWrongType) {
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.tokens", ints({1, 2, 3, 4, 5, 6, 7, 8}));
  expect_error(w, {"tokenizer.ggml.tokens"});
  w.set("tokenizer.ggml.tokens", gguf::make_string("abc"));
  expect_error(w, {"tokenizer.ggml.tokens"});
}

TEST_F(VocabFileTest, EmptyVocabulary) {
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.tokens", strings({}));
  w.set("tokenizer.ggml.scores", floats({}));
  w.set("tokenizer.ggml.token_type", ints({}));
  expect_error(w, {"tokenizer.ggml.tokens", "empty"});
}

TEST_F(VocabFileTest, MissingScoresForLlama) {
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::make_string("llama"));
  w.set("tokenizer.ggml.tokens", strings({"a"}));
  expect_error(w, {"tokenizer.ggml.scores"});
}

TEST_F(VocabFileTest, MismatchedArrayLengths) {
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.scores", floats({0, 0, 0}));
  expect_error(w, {"tokenizer.ggml.scores", "3", "8"});
  w = spm_writer();
  w.set("tokenizer.ggml.token_type", ints({1, 1}));
  expect_error(w, {"tokenizer.ggml.token_type"});
}

TEST_F(VocabFileTest, BadTokenType) {
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.token_type", ints({2, 3, 3, 1, 1, 9, 1, 1}));
  expect_error(w, {"tokenizer.ggml.token_type", "token 5", "9"});
}

TEST_F(VocabFileTest, IdsOutOfRange) {
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    gguf::Writer w = spm_writer();
    w.set(key, gguf::make_u32(8));
    expect_error(w, {key, "8"});
  }
  gguf::Writer w = spm_writer();
  w.set("tokenizer.ggml.bos_token_id", gguf::make_string("one"));
  expect_error(w, {"tokenizer.ggml.bos_token_id"});
}

TEST_F(VocabFileTest, AddBosWithoutBos) {
  gguf::Writer w = bpe_writer();
  w.set("tokenizer.ggml.add_bos_token", gguf::make_bool(true));
  expect_error(w, {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id"});
}

TEST_F(VocabFileTest, BpeNeedsWellFormedMerges) {
  gguf::Writer w;
  w.set("tokenizer.ggml.model", gguf::make_string("gpt2"));
  w.set("tokenizer.ggml.tokens", strings({"a"}));
  expect_error(w, {"tokenizer.ggml.merges"});
  w = bpe_writer();
  w.set("tokenizer.ggml.merges", strings({"a b", "ab"}));
  expect_error(w, {"tokenizer.ggml.merges", "entry 1", "'ab'"});
}

TEST(VocabTest, InMemoryVocabGetsTheSameChecks) {
  Vocab v;
  v.source = "in-memory";
  v.texts = {"a", "b"};
  v.scores = {0};
  EXPECT_THROW(Tokenizer::from_vocab(v), Error);
  v.scores.clear();
  v.bos = 5;
  try {
    Tokenizer::from_vocab(v);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in-memory: tokenizer.ggml.bos_token_id"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace llmserve::tok
