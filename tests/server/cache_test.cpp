// The response cache in front of the engine (server/cache_front.h): exact
// hits only for identical canonical requests, nothing cached for random
// sampling or a request that opts out, hits replayed as JSON or SSE, the
// semantic layer with verified hits, DELETE /v1/cache and its admin key,
// TTL expiry on an injected clock, concurrent identical requests, the
// metrics and bad settings.
#include <gtest/gtest.h>

#include <atomic>

#include "core/error.h"
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
    const std::string* h = find_header(r, "x-llmserve-cache");
    return h ? *h : "(none)";
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

}  // namespace
}  // namespace llmserve::server
