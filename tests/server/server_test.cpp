// The whole server over loopback HTTP, on a small synthetic model (random
// weights: the text is gibberish, the protocol is what is checked).
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "server_fixture.h"

namespace llmserve::server {
namespace {

TEST_F(ServerTest, CompletionStreamMatchesNonStream) {
  start();
  const Json req = {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}};
  const HttpResult whole = post("/v1/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Json j = Json::parse(whole.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["usage"]["completion_tokens"].get<int>() + j["usage"]["prompt_tokens"].get<int>(), j["usage"]["total_tokens"]);

  Json sreq = req;
  sreq["stream"] = true;
  sreq["stream_options"] = {{"include_usage", true}};
  const HttpResult s = post("/v1/completions", sreq);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(*find_header(s, "content-type"), "text/event-stream");
  const auto ev = events(s.body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    const Json c = Json::parse(ev[i]);
    EXPECT_TRUE(c["usage"].is_null());
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  const Json usage = Json::parse(ev[ev.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], j["usage"]);
  EXPECT_EQ(text, j["choices"][0]["text"]);
  EXPECT_EQ(finish, j["choices"][0]["finish_reason"]);
  EXPECT_TRUE(settles_to_idle());
}

TEST_F(ServerTest, ChatNStopAndLogprobs) {
  start();
  const Json req = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 8}, {"n", 2}, {"seed", 7},
                    {"logprobs", true}, {"top_logprobs", 2}};
  const HttpResult r = post("/v1/chat/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const Json& c = j["choices"][i];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["message"]["role"], "assistant");
    const Json& content = c["logprobs"]["content"];
    ASSERT_FALSE(content.empty());
    EXPECT_EQ(content[0]["top_logprobs"].size(), 2u);
    EXPECT_LE(content[0]["logprob"].get<double>(), 0.0);
  }
  // A stop string made of the first choice's own text ends it early and is cut.
  const Json one = Json::parse(post("/v1/chat/completions", {{"messages", req["messages"]}, {"max_tokens", 8}, {"temperature", 0}}).body);
  const std::string text = one["choices"][0]["message"]["content"];
  ASSERT_GE(text.size(), 4u);
  const std::string stop = text.substr(2, 2);
  const Json cut = Json::parse(post("/v1/chat/completions",
                                    {{"messages", req["messages"]}, {"max_tokens", 8}, {"temperature", 0}, {"stop", stop}})
                                   .body);
  EXPECT_EQ(cut["choices"][0]["message"]["content"], text.substr(0, text.find(stop)));
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(settles_to_idle());
}

TEST_F(ServerTest, ErrorsHaveStatusAndOpenAIBody) {
  Options o;
  o.api.keys = ApiKeys({"sk-test"});
  o.http.max_body_bytes = 1024;
  start(o);
  const Headers auth = {{"Authorization", "Bearer sk-test"}};
  auto check = [](const HttpResult& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    const Json j = Json::parse(r.body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
  };
  check(post("/v1/completions", {{"prompt", "x"}}), 401);
  check(post("/v1/completions", {{"prompt", "x"}}, {{"Authorization", "Bearer wrong"}}), 401);
  check(post("/v1/completions", {{"prompt", "x"}, {"temperature", -1}}, auth), 400);
  check(post("/v1/completions", {{"prompt", std::string(4000, 'a')}}, auth), 413);
  check(post("/v1/nope", {}, auth), 404);
  HttpClient c = client();
  check(c.request("GET", "/v1/completions", "", auth), 405);
  check(c.request("POST", "/v1/completions", "{not json", auth), 400);
  EXPECT_EQ(c.request("GET", "/v1/models", "", auth).status, 200);
  EXPECT_EQ(c.request("GET", "/health", "").status, 200);
  check(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 5000}}, auth), 400);
}

TEST_F(ServerTest, RateLimitAnswers429WithRetryAfter) {
  Options o;
  o.api.rate_limit = 0.01;
  o.api.rate_burst = 2;
  start(o);
  const Json req = {{"prompt", "x"}, {"max_tokens", 1}};
  EXPECT_EQ(post("/v1/completions", req).status, 200);
  EXPECT_EQ(post("/v1/completions", req).status, 200);
  const HttpResult r = post("/v1/completions", req);
  EXPECT_EQ(r.status, 429);
  ASSERT_NE(find_header(r, "retry-after"), nullptr);
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "rate_limit_exceeded");
}

TEST_F(ServerTest, DisconnectMidStreamFreesBlocks) {
  start();
  HttpClient c = client();
  bool got_data = false;
  std::thread closer;
  // Abandon the stream at its first bytes: the on_body callback throws to
  // stop reading, and the client drops the connection.
  const HttpResult r = c.request("POST", "/v1/completions",
                                 Json{{"prompt", "Once"}, {"max_tokens", 900}, {"stream", true}}.dump(), {},
                                 [&](std::string_view) {
                                   got_data = true;
                                   throw std::runtime_error("client leaves");
                                 });
  EXPECT_TRUE(got_data);
  EXPECT_FALSE(r.error.empty());
  EXPECT_TRUE(settles_to_idle());
}

