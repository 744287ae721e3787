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
  o.gateway.keys = ApiKeys({"sk-test"});
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
