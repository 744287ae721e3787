// The complexity router's parts that need no model: features, the flags'
// checks, the threshold for a share, the evaluation's numbers and the
// labeled set's reader.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "core/error.h"
#include "gateway/route_features.h"
#include "gateway/router.h"
#include "gateway/router_eval.h"
#include "temp_file.h"

namespace llmserve::gateway {
namespace {

size_t feature(std::string_view name) {
  for (size_t i = 0; i < kRouteFeatureNames.size(); ++i)
    if (kRouteFeatureNames[i] == name) return i;
  ADD_FAILURE() << "no feature " << name;
  return 0;
}

TEST(RouteFeatures, CodeMathDigitsAndReasoningShowInTheirFeatures) {
  const RouteFeatures chat = route_features({.text = "Hi there, how are you?", .prompt_tokens = 7});
  const RouteFeatures code = route_features({.text = "def f(x): return {x[0]: x[1]}  # explain why", .prompt_tokens = 20});
  const RouteFeatures math = route_features({.text = "Solve 3x + 7 = 2(x - 4) and prove it", .prompt_tokens = 20});
  EXPECT_GT(code[feature("code_chars")], chat[feature("code_chars")]);
  EXPECT_GT(code[feature("code_words")], chat[feature("code_words")]);
  EXPECT_GT(math[feature("math_chars")], chat[feature("math_chars")]);
  EXPECT_GT(math[feature("math_words")], chat[feature("math_words")]);
  EXPECT_GT(math[feature("digits")], 0.0);
  EXPECT_EQ(chat[feature("digits")], 0.0);
  EXPECT_GT(code[feature("reasoning_words")], 0.0);
  EXPECT_GT(code[feature("log_prompt_tokens")], chat[feature("log_prompt_tokens")]);
}

TEST(RouteFeatures, RequestShapeAndTheSmallModelsDoubtPassThrough) {
  const RouteFeatures f = route_features({.text = "", .prompt_tokens = 0, .turns = 3, .max_tokens = 100, .entropy = 2.5, .margin = 0.25});
  EXPECT_DOUBLE_EQ(f[feature("log_turns")], std::log(3.0));
  EXPECT_DOUBLE_EQ(f[feature("log_max_tokens")], std::log1p(100.0));
  EXPECT_DOUBLE_EQ(f[feature("entropy")], 2.5);
  EXPECT_DOUBLE_EQ(f[feature("margin")], 0.25);
  EXPECT_DOUBLE_EQ(f[feature("code_chars")], 0.0);
  const double score = route_score(f);
  EXPECT_GT(score, 0.0);
  EXPECT_LT(score, 1.0);
}

const std::vector<std::string> kServed = {"small", "big", "other"};

std::string router_error(RouterConfig c, const std::vector<std::string>& served = kServed) {
  try {
    Router r(std::move(c), served);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Router, ChoosesByThreshold) {
  const Router r({.name = "auto", .small = "small", .large = "big", .threshold = 0.4}, kServed);
  EXPECT_TRUE(r.routes("auto"));
  EXPECT_FALSE(r.routes("small"));
  EXPECT_EQ(r.choose(0.39), "small");
  EXPECT_EQ(r.choose(0.4), "big");
  EXPECT_EQ(r.choose(0.9), "big");
}

TEST(Router, RefusesConfigsThatDoNotFitTheServedModels) {
  EXPECT_EQ(router_error({.small = "small", .large = "big"}), "");
  EXPECT_EQ(router_error({.small = "small", .large = ""}), "the router needs both --router-small and --router-large");
  EXPECT_EQ(router_error({.small = "small", .large = "big"}, {"small"}),
            "the router needs two served models (--model NAME=FILE, twice); this server serves one");
  EXPECT_EQ(router_error({.small = "tiny", .large = "big"}), "--router-small: no served model is named 'tiny'");
  EXPECT_EQ(router_error({.small = "small", .large = "huge"}), "--router-large: no served model is named 'huge'");
  EXPECT_EQ(router_error({.small = "big", .large = "big"}), "--router-small and --router-large both name 'big'");
  EXPECT_EQ(router_error({.name = "other", .small = "small", .large = "big"}), "--router-name 'other' is also a served model's name");
  EXPECT_EQ(router_error({.name = "", .small = "small", .large = "big"}), "--router-name must not be empty");
  EXPECT_NE(router_error({.small = "small", .large = "big", .threshold = 1.5}).find("--router-threshold"), std::string::npos);
}

std::vector<ScoredPrompt> scored(std::initializer_list<std::pair<double, bool>> v) {
  std::vector<ScoredPrompt> out;
  for (const auto& [score, hard] : v) out.push_back({score, hard, 1.0, 3.0, 0.5});
  return out;
}

TEST(RouterEval, ThresholdSendsAtMostTheShareAndKeepsTiesTogether) {
  const auto p = scored({{0.9, true}, {0.8, true}, {0.7, false}, {0.7, false}, {0.1, false}});
  auto large = [&](double t) {
    int n = 0;
    for (const auto& s : p) n += s.score >= t;
    return n;
  };
  EXPECT_EQ(large(threshold_for_share(p, 0.0)), 0);
  EXPECT_EQ(large(threshold_for_share(p, 0.4)), 2);
  EXPECT_EQ(large(threshold_for_share(p, 0.6)), 2);  // the 0.7s tie: both or neither
  EXPECT_EQ(large(threshold_for_share(p, 0.8)), 4);
  EXPECT_EQ(large(threshold_for_share(p, 1.0)), 5);
}

TEST(RouterEval, APerfectRouterRecoversTheGapAndAReversedOneNothing) {
  const auto perfect = evaluate_router(scored({{0.9, true}, {0.2, false}, {0.8, true}, {0.1, false}}), 0.5);
  EXPECT_DOUBLE_EQ(perfect.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(perfect.large_share, 0.5);
  EXPECT_DOUBLE_EQ(perfect.quality, 1.0);
  EXPECT_DOUBLE_EQ(perfect.small_cost_ms, 1.0);
  EXPECT_DOUBLE_EQ(perfect.large_cost_ms, 3.0);
  EXPECT_DOUBLE_EQ(perfect.cost_ms, (1.0 + 1.0 + 3.5 + 3.5) / 4);  // the probe is paid again by the large ones
  // A random router spending 2.25 sends (2.25 - 1) / 2 of the prompts large.
  EXPECT_DOUBLE_EQ(perfect.random_quality, 0.5 + 0.625 * 0.5);
  // Recovered gap by k / N: 0, 1/2, 1, 1, 1; trapezoids.
  EXPECT_DOUBLE_EQ(perfect.apgr, (0.25 + 0.75 + 1 + 1) / 4);

  const auto reversed = evaluate_router(scored({{0.1, true}, {0.9, false}, {0.2, true}, {0.8, false}}), 0.5);
  EXPECT_DOUBLE_EQ(reversed.accuracy, 0.0);
  EXPECT_DOUBLE_EQ(reversed.quality, 0.5);
  EXPECT_DOUBLE_EQ(reversed.apgr, (0 + 0 + 0.25 + 0.75) / 4);
  EXPECT_THROW(evaluate_router({}, 0.5), Error);
}

std::string read_error(const std::string& lines) {
  llmserve::testing::TempFile f("router.jsonl");
  std::ofstream(f.path()) << lines;
  try {
    read_labeled_prompts(f.path());
  } catch (const Error& e) {
    const std::string m = e.what();
    return m.substr(m.find(':') + 1);  // after the path
  }
  return "";
}

TEST(LabeledPrompts, ReadsPromptsAndChatsAndNamesTheBadLine) {
  llmserve::testing::TempFile f("router.jsonl");
  std::ofstream(f.path()) << R"({"label": "easy", "prompt": "Hi"})" "\n\n"
                          << R"({"label": "hard", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], "max_tokens": 9})" "\n";
  const auto p = read_labeled_prompts(f.path());
  ASSERT_EQ(p.size(), 2u);
  EXPECT_FALSE(p[0].hard);
  EXPECT_EQ(p[0].text, "Hi");
  EXPECT_EQ(p[0].turns, 1);
  EXPECT_TRUE(p[1].hard);
  EXPECT_EQ(p[1].text, "a\nb");
  EXPECT_EQ(p[1].turns, 2);
  EXPECT_EQ(p[1].max_tokens, 9);

  EXPECT_EQ(read_error(""), " no prompts");
  EXPECT_EQ(read_error("{\"label\": \"easy\", \"prompt\": \"x\"}\nnot json\n"), "2: not a JSON object");
  EXPECT_EQ(read_error(R"({"label": "medium", "prompt": "x"})"), "1: \"label\" must be \"easy\" or \"hard\"");
  EXPECT_EQ(read_error(R"({"label": "easy"})"), "1: give \"prompt\" or \"messages\", one of them");
  EXPECT_EQ(read_error(R"({"label": "easy", "prompt": ""})"), "1: \"prompt\" must be a non-empty string");
  EXPECT_EQ(read_error(R"({"label": "easy", "messages": [{"content": "x"}]})"), "1: each message needs \"role\" and a string \"content\"");
  EXPECT_EQ(read_error(R"({"label": "easy", "prompt": "x", "max_tokens": 0})"), "1: \"max_tokens\" must be a positive integer");
}

TEST(LabeledPrompts, TheRepositorysSetHasBothLabels) {
  const auto p = read_labeled_prompts(LLMSERVE_ROUTER_PROMPTS);
  size_t hard = 0;
  for (const auto& x : p) hard += x.hard;
  EXPECT_GE(p.size(), 150u);
  EXPECT_GT(hard, p.size() / 4);
  EXPECT_LT(hard, p.size() * 3 / 4);
}

}  // namespace
}  // namespace llmserve::gateway
