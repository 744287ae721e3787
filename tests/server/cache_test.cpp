// The response cache in front of the engine (server/cache_front.h): exact
// hits only for identical canonical requests, nothing cached for random
// sampling or a request that opts out, hits replayed as JSON or SSE, the
// semantic layer with verified hits (n-gram and model embedders), DELETE
// /v1/cache and its admin key, TTL expiry on an injected clock, concurrent
// identical requests, a client gone during an embedding, the metrics and bad
// settings.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>

#include "core/error.h"
#include "raw_client.h"
#include "server_fixture.h"

namespace llmserve::server {
namespace {

class CacheTest : public ServerTest {
 protected:
  void start_cached(CacheSettings cache, Options o = {}) {
    o.api.cache = std::move(cache);
    start(std::move(o));
  }
  static CacheSettings exact() {
    CacheSettings s;
    s.mode = CacheMode::Exact;
    return s;
  }
  static Json greedy(const std::string& prompt, int max_tokens = 8) {
    return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }
  // The x-llmserve-cache header of a 200 answer.
  static std::string layer(const HttpResult& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    return header(r, "x-llmserve-cache");
  }
  static std::string text(const HttpResult& r) { return Json::parse(r.body)["choices"][0]["text"].get<std::string>(); }
  // The text of a streamed answer's chunks, choice 0.
  static std::string streamed_text(const HttpResult& r) {
    std::string out;
    for (const std::string& e : events(r.body)) {
      if (e == "[DONE]") continue;
      const Json j = Json::parse(e);
      if (!j["choices"].empty() && j["choices"][0]["text"].is_string()) out += j["choices"][0]["text"].get<std::string>();
    }
    return out;
  }
  HttpResult del(const std::string& path, Headers h = {}) {
    HttpClient c = client();
    return c.request("DELETE", path, "", h);
  }
};

TEST_F(CacheTest, ExactHitsOnlyForIdenticalCanonicalRequests) {
  Options o;
  o.models = {{"a", model_file()}, {"b", model_file()}};
  o.api.keys = ApiKeys(std::vector<std::string>{"key-1", "key-2"});
  start_cached(exact(), o);
  const Headers key1{{"Authorization", "Bearer key-1"}}, key2{{"Authorization", "Bearer key-2"}};
  Json request = greedy("The cache");
  request["model"] = "a";
  const HttpResult first = post("/v1/completions", request, key1);
  EXPECT_EQ(layer(first), "miss");
  const HttpResult again = post("/v1/completions", request, key1);
  EXPECT_EQ(layer(again), "exact");
  EXPECT_EQ(text(again), text(first));
  EXPECT_NE(Json::parse(again.body)["id"], Json::parse(first.body)["id"]);  // a new id for the replay

  Json other_tokens = request, other_model = request, other_n = request, other_stop = request, other_seed = request;
  other_tokens["max_tokens"] = 9;
  other_model["model"] = "b";
  other_n["n"] = 2;
  other_stop["stop"] = {"zz"};
  other_seed["seed"] = 7;
  for (const Json& r : {other_tokens, other_model, other_n, other_stop, other_seed})
    EXPECT_EQ(layer(post("/v1/completions", r, key1)), "miss") << r.dump();
  EXPECT_EQ(layer(post("/v1/completions", request, key2)), "miss");  // another tenant
  Json chat = {{"model", "a"}, {"messages", {{{"role", "user"}, {"content", "The cache"}}}}, {"max_tokens", 8}, {"temperature", 0}};
  EXPECT_EQ(layer(post("/v1/chat/completions", chat, key1)), "miss");
  EXPECT_EQ(layer(post("/v1/chat/completions", chat, key1)), "exact");
}

TEST_F(CacheTest, RandomSamplingAndOptOutsAreNotCached) {
  start_cached(exact());
  const Json random = {{"prompt", "The cache"}, {"max_tokens", 4}, {"temperature", 1}};
  EXPECT_EQ(layer(post("/v1/completions", random)), "bypass");
  EXPECT_EQ(layer(post("/v1/completions", random)), "bypass");
  Json seeded = random;
  seeded["seed"] = 3;  // deterministic again
  EXPECT_EQ(layer(post("/v1/completions", seeded)), "miss");
  EXPECT_EQ(layer(post("/v1/completions", seeded)), "exact");

  Json opted_out = greedy("Opted out");
  opted_out["cache"] = false;
  EXPECT_EQ(layer(post("/v1/completions", opted_out)), "bypass");
  const Json plain = greedy("Opted out");
  EXPECT_EQ(layer(post("/v1/completions", plain, {{"Cache-Control", "max-age=0, No-Store"}})), "bypass");
  EXPECT_EQ(layer(post("/v1/completions", plain)), "miss");  // neither stored anything
  Json bad = greedy("x");
  bad["cache"] = "no";
  EXPECT_EQ(post("/v1/completions", bad).status, 400);
}

TEST_F(CacheTest, OffByDefault) {
  start();
  const HttpResult r = post("/v1/completions", greedy("The cache"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(find_header(r, "x-llmserve-cache"), nullptr);
  EXPECT_EQ(metric_total("llmserve:cache_queries_total"), -1);
  EXPECT_EQ(del("/v1/cache").status, 400);
}

TEST_F(CacheTest, AStreamedAnswerReplaysAsTheSameText) {
  start_cached(exact());
  Json request = greedy("Streams", 12);
  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  const HttpResult first = post("/v1/completions", request);
  EXPECT_EQ(layer(first), "miss");
  const HttpResult replayed = post("/v1/completions", request);
  EXPECT_EQ(layer(replayed), "exact");
  EXPECT_EQ(streamed_text(replayed), streamed_text(first));
  const auto chunks = events(replayed.body);
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks.back(), "[DONE]");
  const Json usage = Json::parse(chunks[chunks.size() - 2])["usage"];
  EXPECT_EQ(usage, Json::parse(events(first.body)[events(first.body).size() - 2])["usage"]);
  Json whole = greedy("Streams", 12);  // the same request, not streamed
  const HttpResult json = post("/v1/completions", whole);
  EXPECT_EQ(layer(json), "exact");
  EXPECT_EQ(text(json), streamed_text(first));
}

// With admin keys, DELETE /v1/cache takes one of them: no key or a wrong
// one is 401, an API key 403, and an admin key is good for nothing else.
TEST_F(CacheTest, DeleteTakesAnAdminKeyNotAnApiKey) {
  Options o;
  o.api.keys = ApiKeys(std::vector<std::string>{"key-1"});
  o.api.admin_keys = ApiKeys(std::vector<std::string>{"admin-1"});
  start_cached(exact(), o);
  const Headers key{{"Authorization", "Bearer key-1"}}, admin{{"Authorization", "Bearer admin-1"}};
  EXPECT_EQ(layer(post("/v1/completions", greedy("Deleted"), key)), "miss");
  for (const Headers& h : {Headers{}, Headers{{"Authorization", "Bearer key-2"}}}) {
    const HttpResult r = del("/v1/cache", h);
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_EQ(Json::parse(r.body)["error"]["code"], "invalid_api_key");
  }
  const HttpResult refused = del("/v1/cache", key);
  EXPECT_EQ(refused.status, 403);
  const Json error = Json::parse(refused.body)["error"];
  EXPECT_EQ(error["type"], "permission_error");
  EXPECT_EQ(error["code"], "insufficient_permissions");
  EXPECT_NE(error["message"].get<std::string>().find("--admin-key"), std::string::npos) << error;
  EXPECT_EQ(client().request("GET", "/v1/cache", "", admin).status, 405);
  const HttpResult cleared = del("/v1/cache", admin);
  EXPECT_EQ(cleared.status, 200);
  EXPECT_EQ(Json::parse(cleared.body)["entries"], 1);
  EXPECT_EQ(layer(post("/v1/completions", greedy("Deleted"), key)), "miss");
  EXPECT_EQ(post("/v1/completions", greedy("Deleted"), admin).status, 401);
  EXPECT_EQ(client().request("GET", "/v1/models", "", admin).status, 401);
}

// Without an admin key, a server with API keys lets no one clear the cache
// (403 naming --admin-key); an open one lets anyone. Admin keys alone guard
// only the clearing: the rest of the API stays open.
TEST_F(CacheTest, WithoutAdminKeysOnlyAnOpenServerClears) {
  Options keyed;
  keyed.api.keys = ApiKeys(std::vector<std::string>{"key-1"});
  start_cached(exact(), keyed);
  EXPECT_EQ(del("/v1/cache").status, 401);
  const HttpResult refused = del("/v1/cache", {{"Authorization", "Bearer key-1"}});
  EXPECT_EQ(refused.status, 403);
  const Json error = Json::parse(refused.body)["error"];
  EXPECT_EQ(error["code"], "insufficient_permissions");
  EXPECT_NE(error["message"].get<std::string>().find("serve --admin-key"), std::string::npos) << error;
  server_.reset();

  start_cached(exact());
  EXPECT_EQ(layer(post("/v1/completions", greedy("Open"))), "miss");
  const HttpResult open = del("/v1/cache");
  EXPECT_EQ(open.status, 200);
  EXPECT_EQ(Json::parse(open.body)["entries"], 1);
  server_.reset();

  Options admin_only;
  admin_only.api.admin_keys = ApiKeys(std::vector<std::string>{"admin-1"});
  start_cached(exact(), admin_only);
  EXPECT_EQ(layer(post("/v1/completions", greedy("Open"))), "miss");
  EXPECT_EQ(del("/v1/cache").status, 401);
  EXPECT_EQ(del("/v1/cache", {{"Authorization", "Bearer other"}}).status, 401);
  EXPECT_EQ(del("/v1/cache", {{"Authorization", "Bearer admin-1"}}).status, 200);
}

TEST_F(CacheTest, EntriesExpireAfterTheirTtl) {
  auto now = std::make_shared<std::atomic<int64_t>>(0);  // seconds past an origin
  CacheSettings s = exact();
  s.ttl = std::chrono::seconds(60);
  s.clock = [now] { return gateway::TimePoint{} + std::chrono::seconds(now->load()); };
  start_cached(s);
  EXPECT_EQ(layer(post("/v1/completions", greedy("Expires"))), "miss");
  *now = 59;
  EXPECT_EQ(layer(post("/v1/completions", greedy("Expires"))), "exact");
  *now = 60;
  EXPECT_EQ(layer(post("/v1/completions", greedy("Expires"))), "miss");
}

TEST_F(CacheTest, ConcurrentIdenticalRequestsBothSucceedAndLeaveOneEntry) {
  start_cached(exact());
  HttpResult a, b;
  std::thread other([&] { a = post("/v1/completions", greedy("Together", 16)); });
  b = post("/v1/completions", greedy("Together", 16));
  other.join();
  EXPECT_EQ(text(a), text(b));
  HttpClient c = client();
  const std::string metrics = c.request("GET", "/metrics", "").body;
  EXPECT_NE(metrics.find("\nllmserve:cache_entries 1\n"), std::string::npos) << metrics;
  EXPECT_TRUE(settles_to_idle());
}

TEST_F(CacheTest, MetricsCountQueriesHitsAndLookups) {
  start_cached(exact());
  post("/v1/completions", greedy("Counted"));
  post("/v1/completions", greedy("Counted"));
  HttpClient c = client();
  const std::string m = c.request("GET", "/metrics", "").body;
  for (const char* line : {"llmserve:cache_queries_total{layer=\"exact\"} 2", "llmserve:cache_hits_total{layer=\"exact\"} 1",
                           "llmserve:cache_hits_total{layer=\"semantic\"} 0", "llmserve:cache_verify_rejections_total 0",
                           "llmserve:cache_lookup_seconds_count 2", "llmserve:cache_entries 1"})
    EXPECT_NE(m.find(std::string("\n") + line + "\n"), std::string::npos) << line;
  EXPECT_NE(m.find("\nllmserve:cache_bytes "), std::string::npos);
}

TEST_F(CacheTest, SettingsThatCannotWorkStopTheStart) {
  CacheSettings tau_for_nobody = exact();
  tau_for_nobody.taus["nobody"] = 0.5;
  CacheSettings unknown_embedder = exact();
  unknown_embedder.mode = CacheMode::Semantic;
  unknown_embedder.embedder = "nobody";
  CacheSettings no_ttl = exact();
  no_ttl.ttl = std::chrono::milliseconds(0);
  CacheSettings bad_tau = unknown_embedder;
  bad_tau.embedder = "ngram";
  bad_tau.tau = 1.5;
  for (const CacheSettings& s : {tau_for_nobody, unknown_embedder, no_ttl, bad_tau}) {
    Options o;
    o.api.cache = s;
    EXPECT_THROW(start(o), Error);
  }
}

// Semantic hits on a real model: the n-gram embedder finds a prompt that
// differs only in case and punctuation (similarity 1); verification keeps a
// hit whose answer the model still finds likely and refuses one offered for
// an unrelated prompt at tau 0.
class SemanticCacheTest : public CacheTest {
 protected:
  void start_semantic(const std::string& path, bool verify, double tau) {
    CacheSettings s;
    s.mode = CacheMode::Semantic;
    s.tau = tau;
    s.verify = verify;
    Options o;
    o.models = {{"stories", path}};
    start_cached(s, o);
  }
};

TEST_F(SemanticCacheTest, AParaphraseHitIsVerifiedAndServed) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  start_semantic(path, true, 0.9);
  const HttpResult first = post("/v1/completions", greedy("Once upon a time, there was a little girl", 24));
  EXPECT_EQ(layer(first), "miss");
  const HttpResult near = post("/v1/completions", greedy("once upon a time there was a little girl", 24));
  EXPECT_EQ(layer(near), "semantic");
  EXPECT_EQ(*find_header(near, "x-llmserve-cache-similarity"), "1.0000");
  EXPECT_EQ(text(near), text(first));
  EXPECT_EQ(metric_total("llmserve:cache_hits_total"), 1);
}

TEST_F(SemanticCacheTest, VerificationRefusesAnAnswerToAnotherPrompt) {
  REQUIRE_MODEL(path, "stories260K.gguf");
  const Json story = greedy("Once upon a time, there was a little girl", 24);
  const Json other = greedy("The big dog ran to the park. He", 24);
  {
    start_semantic(path, false, 0.0);  // unverified: anything in the namespace is a hit
    EXPECT_EQ(layer(post("/v1/completions", story)), "miss");
    EXPECT_EQ(layer(post("/v1/completions", other)), "semantic");
    server_.reset();
  }
  start_semantic(path, true, 0.0);
  EXPECT_EQ(layer(post("/v1/completions", story)), "miss");
  EXPECT_EQ(layer(post("/v1/completions", other)), "miss");
  HttpClient c = client();
  const std::string m = c.request("GET", "/metrics", "").body;
  EXPECT_NE(m.find("\nllmserve:cache_verify_rejections_total 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("\nllmserve:cache_entries 2\n"), std::string::npos);  // the other prompt's own answer joined
}

// The semantic layer with a served model as the embedder (--cache-embedder
// MODEL): stories260K answers, TinyStories-656K embeds each prompt through
// an engine embedding request.
class ModelEmbedderTest : public CacheTest {
 protected:
  static constexpr int kEmbedder = 1;  // the engine's index of the embedding model
  void start_with_embedder(const std::string& answering, const std::string& embedding) {
    CacheSettings s;
    s.mode = CacheMode::Semantic;
    s.embedder = "embedder";
    s.tau = 0.9;
    Options o;
    o.models = {{"stories", answering}, {"embedder", embedding}};
    start_cached(s, o);
  }
  static Json story(const std::string& prompt) {
    Json r = greedy(prompt, 16);
    r["model"] = "stories";
    return r;
  }
  // A gauge or counter without labels, from /metrics; -1 when absent.
  double unlabeled(const std::string& name) {
    HttpClient c = client();
    return unlabeled(name, c);
  }
  static double unlabeled(const std::string& name, HttpClient& c) {
    const std::string text = c.request("GET", "/metrics", "").body;
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
};

// The same prompt is an exact hit, one without its comma a verified semantic
// hit at the embedder's similarity (below 1, where the n-gram embedder,
// blind to punctuation, would give 1), an unrelated one a miss;
// each semantic query is one embedding request of the embedder model.
TEST_F(ModelEmbedderTest, ANearPromptIsASemanticHitThroughTheModel) {
  REQUIRE_MODEL(answering, "stories260K.gguf");
  REQUIRE_MODEL(embedding, "TinyStories-656K.f16.gguf");
  start_with_embedder(answering, embedding);
  const HttpResult first = post("/v1/completions", story("Once upon a time, there was a little girl"));
  EXPECT_EQ(layer(first), "miss");
  EXPECT_EQ(layer(post("/v1/completions", story("Once upon a time, there was a little girl"))), "exact");
  const HttpResult near = post("/v1/completions", story("Once upon a time there was a little girl"));
  EXPECT_EQ(layer(near), "semantic");
  const std::string* similarity = find_header(near, "x-llmserve-cache-similarity");
  ASSERT_NE(similarity, nullptr);
  EXPECT_GE(std::stod(*similarity), 0.9);
  EXPECT_LT(std::stod(*similarity), 1.0);
  EXPECT_EQ(text(near), text(first));
  EXPECT_EQ(layer(post("/v1/completions", story("The big dog ran to the park. He"))), "miss");

  EXPECT_EQ(server_->engine().metrics(kEmbedder).requests_submitted, 3u);
  HttpClient c = client();
  const std::string m = c.request("GET", "/metrics", "").body;
  for (const char* line : {"llmserve:cache_queries_total{layer=\"exact\"} 4", "llmserve:cache_queries_total{layer=\"semantic\"} 3",
                           "llmserve:cache_hits_total{layer=\"exact\"} 1", "llmserve:cache_hits_total{layer=\"semantic\"} 1",
                           "llmserve:cache_verify_rejections_total 0", "llmserve:cache_entries 2"})
    EXPECT_NE(m.find(std::string("\n") + line + "\n"), std::string::npos) << line << "\n" << m;
  EXPECT_TRUE(settles_to_idle());
}

// A client that resets its connection while its prompt is being embedded:
// the request's queue slot comes back once the embedding finishes. The
// engine is held in a callback of its own request until the server has
// seen the reset, so the embedding cannot finish first.
TEST_F(ModelEmbedderTest, AClientGoneDuringTheEmbeddingLeavesNoQueueSlot) {
  REQUIRE_MODEL(answering, "stories260K.gguf");
  REQUIRE_MODEL(embedding, "TinyStories-656K.f16.gguf");
  start_with_embedder(answering, embedding);
  // The engine thread waits in the blocker's first callback until opened.
  struct Hold {
    std::promise<void> held, release;
    std::atomic<bool> first{true}, opened{false};
    void open() {
      if (!opened.exchange(true)) release.set_value();
    }
  };
  auto hold = std::make_shared<Hold>();
  struct Opener {  // the engine goes on whatever the test's outcome
    std::shared_ptr<Hold> h;
    ~Opener() { h->open(); }
  } opener{hold};
  engine::RequestParams blocker;
  blocker.prompt = {1};
  blocker.max_new_tokens = 1;
  server_->engine().submit(blocker, [hold, released = hold->release.get_future().share()](const engine::RequestOutput&) {
    if (!hold->first.exchange(false)) return;
    hold->held.set_value();
    released.wait();
  });
  hold->held.get_future().wait();

  const std::string body = story("Once upon a time, there was a little girl").dump();
  auto until = [](const std::function<bool()>& done) {  // bounded polling
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  {
    RawClient gone(server_->port());
    gone.send("POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
    // The slot is reserved and the embedding submitted in one handler run.
    until([&] { return server_->api().in_flight() > 0; });
    ASSERT_EQ(server_->api().in_flight(), 1);
    gone.reset();
  }
  // The server has seen the reset once only the poll's connection is open.
  bool reset_seen = false;
  HttpClient poll = client();  // kept alive: polling opens no connections to count
  until([&] { return reset_seen = unlabeled("llmserve:http_open_connections", poll) == 1; });
  ASSERT_TRUE(reset_seen);
  EXPECT_EQ(server_->api().in_flight(), 1);  // the embedding has not finished
  hold->open();
  until([&] { return server_->api().in_flight() == 0; });
  EXPECT_EQ(server_->api().in_flight(), 0);
  EXPECT_TRUE(settles_to_idle());
  EXPECT_EQ(unlabeled("llmserve:cache_entries"), 0);  // nothing was generated to store
}

}  // namespace
}  // namespace llmserve::server
