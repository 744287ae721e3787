// POST /v1/embeddings: every shape of `input`, float and base64 encodings,
// usage, and the errors, parsed alone and over loopback HTTP.
#include <gtest/gtest.h>

#include <cmath>

#include "server/api_error.h"
#include "server/openai_embedding.h"
#include "server_fixture.h"

namespace llmserve::server {
namespace {

EmbeddingRequest parse(const std::string& body, const RequestLimits& limits = {}) {
  return parse_embedding_request(parse_json_body(body, limits.max_json_depth), limits);
}

// The ApiError a body produces (status 0 when it parses).
ApiError error_of(const std::string& body, const RequestLimits& limits = {}) {
  try {
    parse(body, limits);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "no error");
}

TEST(EmbeddingRequest, ParsesEveryShapeOfInput) {
  EmbeddingRequest r = parse(R"({"model": "m", "input": "hello", "user": "ignored"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].text, "hello");
  EXPECT_FALSE(r.inputs[0].is_tokens);
  EXPECT_EQ(r.encoding, EmbeddingEncoding::Float);
  EXPECT_EQ(r.dimensions, 0);

  r = parse(R"({"input": ["a", "b"], "encoding_format": "base64", "dimensions": 64})");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].text, "b");
  EXPECT_EQ(r.encoding, EmbeddingEncoding::Base64);
  EXPECT_EQ(r.dimensions, 64);

  r = parse(R"({"input": [1, 2, 3]})");
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_TRUE(r.inputs[0].is_tokens);
  EXPECT_EQ(r.inputs[0].tokens, (std::vector<int32_t>{1, 2, 3}));

  r = parse(R"({"input": [[1, 2], [3]], "encoding_format": "float"})");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].tokens, (std::vector<int32_t>{3}));
}

TEST(EmbeddingRequest, RefusesWrongShapesNamingTheField) {
  for (const char* body : {R"({})", R"({"input": 5})", R"({"input": []})", R"({"input": ""})", R"({"input": ["a", ""]})",
                           R"({"input": ["a", 1]})", R"({"input": [[1], []]})", R"({"input": [[1], "a"]})",
                           R"({"input": [1, -2]})", R"({"input": [[1.5]]})", R"({"input": [{"text": "a"}]})"}) {
    const ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "input") << body << ": " << e.what();
  }
  EXPECT_EQ(error_of(R"({"input": "a", "encoding_format": "hex"})").param, "encoding_format");
  EXPECT_EQ(error_of(R"({"input": "a", "dimensions": 0})").param, "dimensions");
  EXPECT_EQ(error_of(R"({"input": "a", "model": 3})").param, "model");
  RequestLimits limits;
  limits.max_embedding_inputs = 2;
  EXPECT_EQ(error_of(R"({"input": ["a", "b", "c"]})", limits).status, 400);
  EXPECT_NE(std::string(error_of(R"({"input": ["a", 1]})").what()).find("input[1]"), std::string::npos);
}

// Little-endian float32 bytes, base64 with padding, as OpenAI sends them.
TEST(EmbeddingRequest, Base64IsLittleEndianFloat32) {
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_floats(std::vector<float>{1.0f, -2.0f, 0.5f}), "AACAPwAAAMAAAAA/");
}

std::vector<float> floats(const Json& embedding) {
  std::vector<float> v;
  for (const Json& x : embedding) v.push_back(x.get<float>());
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

TEST_F(ServerTest, EmbeddingsOfEveryInputShape) {
  start();
  const HttpResult one = post("/v1/embeddings", {{"model", "tiny"}, {"input", "Once upon a time"}});
  ASSERT_EQ(one.status, 200) << one.body;
  const Json j = Json::parse(one.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  const std::vector<float> v = floats(j["data"][0]["embedding"]);
  ASSERT_FALSE(v.empty());
  double norm = 0;
  for (float x : v) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);

  // Text is tokenized as a completion prompt is: the same tokens give the same vector.
  const Json tokens = Json::parse(post("/tokenize", {{"prompt", "Once upon a time"}}).body)["tokens"];
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens.size());
  EXPECT_EQ(j["usage"]["total_tokens"], tokens.size());
  const Json by_ids = Json::parse(post("/v1/embeddings", {{"input", tokens}}).body);
  EXPECT_LE(max_abs_diff(floats(by_ids["data"][0]["embedding"]), v), 1e-6f);

  // Several inputs: one vector each, in order, batched together.
  const Json texts = Json::parse(post("/v1/embeddings", {{"input", {"Once upon a time", "The cat sat on the mat."}}}).body);
  ASSERT_EQ(texts["data"].size(), 2u);
  EXPECT_EQ(texts["data"][1]["index"], 1);
  EXPECT_LE(max_abs_diff(floats(texts["data"][0]["embedding"]), v), 1e-6f);
  EXPECT_GT(max_abs_diff(floats(texts["data"][1]["embedding"]), v), 1e-3f);
  const Json lists = Json::parse(post("/v1/embeddings", {{"input", Json::array({tokens, Json::array({1, 2, 3})})}}).body);
  ASSERT_EQ(lists["data"].size(), 2u);
  EXPECT_EQ(lists["usage"]["prompt_tokens"], tokens.size() + 3);
  EXPECT_LE(max_abs_diff(floats(lists["data"][0]["embedding"]), v), 1e-6f);

  // base64: the same float32 values.
  const Json b64 = Json::parse(post("/v1/embeddings", {{"input", "Once upon a time"}, {"encoding_format", "base64"}}).body);
  EXPECT_EQ(b64["data"][0]["embedding"], base64_floats(floats(by_ids["data"][0]["embedding"])));
  EXPECT_TRUE(settles_to_idle());
}

TEST_F(ServerTest, EmbeddingErrorsAre400sNamingTheProblem) {
  Options o;
  o.api.keys = ApiKeys({"sk-test"});
  start(o);
  const Headers auth = {{"Authorization", "Bearer sk-test"}};
  EXPECT_EQ(post("/v1/embeddings", {{"input", "x"}}).status, 401);
  EXPECT_EQ(client().request("GET", "/v1/embeddings", "", auth).status, 405);

  auto error = [&](const Json& body) {
    const HttpResult r = post("/v1/embeddings", body, auth);
    EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
    return Json::parse(r.body)["error"];
  };
  EXPECT_EQ(error({{"input", Json::array()}})["param"], "input");
  EXPECT_EQ(error({{"input", {1, "a"}}})["param"], "input");
  const Json vocab = error({{"input", {1, 10000000}}});
  EXPECT_NE(vocab["message"].get<std::string>().find("10000000"), std::string::npos) << vocab;
  const int ctx = Json::parse(client().request("GET", "/v1/models", "", auth).body)["data"][0]["max_model_len"];
  const Json longer = error({{"input", std::vector<int>(static_cast<size_t>(ctx) + 1, 1)}});
  EXPECT_EQ(longer["code"], "context_length_exceeded") << longer;
  const Json dims = error({{"input", "x"}, {"dimensions", 3}});
  EXPECT_EQ(dims["param"], "dimensions");
  EXPECT_NE(dims["message"].get<std::string>().find("not supported"), std::string::npos) << dims;
  // A whole context is fine: nothing is generated after it.
  EXPECT_EQ(post("/v1/embeddings", {{"input", std::vector<int>(static_cast<size_t>(ctx), 1)}}, auth).status, 200);
  EXPECT_TRUE(settles_to_idle());
}

}  // namespace
}  // namespace llmserve::server
