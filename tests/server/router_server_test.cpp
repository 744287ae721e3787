// The complexity router through the server: "model": "auto" goes to the
// small or the large served model, says which in x-llmserve-route and the
// response's "model", and counts in llmserve:router_decisions_total; the
// small model's scoring prefill leaves the prompt in its prefix cache; the
// response cache answers a repeat before it is routed; the request's
// timeout and the server's drain end the wait for the routing.
#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>

#include "core/error.h"
#include "server/model_router.h"
#include "server_fixture.h"

namespace llmserve::server {
namespace {

class RouterServerTest : public ServerTest {
 protected:
  // stories260K as the small model, TinyStories-656K as the large one.
  void start_routed(const std::string& small, const std::string& large, double threshold, Options o = {}) {
    o.models = {{"small", small}, {"large", large}};
    o.api.router = {.name = "auto", .small = "small", .large = "large", .threshold = threshold};
    start(o);
  }
  static Json greedy(const std::string& prompt) {
    return {{"model", "auto"}, {"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}};
  }
  // Every queue slot given back (a generation's after its answer is sent).
  bool slots_return() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (server_->api().in_flight() != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return server_->api().in_flight() == 0;
  }
  std::string metrics_text() {
    HttpClient c = client();
    return c.request("GET", "/metrics", "").body;
  }
};

// An exchange whose strand is the test: posted work waits for run_next().
class QueuedExchange final : public Exchange {
 public:
  void respond(HttpResponse) override {}
  void begin_stream(int, std::string, Headers) override {}
  void write(std::string_view) override {}
  void end_stream() override {}
  void on_close(std::function<void()>) override {}
  void on_server_stop(std::function<void()>) override {}
  bool answered() const override { return false; }
  void after(std::chrono::milliseconds, std::function<void()>) override {}
  void post(std::function<void()> fn) override {
    std::lock_guard lock(mu_);
    posted_.push_back(std::move(fn));
    cv_.notify_all();
  }
  void run_next() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !posted_.empty(); });
    auto fn = std::move(posted_.front());
    posted_.pop_front();
    lock.unlock();
    fn();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> posted_;
};

// The caller's (HTTP) thread never waits for the small model's prefill: the
// choice arrives later, through the exchange's strand.
TEST_F(RouterServerTest, TheChoiceComesThroughTheStrandWithoutBlockingTheCaller) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  start_routed(small, large, 1.0);
  std::vector<std::unique_ptr<ServedModel>> models;
  models.push_back(std::make_unique<ServedModel>("small", 0, server_->model(0)));
  models.push_back(std::make_unique<ServedModel>("large", 1, server_->model(1)));
  ModelRouter router({.name = "auto", .small = "small", .large = "large", .threshold = 1.0}, server_->engine(), models);
  GenerationRequest r;
  r.model = "auto";
  r.prompt_text = "Once upon a time";
  ServerMetrics metrics;
  auto ex = std::make_shared<QueuedExchange>();
  const ServedModel* chosen = nullptr;
  router.choose(r, template_prompt(*models[0], r).tokens, metrics, ex, [&](ServedModel& m) { chosen = &m; });
  EXPECT_EQ(chosen, nullptr);
  ex->run_next();
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(chosen->name, "small");  // threshold 1: every score is below it
}

// Threshold 0: every score reaches it, so the large model answers.
TEST_F(RouterServerTest, ThresholdZeroSendsEverythingLarge) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  start_routed(small, large, 0.0);
  const HttpResult r = post("/v1/completions", {{"model", "auto"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-llmserve-route"), "large");
  EXPECT_EQ(Json::parse(r.body)["model"], "large");
  const HttpResult chat =
      post("/v1/chat/completions", {{"model", "auto"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(header(chat, "x-llmserve-route"), "large");
  EXPECT_NE(metrics_text().find("llmserve:router_decisions_total{model_name=\"large\"} 2\n"), std::string::npos)
      << metrics_text();
}

// Threshold 1: no score reaches it, so the small model answers, and finds
// the prompt its scoring prefill computed in the prefix cache.
TEST_F(RouterServerTest, ThresholdOneSendsEverythingSmallWhichReusesTheScoringPrefill) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  start_routed(small, large, 1.0);
  const std::string prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
  const HttpResult r = post("/v1/completions", {{"model", "auto"}, {"prompt", prompt}, {"max_tokens", 4}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(header(r, "x-llmserve-route"), "small");
  EXPECT_EQ(Json::parse(r.body)["model"], "small");
  const engine::EngineMetrics m = server_->engine().metrics(0);
  EXPECT_GE(m.scheduler.prefix_hit_tokens, 16u) << "the generation found at least one block of the prompt cached";
  const std::string text = metrics_text();
  EXPECT_NE(text.find("llmserve:router_decisions_total{model_name=\"small\"} 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("llmserve:router_decisions_total{model_name=\"large\"}"), std::string::npos) << text;
  EXPECT_TRUE(slots_return());  // the scoring prefill's queue slot is given back
}

// A request naming a served model is not routed; token-id prompts cannot be.
TEST_F(RouterServerTest, NamedModelsAreNotRoutedAndTokenPromptsAreRefused) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  start_routed(small, large, 0.5);
  const HttpResult named = post("/v1/completions", {{"model", "small"}, {"prompt", "Once"}, {"max_tokens", 2}});
  ASSERT_EQ(named.status, 200) << named.body;
  EXPECT_EQ(find_header(named, "x-llmserve-route"), nullptr);
  const HttpResult tokens = post("/v1/completions", {{"model", "auto"}, {"prompt", {1, 2, 3}}, {"max_tokens", 2}});
  EXPECT_EQ(tokens.status, 400) << tokens.body;
  EXPECT_EQ(Json::parse(tokens.body)["error"]["param"], "prompt") << tokens.body;
  EXPECT_EQ(metrics_text().find("llmserve:router_decisions_total{"), std::string::npos);
}

// The engine thread held inside a request's callback until release():
// nothing the engine owes (a routing prefill) arrives meanwhile.
class EngineGate {
 public:
  explicit EngineGate(engine::Engine& engine) {
    engine::RequestParams p;
    p.prompt = {1, 2, 3};
    p.max_new_tokens = 1;
    engine.submit(std::move(p), [s = state_](const engine::RequestOutput&) {  // may outlive the gate
      std::unique_lock lock(s->mu);
      if (!s->entered) {
        s->entered = true;
        s->cv.notify_all();
        s->cv.wait(lock, [&] { return s->released; });
      }
    });
    std::unique_lock lock(state_->mu);
    if (!state_->cv.wait_for(lock, std::chrono::seconds(20), [&] { return state_->entered; })) {
      state_->released = true;  // should it enter later, it passes
      throw std::runtime_error("the engine never ran the gate's request");
    }
  }
  ~EngineGate() { release(); }
  void release() {
    std::lock_guard lock(state_->mu);
    state_->released = true;
    state_->cv.notify_all();
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, released = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

TEST_F(RouterServerTest, TheRequestTimeoutEndsTheWaitForTheRouting) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  Options o;
  o.api.request_timeout = std::chrono::milliseconds(200);
  start_routed(small, large, 0.5, o);
  EngineGate gate(server_->engine());
  const HttpResult r = post("/v1/completions", greedy("Once upon a time"));
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "timeout") << r.body;
  EXPECT_NE(find_header(r, "x-request-id"), nullptr);
  gate.release();
  EXPECT_TRUE(settles_to_idle());
  EXPECT_TRUE(slots_return());  // the routing's queue slot is given back
  EXPECT_EQ(metrics_text().find("llmserve:router_decisions_total{"), std::string::npos);
}

TEST_F(RouterServerTest, ADrainTimeoutEndsTheWaitForTheRouting) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  start_routed(small, large, 0.5);
  EngineGate gate(server_->engine());
  auto answer = std::async(std::launch::async, [&] { return post("/v1/completions", greedy("Once upon a time")); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server_->api().in_flight() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(server_->api().in_flight(), 1);
  auto drained = std::async(std::launch::async, [&] { return server_->drain(std::chrono::milliseconds(50)); });
  const HttpResult r = answer.get();
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(Json::parse(r.body)["error"]["code"], "drain_timeout") << r.body;
  gate.release();
  EXPECT_FALSE(drained.get());
  EXPECT_TRUE(slots_return());
}

// With the cache on, "auto" is looked up before it is routed: a repeat
// reaches no model and is answered as the model that wrote it; the router's
// namespace is its own (the same request naming "large" is a miss).
TEST_F(RouterServerTest, TheCacheAnswersARepeatBeforeItIsRouted) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  Options o;
  o.api.cache.mode = CacheMode::Exact;
  start_routed(small, large, 0.0, o);
  const HttpResult first = post("/v1/completions", greedy("Once upon a time"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(header(first, "x-llmserve-cache"), "miss");
  const uint64_t small_prompts = server_->engine().metrics(0).prompt_tokens;
  const HttpResult again = post("/v1/completions", greedy("Once upon a time"));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(header(again, "x-llmserve-cache"), "exact");
  EXPECT_EQ(header(again, "x-llmserve-route"), "large");
  EXPECT_EQ(Json::parse(again.body)["model"], "large");
  EXPECT_EQ(Json::parse(again.body)["choices"], Json::parse(first.body)["choices"]);
  EXPECT_EQ(Json::parse(again.body)["usage"], Json::parse(first.body)["usage"]) << "the large model's prompt tokens";
  EXPECT_EQ(server_->engine().metrics(0).prompt_tokens, small_prompts) << "no routing prefill";
  EXPECT_NE(metrics_text().find("llmserve:router_decisions_total{model_name=\"large\"} 1\n"), std::string::npos);
  Json named = greedy("Once upon a time");
  named["model"] = "large";
  EXPECT_EQ(header(post("/v1/completions", named), "x-llmserve-cache"), "miss");
  EXPECT_TRUE(slots_return());
}

// The key holds the request's own messages (their fields in any order):
// two chats the small model's template renders alike (it ignores a
// message's name) may read otherwise to the model that answers.
TEST_F(RouterServerTest, RoutedChatsThatDifferOnlyWhereTheSmallTemplateIsBlindAreDifferentKeys) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  Options o;
  o.api.cache.mode = CacheMode::Exact;
  start_routed(small, large, 1.0, o);
  auto chat = [](const std::string& name) {
    return Json{{"model", "auto"},
                {"messages", {{{"role", "user"}, {"content", "Hi"}, {"name", name}}}},
                {"max_tokens", 4},
                {"temperature", 0}};
  };
  const HttpResult first = post("/v1/chat/completions", chat("ann"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(header(first, "x-llmserve-route"), "small");
  EXPECT_EQ(header(post("/v1/chat/completions", chat("bob")), "x-llmserve-cache"), "miss");
  const HttpResult again = post("/v1/chat/completions", chat("ann"));
  EXPECT_EQ(header(again, "x-llmserve-cache"), "exact");
  EXPECT_EQ(header(again, "x-llmserve-route"), "small");
  Json reordered = chat("ann");  // the same message, its fields in another order
  reordered["messages"] = Json::array({{{"name", "ann"}, {"content", "Hi"}, {"role", "user"}}});
  EXPECT_EQ(header(post("/v1/chat/completions", reordered), "x-llmserve-cache"), "exact");
  EXPECT_TRUE(slots_return());
}

// A semantic hit in the router's namespace is verified by the model that
// wrote the answer, reading the new prompt as that model does.
TEST_F(RouterServerTest, ASemanticHitBeforeRoutingIsVerifiedByTheModelThatWroteIt) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  Options o;
  o.api.cache.mode = CacheMode::Semantic;
  o.api.cache.tau = 0.9;
  start_routed(small, large, 0.0, o);
  const HttpResult first = post("/v1/completions", greedy("Once upon a time, there was a little girl"));
  ASSERT_EQ(first.status, 200) << first.body;
  const uint64_t large_prompts = server_->engine().metrics(1).prompt_tokens;
  const HttpResult near = post("/v1/completions", greedy("Once upon a time there was a little girl"));
  ASSERT_EQ(near.status, 200) << near.body;
  EXPECT_EQ(header(near, "x-llmserve-cache"), "semantic");
  EXPECT_EQ(header(near, "x-llmserve-route"), "large");
  EXPECT_EQ(Json::parse(near.body)["choices"], Json::parse(first.body)["choices"]);
  EXPECT_GT(server_->engine().metrics(1).prompt_tokens, large_prompts) << "the large model scored the hit";
  EXPECT_NE(metrics_text().find("llmserve:router_decisions_total{model_name=\"large\"} 1\n"), std::string::npos);
}

TEST_F(RouterServerTest, ARouterThatDoesNotFitTheModelsStopsTheStart) {
  REQUIRE_MODEL(small, "stories260K.gguf");
  REQUIRE_MODEL(large, "TinyStories-656K.f16.gguf");
  Options o;
  o.models = {{"small", small}, {"large", large}};
  o.api.router = {.name = "auto", .small = "small", .large = "huge", .threshold = 0.5};
  try {
    start(o);
    FAIL() << "started";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--router-large: no served model is named 'huge'");
  }
}

}  // namespace
}  // namespace llmserve::server
