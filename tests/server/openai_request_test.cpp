#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace llmserve::server {
namespace {

GenerationRequest parse(Endpoint ep, const std::string& body, const RequestLimits& limits = {}) {
  return parse_generation_request(ep, parse_json_body(body, limits.max_json_depth), limits);
}

// The ApiError a body produces (status 0 when it parses).
ApiError error_of(Endpoint ep, const std::string& body, const RequestLimits& limits = {}) {
  try {
    parse(ep, body, limits);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "no error");
}

TEST(OpenAIRequest, CompletionDefaultsAreOpenAIs) {
  const auto r = parse(Endpoint::Completions, R"({"model": "m", "prompt": "hi"})");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.top_logprobs, -1);
}

TEST(OpenAIRequest, AllSamplingFields) {
  const auto r = parse(Endpoint::Completions, R"({"prompt": [1, 2, 3], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
    "top_k": 40, "min_p": 0.1, "seed": -3, "stop": ["a", "bc"], "n": 2, "logprobs": 3, "presence_penalty": 1.5,
    "frequency_penalty": -1, "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_TRUE(r.prompt_is_tokens);
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FALSE(r.seed_given);  // negative: random, as llama.cpp's -1
  EXPECT_TRUE(parse(Endpoint::Completions, R"({"prompt": "x", "seed": 3})").seed_given);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.5f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAIRequest, ChatMessagesAndContentParts) {
  const auto r = parse(Endpoint::Chat, R"({"messages": [{"role": "system", "content": "s"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": null}], "logprobs": true, "top_logprobs": 2, "max_completion_tokens": 9, "stop": "x"})");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["content"], "ab");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
}

