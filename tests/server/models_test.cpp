// Several models in one server: listed, retrieved and picked by a request's
// "model", each with its own tokenizer; an unknown one is a 404. One model
// serves a request whatever it names.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace llmserve::server {
namespace {

class TwoModelsTest : public ServerTest {
 protected:
  // Two real models with different vocabularies and different stories.
  void start_two(const std::string& small, const std::string& f16) {
    Options o;
    o.models = {{"small", small}, {"f16", f16}};
    start(o);
  }
  HttpResult get(const std::string& path) {
    HttpClient c = client();
    return c.request("GET", path, "");
  }
  std::string metrics_text() { return get("/metrics").body; }
};

// Greedy after "Once upon a time", as each file gives it alone (llmserve
// generate --temp 0; stories260K's is its test vectors' story).
const char* const kSmallStory = ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball.";
const char* const kF16Story = ", a little girl named Lily lived in a small house with her mom, dad, and her dog, Spot, Spot, loved to play all day.";

TEST_F(TwoModelsTest, ListsRetrievesAndPicksByName) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(f16, "TinyStories-656K.f16.gguf");
  start_two(small, f16);

  const Json list = Json::parse(get("/v1/models").body);
  ASSERT_EQ(list["data"].size(), 2u) << list;
  EXPECT_EQ(list["data"][0]["id"], "small");
  EXPECT_EQ(list["data"][1]["id"], "f16");
  EXPECT_EQ(list["data"][1]["max_model_len"], server_->engine().info(1).max_context);
  const HttpResult one = get("/v1/models/f16");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(Json::parse(one.body), list["data"][1]);

  for (const auto& [name, story] : {std::pair{"small", kSmallStory}, std::pair{"f16", kF16Story}}) {
    const HttpResult r = post("/v1/completions", {{"model", name}, {"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}});
    ASSERT_EQ(r.status, 200) << r.body;
    const Json j = Json::parse(r.body);
    EXPECT_EQ(j["model"], name);
    EXPECT_TRUE(std::string(story).starts_with(j["choices"][0]["text"].get<std::string>())) << name << ": " << j;
  }
  // Each model's metrics under its name.
  const std::string text = metrics_text();
  for (const char* name : {"small", "f16"})
    EXPECT_NE(text.find("llmserve:generation_tokens_total{model_name=\"" + std::string(name) + "\"} 16\n"), std::string::npos)
        << text;

  const HttpResult chat = post("/v1/chat/completions", {{"model", "f16"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                        {"max_tokens", 4}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(Json::parse(chat.body)["model"], "f16");
}

TEST_F(TwoModelsTest, TokenizeAndDetokenizeUseTheNamedModelsVocabulary) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(f16, "TinyStories-656K.f16.gguf");
  start_two(small, f16);
  const std::string text = "Once upon a time";
  for (int i = 0; i < 2; ++i) {
    const std::string name = i == 0 ? "small" : "f16";
    const HttpResult r = post("/tokenize", {{"model", name}, {"content", text}});
    ASSERT_EQ(r.status, 200) << r.body;
    const auto ids = Json::parse(r.body)["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(ids, server_->model(i).tokenizer().encode(text, false)) << name;
    const HttpResult back = post("/detokenize", {{"model", name}, {"tokens", ids}});
    EXPECT_EQ(Json::parse(back.body)["content"], text) << name << ": " << back.body;
  }
  // stories260K has 512 tokens; TinyStories-656K more.
  const int beyond_small = server_->model(0).tokenizer().n_vocab();
  ASSERT_GT(server_->model(1).tokenizer().n_vocab(), beyond_small);
  EXPECT_EQ(post("/detokenize", {{"model", "f16"}, {"tokens", {beyond_small}}}).status, 200);
  EXPECT_EQ(post("/detokenize", {{"model", "small"}, {"tokens", {beyond_small}}}).status, 400);
}

TEST_F(TwoModelsTest, EmbeddingsComeFromTheNamedModel) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(f16, "TinyStories-656K.f16.gguf");
  start_two(small, f16);
  for (int i = 0; i < 2; ++i) {
    const std::string name = i == 0 ? "small" : "f16";
    const HttpResult r = post("/v1/embeddings", {{"model", name}, {"input", "Once upon a time"}});
    ASSERT_EQ(r.status, 200) << r.body;
    const Json j = Json::parse(r.body);
    EXPECT_EQ(j["model"], name);
    EXPECT_EQ(j["data"][0]["embedding"].size(), static_cast<size_t>(server_->engine().info(i).n_embd)) << name;
    EXPECT_EQ(j["usage"]["prompt_tokens"], server_->model(i).tokenizer().encode("Once upon a time", true).size()) << name;
  }
}

TEST_F(TwoModelsTest, AnUnknownModelIsNotFoundAndNoneIsRefused) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(f16, "TinyStories-656K.f16.gguf");
  start_two(small, f16);
  const Json messages = {{{"role", "user"}, {"content", "Hi"}}};
  const std::pair<std::string, Json> calls[] = {
      {"/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 1}}},
      {"/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}}},
      {"/tokenize", {{"content", "Hi"}}},
      {"/detokenize", {{"tokens", {1}}}},
      {"/v1/embeddings", {{"input", "Hi"}}},
  };
  for (const auto& [path, body] : calls) {
    Json unknown = body;
    unknown["model"] = "gpt-4";
    const HttpResult r = post(path, unknown);
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
    const Json e = Json::parse(r.body)["error"];
    EXPECT_EQ(e["code"], "model_not_found") << path;
    EXPECT_EQ(e["param"], "model") << path;
    EXPECT_NE(e["message"].get<std::string>().find("'small', 'f16'"), std::string::npos) << e;

    const HttpResult none = post(path, body);
    EXPECT_EQ(none.status, 400) << path << ": " << none.body;
    EXPECT_EQ(Json::parse(none.body)["error"]["param"], "model") << path;
  }
  const HttpResult r = get("/v1/models/gpt-4");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "model_not_found");
}

// One model: a request with another name, or none, is served by it, as
// before there could be several (clients send whatever model they know).
TEST_F(ServerTest, OneModelServesWhateverTheRequestNames) {
  start();
  for (const Json& model : {Json("gpt-4"), Json()}) {
    Json body = {{"prompt", "Hi"}, {"max_tokens", 2}};
    if (!model.is_null()) body["model"] = model;
    const HttpResult r = post("/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(Json::parse(r.body)["model"], "tiny");
  }
  EXPECT_EQ(post("/tokenize", {{"model", "gpt-4"}, {"content", "Hi"}}).status, 200);
  HttpClient c = client();
  EXPECT_EQ(c.request("GET", "/v1/models/gpt-4", "").status, 404);  // retrieving names a model exactly
}

}  // namespace
}  // namespace llmserve::server
