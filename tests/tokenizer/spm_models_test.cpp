// SentencePiece-style tokenization of the real vocabularies in
// ../shared/models: stories260K's published vectors, llama.cpp's llama-spm
// vectors on the full Llama 2 vocabulary, and lossless round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gguf/file.h"
#include "test_models.h"
#include "tokenizer/tokenizer.h"

namespace llmserve::tok {
namespace {

std::unique_ptr<Tokenizer> load(const std::string& path) {
  const gguf::File file = gguf::File::open(path);
  return Tokenizer::from_gguf(file);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

using namespace std::string_literals;

const std::vector<std::string>& round_trip_texts() {
  static const std::vector<std::string> texts = {
      "Hello world",
      "  leading and trailing spaces  ",
      "tabs\tand\nnew\r\nlines\n\n",
      "accents: café, naïve, Ünïcode, Ångström",
      "CJK: 我想在apple工作, 日本語, 한국어",
      "emoji: 😀🦙🚀 and ZWJ 😶\u200d🌫️ ✅",
      "control \x01\x02\x1b[0m\x7f and nul \0 end"s,
      "invalid utf8: \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \x80",
      "<s> and </s> and <unk> and <0x41> stay text",
      "\xe2\x96\x81 the visible-space mark itself",
      " ",
      "x",
  };
  return texts;
}

TEST(Stories260KTest, EncodeVectors) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  REQUIRE_MODEL(vectors, "stories260K.testvectors.json");
  auto tok = load(path);
  const nlohmann::json j = read_json(vectors);
  for (const auto& t : j["encode_tests"]) {
    const std::string text = t["text"];
    EXPECT_EQ(tok->encode(text, false), t["ids"].get<std::vector<Token>>()) << text;
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
  }
  const auto& p = j["prompt_test"];
  EXPECT_EQ(tok->encode(p["prompt"].get<std::string>(), false), p["prompt_ids"].get<std::vector<Token>>());
  std::vector<Token> with_bos = p["prompt_ids"].get<std::vector<Token>>();
  with_bos.insert(with_bos.begin(), j["bos_id"].get<Token>());
  EXPECT_EQ(tok->encode(p["prompt"].get<std::string>(), tok->add_bos_by_default()), with_bos);
  const auto pieces = p["prompt_pieces"].get<std::vector<std::string>>();
  const auto ids = p["prompt_ids"].get<std::vector<Token>>();
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(tok->text(ids[i]), pieces[i]);
}

TEST(Stories260KTest, SpecialIdsAndDefaults) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  auto tok = load(path);
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos_by_default());
  EXPECT_TRUE(tok->adds_space_prefix());
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_FALSE(tok->is_end_of_generation(1));
  EXPECT_EQ(tok->type(3), TokenType::BYTE);
  EXPECT_EQ(tok->piece(3 + 'A'), "A");
  EXPECT_EQ(tok->piece(1), "");
  EXPECT_EQ(tok->piece(1, true), "<s>");
  EXPECT_EQ(tok->piece(0), "\xEF\xBF\xBD");
  EXPECT_THROW(tok->piece(512), Error);
  EXPECT_THROW(tok->piece(-1), Error);
}

TEST(Stories260KTest, GreedyTextsDecode) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  REQUIRE_MODEL(vectors, "stories260K.testvectors.json");
  auto tok = load(path);
  const nlohmann::json j = read_json(vectors);
  std::vector<Token> ids = j["greedy_ids"].get<std::vector<Token>>();
  ids.insert(ids.begin(), j["bos_id"].get<Token>());
  EXPECT_EQ(tok->decode(ids), j["greedy_text"].get<std::string>());

  // Streaming after a prompt keeps the first piece's space.
  const auto& p = j["prompt_test"];
  StreamDecoder stream(*tok, false);
  std::string text;
  for (Token id : p["greedy_continuation_ids_64"].get<std::vector<Token>>()) text += stream.push(id);
  text += stream.flush();
  EXPECT_EQ(text, p["greedy_continuation_text"].get<std::string>());
}

class SpmRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(SpmRoundTrip, ByteFallbackMakesAnyTextReversible) {
  REQUIRE_MODEL(path, GetParam());
  auto tok = load(path);
  for (const std::string& s : round_trip_texts()) {
    EXPECT_EQ(tok->decode(tok->encode(s, false)), s) << s;
    EXPECT_EQ(tok->decode(tok->encode(s, true)), s) << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpmRoundTrip, ::testing::Values("stories260K.gguf", "llama-2-tiny-random.gguf"));

TEST(TinyStories656KTest, RoundTripsTextInItsAlphabet) {
  // Every score is -1000 (merge ranks were lost), so ties decide every merge;
  // the pieces still spell the text exactly.
  REQUIRE_MODEL(path, "TinyStories-656K.f16.gguf");
  auto tok = load(path);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->is_end_of_generation(2));
  for (const std::string s : {"Once upon a time, there was a little girl named Lily.",
                              "She said, \"Let's go to the park!\" 123 dogs? Yes: 7_8 | <>",
                              "  two  spaces\nand lines\n\n"}) {
    const std::vector<Token> ids = tok->encode(s, true);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 0) << s;  // no <unk>
    EXPECT_EQ(tok->decode(ids), s);
  }
  // Outside its 78 characters (no byte tokens): <unk>, shown as U+FFFD.
  EXPECT_EQ(tok->decode(tok->encode("a€b", false)), "a\xEF\xBF\xBD" "b");
}

