#include "engine/next_token_stats.h"

#include <future>
#include <memory>

namespace llmserve::engine {

void request_next_token_stats(Engine& engine, int model, std::vector<int32_t> prompt, NextTokenStatsCallback done) {
  RequestParams p;
  p.model = model;
  p.prompt = std::move(prompt);
  p.sampling.temperature = 0.0f;
  p.max_new_tokens = 1;
  p.top_logprobs = 2;
  p.speculative = false;
  auto stats = std::make_shared<std::optional<NextTokenStats>>();
  engine.submit(std::move(p), [stats, done = std::move(done)](const RequestOutput& out) {
    if (!out.tokens.empty()) {
      const GeneratedToken& t = out.tokens.front();
      const double margin = t.top.size() > 1 ? t.top[0].logprob - t.top[1].logprob : 0.0;
      *stats = NextTokenStats{t.entropy, margin};
    }
    if (out.finished) done(out.finish_reason == FinishReason::Error ? std::nullopt : *stats);
  });
}

std::optional<NextTokenStats> next_token_stats(Engine& engine, int model, std::vector<int32_t> prompt) {
  auto result = std::make_shared<std::promise<std::optional<NextTokenStats>>>();
  std::future<std::optional<NextTokenStats>> answer = result->get_future();
  request_next_token_stats(engine, model, std::move(prompt), [result](std::optional<NextTokenStats> s) { result->set_value(s); });
  return answer.get();
}

}  // namespace llmserve::engine