TEST(OpenAIRequest, InvalidRequestsName400AndTheParam) {
  struct Case {
    Endpoint ep;
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {Endpoint::Completions, R"({})", "prompt"},
      {Endpoint::Completions, R"({"prompt": 5})", "prompt"},
      {Endpoint::Completions, R"({"prompt": []})", "prompt"},
      {Endpoint::Completions, R"({"prompt": ["a", "b"]})", "prompt"},
      {Endpoint::Completions, R"({"prompt": [1, -2]})", "prompt"},
      {Endpoint::Completions, R"({"prompt": "x", "temperature": 2.5})", "temperature"},
      {Endpoint::Completions, R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {Endpoint::Completions, R"({"prompt": "x", "top_p": 0})", "top_p"},
      {Endpoint::Completions, R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {Endpoint::Completions, R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {Endpoint::Completions, R"({"prompt": "x", "max_tokens": 100000})", "max_tokens"},
      {Endpoint::Completions, R"({"prompt": "x", "n": 0})", "n"},
      {Endpoint::Completions, R"({"prompt": "x", "n": 99})", "n"},
      {Endpoint::Completions, R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", "stop"},
      {Endpoint::Completions, R"({"prompt": "x", "stop": [""]})", "stop"},
      {Endpoint::Completions, R"({"prompt": "x", "stop": 3})", "stop"},
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": true})", "logprobs"},
      {Endpoint::Completions, R"({"prompt": "x", "presence_penalty": 3})", "presence_penalty"},
      {Endpoint::Completions, R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {Endpoint::Completions, R"({"prompt": "x", "echo": true})", "echo"},
      {Endpoint::Completions, R"({"prompt": "x", "logit_bias": {"1": 5}})", "logit_bias"},
      {Endpoint::Completions, R"({"prompt": "x", "best_of": 3})", "best_of"},
      {Endpoint::Completions, R"({"prompt": "x", "model": 1})", "model"},
      {Endpoint::Chat, R"({"messages": []})", "messages"},
      {Endpoint::Chat, R"({"messages": [{"content": "x"}]})", "messages[0].role"},
      {Endpoint::Chat, R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {Endpoint::Chat, R"({"messages": [{"role": "user"}]})", "messages[0].content"},
      {Endpoint::Chat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content"},
      {Endpoint::Chat, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs"},
      {Endpoint::Chat, R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})", "tools"},
      {Endpoint::Chat, R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", "tools"},
      {Endpoint::Chat, R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"})", "tool_choice"},
      {Endpoint::Chat, R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})",
       "response_format"},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(c.ep, c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.what();
  }
  // No tools, said explicitly, is fine.
  EXPECT_EQ(error_of(Endpoint::Chat, R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "tool_choice": "none"})")
                .status,
            0);
}

TEST(OpenAIRequest, BadJsonAndDepthLimit) {
  EXPECT_EQ(error_of(Endpoint::Completions, "{").status, 400);
  EXPECT_EQ(error_of(Endpoint::Completions, "[1]").status, 400);
  EXPECT_EQ(error_of(Endpoint::Completions, "").status, 400);
  RequestLimits limits;
  limits.max_json_depth = 4;
  const std::string deep = R"({"prompt": "x", "a": [[[[1]]]]})";
  const ApiError e = error_of(Endpoint::Completions, deep, limits);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(std::string(e.what()).find("nested deeper"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_EQ(error_of(Endpoint::Completions, R"({"prompt": "[[[[[[[[[[{{{{{{"})", limits).status, 0);
}

TEST(OpenAIRequest, ErrorBodyIsOpenAIShaped) {
  const ApiError e(429, "slow down", "rate_limit_error", {}, "rate_limit_exceeded");
  const Json j = Json::parse(error_body(e));
  EXPECT_EQ(j["error"]["message"], "slow down");
  EXPECT_EQ(j["error"]["type"], "rate_limit_error");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_EQ(j["error"]["code"], "rate_limit_exceeded");
}

TEST(OpenAIResponse, ChunksAndFullResponses) {
  ResponseMeta chat{Endpoint::Chat, "chatcmpl-1", 5, "m"};
  ChoicePiece first{0, "Hel", false, {}, {}, true};
  Json c = stream_chunk(chat, first, true);
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "Hel");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(c.contains("usage") && c["usage"].is_null());

  ChoicePiece last{1, "", false, {}, "stop", false};
  c = stream_chunk(chat, last, false);
  EXPECT_EQ(c["choices"][0]["index"], 1);
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(c["choices"][0]["delta"].contains("content"));
  EXPECT_FALSE(c.contains("usage"));

  const Json u = usage_chunk(chat, {3, 4, 0});
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 7);

  ResponseMeta cmpl{Endpoint::Completions, "cmpl-1", 5, "m"};
  LogprobEntry lp{" a", -0.5f, {{" a", -0.5f}, {" b", -1.5f}}, 0};
  const Json full = full_response(cmpl, {{0, " a", true, {lp}, "length", false}}, {2, 1, 0});
  EXPECT_EQ(full["object"], "text_completion");
  EXPECT_EQ(full["choices"][0]["text"], " a");
  EXPECT_EQ(full["choices"][0]["logprobs"]["tokens"][0], " a");
  EXPECT_EQ(full["choices"][0]["logprobs"]["top_logprobs"][0][" b"], -1.5);
  EXPECT_EQ(full["choices"][0]["logprobs"]["text_offset"][0], 0);

  const Json chat_full = full_response(chat, {{0, "x", true, {lp}, "stop", false}}, {2, 1, 0});
  EXPECT_EQ(chat_full["choices"][0]["message"]["content"], "x");
  EXPECT_EQ(chat_full["choices"][0]["logprobs"]["content"][0]["bytes"], Json::array({32, 97}));
  EXPECT_EQ(chat_full["choices"][0]["logprobs"]["content"][0]["top_logprobs"][1]["token"], " b");
}

TEST(OpenAIResponse, InvalidUtf8IsReplacedNotThrown) {
  Json j = {{"t", std::string("\xe2\x82", 2)}};
  EXPECT_NO_THROW(dump(j));
}

}  // namespace
}  // namespace llmserve::server
