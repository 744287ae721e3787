// Speculative decoding through the server: greedy answers are the ones
// plain decoding gives, the spec_decode counters count (per model), a
// request can opt out, and bad options or a bad request field are refused
// clearly.
#include "server_fixture.h"

namespace llmserve::server {
namespace {

engine::SpeculationOptions always(const std::string& method, int k) {
  engine::SpeculationOptions s;
  s.method = method;
  s.k = k;
  s.adaptive = false;  // draft every step, so verification is exercised
  return s;
}

Json greedy_completion(const std::string& prompt, bool speculative = true) {
  return {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}, {"speculative", speculative}};
}

const char* kPrompts[] = {"Lily and Tom. Lily and Tom. Lily and", "Once upon a time", "The cat sat on the mat. The cat"};

std::vector<std::string> answers(ServerTest& t, HttpResult (ServerTest::*post)(const std::string&, const Json&, Headers),
                                 bool speculative) {
  std::vector<std::string> out;
  for (const char* p : kPrompts) {
    const HttpResult r = (t.*post)("/v1/completions", greedy_completion(p, speculative), {});
    EXPECT_EQ(r.status, 200) << r.body;
    out.push_back(Json::parse(r.body)["choices"][0]["text"].get<std::string>());
  }
  return out;
}

class SpecServerTest : public ServerTest {
 public:
  using ServerTest::metric_total;
  using ServerTest::post;
  void start_with(engine::SpeculationOptions spec) {
    Options o;
    o.spec = std::move(spec);
    start(o);
  }
  void stop() { server_.reset(); }
};

TEST_F(SpecServerTest, NgramGreedyAnswersEqualPlainOnes) {
  start_with({});
  const auto plain = answers(*this, &SpecServerTest::post, true);
  stop();
  start_with(always("ngram", 4));
  EXPECT_EQ(answers(*this, &SpecServerTest::post, true), plain);
  EXPECT_GT(metric_total("llmserve:spec_decode_num_drafts_total"), 0);
  EXPECT_GT(metric_total("llmserve:spec_decode_num_draft_tokens_total"), 0);
  EXPECT_GE(metric_total("llmserve:spec_decode_num_accepted_tokens_per_pos_total"), 0);
  // Opting out: the same answers, no new drafts.
  const double drafts = metric_total("llmserve:spec_decode_num_drafts_total");
  EXPECT_EQ(answers(*this, &SpecServerTest::post, false), plain);
  EXPECT_EQ(metric_total("llmserve:spec_decode_num_drafts_total"), drafts);
}

TEST_F(SpecServerTest, SelfDraftGreedyAnswersEqualPlainOnes) {
  start_with({});
  const auto plain = answers(*this, &SpecServerTest::post, true);
  stop();
  auto s = always("self", 3);
  s.draft_quant = "q8_0";
  start_with(s);
  EXPECT_EQ(answers(*this, &SpecServerTest::post, true), plain);
  EXPECT_GT(metric_total("llmserve:spec_decode_num_accepted_tokens_total"), 0);
}

// --spec gives every model a proposer of its own: a request to the second
// model drafts, and the drafts count under its name.
TEST_F(SpecServerTest, EveryModelDraftsWithItsOwnProposer) {
  Options o;
  o.models = {{"a", model_file()}, {"b", model_file()}};
  o.spec = always("ngram", 4);
  start(o);
  Json body = greedy_completion(kPrompts[0]);
  body["model"] = "b";
  ASSERT_EQ(post("/v1/completions", body).status, 200);
  HttpClient c = client();
  const std::string text = c.request("GET", "/metrics", "").body;
  auto drafts = [&](const std::string& model) {
    const std::string series = "\nllmserve:spec_decode_num_drafts_total{model_name=\"" + model + "\"} ";
    const size_t at = text.find(series);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + series.size()));
  };
  EXPECT_EQ(drafts("a"), 0) << text;
  EXPECT_GT(drafts("b"), 0) << text;
}

TEST_F(SpecServerTest, SpeculativeOfTheWrongTypeIs400) {
  start_with(always("ngram", 2));
  const HttpResult r = post("/v1/completions", {{"prompt", "Hi"}, {"speculative", "yes"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Json::parse(r.body)["error"]["param"], "speculative");
}

TEST(SpecServerOptions, BadOptionsAreRefusedAtStartUp) {
  auto refused = [](engine::SpeculationOptions s, const std::string& words) {
    ModelConfig e;
    e.models = {{"tiny", model_file()}};
    e.threads = 1;
    e.instance.kv_blocks = 64;
    e.spec = std::move(s);
    HttpConfig http;
    http.port = 0;
    try {
      Server server(e, {}, http);
      ADD_FAILURE() << "started with bad options";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(words), std::string::npos) << err.what();
    }
  };
  refused(always("draft", 4), "--draft-model");
  refused(always("ngram", 0), "--spec-k");
  refused(always("ngram", 17), "--spec-k");
  refused(always("medusa", 4), "--spec");
  auto q = always("self", 4);
  q.draft_quant = "q6_k";
  refused(q, "--draft-quant");
  auto other = always("draft", 4);
  other.draft_model = "/nonexistent/draft.gguf";
  refused(other, "draft.gguf");
}

}  // namespace
}  // namespace llmserve::server
