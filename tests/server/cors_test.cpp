#include <gtest/gtest.h>

#include "core/error.h"
#include "server/cors.h"

namespace llmserve::server {
namespace {

HttpRequest from(const std::string& origin) {
  HttpRequest r;
  r.method = "GET";
  r.headers = {{"origin", origin}};
  return r;
}

std::string allow_origin(const Headers& h) {
  for (const auto& [k, v] : h)
    if (k == "Access-Control-Allow-Origin") return v;
  return "";
}

TEST(CorsPolicy, OriginEntriesAreValidated) {
  for (const char* good : {"*", "http://app.example", "https://app.example:8443", "http://127.0.0.1:3000/", "app+x://h"})
    EXPECT_EQ(origin_entry_error(good), "") << good;
  for (const char* bad : {"app.example", "http://", "://x", "http://app.example/path", "http://user@host", "http://a b",
                          "ht tp://x", "http://x?q", ""})
    EXPECT_NE(origin_entry_error(bad), "") << bad;
  EXPECT_THROW(CorsPolicy({"http://ok.example", "nope"}), Error);
}

TEST(CorsPolicy, ListedOriginsMatchCaseInsensitively) {
  const CorsPolicy p({"HTTP://App.example/"});
  EXPECT_TRUE(p.enabled());
  EXPECT_EQ(allow_origin(p.response_headers(from("http://app.example"))), "http://app.example");
  EXPECT_EQ(allow_origin(p.response_headers(from("http://app.example:80"))), "");  // another origin
  EXPECT_EQ(allow_origin(p.response_headers(from("null"))), "");
  EXPECT_EQ(p.response_headers(from("http://evil.example")), (Headers{{"Vary", "Origin"}}));
  EXPECT_EQ(allow_origin(p.response_headers(HttpRequest{})), "");
}

TEST(CorsPolicy, WildcardAnswersStar) {
  const CorsPolicy p({"*"});
  EXPECT_EQ(allow_origin(p.response_headers(from("https://anything.example"))), "*");
  EXPECT_FALSE(CorsPolicy().enabled());
  EXPECT_TRUE(CorsPolicy().response_headers(from("https://anything.example")).empty());
}

TEST(CorsPolicy, PreflightEchoesOnlyWellFormedHeaderLists) {
  HttpRequest r = from("http://a.example");
  r.method = "OPTIONS";
  EXPECT_FALSE(CorsPolicy::is_preflight(r));
  r.headers.emplace_back("access-control-request-method", "POST");
  EXPECT_TRUE(CorsPolicy::is_preflight(r));
  const CorsPolicy p({"http://a.example"});
  auto allow_headers = [&](const HttpRequest& req) {
    for (const auto& [k, v] : p.preflight_headers(req))
      if (k == "Access-Control-Allow-Headers") return v;
    return std::string();
  };
  EXPECT_EQ(allow_headers(r), "authorization, content-type, x-request-id");
  r.headers.emplace_back("access-control-request-headers", "authorization,x-custom");
  EXPECT_EQ(allow_headers(r), "authorization,x-custom");
  r.headers.back().second = "authorization\r\nSet-Cookie: x";
  EXPECT_EQ(allow_headers(r), "authorization, content-type, x-request-id");
}

}  // namespace
}  // namespace llmserve::server
