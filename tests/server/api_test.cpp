// The headers every answer carries (request ids, CORS, rate limits), the
// log lines, and the endpoints beside completions, over loopback HTTP.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace llmserve::server {
namespace {

std::string header_or_empty(const HttpResult& r, const std::string& name) {
  const std::string* v = find_header(r, name);
  return v ? *v : std::string();
}

TEST_F(ServerTest, RequestIdIsEchoedOnEveryAnswerAndLogged) {
  log_ = std::make_unique<LogCapture>();
  start();
  const Json req = {{"prompt", "Once"}, {"max_tokens", 2}};
  HttpClient c = client();
  const HttpResult ok = c.request("POST", "/v1/completions", req.dump(), {{"X-Request-Id", "client-id-1"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(header_or_empty(ok, "x-request-id"), "client-id-1");
  EXPECT_NE(log_->line_with({"status=200", "request_id=client-id-1"}), "");

  Json stream = req;
  stream["stream"] = true;
  const HttpResult streamed = c.request("POST", "/v1/completions", stream.dump(), {{"X-Request-Id", "client-id-2"}});
  EXPECT_EQ(header_or_empty(streamed, "x-request-id"), "client-id-2");
  EXPECT_NE(log_->line_with({"status=200", "request_id=client-id-2"}), "");

  const HttpResult bad = c.request("POST", "/v1/completions", "{}", {{"X-Request-Id", "client-id-3"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(header_or_empty(bad, "x-request-id"), "client-id-3");
  EXPECT_NE(log_->line_with({"status=400", "request_id=client-id-3"}), "");
  EXPECT_EQ(header_or_empty(c.request("GET", "/health", "", {{"X-Request-Id", "h"}}), "x-request-id"), "h");

  // None, or one that is not printable ASCII of at most 128 bytes: the server makes one.
  const std::string a = header_or_empty(c.request("GET", "/v1/models", ""), "x-request-id");
  const std::string b = header_or_empty(c.request("GET", "/v1/models", ""), "x-request-id");
  EXPECT_TRUE(a.starts_with("req_")) << a;
  EXPECT_NE(a, b);
  for (const std::string& invalid : {std::string(129, 'x'), std::string("caf\xc3\xa9"), std::string("a b")}) {
    const std::string got = header_or_empty(c.request("GET", "/v1/models", "", {{"X-Request-Id", invalid}}), "x-request-id");
    EXPECT_TRUE(got.starts_with("req_")) << got;
  }
  EXPECT_EQ(header_or_empty(c.request("GET", "/v1/models", "", {{"X-Request-Id", std::string(128, 'x')}}), "x-request-id"),
            std::string(128, 'x'));
}

}  // namespace
}  // namespace llmserve::server

namespace llmserve::server {
namespace {

// A refused request's log line says why, on one line whatever the client sent.
TEST_F(ServerTest, ErrorLogLinesGiveTheReason) {
  log_ = std::make_unique<LogCapture>();
  Options o;
  o.api.keys = ApiKeys({"sk-test"});
  start(o);
  const Headers auth = {{"Authorization", "Bearer sk-test"}};
  EXPECT_EQ(post("/v1/completions", {{"prompt", "x"}}).status, 401);
  EXPECT_NE(log_->line_with({"status=401", "missing API key"}), "");
  EXPECT_EQ(post("/v1/completions", Json::object(), auth).status, 400);
  EXPECT_NE(log_->line_with({"status=400", "'prompt' is required"}), "");
  HttpClient c = client();
  EXPECT_EQ(c.request("POST", "/v1/completions", "{\"prompt\":\n\"x\"\n", auth).status, 400);
  const std::string line = log_->line_with({"status=400", "parse error"});
  ASSERT_NE(line, "");
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
}

}  // namespace
}  // namespace llmserve::server

namespace llmserve::server {
namespace {

// A browser page on an allowed origin: its preflight passes without the API
// key, and every answer it gets (success, error, stream) lets it read them.
TEST_F(ServerTest, CorsPreflightAndCrossOriginRequests) {
  Options o;
  o.api.keys = ApiKeys({"sk-test"});
  o.api.allowed_origins = {"http://app.example", "https://other.example:8443"};
  start(o);
  HttpClient c = client();
  const Headers origin = {{"Origin", "http://app.example"}};
  const HttpResult pre = c.request("OPTIONS", "/v1/chat/completions", "",
                                   {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"},
                                    {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_EQ(pre.status, 204) << pre.body;
  EXPECT_EQ(header_or_empty(pre, "access-control-allow-origin"), "http://app.example");
  EXPECT_NE(header_or_empty(pre, "access-control-allow-methods").find("POST"), std::string::npos);
  EXPECT_EQ(header_or_empty(pre, "access-control-allow-headers"), "authorization, content-type");
  EXPECT_NE(header_or_empty(pre, "access-control-max-age"), "");
  EXPECT_EQ(header_or_empty(pre, "vary"), "Origin");

  const Headers from_app = {{"Origin", "http://app.example"}, {"Authorization", "Bearer sk-test"}};
  const HttpResult ok = c.request("POST", "/v1/completions", Json{{"prompt", "Once"}, {"max_tokens", 2}}.dump(), from_app);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(header_or_empty(ok, "access-control-allow-origin"), "http://app.example");
  EXPECT_EQ(header_or_empty(ok, "vary"), "Origin");
  EXPECT_NE(header_or_empty(ok, "access-control-expose-headers").find("x-request-id"), std::string::npos);
  const HttpResult streamed =
      c.request("POST", "/v1/completions", Json{{"prompt", "Once"}, {"max_tokens", 2}, {"stream", true}}.dump(), from_app);
  EXPECT_EQ(header_or_empty(streamed, "access-control-allow-origin"), "http://app.example");
  const HttpResult unauthorized = c.request("POST", "/v1/completions", Json{{"prompt", "x"}}.dump(), origin);
  EXPECT_EQ(unauthorized.status, 401);
  EXPECT_EQ(header_or_empty(unauthorized, "access-control-allow-origin"), "http://app.example");
  EXPECT_EQ(header_or_empty(c.request("GET", "/v1/models", "", {{"Origin", "HTTPS://Other.example:8443"},
                                                               {"Authorization", "Bearer sk-test"}}),
                            "access-control-allow-origin"),
            "HTTPS://Other.example:8443");

  // Another origin gets no CORS headers: its preflight fails, and so does the browser's request.
  const HttpResult evil_pre = c.request("OPTIONS", "/v1/completions", "",
                                        {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(evil_pre.status, 403);
  EXPECT_EQ(find_header(evil_pre, "access-control-allow-origin"), nullptr);
  const HttpResult evil = c.request("GET", "/v1/models", "", {{"Origin", "http://evil.example"}, {"Authorization", "Bearer sk-test"}});
  EXPECT_EQ(evil.status, 200);
  EXPECT_EQ(find_header(evil, "access-control-allow-origin"), nullptr);
}

// Without --allowed-origins, nothing changes: no CORS header, OPTIONS is not a method of the API.
TEST_F(ServerTest, NoCorsHeadersUnlessOriginsAreAllowed) {
  start();
  HttpClient c = client();
  const HttpResult pre = c.request("OPTIONS", "/v1/completions", "",
                                   {{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(pre.status, 405);
  EXPECT_EQ(find_header(pre, "access-control-allow-origin"), nullptr);
  const HttpResult r = c.request("GET", "/v1/models", "", {{"Origin", "http://app.example"}});
  EXPECT_EQ(find_header(r, "access-control-allow-origin"), nullptr);
  EXPECT_EQ(find_header(r, "vary"), nullptr);
}

}  // namespace
}  // namespace llmserve::server

namespace llmserve::server {
namespace {

// With --rate-limit, every completion answer says where the key's bucket
// stands, in OpenAI's header names; the 429 too.
TEST_F(ServerTest, RateLimitedKeysGetRateLimitHeaders) {
  Options o;
  o.api.rate_limit = 0.01;
  o.api.rate_burst = 2;
  start(o);
  const Json req = {{"prompt", "x"}, {"max_tokens", 1}};
  const HttpResult first = post("/v1/completions", req);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(header_or_empty(first, "x-ratelimit-limit-requests"), "2");
  EXPECT_EQ(header_or_empty(first, "x-ratelimit-remaining-requests"), "1");
  EXPECT_TRUE(header_or_empty(first, "x-ratelimit-reset-requests").ends_with("s")) << header_or_empty(first, "x-ratelimit-reset-requests");
  Json stream = req;
  stream["stream"] = true;
  const HttpResult second = post("/v1/completions", stream);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(header_or_empty(second, "x-ratelimit-remaining-requests"), "0");
  const HttpResult refused = post("/v1/completions", req);
  ASSERT_EQ(refused.status, 429);
  EXPECT_EQ(header_or_empty(refused, "x-ratelimit-limit-requests"), "2");
  EXPECT_EQ(header_or_empty(refused, "x-ratelimit-remaining-requests"), "0");
  EXPECT_NE(header_or_empty(refused, "x-ratelimit-reset-requests"), "");
}

TEST_F(ServerTest, NoRateLimitHeadersWithoutARateLimit) {
  start();
  const HttpResult r = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}});
  EXPECT_EQ(find_header(r, "x-ratelimit-limit-requests"), nullptr);
}

}  // namespace
}  // namespace llmserve::server

namespace llmserve::server {
namespace {

class EndpointTest : public ServerTest {
 protected:
  void SetUp() override {
    Options o;
    o.api.keys = ApiKeys({"sk-test"});
    start(o);
  }
  HttpResult call(const std::string& method, const std::string& path, const Json& body = nullptr) {
    HttpClient c = client();
    return c.request(method, path, body.is_null() ? "" : body.dump(), {{"Authorization", "Bearer sk-test"}});
  }
  Json ok(const std::string& method, const std::string& path, const Json& body = nullptr) {
    const HttpResult r = call(method, path, body);
    EXPECT_EQ(r.status, 200) << method << " " << path << " " << body.dump() << ": " << r.body;
    return Json::parse(r.body, nullptr, false);
  }
  Json error(int status, const std::string& method, const std::string& path, const Json& body = nullptr) {
    const HttpResult r = call(method, path, body);
    EXPECT_EQ(r.status, status) << method << " " << path << " " << body.dump() << ": " << r.body;
    const Json j = Json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : Json();
  }
};

TEST_F(EndpointTest, ModelsRetrieve) {
  const Json m = ok("GET", "/v1/models/tiny");
  EXPECT_EQ(m["id"], "tiny");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m, ok("GET", "/v1/models")["data"][0]);
  EXPECT_EQ(ok("GET", "/v1/models/ti%6Ey")["id"], "tiny");  // percent-encoded
  const Json e = error(404, "GET", "/v1/models/gpt-4");
  EXPECT_EQ(e["code"], "model_not_found");
  EXPECT_NE(e["message"].get<std::string>().find("gpt-4"), std::string::npos);
  EXPECT_EQ(error(404, "GET", "/v1/models/")["code"], "model_not_found");
  EXPECT_EQ(error(400, "GET", "/v1/models/ti%zzy")["message"].is_string(), true);
  HttpClient c = client();
  EXPECT_EQ(c.request("GET", "/v1/models/tiny", "").status, 401);
}

TEST_F(EndpointTest, TokenizeCountsWhatCompletionsSee) {
  const std::string text = "Once upon a time";
  const int prompt_tokens = ok("POST", "/v1/completions", {{"prompt", text}, {"max_tokens", 1}})["usage"]["prompt_tokens"];
  // vLLM's shape: "prompt", special tokens added by default.
  const Json vllm = ok("POST", "/tokenize", {{"prompt", text}});
  EXPECT_EQ(vllm["count"], prompt_tokens);
  EXPECT_EQ(vllm["tokens"].size(), static_cast<size_t>(prompt_tokens));
  EXPECT_EQ(vllm["max_model_len"], server_->engine().info().max_context);
  EXPECT_EQ(ok("POST", "/tokenize", {{"prompt", text}, {"add_special_tokens", false}})["tokens"],
            ok("POST", "/tokenize", {{"content", text}})["tokens"]);  // llama-server's: none by default
  const Json plain = ok("POST", "/tokenize", {{"content", text}, {"add_special", true}});
  EXPECT_EQ(plain["tokens"], vllm["tokens"]);

  // Chat form: the prompt /v1/chat/completions builds.
  const Json messages = {{{"role", "user"}, {"content", "Hi</s>"}}};
  const int chat_tokens = ok("POST", "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}})["usage"]["prompt_tokens"];
  EXPECT_EQ(ok("POST", "/tokenize", {{"messages", messages}})["count"], chat_tokens);

  // llama-server's with_pieces: {id, piece} objects.
  const Json pieces = ok("POST", "/tokenize", {{"content", text}, {"with_pieces", true}})["tokens"];
  const Json ids = ok("POST", "/tokenize", {{"content", text}})["tokens"];
  ASSERT_EQ(pieces.size(), ids.size());
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(pieces[i]["id"], ids[i]);
    joined += pieces[i]["piece"].get<std::string>();
  }
  EXPECT_NE(joined.find("upon a time"), std::string::npos) << joined;

  for (const Json& bad : {Json::object(), Json{{"content", 5}}, Json{{"content", "a"}, {"prompt", "b"}},
                          Json{{"content", "a"}, {"add_special", "yes"}}, Json{{"messages", Json::array()}}})
    EXPECT_TRUE(error(400, "POST", "/tokenize", bad)["message"].is_string()) << bad.dump();
  HttpClient c = client();
  EXPECT_EQ(c.request("POST", "/tokenize", Json{{"content", "x"}}.dump()).status, 401);
  EXPECT_EQ(error(405, "GET", "/tokenize")["message"].is_string(), true);
}

TEST_F(EndpointTest, DetokenizeInvertsTokenize) {
  const std::string text = "Once upon a time, there was a cat.";
  const Json ids = ok("POST", "/tokenize", {{"content", text}})["tokens"];
  const Json back = ok("POST", "/detokenize", {{"tokens", ids}});
  EXPECT_EQ(back["content"], text);
  EXPECT_EQ(back["prompt"], text);
  EXPECT_EQ(ok("POST", "/detokenize", {{"tokens", Json::array()}})["content"], "");

  const Json e = error(400, "POST", "/detokenize", {{"tokens", {1, 99999999}}});
  EXPECT_NE(e["message"].get<std::string>().find("99999999"), std::string::npos) << e.dump();
  EXPECT_EQ(e["param"], "tokens");
  for (const Json& bad : {Json::object(), Json{{"tokens", "1 2"}}, Json{{"tokens", {-1}}}, Json{{"tokens", {1.5}}}})
    EXPECT_TRUE(error(400, "POST", "/detokenize", bad)["message"].is_string()) << bad.dump();
  HttpClient c = client();
  EXPECT_EQ(c.request("POST", "/detokenize", Json{{"tokens", ids}}.dump()).status, 401);
}

}  // namespace
}  // namespace llmserve::server
