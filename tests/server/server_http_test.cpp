// The whole server as an HTTP client sees it: HEAD and 405, the drain's
// end, timeouts and what the API key covers.
#include <gtest/gtest.h>

#include <future>

#include "raw_client.h"
#include "server_fixture.h"

namespace llmserve::server {
namespace {

// HEAD is GET without the body on the GET routes; a 405 names the methods
// the URL takes in Allow.
TEST_F(ServerTest, HeadAndMethodNotAllowedFollowHttp) {
  start();
  for (const char* path : {"/health", "/v1/models", "/metrics"}) {
    RawClient c(server_->port());
    c.send(raw_request(path, "HEAD"));
    const std::string r = c.read_all();
    EXPECT_TRUE(r.starts_with("HTTP/1.1 200")) << path << ": " << r;
    EXPECT_EQ(body_of(r), "") << path;
  }
  HttpClient c = client();
  const HttpResult get_on_post = c.request("GET", "/v1/completions", "");
  EXPECT_EQ(get_on_post.status, 405);
  ASSERT_NE(find_header(get_on_post, "allow"), nullptr);
  EXPECT_EQ(*find_header(get_on_post, "allow"), "POST");
  const HttpResult post_on_get = c.request("POST", "/health", "{}");
  EXPECT_EQ(post_on_get.status, 405);
  ASSERT_NE(find_header(post_on_get, "allow"), nullptr);
  EXPECT_EQ(*find_header(post_on_get, "allow"), "GET, HEAD");
}

// When the drain's time is up, an open stream ends with an error event and
// [DONE], and its log line says why.
TEST_F(ServerTest, DrainTimeoutEndsStreamsWithAnErrorEvent) {
  log_ = std::make_unique<LogCapture>();
  start();
  std::promise<void> streaming;
  auto stream = std::async(std::launch::async, [&] {
    HttpClient c = client();
    std::string body;
    // Greedy: this model's greedy text has no EOS in 900 tokens; a sampled one might.
    c.request("POST", "/v1/completions", Json{{"prompt", "Once"}, {"max_tokens", 900}, {"temperature", 0}, {"stream", true}}.dump(), {},
              [&](std::string_view d) {
                if (body.empty()) streaming.set_value();
                body.append(d);
              });
    return body;
  });
  streaming.get_future().wait();
  EXPECT_FALSE(server_->drain(std::chrono::milliseconds(0)));
  const auto ev = events(stream.get());
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev.back(), "[DONE]");
  const Json error = Json::parse(ev[ev.size() - 2]);
  EXPECT_EQ(error["error"]["code"], "drain_timeout") << error;
  EXPECT_NE(log_->line_with({"status=503", "drain_timeout"}), "");
}

// The 504's message gives the configured timeout as it was set.
TEST_F(ServerTest, TimeoutMessageKeepsTheFraction) {
  Options o;
  o.api.request_timeout = std::chrono::milliseconds(1);
  start(o);
  // Greedy: a sampled EOS could end the answer within the millisecond.
  const HttpResult r = post("/v1/completions", {{"prompt", "Once"}, {"max_tokens", 900}, {"temperature", 0}});
  ASSERT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(Json::parse(r.body)["error"]["message"], "the request timed out after 0.001 s");
}

// API keys guard /v1/*; /metrics too with metrics_auth (--metrics-auth);
// /health never.
TEST_F(ServerTest, MetricsAuthPutsMetricsBehindTheKey) {
  const Headers auth = {{"Authorization", "Bearer sk-test"}};
  for (const bool metrics_auth : {false, true}) {
    Options o;
    o.api.keys = ApiKeys({"sk-test"});
    o.api.metrics_auth = metrics_auth;
    start(o);
    HttpClient c = client();
    EXPECT_EQ(c.request("GET", "/metrics", "").status, metrics_auth ? 401 : 200);
    EXPECT_EQ(c.request("GET", "/metrics", "", auth).status, 200);
    EXPECT_EQ(c.request("GET", "/health", "").status, 200);
    EXPECT_EQ(c.request("GET", "/v1/models", "").status, 401);
  }
}

}  // namespace
}  // namespace llmserve::server