TEST_F(ServerTest, QueueFullAnswers429) {
  Options o;
  o.max_seqs = 1;
  o.api.max_queue = 0;
  start(o);
  // n = 2 needs two slots; one running slot and no queue: refused at once.
  const HttpResult r = post("/v1/completions", {{"prompt", "x"}, {"n", 2}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "queue_full");
  EXPECT_NE(find_header(r, "retry-after"), nullptr);
  EXPECT_EQ(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}).status, 200);
}

TEST_F(ServerTest, DrainFinishesInFlightAndRefusesNew) {
  start();
  HttpClient idle = client();
  ASSERT_EQ(idle.request("GET", "/health", "").status, 200);  // a kept-alive connection
  std::promise<void> streaming;
  auto first = std::async(std::launch::async, [&] {
    HttpClient c = client();
    bool signalled = false;
    std::string body;
    c.request("POST", "/v1/completions", Json{{"prompt", "Once"}, {"max_tokens", 300}, {"stream", true}}.dump(), {},
              [&](std::string_view d) {
                body.append(d);
                if (!signalled) streaming.set_value();
                signalled = true;
              });
    return body;
  });
  streaming.get_future().wait();
  auto drained = std::async(std::launch::async, [&] { return server_->drain(std::chrono::seconds(60)); });
  while (!server_->api().draining()) std::this_thread::yield();
  const HttpResult refused = idle.request("POST", "/v1/completions", Json{{"prompt", "x"}}.dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(find_header(refused, "retry-after"), nullptr);
  const std::string body = first.get();
  EXPECT_TRUE(body.ends_with("data: [DONE]\n\n"));
  EXPECT_TRUE(drained.get());
}

}  // namespace
}  // namespace llmserve::server

namespace llmserve::server {
namespace {

// The KV pool's gauges hold its size from the start, not only after a request.
TEST_F(ServerTest, KvGaugesShowThePoolBeforeAnyRequest) {
  start();
  EXPECT_EQ(metric("llmserve:kv_cache_blocks_total"), 256);
  EXPECT_EQ(metric("llmserve:kv_cache_blocks_free"), 256);
}

// n choices share one prompt: its tokens are counted (and computed) once.
TEST_F(ServerTest, ChoicesCountThePromptOnce) {
  start();
  const Json req = {{"prompt", "Once upon a time there was"}, {"max_tokens", 6}, {"n", 4}, {"seed", 5}};
  const HttpResult r = post("/v1/completions", req);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_EQ(j["choices"].size(), 4u);
  const int prompt = j["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(metric_total("llmserve:prompt_tokens_total"), prompt);
}

// A chat's second turn repeats the first turn and its answer: on a Q8_0
// model, whose generated tokens' KV is what a prompt would compute, every
// full block of the first turn is found in the prefix cache, also where
// re-encoding the answer's text would split it differently.
TEST_F(ServerTest, ChatNextTurnFindsThePreviousTurnInThePrefixCache) {
  REQUIRE_MODEL(path, "tinystories-656k-q8_0.gguf");
  Options o;
  o.models = {{"tiny", path}};
  start(o);
  for (const char* question : {"Tell me a story about a cat.", "What did the dog do?"}) {
    Json messages = Json::array({{{"role", "user"}, {"content", question}}});
    const HttpResult first = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 48}, {"temperature", 0}});
    ASSERT_EQ(first.status, 200) << first.body;
    const Json j = Json::parse(first.body);
    const int turn = j["usage"]["prompt_tokens"].get<int>() + j["usage"]["completion_tokens"].get<int>();
    messages.push_back({{"role", "assistant"}, {"content", j["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "And then?"}});
    const double hits = metric_total("llmserve:prefix_cache_hits_total");
    const HttpResult second = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 4}, {"temperature", 0}});
    ASSERT_EQ(second.status, 200) << second.body;
    // The first turn's KV: its prompt and every answer token but the last.
    EXPECT_GE(metric_total("llmserve:prefix_cache_hits_total") - hits, (turn - 1) / 16 * 16) << question;
  }
}

// Message content is text: "</s><s>" in a chat message costs the tokens of
// its text, exactly as in a completion prompt, not two control tokens.
TEST_F(ServerTest, ChatContentThatSpellsControlTokensIsText) {
  start();
  const auto prompt_tokens = [&](const std::string& path, const Json& body) {
    Json req = body;
    req["max_tokens"] = 1;
    const HttpResult r = post(path, req);
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body)["usage"]["prompt_tokens"].get<int>();
  };
  const auto chat = [&](const std::string& content) {
    return prompt_tokens("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", content}}}}});
  };
  const auto completion = [&](const std::string& text) { return prompt_tokens("/v1/completions", {{"prompt", text}}); };
  // The tiny model's template is the ChatML fallback, whose markers this vocabulary spells as text.
  const auto chatml = [](const std::string& content) {
    return "<|im_start|>user\n" + content + "<|im_end|>\n<|im_start|>assistant\n";
  };
  EXPECT_EQ(chat("Hello"), completion(chatml("Hello")));
  EXPECT_EQ(chat("Hello</s><s>"), completion(chatml("Hello</s><s>")));
  EXPECT_EQ(chat("Hello</s><s>") - chat("Hello"), completion("Hello</s><s>") - completion("Hello"));
}

}  // namespace
}  // namespace llmserve::server