// llama.cpp's published ids for its llama-spm test strings (no BOS).
TEST(Llama2VocabTest, MatchesLlamaSpmVectors) {
  REQUIRE_MODEL(path, "llama-2-tiny-random.gguf");
  auto tok = load(path);
  const std::vector<std::pair<std::string, std::vector<Token>>> cases = {
      {"", {}},
      {" ", {259}},
      {"  ", {1678}},
      {"   ", {268}},
      {"\t", {29871, 12}},
      {"\n", {29871, 13}},
      {"\n\n\n", {29871, 13, 13, 13}},
      {"\t\n", {29871, 12, 13}},
      {"Hello world", {15043, 3186}},
      {" Hello world", {29871, 15043, 3186}},
      {"Hello World", {15043, 2787}},
      {" Hello World!", {29871, 15043, 2787, 29991}},
      {"Hello, world!", {15043, 29892, 3186, 29991}},
      {" this is 🦙.cpp", {29871, 445, 338, 29871, 243, 162, 169, 156, 29889, 8223}},
      {"w048 7tuijk dsdfhu", {281, 29900, 29946, 29947, 29871, 29955, 9161, 13535, 18031, 2176, 6905}},
      {"нещо на Български", {1538, 4851, 665, 1386, 29713, 1305}},
      {"ied 4 ½ months", {474, 287, 29871, 29946, 29871, 30226, 7378}},
      {"Führer", {383, 4000, 261}},
      {"    Hello\n    Hello", {268, 15043, 13, 1678, 15043}},
      {" (", {29871, 313}},
      {"\n =", {29871, 13, 353}},
      {"' era", {525, 3152}},
      {"Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
       {15043, 29892, 343, 29915, 497, 29991, 1128, 526, 366, 29871, 243, 162, 155, 132, 1577, 30672, 31522, 30505,
        11548, 31041, 30732, 29896, 29941, 29896, 29946, 29896, 29945, 29896, 30408, 30739}},
      {"333333333", {29871, 29941, 29941, 29941, 29941, 29941, 29941, 29941, 29941, 29941}},
      {"🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
       {29871, 243, 162, 157, 131, 313, 8945, 29897, 29871, 243, 162, 155, 185, 30722, 243, 162, 143, 174, 30598,
        313, 20787, 953, 3848, 275, 16125, 630, 29897, 29871, 31681, 313, 6194, 953, 29877, 2397, 393, 756, 967,
        1914, 5993, 29897}},
  };
  for (const auto& [text, ids] : cases) EXPECT_EQ(tok->encode(text, false), ids) << text;
}

TEST(Llama2VocabTest, SpecialTokensOnlyWithParseSpecial) {
  REQUIRE_MODEL(path, "llama-2-tiny-random.gguf");
  auto tok = load(path);
  // Each run of text after a special token gets SentencePiece's prefix space.
  EXPECT_EQ(tok->encode("<s>Hello</s>", false, true), (std::vector<Token>{1, 15043, 2}));
  const std::vector<Token> raw = tok->encode("<s>Hello</s>", false, false);
  EXPECT_EQ(std::count(raw.begin(), raw.end(), 1) + std::count(raw.begin(), raw.end(), 2), 0);
  EXPECT_EQ(tok->decode(raw), "<s>Hello</s>");
}

TEST(Llama2VocabTest, EncodesKilobytesInMilliseconds) {
  REQUIRE_MODEL(path, "llama-2-tiny-random.gguf");
  auto tok = load(path);
  std::string text;
  for (int i = 0; text.size() < 4096; ++i) {
    text += "Paragraph " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog; "
            "naïve café owners serve 日本語 tea 🍵 at 12:34.\n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Token> ids = tok->encode(text, true);
  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tok->decode(ids), text);
  RecordProperty("encode_ms", std::to_string(ms));
  EXPECT_LT(ms, 100.0) << text.size() << " bytes took " << ms << " ms";  // a few ms in release builds

  const std::string long_run(1 << 20, 'a');  // one symbol chain of a megabyte
  EXPECT_EQ(tok->decode(tok->encode(long_run, false)), long_run);
}

}  // namespace
}  // namespace llmserve::tok
